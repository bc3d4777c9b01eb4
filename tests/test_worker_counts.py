"""A worker's "cells done" is counted from the runs it stored (its host and pid, from its start
to its stop), not kept in a counter written after each run: a worker killed between the two
writes can no longer undercount (issue 16's workers table)."""
from __future__ import annotations

import os
from datetime import timedelta
from uuid import uuid4

from sqlalchemy import insert

from engine.models import now
from engine.store import Store
from engine.store import workers as pool_store
from engine.store.schema import RunRow


def stored(store: Store, status: str, *, pid: int | None = None, experiment: str | None = "e1",
           at=None, host: str | None = None) -> None:
    with store.writing() as connection:
        connection.execute(insert(RunRow).values(
            id=uuid4().hex[:12], protocol="vote", question="q", status=status,
            experiment_id=experiment, host=store.host if host is None else host,
            pid=os.getpid() if pid is None else pid, created_at=at or now()))


def test_cells_done_counts_the_finished_experiment_runs_of_this_worker_only(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'pool.db'}")
    before = now() - timedelta(hours=1)
    stored(store, "completed", at=before)  # an earlier process with the same pid
    pool_store.register(store, [], 4)
    for status in ("completed", "completed", "failed"):
        stored(store, status)  # finished cells: counted
    stored(store, "interrupted")  # cut short (a kill, a stop): not a finished cell
    stored(store, "running")
    stored(store, "completed", experiment=None)  # a run outside any experiment
    stored(store, "completed", pid=os.getpid() + 1)  # another process on this host
    stored(store, "completed", host="elsewhere")  # the same pid on another machine
    table = pool_store.workers(store)
    assert list(table["cells_done"]) == [3]
    assert list(table["state"]) == ["running"]


def test_a_stopped_workers_count_ends_at_its_stop(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'pool.db'}")
    worker = pool_store.register(store, [], 1)
    stored(store, "completed")
    pool_store.beat(store, worker, stopped=True)
    stored(store, "completed", at=now() + timedelta(minutes=5))  # a later process, same pid
    assert pool_store.workers(store).empty  # stopped workers are listed only on request
    table = pool_store.workers(store, include_stopped=True)
    assert list(table["cells_done"]) == [1] and list(table["state"]) == ["stopped"]
