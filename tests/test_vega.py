"""The Vega-Lite bar charts (`engine.reports.vega`): the numbers they carry, their text as
typed, JSON a browser can read whatever the data, and the click that names a bar."""
from __future__ import annotations

import json

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.analysis.stats import wilson_interval
from engine.reports import vega
from engine.views.blocks import Chart

TAG = "<img src=x onerror=alert(1)> & \"q\""


def rows(spec: dict) -> list[dict]:
    return spec["data"]["values"]


def test_stacked_counts_keep_every_count_in_its_order_and_colour():
    data = pd.DataFrame({"group": ["Vote", "Vote", "Panel", "Panel", "Panel"],
                         "value": ["failed", "completed", "completed", "completed",
                                   "interrupted"],
                         "count": [1, 3, 2, 5, 0]})
    spec = vega.stacked_counts(data, order=["completed", "interrupted", "failed"],
                               title="Runs per protocol", colors=vega.LEVEL_COLORS)
    got = {(r["group"], r["series"]): r["count"] for r in rows(spec)}
    assert got == {("Vote", "completed"): 3, ("Vote", "failed"): 1, ("Panel", "completed"): 7}
    assert sum(got.values()) == int(data["count"].sum())  # a zero count draws nothing
    color = spec["encoding"]["color"]["scale"]
    assert color["domain"] == ["completed", "interrupted", "failed"]  # `order` first
    assert color["range"] == [vega.LEVEL_COLORS[c] for c in color["domain"]]
    assert spec["encoding"]["x"]["sort"] == ["Vote", "Panel"]  # as the data lists them
    assert spec["params"] == [{"name": vega.PICK, "select": {
        "type": "point", "fields": ["group", "series"]}}]
    assert spec["title"]["text"] == "Runs per protocol"
    # every protocol named under its bar (Vega hid 6 of 8 overlapping labels in a half-width
    # column), the plot as tall as asked whatever its labels take, whole runs on the axis
    assert spec["encoding"]["x"]["axis"]["labelOverlap"] is False
    assert spec["autosize"] == {"type": "fit-x"} and spec["height"] == 320
    assert spec["encoding"]["y"]["axis"] == {"tickMinStep": 1, "format": "d"}


def test_rate_bars_carry_n_and_the_wilson_interval_and_fade_small_samples():
    data = pd.DataFrame({"group": ["a", "b", "c"], "rate": [0.75, 0.5, float("nan")],
                         "n": [4, 20, 0], "other": [1.0, 0.0, 0.5], "m": [10, 10, 10]})
    spec = vega.rate_bar(data, y=["rate", "other"], n=["n", "m"], names=["one", "two"])
    by = {(r["group"], r["series"]): r for r in rows(spec)}
    assert ("c", "one") not in by  # no runs, no bar (never a bar at 0%)
    a = by[("a", "one")]
    assert (a["rate"], a["n"], a["few"]) == (0.75, 4, True) and a["text"] == "75% n=4"
    assert (a["low"], a["high"]) == wilson_interval(3, 4)
    b = by[("b", "one")]
    assert b["few"] is False and b["text"] == "50%"
    assert (b["low"], b["high"]) == wilson_interval(10, 20)
    assert by[("c", "two")]["rate"] == 0.5
    bars = spec["layer"][0]
    assert bars["encoding"]["opacity"]["condition"] == {"test": "datum.few", "value": 0.45}
    assert bars["encoding"]["xOffset"]["sort"] == ["one", "two"]  # side by side
    assert spec["layer"][1]["mark"]["type"] == "rule"  # the interval
    assert "95% Wilson interval" in bars["encoding"]["y"]["title"]


