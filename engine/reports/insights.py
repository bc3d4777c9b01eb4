"""The Insights page's numbers: aggregations across stored runs, grouped by configuration label.

The common sections (overview, accuracy, tokens and latency) are here; every protocol adds its
own section through its registry entry's `insights` hook, which reads the protocol's runs with
their stored signals (and, on demand only, their results). Every filter goes to `Store.runs` as
a bound parameter. Nothing here draws (that is `charts`) or imports streamlit.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import pandas as pd

from engine.protocols import REGISTRY
from engine.reports import pareto
from engine.reports.runs import protocol_titles
from engine.store.aggregates import SUMMARY_KEYS, SUMMARY_SUMS
from engine.views.aggregate import (
    SIMULATED_SUFFIX,
    completed,
    default_kind,
    flatten,
    interval,
    keep_apart,
    rate_text,
    rates_from_counts,
    spread_by,
    table_of_rates,
    with_groups,
)
from engine.views.blocks import Chart, InsightsData, Section, cost_text

if TYPE_CHECKING:
    from engine.store import RunFilters, Store

def _side_by_side(rates: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Rates per label with one (rate, n) column pair per protocol (`rates`: `group`,
    `title`, `rate`, `n`), for a grouped bar chart that puts protocols side by side within
    each label (debate against vote); returns the frame and the chart options naming its
    columns."""
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


def load_summary(store: Store, filters: RunFilters) -> pd.DataFrame:
    """The matching runs added up in the store (`Store.run_summary`: a few hundred rows
    however many runs match), with each run's `group` (its label, or "(no label)")."""
    frame = with_groups(store.run_summary(**filters.store_args()))
    keys = [*SUMMARY_KEYS, "group"]
    return frame.groupby(keys, sort=True)[list(SUMMARY_SUMS)].sum().reset_index()


def _sum(summary: pd.DataFrame, mask: Any = None) -> int:
    return int(summary["n"].sum() if mask is None else summary.loc[mask, "n"].sum())


def overview_of(summary: pd.DataFrame) -> Section:
    """How many runs and how they ended, from the runs added up (`load_summary`):
    completed, degraded (completed but lost a decisive call or most of their turns), failed
    (no model call succeeded, or a crash) and interrupted, each counted apart."""
    status = summary["status"]
    degraded = (status == "completed") & summary["degraded_run"].astype(bool)
    titles = protocol_titles(summary["protocol"])
    kinds = summary["simulated"].astype(bool)
    if kinds.nunique() > 1:  # both kinds shown: never one bar
        titles = titles.where(~kinds, titles + SIMULATED_SUFFIX)
    by_status = summary.assign(group=titles,
                               status=status.where(~degraded, "completed (degraded)"))
    counts = (by_status.groupby(["group", "status"], sort=True)["n"].sum().reset_index()
              .rename(columns={"status": "value", "n": "count"}))
    counts = counts[counts["count"] > 0].astype({"value": str}).reset_index(drop=True)
    return Section("overview", "Overview", metrics=[
        (name, f"{_sum(summary, mask):,}") for name, mask in (
            ("Runs", None), ("Completed", status == "completed"), ("Degraded", degraded),
            ("Failed", status == "failed"), ("Interrupted", status == "interrupted"),
            ("Simulated", kinds))], charts=[Chart(
            "stacked_counts", counts, "Runs per protocol",
            "How many runs each protocol has, split by how they ended.",
            {"order": ["completed", "completed (degraded)", "running", "interrupted",
                       "failed"]})])


def accuracy_of(summary: pd.DataFrame) -> Section:
    """Accuracy over the completed runs with an expected answer, from the runs added up
    (`load_summary`): failed and interrupted runs never count as wrong; a completed run that
    gave no answer does, and is counted as unanswered beside the accuracy."""
    scored = completed(summary)
    scored = scored[scored["scored"] > 0] if not scored.empty else scored
    if scored.empty:
        return Section("accuracy", "Accuracy", note="No runs with an expected answer match "
                       "these filters.")
    titled = scored.assign(title=protocol_titles(scored["protocol"]))
    rates = rates_from_counts(titled, ["group", "title"], "correct", "scored")
    frame, spec = _side_by_side(rates)
    table = table_of_rates(rates.rename(columns={"title": "protocol"}), ["group", "protocol"])
    silent = titled.groupby(["group", "title"], sort=True)["unanswered"].sum()
    table = table.assign(unanswered=[int(silent.get((group, protocol), 0)) for group, protocol
                                     in zip(table["group"], table["protocol"], strict=True)])
    return Section("accuracy", "Accuracy", metrics=[
        ("Scored runs", f"{int(scored['scored'].sum()):,}"),
        ("Correct", rate_text(int(scored["correct"].sum()), int(scored["scored"].sum()))),
        ("Unanswered", f"{int(scored['unanswered'].sum()):,}")],
        charts=[
        Chart("rate_bar", frame, "Accuracy by label and protocol",
              "Share of completed runs whose final answer matched the expected answer, "
              "protocols side by side (persona panel against vote is the debate-or-vote "
              "comparison), with its 95% Wilson interval; a bar over fewer than 5 runs is "
              "faded and says its n; a run that gave no answer counts as wrong (the table "
              "says how many were unanswered); failed and interrupted runs are left out.",
              {**spec, "y_title": "correct"})],
        table=table.rename(columns={"group": "label", "shown": "accuracy [95% CI] n"}))


