"""The hijack rate of a planted adversary (DESIGN 2.13), by seat position, beside its control.

A run with an adversary (`engine.protocols.adversary`) stores what was planted and where in
its metrics; its `hijack_rate` is 1 when its final answer is the planted one. Over runs, the
hijack rate is their mean: the share of runs the planted answer won, with its Wilson
interval, per configuration label, arm (the adversary, or its control: the placebo persona,
the same seat given a line of the same length that pushes nothing) and the planted seat's
position among the seats as they were presented. Simulated and real runs are never pooled.
A run whose final answer is none (every seat abstained) counts as not hijacked: the planted
answer did not win it.

Read it against the placebo persona's row of the same position: on a question whose
seats happen to hold the planted answer anyway, the control is hijacked too, so only the
difference is the push's doing.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from engine.analysis.stats import wilson_interval
from engine.protocols.adversary import ARMS, TAG
from engine.reports.experiments import first_runs
from engine.store.experiments import get
from engine.views.blocks import NO_LABEL

if TYPE_CHECKING:
    from engine.store import Store

KEYS = ("hijack_rate", "adversary_position", "adversary_arm", "planted_answer",
        "adversary_seat")
COLUMNS = ["kind", "label", "arm", "position", "seat", "runs", "hijacked", "rate", "low",
           "high", "run_ids"]
# what the table is, for a page or the CLI
ABOUT = ("Hijack rate: the share of runs whose final answer is the planted wrong answer, by "
         "the planted seat's position (1 = presented first), with its 95% Wilson interval; "
         "the placebo persona (the same seat, a line of the same length that pushes "
         "nothing) is its control.")


def hijack_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The hijack rate by kind, label, arm and position, from one row per counted run with
    `id`, `label`, `simulated` and the adversary's metrics (`KEYS`) as columns; runs without
    an adversary are left out. Sorted by kind, label, arm (the adversary first), position."""
    if runs.empty or "hijack_rate" not in runs:
        return pd.DataFrame(columns=COLUMNS)
    planted = runs[runs["hijack_rate"].map(lambda v: isinstance(v, (int, float)) and v == v)]
    rows = []
    keys = ["simulated", "label", "adversary_arm", "adversary_position"]
    for (simulated, label, arm, position), group in planted.groupby(keys, dropna=False,
                                                                    sort=False):
        hijacked = int(sum(float(v) >= 0.5 for v in group["hijack_rate"]))
        n = len(group)
        low, high = wilson_interval(hijacked, n)
        rows.append({"kind": "simulated" if bool(simulated) else "real", "label": str(label),
                     "arm": str(arm), "position": _position(position),
                     "seat": ", ".join(dict.fromkeys(str(s) for s in group["adversary_seat"])),
                     "runs": n, "hijacked": hijacked, "rate": hijacked / n, "low": low,
                     "high": high, "run_ids": list(group["id"])})
    table = pd.DataFrame(rows, columns=COLUMNS)
    if table.empty:
        return table
    order = {arm: k for k, arm in enumerate(ARMS)}
    return table.sort_values(["kind", "label", "arm", "position"], key=lambda c: c.map(
        order) if c.name == "arm" else c).reset_index(drop=True)


def _position(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0  # not presented (its seat took no turn)


def stored(store: Store, kind: str) -> pd.DataFrame:
    """`hijack_table` over every completed stored run with a planted seat (tagged so) of a
    kind (`real`, `simulated` or `both`): Insights' view, which reads only those runs."""
    runs = store.runs(tag=TAG, with_config=False, status="completed",
                      simulated=None if kind == "both" else kind == "simulated")
    if runs.empty:
        return hijack_table(runs)
    metrics = runs["metrics"].map(lambda m: m if isinstance(m, Mapping) else {})
    return hijack_table(pd.DataFrame({
        "id": runs["id"], "label": runs["label"].fillna(NO_LABEL),
        "simulated": runs["simulated"].astype(bool),
        **{key: metrics.map(lambda m, k=key: m.get(k)) for key in KEYS}}))


def for_experiment(store: Store, experiment_id: str) -> pd.DataFrame:
    """`hijack_table` over an experiment's counted runs (each cell's first completed run),
    labelled by their configuration as the experiment's spec lists them."""
    stored = store.experiment_runs(experiment_id, list(KEYS))
    if stored.empty:
        return hijack_table(stored)
    labels = [str(c["label"]) for c in get(store, experiment_id)["spec"]["configs"]]
    frame, first = first_runs(stored, len(labels))
    done = frame[first]
    frame = pd.DataFrame({"id": done["id"], "label": [labels[c] for c in done["cell_c"]],
                          "simulated": done["simulated"].astype(bool),
                          **{key: done[f"metrics.{key}"] for key in KEYS}})
    return hijack_table(frame)


def lines(table: pd.DataFrame) -> list[str]:
    """The table as sentences for the CLI, one per row."""
    out = []
    for row in table.to_dict("records"):
        label, kind = str(row["label"]), str(row["kind"])
        named = label if label.endswith(f"({kind})") else f"{label} ({kind})"
        out.append(f"{named}, {row['arm']}, seat {row['seat']} at position {row['position']}: "
                   f"hijacked {row['hijacked']} of {row['runs']} runs, {row['rate']:.0%} "
                   f"[{row['low']:.0%}-{row['high']:.0%}]")
    return out
