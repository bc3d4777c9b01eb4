"""Position effects (DESIGN 2.10): outcome by the position a seat held, and a debate judge's
position consistency over swapped pairs.

Each run stores the order its seats were presented in (`order`), the seats whose position
carried its outcome (`carried`: a debate's winner, the seats that voted for the winning
answer) and, for a debate, the seat that argued each side (`seat_for`, `seat_against`).

- `by_position`: per configuration and position (the 1st, 2nd ... seat presented; for a
  debate also the side argued, `for` / `against`), how often the seat in that position
  carried the outcome: n (runs with an outcome), the count, the rate and its 95% Wilson
  interval. A judge without a position effect rules for the seat presented first, and for
  the side in favour, about half the time.
- `consistency`: over swapped pairs (the same question and repeat run by a debate
  configuration and by its sides-swapped twin, `sides: both`), the share of pairs whose
  verdict follows the same seat (so the same model) both ways, with its Wilson interval. A
  judge that rules by the side, not by the case, credits a different seat each way.

Only counted runs (a cell's first completed run) are read; runs without an order (made
before orders were recorded) or without an outcome (a failed judge) are left out of n.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from engine.analysis.stats import wilson_interval
from engine.protocols.baselines import SWAPPED
from engine.text import NAME_MAX
from engine.views.aggregate import rate_text

if TYPE_CHECKING:
    from engine.store import Store

POSITION_COLUMNS = ["configuration", "position", "n", "carried", "rate", "low", "high",
                    "rate [95% CI] n"]
CONSISTENCY_COLUMNS = ["configuration", "swapped", "pairs", "consistent", "share", "low",
                       "high", "share [95% CI] n"]
NO_PAIRS = ("no swapped pairs yet: run a debate configuration with sides: both, and wait "
            "until a question and repeat has a judged run both ways")
NO_POSITIONS = "no run with a recorded order and outcome yet"


def swapped_label(label: str) -> str:
    """The label of a configuration's twin with its sides swapped (within the label limit)."""
    return label[:NAME_MAX - len(SWAPPED)] + SWAPPED


def side_pairs(spec: Mapping[str, Any]) -> list[dict[str, str]]:
    """A spec's pairs of a configuration and its sides-swapped twin (`sides: both`), in the
    order of the twins; empty without them."""
    if str(spec.get("sides") or "").strip().lower() != "both":
        return []
    labels = [str(c.get("label", "")) for c in spec.get("configs") or []]
    # a twin's label is its original's plus SWAPPED, before any suffix a report adds to
    # both (" (simulated)" where simulated and real runs are kept apart)
    return [{"label": twin.replace(SWAPPED, "", 1), "swapped": twin} for twin in labels
            if SWAPPED in twin and twin.replace(SWAPPED, "", 1) in labels]


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th ... 11th, 12th, 13th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _rate_row(label: str, position: str, wins: int, n: int) -> dict[str, Any]:
    low, high = wilson_interval(wins, n)
    return {"configuration": label, "position": position, "n": n, "carried": wins,
            "rate": wins / n if n else float("nan"), "low": low, "high": high,
            "rate [95% CI] n": rate_text(wins, n)}


