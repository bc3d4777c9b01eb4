"""People's labels added up (`engine.reports.human`): Cohen's kappa against a reference
computed here from the confusion matrix, win rates with Wilson intervals (ties apart), the
machine's preference, calibration of the judge's confidence and the human majority."""
from __future__ import annotations

import math
import random

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.reports import human

LABELS = ("a", "b", "tie")


def reference_kappa(first, second):
    """Cohen (1960) from the k x k confusion matrix: po = trace / n,
    pe = sum over k of (row total k x column total k) / n^2, kappa = (po - pe) / (1 - pe)."""
    index = {label: i for i, label in enumerate(LABELS)}
    matrix = [[0] * 3 for _ in range(3)]
    for x, y in zip(first, second, strict=True):
        matrix[index[x]][index[y]] += 1
    n = sum(map(sum, matrix))
    po = sum(matrix[i][i] for i in range(3)) / n
    rows = [sum(matrix[i]) for i in range(3)]
    cols = [sum(matrix[i][j] for i in range(3)) for j in range(3)]
    pe = sum(rows[i] * cols[i] for i in range(3)) / n ** 2
    return (po - pe) / (1 - pe)


def test_kappa_of_the_textbook_table():
    # 50 items: both "a" 20, a/b 5, b/a 10, both "b" 15 -> po 0.70, pe 0.50, kappa 0.40
    first = ["a"] * 25 + ["b"] * 25
    second = ["a"] * 20 + ["b"] * 5 + ["a"] * 10 + ["b"] * 15
    assert human.cohen_kappa(first, second) == pytest.approx(0.4)
    assert human.cohen_kappa(first, first) == 1.0
    assert math.isnan(human.cohen_kappa([], []))


@given(st.lists(st.tuples(st.sampled_from(LABELS), st.sampled_from(LABELS)), min_size=1,
                max_size=60))
def test_kappa_matches_the_reference(pairs):
    first, second = [x for x, _ in pairs], [y for _, y in pairs]
    ours = human.cohen_kappa(first, second)
    if len(set(first)) == 1 and set(first) == set(second):
        assert ours == 1.0  # pe = 1: the reference divides by zero
        return
    assert ours == pytest.approx(reference_kappa(first, second))


def runs_frame(rows):
    base = {"status": "completed", "simulated": False, "protocol": "debate", "models": "m",
            "correct": None, "metrics": {}}
    return pd.DataFrame([{**base, **row} for row in rows])


def prefs_frame(rows):
    return pd.DataFrame([{"rater": "ana", "comment": "", "shown_left": "a", **r}
                         for r in rows])


def test_win_rates_count_ties_apart_with_wilson_intervals():
    runs = runs_frame([{"id": "x", "label": "alpha", "question": "q"},
                       {"id": "y", "label": "beta", "question": "q"}])
    prefs = prefs_frame([{"run_a": "x", "run_b": "y", "choice": c}
                         for c in ["a"] * 8 + ["b"] * 2 + ["tie"] * 3])
    table = human.win_rates(prefs, runs).set_index("configuration")
    alpha, beta = table.loc["alpha"], table.loc["beta"]
    assert (alpha["wins"], alpha["losses"], alpha["ties"], alpha["n"]) == (8, 2, 3, 10)
    assert (beta["wins"], beta["losses"], beta["ties"]) == (2, 8, 3)
    assert alpha["rate"] == 0.8
    assert (round(alpha["low"], 4), round(alpha["high"], 4)) == (0.4902, 0.9433)  # Wilson


def test_machine_preference_and_agreement():
    runs = runs_frame([
        {"id": "r1", "label": "A", "question": "q1", "correct": True},
        {"id": "r2", "label": "B", "question": "q1", "correct": False},
        {"id": "j1", "label": "A", "question": "q2", "metrics": {"judge_confidence": 0.9}},
        {"id": "j2", "label": "B", "question": "q2", "metrics": {"judge_confidence": 0.6}},
        {"id": "c1", "label": "A", "question": "q3", "metrics": {"consensus": 0.5}},
        {"id": "c2", "label": "B", "question": "q3", "metrics": {"consensus": 0.5}},
        {"id": "n1", "label": "A", "question": "q4"},
        {"id": "n2", "label": "B", "question": "q4"}])
    assert human.machine_choice(*runs.to_dict("records")[:2]) == "a"
    rng = random.Random(4)
    rows = []
    for _ in range(40):
        a, b = rng.choice([("r1", "r2"), ("j1", "j2"), ("c1", "c2"), ("n1", "n2")])
        rows.append({"run_a": a, "run_b": b, "choice": rng.choice(LABELS)})
    prefs = prefs_frame(rows)
    found = human.agreement(prefs, runs)
    machine = {"r": "a", "j": "a", "c": "tie"}
    kept = [(r["choice"], machine[r["run_a"][0]]) for r in rows if r["run_a"][0] != "n"]
    assert found.n == len(kept) and found.skipped == 40 - len(kept)
    assert found.kappa == pytest.approx(reference_kappa(*zip(*kept, strict=True)))
    assert found.low <= found.kappa <= found.high
    assert human.agreement(prefs, runs) == found  # seeded: the same interval every time
    table = human.agreement_table(found)
    assert int(table.drop(columns="people chose").to_numpy().sum()) == found.n