def test_an_experiments_accuracy_says_n_and_its_interval():
    table = pd.DataFrame({"configuration": ["cheap", "careful", "unscored"],
                          "accuracy": [0.5, 0.9, float("nan")],
                          "accuracy_low": [0.1, 0.6, float("nan")],
                          "accuracy_high": [0.9, 0.98, float("nan")],
                          "correct": [1, 9, 0], "scored": [2, 10, 0]})
    spec = vega.accuracy(table, "Accuracy (simulated)")
    got = {r["group"]: r for r in rows(spec)}
    assert set(got) == {"cheap", "careful"}
    assert got["cheap"]["text"] == "50% n=2" and got["cheap"]["few"]
    assert (got["careful"]["low"], got["careful"]["high"]) == (0.6, 0.98)
    assert spec["title"]["text"] == "Accuracy (simulated)"
    assert spec["layer"][0]["encoding"]["x"]["sort"] == ["cheap", "careful"]


def test_text_from_users_and_models_goes_in_as_typed():
    """Vega draws text as SVG text and its tooltips escape HTML: escaping here would show
    "&lt;" to the reader. The browser test of the drill-down reads it back."""
    data = pd.DataFrame({"group": [TAG], "value": [TAG], "count": [2]})
    spec = vega.stacked_counts(data, title=TAG)
    text = json.dumps(spec)
    assert rows(spec)[0]["group"] == TAG and rows(spec)[0]["series"] == TAG
    assert spec["title"]["text"] == TAG
    assert "&lt;" not in text and "&amp;" not in text
    assert '"href"' not in text  # no mark links anywhere


def test_which_kinds_are_vega_and_which_stay_plotly():
    counts = pd.DataFrame({"group": ["x"], "value": ["completed"], "count": [1]})
    assert vega.spec(Chart("stacked_counts", counts, "t", "c", {}))["mark"]["type"] == "bar"
    assert vega.spec(Chart("histogram", counts.assign(v=[0.5]), "t", "c",
                           {"x": "v"}))["mark"]["type"] == "bar"
    assert vega.spec(Chart("box", pd.DataFrame({"group": ["x"], "q1": [1], "q3": [2]}), "t",
                           "c", {}))["layer"][1]["mark"]["type"] == "bar"
    for kind in ("sankey", "round_lines", "timeline"):
        assert vega.spec(Chart(kind, counts, "t", "c", {})) is None


def test_a_click_names_its_bar_and_anything_else_names_none():
    event = {"selection": {vega.PICK: [{"group": "careful", "series": "completed"}]}}
    assert vega.picked(event) == ("careful", "completed")
    for nothing in (None, {}, {"selection": {}}, {"selection": {vega.PICK: []}},
                    {"selection": {vega.PICK: ["x"]}}, {"selection": None}):
        assert vega.picked(nothing) is None


labels = st.text(max_size=30)
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none(),
                    st.integers(-5, 10**9))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(labels, labels, st.integers(0, 10**6)), max_size=12))
def test_any_counts_make_json_a_browser_reads(items):
    data = pd.DataFrame(items, columns=["group", "value", "count"])
    spec = vega.stacked_counts(data)
    json.dumps(spec, allow_nan=False)  # NaN or infinity would be invalid JSON
    assert sum(r["count"] for r in rows(spec)) == sum(c for _, _, c in items)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(labels, numbers, numbers), max_size=12))
def test_any_rates_make_json_a_browser_reads(items):
    data = pd.DataFrame(items, columns=["group", "rate", "n"])
    spec = vega.rate_bar(data)
    json.dumps(spec, allow_nan=False)
    for row in rows(spec):
        assert row["rate"] == row["rate"] and row["n"] is None or isinstance(row["n"], int)


