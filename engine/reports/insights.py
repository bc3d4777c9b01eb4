"""The Insights page's numbers: aggregations across stored runs, grouped by configuration label.

The common sections (overview, accuracy, tokens and latency) are here; every protocol adds its
own section through its registry entry's `insights` hook, which reads the protocol's runs with
their stored signals (and, on demand only, their results). Every filter goes to `Store.runs` as
a bound parameter. Nothing here draws (that is `charts`) or imports streamlit.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import pandas as pd

from engine.protocols import REGISTRY
from engine.reports.runs import Filters, protocol_titles
from engine.views.aggregate import (
    KINDS,
    RUN_COLUMNS,
    SIMULATED_SUFFIX,
    as_flag,
    completed,
    counts_by,
    default_kind,
    flatten,
    keep_apart,
    mean_by,
    rate_by,
    rate_table,
    rate_text,
    spread_by,
)
from engine.views.ballots import flow_links
from engine.views.blocks import NO_LABEL, Chart, InsightsData, Section

__all__ = ["Chart", "Section", "InsightsData", "RUN_COLUMNS", "flatten", "load_runs",
           "results_loader", "report", "rate_by", "counts_by", "mean_by", "spread_by",
           "side_by_side", "completed", "flow_links", "overview_section", "accuracy_section",
           "cost_section", "KINDS", "default_kind", "keep_apart", "KIND_TITLES",
           "section_titles", "default_sections"]

def side_by_side(runs: pd.DataFrame, column: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """`rate_by` per label with one (rate, n) column pair per protocol, for a grouped bar
    chart that puts protocols side by side within each label (debate against vote); returns
    the frame and the chart options naming its columns."""
    rates = rate_by(runs.assign(title=protocol_titles(runs["protocol"])), column,
                    by=["group", "title"]) if not runs.empty else pd.DataFrame()
    if rates.empty:
        return pd.DataFrame(columns=["group"]), {"y": [], "n": [], "names": [], "colors": []}
    titles = sorted(rates["title"].unique())
    wide = rates.pivot(index="group", columns="title", values=["rate", "n"])
    frame = pd.DataFrame({"group": wide.index})
    for title in titles:
        frame[f"{title} rate"] = wide[("rate", title)].to_numpy()
        frame[f"{title} n"] = wide[("n", title)].fillna(0).astype(int).to_numpy()
    color = {spec.title: spec.color for spec in REGISTRY.values()}
    return frame, {"y": [f"{t} rate" for t in titles], "n": [f"{t} n" for t in titles],
                   "names": titles, "colors": [color.get(t, "#607d8b") for t in titles]}


# How a chart's title says which runs it shows (real runs need no word).
KIND_TITLES = {"real": "", "simulated": " (simulated)",
               "both": " (simulated and real, kept apart)"}

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
    titles = protocol_titles(runs["protocol"])
    if runs["simulated"].astype(bool).nunique() > 1:  # both kinds shown: never one bar
        titles = titles.where(~runs["simulated"].astype(bool), titles + SIMULATED_SUFFIX)
    by_status = runs.assign(group=titles,
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
    table = rate_table(scored.assign(protocol=protocol_titles(scored["protocol"])), "correct",
                       ["group", "protocol"])
    return Section("accuracy", "Accuracy", metrics=[
        ("Scored runs", f"{len(scored):,}"),
        ("Correct", rate_text(int(as_flag(scored["correct"]).sum()),
                              int(as_flag(scored["correct"]).notna().sum())))], charts=[
        Chart("rate_bar", frame, "Accuracy by label and protocol",
              "Share of completed runs whose final answer matched the expected answer, "
              "protocols side by side (persona panel against vote is the debate-or-vote "
              "comparison), with its 95% Wilson interval; a bar over fewer than 5 runs is "
              "faded and says its n; failed and interrupted runs are left out.",
              {**spec, "y_title": "correct"})],
        table=table.rename(columns={"group": "label", "shown": "accuracy [95% CI] n"}))


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


def section_titles() -> dict[str, str]:
    """Every section `report` can make, key -> title, in page order (no aggregation)."""
    return {"overview": "Overview",
            **{name: spec.title for name, spec in REGISTRY.items() if spec.insights},
            "accuracy": "Accuracy", "cost": "Tokens and latency"}


def default_sections(runs: pd.DataFrame) -> list[str]:
    """The sections a page opens with: the overview, and each protocol's own section when at
    most two protocols have completed runs. Accuracy, tokens and latency and the rest are a
    click away, so a page over thousands of runs of every protocol draws one figure: in the
    browser each figure costs more than the page's whole Python run."""
    done = completed(runs)
    stored = set(done["protocol"].unique()) if not done.empty else set()  # once, not per name
    present = [n for n in section_titles() if n in stored]
    return ["overview", *(present if len(present) <= 2 else [])]


def report(runs: pd.DataFrame, results: Results | None = None,
           kind: str | None = None, only: Sequence[str] | None = None) -> list[Section]:
    """The Insights page, section by section: the overview, then each registered protocol's
    own section (a protocol without runs gets only a note), accuracy, tokens and latency.

    Simulated and real runs are never pooled: `kind` "real" or "simulated" shows only those,
    "both" shows all with every simulated group labelled " (simulated)"; by default
    `default_kind` (the real runs when there are any). Each chart's title says which
    (`KIND_TITLES`). `only` names the sections to make (`section_titles`' keys), in page
    order; None makes every one."""
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
    sections = _sections(runs, load, set(section_titles() if only is None else only))
    for section in sections:
        for chart in section.charts:
            chart.title += KIND_TITLES[kind]
    return sections


def _sections(runs: pd.DataFrame, load: Results, only: set[str]) -> list[Section]:
    sections = [overview_section(runs)] if "overview" in only else []
    for name, spec in REGISTRY.items():
        if spec.insights is None or name not in only:
            continue
        mine = runs[runs["protocol"] == name]
        if completed(mine).empty:
            sections.append(Section(name, spec.title, note=f"No completed "
                                    f"{spec.title.lower()} runs match these filters."))
            continue
        sections.append(_apart(mine, partial(_protocol_section, spec.insights,
                                             partial(load, name))))
    return sections + [_apart(runs, make) for key, make in (("accuracy", accuracy_section),
                                                            ("cost", cost_section))
                       if key in only]


def _protocol_section(make: Callable[[InsightsData], Section], load: Callable[[], pd.DataFrame],
                      runs: pd.DataFrame) -> Section:
    return make(InsightsData(runs, load))


def _apart(runs: pd.DataFrame, make: Callable[[pd.DataFrame], Section]) -> Section:
    """`make(runs)`; when both kinds are shown, its headline numbers are made again for the
    real and the simulated runs apart (labelled so), as its charts already keep them apart."""
    section = make(runs)
    kinds = runs["simulated"].astype(bool)
    if kinds.nunique() > 1:
        section.metrics = [(f"{label} ({kind})", value)
                           for kind, part in (("real", runs[~kinds]), ("simulated", runs[kinds]))
                           if not completed(part).empty
                           for label, value in make(part).metrics]
    return section
