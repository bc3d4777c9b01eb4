"""Statuses tell the truth (issue 10, "Status"): Ctrl-C and SIGTERM store `interrupted`; a store
write that fails (disk full) ends the run `failed` as soon as the store can be written again
and never leaves it `running`; a stuck run can always be stopped and deleted, from anywhere.
"""
from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import event, text
from waiting import wait_for

from engine import Store, arun_debate, run_debate
from engine.llm.calls import RunStopped
from engine.models import Turn
from engine.services.tasks import TaskRunner
from engine.store import StoreWriteError

ROOT = Path(__file__).resolve().parents[1]
GENEROUS = 120.0  # seconds; every wait ends as soon as what it waits for is there
JUDGE = "VERDICT: pro\nREASONING: r\nCONFIDENCE: 0.8"


def raw_status(store: Store, run_id: str) -> str | None:
    """The status as stored, read without the store's reaper (which writes)."""
    with store.engine.connect() as connection:
        return connection.execute(text("SELECT status FROM runs WHERE id = :id"),
                                  {"id": run_id}).scalar()


def cli_run(url: str, *extra: str) -> subprocess.Popen:
    """`python -m engine run panel` on a slow simulated model (2 s a call: four phases)."""
    return subprocess.Popen([sys.executable, "-m", "engine", "run", "panel",
                             "Which is larger, 3 or 5?", "--model", "simulated?latency=2",
                             "--db", url, *extra], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def first_turns_of_the_only_run(store: Store) -> str:
    def started() -> str | None:
        turns = store.turns()
        return str(turns["run_id"].iloc[0]) if not turns.empty else None
    return wait_for(started, "the run's first turns")


# --------------------------------------------------------------------------- Ctrl-C, SIGTERM
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["ctrl-c", "sigterm"])
def test_ctrl_c_and_sigterm_store_interrupted_not_failed_with_cancelled_error(tmp_path, sig,
                                                                             code):
    """The finding: Ctrl-C stored the run `failed` with "CancelledError: "."""
    url = f"sqlite:///{tmp_path / 'signal.db'}"
    store = Store(url)
    child = cli_run(url)
    try:
        run_id = first_turns_of_the_only_run(store)
        kept = len(store.turns(run_id))
        child.send_signal(sig)
        _, err = child.communicate(timeout=GENEROUS)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == code, err
    assert err.strip().splitlines()[-1] in ("interrupted", "terminated")
    run = store.get(run_id)
    assert run["status"] == "interrupted", run
    assert "CancelledError" not in run["error"] and "Ctrl-C or SIGTERM" in run["error"]
    assert len(run["turns"]) >= kept and run["calls"] == len(run["turns"])


def test_a_cancelled_run_is_stored_interrupted(store):
    async def go() -> str:
        task = asyncio.create_task(arun_debate(
            "Cancelled?", proponent="simulated?latency=60", opponent="simulated",
            judge="simulated", max_rounds=1, store=store))
        while store.runs().empty:  # the run row exists, its first call is in flight
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return str(store.runs()["id"].iloc[0])

    run_id = asyncio.run(go())
    assert raw_status(store, run_id) == "interrupted"
    assert "CancelledError" not in store.get(run_id)["error"]


# --------------------------------------------------------------------------- store write failures
class DiskFull:
    """Makes the next `writes` INSERT/UPDATE statements fail as a full disk does (SQLite)."""

    def __init__(self, store: Store):
        self.writes = 0
        event.listen(store.engine, "before_cursor_execute", self)

    def __call__(self, _conn, _cursor, statement, _params, _context, _many) -> None:
        if self.writes and statement.lstrip().upper().startswith(("INSERT", "UPDATE")):
            self.writes -= 1
            raise sqlite3.OperationalError("database or disk is full")


