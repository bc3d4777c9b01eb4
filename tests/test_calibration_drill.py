"""A point of an experiment's reliability diagram drills down to the runs in its bin (issue 14,
bullet 3: every number, points included): which point was clicked, and exactly the runs the
diagram counted there."""
from __future__ import annotations

from pathlib import Path

from apptest_helpers import poll  # noqa: F401 (the helpers' folder is on the path)
from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.analysis import stats
from engine.reports.reliability import CALIBRATION, in_bin

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def finished(store: Store) -> ex.Report:
    plan = ex.plan({"name": "calibration", "questions": "definite", "repeats": 2, "configs": [
        {"label": "panel", "protocol": "panel", "model": "simulated"},
        {"label": "vote", "protocol": "vote", "model": "simulated"}]}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    return ex.report(store, experiment_id)


def click(curve: int, data: list) -> dict:
    return {"selection": {"points": [{"curve_number": curve, "point_index": 0,
                                      "customdata": data}], "point_indices": [0]}}


def test_bins_are_the_ones_the_diagram_counts():
    assert [stats.bin_index(c) for c in (0.0, 0.05, 0.3, 0.999, 1.0)] == [0, 0, 3, 9, 9]
    bins = stats.reliability_bins([0.3, 0.31, 1.0], [True, False, True])
    assert [(b["bin"], b["count"]) for b in bins] == [(3, 2), (9, 1)]


def test_every_point_of_the_diagram_opens_exactly_the_runs_counted_in_its_bin(store):
    result = finished(store)
    assert result.calibrations
    figure = ex.reliability_figure(result.calibrations)
    assert figure.data[0].meta is None  # the diagonal: no runs behind it
    seen = 0
    for curve, trace in enumerate(figure.data):
        if trace.meta is None:
            assert ex.picked_bin(figure, result.calibrations, click(curve, [1, 0, 1, 0])) is None
            continue
        cal = result.calibrations[trace.meta[CALIBRATION]]
        for point, b in zip(trace.customdata, cal["bins"], strict=True):
            chosen = ex.picked_bin(figure, result.calibrations, click(curve, list(point)))
            assert chosen == ex.Bin(cal["label"], cal["signal"], b["bin"])
            runs = in_bin(result.runs, chosen)
            assert len(runs) == b["count"]  # the runs the point stands for, no more
            assert set(runs["label"]) == {cal["label"]} and runs["counted"].all()
            assert runs["correct"].mean() == b["accuracy"]
            seen += 1
    assert seen
    assert ex.picked_bin(figure, result.calibrations, None) is None
    assert ex.picked_bin(figure, result.calibrations, click(99, [1, 0, 1, 0])) is None
    assert ex.picked_bin(figure, result.calibrations, click(1, [1])) is None


def test_the_runs_tab_lists_a_bins_runs_and_shows_all_again(db_url):
    store = Store(db_url)
    result = finished(store)
    cal = next(c for c in result.calibrations if c["bins"])
    chosen = ex.Bin(cal["label"], cal["signal"], cal["bins"][0]["bin"])
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/experiments.py").run()
    at.session_state["exp-drill-label"] = chosen.label  # as the click's callback sets them
    at.session_state["exp-drill-bin"] = chosen
    at.session_state["exp-tab"] = "Runs behind a cell"
    at.run()
    assert not at.exception, at.exception
    listed = next(d.value for d in at.dataframe if "repeat" in d.value.columns)
    assert len(listed) == cal["bins"][0]["count"]
    assert any("reliability diagram" in c.value for c in at.caption)
    at.button(key="exp-drill-bin-clear").click().run()
    listed = next(d.value for d in at.dataframe if "repeat" in d.value.columns)
    assert len(listed) == len(result.runs[result.runs["label"] == chosen.label])
    assert not [b for b in at.button if b.key == "exp-drill-bin-clear"]
