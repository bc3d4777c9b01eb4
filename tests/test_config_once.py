"""A run's configuration is resolved once, its call policy is one record, and one function
says whether a model is simulated.

The spies count `seats_from_config` (the step that seats every slot and checks the options)
per Start: the Run page's rerun in which Start is pressed, and `TaskRunner.start_run`; the
two greps read the engine's and the pages' syntax trees, so a second spelling of the policy's
keys or of the simulated rule fails them.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from apptest_helpers import poll
from streamlit.testing.v1 import AppTest

import engine.protocols
from engine import Store, run_vote
from engine.config import RunConfig
from engine.llm.policy import FIELDS, CallPolicy
from engine.models import is_simulated
from engine.protocols import arun_config, estimate, resolve_config, run_sync
from engine.services.tasks import TaskRunner
from engine.views.blocks import simulated_suffix

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
SOURCES = sorted([*ROOT.glob("engine/**/*.py"), *ROOT.glob("pages/*.py"), ROOT / "app.py"])
POLICY_MODULE = ROOT / "engine" / "llm" / "policy.py"
MODELS_MODULE = ROOT / "engine" / "models.py"
QUESTION = "What is 6 x 7?"


@pytest.fixture
def spied(monkeypatch):
    """Counts every resolution of a configuration's seats (`seats_from_config`)."""
    calls: list[str] = []
    real = engine.protocols.seats_from_config

    def spy(spec, config):
        calls.append(spec.name)
        return real(spec, config)
    monkeypatch.setattr(engine.protocols, "seats_from_config", spy)
    return calls


def test_a_start_resolves_its_configuration_once(store, spied):
    runner = TaskRunner(store)
    config = RunConfig.parse({"protocol": "panel", "retries": 1, "concurrency": 2})
    run_id = runner.start_run(config, QUESTION, tags=("app",))
    assert runner.task(run_id).done.wait(120)
    assert spied == ["panel"]  # the estimate, the stored row and the run took one value
    run = store.get(run_id)
    assert run["status"] == "completed" and runner.task(run_id).estimated_calls == len(
        run["turns"])
    assert (run["config"]["retries"], run["config"]["concurrency"]) == (1, 2)
    assert [len(run["config"]["seats"][slot]) for slot in ("debaters", "critic", "judge")] \
        == [3, 1, 1]


def test_a_resolved_configuration_is_not_resolved_again(store, spied):
    resolved = resolve_config({"protocol": "vote", "retries": 0})
    assert spied == ["vote"]
    assert resolve_config(resolved) is resolved
    assert estimate(resolved)["calls"] == 3
    result = run_sync(arun_config(resolved, QUESTION, store=store))
    assert spied == ["vote"] and result.run_id
    assert store.get(result.run_id)["status"] == "completed"


def test_the_run_pages_start_resolves_the_configuration_once(db_url, spied, monkeypatch):
    started: list[list[str]] = []  # the resolutions made when the run has started
    start = TaskRunner.start_run

    def start_run(self, *args, **kwargs):
        run_id = start(self, *args, **kwargs)
        started.append(list(spied))
        return run_id
    monkeypatch.setattr(TaskRunner, "start_run", start_run)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/run.py").run()
    at.selectbox(key="run-0-protocol").select("vote").run()
    at.text_input(key="run-0-model").input("simulated").run()
    at.text_area(key="run-0-question").input(QUESTION).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    spied.clear()
    at.button(key="run-start").click()
    at.run()
    assert not at.exception, at.exception
    run_id = at.session_state["run_page_run"]
    # one for the form's check, its preflight and Start (the page then shows the run, whose
    # call policy line reads the stored configuration's endpoints)
    assert started == [["vote"]], started
    poll(at, lambda a: bool(a.success) or bool(a.warning))
    assert Store(db_url).get(run_id)["status"] == "completed"


