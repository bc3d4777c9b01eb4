"""Vega-Lite specs for the charts a page opens with (`st.vega_lite_chart`), beside the plotly
figures of `engine.reports.charts`.

Why two libraries: in the browser, plotly's frontend is one 4.7 MB chunk that Chromium fetches
and compiles on the first plotly chart a tab shows, 1.2-2 s of a first visit (measured by
`python -m engine bench --only browser`). Streamlit's Vega-Lite chunk is a fifth of that. So the
bar charts, histograms and box plots of the Insights overview and sections (`rate_bar`,
`stacked_counts`, `histogram`, `box`) and an experiment's accuracy are Vega-Lite here; the rest
(Sankeys, a run's timeline, lines by round) and the static HTML export stay plotly.

Only plain dicts here: no store, no streamlit. Vega draws text as text (SVG text nodes, and its
tooltips escape HTML), so labels from users or models go in as they are, never HTML-escaped:
escaping would show "&amp;" to the reader. Numbers that are not numbers (NaN) become null,
which JSON can carry.

The bars of a clickable spec carry the fields `group` (the x value: a label or a protocol) and
`series` (the colour: a status, a protocol, a measure) and a point selection `pick` over both,
so a click on a bar tells the page which runs it stands for (`picked`).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from engine.analysis.stats import wilson_interval
from engine.views.aggregate import FEW

PICK = "pick"  # the selection parameter of every clickable spec
WINNER, OTHER, ACCENT = "#3558c9", "#9aa7c7", "#f9a825"
PALETTE = ["#88CCEE", "#CC6677", "#DDCC77", "#117733", "#332288", "#AA4499", "#44AA99",
           "#999933", "#882255", "#661100", "#888888"]  # plotly's "Safe"
LEVEL_COLORS = {"high": "#2e7d32", "medium": "#f9a825", "low": "#c62828",
                "strong": "#2e7d32", "moderate": "#7cb342", "weak": "#f9a825", "none": "#c62828",
                "qualified-draft": "#2e7d32", "blocked-escalated": "#c62828",
                "converged": "#2e7d32", "finished": "#90a4ae", "failed": "#c62828",
                "completed": "#2e7d32", "running": "#3558c9", "interrupted": "#f9a825",
                "completed (degraded)": "#ff8f00",
                "not approved": "#c62828"}  # a level or an ending, in the same colour anywhere
WHOLE = {"tickMinStep": 1, "format": "d"}  # an axis of counts: no tick at 2.5 runs


def _number(value: Any) -> float | None:
    """A float JSON can carry: None for NaN, None or what is not a number."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number or number in (float("inf"), float("-inf")) else number


def _count(value: Any) -> int | None:
    """A whole count JSON and the interval can carry (None past 2**53: not a count of runs)."""
    number = _number(value)
    return None if number is None or abs(number) > 2 ** 53 else int(number)


def _base(title: str, height: int) -> dict[str, Any]:
    # the plot is `height` tall whatever its labels and legend take (Streamlit fits the
    # width to the column: "fit-x")
    spec: dict[str, Any] = {"height": height, "autosize": {"type": "fit-x"}}
    if title:
        spec["title"] = {"text": str(title), "fontSize": 15, "anchor": "start"}
    return spec


def _pick() -> dict[str, Any]:
    """The click selection: one bar, by its group and series."""
    return {"name": PICK, "select": {"type": "point", "fields": ["group", "series"]}}


def _x(groups: Sequence[str]) -> dict[str, Any]:
    """The groups' axis: every label shown (Vega would hide the ones that overlap: in a half
    width column it showed 2 of 8 protocols), slanted when there are more than four."""
    return {"field": "group", "type": "nominal", "sort": list(groups), "title": None,
            "axis": {"labelLimit": 140, "labelOverlap": False,
                     "labelAngle": -40 if len(groups) > 4 else 0}}


def _colors(series: Sequence[str], colors: Mapping[str, str] | Sequence[str] | None
            ) -> dict[str, Any]:
    """A colour scale naming its domain, so a series keeps its colour whichever others are
    present."""
    if isinstance(colors, Mapping):
        used = [colors.get(s, PALETTE[i % len(PALETTE)]) for i, s in enumerate(series)]
    else:
        palette = list(colors or PALETTE)
        used = [palette[i % len(palette)] for i in range(len(series))]
    return {"domain": list(series), "range": used}


