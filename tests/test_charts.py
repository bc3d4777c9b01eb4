"""engine.reports.charts: every builder returns a plotly figure with the traces the pages expect."""
from __future__ import annotations

import pandas as pd
import pytest
import plotly.graph_objects as go

from engine.reports import charts

from engine.reports import runs as history

from engine.reports import insights

TURNS = [  # two seats; both proposals run at once; b's call is degraded
    {"idx": 0, "seat": "a", "phase": "propose", "round": 1, "status": "ok", "latency": 1.0,
     "tokens_in": 10, "tokens_out": 4, "started_at": "2026-01-10T12:00:00+00:00",
     "finished_at": "2026-01-10T12:00:01+00:00"},
    {"idx": 1, "seat": "b", "phase": "propose", "round": 1, "status": "degraded",
     "latency": 3.0, "tokens_in": 10, "tokens_out": 0,
     "started_at": "2026-01-10T12:00:00+00:00", "finished_at": "2026-01-10T12:00:03+00:00"},
    {"idx": 2, "seat": "a", "phase": "rebuttal", "round": 2, "status": "ok", "latency": 2.0,
     "tokens_in": 20, "tokens_out": 6, "started_at": "2026-01-10T12:00:03+00:00",
     "finished_at": "2026-01-10T12:00:05+00:00"},
]


def kinds(fig: go.Figure) -> list[str]:
    return [trace.type for trace in fig.data]


def test_timeline_is_a_gantt_with_one_bar_per_call():
    fig = charts.timeline(history.timeline_frame(TURNS))
    assert isinstance(fig, go.Figure) and set(kinds(fig)) == {"bar"}
    assert sum(len(trace.y) for trace in fig.data) == 3  # three calls
    assert {trace.orientation for trace in fig.data} == {"h"}
    assert fig.layout.xaxis.type == "date"
    assert len(charts.timeline(history.timeline_frame([])).data) == 0


def test_tally_bar_highlights_the_winner():
    fig = charts.tally_bar({"b": 1, "a": 2}, winner="a", title="Final vote")
    (bar,) = fig.data
    assert bar.type == "bar" and list(bar.x) == ["a", "b"] and list(bar.y) == [2, 1]
    assert bar.marker.color[0] == charts.WINNER and bar.marker.color[1] == charts.OTHER
    assert fig.layout.title.text == "Final vote"


def test_sankey_keeps_before_and_after_apart_and_escapes_text():
    links = pd.DataFrame({"source": ["x", "<b>y</b>"], "target": ["x", "x"], "value": [2, 1],
                          "label": ["a, b", "c"]})
    (trace,) = charts.sankey(links).data
    assert trace.type == "sankey"
    assert list(trace.node.label) == ["x", "&lt;b&gt;y&lt;/b&gt;", "x"]
    assert list(trace.link.source) == [0, 1] and list(trace.link.target) == [2, 2]
    assert list(trace.link.value) == [2, 1]


def test_seat_usage_has_tokens_stacked_and_latency_beside():
    fig = charts.seat_usage(history.seat_usage(TURNS))
    assert kinds(fig) == ["bar", "bar", "bar"]
    assert [t.name for t in fig.data] == ["tokens in", "tokens out", "latency (s)"]
    assert list(fig.data[0].y) == [30, 10] and fig.data[2].xaxis == "x2"
    assert fig.layout.barmode == "stack"


def test_rate_bar_groups_several_shares():
    data = pd.DataFrame({"group": ["A", "B"], "n": [4, 2], "rate": [0.5, 1.0],
                         "tie": [0.25, 0.0]})
    fig = charts.rate_bar(data, y=["rate", "tie"], names=["winner share", "tie rate"])
    assert kinds(fig) == ["bar", "bar"] and [t.name for t in fig.data] == \
        ["winner share", "tie rate"]
    # under 5 runs: the bar says its n and is drawn faded
    assert list(fig.data[0].text) == ["50% n=4", "100% n=2"]
    assert fig.layout.yaxis.tickformat == ".0%"
    assert len(charts.rate_bar(data.iloc[0:0]).data) == 0


