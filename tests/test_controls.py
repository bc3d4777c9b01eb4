"""Is the deliberation worth it? The controls over an experiment's stored runs (DESIGN 2.13):
routing headroom (oracle, best fixed, the round-one entropy router, the unanimous-but-wrong
share of fixed questions) and dropped seats. Over scripted stores (runs written with the
answers and round votes a test chooses), each figure equals a hand count; no model is
called (the store is all they read)."""
from __future__ import annotations

import math

import pytest

from engine import ConfigError, Store, reports
from engine.cells import Cell
from engine.models import RunResult, Turn
from engine.reports import controls
from engine.store.experiments import add_experiment

QUESTIONS = [{"question": f"What is {n} - 0?", "expected": str(n)} for n in (4, 6, 8, 10)]
CONFIGS = [{"protocol": "vote", "label": "A"}, {"protocol": "society", "label": "B"},
           {"protocol": "society", "label": "C"}]
# (question, configuration) -> (final answer, round votes); every run real, repeat 0.
#            A                      B                                     C
RUNS = {
    (0, 0): ("4", [{"4": 3}]), (0, 1): ("5", [{"4": 3}, {"5": 2, "4": 1}]),
    (0, 2): ("4", [{"4": 3}, {"4": 3}]),
    (1, 0): ("7", [{"7": 2, "5": 1}]), (1, 1): ("6", [{"5": 2, "7": 1}, {"6": 3}]),
    (1, 2): ("7", [{"7": 3}, {"7": 3}]),
    (2, 0): ("9", [{"9": 2, "3": 1}]), (2, 1): ("8", [{"9": 3}, {"8": 3}]),
    (2, 2): ("9", [{"9": 3}, {"9": 3}]),
    (3, 0): ("11", [{"11": 3}]), (3, 1): ("11", [{"11": 3}, {"11": 3}]),
    (3, 2): ("10", [{"11": 3}, {"10": 3}]),
}


def save(store: Store, experiment_id: str, q: int, c: int, r: int, answer: str,
         votes: list | None = None, *, model: str = "openai:gpt-4o-mini",
         lost_calls: int = 0) -> str:
    """One completed run of cell (q, c, r) with its final answer, round votes and
    `lost_calls` degraded turns (calls that failed) among three."""
    item, config = QUESTIONS_OF[experiment_id][q], CONFIGS_OF[experiment_id][c]
    run_id = store.start_run(config["protocol"], item["question"], config={
        "protocol": config["protocol"], "seats": {"voters": [{"model": model}]}},
        tags=[Cell(q, c, r).tag], expected=item["expected"], experiment_id=experiment_id,
        label=config["label"])
    turns = [Turn(index=i, phase="vote", seat=f"s{i}", model=model,
                  status="degraded" if i < lost_calls else "ok",
                  error="timed out" if i < lost_calls else "",
                  simulated=model == "simulated") for i in range(3)]
    store.finish_run(run_id, RunResult(protocol=config["protocol"], expected=item["expected"],
                                       correct=None if item["expected"] is None
                                       else answer == item["expected"], turns=turns),
                     {"answer": answer, **({"round_votes": votes} if votes else {})})
    return run_id


QUESTIONS_OF: dict[str, list] = {}
CONFIGS_OF: dict[str, list] = {}


def experiment(store: Store, questions: list, configs: list) -> str:
    spec = {"name": "controls", "questions": questions, "repeats": 2, "configs": configs}
    experiment_id = add_experiment(store, "controls", spec, len(questions) * len(configs) * 2)
    QUESTIONS_OF[experiment_id], CONFIGS_OF[experiment_id] = questions, configs
    return experiment_id


@pytest.fixture
def scripted(store):
    experiment_id = experiment(store, QUESTIONS, CONFIGS)
    for (q, c), (answer, votes) in RUNS.items():
        save(store, experiment_id, q, c, 0, answer, votes)
    # a simulated run, right where every real A is wrong: pooled, it would move A and the
    # oracle; kept apart, it changes nothing of the real runs' headroom
    save(store, experiment_id, 1, 0, 1, "6", [{"6": 3}], model="simulated")
    return experiment_id


