"""An experiment's questions without an expected answer scored against their human majority
(issue 31): a table of its own, labelled "human majority", never pooled with the accuracy
against the questions' own expected answers, simulated runs apart from real ones. Over a
scripted store (runs written with the answers a test chooses, and people's preferences
between them), the table equals a hand computation; the Experiments page shows it (AppTest).
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.access import Actor, Role
from engine.analysis.answers import answers_match
from engine.cells import Cell
from engine.models import RunResult
from engine.reports import human
from engine.store.experiments import add_experiment

APP = str(Path(__file__).resolve().parent.parent / "app.py")
RATER = Actor("rae@example.com", Role.ANALYST)
QUESTIONS = [{"question": "What is 2 plus 2?", "expected": "4"},
             {"question": "Which plan should we adopt?"},
             {"question": "Which colour for the logo?", "expected": ""},
             {"question": "Which city hosts it?"}]
SPEC = {"name": "judged", "questions": QUESTIONS, "repeats": 2,
        "configs": [{"protocol": "vote", "label": "A"}, {"protocol": "vote", "label": "B"}]}
REAL, SIMULATED = "openai:gpt-4o-mini", "simulated"
# (question, configuration, repeat) -> answer; repeat 0 real runs, repeat 1 simulated ones
ANSWERS = {(0, 0, 0): "4", (0, 1, 0): "5",
           (1, 0, 0): "Plan A", (1, 1, 0): "Plan B",
           (2, 0, 0): "Red", (2, 1, 0): "Red",
           (3, 0, 0): "Paris", (3, 1, 0): "Rome",
           (1, 0, 1): "Plan C", (1, 1, 1): "Plan A"}


def scripted(store: Store) -> tuple[str, dict[tuple[int, int, int], str]]:
    """The experiment with the runs of `ANSWERS` stored completed (repeat 1 on the simulated
    model), and its id with the run ids by cell."""
    experiment_id = add_experiment(store, SPEC["name"], SPEC, 16)
    ids = {}
    for (q, c, r), answer in ANSWERS.items():
        item, model = QUESTIONS[q], SIMULATED if r else REAL
        expected = item.get("expected") or None
        run_id = store.start_run("vote", item["question"], config={
            "protocol": "vote", "seats": {"voters": [{"model": model}]}},
            tags=[Cell(q, c, r).tag], expected=expected, experiment_id=experiment_id,
            label=SPEC["configs"][c]["label"])
        store.finish_run(run_id, RunResult(protocol="vote", expected=expected,
                                           correct=answers_match(answer, expected)),
                         {"answer": answer})
        ids[(q, c, r)] = run_id
    return experiment_id, ids


def prefer(store: Store, ids: dict, a: tuple, b: tuple, *choices: str) -> None:
    """One preference per choice, each by another person (one person's second judgement of
    a pair would replace the first)."""
    for number, choice in enumerate(choices):
        store.add_preference(ids[a], ids[b], rater=f"{number}.{RATER.user}", choice=choice,
                             actor=RATER)


def judged(store: Store) -> str:
    """The scripted experiment with people's preferences between its runs."""
    experiment_id, ids = scripted(store)
    prefer(store, ids, (0, 0, 0), (0, 1, 0), "b")  # q0 has an expected answer: kept
    prefer(store, ids, (1, 0, 0), (1, 1, 0), "b", "b", "a")  # Plan B, 2 votes to 1
    prefer(store, ids, (2, 0, 0), (2, 1, 0), "a")  # Red
    prefer(store, ids, (3, 0, 0), (3, 1, 0), "a", "b")  # 1 to 1: no human majority
    prefer(store, ids, (1, 0, 1), (1, 1, 1), "a")  # simulated: Plan C
    # across kinds: never counted (pooled, the real majority on q1 would be Plan A)
    prefer(store, ids, (1, 0, 0), (1, 1, 1), "a", "a")
    return experiment_id