def cost_of(summary: pd.DataFrame, values: pd.DataFrame, sample: str = "") -> Section:
    """Tokens and seconds per run: the means over every completed run (`summary`), the
    boxes over `values` (one row per completed run with `protocol`, `group`, `tokens` and
    `duration`: every run, or a sample of them that `sample` describes)."""
    done = completed(summary)
    if done.empty or values.empty:
        return Section("cost", "Tokens and latency", note="No completed runs match these "
                       "filters.")
    n = int(done["n"].sum())
    grouped = values.assign(protocol_title=protocol_titles(values["protocol"]))
    keys = ["protocol_title", "group"]
    return Section("cost", "Tokens and latency", metrics=[
        ("Tokens per run", f"{done['tokens'].sum() / n:,.0f}"),
        ("Cost per run", cost_text(None if done["unpriced"].sum() else done["cost"].sum() / n,
                                   "all" if done["simulated"].all() else "")),
        ("Seconds per run", f"{done['duration'].sum() / n:.2f}")], caption=sample, charts=[
        Chart("box", spread_by(grouped, "tokens", keys), "Tokens per run",
              "Tokens in plus out per run, by protocol, one box per label: the box spans the "
              "middle half, the line is the median, the dashes the mean." + _also(sample),
              {"x": "protocol_title", "color": "group", "y_title": "tokens"}),
        Chart("box", spread_by(grouped, "duration", keys), "Seconds per run",
              "Wall-clock seconds per run, by protocol, one box per label (box: middle half; "
              "line: median; dashes: mean)." + _also(sample),
              {"x": "protocol_title", "color": "group", "y_title": "seconds"}),
        *pareto_charts(done)])


def configurations(summary: pd.DataFrame) -> pd.DataFrame:
    """Per configuration (a label, with its protocol when the label has runs of several),
    over the completed runs added up in `summary`: accuracy with its 95% Wilson interval and
    n scored, mean tokens per run, and mean cost per run (NaN, unknown, when any of the runs
    is unpriced)."""
    done = completed(summary)
    columns = ["configuration", "scored", "accuracy", "accuracy_low", "accuracy_high",
               "tokens_per_run", "cost_per_run"]
    if done.empty:
        return pd.DataFrame(columns=columns)
    by = done.groupby(["group", "protocol"], sort=True)[list(SUMMARY_SUMS)].sum().reset_index()
    names, scored = by["group"].astype(str), by["scored"].astype(int)
    bounds = [interval(int(right), n) for right, n in zip(by["correct"], scored, strict=True)]
    return pd.DataFrame({
        "configuration": names.where(~names.duplicated(keep=False),
                                     names + " · " + protocol_titles(by["protocol"])),
        "scored": scored, "accuracy": by["correct"] / scored.where(scored > 0),
        "accuracy_low": [low for low, _ in bounds], "accuracy_high": [high for _, high in bounds],
        "tokens_per_run": by["tokens"] / by["n"],
        "cost_per_run": (by["cost"] / by["n"]).where(by["unpriced"] == 0)}, columns=columns)


def pareto_charts(summary: pd.DataFrame) -> list[Chart]:
    """Accuracy against cost, and against tokens, per configuration (`configurations`), the
    Pareto front in colour and the dominated grey; none when nothing is scored."""
    table = configurations(summary)
    charts = []
    for x, what in (("cost_per_run", "cost"), ("tokens_per_run", "tokens")):
        rows, unplaced = pareto.pareto_rows(table, x)
        if not rows.empty:
            charts.append(Chart("pareto", rows, f"Accuracy against {what} per run",
                                "Each configuration's accuracy over its completed, scored "
                                f"runs (95% Wilson interval) against its mean {what} per run. "
                                + pareto.caption(rows, unplaced, x), {"x": x}))
    return charts


def _also(sample: str) -> str:
    return " Drawn from a sample (see above)." if sample else ""