def stacked_counts(data: pd.DataFrame, x: str = "group", color: str = "value",
                   y: str = "count", order: Sequence[str] | None = None, title: str = "",
                   y_title: str = "runs", colors: Mapping[str, str] | None = None
                   ) -> dict[str, Any]:
    """Counts per group split by a category (stacked), e.g. runs per protocol by how they
    ended; categories in `order` first, each in its colour from `colors`."""
    spec = _base(title, 320)
    if data.empty:
        return {**spec, "data": {"values": []}, "mark": "bar"}
    present = list(dict.fromkeys(data[color].astype(str)))
    categories = [c for c in (order or []) if c in present] + \
        [c for c in present if c not in (order or [])]
    groups = list(dict.fromkeys(data[x].astype(str)))
    table = (data.assign(**{x: data[x].astype(str), color: data[color].astype(str)})
             .groupby([x, color], sort=False)[y].sum())
    rows = [{"group": g, "series": c, "count": int(table.get((g, c), 0)),
             "rank": categories.index(c)}
            for g in groups for c in categories if int(table.get((g, c), 0))]
    return {**spec, "data": {"values": rows}, "params": [_pick()],
            "mark": {"type": "bar", "cursor": "pointer"},
            "encoding": {
                "x": _x(groups),
                "y": {"field": "count", "type": "quantitative", "stack": "zero",
                      "title": y_title, "axis": WHOLE},
                "color": {"field": "series", "type": "nominal", "title": None,
                          "scale": _colors(categories, colors),
                          "legend": {"orient": "bottom", "labelLimit": 200}},
                "order": {"field": "rank", "type": "quantitative"},
                "tooltip": [{"field": "group", "type": "nominal", "title": x},
                            {"field": "series", "type": "nominal", "title": color},
                            {"field": "count", "type": "quantitative", "title": y_title}]}}


def rate_bar(data: pd.DataFrame, x: str = "group", y: str | Sequence[str] = "rate",
             n: str | Sequence[str] = "n", title: str = "", y_title: str = "share",
             names: Sequence[str] | None = None,
             colors: Sequence[str] | None = None) -> dict[str, Any]:
    """Shares per group (0..1, shown as %), one bar per group and y column (side by side),
    each with its count (`n`, one column or one per y column) and 95% Wilson interval as an
    error bar and in its tooltip; a bar over fewer than `FEW` runs is faded and says its n.
    A share without runs (NaN) has no bar."""
    columns = [y] if isinstance(y, str) else list(y)
    counts_of = [n] * len(columns) if isinstance(n, str) else list(n)
    labels = [str(v) for v in (names if names is not None else columns)]
    groups = list(dict.fromkeys(data[x].astype(str))) if not data.empty else []
    rows: list[dict[str, Any]] = []
    for column, count, label in zip(columns, counts_of, labels) if not data.empty else ():
        for group, value, c in zip(data[x].astype(str), data[column],
                                   data[count] if count in data else [None] * len(data)):
            rate, runs = _number(value), _count(c)
            runs = runs if runs is not None and runs >= 0 else None  # no count, no interval
            if rate is None:
                continue
            share = min(max(rate, 0.0), 1.0)  # a share: never more successes than runs
            low, high = (wilson_interval(min(runs, round(share * runs)), runs)
                         if runs else (None, None))
            rows.append(_rate_row(group, label, rate, runs, low, high))
    return rate_spec(rows, groups, labels, title, f"{y_title} (95% Wilson interval)",
                     colors or [WINNER, ACCENT, OTHER, *PALETTE])


def _rate_row(group: str, series: str, rate: float, runs: int | None, low: float | None,
              high: float | None) -> dict[str, Any]:
    """One bar of `rate_spec`: faded, and saying its n, over fewer than `FEW` runs."""
    few = runs is not None and runs < FEW
    return {"group": group, "series": series, "rate": rate, "n": runs, "low": low,
            "high": high, "few": few, "text": f"{rate:.0%}" + (f" n={runs}" if few else "")}


