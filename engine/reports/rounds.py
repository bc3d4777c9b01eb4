"""Accuracy by round and the conformity measures of an experiment's configurations (the
per-run frames they are counted from, which Insights' rounds sections share, are
`engine.views.round_frames`).

Accuracy at round k counts the scored runs that have a round k, each scored with
`answers_match` (the one scoring rule) on that round's plurality (`round_answers`); a run
without rounds counts once, at its configuration's final round, from its `correct`. Round one's
plurality of a multi-agent run is the majority vote of independent answers, so each
configuration's round-1 accuracy is drawn as a dashed line: the bar debate has to clear
("Debate or Vote", arXiv 2508.17536). Published points (`references`) are drawn beside.

The conformity rates (`engine.analysis.conformity`) are counts over their chances, summed over
runs: right-to-wrong over answers right the round before (DebateLLM's "bullied"),
wrong-to-right over answers wrong before ("relied on other"), adoption of the previous
round's plurality over agents off it, and runs whose final plurality discarded a correct
answer some agent gave ("Cost of Consensus", 2026) over runs where one did.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pandas as pd

from engine.protocols import REGISTRY
from engine.reports.references import Reference, references
from engine.text import html_text
from engine.views.round_frames import (
    CONFORMITY,
    ROUND_COLUMNS,
    conformity_rates,
    round_counts,
    round_point,
)

LINE_COLORS = ("#3558c9", "#e65100", "#2e7d32", "#6a1b9a", "#00838f", "#c62828", "#5d4037",
               "#455a64")


def final_round(config: Mapping[str, Any]) -> int:
    """The round a configuration's final answer comes from: its protocol's rounds option (the
    configured value, else the option's default), or 1 for a protocol without rounds."""
    spec = REGISTRY.get(str(config.get("protocol", "")))
    if spec is None or spec.rounds_option is None:
        return 1
    default = next((o.default for o in spec.options if o.name == spec.rounds_option), 1)
    value = (config.get("options") or {}).get(spec.rounds_option, default)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def accuracy_by_round(frame: pd.DataFrame, configs: Sequence[Mapping[str, Any]]
                      ) -> pd.DataFrame:
    """An experiment's accuracy per configuration (in the spec's order) and round, over its
    counted, scored runs (`runs_frame`): `right`, `n`, `accuracy`, its 95% Wilson interval
    (`low`, `high`), the text "74% [57–85%] n=34" and `few` (n under `FEW`)."""
    if frame.empty:
        return pd.DataFrame(columns=ROUND_COLUMNS)
    done = frame[frame["counted"].astype(bool)]
    counts = round_counts(done, "label", {c["label"]: final_round(c) for c in configs})
    rows = [round_point(c["label"], number, right, n, "configuration")
            for c in configs for number, (right, n) in sorted(counts.get(c["label"], {}).items())]
    return pd.DataFrame(rows, columns=ROUND_COLUMNS)


def round_table(points: pd.DataFrame) -> pd.DataFrame:
    """Accuracy by round as a terminal or a page prints it: one row per configuration, one
    column per round ("74% [57–85%] n=34", "" where it has no such round)."""
    if points.empty:
        return pd.DataFrame(columns=["configuration"])
    wide = points.pivot(index="configuration", columns="round", values="accuracy [95% CI] n")
    order = list(dict.fromkeys(points["configuration"]))
    wide = wide.reindex(order).fillna("")
    wide.columns = [f"round {k}" for k in wide.columns]
    return wide.reset_index()


def conformity_by_config(frame: pd.DataFrame, configs: Sequence[Mapping[str, Any]]
                         ) -> pd.DataFrame:
    """The conformity rates of an experiment's configurations over their counted runs."""
    done = frame[frame["counted"].astype(bool)] if not frame.empty else frame
    return conformity_rates(done, "label", [c["label"] for c in configs])


# --------------------------------------------------------------------------- the figure
def accuracy_by_round_figure(points: pd.DataFrame, refs: Sequence[Reference] = (),
                             title: str = "") -> Any:
    """Accuracy by round: one line per configuration with its 95% Wilson interval as error
    bars and n in the hover, each configuration's round-1 accuracy (the majority vote of its
    agents' independent answers) as a dashed line of its colour (no hover of its own: round
    1's point says the same, and a click there reaches that point), and the published points
    as labelled markers with their citation in the hover. Labels are text (HTML-escaped)."""
    import plotly.graph_objects as go
    traces: list[dict[str, Any]] = []
    rounds = [int(r) for r in points["round"]] if not points.empty else []
    last = max([*rounds, *(r.round for r in refs), 2])
    order = list(dict.fromkeys(points["configuration"])) if not points.empty else []
    for i, label in enumerate(order):
        mine = points[points["configuration"] == label].sort_values("round")
        color = LINE_COLORS[i % len(LINE_COLORS)]
        name = html_text(label)
        shift = (i - (len(order) - 1) / 2) * 0.03  # side by side, so error bars never hide
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": name,
            "x": [r + shift for r in mine["round"]], "y": mine["accuracy"].tolist(),
            "line": {"color": color}, "marker": {"color": color, "size": 8},
            "meta": {LINE: i},  # which configuration a clicked point is (`picked_line`)
            "error_y": {"type": "data", "symmetric": False, "color": color,
                        "array": (mine["high"] - mine["accuracy"]).tolist(),
                        "arrayminus": (mine["accuracy"] - mine["low"]).tolist()},
            "customdata": [[r, n, lo, hi, k] for r, n, lo, hi, k in zip(
                mine["right"], mine["n"], mine["low"], mine["high"], mine["round"],
                strict=True)],
            "hovertemplate": f"{name}<br>round %{{customdata[4]}}: %{{y:.0%}} "
                             "(%{customdata[0]}/%{customdata[1]}, n=%{customdata[1]}; 95% CI "
                             "%{customdata[2]:.0%}–%{customdata[3]:.0%})<extra></extra>"})
        first = mine[mine["round"] == 1]
        if not first.empty:
            value = float(first["accuracy"].iloc[0])
            traces.append({
                "type": "scatter", "mode": "lines", "name": f"{name}: round-1 majority vote",
                "x": [1, last], "y": [value, value],
                "line": {"color": color, "dash": "dash", "width": 1.5},
                "meta": {LINE: i},  # the same configuration's runs
                # round 1's point says the same; left out of hover and clicks, a click where
                # the two meet reaches the point (and its runs) instead of the dashed line
                # (plotly.js ignores "skip" beside a hovertemplate)
                "hoverinfo": "skip"})
    symbols = {"single agent": "diamond-open", "majority vote (3 agents)": "square-open"}
    places = {"single agent": "bottom left", "majority vote (3 agents)": "top left"}
    for ref in refs:
        traces.append({
            "type": "scatter", "mode": "markers+text", "name": html_text(ref.label),
            "x": [ref.round], "y": [ref.accuracy], "text": [html_text(ref.short)],
            "textposition": places.get(ref.setting, "middle left"), "cliponaxis": False,
            "marker": {"color": "#212121", "size": 12,
                       "symbol": symbols.get(ref.setting, "star")},
            "hovertemplate": html_text(f"{ref.label}, {ref.model}; {ref.citation}")
            + "<extra></extra>"})
    layout = {"template": "plotly_white", "height": 420,
              "margin": {"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
              "legend": {"orientation": "h", "y": -0.25},
              "xaxis": {"title": "round", "dtick": 1, "range": [0.5, last + 0.4]},
              "yaxis": {"title": "accuracy (95% Wilson interval)", "range": [0, 1.05],
                        "tickformat": ".0%"}}
    if title:
        layout["title"] = {"text": html_text(title)}
    return go.Figure(data=traces, layout=layout)


LINE = "line"  # a line trace's meta key: the index of its configuration in the points


def picked_line(figure: Any, points: pd.DataFrame, event: Any) -> str | None:
    """The configuration (or group) whose point was clicked on `figure`, an
    `accuracy_by_round_figure` of `points`, from a plotly selection `event`
    (`st.plotly_chart`'s): a point of its line (or of its dashed round-1 line, which stands
    for the same runs; the page never sees one, as it takes no hover); None for no click, or
    a click on a published marker (no runs of this experiment behind it)."""
    order = list(dict.fromkeys(points["configuration"])) if not points.empty else []
    return next((str(order[index]) for index, _ in clicked(figure, event, LINE)
                 if 0 <= index < len(order)), None)


def clicked(figure: Any, event: Any, key: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """Each point a plotly selection `event` (`st.plotly_chart`'s) picked on `figure`, with
    the whole number its trace's meta holds under `key`; points on other traces are passed
    over."""
    try:
        chosen = event["selection"]["points"]
    except (KeyError, TypeError):
        return
    for point in chosen or []:
        curve = point.get("curve_number")
        if isinstance(curve, int) and 0 <= curve < len(figure.data):
            meta = figure.data[curve].meta
            index = meta.get(key) if isinstance(meta, dict) else None
            if isinstance(index, int):
                yield index, point


def rounds_text(frame: pd.DataFrame, spec: Mapping[str, Any]) -> str:
    """Accuracy by round and the conformity rates as a terminal prints them, with the
    published points for the experiment's question set; "" when there is nothing to show."""
    configs = spec["configs"]
    points = accuracy_by_round(frame, configs)
    conforming = conformity_by_config(frame, configs)
    lines = []
    if not points.empty:
        lines += ["accuracy by round (each round's plurality; round 1 = the majority vote of "
                  "independent answers):", round_table(points).to_string(index=False)]
        published = references(spec.get("source"))
        if published:
            lines.append(f"published ({published[0].citation}, {published[0].model}): "
                         + "; ".join(f"{r.setting} {r.accuracy * 100:.1f}% (round {r.round})"
                                     for r in published))
    if not conforming.empty:
        wide = conforming.pivot(index="configuration", columns="measure",
                                values="rate [95% CI] n")
        wide = wide.reindex(list(dict.fromkeys(conforming["configuration"])))
        wide = wide[[m for m, _, _ in CONFORMITY if m in wide.columns]].fillna("")
        lines += ["conformity between rounds (count over chances):",
                  wide.reset_index().to_string(index=False)]
    return "\n".join(lines)


