"""Plotly figures for the Runs and Insights pages, from the frames `engine.reports.insights` builds.

Only plotly here: no store, no streamlit. Every builder takes plain data and returns a
`plotly.graph_objects.Figure`. Text from users or models (stances, labels, seat names) is
HTML-escaped before it reaches a figure, because plotly reads a few HTML tags in labels.
Figures are built in one go from trace and layout dicts: that validates once, about five
times faster than growing a figure with `update_layout` (it matters with 20 charts a page).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from engine.analysis.stats import wilson_interval
from engine.reports import vega
from engine.text import html_text

PALETTE = px.colors.qualitative.Safe
WINNER, OTHER, ACCENT = vega.WINNER, vega.OTHER, vega.ACCENT
LEVEL_COLORS = vega.LEVEL_COLORS


def _text(value: Any) -> str:
    """User or model text made literal for plotly, which reads a few HTML tags in labels."""
    return html_text(value)


def _texts(values: Any) -> list[str]:
    return [_text(v) for v in values]


def _short(text: Any, limit: int = 40) -> str:
    value = " ".join(str(text).split())
    return _text(value if len(value) <= limit else value[:limit - 1] + "…")


def _layout(title: str = "", height: int = 320, **kw: Any) -> dict[str, Any]:
    # No `template`: Streamlit's theme styles the figure, and copying a template into each
    # figure costs more than building the rest of the Insights page.
    layout: dict[str, Any] = {"height": height,
                              "margin": {"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
                              "legend": {"orientation": "h", "y": -0.2}}
    if title:  # titles name labels and stances too
        layout["title"] = {"text": _text(title), "font": {"size": 15}}
    layout.update(kw)
    return layout


def _figure(traces: list[dict[str, Any]], title: str = "", height: int = 320,
            **layout: Any) -> go.Figure:
    return go.Figure(data=traces, layout=_layout(title, height, **layout))


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
    trace = {"type": "sankey", "arrangement": "snap", "textfont": {"size": 14},
             "node": {"label": [_short(n, 60) for n in sources + targets], "pad": 18,
                      "thickness": 14, "color": colors + ["#b0bec5"] * len(targets),
                      "customdata": _texts(sources + targets),
                      "hovertemplate": "%{customdata}<extra></extra>"},
             "link": {"source": [index_s[str(s)] for s in links["source"]],
                      "target": [index_t[str(t)] for t in links["target"]],
                      "value": [float(v) for v in links["value"]], "customdata": hover,
                      "color": [_fade(colors[index_s[str(s)]]) for s in links["source"]],
                      "hovertemplate": "%{source.customdata} → %{target.customdata}: "
                                       "%{value}<br>%{customdata}<extra></extra>"}}
    return _figure([trace], title, max(280, 70 + 44 * max(len(sources), len(targets))))


def _fade(color: str) -> str:
    if color.startswith("rgb("):
        return color.replace("rgb(", "rgba(").replace(")", ",0.45)")
    if color.startswith("#") and len(color) == 7:
        r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
        return f"rgba({r},{g},{b},0.45)"
    return color


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


# --------------------------------------------------------------------------- across runs
FEW = 5  # a bar over fewer runs than this is drawn faded (as `aggregate.FEW` greys a row)


def _wilson(rate: float, n: Any) -> tuple[float, float]:
    """The 95% Wilson interval of a share over `n` runs (NaN, NaN without a count)."""
    try:
        count = int(n)
    except (TypeError, ValueError):
        return float("nan"), float("nan")
    if rate != rate or count <= 0:
        return float("nan"), float("nan")
    return wilson_interval(min(count, max(0, round(rate * count))), count)


def rate_bar(data: pd.DataFrame, x: str = "group", y: str | Sequence[str] = "rate",
             n: str | Sequence[str] = "n", title: str = "", y_title: str = "share",
             names: Sequence[str] | None = None,
             colors: Sequence[str] | None = None) -> go.Figure:
    """Shares per group (0..1, shown as %), one bar per group and y column (grouped), with
    each bar's count (`n`, one column or one per y column) and 95% Wilson interval as error
    bars and in its hover; a bar over fewer than `FEW` runs is faded and says its n.
    `colors`, one per y column, where the series have colours of their own (a protocol's)."""
    columns = [y] if isinstance(y, str) else list(y)
    counts_of = [n] * len(columns) if isinstance(n, str) else list(n)
    labels = list(names) if names is not None else columns
    traces = []
    if not data.empty:
        groups = _texts(data[x])
        colors = list(colors) if colors else [WINNER, ACCENT, OTHER, *PALETTE]
        for i, (column, count, label) in enumerate(zip(columns, counts_of, labels)):
            values = [float(v) for v in data[column]]
            counts = data[count].tolist() if count in data else [None] * len(data)
            bounds = [_wilson(v, c) for v, c in zip(values, counts)]
            few = [c is not None and c == c and int(c) < FEW for c in counts]
            color = colors[i % len(colors)]
            traces.append({
                "type": "bar", "x": groups, "y": values, "name": _text(label),
                "marker": {"color": [_fade(color) if f else color for f in few]},
                "error_y": {"type": "data", "symmetric": False, "color": "#555",
                            "array": [h - v if h == h else 0 for v, (_, h) in
                                      zip(values, bounds)],
                            "arrayminus": [v - lo if lo == lo else 0 for v, (lo, _) in
                                           zip(values, bounds)]},
                "text": [(f"{v:.0%}" if v == v else "") + (f" n={int(c)}" if f else "")
                         for v, c, f in zip(values, counts, few)],
                # A short bar cannot hold its label: put it above, so 0% still reads.
                "textposition": ["inside" if v == v and v >= 0.15 else "outside"
                                 for v in values], "cliponaxis": False,
                "customdata": [["" if c is None else c, lo, hi]
                               for c, (lo, hi) in zip(counts, bounds)],
                "hovertemplate": "%{x}: %{y:.1%} of n=%{customdata[0]} "
                                 "[95% CI %{customdata[1]:.0%}–%{customdata[2]:.0%}]"
                                 "<extra>%{fullData.name}</extra>"})
    return _figure(traces, title, barmode="group", showlegend=len(columns) > 1,
                   yaxis={"title": {"text": f"{y_title} (95% Wilson interval)"},
                          "tickformat": ".0%", "range": [0, 1.05]})


def stacked_counts(data: pd.DataFrame, x: str = "group", color: str = "value",
                   y: str = "count", order: Sequence[str] | None = None, title: str = "",
                   y_title: str = "runs") -> go.Figure:
    """Counts per group split by a category (stacked), e.g. confidence levels per label."""
    traces = []
    if not data.empty:
        groups, categories, table = vega.count_table(data, x, color, y, order)
        for i, category in enumerate(categories):
            traces.append({
                "type": "bar", "x": _texts(groups), "name": _short(category),
                "y": [int(table.get((g, category), 0)) for g in groups],
                "marker": {"color": LEVEL_COLORS.get(category, PALETTE[i % len(PALETTE)])},
                "hovertemplate": f"%{{x}}: %{{y}} {y_title} · %{{fullData.name}}"
                                 "<extra></extra>"})
    return _figure(traces, title, barmode="stack",
                   yaxis={"title": {"text": y_title}, "rangemode": "tozero"})


def histogram(data: pd.DataFrame, x: str, color: str | None = "group", title: str = "",
              x_title: str = "", bins: int = 10, x_range: Sequence[float] | None = None
              ) -> go.Figure:
    """The distribution of a number, one histogram per group, stacked: runs at the same
    value add up (two runs at 0.70 make a bar of height 2, whatever their groups)."""
    traces = []
    if not data.empty:
        groups = [(x, data)] if color is None else list(data.groupby(color, sort=True))
        start, end = (x_range if x_range is not None else
                      (float(data[x].min()), float(data[x].max()) or 1.0))
        size = (end - start) / bins or 1.0
        for i, (name, part) in enumerate(groups):
            traces.append({"type": "histogram", "x": part[x].tolist(), "name": _text(name),
                           "xbins": {"start": start, "end": end + 1e-9, "size": size},
                           "marker": {"color": PALETTE[i % len(PALETTE)]}})
    return _figure(traces, title, barmode="stack",
                   xaxis={"title": {"text": x_title or x}}, yaxis={"title": {"text": "runs"}})


def box(stats: pd.DataFrame, x: str = "group", color: str | None = None, title: str = "",
        y_title: str = "") -> go.Figure:
    """Box plots from precomputed statistics (`min, q1, median, q3, max, mean` per group), so
    the figure carries six numbers per box, not every run; one colour per `color` value."""
    traces = []
    if not stats.empty:
        parts = [(y_title, stats)] if color is None else list(stats.groupby(color, sort=True))
        for i, (name, part) in enumerate(parts):
            traces.append({"type": "box", "x": _texts(part[x]), "q1": part["q1"].tolist(),
                           "median": part["median"].tolist(), "q3": part["q3"].tolist(),
                           "lowerfence": part["min"].tolist(),
                           "upperfence": part["max"].tolist(), "mean": part["mean"].tolist(),
                           "marker": {"color": PALETTE[i % len(PALETTE)] if color else WINNER},
                           "name": _text(name)})
    return _figure(traces, title, showlegend=color is not None, boxmode="group",
                   yaxis={"title": {"text": y_title}, "rangemode": "tozero"})


def round_lines(points: pd.DataFrame, title: str = "") -> go.Figure:
    """Accuracy by round, one line per group with its dashed round-1 line
    (`engine.reports.rounds.accuracy_by_round_figure`, without published points: Insights
    pools questions from any set)."""
    from engine.reports.rounds import accuracy_by_round_figure
    return accuracy_by_round_figure(points, (), title)


def pareto(rows: pd.DataFrame, title: str = "", x: str = "tokens_per_run") -> go.Figure:
    """Accuracy against spend per configuration (`engine.reports.pareto.pareto_rows`), as
    `vega.pareto` draws it, for the static export: the front in colour and joined, the
    dominated grey, a 95% interval on each point."""
    axis, _ = vega.PARETO_AXES[x]
    traces = []
    for state, color in (("on the front", vega.FRONT), ("dominated", vega.DOMINATED)):
        part = rows[rows["dominated"] == (state == "dominated")] if not rows.empty else rows
        if part.empty:
            continue
        part = part.sort_values("spend")
        high = (part["high"].astype(float) - part["accuracy"]).tolist()
        low = (part["accuracy"] - part["low"].astype(float)).tolist()
        traces.append({"type": "scatter", "mode": "lines+markers+text" if state ==
                       "on the front" else "markers+text", "name": state,
                       "x": part["spend"].tolist(), "y": part["accuracy"].tolist(),
                       "text": _texts(part["configuration"]), "textposition": "top right",
                       "marker": {"color": color, "size": 10},
                       "line": {"color": color, "dash": "dot"},
                       "error_y": {"type": "data", "array": high, "arrayminus": low,
                                   "color": color},
                       "customdata": part["n"].tolist(),
                       "hovertemplate": "%{text}<br>%{y:.1%} (n=%{customdata})<extra></extra>"})
    return _figure(traces, title, xaxis={"title": {"text": axis}, "rangemode": "tozero"},
                   yaxis={"title": {"text": "accuracy (95% Wilson interval)"},
                          "range": [0, 1], "tickformat": ".0%"})


BUILDERS: dict[str, Callable[..., go.Figure]] = {
    "timeline": timeline, "tally_bar": tally_bar, "sankey": sankey, "seat_usage": seat_usage,
    "rate_bar": rate_bar, "stacked_counts": stacked_counts, "histogram": histogram, "box": box,
    "round_lines": round_lines, "pareto": pareto}


def figure(chart: Any) -> go.Figure:
    """The figure for an `insights.Chart` (its `kind` names a builder here)."""
    return BUILDERS[chart.kind](chart.data, title=chart.title, **chart.spec)