def rate_spec(rows: list[dict[str, Any]], groups: Sequence[str], series: Sequence[str],
              title: str, y_title: str, colors: Sequence[str]) -> dict[str, Any]:
    """Bars of shares from rows of `group, series, rate, n, low, high, few, text`, with error
    bars, labels and a tooltip giving n and the interval."""
    spec = _base(title, 320)
    many = len(series) > 1
    offset = {"xOffset": {"field": "series", "type": "nominal", "sort": list(series)}} \
        if many else {}
    x = _x(groups)
    y = {"field": "rate", "type": "quantitative", "title": y_title,
         "scale": {"domain": [0, 1], "nice": False}, "axis": {"format": ".0%"}}
    tooltip = [{"field": "group", "type": "nominal", "title": "group"},
               {"field": "series", "type": "nominal", "title": "series"},
               {"field": "rate", "type": "quantitative", "format": ".1%", "title": "share"},
               {"field": "n", "type": "quantitative", "title": "n"},
               {"field": "low", "type": "quantitative", "format": ".0%", "title": "95% CI low"},
               {"field": "high", "type": "quantitative", "format": ".0%",
                "title": "95% CI high"}]
    bars = {"params": [_pick()], "mark": {"type": "bar", "cursor": "pointer", "clip": True},
            "encoding": {"x": x, "y": y, **offset,
                         "color": {"field": "series", "type": "nominal", "title": None,
                                   "scale": _colors(series, colors),
                                   "legend": {"orient": "bottom"} if many else None},
                         "opacity": {"condition": {"test": "datum.few", "value": 0.45},
                                     "value": 1},
                         "tooltip": tooltip}}
    errors = {"mark": {"type": "rule", "color": "#555"},
              "encoding": {"x": x, **offset, "y": {"field": "low", "type": "quantitative"},
                           "y2": {"field": "high"}}}
    # each label above its error bar, where no whisker runs through it
    labels = {"transform": [{"calculate": "datum.high != null ? datum.high : datum.rate",
                             "as": "top"}],
              "mark": {"type": "text", "dy": -4, "baseline": "bottom", "fontSize": 11},
              "encoding": {"x": x, **offset,
                           "y": {"field": "top", "type": "quantitative"},
                           "text": {"field": "text", "type": "nominal"}}}
    return {**spec, "data": {"values": rows}, "layer": [bars, errors, labels]}


PUBLISHED_COLOR = "#d81b60"


def _published_layers(published: Sequence[Any], groups: Sequence[str]) -> list[dict[str, Any]]:
    """Published accuracies (`references.Published`) as diamonds over their configuration's
    bar, each labelled "published (theirs): ..." so it is never read as Parley's own."""
    rows = [{"group": group, "published": p.accuracy, "label": p.label,
             "source": f"{p.citation}; {p.model}"}
            for p in published for group in groups if p.fits(group)]
    if not rows:
        return []
    x = _x(groups)
    y = {"field": "published", "type": "quantitative"}
    return [{"data": {"values": rows},
             "mark": {"type": "point", "shape": "diamond", "filled": True, "size": 140,
                      "color": PUBLISHED_COLOR},
             "encoding": {"x": x, "y": y, "tooltip": [
                 {"field": "label", "type": "nominal", "title": "published"},
                 {"field": "source", "type": "nominal", "title": "source"}]}},
            {"data": {"values": rows},
             "mark": {"type": "text", "dx": 8, "align": "left", "fontSize": 10,
                      "color": PUBLISHED_COLOR},
             "encoding": {"x": x, "y": y, "text": {"field": "label", "type": "nominal"}}}]


def accuracy(table: pd.DataFrame, title: str = "", published: Sequence[Any] = ()
             ) -> dict[str, Any]:
    """An experiment's accuracy per configuration (`experiments.Report.summary`: its
    `configuration, accuracy, accuracy_low, accuracy_high, scored` columns), with
    its 95% Wilson interval and n; a bar over fewer than `FEW` scored runs is faded.
    `published` (`references.published`): their figures, as labelled diamonds."""
    scored = table[table["scored"] > 0]
    rows = []
    for row in scored.itertuples(index=False):
        runs, rate = _count(row.scored) or 0, _number(row.accuracy)
        if rate is None:
            continue
        rows.append(_rate_row(str(row.configuration), "accuracy", rate, runs,
                              _number(row.accuracy_low), _number(row.accuracy_high)))
    groups = [str(c) for c in scored["configuration"]]
    spec = rate_spec(rows, groups, ["accuracy"], title, "accuracy (95% Wilson interval)",
                     [WINNER])
    return {**spec, "height": ACCURACY_HEIGHT,
            "layer": [*spec["layer"], *_published_layers(published, groups)]}


