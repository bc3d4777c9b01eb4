"""Over time: the experiments of one name, oldest first, each configuration's accuracy and
deliberation health (majority adoption, agreement inflation) by date, with a marker where its
configuration, its prompts or the question set's version changed from the experiment before.

Accuracy is over the counted, scored runs with its Wilson interval; the health measures are
the gate's (`engine.reports.gate`) at 95%. Simulated runs are labelled apart as everywhere
(`LABEL (simulated)`), so a line never joins a simulated point to a real one.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from engine.analysis.stats import Z95
from engine.reports import vega
from engine.reports.experiments import counted, report
from engine.reports.gate import MEASURES
from engine.store.experiments import list_experiments
from engine.views.aggregate import SIMULATED_SUFFIX

if TYPE_CHECKING:
    from engine.store import Store

TREND_COLUMNS = ["experiment", "created", "configuration", "measure", "value", "low", "high",
                 "n", "set_version", "changed"]
MEASURE_NAMES = ("accuracy", "majority adoption", "agreement inflation")
MAX_EXPERIMENTS = 200  # the newest of a name that a view reads


def changes(before: Mapping[str, Any] | None, after: Mapping[str, Any], label: str,
            version_before: str, version_after: str) -> list[str]:
    """What changed for configuration `label` from the experiment `before` (its spec; None
    for the first) to `after`: "configuration", "prompts", "question set" (in that order)."""
    if before is None:
        return []
    names = (label, label.removesuffix(SIMULATED_SUFFIX))
    old = next((c for c in before.get("configs", []) if c.get("label") in names), None)
    new = next((c for c in after.get("configs", []) if c.get("label") in names), None)
    out = []
    if old is not None and new is not None:
        # the rest of the configuration, its label and prompts set aside
        if {**old, "label": "", "prompts": ""} != {**new, "label": "", "prompts": ""}:
            out.append("configuration")
        if (old.get("prompts") or {}) != (new.get("prompts") or {}):
            out.append("prompts")
    if version_before and version_after and version_before != version_after:
        out.append("question set")
    return out


def over_time(store: Store, name: str) -> pd.DataFrame:
    """The trend of every experiment named `name` (`TREND_COLUMNS`, one row per experiment,
    configuration and measure, oldest first); `changed` says what changed since the
    experiment before ("" when nothing did)."""
    listed = list_experiments(store)
    mine = listed[listed["name"] == name].sort_values("created").tail(MAX_EXPERIMENTS)
    rows: list[dict[str, Any]] = []
    previous: tuple[Mapping[str, Any] | None, str] = (None, "")  # the spec and set version
    for experiment_id, created in zip(mine["id"], mine["created"], strict=True):
        result = report(store, str(experiment_id), "both")
        spec, version = result.experiment["spec"], result.experiment.get("set_version") or ""
        runs = result.runs
        for label in result.labels:
            done = counted(runs, label)
            if done.empty:
                continue
            moved = ", ".join(changes(previous[0], spec, label, previous[1], version))
            base = {"experiment": experiment_id, "created": created, "configuration": label,
                    "set_version": version, "changed": moved}
            # each measure's (value, low, high, n), or None where it is not measured
            found = {"accuracy": None, **{m: MEASURES[m](done, label, Z95)
                                          for m in MEASURE_NAMES[1:]}}
            summary = result.summary[result.summary["configuration"] == label]
            if not summary.empty and int(summary["scored"].iloc[0]):
                row = summary.iloc[0]
                found["accuracy"] = (float(row["accuracy"]), float(row["accuracy_low"]),
                                     float(row["accuracy_high"]), int(row["scored"]))
            rows += [{**base, "measure": measure, "value": v[0], "low": v[1], "high": v[2],
                      "n": v[3]} for measure, v in found.items() if v is not None]
        previous = (spec, version)
    return pd.DataFrame(rows, columns=TREND_COLUMNS)


def trend_spec(frame: pd.DataFrame, measure: str) -> dict[str, Any]:
    """A Vega-Lite line chart of one measure by date, a line per configuration, its points
    selectable (a click opens that experiment), and a ring around each point whose
    configuration, prompts or question set changed (its tooltip says which)."""
    data = frame[frame["measure"] == measure].assign(
        created=lambda f: f["created"].astype(str),
        marker=lambda f: f["changed"].map(lambda c: "changed: " + c if c else ""))
    values = json.loads(data.to_json(orient="records", date_format="iso"))
    encoding = {"x": {"field": "created", "type": "temporal", "title": "started"},
                "y": {"field": "value", "type": "quantitative", "title": measure,
                      "axis": {"format": ".0%"} if measure != "agreement inflation" else {}},
                "color": {"field": "configuration", "type": "nominal"}}
    tooltip = [{"field": f, "type": "nominal" if f in ("configuration", "experiment",
                                                       "set_version", "marker") else
                "quantitative", **({"format": ".2f"} if f in ("value", "low", "high") else {})}
               for f in ("configuration", "experiment", "value", "low", "high", "n",
                         "set_version", "marker")]
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "data": {"values": values}, "height": 260, "width": "container",
        "layer": [
            {"mark": {"type": "rule"}, "encoding": {
                "x": encoding["x"], "y": {"field": "low", "type": "quantitative"},
                "y2": {"field": "high"}, "color": encoding["color"]}},
            {"mark": {"type": "line", "point": False}, "encoding": encoding},
            {"mark": {"type": "point", "filled": True, "size": 80},
             "params": [{"name": vega.PICK, "select": {"type": "point", "fields": ["experiment"]}}],
             "encoding": {**encoding, "tooltip": tooltip}},
            {"transform": [{"filter": "datum.marker != ''"}],
             "mark": {"type": "point", "shape": "diamond", "size": 260, "filled": False,
                      "strokeWidth": 2, "color": "#c62828"},
             "encoding": {"x": encoding["x"], "y": encoding["y"], "tooltip": tooltip}}]}


def picked_experiment(event: Any) -> str | None:
    """The experiment of the point a click selected on `trend_spec`'s chart, from
    `st.vega_lite_chart`'s event (None when nothing is selected)."""
    found = (vega.selected(event) or {}).get("experiment")
    return str(found) if found else None
