"""What a protocol's result looks like on a page, as plain blocks the pages render as text.

A protocol's `view(result)` takes its typed result and returns blocks; the pages loop over
them with no protocol-specific code, and everything from a user or a model stays text. Two
kinds carry data for a chart: `tally` (a vote's counts, drawn as bars) and `flow` (who held
what before and after, drawn as a Sankey).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from engine.models import ConfigError
from engine.models import is_simulated as is_simulated_spec  # a model spec, not a run
from engine.store.simulated import seat_models, simulation

NO_LABEL = "(no label)"  # how a run without a configuration label is grouped
ABSTAINED = "(abstained)"  # how an abstention is shown where a stance would be


def worlds(models: Any, config: Any = None) -> list[str]:
    """The simulated worlds a run's seats lived in, one line per distinct parameter set, e.g.
    "skill 0.7 · conformity 0.3 · persuasion 0.4 · seed 0" (defaults filled in); when the
    seats lived in more than one (a persona's declared traits set its seat's world), each
    line names its seats first ("cfo, cto: skill 0.9 · ...")."""
    from engine.simulated import world_of
    pairs = seat_models(config) or [("", m) for m in str(models or "").split(",") if m]
    seats: dict[str, list[str]] = {}
    for name, spec in pairs:
        if not is_simulated_spec(spec):
            continue
        try:
            world = world_of(spec)
        except ConfigError:  # a stored spec this version cannot read: say nothing invented
            continue
        line = " · ".join(f"{key} {value:g}" for key, value in world.items())
        named = seats.setdefault(line, [])
        if name and name not in named:
            named.append(name)
    if len(seats) < 2:
        return list(seats)
    return [f"{', '.join(named)}: {line}" if named else line for line, named in seats.items()]


def simulated_text(simulated: Any, models: Any, config: Any = None) -> str:
    """"all", "mixed: <seats>" or "" (see `simulation`)."""
    return simulation(simulated, models, config)[0]


def simulated_suffix(run: Mapping[str, Any]) -> str:
    """What a one-line summary of a run (a stored run's dict) appends: " (simulated)" when
    the simulated model played every seat, " (simulated seats: judge, critic)" when it
    played some, "" for a real run."""
    text = simulated_text(run.get("simulated"), run.get("models"), run.get("config"))
    return "" if not text else " (simulated)" if text == "all" else \
        f" (simulated seats: {text.removeprefix('mixed: ')})"


UNKNOWN_COST = "unknown (unpriced)"


def money_text(value: float) -> str:
    """US dollars as shown: cents from $1, four decimals below it ("$0.0123")."""
    return "$0" if value == 0 else f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def cost_text(cost: Any, simulation: str = "", estimated: bool = False) -> str:
    """A cost in US dollars as shown beside tokens: "unknown (unpriced)" when a model with no
    price spent (never $0), "$0 (simulated)" when the simulated model played every seat
    (`simulation` "all"), else the amount, marked "(estimated usage)" when some of its
    tokens are an estimate."""
    if cost is None or (isinstance(cost, float) and cost != cost):
        return UNKNOWN_COST
    text = money_text(float(cost))
    if simulation == "all":
        return f"{text} (simulated)"
    return f"{text} (estimated usage)" if estimated else text


def simulations(frame: pd.DataFrame) -> list[tuple[str, list[str]]]:
    """`simulation` of each stored run of a frame (`simulated`, `models`, `config` if any)."""
    configs = frame["config"].tolist() if "config" in frame else [None] * len(frame)
    return [simulation(s, m, c) for s, m, c in zip(frame["simulated"].tolist(),
                                                    frame["models"].tolist(), configs)]


def simulation_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Stored runs as exports list them: `simulated` true when any seat is (see
    `simulation`), and `simulated_seats` naming the seats the simulated model played
    (comma-separated)."""
    found = simulations(frame)
    at = list(frame.columns).index("simulated") + 1
    out = frame.assign(simulated=[bool(text) for text, _ in found])
    out.insert(at, "simulated_seats", [",".join(seats) for _, seats in found])
    return out


# An export's analysis columns (`export_columns`): column -> the stored metric it reads.
EXPORT_COLUMNS = {"answer": "answer", "tally_winner": "winner", "tally_votes": "votes",
                  "tally_total": "total", "confidence": "level", "consensus": "consensus",
                  "mind_changes": "mind_changes", "persuaded": "persuaded", "misled": "misled"}


def export_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Stored runs as a CSV export lists them (`simulation_columns`), with the outcome an
    analysis reads in columns of its own: the answer, the tally's winner and its votes of
    the total, the confidence level and consensus, and the measured mind changes (with
    persuaded and misled); empty where a run's protocol gives none."""
    out = simulation_columns(frame)
    metrics = out["metrics"].tolist() if "metrics" in out else [{}] * len(out)
    for column, key in EXPORT_COLUMNS.items():
        out[column] = [m.get(key) if isinstance(m, dict) else None for m in metrics]
    return out


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
    """A part of the Insights page; `note` stands in for the charts when there are none;
    `table` is an aggregate table shown under the charts (its `few` rows greyed); `caption`,
    shown under the title, says what the section was drawn from when it is not every
    matching run (a sample, at scale)."""

    key: str
    title: str
    charts: list[Chart] = field(default_factory=list)
    metrics: list[tuple[str, str]] = field(default_factory=list)
    note: str = ""
    table: pd.DataFrame | None = None
    caption: str = ""


@dataclass
class InsightsData:
    """What a protocol's Insights section reads: its runs, flattened (one row per run, its
    stored signals as `m_*` columns), and, on demand, its completed runs with their stored
    results (the only read of results Insights makes)."""

    runs: pd.DataFrame
    results: Callable[[], pd.DataFrame]