ACCURACY_HEIGHT = 240  # px of plot: a share from 0 to 100% reads at this height
BAR_STEP = 120  # px of width per configuration of `accuracy`
FRAME = 180  # px of width for the axis and its title


LABELLED = 200  # px more for the published figures' labels, written right of their diamonds


def fitted_width(groups: int, labelled: bool = False) -> int:
    """The width in pixels of a bar chart of `groups` bars sized to its data (`BAR_STEP` per
    bar and `FRAME` for the axis and its title, `LABELLED` more when published figures are
    labelled beside the bars): two configurations take 420 px, not the page's width.
    Streamlit narrows it to the column when the column is narrower."""
    return FRAME + BAR_STEP * max(1, groups) + (LABELLED if labelled else 0)


def histogram(data: pd.DataFrame, x: str, color: str | None = "group", title: str = "",
              x_title: str = "", bins: int = 10, x_range: Sequence[float] | None = None
              ) -> dict[str, Any]:
    """The distribution of a number in `bins` equal bins over `x_range` (else the data's
    range), one colour per `color` value, stacked: runs in the same bin add up (two runs at
    0.70 make a bar of height 2, whatever their groups). A value on the upper edge counts in
    the last bin; a value outside the range or not a number counts nowhere. Not clickable:
    the Runs page cannot filter on a bin's range, so no click would open only its runs."""
    spec = _base(title, 320)
    values = pd.to_numeric(data[x], errors="coerce") if not data.empty else pd.Series([])
    finite = values[values.abs() < float("inf")]
    if finite.empty:
        return {**spec, "data": {"values": []}, "mark": "bar"}
    start, end = ((float(x_range[0]), float(x_range[1])) if x_range is not None else
                  (float(finite.min()), float(finite.max()) or 1.0))
    end = end if end > start else start + 1.0  # one value: a bin of width 0.1 from it
    size = (end - start) / bins
    names = (data[color].astype(str) if color is not None and color in data
             else pd.Series([x_title or x] * len(data), index=data.index))
    counts: dict[tuple[str, int], int] = {}
    for name, value in zip(names, values):
        if not start <= value <= end:  # NaN compares false: left out
            continue
        # rounded first: 0.7 / 0.1 is 6.999..., and 0.7 belongs in the bin from 0.7
        index = min(math.floor(round((value - start) / size, 9)), bins - 1)
        counts[(name, index)] = counts.get((name, index), 0) + 1
    series = sorted({name for name, _ in counts})
    rows = [{"series": name, "start": start + i * size, "end": start + (i + 1) * size,
             "count": n} for (name, i), n in sorted(counts.items())]
    return {**spec, "data": {"values": rows}, "mark": {"type": "bar", "binSpacing": 1},
            "encoding": {
                "x": {"field": "start", "type": "quantitative", "title": x_title or x,
                      "scale": {"domain": [start, end]}, "bin": {"binned": True,
                                                                "step": size}},
                "x2": {"field": "end"},
                "y": {"field": "count", "type": "quantitative", "stack": "zero",
                      "title": "runs", "axis": WHOLE},
                "color": {"field": "series", "type": "nominal", "title": None,
                          "scale": _colors(series, None),
                          "legend": {"orient": "bottom", "labelLimit": 200}},
                "tooltip": [{"field": "series", "type": "nominal", "title": color or x},
                            {"field": "start", "type": "quantitative", "title": "from",
                             "format": ".2f"},
                            {"field": "end", "type": "quantitative", "title": "to",
                             "format": ".2f"},
                            {"field": "count", "type": "quantitative", "title": "runs"}]}}


