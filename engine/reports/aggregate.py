"""Aggregations on plain frames of stored runs, for Insights, experiments and the protocols'
own Insights sections: one row per run (`flatten`), then rates, counts, means and spreads per
group. Every function takes and returns pandas frames; nothing here reads the store or draws.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from engine.reports.views import NO_LABEL, is_simulated

RUN_COLUMNS = ["id", "protocol", "label", "status", "created_at", "simulated", "correct",
               "calls", "degraded", "degraded_run", "tokens_in", "tokens_out", "latency",
               "duration"]


def flatten(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per run: the run's columns, `group` (its label), `tokens`, and every metric
    of its `metrics` as a column prefixed `m_` (missing ones are NaN)."""
    if frame.empty:
        return pd.DataFrame(columns=RUN_COLUMNS + ["group", "tokens"])
    out = frame[RUN_COLUMNS].copy()
    out["label"] = out["label"].fillna(NO_LABEL).replace("", NO_LABEL)
    out["group"] = out["label"]
    out["tokens"] = out["tokens_in"] + out["tokens_out"]
    out["simulated"] = [is_simulated(s, m) for s, m in zip(frame["simulated"].tolist(),
                                                          frame["models"].tolist())]
    metrics = pd.DataFrame.from_records(list(frame["metrics"]), index=frame.index)
    metrics.columns = [f"m_{c}" for c in metrics.columns]
    return pd.concat([out, metrics], axis=1)


def completed(runs: pd.DataFrame) -> pd.DataFrame:
    """The completed runs of a frame."""
    if runs.empty:
        return runs
    return runs[runs["status"] == "completed"]


def numbers(runs: pd.DataFrame, column: str) -> pd.Series:
    """A column as numbers (anything else, or a column the frame lacks, as NaN)."""
    if column not in runs:
        return pd.Series(float("nan"), index=runs.index, dtype=float)
    return pd.to_numeric(runs[column], errors="coerce")


def as_flag(values: pd.Series) -> pd.Series:
    """Booleans (or 0/1) as floats, anything else (missing) as NaN."""
    return values.map(lambda v: float(v) if isinstance(v, (bool, int, float)) and v == v
                      else float("nan")).astype(float)


def rate_by(runs: pd.DataFrame, column: str, by: str | list[str] = "group",
            name: str = "rate") -> pd.DataFrame:
    """Per group (one column or several): `n` runs with a value in `column` and the share of
    them that are true."""
    keys = [by] if isinstance(by, str) else list(by)
    if runs.empty or column not in runs:
        return pd.DataFrame(columns=[*keys, "n", name])
    values = runs[keys].assign(_v=as_flag(runs[column])).dropna(subset=["_v"])
    out = values.groupby(keys, sort=True)["_v"].agg(["size", "mean"]).reset_index()
    return out.rename(columns={"size": "n", "mean": name})


def counts_by(runs: pd.DataFrame, column: str, by: str = "group") -> pd.DataFrame:
    """Per group and value of `column`: how many runs (missing values are left out)."""
    if runs.empty or column not in runs:
        return pd.DataFrame(columns=[by, "value", "count"])
    present = runs[[by, column]].dropna()
    out = present.groupby([by, column], sort=True).size().reset_index(name="count")
    return out.rename(columns={column: "value"}).astype({"value": str})


def mean_by(runs: pd.DataFrame, column: str, by: str = "group",
            name: str = "mean") -> pd.DataFrame:
    """Per group: `n` runs with a number in `column` and its mean."""
    if runs.empty or column not in runs:
        return pd.DataFrame(columns=[by, "n", name])
    values = runs[[by]].assign(_v=pd.to_numeric(runs[column], errors="coerce")).dropna()
    out = values.groupby(by, sort=True)["_v"].agg(["size", "mean"]).reset_index()
    return out.rename(columns={"size": "n", "mean": name})


def spread_by(runs: pd.DataFrame, column: str, by: str | list[str] = "group"
              ) -> pd.DataFrame:
    """Per group (one column or several): `n`, `min`, `q1`, `median`, `q3`, `max` and `mean`
    of a number, for box plots."""
    keys = [by] if isinstance(by, str) else list(by)
    names = [*keys, "n", "min", "q1", "median", "q3", "max", "mean"]
    if runs.empty or column not in runs:
        return pd.DataFrame(columns=names)
    values = runs[keys].assign(_v=pd.to_numeric(runs[column], errors="coerce")).dropna()
    grouped = values.groupby(keys, sort=True)["_v"]
    out = grouped.agg(n="size", min="min", median="median", max="max", mean="mean")
    out["q1"] = grouped.quantile(0.25)
    out["q3"] = grouped.quantile(0.75)
    return out.reset_index()[names]


def side_by_side(runs: pd.DataFrame, column: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """`rate_by` per label with one (rate, n) column pair per protocol, for a grouped bar
    chart that puts protocols side by side within each label (debate against vote); returns
    the frame and the chart options naming its columns."""
    from engine.protocols import REGISTRY  # read when called: the registry imports reports
    from engine.reports.runs import protocol_titles
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


