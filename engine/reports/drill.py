"""Drilling down: from a point clicked on an Insights chart to the Runs page filtered to the
runs behind it.

A chart's point says which group (configuration label) or protocol it stands for on its x
axis, and which series (a protocol, a status) it belongs to; the section says which protocol
its charts are about. `params` turns that into the Runs page's query parameters (`protocol`,
`label`, `status`), which the page's filters read on arrival. Rates and means count completed
runs only, so a point of a rate opens the completed runs. A group shown as simulated beside
real ones ("Debate (simulated)") opens the simulated runs only (`model`: simulated).
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from engine.models import SIMULATED
from engine.views.aggregate import SIMULATED_SUFFIX
from engine.views.blocks import NO_LABEL, Chart

FILTERS = ("protocol", "label", "tag", "model", "status", "q")  # the Runs page's parameters
STATUSES = {"completed", "completed (degraded)", "failed", "interrupted", "running"}


def _protocol_of(title: str) -> str | None:
    from engine.protocols import REGISTRY
    title = title.removesuffix(SIMULATED_SUFFIX)
    for name, spec in REGISTRY.items():
        if title in (spec.title, name):
            return name
    return None


def _label_of(group: str) -> str | None:
    """A chart's group as a label filter (None for runs without a label: no filter says so)."""
    group = group.removesuffix(SIMULATED_SUFFIX)
    return None if not group or group == NO_LABEL else group


def params(section: str, chart: Chart, trace_name: str, point: Mapping[str, Any]
           ) -> dict[str, str]:
    """The Runs page's query parameters for the runs behind `point` (a plotly selection
    point: its `x`) of `chart` in the Insights section `section`, whose series is named
    `trace_name`."""
    from engine.protocols import REGISTRY
    out: dict[str, str] = {}
    if section in REGISTRY:
        out["protocol"] = section
    x = str(point.get("x") or "")
    by_protocol = _protocol_of(x)
    if by_protocol is not None and (chart.spec.get("x") in ("protocol_title",) or
                                    section == "overview"):
        out["protocol"] = by_protocol
    elif chart.kind != "histogram" and x:
        label = _label_of(x)
        if label is not None:
            out["label"] = label
    series = trace_name.removesuffix(SIMULATED_SUFFIX)
    if series in STATUSES:
        out["status"] = series.removesuffix(" (degraded)")
    elif (protocol := _protocol_of(series)) is not None:
        out["protocol"] = protocol
    elif chart.kind == "box" and chart.spec.get("color") == "group":
        label = _label_of(series)
        if label is not None:
            out["label"] = label
    if chart.kind in ("rate_bar", "box", "histogram", "round_lines") and "status" not in out:
        out["status"] = "completed"
    if x.endswith(SIMULATED_SUFFIX) or trace_name.endswith(SIMULATED_SUFFIX):
        # a simulated group beside real ones: the runs any seat of which the simulated model
        # played (the Runs page's model filter matches a part of the run's model specs)
        out["model"] = SIMULATED
    return out


def row_params(section: str, row: Mapping[Hashable, Any], *, simulated: bool = False
               ) -> dict[str, str]:
    """The Runs page's query parameters for a row of an Insights section's table (its
    `label` and `protocol` columns; the section's protocol otherwise). Its rates count
    completed runs, so the completed ones open; a row of simulated runs (`simulated`, or a
    label shown " (simulated)" beside real ones) opens the simulated runs only."""
    from engine.protocols import REGISTRY
    out: dict[str, str] = {"protocol": section} if section in REGISTRY else {}
    protocol = _protocol_of(str(row.get("protocol") or ""))
    if protocol is not None:
        out["protocol"] = protocol
    label = _label_of(str(row.get("label") or row.get("group") or ""))
    if label is not None:
        out["label"] = label
    out["status"] = "completed"
    if simulated or str(row.get("label") or row.get("group") or "").endswith(SIMULATED_SUFFIX):
        out["model"] = SIMULATED
    return out
