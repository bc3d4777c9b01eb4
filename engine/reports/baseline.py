"""The baseline view of an experiment: every question x configuration cell held against the
same question under a chosen baseline configuration.

A cell collapses its repeats: its answer is the most frequent canonical final answer (ties to
the smallest, as tallies break them), its `stability` the share of its repeats that gave that
answer, and its score the share of repeats that were right. Against the baseline a cell is
`fixed` (right more often than the baseline's cell), `broke` (less often), `same`, or
`unscored` when either side has no scored run. Filters pick the cells an analyst asks about
first: only the ones that differ, the ones where the debate overturned its own round-one
majority, and the ones that were right at first and wrong at the end.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import pandas as pd

from engine.analysis.answers import Answers
from engine.models import ConfigError
from engine.reports.experiments import counted

STATES = ("fixed", "broke", "same", "unscored")
FILTERS = {"all": "every cell", "different": "different from the baseline only",
           "overturned": "the final answer overturned the round-one majority",
           "right-then-wrong": "right at first, wrong at the end"}
COLUMNS = ["q", "question", "expected", "configuration", "answer", "raw_answers", "runs",
           "scored", "right", "score", "stability", "overturned", "right_then_wrong",
           "baseline_answer", "baseline_score", "state", "run_ids"]


def _cells(counted: pd.DataFrame) -> dict[tuple[int, str], dict[str, Any]]:
    """Every (question, configuration) cell of the counted runs, collapsed, in one pass over
    them (a data frame per cell cost a millisecond each: seconds for 5,000 cells), each
    distinct answer spelled canonically once."""
    if counted.empty:
        return {}
    answers = Answers()
    answer, correct, changed, shift, ids = (counted[name].tolist() for name in (
        "answer", "correct", "changed", "shift", "id"))
    # each cell's rows by position, as arrays (a list per cell lived long enough for the
    # garbage collector to walk the heap on their account)
    grouped: dict[Any, Any] = counted.reset_index(drop=True).groupby(
        ["q", "label"], sort=False).indices
    cells = {}
    for (q, label), where in grouped.items():
        key, rows = (int(str(q)), str(label)), list(where.tolist())
        given = [a for a in (answer[i] for i in rows) if isinstance(a, str) and a]
        counts = Counter(answers.normalize(a) for a in given)
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if counts else ""
        scored = [bool(c) for c in (correct[i] for i in rows) if _known(c)]
        right = sum(scored)
        cells[key] = {"answer": top, "raw_answers": sorted(set(given)), "runs": len(rows),
                      "scored": len(scored), "right": right,
                      "score": right / len(scored) if scored else float("nan"),
                      "stability": counts[top] / len(given) if given else float("nan"),
                      "overturned": any(bool(_known(changed[i]) and changed[i]) for i in rows),
                      "right_then_wrong": any(shift[i] == "worse" for i in rows),
                      "run_ids": [ids[i] for i in rows]}
    return cells


def _known(value: Any) -> bool:
    """Not missing: not None and not NaN (what `Series.notna` keeps)."""
    return value is not None and value == value


def _state(score: float, baseline: float) -> str:
    if score != score or baseline != baseline:
        return "unscored"
    return "fixed" if score > baseline else "broke" if score < baseline else "same"


def baseline_matrix(frame: pd.DataFrame, spec: Mapping[str, Any], baseline: str,
                    show: str = "all", sort: str = "question") -> pd.DataFrame:
    """One row per (question, configuration other than `baseline`) over the counted runs of
    an experiment's runs frame (`engine.reports.experiments.runs_frame`): the cell collapsed
    (`_cells`), the baseline cell's answer and score beside it, and its `state`.

    `show` is one of `FILTERS`; `sort` is "question" (spec order) or "regressions" (broken
    cells first, then the questions with the most broken configurations).
    """
    labels = [c["label"] for c in spec["configs"]]
    if baseline not in labels:
        raise ConfigError(f"the baseline must be one of the experiment's configurations, got "
                          f"{baseline!r}", "input")
    if show not in FILTERS:
        raise ConfigError(f"show must be one of {', '.join(FILTERS)}, got {show!r}", "input")
    if sort not in ("question", "regressions"):
        raise ConfigError(f"sort must be question or regressions, got {sort!r}", "input")
    cells = _cells(counted(frame))
    empty = {"answer": "", "raw_answers": [], "runs": 0, "scored": 0, "right": 0,
             "score": float("nan"), "stability": float("nan"), "overturned": False,
             "right_then_wrong": False, "run_ids": []}  # a cell with no counted run
    out: dict[str, list[Any]] = {name: [] for name in COLUMNS}  # column by column: a dict
    from_cell = [(out[name], name) for name in empty]  # per row was as many objects to collect
    for q, item in enumerate(spec["questions"]):
        base = cells.get((q, baseline), empty)
        for label in labels:
            if label == baseline:
                continue
            mine = cells.get((q, label), empty)
            out["q"].append(q)
            out["question"].append(item["question"])
            out["expected"].append(item.get("expected") or "")
            out["configuration"].append(label)
            for values, name in from_cell:
                values.append(mine[name])
            out["baseline_answer"].append(base["answer"])
            out["baseline_score"].append(base["score"])
            out["state"].append(_state(mine["score"], base["score"]))
    table = pd.DataFrame(out, columns=COLUMNS) if out["q"] else pd.DataFrame(columns=COLUMNS)
    if show == "different":
        table = table[table["state"].isin(["fixed", "broke"])]
    elif show == "overturned":
        table = table[table["overturned"]]
    elif show == "right-then-wrong":
        table = table[table["right_then_wrong"]]
    if sort == "regressions" and not table.empty:
        broken = table[table["state"] == "broke"].groupby("q").size()
        table = table.assign(_b=(table["state"] == "broke").astype(int),
                             _q=table["q"].map(broken).fillna(0))
        table = table.sort_values(["_b", "_q", "q"], ascending=[False, False, True],
                                  kind="stable").drop(columns=["_b", "_q"])
    return table.reset_index(drop=True)


def matrix_counts(table: pd.DataFrame) -> dict[str, int]:
    """How many cells are fixed, broke, same and unscored."""
    counts = table["state"].value_counts() if not table.empty else pd.Series(dtype=int)
    return {state: int(counts.get(state, 0)) for state in STATES}


def wide(table: pd.DataFrame) -> pd.DataFrame:
    """The matrix as the page shows it: one row per question, one column per configuration,
    each cell "answer · state · stability" (text), plus the baseline's answer."""
    if table.empty:
        return pd.DataFrame(columns=["q", "question", "expected", "baseline"])
    def text(answer: Any, state: Any, stability: Any, runs: Any) -> str:
        stable = "" if stability != stability or runs < 2 else f" · {stability:.0%} stable"
        return f"{answer or '(none)'} · {state}{stable}"
    cells = table.assign(cell=[text(*row) for row in zip(  # not `apply`: a Series per row
        table["answer"].tolist(), table["state"].tolist(), table["stability"].tolist(),
        table["runs"].tolist(), strict=True)])
    grid = cells.pivot_table(index=["q", "question", "expected", "baseline_answer"],
                             columns="configuration", values="cell", aggfunc="first",
                             sort=False).reset_index()
    grid.columns.name = None
    return grid.rename(columns={"baseline_answer": "baseline"})