def _constants(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_the_call_policy_keys_are_spelled_in_one_module():
    """Every other module reads the policy through `CallPolicy` (its fields, its `given()`,
    its form words): a key written as text elsewhere is a second copy of the rule."""
    assert FIELDS == ("timeout_per_call", "retries", "concurrency")
    found = [f"{path.relative_to(ROOT)}:{line}" for path in SOURCES if path != POLICY_MODULE
             for line, value in _constants(path) if value == "timeout_per_call"]
    assert found == []
    assert CallPolicy.read({"retries": 3, "label": "x"}).given() == {"retries": 3}
    assert RunConfig.parse({"protocol": "vote", "timeout_per_call": 9}).policy == \
        CallPolicy(timeout_per_call=9)


def _simulated_rules(path: Path) -> list[str]:
    """Places in `path` that decide by themselves whether a model spec is simulated: a
    `startswith("simulated...")`, a comparison of a parsed spec's provider with
    "simulated", or a second `is_simulated(spec)`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parses = "parse_spec" in path.read_text(encoding="utf-8")
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "startswith" and any(
                    isinstance(a, ast.Constant) and str(a.value).lower().startswith("simulated")
                    for a in node.args):
            out.append(f"{path.relative_to(ROOT)}:{node.lineno} startswith")
        if parses and isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value == "simulated"
                for c in [node.left, *node.comparators]):
            out.append(f"{path.relative_to(ROOT)}:{node.lineno} compares a provider")
        if isinstance(node, ast.FunctionDef) and "simulated" in node.name and \
                node.args.args and node.args.args[0].arg in ("spec", "model"):
            out.append(f"{path.relative_to(ROOT)}:{node.lineno} def {node.name}")
    return out


def test_one_function_says_whether_a_model_is_simulated():
    found = [rule for path in SOURCES for rule in _simulated_rules(path)]
    assert found == [f"engine/models.py:{_line_of_is_simulated()} def is_simulated"], found
    for spec, simulated in (("simulated", True), ("Simulated?seed=3", True),
                            (" simulated:anything", True), ("SIMULATED?latency=0", True),
                            ("openai:simulated", False), ("simulatedx", False),
                            ("ollama:llama3", False)):
        assert is_simulated(spec) is simulated, spec


def _line_of_is_simulated() -> int:
    tree = ast.parse(MODELS_MODULE.read_text(encoding="utf-8"))
    return next(n.lineno for n in ast.walk(tree)
                if isinstance(n, ast.FunctionDef) and n.name == "is_simulated")


def test_a_spec_the_model_reads_as_simulated_is_stored_as_simulated(store):
    """`get_model` reads the provider in any case: the run's flag and its seats' cost follow
    the same rule (a capitalised spec was once played by the simulated model and stored as
    a real run)."""
    result = run_vote(QUESTION, voters=["Simulated?seed=2"] * 3, store=store)
    run = store.get(result.run_id)
    assert run["status"] == "completed" and run["simulated"]
    assert all(turn["cost_usd"] == 0 for turn in run["turns"])
    assert simulated_suffix(run) == " (simulated)"  # what the CLI and the pages say of it
    going = store.start_run("vote", QUESTION, config=run["config"])
    assert store.runs(ids=[going]).iloc[0]["simulated"]  # flagged from its start


def test_the_cli_an_experiment_cell_and_a_start_store_one_description(store, tmp_path,
                                                                        capsys):
    """A run's row keeps `Resolved.stored()` whoever starts it: the CLI (its policy flags
    among it), an experiment's cell, and the Run page's Start."""
    from engine import experiments as ex
    from engine.cli.main import main
    config = {"protocol": "panel", "label": "p", "retries": 1}
    want = resolve_config(config).stored().stored()
    runner = TaskRunner(store)
    started = runner.start_run(RunConfig.parse(config), QUESTION)
    assert runner.task(started).done.wait(120)
    experiment = ex.create(store, {"questions": [QUESTION], "configs": [config]})
    ex.run_experiment(store, experiment)
    assert main(["run", "panel", QUESTION, "--label", "p", "--retries", "1", "--db",
                 store.url, "--json"]) == 0
    capsys.readouterr()
    rows = store.runs(label="p")
    assert len(rows) == 3
    for run_id in rows["id"]:
        assert store.get(run_id)["config"] == want, run_id


def test_a_fork_that_drops_an_agent_resolves_its_configuration_once(store, spied):
    from engine.services import fork as forking
    config = {"protocol": "society", "options": {"rounds": 2},
              "seats": {"agents": [{"name": f"agent {n}"} for n in (1, 2, 3)]}}
    original = run_sync(arun_config(config, QUESTION, store=store)).run_id
    spied.clear()
    planned = forking.plan(store.get(original), 2, drop="agent 3")
    assert spied == ["society"]  # dropped, then resolved and checked: once
    assert [seat.name for seat in planned.config.config.seats["agents"]] == ["agent 1",
                                                                              "agent 2"]


def test_an_experiment_plan_resolves_each_configuration_once(store, spied):
    from engine import experiments as ex
    from engine.experiments.planning import time_preflight
    checked = ex.plan({"questions": [QUESTION, "What is 2 + 2?"], "repeats": 2,
                       "configs": [{"protocol": "panel", "label": "a"},
                                   {"protocol": "society", "label": "b"}]}, store)
    assert sorted(spied) == ["panel", "society"]  # checked, estimated and priced: once
    assert time_preflight(checked, store)["seconds"] is not None
    assert checked.preflight()["runs"] == 8
    assert len(spied) == 2  # the time estimate and the notes take its resolved configurations


def test_a_baseline_resolves_its_configuration_once(spied):
    from engine.protocols.baselines import equal_compute, equal_tokens
    config = {"protocol": "panel", "label": "p"}
    paired = equal_compute(config)
    assert spied == ["panel"]  # estimated and seated from one value
    assert paired is not None and paired.samples == paired.calls == 8
    spied.clear()
    tokens = equal_tokens(config, tokens=3000.0, runs=4)
    assert spied == ["panel"]
    assert tokens is not None and len(tokens.config["seats"]["voters"]) == tokens.samples


def test_a_library_import_checks_each_configuration_once(store, spied):
    from engine.services import library
    text = ("configurations:\n  - name: brief vote\n    protocol: vote\n"
            "  - name: brief panel\n    protocol: panel\n    retries: 1\n")
    assert library.import_yaml(store, text)["config"] == 2
    assert sorted(spied) == ["panel", "vote"]
    saved = {c["label"]: c["config"] for c in store.saved_configs()}
    assert saved["brief panel"]["retries"] == 1 and saved["brief vote"]["protocol"] == "vote"
