"""The Experiments page with a pool of workers (AppTest): on PostgreSQL the start form offers
"Run on workers" and an experiment's panel queues it for the pool and stops it there; on
SQLite nothing of it shows."""
from __future__ import annotations

from pathlib import Path

from apptest_helpers import open_new_experiment
from plugins.pool import QUESTIONS, _spec
from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.store import workers as pool_store

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def open_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120.0)
    at.run()
    at.switch_page("pages/experiments.py").run()
    assert not at.exception, at.exception
    return at


def test_sqlite_shows_no_workers(db_url):
    store = Store(db_url)
    ex.create(store, _spec(QUESTIONS[:2], 1, latency=0.0))
    at = open_page()
    open_new_experiment(at)
    at.selectbox(key="exp-set").select("demo")
    at.multiselect(key="exp-configs").select("vote · defaults").run()
    assert at.button(key="exp-start") is not None
    assert not [c for c in at.checkbox if c.key == "exp-on-workers"]
    assert not [b for b in at.button if b.key in ("exp-pool-run", "exp-pool-stop")]
    assert "Workers" not in [e.label for e in at.expander]


def test_run_on_workers_then_stop(pg_url, monkeypatch):  # noqa: F811
    monkeypatch.setenv("PARLEY_DB_URL", pg_url)
    store = Store(pg_url)
    experiment_id = ex.create(store, _spec(QUESTIONS[:2], 2, latency=0.0))  # 8 cells
    at = open_page()
    open_new_experiment(at)
    at.selectbox(key="exp-set").select("demo")
    at.multiselect(key="exp-configs").select("vote · defaults").run()
    assert at.checkbox(key="exp-on-workers") is not None  # the start form offers it
    assert any(m.label == "Workers" for m in at.metric)
    at.button(key="exp-pool-run").click().run()
    assert not at.exception, at.exception
    found = ex.get(store, experiment_id)
    assert found["status"] == "running" and found["host"] == pool_store.POOL_HOST
    assert len(pool_store.open_jobs(store, experiment_id)) == 8
    queued = next(m for m in at.metric if m.label == "Cells queued or running")
    assert queued.value == "8"
    at.button(key="exp-pool-stop").click().run()
    assert not at.exception, at.exception
    assert ex.get(store, experiment_id)["status"] == "stopped"
    assert pool_store.open_jobs(store, experiment_id) == []


def test_start_form_runs_a_new_experiment_on_workers(pg_url, monkeypatch):  # noqa: F811
    monkeypatch.setenv("PARLEY_DB_URL", pg_url)
    store = Store(pg_url)
    at = open_page()
    open_new_experiment(at)
    at.selectbox(key="exp-set").select("demo")
    at.multiselect(key="exp-configs").select("vote · defaults").run()
    at.checkbox(key="exp-on-workers").check().run()
    at.button(key="exp-start").click().run()
    assert not at.exception, at.exception
    experiment_id = at.session_state["experiments_page_selected"]
    assert ex.get(store, experiment_id)["host"] == pool_store.POOL_HOST
    assert len(pool_store.open_jobs(store, experiment_id)) == 4  # 4 demo questions x 1
