"""What a protocol's result looks like on a page, as plain blocks the pages render as text.

A protocol's `view(result)` takes its typed result and returns blocks; the pages loop over
them with no protocol-specific code, and everything from a user or a model stays text. Two
kinds carry data for a chart: `tally` (a vote's counts, drawn as bars) and `flow` (who held
what before and after, drawn as a Sankey).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

NO_LABEL = "(no label)"  # how a run without a configuration label is grouped
ABSTAINED = "(abstained)"  # how an abstention is shown where a stance would be


def is_simulated(simulated: Any, models: Any) -> bool:
    """A run made by the offline simulated model: flagged so by the store, or every model
    spec it used is `simulated...` (a failed call carries no simulated flag of its own)."""
    names = [m for m in str(models or "").split(",") if m]
    return bool(simulated) or (bool(names) and all(m.startswith("simulated") for m in names))


Kind = Literal["metrics", "text", "table", "warning", "caption", "tally", "flow"]


@dataclass(frozen=True)
class Block:
    """One piece of a result page.

    - metrics: `items` is a list of (label, value) pairs.
    - text: `body` is plain text (shown verbatim, never as HTML or markdown).
    - table: `rows` is a list of dicts with the same keys.
    - warning / caption: `body` is a one-line message.
    - tally: `counts` maps each stance to its votes, `winner` names the winner (or "").
    - flow: `rows` are `{"seat", "before", "after"}` stances (abstentions spelled out).
    """

    kind: Kind
    title: str = ""
    body: str = ""
    items: list[tuple[str, Any]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    winner: str = ""


def warnings_block(warnings: list[str]) -> list[Block]:
    """A warning block per run warning."""
    return [Block("warning", body=str(w)) for w in warnings]


@dataclass
class Chart:
    """One figure to draw: `kind` names a builder in `engine.reports.charts`, `spec` its
    options, `data` its frame."""

    kind: str
    data: pd.DataFrame
    title: str
    caption: str
    spec: dict[str, Any] = field(default_factory=dict)


@dataclass
class Section:
    """A part of the Insights page; `note` stands in for the charts when there are none."""

    key: str
    title: str
    charts: list[Chart] = field(default_factory=list)
    metrics: list[tuple[str, str]] = field(default_factory=list)
    note: str = ""


@dataclass
class InsightsData:
    """What a protocol's Insights section reads: its runs, flattened (one row per run, its
    stored signals as `m_*` columns), and, on demand, its completed runs with their stored
    results (the only read of results Insights makes)."""

    runs: pd.DataFrame
    results: Callable[[], pd.DataFrame]