def wilson(right: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The 95% Wilson score interval, written out here."""
    p = right / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def test_the_table_equals_a_hand_computation_kinds_apart(store):
    experiment_id = judged(store)
    result = ex.report(store, experiment_id, "both")
    scores = human.experiment_majority(result.runs, store.preferences(), QUESTIONS,
                                       result.labels)
    table = scores.table.set_index("configuration")
    # Real: q1 human majority Plan B (A wrong, B right), q2 Red (both right); q3 a tie.
    # Simulated: q1 Plan C (A right, B wrong). q0 keeps its expected answer, 4.
    hand = {"A": (False, 2, 1, 2), "A (simulated)": (True, 1, 1, 1),
            "B": (False, 2, 2, 2), "B (simulated)": (True, 1, 0, 1)}
    assert list(table.index) == list(hand) == result.labels  # the summary's order
    for label, (simulated, questions, right, n) in hand.items():
        row = table.loc[label]
        assert (bool(row["simulated"]), row["questions"], row["right"], row["n"]) == (
            simulated, questions, right, n)
        assert row["expected"] == "human majority"
        assert row["rate"] == pytest.approx(right / n)
        assert (row["low"], row["high"]) == pytest.approx(wilson(right, n))
    assert table.loc["A", "accuracy [95% CI] n"] == "50% [9%–91%] n=2"
    assert (scores.without_expected, scores.with_majority, scores.preferences) == (3, 2, 8)
    assert "2 of the 3 question(s) without an expected answer have a human majority" in \
        scores.caption() and "from 8 preference(s)" in scores.caption()


def test_a_question_with_an_expected_answer_is_never_overridden(store):
    experiment_id = judged(store)
    result = ex.report(store, experiment_id, "real")
    summary = result.summary.set_index("configuration")
    # against the file's expected answers only: q0, A right and B wrong, whatever people said
    assert list(summary.loc[["A", "B"], "scored"]) == [1, 1]
    assert list(summary.loc[["A", "B"], "correct"]) == [1, 0]
    scores = human.experiment_majority(result.runs, store.preferences(), QUESTIONS,
                                       result.labels)
    # people preferred B's "5" on q0, yet the majority table has nothing of q0
    assert list(scores.table["questions"]) == [2, 2]
    assert list(scores.table["right"]) == [1, 2]


def test_no_preferences_no_table_and_no_blank_question_nothing_to_do(store):
    experiment_id, _ = scripted(store)
    result = ex.report(store, experiment_id, "real")
    scores = human.experiment_majority(result.runs, store.preferences(), QUESTIONS)
    assert scores.table.empty and scores.preferences == 0 and scores.with_majority == 0
    assert scores.without_expected == 3
    answered = [{**q, "expected": "x"} for q in QUESTIONS]
    assert human.blank_questions(answered) == set()
    assert human.blank_questions(QUESTIONS) == {1, 2, 3}


def _experiment_page(experiment_id: str) -> AppTest:
    """The app opened on the Experiments page at `experiment_id`, run without an exception."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("pages/experiments.py")
    at.query_params["experiment"] = experiment_id
    at.run()
    assert not at.exception, at.exception
    return at


def test_the_experiments_page_labels_the_table_human_majority(db_url):
    experiment_id = judged(Store(db_url))
    at = _experiment_page(experiment_id)
    assert any("Accuracy against the human majority" in m.value
               and "human majority" in m.value for m in at.markdown)
    table = next(d.value for d in at.dataframe  # not the question-by-configuration matrix
                 if {"expected", "configuration"} <= set(d.value.columns))
    assert set(table["expected"]) == {"human majority"}
    assert list(table["configuration"]) == ["A", "B"]  # the real runs, shown first
    assert any("2 of the 3 question(s) without an expected answer" in c.value
               for c in at.caption)


def test_the_page_says_when_no_one_has_compared_the_runs(db_url):
    experiment_id, _ = scripted(Store(db_url))
    at = _experiment_page(experiment_id)
    assert any("no one has compared two of this experiment's runs" in c.value
               for c in at.caption)
    assert not any({"expected", "configuration"} <= set(d.value.columns) for d in at.dataframe)


def test_experiment_show_prints_the_table_apart_from_the_accuracy(db_url, capsys):
    from engine.cli.main import main
    experiment_id = judged(Store(db_url))
    assert main(["experiment", "show", experiment_id, "--db", db_url]) == 0
    out = capsys.readouterr().out
    heading = "Accuracy against the human majority (expected answer: human majority"
    assert heading in out
    summary, table = out.split(heading)  # after the accuracy against the expected answers
    assert "human majority" not in summary
    assert "2 of the 3 question(s) without an expected answer have a human majority" in table
    assert "from 8 preference(s)" in table and "Never pooled" in table
    rows = {line.split("human majority")[0].strip(): line.split("human majority")[1].split()
            for line in table.split("accuracy [95% CI] n\n")[1].splitlines()}
    # configuration (simulated runs by their label), questions, the rate, its interval, n
    assert rows == {"A": ["2", "50%", "[9%–91%]", "n=2"],
                    "A (simulated)": ["1", "100%", "[21%–100%]", "n=1"],
                    "B": ["2", "100%", "[34%–100%]", "n=2"],
                    "B (simulated)": ["1", "0%", "[0%–79%]", "n=1"]}


def test_experiment_show_says_when_no_one_has_compared_the_runs(db_url, capsys):
    from engine.cli.main import main
    experiment_id, _ = scripted(Store(db_url))
    assert main(["experiment", "show", experiment_id, "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "3 question(s) have no expected answer, and no one has compared two" in out


def test_the_shared_html_carries_the_table_as_text(db_url, tmp_path):
    import html
    from engine.cli.main import main
    from engine.reports.share import experiment_html
    experiment_id = judged(Store(db_url))
    out = tmp_path / "experiment.html"
    assert main(["share", experiment_id, "--experiment", "--runs", "both", "--out", str(out),
                 "--db", db_url]) == 0
    document = out.read_text(encoding="utf-8")
    assert "<h2>Accuracy against the human majority</h2>" in document
    shown = html.unescape(document)
    assert "2 of the 3 question(s) without an expected answer have a human majority" in shown
    assert "50% [9%–91%] n=2" in shown and "0% [0%–79%] n=1" in shown
    # without people's preferences the file is as before: no section
    result = ex.report(Store(db_url), experiment_id, "both")
    assert "human majority" not in experiment_html(result)