NOT_RUN = "not run yet"


def _verdict(cell: Mapping[str, Any], scored_question: bool) -> str:
    """One cell of `answer_matrix` as text."""
    if not cell["runs"]:
        return NOT_RUN
    answer = cell["answer"] or "no answer"
    if not cell["scored"]:
        return answer + (" · not scored" if scored_question else "")
    if cell["scored"] == 1:
        return f"{answer} · {'right' if cell['right'] else 'wrong'}"
    return f"{answer} · {cell['right']}/{cell['scored']} right"


def answer_matrix(frame: pd.DataFrame, spec: Mapping[str, Any]) -> pd.DataFrame:
    """Questions x configurations over the counted runs of an experiment's runs frame: one
    row per question (`q`, `question`, `expected`), one column per configuration in the
    spec's order, each cell its final answer (the most frequent over its repeats, spelled
    canonically, "no answer" when none was given) and its score: "31 · right", "30 · wrong",
    "31 · 2/3 right" over repeats, the answer alone on a question with no expected answer,
    and "not run yet" for a cell with no counted run."""
    labels = [c["label"] for c in spec["configs"]]
    named = matrix_columns(labels)
    cells = _cells(counted(frame))
    empty = {"runs": 0}
    rows = [{"q": q, "question": item["question"], "expected": item.get("expected") or "",
             **{named[label]: _verdict(cells.get((q, label), empty), bool(item.get("expected")))
                for label in labels}} for q, item in enumerate(spec["questions"])]
    return pd.DataFrame(rows, columns=[*MATRIX_FIXED, *named.values()])


MATRIX_FIXED = ("q", "question", "expected")


def matrix_columns(labels: list[str]) -> dict[str, str]:
    """Each configuration label's column in `answer_matrix`: the label itself, or
    "LABEL (configuration)" for a label that is also one of the question's columns."""
    return {label: f"{label} (configuration)" if label in MATRIX_FIXED else label
            for label in labels}
