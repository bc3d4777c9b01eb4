"""What keeps pages fast over many stored runs (issue 14, the browser page-ready times): the
experiment results and the Insights figures are built once per change of the stored runs
and read from the cache after that, and the process warms itself after its first page."""
from __future__ import annotations

import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.reports import baseline, charts
from pages import _insights_data, _shared

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
    assert len(reports) == 1 and len(at.get("plotly_chart")) == 1  # the summary tab
    at.session_state["exp-tab"] = "Questions"  # as a click on the tab: the baseline view
    at.run()
    assert len(reports) == 1 and len(matrices) == 1
    grid = next(d.value for d in at.dataframe if "baseline" in d.value.columns)
    at.run()  # a second visit (or a click elsewhere) draws the same from the cache
    assert len(reports) == 1 and len(matrices) == 1
    assert next(d.value for d in at.dataframe if "baseline" in d.value.columns).equals(grid)
    at.session_state["exp-tab"] = "Summary"
    at.run()
    assert len(reports) == 1 and len(at.get("plotly_chart")) == 1  # figures from the cache
    at.session_state["exp-tab"] = "Questions"
    Store(db_url).delete([str(ex.runs_frame(Store(db_url), experiment_id)["id"].iloc[0])])
    at.run()  # a run deleted: the stored runs changed, so the results are built again
    assert not at.exception, at.exception
    assert len(reports) == 2 and len(matrices) == 2


def test_insights_figures_are_made_once_per_change_of_the_runs(db_url, monkeypatch):
    experiment(db_url)
    made = counting(monkeypatch, charts, "figure")
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/insights.py").run()
    assert not at.exception, at.exception
    first = len(made)
    assert first == len(at.get("plotly_chart")) > 0
    at.run()
    assert len(made) == first and len(at.get("plotly_chart")) == first


def test_the_warm_up_loads_what_the_other_pages_need():
    _shared.warm_up()
    assert set(_shared.WARM_MODULES) <= set(sys.modules)


def test_the_warm_up_fills_the_insights_caches_for_its_first_view(db_url, monkeypatch):
    """The background warm-up reads and adds up the runs and makes the figures of Insights'
    first view, so a first visit finds them ready (on 10,000 runs, about a second)."""
    experiment(db_url)
    made = counting(monkeypatch, charts, "figure")
    _insights_data.warm(Store(db_url))
    warmed = len(made)
    assert warmed > 0
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/insights.py").run()
    assert not at.exception, at.exception
    assert len(made) == warmed == len(at.get("plotly_chart"))  # nothing made again
