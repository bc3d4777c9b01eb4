"""The paper presets under presets/: each plans to the paper's configurations and call count,
names its paper in its header, runs every seat on the simulated model by default, and runs
end to end through the CLI on the simulated model and, with `--model` and `--base-url`, on
the loopback OpenAI-compatible stub (every planned call reaching it, with the key)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from openai_stub import SimulatedOpenAI, loopback_only

from engine import Store
from engine import experiments as ex
from engine.cli.main import main as cli_main
from engine.experiments.planning import override_model, plan
from engine.llm.lines import PROBE_GRAMMAR
from engine.protocols import resolve_config
from engine.yamlfile import load_mapping

PRESETS = Path(__file__).resolve().parent.parent / "presets"
DU = ["single", "reflection", "vote-3", "society-3x2"]
EXPECTED = {  # preset -> (arXiv id, question set, {label: (protocol, calls per run)}, calls)
    "du2023-arithmetic": ("2305.14325", "arithmetic", dict(zip(DU, [
        ("single", 1), ("single", 2), ("society", 3), ("society", 6)], strict=True)), 1_200),
    "du2023-gsm8k": ("2305.14325", "gsm8k-100", dict(zip(DU, [
        ("single", 1), ("single", 2), ("society", 3), ("society", 6)], strict=True)), 1_200),
    "debate-or-vote": ("2508.17536", "gsm8k-100", {"society-5x5": ("society", 25)}, 2_500),
    "llm-council-governance": ("andybhall/llm-council-governance", "mmlu-pro-math", {
        "deliberate-vote": ("society", 8), "majority-vote": ("vote", 4),
        "best-single": ("single", 1), "self-consistency": ("vote", 9),
        "deliberate-synthesize": ("society", 9), "rank-synthesize": ("council", 9)}, 6_000),
    "cost-of-consensus": ("2605.00914", "gsm8k-100", {
        "debate-3x3": ("society", 9), "debate-3x3 · placebo": ("society", 9),
        "single": ("single", 1), "vote-3": ("vote", 3)}, 2_200),
}
SIZES = {"mmlu-pro-math": 150}  # questions in a preset's set, when not 100
LIMIT = 3


def load(name: str) -> dict:
    return load_mapping(str(PRESETS / f"{name}.yaml"))


def test_the_presets_are_the_ones_listed():
    assert sorted(p.stem for p in PRESETS.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_preset_plans_the_papers_configurations(name):
    arxiv, questions, configs, calls = EXPECTED[name]
    header = (PRESETS / f"{name}.yaml").read_text(encoding="utf-8").split("\nname:")[0]
    assert (arxiv if "/" in arxiv else f"arXiv {arxiv}") in header and all(label in header for label in configs)
    spec = load(name)
    assert spec["questions"] == questions
    checked = plan(spec)
    assert len(checked.questions) == SIZES.get(questions, 100)
    assert checked.source == f"bundled:{questions}"
    assert {p["label"]: (p["protocol"], p["calls_per_run"]) for p in checked.per_config} \
        == configs
    assert checked.calls == calls
    for config in checked.configs:  # runs offline by default: every seat simulated
        seats = resolve_config(config).config.seats
        assert seats and all(s.model == "simulated" for group in seats.values()
                             for s in group)


def test_du_table_one_counts_every_call():
    assert plan(load("du2023-arithmetic")).calls == 100 * (1 + 2 + 3 + 6)


def test_override_puts_every_seat_of_every_configuration_on_the_model():
    spec = {"questions": ["q"], "configs": [
        *load("du2023-arithmetic")["configs"],
        {"protocol": "debate", "label": "judged", "base_url": "http://elsewhere:1/v1",
         "seats": {"judge": {"name": "J", "model": "simulated?skill=1", "persona": "fair"}}}]}
    url = "http://127.0.0.1:9/v1"
    changed = override_model(spec, "openai:m", url)
    assert spec["configs"][-1]["seats"]["judge"]["model"] == "simulated?skill=1"  # a copy
    for config in changed["configs"]:
        seats = [s for group in resolve_config(config).config.seats.values() for s in group]
        assert seats and all(s.model == f"openai:m?base_url={url}" for s in seats)
    judge = resolve_config(changed["configs"][-1]).config.seats["judge"][0]
    assert (judge.name, judge.persona) == ("J", "fair")
    assert [c["label"] for c in changed["configs"]] == [*DU, "judged"]


def experiment_of(db: str) -> tuple[str, object]:
    store = Store(db)
    experiment_id = ex.list_experiments(store)["id"].iloc[0]
    return experiment_id, ex.report(store, experiment_id, "both")


# the stub server answers from the prompt's words alone: it writes no FINAL RANKING block and
# no ANSWER line, so a council's chairman and a synthesis give no answer to score there
UNSCORED_ON_STUB = {"llm-council-governance": 2}


def assert_summary(result, name: str, simulated: bool) -> None:
    """One row per configuration, every planned run done, an accuracy over LIMIT runs."""
    configs = EXPECTED[name][2]
    if not simulated and name in UNSCORED_ON_STUB:
        configs = dict(list(configs.items())[:-UNSCORED_ON_STUB[name]])
        result.summary = result.summary.head(len(configs))
    summary = result.summary
    suffix = " (simulated)" if simulated else ""
    assert list(summary["configuration"]) == [label + suffix for label in configs]
    assert list(summary["runs"]) == [LIMIT] * len(configs)
    assert list(summary["scored"]) == [LIMIT] * len(configs)
    assert all(text.endswith(f"n={LIMIT}") for text in summary["accuracy [95% CI] n"])
    assert summary["accuracy"].between(0, 1).all()
    assert list(summary["simulated"]) == ["all" if simulated else ""] * len(configs)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_preset_runs_end_to_end_on_the_simulated_model(name, tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 'p.db'}"
    argv = ["experiment", "run", str(PRESETS / f"{name}.yaml"), "--limit", str(LIMIT),
            "--quiet", "--db", db]
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert f"{LIMIT} questions x {len(EXPECTED[name][2])} configurations" in out
    _, result = experiment_of(db)
    assert_summary(result, name, simulated=True)
    spec = result.experiment["spec"]
    assert spec["source"] == f"bundled:{EXPECTED[name][1]}"  # its published numbers apply
    assert spec["name"].endswith(f"(first {LIMIT} questions)")


@pytest.fixture
def stub(monkeypatch):
    loopback_only(monkeypatch, "PARLEY_ENDPOINTS", "OPENAI_BASE_URL")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    with SimulatedOpenAI() as server:
        yield server


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_preset_runs_end_to_end_on_an_openai_compatible_server(name, stub, tmp_path,
                                                                     capsys):
    db = f"sqlite:///{tmp_path / 'p.db'}"
    base = ["experiment", "run", str(PRESETS / f"{name}.yaml"), "--limit", str(LIMIT),
            "--model", "openai:stub", "--base-url", stub.base_url, "--db", db]
    assert cli_main([*base, "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert f"every seat of every configuration: openai:stub at {stub.base_url}" in dry
    assert stub.requests == []  # a dry run calls nothing
    assert cli_main([*base, "--quiet"]) == 0
    planned = LIMIT * sum(calls for _, calls in EXPECTED[name][2].values())
    # every planned call, besides the one grammar probe of a protocol read by line formats
    called = [r for r in stub.requests if r["body"].get("grammar") != PROBE_GRAMMAR]
    assert len(called) == planned and len(stub.requests) - len(called) <= 1
    assert {r["body"]["model"] for r in stub.requests} == {"stub"}
    # the operator typed the base URL, so it is registered and the key goes to it (as `run`)
    assert {r["auth"] for r in stub.requests} == {"Bearer sk-test-not-a-key"}
    experiment_id, result = experiment_of(db)
    assert_summary(result, name, simulated=False)
    stored = Store(db).runs()
    assert len(stored) == LIMIT * len(EXPECTED[name][2]) and not stored["simulated"].any()
    assert json.dumps(result.experiment["spec"]).count("sk-test") == 0


@pytest.mark.parametrize("argv, words", [
    (["--limit", "0"], "--limit must be a whole number of at least 1"),
    (["--model", " "], "the model"),
])
def test_bad_overrides_are_refused_in_one_line_before_anything_is_stored(argv, words, tmp_path,
                                                                         capsys):
    db = f"sqlite:///{tmp_path / 'p.db'}"
    spec = str(PRESETS / "du2023-arithmetic.yaml")
    assert cli_main(["experiment", "run", spec, *argv, "--db", db]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err
    assert ex.list_experiments(Store(db)).empty


@pytest.mark.parametrize("questions", ["inline", "file"])
def test_limit_takes_the_first_questions_of_a_list_or_a_file(questions, tmp_path, capsys):
    rows = [{"question": f"What is {n}+1?", "expected": str(n + 1)} for n in range(5)]
    spec = {"configs": [{"label": "one", "protocol": "single"}]}
    if questions == "inline":
        spec["questions"] = rows
    else:
        (tmp_path / "qs.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        spec["questions_file"] = "qs.jsonl"
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(spec))  # JSON is YAML
    db = f"sqlite:///{tmp_path / 'p.db'}"
    assert cli_main(["experiment", "run", str(path), "--limit", "2", "--quiet", "--db", db]) == 0
    _, result = experiment_of(db)
    assert [q["question"] for q in result.experiment["spec"]["questions"]] == [
        "What is 0+1?", "What is 1+1?"]