def box(stats: pd.DataFrame, x: str = "group", color: str | None = None, title: str = "",
        y_title: str = "") -> dict[str, Any]:
    """Box plots from precomputed statistics (`min, q1, median, q3, max, mean` per group), so
    the spec carries six numbers per box, not every run: the box spans q1 to q3, the whisker
    min to max, a solid tick the median and a dashed one the mean; one colour (side by side)
    per `color` value. A click on a box selects its group and series."""
    spec = _base(title, 320)
    fields = ("min", "q1", "median", "q3", "max", "mean")
    rows: list[dict[str, Any]] = []
    for record in stats.to_dict("records") if not stats.empty else []:
        row = {f: _number(record.get(f)) for f in fields}
        if row["q1"] is None or row["q3"] is None:
            continue
        rows.append({"group": str(record.get(x)), "series": str(
            record.get(color) if color is not None else (y_title or "value")), **row})
    if not rows:
        return {**spec, "data": {"values": []}, "mark": "bar"}
    groups = list(dict.fromkeys(str(r["group"]) for r in rows))
    series = list(dict.fromkeys(str(r["series"]) for r in rows))
    many = color is not None
    offset = {"xOffset": {"field": "series", "type": "nominal", "sort": series}} if many else {}
    xs = {"x": _x(groups), **offset}
    colour = {"field": "series", "type": "nominal", "title": None,
              "scale": _colors(series, None if many else [WINNER]),
              "legend": {"orient": "bottom", "labelLimit": 200} if many else None}
    tooltip = [{"field": "group", "type": "nominal", "title": x},
               *([{"field": "series", "type": "nominal", "title": color}] if many else []),
               *({"field": f, "type": "quantitative", "format": ",.2f"} for f in fields)]
    quantity = {"type": "quantitative", "title": y_title or None}
    def line(field: str, **mark: Any) -> dict[str, Any]:
        """A line across the box at `field`: a bar of no height, drawn by its outline (a
        tick mark would not line up with a box beside others)."""
        return {"transform": [{"filter": f"datum.{field} != null"}],
                "mark": {"type": "bar", "fill": None, "stroke": "#222", **mark},
                "encoding": {**xs, "y": {"field": field, "type": "quantitative"},
                             "y2": {"field": field}}}

    return {**spec, "data": {"values": rows}, "layer": [
        {"transform": [{"filter": "datum.min != null && datum.max != null"}],
         "mark": {"type": "bar", "width": 1, "color": "#555"},  # centred, as a rule is not
         "encoding": {**xs, "y": {"field": "min", **quantity}, "y2": {"field": "max"}}},
        {"params": [_pick()], "mark": {"type": "bar", "cursor": "pointer"},
         "encoding": {**xs, "y": {"field": "q1", **quantity}, "y2": {"field": "q3"},
                      "color": colour, "tooltip": tooltip}},
        line("median", strokeWidth=2),
        line("mean", strokeWidth=1, strokeDash=[4, 3])]}


TALLY_HEIGHT, TALLY_VOTE = 280, 26  # px: the tallest tally, and its height per vote


def tally(counts: Mapping[str, int], winner: str | None = None,
          title: str = "Vote tally") -> dict[str, Any]:
    """Votes per stance, most first, the winner in a stronger colour. Stances are categories
    (a nominal axis): "0.05" stays a labelled bar, never a point on a number line. The chart
    is sized to its data: `TALLY_VOTE` px of height per vote of the largest bar (at most
    `TALLY_HEIGHT`), a fixed step per bar in width; draw it at its own width
    (`st.vega_lite_chart(..., width="content")`)."""
    stances = sorted(counts, key=lambda s: (-int(counts[s]), str(s)))
    rows = [{"group": str(s), "votes": int(counts[s]), "winner": s == winner}
            for s in stances]
    most = max((int(v) for v in counts.values()), default=0)
    spec = _base(title, min(TALLY_HEIGHT, max(90, 40 + TALLY_VOTE * most)))
    # sized to the data: a step per bar (wide enough for its label), not the column's width
    longest = max((len(str(s)) for s in stances), default=1)
    spec["autosize"] = {"type": "pad"}  # (with "fit-x" and no width the plot collapses)
    spec["width"] = {"step": max(48, min(140, 8 * longest))}
    x = _x([str(s) for s in stances])
    return {**spec, "data": {"values": rows}, "layer": [
        {"mark": {"type": "bar"},
         "encoding": {"x": x, "y": {"field": "votes", "type": "quantitative", "title": "votes",
                                    "axis": WHOLE},
                      "color": {"condition": {"test": "datum.winner", "value": WINNER},
                                "value": OTHER},
                      "tooltip": [{"field": "group", "type": "nominal", "title": "stance"},
                                  {"field": "votes", "type": "quantitative",
                                   "title": "votes"}]}},
        {"mark": {"type": "text", "dy": -4, "baseline": "bottom", "fontSize": 11},
         "encoding": {"x": x, "y": {"field": "votes", "type": "quantitative"},
                      "text": {"field": "votes", "type": "quantitative"}}}]}


