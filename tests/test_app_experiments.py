"""The Experiments page (AppTest): choose a set and two configurations, start, watch, results."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from engine import Store
from apptest_helpers import open_new_experiment, poll
from engine import experiments as ex

APP = str(Path(__file__).resolve().parent.parent / "app.py")
GENEROUS = 120.0  # seconds; polling stops as soon as the experiment is done



def open_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=GENEROUS)
    at.run()
    at.switch_page("pages/experiments.py").run()
    assert not at.exception, at.exception
    return at


def frame_with(at: AppTest, *columns: str):
    """The first data frame or table on the page that has all these columns."""
    return next(d.value for d in [*at.dataframe, *at.table]
                if set(columns) <= set(d.value.columns))



def test_bundled_set_two_configurations_run_to_results(db_url):
    at = open_page()
    open_new_experiment(at)
    at.selectbox(key="exp-set").select("demo").run()
    at.multiselect(key="exp-configs").select("panel · defaults").select("vote · defaults").run()
    assert not at.error, [e.value for e in at.error]
    runs = next(m for m in at.metric if m.label == "Runs")
    assert runs.value == "8"  # 4 demo questions x 2 configurations x 1 repeat
    calls = next(m for m in at.metric if m.label == "Calls")
    assert calls.value == str(4 * 8 + 4 * 3)  # panel: 8 calls a run; vote: 3
    at.button(key="exp-start").click().run()
    assert not at.exception, at.exception
    experiment_id = at.session_state["experiments_page_selected"]

    poll(at, lambda a: ex.progress(Store(db_url), experiment_id).status != "running")
    at.run()
    assert not at.exception, at.exception
    assert ex.progress(Store(db_url), experiment_id).status == "completed"
    # the answer first: the sentence and the table `experiment show` prints, columns in
    # words, the interval once ("accuracy [95% CI] n", not its three numbers)
    assert any("sign test" in m.value for m in at.markdown)
    summary = frame_with(at, "configuration", "accuracy [95% CI] n", "per run (mean)")
    assert not {"accuracy", "accuracy_low", "accuracy (low)"} & set(summary.columns)
    assert list(summary["configuration"]) == ["panel · defaults", "vote · defaults"]
    assert list(summary["runs"]) == ["4/4", "4/4"]
    # the demo set has two questions with answers: n=2, marked as fewer than 5
    assert summary["accuracy [95% CI] n"].str.endswith("n=2 *").all()
    assert summary["per run (mean)"].str.startswith("8.0 calls · ").tolist() == [True, False]
    assert summary["per run (mean)"].str.startswith("3.0 calls · ").tolist() == [False, True]
    # how each reached its answers, in a table of its own below the matrix
    how = frame_with(at, "configuration", "calibration error, consensus | judge",
                     "mind changes (persuaded/misled)")
    assert not how["calibration error, consensus | judge"].str.startswith("-").any()
    assert len(at.get("vega_lite_chart")) == 1  # accuracy with intervals (only its tab drawn)
    assert not at.get("plotly_chart")  # the Summary tab opens without plotly's chunk
    open_tab(at, "Calibration")  # the reliability diagram
    assert any("perfect calibration" in str(c.proto.spec) for c in at.get("plotly_chart"))
    open_tab(at, "Paired comparison")
    assert any("sign test" in m.value for m in at.markdown)
    open_tab(at, "Runs behind a cell")
    drill = frame_with(at, "link", "repeat")
    assert len(drill) == 8 and drill["link"].str.startswith("runs?run=").all()
    assert len(at.get("download_button")) == 3  # runs and summary as CSV, results as HTML


def open_tab(at: AppTest, name: str) -> None:
    """Open the results' tab `name`, as a click on it does (only the open tab is drawn)."""
    at.session_state["exp-tab"] = name
    at.run()
    assert not at.exception, at.exception


def test_stopped_experiment_offers_resume(db_url):
    store = Store(db_url)
    experiment_id = ex.create(store, {"questions": "demo", "configs": [
        {"protocol": "vote", "label": "vote"}], "repeats": 1})
    at = open_page()
    assert at.button(key="exp-resume").label == "Start"  # planned, never started
    at.button(key="exp-resume").click().run()
    poll(at, lambda a: ex.progress(store, experiment_id).status != "running")
    at.run()
    assert ex.progress(store, experiment_id).status == "completed"
    assert not [b for b in at.button if b.key == "exp-resume"]


def test_upload_source_asks_for_a_file(db_url):
    at = open_page()
    at.radio(key="exp-source").set_value("Upload a file").run()
    assert not at.exception, at.exception
    assert any("Upload a question file" in e.value for e in at.error)


def test_the_runs_switch_opens_on_simulated_runs_stored_after_the_page_first_showed_none(db_url):
    store = Store(db_url)
    experiment_id = ex.create(store, {"questions": "demo", "configs": [
        {"protocol": "vote", "label": "vote"}], "repeats": 1})
    at = open_page()  # the planned experiment: no runs yet, so its switch opens on real runs
    assert any(i.value == "No runs yet." for i in at.info)
    ex.run_experiment(store, experiment_id)  # every run simulated, stored while the page is open
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["exp-kind"] == "simulated"
    assert not [i.value for i in at.info if "No real runs" in i.value]
