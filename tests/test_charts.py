"""engine.reports.charts: every builder returns a plotly figure with the traces the pages expect."""
from __future__ import annotations

import insights_frames as frames
import pandas as pd
import plotly.graph_objects as go

from engine.reports import charts, insights, vega
from engine.reports import runs as history

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


def test_figure_draws_every_chart_of_a_report():
    runs = insights.flatten(pd.DataFrame([{
        "id": "r", "protocol": "debate", "label": "L", "status": "completed", "models": "m",
        "created_at": None, "simulated": True, "correct": True, "calls": 1, "degraded": 0,
        "degraded_run": False, "tokens_in": 1, "tokens_out": 2, "latency": 0.1, "duration": 0.2,
        "metrics": {"judge_confidence": 0.8, "high_confidence": True}}]))
    drawn = [vega.spec(c) or charts.figure(c) for s in frames.report(runs) for c in s.charts]
    assert drawn and all(f["data"]["values"] if isinstance(f, dict) else f.data for f in drawn)