def test_when_the_disk_fills_the_run_ends_failed_as_soon_as_the_store_can_be_written(
        store, recording_model):
    """The finding: the run in flight stayed `running` for the life of the process."""
    disk = DiskFull(store)

    def fill_after_second_turn(turn) -> None:
        if turn.index == 1:
            disk.writes = 10 ** 6  # full until the test frees it

    with pytest.raises(StoreWriteError, match="database or disk is full"):
        run_debate("Disk full?", proponent=recording_model(["p1", "p2"]),
                   opponent=recording_model(["c1", "c2"]), judge=recording_model([JUDGE]),
                   max_rounds=2, retries=0, store=store, on_event=fill_after_second_turn)
    run_id = str(store.turns()["run_id"].iloc[0])
    assert store.pending == {run_id: ("failed", "the store could not be written: database or "
                                      "disk is full")}
    assert raw_status(store, run_id) == "running"  # the disk is still full
    assert store.runs()["status"].iloc[0] == "running"  # reads work; the reaper retried
    assert store.reap() == 0 and store.pending  # (and could not write either)

    disk.writes = 0  # space again: the next write of any kind ends the run first
    other = store.start_run("debate", "Next run?")
    assert raw_status(store, run_id) == "failed" and not store.pending
    run = store.get(run_id)
    assert run["error"] == "the store could not be written: database or disk is full"
    assert [t["reply"] for t in run["turns"]] == ["p1", "c1"] and run["calls"] == 2
    assert raw_status(store, other) == "running"


def test_a_pending_end_is_written_by_the_reaper(store, recording_model):
    disk = DiskFull(store)

    def fill(turn) -> None:
        disk.writes = 10 ** 6

    with pytest.raises(StoreWriteError):
        run_debate("Reaped?", proponent=recording_model(["p1"]), opponent=recording_model(["c"]),
                   judge=recording_model([JUDGE]), max_rounds=1, retries=0, store=store,
                   on_event=fill)
    run_id = next(iter(store.pending))
    disk.writes = 0
    assert raw_status(store, run_id) == "running"
    assert store.reap() == 0  # the page's next read: the end is written first
    assert raw_status(store, run_id) == "failed" and not store.pending


def test_a_batch_that_cannot_be_written_waits_for_the_next_flush(store):
    """Experiments write turns in batches: a batch the store refuses stays in memory and goes
    with the next one; when the store recovers before the run ends, nothing was lost."""
    disk = DiskFull(store)
    sink = store.batched()

    def fail_twice(turn) -> None:
        if turn.index == 0:
            disk.writes = 2

    result = asyncio.run(arun_debate("Batched?", proponent="simulated", opponent="simulated",
                                     judge="simulated", max_rounds=2, store=sink,
                                     on_event=fail_twice))
    run = store.get(result.run_id)
    assert run["status"] == "completed" and len(run["turns"]) == len(result.turns) == 5
    assert disk.writes == 0  # both failures happened


def test_a_batch_still_unwritten_when_its_run_ends_fails_the_run(store):
    disk = DiskFull(store)
    sink = store.batched()

    def fill(turn) -> None:
        if turn.index == 1:
            disk.writes = 10 ** 6

    with pytest.raises(StoreWriteError):
        asyncio.run(arun_debate("Lost batch?", proponent="simulated", opponent="simulated",
                                judge="simulated", max_rounds=2, store=sink, on_event=fill))
    run_id = next(iter(store.pending))
    disk.writes = 0
    store.reap()
    run = store.get(run_id)
    assert run["status"] == "failed" and "database or disk is full" in run["error"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="mounting a tiny file system needs root")
def test_a_real_full_file_system_ends_the_run_failed(recording_model):
    """The same on a real 600 KB file system that fills up in the middle of a run."""
    folder = Path(tempfile.mkdtemp(prefix="parley-full-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs",
                              str(folder)], capture_output=True).returncode == 0
    if not mounted:
        folder.rmdir()
        pytest.skip("this machine does not allow mounting a tmpfs")
    filler = folder / "filler"
    store = None
    try:
        store = Store(f"sqlite:///{folder / 'full.db'}")

        def fill_the_disk(turn) -> None:
            if turn.index == 0:
                with open(filler, "wb", buffering=0) as handle:
                    try:
                        while True:
                            handle.write(b"\0" * 4096)
                    except OSError:  # no space left on the device: what this test wants
                        pass

        big = "x" * 200_000  # a long reply: its turn needs pages the disk no longer has
        with pytest.raises(StoreWriteError, match="full"):
            run_debate("Real disk full?", proponent=recording_model(["p1", big]),
                       opponent=recording_model([big]), judge=recording_model([JUDGE]),
                       max_rounds=2, retries=0, store=store, on_event=fill_the_disk)
        run_id = next(iter(store.pending))
        assert raw_status(store, run_id) == "running"
        filler.unlink()
        store.reap()
        run = store.get(run_id)
        assert run["status"] == "failed" and "full" in run["error"]
        assert [t["reply"] for t in run["turns"]] == ["p1"]
    finally:
        if store is not None:
            store.engine.dispose()
        subprocess.run(["umount", str(folder)], check=False)
        folder.rmdir()