PARETO_AXES = {"cost_per_run": ("mean cost per run (US$)", "$,.4f"),
               "tokens_per_run": ("mean tokens per run", ",.0f")}
FRONT, DOMINATED = "#3558c9", "#b0b0b0"  # the Pareto front, and what it dominates


def pareto(rows: pd.DataFrame, title: str = "", x: str = "tokens_per_run"
           ) -> dict[str, Any]:
    """A Vega-Lite scatter of `engine.reports.pareto.pareto_rows`: accuracy against spend
    (`x`: `PARETO_AXES`), a vertical 95% interval on each point, the front in colour and
    joined by a line, dominated points grey, each labelled; a point over fewer than `FEW`
    scored runs is faded."""
    axis_title, fmt = PARETO_AXES[x]
    values = [{**{k: (None if isinstance(v, float) and v != v else v)
                  for k, v in r.items()},
               "state": "dominated" if r["dominated"] else "on the front",
               "few": r["n"] < FEW} for r in rows.to_dict("records")]
    xs = {"field": "spend", "type": "quantitative", "title": axis_title,
          "axis": {"format": fmt}, "scale": {"zero": True}}
    y = {"field": "accuracy", "type": "quantitative", "title": "accuracy (95% Wilson interval)",
         "scale": {"domain": [0, 1], "nice": False}, "axis": {"format": ".0%"}}
    color = {"field": "state", "type": "nominal", "title": None,
             "scale": {"domain": ["on the front", "dominated"], "range": [FRONT, DOMINATED]},
             "legend": {"orient": "bottom"}}
    tooltip = [{"field": "configuration", "type": "nominal"},
               {"field": "spend", "type": "quantitative", "format": fmt, "title": axis_title},
               *interval_tooltip("accuracy"),
               {"field": "n", "type": "quantitative", "title": "n (scored runs)"},
               {"field": "dominated_by", "type": "nominal", "title": "dominated by"}]
    front = {"transform": [{"filter": "!datum.dominated"}],
             "mark": {"type": "line", "color": FRONT, "strokeDash": [4, 3]},
             "encoding": {"x": xs, "y": y, "order": {"field": "spend"}}}
    return {**_base(title, 340), "data": {"values": values},
            "layer": [front, *labelled_points(xs, y, color, tooltip, "configuration", opacity={
                "condition": {"test": "datum.few", "value": 0.45}, "value": 1})]}


def labelled_points(x: dict[str, Any], y: dict[str, Any], color: dict[str, Any],
                    tooltip: list[dict[str, Any]], label: str, **point: Any
                    ) -> list[dict[str, Any]]:
    """A scatter's layers: each row's 95% interval as a rule from `low` to `high`, its point
    (filled; `point` adds to the point's encoding) and its `label` field written beside it."""
    return [{"mark": {"type": "rule"},
             "encoding": {"x": x, "y": {"field": "low", "type": "quantitative"},
                          "y2": {"field": "high"}, "color": color}},
            {"mark": {"type": "point", "filled": True, "size": 90},
             "encoding": {"x": x, "y": y, "color": color, "tooltip": tooltip, **point}},
            {"mark": {"type": "text", "align": "left", "dx": 7, "dy": -7, "fontSize": 11,
                      "limit": 180},
             "encoding": {"x": x, "y": y, "text": {"field": label}, "color": color}}]



def interval_tooltip(rate: str, title: str | None = None) -> list[dict[str, Any]]:
    """A rate's tooltip lines: the rate (`rate` field) and its 95% interval (`low`, `high`)."""
    return [{"field": rate, "type": "quantitative", "format": ".1%",
             **({"title": title} if title else {})},
            {"field": "low", "type": "quantitative", "format": ".0%", "title": "95% CI low"},
            {"field": "high", "type": "quantitative", "format": ".0%", "title": "95% CI high"}]


