"""The llm-council-governance preset (issue 30, bullet 2; re-pointed by issue 45 at the
README's MMLU-Pro Math table, commit 9791db8): the six structures Parley has on the 150
MMLU-Pro math questions they ran, the society's synthesis option, and their published figures
overlaid, labelled as theirs."""
from __future__ import annotations

import json
from pathlib import Path

from engine import experiments as ex
from engine.protocols import estimate
from engine.questions.sets import question_set
from engine.reports import vega
from engine.reports.experiments import report
from engine.reports.references import GOVERNANCE, GOVERNANCE_MMLU_PRO, published
from engine.yamlfile import load_mapping

PRESET = Path(__file__).resolve().parent.parent / "presets" / "llm-council-governance.yaml"
LABELS = ["deliberate-vote", "majority-vote", "best-single", "self-consistency",
          "deliberate-synthesize", "rank-synthesize"]


def spec(model: str | None = None) -> dict:
    loaded = load_mapping(str(PRESET))
    if model:  # any model: every configuration's model replaced
        loaded["configs"] = [{**c, "model": model} for c in loaded["configs"]]
    return loaded


def run_tiny(store, questions: int):
    """The preset on its first `questions` questions, run on the simulated model; its report
    of the simulated runs."""
    plan = ex.plan(spec())
    plan = ex.planning.Plan(**{**plan.__dict__, "questions": plan.questions[:questions],
                               "per_config": plan.per_config})
    experiment_id = ex.create(store, plan)
    assert ex.run_experiment(store, experiment_id).status == "completed"
    return report(store, experiment_id, "simulated")


def test_the_preset_plans_the_six_structures_on_their_mmlu_pro_math_questions():
    plan = ex.plan(spec())
    assert plan.labels == LABELS and plan.source == "bundled:mmlu-pro-math"
    assert len(plan.questions) == 150 and plan.reference == "llm-council-governance-mmlu-pro"
    assert [c["protocol"] for c in plan.configs] == ["society", "vote", "single", "vote",
                                                     "society", "council"]
    assert plan.configs[4]["options"] == {"rounds": 2, "synthesize": True}
    assert [s["temperature"] for s in plan.configs[3]["seats"]["voters"]] == [0.7] * 9
    assert plan.spec()["reference"] == "llm-council-governance-mmlu-pro"
    assert ex.planning.plan_of(plan.spec()).spec() == plan.spec()  # read back whole
    other = ex.plan(spec(model="openai:my-model?base_url=http://127.0.0.1:9/v1"))
    assert {c["model"] for c in other.configs} == {"openai:my-model?base_url=http://127.0.0.1:9/v1"}


def test_the_mmlu_pro_math_set_is_theirs_asked_their_way():
    """The first 150 math questions of MMLU-Pro's test split (question_id 7687-7836), each
    with its lettered options and their request for one letter; the answer is the letter."""
    items = question_set("mmlu-pro-math")
    assert len(items) == 150 and len({i.question for i in items}) == 150
    first = items[0]
    assert first.question.startswith("Statement 1 | A ring homomorphism is one to one")
    assert "\n\nA. True, False\n" in first.question and first.expected == "H"
    assert first.question.endswith("Your answer should be a single letter (A through J).")
    assert all(i.expected in "ABCDEFGHIJ" and f"\n{i.expected}. " in i.question for i in items)
    assert "MIT" in first.licence and "2406.01574" in first.source


def test_the_published_figures_keep_their_source_and_are_never_parleys():
    assert [(p.configuration, p.accuracy) for p in GOVERNANCE_MMLU_PRO] == [
        ("deliberate-vote", 0.809), ("majority-vote", 0.768),
        ("deliberate-synthesize", 0.754), ("best-single", 0.717),
        ("rank-synthesize", 0.707), ("self-consistency", 0.689)]
    assert all("andybhall/llm-council-governance" in p.citation and "9791db8" in p.citation
               and "1,004 valid trials" in p.model and p.label.startswith("published (theirs)")
               for p in GOVERNANCE_MMLU_PRO)
    # the GSM8K pilot's figures stay for the experiments stored with them
    assert [(p.configuration, p.accuracy) for p in GOVERNANCE] == [
        ("majority-vote", 0.817), ("deliberate-vote", 0.795),
        ("deliberate-synthesize", 0.783), ("rank-synthesize", 0.746)]
    assert published({"configs": [{"label": "majority-vote"}]}) == []  # no reference named
    assert published({"reference": "llm-council-governance-mmlu-pro", "configs": [
        {"label": "majority-vote (simulated)"}, {"label": "mine"}]}) == [GOVERNANCE_MMLU_PRO[1]]


