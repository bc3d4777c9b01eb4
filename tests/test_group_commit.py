"""Group commit: an experiment's runs are written together, and none of them is lost.

A batched store writes the rows, turns and ends of the runs that wrote in one event loop
iteration in one transaction (`engine.store.batching`); before, each run took two commits of
its own (its row, then its turns and end).
"""
from __future__ import annotations

from sqlalchemy import event

from engine import experiments as ex
from engine.questions import DEFINITE

QUESTIONS = [{"question": q.text, "expected": q.expected} for q in DEFINITE[:8]]


def _commits(store) -> list[int]:
    counted = [0]
    event.listen(store.engine, "commit", lambda *_: counted.__setitem__(0, counted[0] + 1))
    return counted


def test_an_experiment_commits_its_runs_together_and_stores_every_one(store):
    experiment_id = ex.create(store, {
        "questions": QUESTIONS, "repeats": 3, "concurrency": 8,
        "configs": [{"protocol": "vote", "label": "vote", "model": "simulated?latency=0.01"}]})
    commits = _commits(store)
    state = ex.run_experiment(store, experiment_id)
    runs = store.runs(experiment_id=experiment_id)
    assert state.status == "completed" and len(runs) == len(QUESTIONS) * 3
    assert set(runs["status"]) == {"completed"}
    turns = store.turns(list(runs["id"]))
    assert len(turns) == int(runs["calls"].sum()) > 0  # every turn of every run
    assert set(turns["run_id"]) == set(runs["id"])
    # two commits a run before; now the runs of one loop iteration share one
    assert commits[0] < len(runs), commits[0]



def test_a_result_saved_through_a_batched_store_in_an_event_loop_keeps_its_turns(store):
    """A batched store in an event loop holds a new run's row for its next flush; a save,
    which writes the turns itself, writes that row first, so no turn is dropped as a turn of
    a run that does not exist."""
    import asyncio

    from engine import run_vote

    result = run_vote("Which is larger, 3 or 5?", voters=["simulated"] * 3)
    sink = store.batched()

    async def go() -> str:
        return sink.save(result)

    run = store.get(asyncio.run(go()))
    assert run["status"] == "completed" and len(run["turns"]) == len(result.turns) == 3


def test_a_run_that_ends_before_its_row_could_be_written_is_stored_ended(store):
    """The store refuses writes (a full disk) while a run's row waits in the batch and the
    run ends: once the store recovers the row is written ended with its error, never left
    `running` by a process that is still alive (which the reaper would never end)."""
    import asyncio
    import sqlite3

    refusals = [0]

    def full(_conn, _cursor, statement, *_):
        if refusals[0] and statement.lstrip().upper().startswith(("INSERT", "UPDATE")):
            refusals[0] -= 1
            raise sqlite3.OperationalError("database or disk is full")

    event.listen(store.engine, "before_cursor_execute", full)
    sink = store.batched(window=60.0)  # the row waits in the batch until it is flushed

    async def go() -> str:
        run_id = sink.start_run("vote", "Which is larger, 3 or 5?")
        refusals[0] = 2  # the flush before the end, then the end itself
        assert sink.end_run(run_id, "failed", "the model went away") is False
        return run_id

    run_id = asyncio.run(go())
    sink.flush_turns()  # the store takes writes again: the batch goes
    store.flush_pending()
    run = store.get(run_id)
    assert run["status"] == "failed" and "the model went away" in run["error"]


def test_a_runs_end_is_committed_at_once_whatever_the_window(store):
    """Turns gather for the batch's window (the experiment runner's keeps commits few), but a
    run's end, which its run awaits, is committed at the loop's next iteration: a run is
    never held back by the window."""
    import asyncio

    from engine import run_vote

    result = run_vote("Which is larger, 3 or 5?", voters=["simulated"] * 3)
    sink = store.batched(window=600.0)

    async def go() -> str:
        run_id = sink.start_run("vote", result.question_text)
        recorder = sink.recorder(run_id)
        for turn in result.turns:
            recorder.turn(turn)
        await asyncio.wait_for(sink.afinish_run(run_id, result, {}), 300)
        return run_id

    run = store.get(asyncio.run(go()))
    assert run["status"] == "completed" and len(run["turns"]) == 3
