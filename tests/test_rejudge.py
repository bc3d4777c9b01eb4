"""The answers-only re-judge (DESIGN 2.13; Elasky and Nakasako 2026): every judged run of an
experiment judged again by its judge's model from the final positions alone, stored as
`LABEL · answers-only judge` with `source_run`, and reported beside the judge that read the
transcript and the consultancy baseline."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from engine import ConfigError, Seat, Store, run_debate
from engine import experiments as ex
from engine.experiments.rejudge import judged_config, rejudge
from engine.reports import controls
from engine.reports.controls import Share

SUMS = [(2, 3), (7, 8), (12, 30), (41, 1)]
QUESTIONS = [{"question": f"What is {a} plus {b}?", "expected": str(a + b)} for a, b in SUMS]
CONFIGS = [{"label": "council", "protocol": "council", "model": "simulated"},
           {"label": "debate", "protocol": "debate", "model": "simulated",
            "options": {"max_rounds": 1}},
           {"label": "society", "protocol": "society", "model": "simulated",
            "options": {"synthesize": True}},
           {"label": "panel", "protocol": "panel", "model": "simulated"},
           {"label": "vote", "protocol": "vote", "model": "simulated"}]


def _experiment(store, baseline="consultancy"):
    spec = {"name": "rejudge", "questions": QUESTIONS, "baseline": baseline,
            "configs": CONFIGS}
    experiment_id = ex.create(store, ex.plan(spec, store))
    assert ex.run_experiment(store, experiment_id).status == "completed"
    return experiment_id


def _prompt(detail):
    return "\n".join(m["content"] for t in detail["turns"] for m in t["messages"])


def test_each_judged_run_is_judged_again_from_its_final_positions_alone(store):
    experiment_id = _experiment(store)
    done = rejudge(store, experiment_id)
    # council, debate, a synthesising society and panel: 4 questions each; the vote and the
    # consultancy arms (8 runs) have no judge reading a transcript
    assert (done.made, done.failed, done.already, done.unjudged) == (16, 0, 0, 12)
    runs = store.runs(experiment_id=experiment_id, tag=controls.ANSWERS_ONLY_TAG)
    assert sorted(set(runs["label"])) == [f"{c} · answers-only judge"
                                          for c in ("council", "debate", "panel", "society")]
    for run_id in runs["id"]:
        detail = store.get(run_id)
        source = store.get(detail["metrics"]["source_run"])
        assert detail["label"] == f"{source['label']} · answers-only judge"
        assert detail["question"] == source["question"]
        assert detail["expected"] == source["expected"]
        assert len(detail["turns"]) == 1  # one call
        spec_of = {"council": "chair", "debate": "judge", "society": "synthesis",
                   "panel": "synthesis"}[source["label"]]
        judge = next(t for t in source["turns"] if t["phase"] == spec_of)
        assert detail["turns"][0]["model"] == judge["model"]
        assert detail["turns"][0]["seat"] == judge["seat"]
        prompt = _prompt(detail)
        # the final positions are there, the transcript is not
        for line in detail["config"]["options"]["answers"].splitlines():
            assert line in prompt
        carried = [t["reply"] for t in source["turns"] if t["phase"] != spec_of
                   and len(t["reply"] or "") > 40]
        assert carried and not any(reply in prompt for reply in carried)
    again = rejudge(store, experiment_id)  # nothing judged twice
    assert (again.made, again.already) == (0, 16)


def test_the_final_positions_of_a_debate_are_its_sides_and_answers(store, recording_model):
    pro = recording_model(["A long case in favour, with reasons.\nANSWER: 408"])
    con = recording_model(["A long case against, with reasons.\nANSWER: 400"])
    judge = recording_model(["1. VERDICT: proponent\n5. CONFIDENCE: 0.8\nANSWER: 408"])
    result = run_debate("What is 17 multiplied by 24?", proponent=Seat("pro", pro),
                        opponent=Seat("con", con), judge=Seat("judge", judge), max_rounds=1,
                        store=store, expected="408")
    config = judged_config(store.get(result.run_id))
    assert config["options"]["answers"] == "pro: argues for: 408\ncon: argues against: 400"
    assert config["seats"]["agent"][0]["name"] == "judge"
    assert config["label"] == "debate · answers-only judge"


def test_the_three_judge_accuracies_equal_a_hand_count():
    spec = {"baseline": "consultancy",
            "configs": [{"label": "d", "protocol": "debate", "model": "simulated"},
                        {"label": "d · consultancy", "protocol": "debate",
                         "model": "simulated", "options": {"consultancy": True}}]}
    frame = pd.DataFrame([
        {"id": f"r{q}", "label": "d", "q": q, "correct": right, "counted": True,
         "simulated": True} for q, right in enumerate([True, False, False, True])] + [
        {"id": f"k{q}", "label": "d · consultancy", "q": q, "correct": right,
         "counted": True, "simulated": True} for q, right in enumerate([False, False, True,
                                                                         False])])
    judged = pd.DataFrame([
        {"id": f"j{q}", "label": "d · answers-only judge", "status": "completed",
         "correct": right, "metrics": {"source_run": f"r{q}"}, "tokens_in": 100,
         "tokens_out": 20, "cost_usd": 0.01, "created_at": q}
        for q, right in enumerate([True, True, False, True])])
    [found] = controls.answers_only_from(frame, judged, "simulated", spec)
    assert found.transcript == Share(2, 4) and found.answers == Share(3, 4)
    assert math.isclose(found.difference, 0.25)
    assert found.low <= found.difference <= found.high
    assert found.consultancy == Share(1, 4)
    assert (found.runs, found.tokens) == (4, 480) and math.isclose(found.cost_usd, 0.04)
    row = controls.answers_only_rows([found]).iloc[0]
    assert row["from the transcript"] == "50% [15%–85%] n=4"
    assert row["from the answers alone"] == "75% [30%–95%] n=4"
    assert row["consultancy"] == "25% [5%–70%] n=4"
    assert row["cost"] == "$0.0400"
    assert "Simulated: Answers-only judge" in controls.answers_only_text([found])


def test_an_unknown_cost_is_said_unknown_never_zero():
    spec = {"configs": [{"label": "d", "protocol": "debate", "model": "simulated"}]}
    frame = pd.DataFrame([{"id": "r0", "label": "d", "q": 0, "correct": True,
                           "counted": True, "simulated": False}])
    judged = pd.DataFrame([{"id": "j0", "label": "d · answers-only judge",
                            "status": "completed", "correct": True,
                            "metrics": {"source_run": "r0"}, "tokens_in": 10,
                            "tokens_out": 2, "cost_usd": None, "created_at": 0}])
    [found] = controls.answers_only_from(frame, judged, "real", spec)
    assert found.cost_usd is None and found.consultancy is None
    assert controls.answers_only_rows([found]).iloc[0]["cost"] == "unknown"


def test_the_cli_rejudges_and_experiment_show_and_the_html_report_say_so(db_url, capsys):
    from engine.cli.main import main
    from engine.reports import share
    from engine.reports.experiments import report
    store = Store(db_url)
    experiment_id = _experiment(store)
    with pytest.raises(SystemExit):
        main(["rejudge", experiment_id, "--db", db_url])  # --answers-only is required
    capsys.readouterr()
    assert main(["rejudge", experiment_id, "--answers-only", "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "16 run(s) judged again from their final answers alone (0 failed)" in out
    assert main(["experiment", "show", experiment_id, "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "Simulated: Answers-only judge" in out
    line = next(x for x in out.splitlines() if x.startswith("  debate: transcript"))
    assert "consultancy" in line and "the re-judge made 4 calls" in line
    document = share.experiment_html(report(store, experiment_id), judged=store.runs(
        experiment_id=experiment_id, tag=controls.ANSWERS_ONLY_TAG))
    assert "The judge without the transcript" in document
    assert "from the answers alone" in document


def test_no_such_experiment_is_refused(store):
    with pytest.raises(ConfigError):
        rejudge(store, "nope")


def test_the_experiments_page_shows_the_judge_without_the_transcript(db_url):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest
    store = Store(db_url)
    experiment_id = _experiment(store)
    rejudge(store, experiment_id)
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"),
                           default_timeout=60)
    at.run()
    at.switch_page("pages/experiments.py")
    at.query_params["experiment"] = experiment_id
    at.session_state["exp-tab"] = "Which protocol when?"  # as a click on the tab
    at.run()
    assert not at.exception, at.exception
    assert "The judge without the transcript" in [s.value for s in at.subheader]
    table = next(d.value for d in at.dataframe
                 if "from the answers alone" in d.value.columns)
    expected = controls.answers_only_rows(controls.answers_only(store, experiment_id))
    assert table.to_dict("records") == expected.to_dict("records")
    assert table["configuration"].tolist() == ["council", "debate", "society", "panel"]