def test_a_histogram_counts_every_value_in_range_once_stacked_by_group():
    data = pd.DataFrame({"group": ["a", "a", "b", "b", "b", "a"],
                         "confidence": [0.0, 0.7, 0.7, 1.0, float("nan"), 1.5]})
    spec = vega.histogram(data, "confidence", title="Judge confidence",
                          x_title="judge confidence", x_range=[0, 1])
    got = {(r["series"], round(r["start"], 2)): r["count"] for r in rows(spec)}
    # 1.0 (the upper edge) counts in the last bin; NaN and 1.5 (out of range) nowhere
    assert got == {("a", 0.0): 1, ("a", 0.7): 1, ("b", 0.7): 1, ("b", 0.9): 1}
    assert spec["encoding"]["x"]["scale"]["domain"] == [0.0, 1.0]
    assert spec["encoding"]["y"]["stack"] == "zero"
    assert not vega.clickable(spec)  # the Runs page cannot filter on a bin's range
    assert vega.clickable(vega.rate_bar(pd.DataFrame({"group": ["a"], "rate": [0.5],
                                                      "n": [3]})))


def test_a_histogram_of_one_value_or_none_still_draws():
    one = vega.histogram(pd.DataFrame({"group": ["a", "a"], "v": [0.7, 0.7]}), "v")
    assert [r["count"] for r in rows(one)] == [2]
    assert one["encoding"]["x"]["scale"]["domain"] == [0.7, 1.7]
    empty = vega.histogram(pd.DataFrame({"group": [], "v": []}), "v")
    assert rows(empty) == []
    words = vega.histogram(pd.DataFrame({"group": ["a"], "v": ["high"]}), "v")
    assert rows(words) == []  # not a number: counted nowhere, never a crash


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(labels, numbers), max_size=20))
def test_any_numbers_make_a_histogram_a_browser_reads(items):
    data = pd.DataFrame(items, columns=["group", "v"])
    spec = vega.histogram(data, "v", x_range=[0, 1])
    json.dumps(spec, allow_nan=False)
    inside = sum(1 for _, v in items if v is not None and v == v and 0 <= float(v) <= 1)
    assert sum(r["count"] for r in rows(spec)) == inside


def test_box_plots_carry_their_six_numbers_side_by_side_and_a_click():
    stats = pd.DataFrame({"protocol_title": ["Vote", "Vote", "Debate"],
                          "group": ["cheap", TAG, "cheap"],
                          "min": [1, 2, 3], "q1": [2, 3, 4], "median": [3, 4, 5],
                          "q3": [4, 5, 6], "max": [9, 8, 7], "mean": [3.5, float("nan"), 5]})
    spec = vega.box(stats, x="protocol_title", color="group", title="Tokens per run",
                    y_title="tokens")
    by = {(r["group"], r["series"]): r for r in rows(spec)}
    assert set(by) == {("Vote", "cheap"), ("Vote", TAG), ("Debate", "cheap")}  # as typed
    assert {k: by[("Vote", "cheap")][k] for k in ("min", "q1", "median", "q3", "max")} == {
        "min": 1.0, "q1": 2.0, "median": 3.0, "q3": 4.0, "max": 9.0}
    assert by[("Vote", TAG)]["mean"] is None  # no mean: no dashed tick, never a 0
    assert vega.clickable(spec)
    whisker, boxes, median, mean = spec["layer"]
    assert (whisker["encoding"]["y"]["field"], whisker["encoding"]["y2"]["field"]) == (
        "min", "max")
    assert (boxes["encoding"]["y"]["field"], boxes["encoding"]["y2"]["field"]) == ("q1", "q3")
    assert boxes["encoding"]["xOffset"]["sort"] == ["cheap", TAG]
    assert mean["mark"]["strokeDash"] and mean["transform"] == [
        {"filter": "datum.mean != null"}]
    json.dumps(spec, allow_nan=False)


def test_a_tally_names_each_stance_as_typed_most_votes_first():
    spec = vega.tally({TAG: 1, "4": 3, "$0.05": 1}, winner="4", title=TAG)
    got = [(r["group"], r["votes"], r["winner"]) for r in rows(spec)]
    assert got == [("4", 3, True), ("$0.05", 1, False), (TAG, 1, False)]  # ties by name
    assert spec["title"]["text"] == TAG and "&lt;" not in json.dumps(spec)
    assert not vega.clickable(spec)
