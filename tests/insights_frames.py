"""The Insights report built from a frame of runs held in memory: the reference the store's
path (`insights.report_from_store`, the one the page and the CLI use) is checked against,
and a way to feed a protocol's section hand-made runs without a store."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import pandas as pd

from engine.reports import insights
from engine.reports.runs import protocol_titles
from engine.store import RunFilters
from engine.store.aggregates import SUMMARY_KEYS, SUMMARY_SUMS
from engine.views.aggregate import (
    SIMULATED_SUFFIX,
    as_flag,
    default_kind,
    flatten,
    keep_apart,
    rate_by,
)
from engine.views.blocks import NO_LABEL, InsightsData, Section

Results = Callable[[str], pd.DataFrame]


def side_by_side(runs: pd.DataFrame, column: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """`rate_by` per label with one (rate, n) column pair per protocol, as the accuracy
    chart puts protocols side by side."""
    rates = rate_by(runs.assign(title=protocol_titles(runs["protocol"])), column,
                    by=["group", "title"]) if not runs.empty else pd.DataFrame()
    return insights._side_by_side(rates)


def load_runs(store: Any, filters: RunFilters) -> pd.DataFrame:
    """The runs matching `filters`, flattened for the aggregations (metrics, not results)."""
    return flatten(store.runs(**filters.store_args(), with_config=False))


def results_loader(store: Any, filters: RunFilters) -> Results:
    """`results(protocol)`: the completed runs of one protocol matching `filters`, with their
    stored results."""
    def results(protocol: str) -> pd.DataFrame:
        args = {**filters.store_args(), "protocol": protocol, "status": "completed"}
        if filters.protocol not in (None, "", protocol) or filters.status not in (
                None, "", "completed"):
            return pd.DataFrame(columns=["id", "label", "expected", "result"])
        return store.runs(**args, with_result=True)
    return results


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """A flattened frame of runs added up as `Store.run_summary` adds them up in SQL: one
    row per protocol, label, group, status, degraded flag and kind, with `n`, `scored`,
    `correct`, `unanswered`, `tokens` and `duration`."""
    if runs.empty:
        return pd.DataFrame(columns=[*SUMMARY_KEYS, "group", *SUMMARY_SUMS])
    right = as_flag(runs["correct"])
    cost = pd.to_numeric(runs["cost_usd"], errors="coerce") if "cost_usd" in runs else \
        pd.Series(float("nan"), index=runs.index)
    frame = pd.DataFrame({
        "protocol": runs["protocol"], "label": runs["label"], "group": runs["group"],
        "status": runs["status"],
        "degraded_run": runs["degraded_run"].fillna(False).astype(bool),
        "simulated": runs["simulated"].fillna(False).astype(bool), "n": 1,
        "scored": right.notna().astype(int), "correct": (right == 1).astype(int),
        "unanswered": runs["unanswered"].fillna(0).astype(bool).astype(int)
        if "unanswered" in runs else 0,
        "tokens": pd.to_numeric(runs["tokens"], errors="coerce").fillna(0),
        "duration": pd.to_numeric(runs["duration"], errors="coerce").fillna(0.0),
        "cost": cost.fillna(0.0), "unpriced": cost.isna().astype(int)})
    keys = [*SUMMARY_KEYS, "group"]
    return frame.groupby(keys, sort=True, dropna=False)[list(SUMMARY_SUMS)].sum().reset_index()


def cost_section(runs: pd.DataFrame) -> Section:
    """Tokens and latency over every completed run of `runs`."""
    done = runs[runs["status"] == "completed"] if not runs.empty else runs
    return insights.cost_of(summarise(done), done)


def _relabelled(load: Results, simulated: set[str]) -> Results:
    """`load` with the label of every simulated run suffixed, as `keep_apart` does."""
    def results(protocol: str) -> pd.DataFrame:
        frame = load(protocol)
        if frame.empty:
            return frame
        mine = frame["id"].isin(simulated)
        labels = frame["label"].fillna("").replace("", NO_LABEL)
        return frame.assign(label=labels.where(~mine, labels + SIMULATED_SUFFIX))
    return results


def report(runs: pd.DataFrame, results: Results | None = None,
           kind: str | None = None, only: Sequence[str] | None = None) -> list[Section]:
    """`insights.report_from_store`'s sections from a flattened frame of runs (every run
    read, nothing sampled) and `results(protocol)` for a section that reads results."""
    if runs.empty:
        return []
    kind = kind or default_kind(runs)
    load: Results = results or (lambda protocol: pd.DataFrame(
        columns=["id", "label", "expected", "result"]))
    if kind == "both":
        load = _relabelled(load, set(runs.loc[runs["simulated"].astype(bool), "id"]))
    runs = keep_apart(runs, kind)
    if runs.empty:
        return []
    done = runs[runs["status"] == "completed"]

    def section_of(name: str, make: Callable[[InsightsData], Section]) -> Section:
        return insights._apart(runs[runs["protocol"] == name],
                               lambda part: make(InsightsData(part, partial(load, name))))
    return insights._report(summarise(runs), kind, only, section_of, done)