def test_headroom_equals_a_hand_count(store, scripted):
    found = reports.headroom(store, scripted)
    assert found.kind == "real" and not found.simulated
    assert found.configurations == ("A", "B", "C") and found.questions == (0, 1, 2, 3)
    # right: A on q0; B on q1, q2; C on q0, q3 -> 1/4, 2/4, 2/4: B (first of the tied)
    assert found.best_fixed.label == "B" and found.best_fixed.accuracy == 0.5
    assert float(found.best_fixed) == 0.5
    # per question the first configuration with the best score: A, B, B, C: all right
    assert dict(found.oracle.picks) == {0: "A", 1: "B", 2: "B", 3: "C"}
    assert found.oracle.accuracy == 1.0 and found.oracle.gain == 0.5
    # round one: q0 and q3 unanimous in every run; q1 and q2 split in some
    assert dict(found.buckets) == {0: "unanimous", 1: "split", 2: "split", 3: "unanimous"}
    # q0 learns from q3 (only C right): C, right. q3 learns from q0 (A and C right, B not):
    # A, wrong. q1 from q2 and q2 from q1 (only B right): B, right both times.
    assert dict(found.router.picks) == {0: "C", 1: "B", 2: "B", 3: "A"}
    assert found.router.accuracy == 0.75 and found.router.gain == 0.25
    # the paired differences are 1, 0, 0, 0: a resampled mean is a multiple of 1/4; it is 0
    # with chance (3/4)^4 = 0.32 (so the low end is 0), 0.75 or more with chance 0.051 and
    # 1 with chance 0.004 (so the high end is 0.5 or 0.75)
    assert found.router.low == 0.0 and found.router.high in (0.5, 0.75)
    assert found.oracle.low <= found.oracle.gain <= found.oracle.high
    # fixed: q1 by B (round one split), q2 by B (unanimous 9), q3 by C (unanimous 11)
    assert (found.unanimous_wrong.count, found.unanimous_wrong.n) == (2, 3)
    assert found.unanimous_wrong.low < 2 / 3 < found.unanimous_wrong.high


def test_the_router_interval_is_seeded_and_a_tie_is_no_gain(store, scripted):
    assert reports.headroom(store, scripted).router == reports.headroom(store, scripted).router
    assert controls._bootstrap([0.0, 0.0, 0.0]) == (0.0, 0.0)
    assert all(math.isnan(v) for v in controls._bootstrap([1.0]))


def test_simulated_runs_are_their_own_headroom_never_pooled(store, scripted):
    simulated = reports.headroom(store, scripted, "simulated")
    assert simulated.simulated and simulated.configurations == ("A",)
    assert "two or more configurations" in simulated.note
    assert controls.headroom_text(simulated).startswith("Simulated: ")
    with pytest.raises(ConfigError, match="real or simulated"):
        reports.headroom(store, scripted, "both")


def test_the_text_gives_each_arm_its_interval_and_the_papers_share(store, scripted):
    text = controls.headroom_text(reports.headroom(store, scripted))
    assert "best fixed configuration: B, 50.0%" in text
    assert "oracle (the best configuration per question): 100.0%, +50.0 points" in text
    assert "router by round-one vote entropy: 75.0%, +25.0 points over the best fixed [+0.0," \
        in text
    assert "of the 3 questions a deliberation fixed, 2 had a unanimous wrong round one: 67% " \
        "[21%–94%] n=3 (arXiv 2605.09618 reports 66%)" in text
    rows = controls.headroom_rows(reports.headroom(store, scripted))
    assert rows["accuracy"].tolist() == [0.5, 1.0, 0.75]


def test_a_question_one_configuration_did_not_score_is_left_out(store):
    experiment_id = experiment(store, QUESTIONS, CONFIGS[:2])
    for (q, c), (answer, votes) in RUNS.items():
        if c < 2 and (q, c) != (3, 1):
            save(store, experiment_id, q, c, 0, answer, votes)
    found = reports.headroom(store, experiment_id)
    assert found.questions == (0, 1, 2)  # B never ran q3
    # A right on q0 (1/3), B on q1, q2 (2/3): B; the oracle takes A on q0: 3/3
    assert found.best_fixed.label == "B" and found.oracle.accuracy == 1.0


# --------------------------------------------------------------------------- dropped seats
TEN = [{"question": f"What is {n} + 0?", "expected": str(n)} for n in range(10)]
VOTES = [{"protocol": "vote", "label": name} for name in ("A", "B", "C")]


@pytest.fixture
def dropping(store):
    """A: right on q0-q5 with every call back, wrong on q6-q9 where a call was lost.
    B: lost a call on q0 (right), right on q1-q5, wrong on q6-q9. C: lost none."""
    experiment_id = experiment(store, TEN, VOTES)
    for q in range(10):
        right = q < 6
        save(store, experiment_id, q, 0, 0, str(q) if right else "x", lost_calls=0 if right
             else 1)
        save(store, experiment_id, q, 1, 0, str(q) if right else "x", lost_calls=q == 0)
        save(store, experiment_id, q, 2, 0, str(q))
    return experiment_id


