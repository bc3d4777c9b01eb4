"""Reads never write, and the live view reads only what is new (issue 11).

A run left `running` by a dead process reads as `interrupted` from `get`, `runs` and
`run_state` while the database still says `running`; the reaper (on open, on a timer, or
called) is what writes it. `run_state` and `turns_after` are the Run page's live poll.
"""
from __future__ import annotations

import time

import pytest
from plugins.processes import dead_pid
from sqlalchemy import event, text, update

from engine import Store, run_panel
from engine.models import Turn, now
from engine.store.schema import RunRow


def raw(store: Store, run_id: str) -> tuple[str, str, object]:
    """status, error and finished_at as stored, read without the store."""
    with store.engine.connect() as connection:
        return tuple(connection.execute(text(
            "SELECT status, error, finished_at FROM runs WHERE id = :id"), {"id": run_id}).one())


def orphan(store: Store, turns: int = 2) -> str:
    """A `running` run with `turns` turns whose process is gone."""
    run_id = store.start_run("debate", "Left behind?")
    for i in range(turns):
        store.add_turn(run_id, turn(i))
    with store.engine.begin() as connection:
        connection.execute(update(RunRow).where(RunRow.id == run_id).values(pid=dead_pid()))
    return run_id


def turn(i: int, status: str = "ok") -> Turn:
    return Turn(index=i, phase="argue", round=1, seat=f"s{i}", role="", model="simulated",
                messages=[{"role": "user", "content": f"prompt {i}"}], reply=f"reply {i}",
                status=status, started_at=now(), finished_at=now())


class Writes:
    """Counts the INSERT/UPDATE/DELETE statements a store sends."""

    def __init__(self, store: Store):
        self.count = 0
        event.listen(store.engine, "before_cursor_execute", self)

    def __call__(self, _conn, _cursor, statement, *_args) -> None:
        if statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            self.count += 1


def test_reads_present_a_dead_run_as_interrupted_and_leave_the_database_unchanged(store):
    run_id = orphan(store)
    alive = store.start_run("debate", "Still going?")
    writes = Writes(store)
    run = store.get(run_id)
    assert run["status"] == "interrupted" and run["finished_at"] is not None
    assert run["error"] == "the process running it stopped" and run["calls"] == 2
    frame = store.runs()
    assert dict(zip(frame["id"], frame["status"], strict=True)) == {
        run_id: "interrupted", alive: "running"}
    assert store.run_state(run_id)["status"] == "interrupted"
    assert store.turns_after(run_id, -1) and store.turns(run_id).shape[0] == 2
    assert writes.count == 0
    assert raw(store, run_id) == ("running", "", None)  # still as the dead process left it

    assert store.reap() == 1
    status, error, finished = raw(store, run_id)
    assert (status, error) == ("interrupted", "the process running it stopped") and finished
    assert raw(store, alive)[0] == "running"


def test_opening_a_store_reaps(store):
    run_id = orphan(store)
    assert raw(store, run_id)[0] == "running"
    Store(store.url)
    assert raw(store, run_id)[0] == "interrupted"


def test_the_reaper_runs_on_a_timer_until_stopped(store):
    store.start_reaper(interval=0.05)
    thread = store._reaper
    store.start_reaper(interval=0.05)  # idempotent: the same thread
    assert store._reaper is thread and thread.is_alive()
    run_id = orphan(store)
    deadline = time.monotonic() + 30
    while raw(store, run_id)[0] == "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert raw(store, run_id)[0] == "interrupted"
    store.stop_reaper()
    assert store._reaper is None and not thread.is_alive()
    late = orphan(store)
    time.sleep(0.2)
    assert raw(store, late)[0] == "running"  # stopped: nothing reaps any more


def test_run_state_and_turns_after(store):
    run_id = store.start_run("debate", "Live?")
    state = store.run_state(run_id)
    assert state["status"] == "running" and state["turns"] == 0 and state["error"] == ""
    assert state["updated_at"] is not None and store.turns_after(run_id, -1) == []
    for i in range(5):
        store.add_turn(run_id, turn(i, "degraded" if i == 3 else "ok"))
    full = store.get(run_id)["turns"]
    assert store.run_state(run_id)["turns"] == 5
    assert store.turns_after(run_id, -1) == full
    assert store.turns_after(run_id, 2) == full[3:]
    assert [t["idx"] for t in store.turns_after(run_id, 2)] == [3, 4]
    assert store.turns_after(run_id, 4) == []
    store.end_run(run_id, "failed", "boom")
    state = store.run_state(run_id)
    assert (state["status"], state["error"], state["turns"]) == ("failed", "boom", 5)
    with pytest.raises(KeyError):
        store.run_state("nope")


def test_the_live_poll_of_a_finished_panel_run_matches_get(store):
    result = run_panel("Which is larger, 3 or 5?", debaters=["simulated"] * 3,
                       critic="simulated", judge="simulated", store=store)
    run = store.get(result.run_id)
    state = store.run_state(result.run_id)
    assert state["status"] == "completed" and state["turns"] == len(run["turns"])
    assert state["updated_at"] == run["finished_at"]
    last = run["turns"][-2]["idx"]
    assert store.turns_after(result.run_id, last) == run["turns"][-1:]


def test_a_batched_store_records_through_its_batch(store):
    run_id = store.start_run("debate", "Batched?")
    batched = store.batched()
    assert store.recorder(run_id).sink is store
    assert batched.recorder(run_id).sink is batched._batch is not None
    batched.recorder(run_id).turn(turn(0))  # no event loop: written at once
    assert store.run_state(run_id)["turns"] == 1


def test_experiment_reads_never_write(store):
    from engine import experiments as ex
    experiment_id = ex.create(store, {
        "questions": [{"question": "Which is larger, 3 or 5?", "expected": "5"}],
        "configs": [{"protocol": "vote", "label": "vote", "model": "simulated"}]})
    orphan(store)
    writes = Writes(store)
    assert ex.progress(store, experiment_id).status == "planned"
    assert ex.get(store, experiment_id)["status"] == "planned"
    assert len(ex.list_experiments(store)) == 1 and ex.pending_cells(store, experiment_id)
    assert writes.count == 0