def section_titles() -> dict[str, str]:
    """Every section `report` can make, key -> title, in page order (no aggregation)."""
    return {"overview": "Overview",
            **{name: spec.title for name, spec in REGISTRY.items() if spec.insights},
            "accuracy": "Accuracy", "cost": "Tokens and latency",
            "consensus": "Consensus earned?"}  # drawn by the page (`engine.reports.consensus`)


def default_sections(runs: pd.DataFrame) -> list[str]:
    """The sections a page opens with: the overview, and each protocol's own section when at
    most two protocols have completed runs. Accuracy, tokens and latency and the rest are a
    click away, so a page over thousands of runs of every protocol draws one figure: in the
    browser each figure costs more than the page's whole Python run."""
    done = completed(runs)
    stored = set(done["protocol"].unique()) if not done.empty else set()  # once, not per name
    present = [n for n in section_titles() if n in stored]
    return ["overview", *(present if len(present) <= 2 else [])]


def _report(summary: pd.DataFrame, kind: str, only: Sequence[str] | None,
            section_of: Callable[[str, Callable[[InsightsData], Section]], Section],
            values: pd.DataFrame, sample: str = "") -> list[Section]:
    """The sections `only` names (every one when None) from the runs added up (`summary`,
    one kind or both kept apart): a protocol's own section from `section_of(name, its
    insights hook)`, the boxes of tokens and latency from `values` (a row per completed
    run, or the sample `sample` describes); each chart's title says which runs it shows."""
    wanted = set(section_titles() if only is None else only)
    sections = [overview_of(summary)] if "overview" in wanted else []
    for name, spec in REGISTRY.items():
        if spec.insights is None or name not in wanted:
            continue
        if completed(summary[summary["protocol"] == name]).empty:
            sections.append(Section(name, spec.title, note=f"No completed "
                                    f"{spec.title.lower()} runs match these filters."))
            continue
        sections.append(section_of(name, spec.insights))
    if "accuracy" in wanted:
        sections.append(_apart(summary, accuracy_of))
    if "cost" in wanted:
        sections.append(_apart(summary, lambda part: cost_of(part, values, sample)))
    for section in sections:
        for chart in section.charts:
            chart.title += KIND_TITLES[kind]
    return sections


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


# --------------------------------------------------------------------------- at scale
SAMPLE = 10_000  # the most runs a protocol's section or a box plot reads, per kind of run
# the most runs a protocol's own section reads with their metrics, per kind of run: its
# headline figures (mind changes, votes, confidence against accuracy) are counted over every
# run at the top of the page (`engine.reports.answers`); the section's charts draw a sample
SECTION_SAMPLE = 2_000
# the most runs whose whole stored results (and configurations) a protocol's section reads:
# a result is parsed JSON of every seat's turn, a thousand times a run's typed columns
RESULTS_SAMPLE = 1_000


