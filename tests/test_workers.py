"""The pool of workers (issue 16): experiments on `python -m engine worker` processes over
PostgreSQL. Nothing lost, nothing doubled: with three workers and one SIGKILLed mid-run,
every cell ends with exactly one completed run, and no run is left `running`.

PostgreSQL tests use PARLEY_TEST_PG_URL (`.ci/run` starts a server on loopback and sets
PARLEY_REQUIRE_PG=1, so CI fails rather than skips without it); each gets a database of its
own on that server, dropped afterwards.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from plugins.pool import QUESTIONS, _spec, _worker
from sqlalchemy import text
from sqlalchemy.engine import make_url

import engine.experiments as ex
from engine.cli import main
from engine.experiments.planning import plan_of
from engine.experiments.runner import arun_cell
from engine.models import ConfigError
from engine.protocols import run_sync
from engine.store import Store
from engine.store import workers as pool_store
from engine.workers import pool
from engine.workers.pool import WorkerState, conninfo, endpoint_of, queue_of, settle, stop, submit

ROOT = Path(__file__).resolve().parent.parent


def _runs(store: Store, experiment_id: str) -> list[dict]:
    rows = store.runs(experiment_id=experiment_id)
    return [{"id": r["id"], "status": r["status"], "tags": list(r["tags"]),
             "cell": ex.Cell.from_tags(r["tags"])} for _, r in rows.iterrows()]


def _completed_per_cell(store: Store, experiment_id: str) -> Counter:
    return Counter(r["cell"] for r in _runs(store, experiment_id) if r["status"] == "completed")


# --------------------------------------------------------------------------- no PostgreSQL
def test_sqlite_refuses_workers_and_stores_nothing(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps(_spec(QUESTIONS[:2], 1)), encoding="utf-8")
    assert main(["experiment", "run", str(spec), "--db", url, "--workers"]) == 2
    assert "workers need a PostgreSQL store" in capsys.readouterr().err
    store = Store(url)
    assert ex.list_experiments(store).empty  # refused before anything was stored
    experiment_id = ex.create(store, _spec(QUESTIONS[:2], 1))
    with pytest.raises(ConfigError, match="without --workers"):
        submit(store, experiment_id)
    assert main(["experiment", "resume", experiment_id, "--db", url, "--workers"]) == 2


def test_queues_and_connection_strings():
    assert conninfo("postgresql+psycopg://u:p@h:5/db?sslmode=require") == \
        "postgresql://u:p@h:5/db?sslmode=require"
    assert endpoint_of({"model": "simulated"}) == "default"
    assert queue_of({"seats": {"judge": {"model": "openai:m?endpoint=vllm1"}}}) == \
        "parley-vllm1"


# --------------------------------------------------------------------------- exactly once
def test_a_cell_end_writes_the_worker_and_experiment_heartbeats_once_a_second(monkeypatch):
    written: list[str] = []
    monkeypatch.setattr(pool_store, "beat", lambda store, worker_id: written.append(worker_id))
    monkeypatch.setattr(pool, "set_values", lambda store, eid, **values: written.append(eid))
    state = WorkerState(store=None, worker_id="w1")  # type: ignore[arg-type]
    run_sync(pool._touch(state, "e1"))
    run_sync(pool._touch(state, "e1"))  # the same second: neither is due again
    assert written == ["w1", "e1"]
    state.touched = {what: at - pool.TOUCH_EVERY for what, at in state.touched.items()}
    run_sync(pool._touch(state, "e1"))
    assert written == ["w1", "e1", "w1", "e1"]


def test_the_cell_guard_lets_one_taker_run_a_cell_once(pg_url):
    store = Store(pg_url)
    experiment_id = ex.create(store, _spec(QUESTIONS[:2], 1, latency=0.0))
    cell = ex.Cell(0, 0, 0)
    one, other = pool_store.CellLocks(store), pool_store.CellLocks(store)  # two workers
    try:
        assert one.acquire(experiment_id, cell)
        assert not other.acquire(experiment_id, cell)  # another session holds it
        assert not one.acquire(experiment_id, cell)  # and another job of the same worker
        assert pool_store.take_cell(store, experiment_id, cell)
        one.release(experiment_id, cell)
        # A worker died mid-cell: its run is left `running`; the next taker ends and marks it.
        experiment = plan_of(ex.get(store, experiment_id)["spec"])
        dead = store.start_run("vote", "q", tags=[cell.tag], experiment_id=experiment_id)
        assert other.acquire(experiment_id, cell)
        assert pool_store.take_cell(store, experiment_id, cell)
        outcome = run_sync(arun_cell(experiment, experiment_id, cell, store=store,
                                     stop_event=threading.Event()))
        other.release(experiment_id, cell)
        assert outcome.status == "completed"
        left = store.get(dead)
        assert left["status"] == "interrupted" and ex.SUPERSEDED in left["tags"]
        assert one.acquire(experiment_id, cell)
        assert not pool_store.take_cell(store, experiment_id, cell)  # done: never again
    finally:
        one.close()
        other.close()
    assert _completed_per_cell(store, experiment_id) == Counter({cell: 1})


def test_submit_stop_and_resubmit(pg_url):
    store = Store(pg_url)
    experiment_id = ex.create(store, _spec(QUESTIONS[:3], 2, latency=0.0))
    assert submit(store, experiment_id) == 12
    assert ex.get(store, experiment_id)["status"] == "running"
    assert submit(store, experiment_id) == 0  # queued already: nothing twice
    depth = pool_store.queue_depth(store)
    assert list(depth["queue"]) == ["parley-default"] and int(depth["queued"].sum()) == 12
    assert stop(store, experiment_id) == 12
    assert pool_store.open_jobs(store, experiment_id) == []
    assert ex.get(store, experiment_id)["status"] == "stopped"
    assert submit(store, experiment_id) == 12  # resume queues what is pending again
    assert settle(store, experiment_id) is None  # jobs are queued: not the end yet


# --------------------------------------------------------------------------- the pool
def test_three_workers_one_killed_every_cell_exactly_once(pg_url, tmp_path):
    store = Store(pg_url)
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps(_spec(QUESTIONS, 2)), encoding="utf-8")  # 200 cells
    total = len(QUESTIONS) * 2 * 2
    workers = [_worker(pg_url, tmp_path / f"worker{i}.log") for i in range(3)]
    runner = subprocess.Popen([sys.executable, "-m", "engine", "experiment", "run",
                               str(spec), "--db", pg_url, "--workers", "--wait", "--quiet"],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    victim = workers[0]
    try:
        deadline = time.monotonic() + 60
        experiment_id = ""
        while time.monotonic() < deadline:  # the victim holds a cell mid-run
            listed = ex.list_experiments(store)
            if not listed.empty:
                experiment_id = str(listed["id"].iloc[0])
                with store.engine.connect() as connection:
                    busy = connection.execute(text(
                        "SELECT count(*) FROM runs WHERE status = 'running' AND pid = :pid"),
                        {"pid": victim.pid}).scalar()
                done = int(listed["done"].iloc[0])
                if busy and done >= 20:
                    break
            time.sleep(0.05)
        assert experiment_id and done < total, "the victim never held a cell mid-run"
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        out, _ = runner.communicate(timeout=150)
        assert runner.returncode == 0, out
    finally:
        for process in [runner, *workers]:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in workers[1:]:
            process.wait(timeout=30)
    found = ex.get(store, experiment_id)
    assert found["status"] == "completed"
    runs = _runs(store, experiment_id)
    per_cell = _completed_per_cell(store, experiment_id)
    assert len(per_cell) == total and set(per_cell.values()) == {1}  # each once, none twice
    assert not any(r["status"] == "completed" and ex.SUPERSEDED in r["tags"] for r in runs)
    assert "running" not in {r["status"] for r in runs}
    with store.engine.connect() as connection:
        left = connection.execute(text(
            "SELECT status FROM runs WHERE experiment_id = :e AND pid = :pid AND "
            "status <> 'completed'"), {"e": experiment_id, "pid": victim.pid}).scalars().all()
    assert left and set(left) == {"interrupted"}  # the dead worker's partial run(s)
    for r in runs:
        if r["status"] != "completed":
            assert ex.SUPERSEDED in r["tags"]  # kept, never counted
    assert ex.progress(store, experiment_id).done == total
    table = pool_store.workers(store, include_stopped=True)
    # Counted from the runs each worker stored (the SIGKILLed one's interrupted runs are not
    # finished cells): exact, whenever the kill came.
    assert int(table["cells_done"].sum()) == total


def test_workers_reconnect_after_losing_the_database(pg_url, tmp_path):
    """Every connection of the workers is cut (as a server restart would) twice mid-run;
    the workers reconnect and the experiment still completes, each cell once."""
    store = Store(pg_url)
    experiment_id = ex.create(store, _spec(QUESTIONS[:12], 2))  # 48 cells
    workers = [_worker(pg_url, tmp_path / f"worker{i}.log") for i in range(2)]
    try:
        submit(store, experiment_id)
        name = make_url(pg_url).database
        for cuts in (10, 25):
            deadline = time.monotonic() + 60
            while ex.progress(store, experiment_id).done < cuts:
                assert time.monotonic() < deadline, "the workers made no progress"
                time.sleep(0.05)
            with store.engine.connect() as connection:  # this session's pool is cut too
                connection.execute(text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"), {"name": name})
                connection.commit()
            store.engine.dispose()
        deadline = time.monotonic() + 90
        while ex.get(store, experiment_id)["status"] == "running":
            assert time.monotonic() < deadline, "the experiment never ended: " + "".join(
                (tmp_path / f"worker{i}.log").read_text()[-3000:] for i in range(2))
            time.sleep(0.2)
    finally:
        for process in workers:
            process.send_signal(signal.SIGTERM)
        for process in workers:
            process.wait(timeout=30)
    assert ex.get(store, experiment_id)["status"] == "completed"
    per_cell = _completed_per_cell(store, experiment_id)
    assert len(per_cell) == 48 and set(per_cell.values()) == {1}
    assert "running" not in {r["status"] for r in _runs(store, experiment_id)}


def test_stop_cancels_queued_cells_and_stops_running_ones(pg_url, tmp_path):
    store = Store(pg_url)
    experiment_id = ex.create(store, _spec(QUESTIONS[:8], 2, latency=0.5))  # 32 slow cells
    worker = _worker(pg_url, tmp_path / "worker.log")
    try:
        submit(store, experiment_id)
        deadline = time.monotonic() + 60
        while sum(r["status"] == "running" for r in _runs(store, experiment_id)) < 2:
            assert time.monotonic() < deadline, "no cell ever ran"
            time.sleep(0.05)
        assert stop(store, experiment_id) >= 2
        deadline = time.monotonic() + 30
        while any(r["status"] == "running" for r in _runs(store, experiment_id)):
            assert time.monotonic() < deadline, "a running cell did not stop"
            time.sleep(0.1)
        time.sleep(2.5)  # a housekeeping round: the stop stays
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    assert ex.get(store, experiment_id)["status"] == "stopped"
    assert pool_store.open_jobs(store, experiment_id) == []
    runs = _runs(store, experiment_id)
    assert len(runs) < 32 and {r["status"] for r in runs} <= {"completed", "interrupted"}
    assert any(r["status"] == "interrupted" for r in runs)