def test_a_rater_with_one_choice_throughout_is_named():
    runs = runs_frame([{"id": "x", "label": "A", "question": "q", "correct": True},
                       {"id": "y", "label": "B", "question": "q", "correct": False}])
    prefs = prefs_frame([{"run_a": "x", "run_b": "y", "choice": c} for c in ("a", "b", "tie")])
    found = human.agreement(prefs, runs)
    assert found.kappa == pytest.approx(0.0)  # whatever people chose
    assert found.one_sided == "the machine"
    same = human.agreement(prefs_frame([{"run_a": "x", "run_b": "y", "choice": "b"},
                                        {"run_a": "y", "run_b": "x", "choice": "b"}]), runs)
    assert same.one_sided == "people"  # the machine chose x both times: a, then b
    both = human.agreement(prefs_frame([{"run_a": "x", "run_b": "y", "choice": "a"}] * 2), runs)
    assert both.one_sided == "people and the machine"
    assert human.agreement(prefs_frame([{"run_a": "x", "run_b": "y", "choice": "a"},
                                        {"run_a": "y", "run_b": "x", "choice": "b"}]),
                           runs).one_sided == ""


def test_perfect_agreement_is_one():
    runs = runs_frame([{"id": "x", "label": "A", "question": "q", "correct": True},
                       {"id": "y", "label": "B", "question": "q", "correct": False}])
    prefs = prefs_frame([{"run_a": "x", "run_b": "y", "choice": "a"},
                         {"run_a": "y", "run_b": "x", "choice": "b"}])
    found = human.agreement(prefs, runs)
    assert (found.kappa, found.n) == (1.0, 2)


def test_calibration_bins_the_judges_confidence():
    runs = runs_frame([{"id": "hi", "label": "A", "question": "q",
                        "metrics": {"judge_confidence": 0.95}},
                       {"id": "lo", "label": "B", "question": "q",
                        "metrics": {"judge_confidence": 0.3}}])
    ratings = pd.DataFrame([{"run_id": "hi", "turn": None, "score": s} for s in (5, 4, 2)]
                           + [{"run_id": "lo", "turn": None, "score": s} for s in (1, 4)]
                           + [{"run_id": "lo", "turn": 0, "score": 5}])  # a turn: left out
    table = human.calibration(ratings, runs).set_index("confidence")
    assert (table.loc["0.9–1.0", "approved"], table.loc["0.9–1.0", "n"]) == (2, 3)
    assert (table.loc["0.0–0.5", "approved"], table.loc["0.0–0.5", "n"]) == (1, 2)


def test_human_majority_as_expected_answer():
    runs = runs_frame([
        {"id": "x", "label": "A", "question": "q", "metrics": {"answer": "Plan B"}},
        {"id": "y", "label": "B", "question": "q", "metrics": {"answer": "Plan A"}},
        {"id": "z", "label": "C", "question": "q", "metrics": {"answer": "plan b"}},
        {"id": "u", "label": "A", "question": "open", "metrics": {"answer": "yes"}},
        {"id": "v", "label": "B", "question": "open", "metrics": {"answer": "no"}}])
    prefs = prefs_frame([{"run_a": "x", "run_b": "y", "choice": "a"},
                         {"run_a": "x", "run_b": "y", "choice": "a"},
                         {"run_a": "y", "run_b": "z", "choice": "a"},
                         {"run_a": "u", "run_b": "v", "choice": "a"},
                         {"run_a": "u", "run_b": "v", "choice": "b"}])  # a tie of votes
    assert human.human_majority(prefs, runs) == {"q": "Plan B"}
    table = human.majority_accuracy(prefs, runs).set_index("configuration")
    assert set(table["expected"]) == {"human majority"}
    assert list(table.loc[["A", "B", "C"], "right"]) == [1, 0, 1]
    assert list(table.loc[["A", "B", "C"], "n"]) == [1, 1, 1]  # "open" has no majority


def test_insights_shows_the_kappa_table(tmp_path, monkeypatch):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from engine import Store, run_vote
    from engine.models import Seat
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    db = Store(url)
    ids = [run_vote("2+2?", voters=[Seat(n, f"simulated?seed={s}") for n in "xyz"],
                    store=db, label=f"cfg-{s}", expected="4").run_id for s in (1, 2)]
    db.add_preference(ids[0], ids[1], rater="ana", choice="a", shown_left="b")
    db.add_preference(ids[0], ids[1], rater="bo", choice="tie", shown_left="a")
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"),
                           default_timeout=120)
    at.run()
    at.switch_page("pages/insights.py")
    at.run()
    assert not at.exception, at.exception
    assert "People's judgement" in [s.value for s in at.subheader]
    wins = next(f.value for f in at.dataframe if list(f.value.columns[:2]) ==
                ["configuration", "simulated"] and "wins" in f.value.columns)
    assert list(wins["configuration"]) == ["cfg-1", "cfg-2"] and set(wins["simulated"]) == {True}
    kappa = next(f.value for f in at.dataframe if f.value.columns[0] == "people chose")
    assert int(kappa.drop(columns="people chose").to_numpy().sum()) == 2
    assert any("simulated" in str(c.value) for c in at.caption)
    # both labels are of one pair: the machine chose the same each time, and the page says
    # that kappa then measures nothing
    assert any("The machine gave one and the same choice" in str(w.value) for w in at.warning)
