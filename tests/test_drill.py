"""Every number drills down (issue 14, bullet 3): a point of an Insights chart becomes the Runs
page's filters for the runs behind it; the Runs page follows such a link once."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine import REGISTRY, Store
from engine.protocols import arun_config, run_sync
from engine.questions import DEFINITE
from engine.reports import drill, insights, vega
from engine.store import RunFilters
from engine.views.blocks import Chart

RUNS_PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "runs.py")
VOTE = REGISTRY["vote"]


def stored(tmp_path) -> tuple[Store, list]:
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    for protocol in ("vote", "debate"):
        for label in ("cheap", "careful"):
            run_sync(arun_config({"protocol": protocol, "model": "simulated"},
                                 DEFINITE[0].text, store=store, label=label,
                                 expected=DEFINITE[0].expected))
    return store, insights.report_from_store(store, RunFilters())


def traces(chart: Chart) -> list[str]:
    spec = vega.spec(chart)
    assert spec is not None
    return list(dict.fromkeys(str(row["series"]) for row in spec["data"]["values"]))


def test_a_bar_of_the_accuracy_chart_opens_that_label_and_protocol_completed(tmp_path):
    _, sections = stored(tmp_path)
    chart = next(s for s in sections if s.key == "accuracy").charts[0]
    names = traces(chart)
    assert VOTE.title in names
    assert drill.params("accuracy", chart, VOTE.title, {"x": "cheap"}) == {
        "label": "cheap", "protocol": "vote", "status": "completed"}


def test_the_overview_bar_opens_a_protocol_and_a_status(tmp_path):
    _, sections = stored(tmp_path)
    chart = sections[0].charts[0]
    assert drill.params("overview", chart, "completed (degraded)", {"x": VOTE.title}) == {
        "protocol": "vote", "status": "completed"}
    assert drill.params("overview", chart, "failed", {"x": VOTE.title}) == {
        "protocol": "vote", "status": "failed"}


def test_a_protocol_sections_chart_keeps_its_protocol_and_the_label_clicked(tmp_path):
    _, sections = stored(tmp_path)
    section = next(s for s in sections if s.key == "vote")
    chart = next(c for c in section.charts if c.kind in ("rate_bar", "stacked_counts"))
    got = drill.params("vote", chart, traces(chart)[0], {"x": "careful (simulated)"})
    assert got["protocol"] == "vote" and got["label"] == "careful"


def test_runs_without_a_label_get_no_label_filter_and_the_cost_box_its_protocol(tmp_path):
    _, sections = stored(tmp_path)
    chart = next(s for s in sections if s.key == "cost").charts[0]
    assert drill.params("cost", chart, "(no label)", {"x": VOTE.title}) == {
        "protocol": "vote", "status": "completed"}


@pytest.fixture
def db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    return Store(url)


def test_the_runs_page_follows_a_link_once_and_names_an_unknown_value(db):
    for label in ("cheap", "careful"):
        run_sync(arun_config({"protocol": "vote", "model": "simulated"}, DEFINITE[0].text,
                             store=db, label=label))
    at = AppTest.from_file(RUNS_PAGE, default_timeout=60)
    at.query_params.update({"protocol": "vote", "label": "careful", "status": "completed"})
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="runs_label").value == "careful"
    assert at.selectbox(key="runs_protocol").value == "vote"
    assert at.selectbox(key="runs_status").value == "completed"
    at.selectbox(key="runs_label").set_value("cheap").run()  # the user's choice stands
    assert at.selectbox(key="runs_label").value == "cheap"
    at = AppTest.from_file(RUNS_PAGE, default_timeout=60)
    at.query_params.update({"label": "<b>nobody</b>"})
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="runs_label").value == ""
    assert any("No stored run has label" in c.value for c in at.caption)


def test_a_row_of_an_insights_table_opens_its_label_and_protocol(tmp_path):
    _, sections = stored(tmp_path)
    table = next(s for s in sections if s.key == "accuracy").table
    row = table[(table["label"] == "careful") & (table["protocol"] == VOTE.title)].iloc[0]
    assert drill.row_params("accuracy", row.to_dict()) == {
        "protocol": "vote", "label": "careful", "status": "completed"}
    assert drill.row_params("vote", {"label": "(no label)"}) == {
        "protocol": "vote", "status": "completed"}


def test_a_simulated_group_beside_real_ones_opens_its_protocol_and_the_simulated_runs(tmp_path):
    """In "both, side by side", the overview's x is "Debate (simulated)": it opens the
    debate's simulated runs, never a label called "Debate"."""
    _, sections = stored(tmp_path)
    chart = sections[0].charts[0]
    title = REGISTRY["debate"].title
    assert drill.params("overview", chart, "completed", {"x": f"{title} (simulated)"}) == {
        "protocol": "debate", "status": "completed", "model": "simulated"}
    assert drill.params("overview", chart, "completed", {"x": title}) == {
        "protocol": "debate", "status": "completed"}  # the real ones: no model filter
    section = next(s for s in sections if s.key == "vote")
    rate = next(c for c in section.charts if c.kind == "rate_bar")
    got = drill.params("vote", rate, traces(rate)[0], {"x": "careful (simulated)"})
    assert got == {"protocol": "vote", "label": "careful", "status": "completed",
                   "model": "simulated"}


