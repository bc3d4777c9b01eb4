"""The Insights page's numbers: aggregations across stored runs, grouped by configuration label.

The common sections (overview, accuracy, tokens and latency) are here; every protocol adds its
own section through its registry entry's `insights` hook, which reads the protocol's runs with
their stored signals (and, on demand only, their results). Every filter goes to `Store.runs` as
a bound parameter. Nothing here draws (that is `charts`) or imports streamlit.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pandas as pd

from engine.protocols import REGISTRY
from engine.reports.aggregate import (
    RUN_COLUMNS,
    as_flag,
    completed,
    counts_by,
    flatten,
    mean_by,
    rate_by,
    side_by_side,
    spread_by,
)
from engine.reports.ballots import flow_links
from engine.reports.runs import Filters, protocol_titles
from engine.reports.views import Chart, InsightsData, Section

__all__ = ["Chart", "Section", "InsightsData", "RUN_COLUMNS", "flatten", "load_runs",
           "results_loader", "report", "rate_by", "counts_by", "mean_by", "spread_by",
           "side_by_side", "completed", "flow_links", "overview_section", "accuracy_section",
           "cost_section"]

Results = Callable[[str], pd.DataFrame]


def load_runs(store: Any, filters: Filters) -> pd.DataFrame:
    """The runs matching `filters`, flattened for the aggregations (metrics, not results)."""
    return flatten(store.runs(**filters.store_args(), with_config=False))


def results_loader(store: Any, filters: Filters) -> Results:
    """`results(protocol)`: the completed runs of one protocol matching `filters`, with their
    stored results (read only when a protocol's section asks for them)."""
    def results(protocol: str) -> pd.DataFrame:
        args = {**filters.store_args(), "protocol": protocol, "status": "completed"}
        if filters.protocol not in (None, "", protocol) or filters.status not in (
                None, "", "completed"):
            return pd.DataFrame(columns=["id", "label", "expected", "result"])
        return store.runs(**args, with_result=True)
    return results


def overview_section(runs: pd.DataFrame) -> Section:
    """How many runs and how they ended: completed, degraded (completed but lost a decisive
    call or most of their turns), failed (no model call succeeded, or a crash) and
    interrupted, each counted apart."""
    simulated = int(runs["simulated"].fillna(False).astype(bool).sum())
    status = runs["status"]
    degraded = (status == "completed") & runs["degraded_run"].fillna(False).astype(bool)
    by_status = runs.assign(group=protocol_titles(runs["protocol"]),
                            status=status.where(~degraded, "completed (degraded)"))
    return Section("overview", "Overview", metrics=[
        ("Runs", f"{len(runs):,}"), ("Completed", f"{int((status == 'completed').sum()):,}"),
        ("Degraded", f"{int(degraded.sum()):,}"),
        ("Failed", f"{int((status == 'failed').sum()):,}"),
        ("Interrupted", f"{int((status == 'interrupted').sum()):,}"),
        ("Simulated", f"{simulated:,}")], charts=[Chart(
            "stacked_counts", counts_by(by_status, "status"), "Runs per protocol",
            "How many runs each protocol has, split by how they ended.",
            {"order": ["completed", "completed (degraded)", "running", "interrupted",
                       "failed"]})])


def accuracy_section(runs: pd.DataFrame) -> Section:
    """Accuracy over the completed runs with an expected answer (failed and interrupted runs
    never count as wrong)."""
    done = completed(runs)
    scored = done[done["correct"].notna()] if not done.empty else done
    if scored.empty:
        return Section("accuracy", "Accuracy", note="No runs with an expected answer match "
                       "these filters.")
    frame, spec = side_by_side(scored, "correct")
    return Section("accuracy", "Accuracy", metrics=[
        ("Scored runs", f"{len(scored):,}"),
        ("Correct", f"{as_flag(scored['correct']).mean():.0%}")], charts=[
        Chart("rate_bar", frame, "Accuracy by label and protocol",
              "Share of completed runs whose final answer matched the expected answer, "
              "protocols side by side (persona panel against vote is the debate-or-vote "
              "comparison); failed and interrupted runs are left out.",
              {**spec, "y_title": "correct"})])


def cost_section(runs: pd.DataFrame) -> Section:
    done = runs[runs["status"] == "completed"] if not runs.empty else runs
    if done.empty:
        return Section("cost", "Tokens and latency", note="No completed runs match these "
                       "filters.")
    grouped = done.assign(protocol_title=protocol_titles(done["protocol"]))
    keys = ["protocol_title", "group"]
    return Section("cost", "Tokens and latency", metrics=[
        ("Tokens per run", f"{done['tokens'].mean():,.0f}"),
        ("Seconds per run", f"{done['duration'].mean():.2f}")], charts=[
        Chart("box", spread_by(grouped, "tokens", keys), "Tokens per run",
              "Tokens in plus out per run, by protocol, one box per label: the box spans the "
              "middle half, the line is the median, the dashes the mean.",
              {"x": "protocol_title", "color": "group", "y_title": "tokens"}),
        Chart("box", spread_by(grouped, "duration", keys), "Seconds per run",
              "Wall-clock seconds per run, by protocol, one box per label (box: middle half; "
              "line: median; dashes: mean).",
              {"x": "protocol_title", "color": "group", "y_title": "seconds"})])


def report(runs: pd.DataFrame, results: Results | None = None) -> list[Section]:
    """The Insights page, section by section: the overview, then each registered protocol's
    own section (a protocol without runs gets only a note), accuracy, tokens and latency."""
    if runs.empty:
        return []
    load: Results = results or (lambda protocol: pd.DataFrame(
        columns=["id", "label", "expected", "result"]))
    sections = [overview_section(runs)]
    for name, spec in REGISTRY.items():
        if spec.insights is None:
            continue
        mine = runs[runs["protocol"] == name]
        if completed(mine).empty:
            sections.append(Section(name, spec.title, note=f"No completed "
                                    f"{spec.title.lower()} runs match these filters."))
            continue
        sections.append(spec.insights(InsightsData(mine, partial(load, name))))
    return sections + [accuracy_section(runs), cost_section(runs)]