def test_society_then_synthesis_answers_by_the_synthesizer(recording_model):
    from engine import Seat, run_society
    agents = [Seat(f"a{i}", recording_model([
        "\\boxed{7}", "\\boxed{7}", "Both said 7.\nANSWER: 8"] if i == 0 else
        ["\\boxed{7}", "\\boxed{7}"])) for i in range(2)]
    result = run_society("q?", agents=agents, rounds=2, synthesize=True, expected="8")
    assert result.tallies[-1].winner == "7"  # the vote would say 7 ...
    assert result.answer == "8" and result.correct is True  # ... the synthesis decides
    assert [t.phase for t in result.turns][-1] == "synthesis" and result.synthesizer == "a0"
    assert estimate({"protocol": "society", "options": {"synthesize": True}})["calls"] == 7


def test_a_failed_synthesis_leaves_the_run_unanswered(recording_model):
    from engine import Seat, run_society
    agents = [Seat("a0", recording_model(["\\boxed{7}", RuntimeError("down")])),
              Seat("a1", recording_model(["\\boxed{7}"]))]
    result = run_society("q?", agents=agents, rounds=1, synthesize=True, expected="7",
                         retries=0)
    assert result.answer == ""
    assert result.correct is False and result.unanswered  # DESIGN 4: no answer is wrong
    assert any("synthesizer a0 failed" in w for w in result.warnings)


def test_the_preset_runs_on_the_simulated_model_and_the_chart_overlays_theirs(store):
    result = run_tiny(store, 3)
    summary = result.summary.set_index("configuration")
    assert list(summary["runs"]) == [3] * 6 and list(summary["scored"]) == [3] * 6
    theirs = published(result.experiment["spec"])
    assert len(theirs) == 6
    chart = vega.accuracy(result.summary, "Accuracy", theirs)
    text = json.dumps(chart)
    for p in GOVERNANCE_MMLU_PRO:
        assert f"published (theirs): {p.structure} {p.accuracy * 100:.1f}%" in text
    ours = [layer for layer in chart["layer"] if "data" not in layer]
    assert all("published" not in json.dumps(layer) for layer in ours)  # never mixed in
    assert "andybhall/llm-council-governance" in text


def test_the_shared_html_and_experiment_show_carry_the_published_figures(store, capsys):
    # The page's diamonds, beside the accuracy wherever an experiment's results go: the
    # shared HTML (its plotly chart has a trace of theirs, named so, and the caption says
    # whose) and `experiment show`; an experiment naming no reference shows none.
    from engine.cli.main import main
    from engine.reports import share
    from engine.store.experiments import add_experiment
    result = run_tiny(store, 2)
    experiment_id = result.experiment["id"]
    figure = ex.accuracy_figure(result.summary, "Accuracy", published(result.experiment["spec"]))
    theirs = [trace for trace in figure.data if trace.name == "published (theirs)"]
    by_label = {p.configuration: p.accuracy for p in GOVERNANCE_MMLU_PRO}
    assert len(theirs) == 1 and sorted(theirs[0].x) == sorted(LABELS)  # over their own bars
    assert dict(zip(theirs[0].x, theirs[0].y, strict=True)) == by_label
    assert [trace.name for trace in figure.data] == ["this experiment", "published (theirs)"]
    html = share.experiment_html(result)
    assert "Diamonds: published figures, theirs, not Parley&#x27;s runs (andybhall/" in html
    for p in GOVERNANCE_MMLU_PRO:
        assert f"{p.accuracy * 100:.1f}%" in html
    assert main(["experiment", "show", experiment_id, "--db", store.url]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("Published figures, theirs"))
    assert "andybhall/llm-council-governance" in line and "1,004 valid trials" in line
    assert all(f"{p.structure} {p.accuracy * 100:.1f}%" in line for p in GOVERNANCE_MMLU_PRO)
    assert out.index("Published figures") > out.index("majority-vote")  # after the accuracy
    plain = {k: v for k, v in result.experiment["spec"].items() if k != "reference"}
    other = add_experiment(store, "no reference", plain, 8)
    assert main(["experiment", "show", other, "--db", store.url]) == 0
    assert "Published figures" not in capsys.readouterr().out
    assert not [t for t in ex.accuracy_figure(result.summary, "A").data
                if t.name == "published (theirs)"]