# ------------------------------------------------------------------ points of a line by round
def round_points():
    import pandas as pd
    rows = []
    for label, right in (("cheap", (1, 2)), ("careful", (2, 3))):
        for number, k in enumerate(right, 1):
            rows.append({"configuration": label, "round": number, "right": k, "n": 4,
                         "accuracy": k / 4, "low": 0.1, "high": 0.9})
    return pd.DataFrame(rows)


def click(curve: int) -> dict:
    """A plotly selection event as `st.plotly_chart` returns it for one clicked point."""
    return {"selection": {"points": [{"curve_number": curve, "point_index": 0, "x": 1.0,
                                      "y": 0.25}], "point_indices": [0]}}


def test_a_clicked_point_of_a_line_by_round_names_its_configuration():
    from engine.reports import rounds
    points = round_points()
    figure = rounds.accuracy_by_round_figure(points)
    lines = [i for i, t in enumerate(figure.data) if t.mode == "lines+markers"]
    dashed = [i for i, t in enumerate(figure.data) if t.mode == "lines"]
    assert len(lines) == 2 and dashed  # each configuration: its line and its round-1 line
    assert [rounds.picked_line(figure, points, click(i)) for i in lines] == ["cheap",
                                                                            "careful"]
    # a dashed round-1 line stands for the same runs as its configuration's line
    assert [rounds.picked_line(figure, points, click(i)) for i in dashed] == ["cheap",
                                                                             "careful"]
    # a published point (no runs of this experiment), a curve that is not there, no click
    from engine.reports.references import references
    published = references("bundled:arithmetic")
    assert published
    with_refs = rounds.accuracy_by_round_figure(points, published)
    markers = [i for i, t in enumerate(with_refs.data) if t.mode == "markers+text"]
    assert markers and all(rounds.picked_line(with_refs, points, click(i)) is None
                           for i in markers)
    assert rounds.picked_line(figure, points, click(len(figure.data))) is None
    assert rounds.picked_line(figure, points, {"selection": {"points": []}}) is None
    assert rounds.picked_line(figure, points, None) is None
    assert rounds.picked_line(figure, points, {"selection": {"points": [{}]}}) is None


def test_a_point_of_the_societys_lines_by_round_opens_that_labels_completed_runs():
    chart = Chart("round_lines", round_points(), "Society: accuracy by round", "")
    assert drill.params("society", chart, "", {"x": "careful"}) == {
        "protocol": "society", "label": "careful", "status": "completed"}