def test_dropped_seats_equal_a_hand_count_and_flag_a_difference(store, dropping):
    found = {d.label: d for d in controls.controls_of(store, dropping)[1]}
    assert set(found) == {"A", "B"}  # C lost no call
    a, b = found["A"], found["B"]
    # A: 6/10 over every question (Wilson 31-83%), 6/6 over the questions it kept whole
    assert (a.every.count, a.every.n, a.answered.count, a.answered.n, a.dropped) == (
        6, 10, 6, 6, 4)
    assert a.flagged and not a.every.low <= 1.0 <= a.every.high
    # B: 6/10, and 5/9 without q0: inside the interval, not flagged
    assert (b.every.count, b.every.n, b.answered.count, b.answered.n, b.dropped) == (
        6, 10, 5, 9, 1)
    assert not b.flagged
    text = controls.dropped_text(list(found.values()))
    assert "A: 4 run(s) lost a call; every question 60% [31%–83%] n=10, fully answered " \
        "100% [61%–100%] n=6 - FLAGGED" in text
    assert "B: 1 run(s) lost a call" in text and text.count("FLAGGED") == 1
    assert controls.dropped_rows(list(found.values()))["differ beyond the interval"].tolist() \
        == [True, False]


def test_one_read_gives_both_controls(store, dropping):
    room, dropped = controls.controls_of(store, dropping)
    assert room == reports.headroom(store, dropping)
    assert dropped == controls.controls_of(store, dropping)[1]


def test_no_lost_call_no_dropped_seats(store, scripted):
    assert controls.controls_of(store, scripted)[1] == []
    assert controls.dropped_text([]) == ""


# --------------------------------------------------------------------------- CLI and page
def test_experiment_show_prints_the_headroom_and_the_dropped_seats(db_url, capsys):
    from engine.cli.main import main
    store = Store(db_url)
    experiment_id = experiment(store, TEN, VOTES)
    for q in range(10):
        save(store, experiment_id, q, 0, 0, str(q) if q < 6 else "x", lost_calls=q >= 6)
        save(store, experiment_id, q, 1, 0, str(q) if q < 8 else "x")
    assert main(["experiment", "show", experiment_id, "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "Which protocol when? Over the 10 questions every configuration scored (real " \
        "runs):" in out
    # A right on q0-q5, B on q0-q7: B is best at 80%, and no question has A ahead of it
    assert "best fixed configuration: B, 80.0%" in out
    assert "oracle (the best configuration per question): 80.0%, +0.0 points" in out
    assert "A: 4 run(s) lost a call; every question 60% [31%–83%] n=10, fully answered " \
        "100% [61%–100%] n=6 - FLAGGED" in out


def test_the_experiments_page_shows_which_protocol_when(db_url):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest
    store = Store(db_url)
    experiment_id = experiment(store, QUESTIONS, CONFIGS)
    for (q, c), (answer, votes) in RUNS.items():
        save(store, experiment_id, q, c, 0, answer, votes, lost_calls=(q, c) == (0, 0))
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"),
                           default_timeout=60)
    at.run()
    at.switch_page("pages/experiments.py")
    at.query_params["experiment"] = experiment_id
    at.session_state["exp-tab"] = "Which protocol when?"  # as a click on the tab
    at.run()
    assert not at.exception, at.exception
    assert [s.value for s in at.subheader][-2:] == ["Which protocol when?", "Dropped seats"]
    table = next(d.value for d in at.dataframe if "arm" in d.value.columns)
    assert table["accuracy"].tolist() == [0.5, 1.0, 0.75]
    assert table["arm"].tolist()[0] == "best fixed: B"
    assert table["gain over best fixed (points)"].tolist() == ["–", "+50.0", "+25.0"]
    assert any(c.value.startswith("Of the 3 questions a deliberation fixed")  # md-escaped
               and "2 had a unanimous wrong round one" in c.value for c in at.caption)
    dropped = next(d.value for d in at.dataframe if "configuration" in d.value.columns
                   and "runs that lost a call" in d.value.columns)
    # A lost a call on q0, the one question it had right: 1/4 over every question (Wilson
    # 4.6-70%), 0/3 over the others: 0 lies below the interval, flagged
    assert dropped.to_dict("records") == [{
        "configuration": "A", "runs that lost a call": 1,
        "accuracy, every question": "25% [5%–70%] n=4",
        "accuracy, questions every seat answered": "0% [0%–56%] n=3",
        "differ beyond the interval": True}]


def test_an_unscored_experiment_shows_no_controls(store):
    open_ended = [{"question": "Which plan?", "expected": None}]
    experiment_id = experiment(store, open_ended, VOTES)
    for c in range(3):
        save(store, experiment_id, 0, c, 0, "Plan A", lost_calls=1)
    assert controls.controls_text(store, experiment_id) == ""
    assert reports.headroom(store, experiment_id).note.startswith("headroom needs two")