def every_for(count: int, limit: int | None = None) -> int:
    """The step of a systematic sample of at most `limit` (default `SAMPLE`) of `count` runs
    (1: all of them)."""
    return max(1, -(-count // (limit or SAMPLE)))


def sample_text(read: int, of: int, every: int) -> str:
    """What a sampled section says it was drawn from ("" when it read every run)."""
    if every <= 1:
        return ""
    return (f"Drawn from a sample of {read:,} of {of:,} runs: every {every}th in time order "
            "(every label and the whole period alike). Counts, rates and intervals here are "
            "the sample's; the three answers at the top, the overview and accuracy count "
            "every run.")


def simulated_flags(kind: str) -> list[bool]:
    """The `simulated` values of the runs `kind` shows (each read apart)."""
    return {"real": [False], "simulated": [True], "both": [False, True]}[kind]


def _sampled(filters: RunFilters, summary: pd.DataFrame, kind: str,
             read: Callable[[int, dict[str, Any]], pd.DataFrame], limit: int | None = None,
             **narrow: Any) -> tuple[pd.DataFrame, str]:
    """`read(every, args)` for each kind of run shown (real and simulated read apart, each
    sampled on its own so a few real runs are never thinned by many simulated ones), kept
    apart as `keep_apart` keeps them; and the sample's description ("" for every run)."""
    parts, read_n, of_n, steps = [], 0, 0, set()
    for simulated in simulated_flags(kind):
        mine = summary[summary["simulated"] == simulated]
        for key, value in narrow.items():
            mine = mine[mine[key] == value]
        count = int(mine["n"].sum())
        if not count:
            continue
        every = every_for(count, limit)
        frame = read(every, {**filters.store_args(), **narrow, "simulated": simulated})
        parts.append(frame)
        read_n, of_n = read_n + len(frame), of_n + count
        steps.add(every)
    if not parts:
        return pd.DataFrame(), ""
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    if len(parts) > 1 and "created_at" in frame:  # newest first, as `Store.runs` reads them
        frame = frame.sort_values("created_at", ascending=False, kind="stable",
                                  ignore_index=True)
    return frame, sample_text(read_n, of_n, max(steps))


def _values(store: Store, every: int, args: dict[str, Any]) -> pd.DataFrame:
    """Every `every`th run matching `args`, just the columns the boxes of tokens and
    latency read, grouped by label."""
    frame = store.run_values(["protocol", "label", "simulated", "tokens_in", "tokens_out",
                              "duration"], every=every, **args)
    return with_groups(frame).assign(tokens=frame["tokens_in"] + frame["tokens_out"])


class _StoredResults:
    """`results(protocol)` for the completed runs of `runs` (a sample, or every run),
    labelled as `runs` labels them (a simulated run's label suffixed when both kinds are
    shown), read once however often a section asks; past `RESULTS_SAMPLE` runs of a
    protocol, every k-th of them in `runs`' order, and `said` then describes that sample
    ("" until a section read results, or when it read them all)."""

    def __init__(self, store: Store, runs: pd.DataFrame):
        self.store, self.runs = store, runs
        self.read: dict[str, pd.DataFrame] = {}
        self.said = ""

    def __call__(self, protocol: str) -> pd.DataFrame:
        if protocol in self.read:
            return self.read[protocol]
        done = completed(self.runs)
        mine = done[done["protocol"] == protocol] if not done.empty else done
        keep: set[str] = set()
        steps: set[int] = set()
        # each kind of run sampled on its own, so a few real runs are never thinned by
        # many simulated ones
        kinds = mine["simulated"].astype(bool) if not mine.empty else pd.Series(dtype=bool)
        for kind in sorted(set(kinds)):
            theirs = list(mine.loc[kinds == kind, "id"])
            every = every_for(len(theirs), RESULTS_SAMPLE)
            keep.update(theirs[every - 1::every])
            steps.add(every)
        ids = [run_id for run_id in mine["id"] if run_id in keep]  # in `runs`' order
        of = len(mine)
        if max(steps, default=1) > 1:
            self.said = (f"The charts drawn from the runs' stored results (by persona, "
                         f"stance flows) read a sample of {len(ids):,} of these {of:,} "
                         f"runs: every {max(steps)}th.")
        frame = self.store.run_results(ids, with_config=True)  # who played which persona
        labels = dict(zip(done["id"], done["label"]))
        order = {run_id: number for number, run_id in enumerate(ids)}  # as `runs` has them
        frame = frame.assign(label=frame["id"].map(labels), _at=frame["id"].map(order))
        self.read[protocol] = frame.sort_values("_at", kind="stable").drop(
            columns="_at").reset_index(drop=True)
        return self.read[protocol]


def report_from_store(store: Store, filters: RunFilters, kind: str | None = None,
                      only: Sequence[str] | None = None,
                      summary: pd.DataFrame | None = None) -> list[Section]:
    """The Insights page over the runs matching `filters`, section by section: the overview,
    then each registered protocol's own section (a protocol without runs gets only a note),
    accuracy, tokens and latency. `only` names the sections to make (`section_titles`'
    keys), in page order; None makes every one.

    Simulated and real runs are never pooled: `kind` "real" or "simulated" shows only those,
    "both" shows all with every simulated group labelled " (simulated)"; by default
    `default_kind` (the real runs when there are any). Each chart's title says which
    (`KIND_TITLES`).

    The runs are added up where they are stored: the overview and accuracy from
    `Store.run_summary` (every run, a few hundred rows back), tokens and latency from typed
    columns, and a protocol's own section from its runs read only when the section is asked
    for. Past `SAMPLE` runs of a kind, the boxes and a protocol's section read a systematic
    sample and say so (`Section.caption`)."""
    summary = load_summary(store, filters) if summary is None else summary
    if summary.empty:
        return []
    kind = kind or default_kind(summary)
    shown = keep_apart(summary, kind)
    if shown.empty:
        return []

    def section_of(name: str, make: Callable[[InsightsData], Section]) -> Section:
        runs, sample = _sampled(filters, summary, kind, lambda every, args: flatten(
            store.runs(**args, every=every, with_config=False)), SECTION_SAMPLE, protocol=name)
        runs = keep_apart(runs, kind)
        results = _StoredResults(store, runs)
        section = _apart(runs, lambda part: make(InsightsData(part, partial(results, name))))
        section.caption = " ".join(part for part in (sample, results.said) if part)
        return section
    values, sample = pd.DataFrame(), ""
    if only is None or "cost" in only:
        values, sample = _sampled(filters, summary, kind, partial(_values, store),
                                  status="completed")
        values = keep_apart(values, kind) if not values.empty else values
    return _report(shown, kind, only, section_of, values, sample)

