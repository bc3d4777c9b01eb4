"""The Experiments page opens on the answer (AppTest, over scripted stores: runs written with
the answers and round votes a test chooses, no model called): the sentence and the table
`experiment show` prints, the question-by-configuration matrix with each cell's answer and
score, the views grouped in four tabs (an old link to a view still opens it), and the
"Consensus earned?" verdicts: none over fewer than 5 runs, and "Accuracy fell" said."""
from __future__ import annotations

from pathlib import Path

import pytest
from apptest_helpers import plain
from plugins.experiment_answer import QUESTIONS, experiment, save, scripted_experiment
from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.cli.main import main
from engine.reports import baseline

APP = str(Path(__file__).resolve().parent.parent / "app.py")
def open_page(experiment_id: str, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/experiments.py")
    at.query_params["experiment"] = experiment_id
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.fixture
def scripted(db_url):
    return scripted_experiment(db_url)


def test_the_matrix_gives_each_cell_its_answer_and_score(db_url, scripted):
    grid = baseline.answer_matrix(ex.report(Store(db_url), scripted).runs,
                                  ex.get(Store(db_url), scripted)["spec"])
    assert list(grid.columns) == ["q", "question", "expected", "A", "B"]
    # ties between answers go to the smallest canonical spelling, as a tally breaks them
    assert grid["A"].tolist() == ["4 · 2/2 right", "6 · 1/2 right", "blue"]
    assert grid["B"].tolist() == ["5 · 0/2 right", "6 · 2/2 right", baseline.NOT_RUN]
    at = open_page(scripted)
    shown = next(d.value for d in at.dataframe if {"A", "B", "question"} <= set(d.value.columns))
    assert shown.equals(grid)  # the page opens on it, on the first tab


def test_a_label_named_like_a_question_column_keeps_its_own_column(db_url):
    store = Store(db_url)
    experiment_id, spec = experiment(store, QUESTIONS[:1], [{"protocol": "vote",
                                                             "label": "question"}], 1)
    save(store, experiment_id, spec, 0, 0, 0, "4")
    grid = baseline.answer_matrix(ex.report(store, experiment_id).runs, spec)
    assert grid["question"].tolist() == ["What is 2 + 2?"]
    assert grid["question (configuration)"].tolist() == ["4 · right"]


def test_the_page_opens_on_the_sentence_and_table_experiment_show_prints(db_url, scripted,
                                                                       capsys):
    told = ex.headline(ex.report(Store(db_url), scripted))
    assert len(told.sentences) == 1 and told.sentences[0].startswith("On 2 questions, A was")
    assert main(["experiment", "show", scripted, "--db", db_url]) == 0
    printed = capsys.readouterr().out
    assert told.table.to_string(index=False) in printed and told.sentences[0] in printed
    at = open_page(scripted)
    assert "Which configuration is better, and how sure?" in [s.value for s in at.subheader]
    assert told.sentences[0] in [plain(m.value) for m in at.markdown]
    table = at.table[0].value
    assert table.columns.tolist() == told.table.columns.tolist()
    assert table["accuracy [95% CI] n"].tolist() == told.table["accuracy [95% CI] n"].tolist()
    assert table["unanswered"].tolist() == ["0", "1"]  # B's silent run, wrong and counted
    # no identifier in a header of the page's first table
    assert not [c for c in table.columns if "_" in c]


def test_the_views_are_four_groups_and_an_old_link_to_a_view_opens_it(db_url, scripted):
    at = open_page(scripted)
    labels = [t.label for t in at.tabs]
    groups = ["The answer", "Rounds and confidence", "Cost and position", "When to deliberate"]
    assert [label for label in labels if label in groups] == groups
    # the first group's views, as tabs of their own; only the open group's are drawn
    assert [label for label in labels if label not in groups] == [
        "Summary", "Questions", "Paired comparison", "Runs behind a cell"]
    at = open_page(scripted, **{"exp-tab": "Calibration"})  # a link from before the groups
    # its view drawn (these runs carry no confidence signal to calibrate)
    assert any(c.value.startswith("Calibration needs runs") for c in at.caption)
    assert at.session_state["exp-tab"] == "Rounds and confidence"
    at.session_state["exp-tab"] = "Runs behind a cell"  # as a chart's click does
    at.run()
    assert "Runs behind a cell" in [h.value for h in at.subheader]


def rounds_experiment(db_url: str, runs: dict[str, list]) -> str:
    """A society experiment whose configuration LABEL has the runs `runs[LABEL]`, each
    (round votes, final answer) on question 0 (expected "1"), one repeat each."""
    store = Store(db_url)
    configs = [{"protocol": "society", "label": label} for label in runs]
    repeats = max(len(v) for v in runs.values())
    experiment_id, spec = experiment(store, [{"question": "Which?", "expected": "1"}],
                                     configs, repeats)
    for c, label in enumerate(runs):
        for r, (votes, answer) in enumerate(runs[label]):
            save(store, experiment_id, spec, 0, c, r, answer, votes)
    return experiment_id


def verdicts(at: AppTest) -> tuple[list[str], list[str]]:
    """The verdict lines of "Consensus earned?": as warnings, and as captions."""
    return ([plain(w.value) for w in at.warning],
            [plain(c.value) for c in at.caption if ": " in plain(c.value)])


def test_no_verdict_over_fewer_than_five_runs(db_url):
    rose = ([{"1": 2, "2": 1}, {"1": 3}], "1")  # agreement up a third, right both rounds
    wrong = ([{"2": 2, "1": 1}, {"2": 3}], "2")  # up a third, wrong both rounds
    experiment_id = rounds_experiment(db_url, {"four": [rose, wrong, rose, wrong],
                                               "six": [rose, wrong] * 3})
    at = open_page(experiment_id, **{"exp-tab": "Consensus earned?"})
    warned, said = verdicts(at)
    # four runs: agreement rose, accuracy did not, but four runs are too few for a verdict
    assert any(line.startswith("four: Too few runs for a verdict") for line in said)
    assert not any(line.startswith("four:") for line in warned)
    # six runs, each up the same third: an interval of zero width is no evidence either
    assert any(line.startswith("six: Too few runs for a verdict") and "[+0.33, +0.33]" in line
               for line in said)
    assert not any(line.startswith("six:") for line in warned)


def test_a_label_whose_accuracy_fell_says_so(db_url):
    fell = ([{"1": 3}, {"2": 3}], "2")  # right in round one, wrong at the end
    moved = ([{"1": 2, "2": 1}, {"2": 3}], "2")
    kept = ([{"1": 3}, {"1": 3}], "1")
    experiment_id = rounds_experiment(db_url, {"falls": [fell] * 5 + [moved] + [kept] * 2})
    at = open_page(experiment_id, **{"exp-tab": "Consensus earned?"})
    warned, said = verdicts(at)
    line = next(line for line in warned if line.startswith("falls:"))
    assert line.startswith("falls: Accuracy fell: accuracy 100% in round one → 25% final")
    assert not any(line.startswith("falls: Not flagged") for line in said)