# --------------------------------------------------------------------------- stop and delete
def test_a_run_can_be_stopped_from_another_process(tmp_path):
    """The owner (a CLI process) notices at its next turn and stops; the turn in flight when
    the stop came is kept, and the run stays `interrupted`."""
    url = f"sqlite:///{tmp_path / 'stop.db'}"
    store = Store(url)
    child = cli_run(url)
    try:
        run_id = first_turns_of_the_only_run(store)
        assert TaskRunner(store).stop(run_id) is True  # not a task of this process
        assert raw_status(store, run_id) == "interrupted"
        _, err = child.communicate(timeout=GENEROUS)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 1 and "stopped: the run was ended elsewhere" in err, err
    run = store.get(run_id)
    assert run["status"] == "interrupted" and run["error"] == "stopped by the user"
    assert run["finished_at"] is not None
    assert TaskRunner(store).stop(run_id) is False  # nothing left to stop


def test_a_running_run_can_be_deleted_and_its_owner_never_resurrects_it(store):
    tasks = TaskRunner(store)
    run_id = tasks.start_run({"protocol": "panel", "model": "simulated?latency=1"}, "Deleted?")
    wait_for(lambda: not store.turns(run_id).empty, "the first turns")
    assert raw_status(store, run_id) == "running"
    assert store.delete([run_id]) == 1
    job = tasks.task(run_id)
    assert job.done.wait(GENEROUS)
    assert job.error == ""  # it stopped as asked, not with a crash
    assert not store.exists(run_id) and store.turns(run_id).empty
    assert store.runs().empty


def test_a_stuck_run_left_by_a_full_disk_can_be_deleted(store, recording_model):
    """The finding's last words: the stuck run "can be neither stopped nor deleted"."""
    disk = DiskFull(store)

    def fill(turn) -> None:
        disk.writes = 10 ** 6

    with pytest.raises(StoreWriteError):
        run_debate("Stuck?", proponent=recording_model(["p1"]), opponent=recording_model(["c"]),
                   judge=recording_model([JUDGE]), max_rounds=1, retries=0, store=store,
                   on_event=fill)
    run_id = next(iter(store.pending))
    disk.writes = 0
    assert store.delete([run_id]) == 1 and not store.pending
    assert not store.exists(run_id)


def test_a_stopped_or_deleted_run_is_never_resurrected_on_both_backends(backend):  # noqa: F811
    run_id = backend.start_run("debate", "Stopped elsewhere?")
    backend.add_turn(run_id, Turn(index=0, phase="argument", seat="pro", status="degraded"))
    assert backend.stop_run(run_id) is True and backend.stop_run(run_id) is False
    with pytest.raises(RunStopped, match="ended elsewhere"):  # the call in flight is kept
        backend.add_turn(run_id, Turn(index=1, phase="argument", seat="con"))
    assert backend.end_run(run_id, "failed", "late") is True  # a no-op: it is not running
    run = backend.get(run_id)
    assert (run["status"], run["error"], run["calls"], run["degraded"]) == \
        ("interrupted", "stopped by the user", 2, 1)
    assert [t["idx"] for t in run["turns"]] == [0, 1]
    assert backend.delete([run_id]) == 1
    with pytest.raises(RunStopped, match="deleted"):
        backend.add_turn(run_id, Turn(index=2, phase="judge", seat="judge"))
    assert not backend.exists(run_id) and backend.turns(run_id).empty


# --------------------------------------------------------------------------- the Runs page
def test_runs_page_stops_a_run_this_process_did_not_start(db_url):
    from streamlit.testing.v1 import AppTest
    store = Store(db_url)
    run_id = store.start_run("debate", "Started by another process?")  # alive: this pid
    at = AppTest.from_file(str(ROOT / "pages" / "runs.py"), default_timeout=60)
    at.query_params["run"] = run_id
    at.run()
    assert not at.exception, at.exception
    assert not at.button(key="runs_delete_ask").disabled  # a running run can be deleted
    # the actions sit above what the run's end changes (its progress and its Stop button):
    # the rerun at its end does not move them under a click
    keys = [button.key for button in at.button]
    assert keys.index("runs_delete_ask") < keys.index("runs_stop"), keys
    at.button(key="runs_stop").click().run()
    assert not at.exception, at.exception
    assert raw_status(store, run_id) == "interrupted"
    assert store.get(run_id)["error"] == "stopped by the user"
    at.button(key="runs_delete_ask").click().run()
    at.button(key="runs_delete_yes").click().run()
    assert not store.exists(run_id)
