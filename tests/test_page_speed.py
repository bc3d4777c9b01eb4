"""What keeps pages fast over many stored runs (issue 14, the browser page-ready times): the
experiment results and the Insights figures are built once per change of the stored runs
and read from the cache after that, and the server warms itself before it answers."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from apptest_helpers import charts as drawn
from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.reports import baseline, vega
from pages import _experiment_results, _insights_data, _shared

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def experiment(db_url: str) -> str:
    store = Store(db_url)
    plan = ex.plan({"name": "cached results", "questions": "definite", "repeats": 1,
                    "configs": [{"label": "vote", "protocol": "vote", "model": "simulated"},
                                {"label": "panel", "protocol": "panel",
                                 "model": "simulated"}]}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    return experiment_id


def counting(monkeypatch, module, name: str) -> list[int]:
    """Count the calls of `module.name` (still calling it)."""
    calls: list[int] = []
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_experiment_results_are_built_once_per_change_of_the_runs(db_url, monkeypatch):
    experiment_id = experiment(db_url)
    reports = counting(monkeypatch, ex, "report")
    matrices = counting(monkeypatch, baseline, "baseline_matrix")
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/experiments.py")
    at.query_params["experiment"] = experiment_id
    at.run()
    assert not at.exception, at.exception
    assert len(reports) == 1 and len(at.get("vega_lite_chart")) == 1  # the summary tab
    at.session_state["exp-tab"] = "Questions"  # as a click on the tab: the baseline view
    at.run()
    assert len(reports) == 1 and len(matrices) == 1
    grid = next(d.value for d in at.dataframe if "baseline" in d.value.columns)
    at.run()  # a second visit (or a click elsewhere) draws the same from the cache
    assert len(reports) == 1 and len(matrices) == 1
    assert next(d.value for d in at.dataframe if "baseline" in d.value.columns).equals(grid)
    at.session_state["exp-tab"] = "Summary"
    at.run()
    assert len(reports) == 1 and len(at.get("vega_lite_chart")) == 1  # from the cache
    at.session_state["exp-tab"] = "Questions"
    Store(db_url).delete([str(ex.runs_frame(Store(db_url), experiment_id)["id"].iloc[0])])
    at.run()  # a run deleted: the stored runs changed, so the results are built again
    assert not at.exception, at.exception
    assert len(reports) == 2 and len(matrices) == 2


def test_insights_figures_are_made_once_per_change_of_the_runs(db_url, monkeypatch):
    experiment(db_url)
    made = counting(monkeypatch, vega, "spec")  # asked of every chart, plotly or not
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/insights.py").run()
    assert not at.exception, at.exception
    first = len(made)
    assert first == len(drawn(at)) > 0
    at.run()
    assert len(made) == first and len(drawn(at)) == first


def test_the_warm_up_loads_what_the_other_pages_need():
    _shared.warm_up()
    assert set(_shared.WARM_MODULES) <= set(sys.modules)


def test_the_warm_up_fills_the_insights_caches_for_its_first_view(db_url, monkeypatch):
    """The server's warm-up reads and adds up the runs and makes the figures of Insights'
    first view, so a first visit finds them ready (on 10,000 runs, about a second)."""
    experiment(db_url)
    made = counting(monkeypatch, vega, "spec")
    _insights_data.warm(Store(db_url))
    warmed = len(made)
    assert warmed > 0
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/insights.py").run()
    assert not at.exception, at.exception
    assert len(made) == warmed == len(drawn(at))  # nothing made again


def test_the_warm_up_fills_the_newest_experiments_results(db_url, monkeypatch):
    """The server's warm-up builds the report and figures of the experiment the Experiments
    page opens on (the newest), so its first visit finds them ready."""
    experiment(db_url)
    reports = counting(monkeypatch, ex, "report")
    made = counting(monkeypatch, vega, "accuracy")
    _experiment_results.warm(Store(db_url))
    assert len(reports) == 1 and len(made) == 1
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/experiments.py").run()
    assert not at.exception, at.exception
    assert len(at.get("vega_lite_chart")) == 1
    assert len(reports) == 1 and len(made) == 1  # nothing built again


def test_the_warm_up_of_an_empty_store_does_nothing(db_url):
    _experiment_results.warm(Store(db_url))
    _insights_data.warm(Store(db_url))
    assert Store(db_url).runs().empty


STARTS = """
import asyncio, sys
import streamlit as st
import app
assert isinstance(app.app, st.App), type(app.app)
assert set(app.PAGES) and "plotly.graph_objects" in sys.modules  # imported as it starts

async def serve():
    import gc
    async with app.warm_before_serving(None):
        # what the start loaded is frozen: a collection after a script run walks none of it
        frozen, walked = gc.get_freeze_count(), len(gc.get_objects())
        assert frozen > 100_000 and walked < frozen / 10, (frozen, walked)
        print("serving")

asyncio.run(serve())
"""


def test_streamlit_run_finds_the_app_and_warms_it_before_serving(db_url):
    """`streamlit run app.py` imports app.py as an st.App (Streamlit reads its source for
    one): the import makes no page, and the App's lifespan warms the caches of the store
    it serves before the server answers, saying so in the server's log."""
    experiment(db_url)
    root = Path(APP).parent
    done = subprocess.run([sys.executable, "-c", STARTS], cwd=root, capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "PARLEY_DB_URL": db_url})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("serving")
    assert "Parley: caches warmed in" in done.stderr, done.stderr[-3000:]


def test_a_store_the_warm_up_cannot_open_is_left_to_the_pages(tmp_path):
    """A database the warm-up cannot open never stops the server: the log says why and the
    pages show the reason to the user, as without a warm-up."""
    bad = tmp_path / "not-a-database.db"
    bad.write_bytes(b"this is not SQLite" * 100)
    code = "import app; print(app.warm())"
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(APP).parent,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PARLEY_DB_URL": f"sqlite:///{bad}"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Parley: caches not warmed" in done.stdout, done.stdout