def by_position(runs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Outcome by position (see the module docstring) from run records, each with `label`,
    `order`, `carried` and, for a debate, `seat_for` / `seat_against`."""
    carried_by: dict[tuple[str, str], list[bool]] = {}  # (label, position), first seen first
    for run in runs:
        order, carried = run.get("order"), run.get("carried")
        if not isinstance(order, list) or not order or not isinstance(carried, list):
            continue
        label = str(run.get("label", ""))
        for index, seat in enumerate(order, 1):
            carried_by.setdefault((label, f"presented {ordinal(index)}"), []).append(
                seat in carried)
        for side in ("for", "against"):
            seat = run.get(f"seat_{side}")
            if isinstance(seat, str) and seat:
                carried_by.setdefault((label, f"argued {side}"), []).append(seat in carried)
    rows = [_rate_row(label, position, sum(won), len(won))
            for (label, position), won in carried_by.items()]
    return pd.DataFrame(rows, columns=POSITION_COLUMNS)


def consistency(runs: Sequence[Mapping[str, Any]], pairs: Sequence[Mapping[str, str]]
                ) -> pd.DataFrame:
    """A debate judge's position consistency per pair of configurations (`{"label",
    "swapped"}`, the plan's `side_pairs`): over questions and repeats judged both ways, the
    share whose winner is the same seat both ways."""
    winners: dict[tuple[str, Any, Any], str] = {}
    for run in runs:
        winner = run.get("winner")
        if isinstance(winner, str) and winner:
            winners[(str(run.get("label", "")), run.get("q"), run.get("repeat"))] = winner
    rows = []
    for pair in pairs:
        label, swapped = str(pair["label"]), str(pair["swapped"])
        both = [(winner, winners[(swapped, q, r)]) for (lab, q, r), winner in winners.items()
                if lab == label and (swapped, q, r) in winners]
        if not both:
            continue
        same = sum(1 for one, other in both if one == other)
        low, high = wilson_interval(same, len(both))
        rows.append({"configuration": label, "swapped": swapped, "pairs": len(both),
                     "consistent": same, "share": same / len(both), "low": low, "high": high,
                     "share [95% CI] n": rate_text(same, len(both))})
    return pd.DataFrame(rows, columns=CONSISTENCY_COLUMNS)


@dataclass
class Positions:
    """An experiment's position effects: the two tables (empty when there is no data) and
    what to say instead."""

    by_position: pd.DataFrame
    consistency: pd.DataFrame
    pairs: int  # how many configuration pairs the spec swaps (0: no `sides: both`)

    @property
    def positions_note(self) -> str:
        return NO_POSITIONS if self.by_position.empty else ""

    @property
    def consistency_note(self) -> str:
        return NO_PAIRS if self.consistency.empty else ""


def run_records(frame: pd.DataFrame, metrics: Mapping[str, Mapping[str, Any]]
                ) -> list[dict[str, Any]]:
    """The counted runs of an experiment's runs frame (`reports.experiments.runs_frame`) as
    records with the position fields of their stored metrics (`metrics`: run id -> metrics)."""
    if frame.empty:
        return []
    counted = frame[frame["counted"].astype(bool)]
    return [{"label": label, "q": q, "repeat": repeat,
             **{key: (metrics.get(run_id) or {}).get(key)
                for key in ("order", "carried", "winner", "seat_for", "seat_against")}}
            for run_id, label, q, repeat in zip(counted["id"], counted["label"], counted["q"],
                                                counted["repeat"], strict=True)]


def positions(store: Store, experiment_id: str, frame: pd.DataFrame,
              spec: Mapping[str, Any]) -> Positions:
    """An experiment's position effects over the runs of `frame` (its runs frame, already
    split by kind: real or simulated runs), pairing the spec's swapped configurations."""
    pairs = side_pairs(spec)
    stored = store.experiment_runs(experiment_id)
    metrics = {run_id: m for run_id, m in zip(stored["id"], stored["metrics"], strict=True)
               if isinstance(m, Mapping)}
    records = run_records(frame, metrics)
    return Positions(by_position(records), consistency(records, pairs), len(pairs))


def positions_text(found: Positions) -> str:
    """The position effects as the terminal shows them (`experiment show`)."""
    lines = ["Outcome by position (carried the outcome, 95% Wilson interval, n):"]
    if found.positions_note:
        lines.append(f"  {found.positions_note}")
    for row in found.by_position.itertuples(index=False):
        lines.append(f"  {row.configuration} · {row.position}: {row[-1]}")
    lines.append("Judge position consistency (same seat both ways, over swapped pairs):")
    if found.consistency_note:
        lines.append(f"  {found.consistency_note}")
    for row in found.consistency.itertuples(index=False):
        lines.append(f"  {row.configuration} / {row.swapped}: {row[-1]}")
    return "\n".join(lines)


def position_figure(table: pd.DataFrame) -> Any:
    """The rate at which the seat in each position carried the outcome, per configuration,
    with its 95% Wilson interval as error bars and its n on the bar."""
    from engine.reports import charts
    return charts.share_bars([charts.wilson_bars(str(label), rows["position"], rows["rate"],
                                                 rows["carried"], rows["n"], rows["low"],
                                                 rows["high"])
                              for label, rows in table.groupby("configuration", sort=False)],
                             "carried the outcome (95% Wilson interval)")


def consistency_figure(table: pd.DataFrame) -> Any:
    """Each swapped pair's share of verdicts that follow the same seat both ways, with its
    95% Wilson interval and n."""
    from engine.reports import charts
    return charts.share_bars([charts.wilson_bars(
        "judge position consistency", table["configuration"], table["share"],
        table["consistent"], table["pairs"], table["low"], table["high"])],
        "same seat both ways (95% Wilson interval)")
