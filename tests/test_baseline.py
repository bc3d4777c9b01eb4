"""The baseline view of an experiment (issue 14, bullet 2): each cell against the baseline's
cell for the same question, repeats collapsed with a stability score, filters and the sort by
regressions. The page (Experiments) draws `wide`; these check the numbers under it."""
from __future__ import annotations

import pandas as pd
import pytest

from engine.models import ConfigError
from engine.reports.baseline import baseline_matrix, matrix_counts, wide

SPEC = {"questions": [{"question": "q0", "expected": "1"}, {"question": "q1", "expected": "2"},
                      {"question": "q2", "expected": "3"}],
        "configs": [{"label": "vote"}, {"label": "debate"}, {"label": "panel"}]}


def run(q, label, answer, correct, first=None, repeat=0, counted=True):
    changed = None if first is None else first != answer
    shift = None
    if first is not None:
        was = first == SPEC["questions"][q]["expected"]
        shift = "same" if not changed else "worse" if was and not correct else \
            "better" if correct and not was else "sideways"
    return {"id": f"{label}-{q}-{repeat}", "q": q, "label": label, "repeat": repeat,
            "counted": counted, "answer": answer, "correct": correct, "changed": changed,
            "shift": shift}


FRAME = pd.DataFrame([
    run(0, "vote", "1", True), run(0, "debate", "4", False, first="1"),          # broke
    run(0, "panel", "1", True), run(0, "panel", "1", True, repeat=1),
    run(1, "vote", "5", False), run(1, "debate", "2", True, first="5"),          # fixed
    run(1, "panel", "$2.00", True), run(1, "panel", "7", False, repeat=1),
    run(2, "vote", "3", True), run(2, "debate", "3", True, first="3"),           # same
    run(2, "panel", "9", False), run(2, "panel", "3", True, repeat=1, counted=False),
])


def test_each_cell_is_fixed_broke_or_same_against_the_baseline():
    table = baseline_matrix(FRAME, SPEC, "vote")
    states = {(r.q, r.configuration): r.state for r in table.itertuples()}
    assert states == {(0, "debate"): "broke", (0, "panel"): "same", (1, "debate"): "fixed",
                      (1, "panel"): "fixed", (2, "debate"): "same", (2, "panel"): "broke"}
    assert matrix_counts(table) == {"fixed": 2, "broke": 2, "same": 2, "unscored": 0}


def test_repeats_collapse_into_one_cell_with_its_answer_and_stability():
    table = baseline_matrix(FRAME, SPEC, "vote").set_index(["q", "configuration"])
    assert table.loc[(0, "panel"), "stability"] == 1.0
    assert table.loc[(0, "panel"), "answer"] == "1"
    assert table.loc[(1, "panel"), "stability"] == 0.5  # "2" once, "7" once
    assert table.loc[(1, "panel"), "answer"] == "2"  # "$2.00" spelled canonically
    assert table.loc[(1, "panel"), "raw_answers"] == ["$2.00", "7"]  # raw ones kept
    assert table.loc[(1, "panel"), "score"] == 0.5
    assert table.loc[(2, "panel"), "runs"] == 1  # the uncounted repeat is left out
    assert table.loc[(1, "debate"), "run_ids"] == ["debate-1-0"]


def test_filters_pick_what_an_analyst_asks_about():
    assert set(baseline_matrix(FRAME, SPEC, "vote", "different")["state"]) == {"fixed", "broke"}
    overturned = baseline_matrix(FRAME, SPEC, "vote", "overturned")
    assert list(zip(overturned["q"], overturned["configuration"])) == [(0, "debate"),
                                                                        (1, "debate")]
    worse = baseline_matrix(FRAME, SPEC, "vote", "right-then-wrong")
    assert list(zip(worse["q"], worse["configuration"])) == [(0, "debate")]


def test_sorting_by_regressions_puts_broken_cells_first():
    table = baseline_matrix(FRAME, SPEC, "vote", sort="regressions")
    assert list(table["state"][:2]) == ["broke", "broke"]
    assert list(baseline_matrix(FRAME, SPEC, "vote")["q"]) == [0, 0, 1, 1, 2, 2]


def test_a_baseline_not_in_the_experiment_or_a_bad_filter_is_refused():
    with pytest.raises(ConfigError, match="baseline must be one of"):
        baseline_matrix(FRAME, SPEC, "nope")
    with pytest.raises(ConfigError, match="show must be one of"):
        baseline_matrix(FRAME, SPEC, "vote", show="<script>")


def test_unscored_cells_say_so_and_the_wide_grid_shows_answers_not_only_scores():
    frame = FRAME.assign(correct=None)
    assert set(baseline_matrix(frame, SPEC, "vote")["state"]) == {"unscored"}
    grid = wide(baseline_matrix(FRAME, SPEC, "vote"))
    assert list(grid.columns) == ["q", "question", "expected", "baseline", "debate", "panel"]
    assert grid.loc[1, "panel"] == "2 · fixed · 50% stable"
    assert grid.loc[0, "debate"] == "4 · broke"
