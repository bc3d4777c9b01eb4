"""Equal compute (issue 12, bullet 6): beside any configuration of an experiment, the
self-consistency vote with the same number of model calls, in the plan, the runs and results,
the spec, the CLI and the Experiments page."""
from __future__ import annotations

from pathlib import Path

import pytest
from apptest_helpers import open_new_experiment
from streamlit.testing.v1 import AppTest

from engine import experiments as ex
from engine.cli.main import main
from engine.experiments.headline import comparisons, headline
from engine.experiments.planning import Plan
from engine.models import ConfigError
from engine.protocols.baselines import equal_compute
from engine.questions import DEFINITE
from engine.reports.experiments import SUMMARY_GROUPS

APP = str(Path(__file__).resolve().parent.parent / "app.py")
QUESTIONS = [{"question": q.text, "expected": q.expected} for q in DEFINITE[:3]]
DEBATE = {"protocol": "debate", "label": "debate"}
PANEL = {"protocol": "panel", "label": "panel"}
LONG = {"protocol": "debate", "label": "long debate", "options": {"max_rounds": 10}}


def by_label(plan: Plan) -> dict[str, dict]:
    return {row["label"]: row for row in plan.per_config}


# --------------------------------------------------------------------------- the plan
def test_plan_adds_each_configurations_baseline_beside_it_with_as_many_calls(store):
    plan = ex.plan({"questions": QUESTIONS, "configs": [DEBATE, PANEL,
                                                        {"protocol": "vote", "label": "v"}],
                    "baseline": "equal-compute"}, store)
    assert plan.labels == ["debate", "debate · equal-compute vote (7 samples)",
                           "panel", "panel · equal-compute vote (8 samples)", "v"]
    rows = by_label(plan)
    for pair in plan.baselines:
        assert pair["equal"] and pair["samples"] == pair["calls"]
        assert rows[pair["label"]]["calls_per_run"] == rows[pair["of"]]["calls_per_run"]
        assert rows[pair["label"]]["protocol"] == "vote"
        assert "equal-compute baseline of " + pair["of"] in rows[pair["label"]]["note"]
    assert [p["of"] for p in plan.baselines] == ["debate", "panel"]  # a vote is its own
    # stored and planned again: the baselines are paired, not added twice
    again = ex.plan(plan.spec(), store)
    assert again.labels == plan.labels and again.baselines == plan.baselines
    assert ex.baselines_of(plan.spec()) == plan.baselines


def test_without_the_key_nothing_is_added_and_the_plan_is_unchanged(store):
    plan = ex.plan({"questions": QUESTIONS, "configs": [DEBATE]}, store)
    assert plan.labels == ["debate"] and plan.baselines == []
    assert "baseline" not in plan.spec() and "note" not in plan.per_config[0]
    assert ex.plan({"questions": QUESTIONS, "configs": [DEBATE], "baseline": "none"},
                   store).labels == ["debate"]


def test_a_bad_baseline_value_is_refused_naming_the_allowed_one(store):
    with pytest.raises(ConfigError, match="baseline must be 'equal-compute', 'equal-tokens', 'consultancy', 'placebo', a list of them or none"):
        ex.plan({"questions": QUESTIONS, "configs": [DEBATE], "baseline": "equal"}, store)


def test_the_baseline_runs_on_the_configurations_models():
    one = equal_compute({"protocol": "panel", "model": "simulated?skill=0.9&seed=3"})
    assert one is not None
    voters = one.config["seats"]["voters"]
    assert len(voters) == 8 and {v["model"] for v in voters} == {"simulated?skill=0.9&seed=3"}
    assert len({v["name"] for v in voters}) == 8 and not any(v["persona"] for v in voters)
    mixed = equal_compute({"protocol": "debate", "seats": {
        "proponent": {"model": "simulated?seed=1", "temperature": 0.2},
        "opponent": {"model": "simulated?seed=1", "temperature": 0.2},
        "judge": {"model": "simulated?seed=2"}}})
    assert mixed is not None
    models = [v["model"] for v in mixed.config["seats"]["voters"]]
    # the seats taken in turn: the models in the proportions they hold seats
    assert models == ["simulated?seed=1", "simulated?seed=1", "simulated?seed=2"] * 2 + \
        ["simulated?seed=1"]
    assert mixed.config["seats"]["voters"][0]["temperature"] == 0.2


def test_when_the_vote_limit_binds_the_plan_says_it_is_not_equal_compute(store):
    plan = ex.plan({"questions": QUESTIONS[:1], "configs": [LONG],
                    "baseline": "equal-compute"}, store)
    (pair,) = plan.baselines
    assert (pair["calls"], pair["samples"], pair["equal"]) == (21, 18, False)
    assert pair["label"] == "long debate · equal-compute vote (18 samples, capped below 21 calls)"
    assert by_label(plan)[pair["label"]]["note"] == (
        "NOT equal compute: long debate makes 21 calls per run, but the vote's maximum is 18 "
        "voters, so this baseline makes 18")


