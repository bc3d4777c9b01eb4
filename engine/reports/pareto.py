"""Accuracy against what it cost: per configuration, accuracy (with its 95% Wilson interval
and n) against the mean cost, or the mean tokens, of a run, and which configurations are on the
Pareto front (no other is at least as accurate for no more spend, and better on one of them).

The front is drawn on point estimates; the intervals are drawn beside them, so a reader sees
when a "dominated" configuration is within noise of the one dominating it (the caption says
so). A configuration whose spend is unknown (a model with no price) is not placed, and is named
as such, never drawn at 0. Only plain values here: no store, no streamlit.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from engine.reports.vega import PARETO_AXES as AXES
from engine.reports.vega import _number

COLUMNS = ["configuration", "spend", "accuracy", "low", "high", "n", "dominated",
           "dominated_by"]


def dominated_by(points: Sequence[tuple[str, float, float]]) -> dict[str, str]:
    """For each (label, spend, accuracy), the label of one configuration dominating it: at
    most its spend and at least its accuracy, strictly better on one ("" when none does,
    i.e. it is on the front). Ties on both are not domination."""
    out = {}
    for label, spend, acc in points:
        better = [(s, -a, other) for other, s, a in points if other != label and
                  s <= spend and a >= acc and (s < spend or a > acc)]
        out[label] = min(better)[2] if better else ""
    return out


def pareto_rows(summary: pd.DataFrame, x: str) -> tuple[pd.DataFrame, list[str]]:
    """From a per-configuration table with `configuration, accuracy, accuracy_low,
    accuracy_high, scored` and `x` (`cost_per_run` or `tokens_per_run`): the placed
    configurations with `dominated` and `dominated_by`, and the labels left out because their
    spend or accuracy is unknown (unpriced, or nothing scored)."""
    if x not in AXES:
        raise ValueError(f"x must be one of {', '.join(AXES)}, got {x!r}")
    rows: list[dict[str, Any]] = []
    unplaced: list[str] = []
    for row in summary.to_dict("records"):
        spend, acc = _number(row.get(x)), _number(row.get("accuracy"))
        if spend is None or acc is None or not row.get("scored"):
            unplaced.append(str(row["configuration"]))
            continue
        rows.append({"configuration": str(row["configuration"]), "spend": spend,
                     "accuracy": acc, "low": _number(row.get("accuracy_low")),
                     "high": _number(row.get("accuracy_high")), "n": int(row["scored"])})
    beaten = dominated_by([(r["configuration"], r["spend"], r["accuracy"]) for r in rows])
    for r in rows:
        r["dominated_by"] = beaten[r["configuration"]]
        r["dominated"] = bool(r["dominated_by"])
    return pd.DataFrame(rows, columns=COLUMNS), unplaced


def caption(rows: pd.DataFrame, unplaced: Sequence[str], x: str) -> str:
    """What the chart shows and does not: the front on point estimates, a dominated point
    within its dominator's interval, and the configurations not placed (and why)."""
    what = "cost" if x == "cost_per_run" else "tokens"
    parts = [f"Grey: dominated (another configuration is at least as accurate for no more "
             f"{what} per run). The front is drawn on point estimates: where the intervals "
             "overlap, the difference may be noise."]
    accuracy = dict(zip(rows["configuration"], rows["accuracy"], strict=True))
    close = [str(r["configuration"]) for r in rows.to_dict("records") if r["dominated"] and
             (high := _number(r["high"])) is not None and high >= accuracy[r["dominated_by"]]]
    if close:
        parts.append(f"Within the interval of what dominates them: {', '.join(close)}.")
    if unplaced:
        parts.append("Not placed: " + ", ".join(f"{label} (unknown {what} or no scored run)"
                                                for label in unplaced) + ".")
    return " ".join(parts)
