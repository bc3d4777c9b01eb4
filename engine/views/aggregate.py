"""Aggregations on plain frames of stored runs, for Insights, experiments and the protocols'
own Insights sections: one row per run (`flatten`), then rates, counts, means and spreads per
group. Every function takes and returns pandas frames; nothing here reads the store or draws.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from engine.analysis.stats import wilson_interval
from engine.views.blocks import NO_LABEL, simulations

FEW = 5  # a rate over fewer runs than this is shown greyed, with its n
KINDS = ("real", "simulated", "both")  # which runs a page shows: never pooled silently
SIMULATED_SUFFIX = " (simulated)"  # a group of simulated runs shown beside real ones

RUN_COLUMNS = ["id", "protocol", "label", "status", "created_at", "simulated", "correct",
               "unanswered", "calls", "degraded", "degraded_run", "tokens_in", "tokens_out",
               "cost_usd", "latency", "duration"]


def flatten(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per run: the run's columns, `group` (its label), `tokens`, and every metric
    of its `metrics` as a column prefixed `m_` (missing ones are NaN)."""
    if frame.empty:
        return pd.DataFrame(columns=RUN_COLUMNS + ["group", "tokens"])
    out = with_groups(frame.reindex(columns=RUN_COLUMNS))  # an older frame may lack cost_usd
    out["tokens"] = out["tokens_in"] + out["tokens_out"]
    out["simulated"] = [bool(text) for text, _ in simulations(frame)]
    metrics = pd.DataFrame.from_records(list(frame["metrics"]), index=frame.index)
    metrics.columns = [f"m_{c}" for c in metrics.columns]
    return pd.concat([out, metrics], axis=1)


def with_groups(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with each row's `label` and its `group`: its label, "(no label)" (`NO_LABEL`)
    without one, so every view groups the unlabelled runs under one name."""
    labels = frame["label"].fillna(NO_LABEL).replace("", NO_LABEL)
    return frame.assign(label=labels, group=labels)


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
    """Booleans (or 0/1, or counts) as floats, anything else (missing) as NaN."""
    if values.dtype.kind in "biuf":  # numbers already (NaN where missing): no call per value
        return values.astype(float)
    return values.map(lambda v: float(v) if isinstance(v, (bool, int, float)) and v == v
                      else float("nan")).astype(float)


def default_kind(runs: pd.DataFrame) -> str:
    """What a page shows first: the real runs when there are any, else the simulated ones."""
    return "real" if runs.empty or not runs["simulated"].astype(bool).all() else "simulated"


def keep_apart(runs: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Only the real or only the simulated runs of a flattened frame, or (`both`) all of
    them with every simulated run's `group` and `label` (those it has) suffixed
    " (simulated)", so no group ever pools simulated runs with real ones."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if runs.empty:
        return runs
    simulated = runs["simulated"].astype(bool)
    if kind != "both":
        return runs[simulated == (kind == "simulated")]
    out = runs.copy()
    for column in ("group", "label"):
        if column in out:
            out[column] = out[column].where(~simulated,
                                            out[column].astype(str) + SIMULATED_SUFFIX)
    return out


def split_configs(frame: pd.DataFrame, configs: list[dict[str, Any]], kind: str
                  ) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """An experiment's runs (`label`, `simulated`) and configurations kept apart as
    `keep_apart` keeps runs: only the real or only the simulated runs, or both with every
    simulated run's label suffixed " (simulated)" and each configuration that has simulated
    runs listed again under that label (after its real self when it has real runs too)."""
    out = keep_apart(frame, kind)
    if frame.empty or kind != "both":
        return out, list(configs)
    simulated = frame["simulated"].astype(bool)
    listed = []
    for config in configs:
        mine = simulated[frame["label"] == config["label"]]
        if mine.empty or not mine.all():
            listed.append(config)
        if mine.any():
            listed.append({**config, "label": config["label"] + SIMULATED_SUFFIX})
    return out, listed


def interval(right: int, n: int) -> tuple[float, float]:
    """The 95% Wilson interval of `right` of `n` (NaN, NaN when n is 0)."""
    return wilson_interval(right, n) if n else (float("nan"), float("nan"))


def pct(value: Any) -> str:
    """A share as a whole percent ("74%"); "–" for none (None or NaN)."""
    return "–" if value is None or value != value else f"{value:.0%}"


def rate_text(right: int, n: int) -> str:
    """A rate as a table shows it: "74% [60–85%] n=34" (95% Wilson interval); "–" for none."""
    if not n:
        return "– n=0"
    low, high = wilson_interval(right, n)
    return f"{right / n:.0%} [{low:.0%}–{high:.0%}] n={n}"


def rates_from_counts(counts: pd.DataFrame, by: list[str], right: str, n: str,
                      name: str = "rate") -> pd.DataFrame:
    """`rate_by`'s frame from counts already added up (`right` of `n` per row, several rows
    per group summed): per group `n`, the rate and its 95% Wilson interval; groups with no
    counted run are left out, as `rate_by` leaves out runs with no value."""
    if counts.empty:
        return pd.DataFrame(columns=[*by, "n", name, "low", "high"])
    out = counts.groupby(by, sort=True)[[right, n]].sum().reset_index()
    out = out[out[n] > 0]
    bounds = [interval(int(round(k)), int(m)) for k, m in zip(out[right], out[n])]
    return pd.DataFrame({**{key: out[key].to_numpy() for key in by},
                         "n": out[n].astype(int).to_numpy(),
                         name: (out[right] / out[n]).to_numpy(dtype=float),
                         "low": [b[0] for b in bounds], "high": [b[1] for b in bounds]})


def rate_by(runs: pd.DataFrame, column: str, by: str | list[str] = "group",
            name: str = "rate") -> pd.DataFrame:
    """Per group (one column or several): `n` runs with a value in `column`, the share of
    them that are true, and its 95% Wilson interval (`low`, `high`)."""
    keys = [by] if isinstance(by, str) else list(by)
    if runs.empty or column not in runs:
        return pd.DataFrame(columns=[*keys, "n", name, "low", "high"])
    values = runs[keys].assign(_v=as_flag(runs[column]), _n=1).dropna(subset=["_v"])
    return rates_from_counts(values, keys, "_v", "_n", name)


def table_of_rates(rates: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group of `rate_by`'s (or `rates_from_counts`') frame: `n`, how many were true
    (`right`), the `rate`, its 95% Wilson interval, the rate as text with both
    ("74% [60–85%] n=34") and `few` (n under `FEW`)."""
    right = [int(round(r * n)) for r, n in zip(rates["rate"], rates["n"])]
    return rates.assign(right=right, shown=[rate_text(k, int(n)) for k, n in
                                            zip(right, rates["n"])],
                        few=rates["n"] < FEW)[[*by, "n", "right", "rate", "low", "high",
                                               "shown", "few"]]


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


def grey_few(table: pd.DataFrame) -> Any:
    """A table styled for a page: every row whose `few` is true (a rate over fewer than
    `FEW` runs) in grey, so a small sample never reads like a large one."""
    def grey(row: pd.Series) -> list[str]:
        return ["color: #9e9e9e" if bool(row.get("few")) else ""] * len(row)
    return table.style.apply(grey, axis=1)