def test_below_the_vote_minimum_the_baseline_is_raised_and_says_so(store):
    solo = {"protocol": "roundtable", "label": "solo", "options": {"rounds": 1},
            "seats": {"agents": [{"name": "alone"}]}}
    (pair,) = ex.plan({"questions": QUESTIONS[:1], "configs": [solo],
                       "baseline": "equal-compute"}, store).baselines
    assert (pair["calls"], pair["samples"], pair["equal"]) == (1, 2, False)
    assert pair["label"] == "solo · equal-compute vote (2 samples, raised above 1 call)"
    assert pair["note"] == ("NOT equal compute: solo makes 1 call per run, but the vote's "
                            "minimum is 2 voters, so this baseline makes 2")


def test_a_long_label_is_shortened_so_the_baseline_label_fits(store):
    plan = ex.plan({"questions": QUESTIONS[:1], "configs": [{**DEBATE, "label": "x" * 200}],
                    "baseline": "equal-compute"}, store)
    label = plan.labels[1]
    assert len(label) == 200 and label.endswith("…" + " · equal-compute vote (7 samples)")


# --------------------------------------------------------------------------- the runs
@pytest.mark.parametrize("config", [DEBATE, PANEL], ids=["debate", "panel"])
def test_the_baseline_makes_as_many_calls_as_its_configuration(store, config):
    plan = ex.plan({"questions": QUESTIONS, "configs": [config], "repeats": 2,
                    "baseline": "equal-compute"}, store)
    (pair,) = plan.baselines
    experiment_id = ex.create(store, plan)
    assert ex.run_experiment(store, experiment_id).status == "completed"
    result = ex.report(store, experiment_id)
    runs = result.runs
    made = {label: set(runs[runs["label"] == label]["calls"]) for label in result.labels}
    assert made == {pair["of"]: {pair["calls"]}, pair["label"]: {pair["calls"]}}
    per_run = dict(zip(result.summary["configuration"], result.summary["calls_per_run"],
                       strict=True))
    assert per_run == {pair["of"]: pair["calls"], pair["label"]: pair["calls"]}
    assert "calls_per_run" in SUMMARY_GROUPS["Accuracy and confidence levels"]
    assert comparisons(result) == [(pair["of"], pair["label"])]
    assert ex.compare(runs, pair["of"], pair["label"])["questions"] == len(QUESTIONS)


def test_the_results_say_when_the_baseline_is_capped(store):
    experiment_id = ex.create(store, ex.plan({"questions": QUESTIONS[:1], "configs": [LONG],
                                              "baseline": "equal-compute"}, store))
    assert ex.run_experiment(store, experiment_id).status == "completed"
    text = headline(ex.report(store, experiment_id)).text()
    assert "capped below 21 calls" in text
    assert "NOT equal compute: long debate makes 21 calls per run" in text


# --------------------------------------------------------------------------- CLI and page
def test_cli_flag_and_spec_key_add_the_baselines(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    spec = tmp_path / "spec.yaml"
    spec.write_text("questions: demo\nconfigs:\n  - {label: d, protocol: debate}\n"
                    "  - {label: p, protocol: panel}\n", encoding="utf-8")
    assert main(["experiment", "run", str(spec), "--db", url, "--dry-run"]) == 0
    assert "equal-compute" not in capsys.readouterr().out
    assert main(["experiment", "run", str(spec), "--db", url, "--dry-run",
                 "--equal-compute"]) == 0
    out = capsys.readouterr().out
    assert "4 questions x 4 configurations" in out and f"{4 * (7 + 7 + 8 + 8)} calls" in out
    assert "d · equal-compute vote (7 samples) (vote): 7 calls per run" in out
    assert "p · equal-compute vote (8 samples) (vote): 8 calls per run" in out
    spec.write_text(spec.read_text(encoding="utf-8") + "baseline: equal-compute\n",
                    encoding="utf-8")
    assert main(["experiment", "run", str(spec), "--db", url, "--quiet"]) == 0
    out = capsys.readouterr().out
    # Simulated runs: each sentence says so, and each group carries " (simulated)".
    sentences = [line.removeprefix("Simulated: ") for line in out.splitlines()
                 if line.startswith("Simulated: On ")]
    assert sentences[0].startswith("On 2 questions, d (simulated) was right more often than "
                                   "d · equal-compute vote (7 samples) (simulated)")
    assert "than p · equal-compute vote (8 samples) (simulated)" in sentences[1]
    assert len(sentences) == 3  # each with its own baseline, then d against p


def test_the_checkbox_adds_the_baselines_to_the_preflight(db_url):
    at = AppTest.from_file(APP, default_timeout=120.0)
    at.run()
    at.switch_page("pages/experiments.py").run()
    open_new_experiment(at)
    at.selectbox(key="exp-set").select("demo").run()
    at.multiselect(key="exp-configs").select("debate · defaults").run()
    assert next(m for m in at.metric if m.label == "Calls").value == str(4 * 7)
    at.checkbox(key="exp-equal-compute").check().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    assert at.checkbox(key="exp-equal-compute").label == (
        "Add an equal-compute vote beside each configuration")
    assert next(m for m in at.metric if m.label == "Calls").value == str(2 * 4 * 7)
    table = next(d.value for d in at.dataframe if "calls_per_run" in d.value.columns)
    assert list(table["label"]) == ["debate · defaults",
                                    "debate · defaults · equal-compute vote (7 samples)"]
    assert list(table["calls_per_run"]) == [7, 7]
