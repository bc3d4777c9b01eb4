"""An experiment's reliability diagram, and the runs behind each of its points.

`reliability_figure` draws each configuration's calibration (`engine.reports.experiments.
calibration`: per confidence signal, its bins' accuracy against their mean confidence); a
point clicked on it names its bin (`picked_bin`), and `in_bin` lists exactly the runs the
diagram counted there (the bins are `engine.analysis.stats.bin_index`'s, as the diagram's).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from engine.analysis import stats
from engine.reports.experiments import counted
from engine.reports.rounds import clicked
from engine.text import html_text


def reliability_figure(calibrations: Sequence[Mapping[str, Any]], title: str = "") -> Any:
    """The reliability diagram: per configuration and signal, accuracy against mean
    confidence per bin (marker size = runs in the bin), with the diagonal of perfect
    calibration; ECE and Brier in the legend."""
    import plotly.graph_objects as go

    from engine.reports import charts
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfect calibration",
                             line={"dash": "dot", "color": "#999"}))
    for number, cal in enumerate(calibrations):
        bins = cal["bins"]
        fig.add_trace(go.Scatter(
            x=[b["confidence"] for b in bins], y=[b["accuracy"] for b in bins],
            mode="lines+markers",
            marker={"size": [8 + 16 * (b["count"] / max(1, cal["n"])) ** 0.5 for b in bins]},
            name=html_text(f"{cal['label']} · {cal['signal']} (ECE {cal['ece']:.3f}, Brier "
                           f"{cal['brier']:.3f}, n={cal['n']})"),
            customdata=[[b["count"], b["low"], b["high"],
                         b.get("bin", stats.bin_index(b["low"]))] for b in bins],
            meta={CALIBRATION: number},  # which calibration a clicked point is (`picked_bin`)
            hovertemplate="confidence %{x:.2f}<br>accuracy %{y:.2f}<br>%{customdata[0]} runs "
                          "in [%{customdata[1]:.1f}, %{customdata[2]:.1f})<extra></extra>"))
    return fig.update_layout(charts.results_layout(
        title, 420, xaxis={"title": "confidence", "range": [0, 1.02]},
        yaxis={"title": "share correct", "range": [0, 1.02]}))


CALIBRATION = "calibration"  # a reliability trace's meta key: its index in the calibrations


@dataclass(frozen=True)
class Bin:
    """A point of the reliability diagram: a configuration's runs whose `signal` falls in the
    confidence bin `index` (of `bins`)."""

    label: str
    signal: str
    index: int
    bins: int = 10

    def text(self) -> str:
        return (f"{self.label}, {self.signal} confidence in [{self.index / self.bins:.1f}, "
                f"{(self.index + 1) / self.bins:.1f}{']' if self.index == self.bins - 1 else ')'}")


def picked_bin(figure: Any, calibrations: Sequence[Mapping[str, Any]], event: Any
               ) -> Bin | None:
    """The bin whose point was clicked on `figure`, a `reliability_figure` of
    `calibrations`, from a plotly selection `event` (`st.plotly_chart`'s); None for no click
    or a click on the diagonal."""
    for number, point in clicked(figure, event, CALIBRATION):
        data = point.get("customdata")
        if 0 <= number < len(calibrations) and isinstance(data, list | tuple) and len(data) >= 4:
            cal = calibrations[number]
            return Bin(str(cal["label"]), str(cal["signal"]), int(data[3]))
    return None


def in_bin(frame: pd.DataFrame, chosen: Bin) -> pd.DataFrame:
    """The runs behind a point of the reliability diagram: the configuration's counted runs
    with a correctness and a `signal` in the bin (the runs `calibration` put there)."""
    if frame.empty:
        return frame
    rows = counted(frame, chosen.label)
    rows = rows[rows["correct"].notna() & rows[chosen.signal].notna()]
    inside = [stats.bin_index(float(v), chosen.bins) == chosen.index for v in rows[chosen.signal]]
    return rows[inside]