def heatmap(cells: pd.DataFrame, title: str = "", x_title: str = "moved",
            y_title: str = "mover") -> dict[str, Any]:
    """A clickable matrix of rates: one cell per row of `cells` (`group` on the y axis,
    `series` on the x axis, `rate` with `low`/`high` its 95% interval, `count` of `n`, `runs`),
    coloured by the rate (0 to 1), its text "count/n"; a cell over fewer than `FEW` chances
    is faded. A click picks the cell (`picked` gives its group and series)."""
    values = [{"group": str(r["group"]), "series": str(r["series"]),
               "rate": _number(r["rate"]), "low": _number(r["low"]),
               "high": _number(r["high"]), "count": _count(r["count"]), "n": _count(r["n"]),
               "runs": _count(r["runs"]), "text": f"{_count(r['count'])}/{_count(r['n'])}",
               "few": (_count(r["n"]) or 0) < FEW} for r in cells.to_dict("records")]
    rows = sorted({str(v["group"]) for v in values})
    columns = sorted({str(v["series"]) for v in values})
    x = {"field": "series", "type": "nominal", "sort": columns, "title": x_title,
         "axis": {"labelLimit": 160, "labelAngle": -30 if len(columns) > 3 else 0}}
    y = {"field": "group", "type": "nominal", "sort": rows, "title": y_title,
         "axis": {"labelLimit": 160}}
    tooltip = [{"field": "group", "type": "nominal", "title": y_title},
               {"field": "series", "type": "nominal", "title": x_title},
               *interval_tooltip("rate", "moved rate"),
               {"field": "count", "type": "quantitative", "title": "flips"},
               {"field": "n", "type": "quantitative", "title": "opportunities"},
               {"field": "runs", "type": "quantitative", "title": "runs"}]
    rect = {"mark": {"type": "rect", "stroke": "white", "cursor": "pointer"},
            "params": [_pick()],
            "encoding": {"x": x, "y": y, "tooltip": tooltip,
                         "color": {"field": "rate", "type": "quantitative",
                                   "title": "moved rate", "legend": {"format": ".0%"},
                                   "scale": {"domain": [0, 1], "scheme": "blues"}},
                         "opacity": {"condition": {"test": "datum.few", "value": 0.45},
                                     "value": 1}}}
    text = {"mark": {"type": "text", "fontSize": 12},
            "encoding": {"x": x, "y": y, "text": {"field": "text"},
                         "color": {"condition": {"test": "datum.rate > 0.5", "value": "white"},
                                   "value": "black"}}}
    height = max(160, 48 * len(rows))
    return {**_base(title, height), "data": {"values": values}, "layer": [rect, text]}


BUILDERS: dict[str, Callable[..., dict[str, Any]]] = {"rate_bar": rate_bar,
                                                      "stacked_counts": stacked_counts,
                                                      "histogram": histogram, "box": box,
                                                      "pareto": pareto, "heatmap": heatmap}


def clickable(spec: dict[str, Any]) -> bool:
    """Whether a click on one of the spec's bars selects it (`picked`)."""
    layers = [spec, *spec.get("layer", [])]
    return any(p.get("name") == PICK for layer in layers for p in layer.get("params", []))


def spec(chart: Any) -> dict[str, Any] | None:
    """The Vega-Lite spec of an `insights.Chart`, or None when its kind is drawn with plotly
    (`charts.figure`)."""
    if chart.kind not in BUILDERS:
        return None
    options = dict(chart.spec)
    if chart.kind == "stacked_counts":
        options.setdefault("colors", LEVEL_COLORS)
    return BUILDERS[chart.kind](chart.data, title=chart.title, **options)


def selected(event: Any, param: str = PICK) -> Mapping[str, Any] | None:
    """The point a click selected through `param`, from `st.vega_lite_chart`'s event (None
    when nothing is selected)."""
    try:
        point = event["selection"][param][0]
    except (KeyError, IndexError, TypeError):
        return None
    return point if isinstance(point, Mapping) else None


def picked(event: Any) -> tuple[str, str] | None:
    """The (group, series) of the bar a click selected (None when nothing is selected)."""
    point = selected(event)
    return None if point is None else (str(point.get("group", "")),
                                       str(point.get("series", "")))
