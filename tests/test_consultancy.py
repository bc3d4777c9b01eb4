"""The consultancy baseline (issue 30, bullet 3; Khan et al. 2024): the judge reads one
debater's case alone, each side in turn, scored like the debate, shown beside it."""
from __future__ import annotations

import pytest

from engine import ConfigError, Seat, run_debate
from engine import experiments as ex
from engine.protocols import arun_config, estimate, run_sync
from engine.reports import consultancy, leaderboard
from engine.reports.experiments import report

QUESTION, EXPECTED = "What is 17 multiplied by 24?", "408"
DEBATE = {"label": "d", "protocol": "debate", "model": "simulated",
          "options": {"max_rounds": 2}}


def test_the_judge_reads_the_consultant_alone(recording_model):
    pro = recording_model(["for it\nANSWER: 408", "still for it\nANSWER: 408"])
    con = recording_model(["never asked"])
    judge = recording_model(["1. VERDICT: proponent\n5. CONFIDENCE: 0.8\nANSWER: 408"])
    result = run_debate(QUESTION, proponent=Seat("pro", pro), opponent=Seat("con", con),
                        judge=Seat("judge", judge), max_rounds=2, consultancy=True,
                        expected=EXPECTED)
    assert [t.seat for t in result.turns] == ["pro", "pro", "judge"]
    assert result.consultant == "pro" and result.correct is True and not con.received
    judge_prompt = "\n".join(c for _, c in judge.received[-1])
    assert "Proponent: still for it" in judge_prompt and "Opponent:" not in judge_prompt
    mine = "Argue {side} {topic}, MARK-consultant"
    run_debate(QUESTION, proponent=Seat("pro", pro := recording_model(["x\nANSWER: 1"])),
               opponent="simulated", judge="simulated", max_rounds=1, consultancy=True,
               prompts={"consultant": mine})
    assert "MARK-consultant" in "\n".join(c for _, c in pro.received[0])
    assert estimate({**DEBATE, "options": {"max_rounds": 2, "consultancy": True}})[
        "calls"] == 3


def test_swapped_the_consultant_argues_against():
    result = run_sync(arun_config({**DEBATE, "options": {
        "max_rounds": 1, "consultancy": True, "swap_sides": True}}, QUESTION,
        expected=EXPECTED))
    assert result.sides["proponent"] == "against" and result.consultant == "proponent"
    assert [t.phase for t in result.turns] == ["counter-argument", "judge"]
    assert result.rounds[0].proponent_argument == "" and result.rounds[0].opponent_argument


@pytest.mark.parametrize("sides", ["one", "both"])
def test_planning_puts_each_side_of_the_consultancy_beside_the_debate(sides):
    plan = ex.plan({"questions": [{"question": QUESTION, "expected": EXPECTED}],
                    "baseline": "consultancy", "sides": sides, "configs": [DEBATE]})
    labels = [c["label"] for c in plan.configs]
    assert {"d · consultancy", "d · consultancy · sides swapped"} <= set(labels)
    assert ("d · sides swapped" in labels) == (sides == "both")
    by_label = {c["label"]: c["options"] for c in plan.configs}
    assert by_label["d · consultancy · sides swapped"] == {
        "max_rounds": 2, "consultancy": True, "swap_sides": True}
    assert [b["kind"] for b in plan.baselines] == ["consultancy"]


def test_a_baseline_that_is_not_known_is_refused():
    with pytest.raises(ConfigError, match="consultancy"):
        ex.plan({"questions": [{"question": QUESTION}], "baseline": "consult",
                 "configs": [DEBATE]})


def test_judge_accuracy_debate_against_consultancy_in_the_results(store):
    spec = {"name": "consult", "questions": [{"question": QUESTION, "expected": EXPECTED},
                                             {"question": "What is 15% of 80?",
                                              "expected": "12"}],
            "baseline": "consultancy", "configs": [DEBATE]}
    experiment_id = ex.create(store, ex.plan(spec, store))
    assert ex.run_experiment(store, experiment_id).status == "completed"
    result = report(store, experiment_id)
    table = consultancy.table(result.summary, ex.baselines_of(result.experiment["spec"]))
    assert table["configuration"].tolist() == ["d"]
    row = table.iloc[0]
    assert row["judge accuracy: debate"].endswith("n=2")
    assert row["judge accuracy: consultancy"].endswith("n=4")  # both sides, 2 questions
    assert row["consultancy, side in favour"].endswith("n=2")
    assert row["consultancy, side against"].endswith("n=2")
    # consultancy runs have one arguing seat: no pairwise outcome for the leaderboard
    found = leaderboard.read(store)
    assert found.games["simulated"]  # the debates' verdicts are there
    assert {g.run_id for g in found.games["simulated"]} <= set(
        result.runs[result.runs["label"] == "d"]["id"])