def test_rate_bar_carries_n_and_a_wilson_interval_and_greys_small_groups():
    data = pd.DataFrame({"group": ["many", "few"], "n": [10, 3], "rate": [0.8, 1.0]})
    fig = charts.rate_bar(data)
    bar = fig.data[0]
    # 8 of 10: Wilson (0.4902, 0.9433), drawn as asymmetric error bars
    assert bar.error_y.array[0] == pytest.approx(0.9433 - 0.8, abs=1e-4)
    assert bar.error_y.arrayminus[0] == pytest.approx(0.8 - 0.4902, abs=1e-4)
    assert bar.customdata[0][0] == 10 and bar.customdata[0][1] == pytest.approx(0.4902, 1e-3)
    assert "n=" in bar.hovertemplate and "95% CI" in bar.hovertemplate
    assert list(bar.text) == ["80%", "100% n=3"]
    full, faded = bar.marker.color
    assert full.startswith("#") and faded.startswith("rgba(") and faded.endswith(",0.45)")


def test_histogram_counts_overlapping_values():
    data = pd.DataFrame({"group": ["A", "B", "A"], "confidence": [0.7, 0.7, 0.2]})
    fig = charts.histogram(data, x="confidence", x_range=[0, 1])
    assert fig.layout.barmode == "stack"  # two runs at 0.70 stack to a bar of height 2
    assert sorted(v for t in fig.data for v in t.x) == [0.2, 0.7, 0.7]
    one = charts.histogram(data[data["confidence"] == 0.7], x="confidence", color=None)
    assert list(one.data[0].x) == [0.7, 0.7]  # values are never de-duplicated


def test_stacked_counts_orders_categories_and_fills_gaps():
    data = pd.DataFrame({"group": ["A", "A", "B"], "value": ["low", "high", "low"],
                         "count": [1, 3, 2]})
    fig = charts.stacked_counts(data, order=["high", "medium", "low"])
    assert [t.name for t in fig.data] == ["high", "low"]
    assert list(fig.data[0].y) == [3, 0] and list(fig.data[1].y) == [1, 2]
    assert fig.layout.barmode == "stack"


def test_histogram_and_box():
    data = pd.DataFrame({"group": ["A", "A", "B"], "confidence": [0.2, 0.9, 0.5]})
    fig = charts.histogram(data, x="confidence", x_range=[0, 1])
    assert kinds(fig) == ["histogram", "histogram"] and fig.layout.barmode == "stack"
    stats = insights.spread_by(pd.DataFrame({"group": ["A", "A", "B"], "t": [1, 3, 5]}), "t")
    (trace,) = charts.box(stats, y_title="tokens").data
    assert trace.type == "box" and list(trace.median) == [2.0, 5.0]
    assert list(trace.lowerfence) == [1.0, 5.0]
    by_label = insights.spread_by(pd.DataFrame({"p": ["x", "x", "y"], "group": ["A", "B", "A"],
                                                "t": [1, 2, 3]}), "t", ["p", "group"])
    fig = charts.box(by_label, x="p", color="group")
    assert [t.name for t in fig.data] == ["A", "B"] and list(fig.data[0].x) == ["x", "y"]
    assert fig.layout.boxmode == "group"


def test_rate_bar_labels_short_bars_outside():
    data = pd.DataFrame({"group": ["A", "B"], "rate": [0.0, 0.9], "n": [3, 1]})
    (bar,) = charts.rate_bar(data).data
    assert list(bar.textposition) == ["outside", "inside"]
    assert list(bar.text) == ["0% n=3", "90% n=1"]


def test_figure_draws_every_chart_of_a_report():
    runs = insights.flatten(pd.DataFrame([{
        "id": "r", "protocol": "debate", "label": "L", "status": "completed", "models": "m",
        "created_at": None, "simulated": True, "correct": True, "calls": 1, "degraded": 0,
        "degraded_run": False, "tokens_in": 1, "tokens_out": 2, "latency": 0.1, "duration": 0.2,
        "metrics": {"judge_confidence": 0.8, "high_confidence": True}}]))
    drawn = [charts.figure(c) for s in insights.report(runs) for c in s.charts]
    assert drawn and all(isinstance(f, go.Figure) and f.data for f in drawn)
