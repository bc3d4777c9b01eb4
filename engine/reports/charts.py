"""Plotly figures for the Runs and Insights pages, from the frames `engine.reports.insights` builds.

Only plotly here: no store, no streamlit. Every builder takes plain data and returns a
`plotly.graph_objects.Figure`. Text from users or models (stances, labels, seat names) is
HTML-escaped before it reaches a figure, because plotly reads a few HTML tags in labels.
Figures are built in one go from trace and layout dicts: that validates once, about five
times faster than growing a figure with `update_layout` (it matters with 20 charts a page).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from engine.reports import vega
from engine.reports.rounds import accuracy_by_round_figure
from engine.text import html_text
from engine.views.aggregate import FEW

PALETTE = px.colors.qualitative.Safe
WINNER, OTHER, ACCENT = vega.WINNER, vega.OTHER, vega.ACCENT


def _texts(values: Any) -> list[str]:
    """User or model texts made literal for plotly, which reads a few HTML tags in labels."""
    return [html_text(v) for v in values]


def _short(text: Any, limit: int = 40) -> str:
    value = " ".join(str(text).split())
    return html_text(value if len(value) <= limit else value[:limit - 1] + "…")


def _layout(title: str = "", height: int = 320, **kw: Any) -> dict[str, Any]:
    # No `template`: Streamlit's theme styles the figure, and copying a template into each
    # figure costs more than building the rest of the Insights page.
    layout: dict[str, Any] = {"height": height,
                              "margin": {"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
                              "legend": {"orientation": "h", "y": -0.2}}
    if title:  # titles name labels and stances too
        layout["title"] = {"text": html_text(title), "font": {"size": 15}}
    layout.update(kw)
    return layout


def _figure(traces: list[dict[str, Any]], title: str = "", height: int = 320,
            **layout: Any) -> go.Figure:
    return go.Figure(data=traces, layout=_layout(title, height, **layout))


def results_layout(title: str, height: int, **layout: Any) -> dict[str, Any]:
    """The layout of an experiment's or a consensus report's figure: plotly's white template
    (the static export has no Streamlit theme), the legend under the plot."""
    return {**_layout(title, height, template="plotly_white",
                      legend={"orientation": "h", "y": -0.25}),
            **({"title": {"text": html_text(title)}} if title else {}), **layout}


def interval(value: pd.Series, low: pd.Series, high: pd.Series, **style: Any
             ) -> dict[str, Any]:
    """Error bars from `low` to `high` around `value`: an interval, drawn asymmetric."""
    return {"type": "data", "symmetric": False, "array": (high - value).tolist(),
            "arrayminus": (value - low).tolist(), **style}


def wilson_bars(name: str, x: Iterable[Any], rate: pd.Series, count: pd.Series,
                n: pd.Series, low: pd.Series, high: pd.Series, few_only: bool = False,
                color: str | None = None) -> go.Bar:
    """Bars of shares with their 95% Wilson interval as error bars and count/n in the hover;
    a bar over fewer than `FEW` runs is faded and says its n (every bar does unless
    `few_only`). Labels are text."""
    few = [int(v) < FEW for v in n]
    return go.Bar(
        name=html_text(name), x=_texts(x), y=list(rate),
        text=[f"n={v}" if f or not few_only else "" for v, f in zip(n, few, strict=True)],
        marker={"color": color, "opacity": [0.4 if f else 1.0 for f in few]},
        error_y=interval(rate, low, high),
        customdata=list(zip(count, n, low, high, strict=True)),
        hovertemplate="%{x}: %{y:.0%} (%{customdata[0]}/%{customdata[1]}, "
                      "n=%{customdata[1]}; 95% CI %{customdata[2]:.0%}–"
                      "%{customdata[3]:.0%})<extra>%{fullData.name}</extra>")


def share_bars(bars: list[go.Bar], y_title: str) -> go.Figure:
    """`wilson_bars` side by side, on an axis of shares from 0 to 100%."""
    return go.Figure(bars, results_layout("", 340, legend=None, barmode="group", yaxis={
        "title": y_title, "range": [0, 1.05], "tickformat": ".0%"}))


# --------------------------------------------------------------------------- one run
def timeline(frame: pd.DataFrame, title: str = "Calls over time") -> go.Figure:
    """A Gantt chart of the calls: one bar per call from start to finish, a row per seat,
    coloured by phase (degraded calls hatched), so calls that ran at once overlap in time."""
    if frame.empty:
        return _figure([], title)
    data = frame.assign(latency_s=frame["latency"].round(3), seat=_texts(frame["seat"]),
                        phase=_texts(frame["phase"]), status=_texts(frame["status"]))
    fig = px.timeline(data, x_start="start", x_end="finish", y="seat", color="phase",
                      pattern_shape="status", pattern_shape_map={"ok": "", "degraded": "/"},
                      hover_data={"call": True, "round": True, "status": True,
                                  "latency_s": True, "seat": False},
                      color_discrete_sequence=PALETTE,
                      category_orders={"seat": list(dict.fromkeys(data["seat"]))})
    fig.update_yaxes(autorange="reversed", title=None)
    fig.update_xaxes(title=None)
    fig.update_layout(**_layout(title, max(220, 70 + 38 * data["seat"].nunique())))
    return fig


def tally_bar(counts: Mapping[str, int], winner: str | None = None,
              title: str = "Vote tally") -> go.Figure:
    """Votes per stance, the winner in a stronger colour. Stances are categories: a category
    axis keeps "0.05" a labelled bar (plotly would read numeric strings as numbers)."""
    stances = sorted(counts, key=lambda s: (-counts[s], s))
    votes = [int(counts[s]) for s in stances]
    return _figure([{"type": "bar", "x": [_short(s) for s in stances], "y": votes,
                     "hovertext": _texts(stances), "text": votes, "textposition": "auto",
                     "hovertemplate": "%{hovertext}: %{y} vote(s)<extra></extra>",
                     "marker": {"color": [WINNER if s == winner else OTHER for s in stances]}}],
                   title, 280, xaxis={"type": "category"},
                   yaxis={"title": {"text": "votes"}, "dtick": 1, "rangemode": "tozero"})


def dynamics_lines(per_round: pd.DataFrame,
                   title: str = "Entropy and agreement by round") -> go.Figure:
    """A run's entropy in bits (left axis) and agreement, the plurality's share of the answers
    given (right axis, 0..1), per round (`engine.reports.run_dynamics`)."""
    rounds = per_round["round"].tolist()
    return _figure([
        {"type": "scatter", "mode": "lines+markers", "x": rounds, "name": "entropy (bits)",
         "y": per_round["entropy (bits)"].tolist(), "marker": {"color": ACCENT}},
        {"type": "scatter", "mode": "lines+markers", "x": rounds, "name": "agreement",
         "y": per_round["agreement"].tolist(), "yaxis": "y2", "marker": {"color": WINNER},
         "line": {"dash": "dash"}}],
        title, 280, xaxis={"title": {"text": "round"}, "dtick": 1},
        yaxis={"title": {"text": "entropy (bits)"}, "rangemode": "tozero"},
        yaxis2={"title": {"text": "agreement"}, "overlaying": "y", "side": "right",
                "range": [0, 1.05]})


def sankey(links: pd.DataFrame, title: str = "Stance before → after") -> go.Figure:
    """Flows from `source` to `target` nodes sized by `value` (hover shows `label` if given).

    Source and target nodes are kept apart ("before" on the left, "after" on the right) even
    when they carry the same name, so a held position reads as a straight band. Labels are
    14 px (plotly's default reads as fine print) and may name who holds each stance."""
    if links.empty:
        return _figure([], title)
    sources = list(dict.fromkeys(links["source"].astype(str)))
    targets = list(dict.fromkeys(links["target"].astype(str)))
    index_s = {s: i for i, s in enumerate(sources)}
    index_t = {t: len(sources) + i for i, t in enumerate(targets)}
    hover = _texts(links["label"]) if "label" in links else _texts(links["value"])
    colors = [PALETTE[i % len(PALETTE)] for i in range(len(sources))]
    faded = [c.replace("rgb(", "rgba(").replace(")", ",0.45)") for c in colors]  # the bands
    trace = {"type": "sankey", "arrangement": "snap", "textfont": {"size": 14},
             "node": {"label": [_short(n, 60) for n in sources + targets], "pad": 18,
                      "thickness": 14, "color": colors + ["#b0bec5"] * len(targets),
                      "customdata": _texts(sources + targets),
                      "hovertemplate": "%{customdata}<extra></extra>"},
             "link": {"source": [index_s[str(s)] for s in links["source"]],
                      "target": [index_t[str(t)] for t in links["target"]],
                      "value": [float(v) for v in links["value"]], "customdata": hover,
                      "color": [faded[index_s[str(s)]] for s in links["source"]],
                      "hovertemplate": "%{source.customdata} → %{target.customdata}: "
                                       "%{value}<br>%{customdata}<extra></extra>"}}
    return _figure([trace], title, max(280, 70 + 44 * max(len(sources), len(targets))))


def seat_usage(frame: pd.DataFrame, title: str = "Tokens and latency per seat") -> go.Figure:
    """Tokens in and out (stacked, left) and total latency (right), one bar per seat."""
    traces: list[dict[str, Any]] = []
    if not frame.empty:
        seats = _texts(frame["seat"])
        traces = [
            {"type": "bar", "x": seats, "y": frame["tokens_in"].tolist(), "name": "tokens in",
             "marker": {"color": WINNER}},
            {"type": "bar", "x": seats, "y": frame["tokens_out"].tolist(),
             "name": "tokens out", "marker": {"color": OTHER}},
            {"type": "bar", "x": seats, "y": frame["latency"].tolist(), "name": "latency (s)",
             "marker": {"color": ACCENT}, "xaxis": "x2", "yaxis": "y2",
             "customdata": frame["calls"].tolist(),
             "hovertemplate": "%{x}: %{y:.2f} s over %{customdata} call(s)<extra></extra>"}]
    return _figure(traces, title, 300, barmode="stack",
                   xaxis={"domain": [0, 0.46]}, xaxis2={"domain": [0.54, 1], "anchor": "y2"},
                   yaxis={"title": {"text": "tokens"}},
                   yaxis2={"title": {"text": "seconds"}, "anchor": "x2"})


# accuracy by round in Insights: without published points (it pools questions from any set)
BUILDERS: dict[str, Callable[..., go.Figure]] = {"sankey": sankey,
                                                 "round_lines": accuracy_by_round_figure}


def figure(chart: Any) -> go.Figure:
    """The figure for an `insights.Chart` of a kind Vega-Lite does not draw (`vega.spec`
    draws the rest)."""
    return BUILDERS[chart.kind](chart.data, title=chart.title, **chart.spec)
