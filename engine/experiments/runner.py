"""Running experiments: the batched run store, the runner and resume (in the background:
`engine.services.tasks.TaskRunner.start_experiment`)."""
from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sqlalchemy import select, update

from engine.llm.calls import RunStopped
from engine.models import ConfigError, now
from engine.store.readback import decode_tags
from engine.store import ExperimentRow, RunRow, StoreWriteError
from engine.experiments.planning import SUPERSEDED, Cell, _plan_of
from engine.store.experiments import Progress, _cell_runs, _live_status, _row, _set


# Built once: statements with bound parameters compile once and are then cached.
class BatchedStore:
    """The store as an experiment's runs see it: group commit. A completed turn is queued and
    written at the event loop's next iteration together with every other turn that completed
    in the same iteration (and always before a run is finished or ended), instead of one
    transaction per turn; with dozens of runs in flight, per-turn commits made SQLite the
    bottleneck of the loop (`python -m engine bench --only experiments` shows both). A crash
    loses at most the turns completed in the loop iteration it interrupts; `window` (seconds)
    can widen the batch."""

    def __init__(self, store: Any, window: float = 0.0):
        self.store, self.window = store, window
        self._pending: dict[tuple[str, int], tuple[str, Any]] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._ended: dict[str, str] = {}  # runs deleted or stopped elsewhere: why
        self._unwritten = ""  # why the last flush failed (its turns wait for the next one)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def recorder(self, run_id: str) -> Any:
        from engine.store import Recorder
        return Recorder(self, run_id)  # type: ignore[arg-type]

    def add_turn(self, run_id: str, turn: Any) -> None:
        if run_id in self._ended:  # the owner stops at its next turn, as with the plain store
            raise RunStopped(self._ended[run_id])
        self._pending[(run_id, turn.index)] = (run_id, turn)
        if self._handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._handle = loop.call_later(self.window, self.flush)

    def update_turn(self, run_id: str, turn: Any) -> None:
        if (run_id, turn.index) not in self._pending:  # a buffered turn is written as it is
            self.store.update_turn(run_id, turn)  # at flush time, with the update in it

    def flush(self) -> None:
        """Write every buffered turn, and the heartbeat of the runs they belong to. When the
        store cannot be written (disk full) the turns stay buffered for the next flush; a run
        whose turns are still unwritten when it ends is stored `failed`."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if not self._pending:
            return
        batch = list(self._pending.values())
        try:
            ended = self.store.add_turns(batch) or {}
        except StoreWriteError as exc:
            self._unwritten = str(exc)
            return
        self._unwritten = ""
        for key in [(r, t.index) for r, t in batch]:
            self._pending.pop(key, None)
        self._ended.update(ended)

    def _drop(self, run_id: str) -> None:
        for key in [k for k in self._pending if k[0] == run_id]:
            del self._pending[key]

    def finish_run(self, run_id: str, result: Any, metrics: Any = None) -> None:
        self.flush()
        if any(r == run_id for r, _ in self._pending):
            self._drop(run_id)
            raise StoreWriteError(self._unwritten or "the store could not be written")
        self.store.finish_run(run_id, result, metrics)

    def end_run(self, run_id: str, status: str, error: str = "") -> bool:
        self.flush()
        self._drop(run_id)  # unwritten turns of an ending run: its error says why
        self._ended.pop(run_id, None)
        return self.store.end_run(run_id, status, error)


HEARTBEAT_EVERY = 5.0  # seconds between heartbeats of a running experiment's row

_RUNNING: set[str] = set()  # experiments a runner of this process holds (any thread)
_LOCK = threading.Lock()


def _claim(store: Any, experiment_id: str) -> dict[str, Any]:
    """Mark the experiment `running` in this process, unless another live one holds it."""
    row = _row(store, experiment_id)
    status = _live_status(row, store.host)
    mine = row["host"] == store.host and row["pid"] == os.getpid()
    if status == "running" and not mine:
        raise ConfigError(f"experiment {experiment_id} is running in process {row['pid']} on "
                          f"{row['host']}; stop it there first", "input")
    with _LOCK:
        if experiment_id in _RUNNING:
            raise ConfigError(f"experiment {experiment_id} is already running here", "input")
    with store.engine.begin() as connection:
        changed = connection.execute(
            update(ExperimentRow).where(ExperimentRow.id == experiment_id,
                                        ExperimentRow.status == row["status"],
                                        ExperimentRow.pid == row["pid"])
            .values(status="running", host=store.host, pid=os.getpid(), error="",
                    started_at=now(), heartbeat_at=now(), finished_at=None)).rowcount
    if changed != 1:
        raise ConfigError(f"experiment {experiment_id} was started elsewhere just now", "input")
    with _LOCK:
        if experiment_id in _RUNNING:
            raise ConfigError(f"experiment {experiment_id} is already running here", "input")
        _RUNNING.add(experiment_id)
    return row


def _supersede(store: Any, run_ids: Sequence[str]) -> None:
    """Tag stale runs `superseded` (kept, but no longer counted as the cell's failure)."""
    if not run_ids:
        return
    with store.engine.begin() as connection:
        for run_id, tags in connection.execute(select(RunRow.id, RunRow.tags).where(
                RunRow.id.in_(list(run_ids)))).all():
            marked = sorted(set(decode_tags(tags)) | {SUPERSEDED})
            connection.execute(update(RunRow).where(RunRow.id == run_id)
                               .values(tags=json.dumps(marked)))


def pending_cells(store: Any, experiment_id: str) -> list[Cell]:
    """The cells with no completed run, in plan order: what a resume will run."""
    experiment = _plan_of(_row(store, experiment_id)["spec"])
    done = {r["cell"] for r in _cell_runs(store, experiment_id) if r["status"] == "completed"}
    return [cell for cell in experiment.cells() if cell not in done]


async def arun_experiment(store: Any, experiment_id: str, *,
                          stop_event: threading.Event | None = None,
                          on_progress: Callable[[Progress], Any] | None = None,
                          run_store: Any = None, endpoints: Any = None) -> Progress:
    """Run (or resume) an experiment: every cell without a completed run, `concurrency` runs
    at a time in this event loop. Ends `completed`, `stopped` (stop_event), `incomplete`
    (some runs failed; resume retries them) or `failed` (a configuration error).

    `run_store` is where runs are written: by default a `BatchedStore` over `store`.
    `endpoints` is the `EndpointRegistry` models resolve under (None: the environment's).
    """
    stop_event = stop_event or threading.Event()
    store.reap()  # runs left `running` by a dead process become `interrupted`, so are redone
    row = _claim(store, experiment_id)
    experiment = _plan_of(row["spec"])
    state = Progress(experiment_id, "running", experiment.runs)
    clock = time.monotonic()
    finished_here = 0
    fatal: list[str] = []
    failures: list[str] = []
    cells: Iterator[Cell] = iter(())
    sink = run_store or BatchedStore(store)
    beat = [time.monotonic()]
    from engine.protocols import arun_config

    def report() -> None:
        state.elapsed = time.monotonic() - clock
        left = state.total - state.done
        state.remaining = left * state.elapsed / finished_here if finished_here else None
        if on_progress is not None:
            on_progress(state)

    async def one(cell: Cell) -> None:
        nonlocal finished_here
        item, config = experiment.questions[cell.q], experiment.configs[cell.c]
        state.running += 1
        try:
            await arun_config(config, item["question"], store=sink, label=config["label"],
                              tags=[cell.tag], expected=item.get("expected"),
                              stop_event=stop_event, experiment_id=experiment_id,
                              endpoints=endpoints)
            state.done += 1
            finished_here += 1
        except RunStopped:
            state.interrupted += 1
        except ConfigError as exc:  # the same for every run of this configuration: stop all
            fatal.append(f"configuration {config['label']!r}: {exc}")
            stop_event.set()
        except Exception as exc:  # a bug in a run; the run is stored `failed` with its error
            state.failed += 1
            failures.append(f"{type(exc).__name__}: {exc}")
        finally:
            state.running -= 1
        if time.monotonic() - beat[0] > HEARTBEAT_EVERY:
            beat[0] = time.monotonic()
            _set(store, experiment_id, heartbeat_at=now())
        report()

    async def worker() -> None:
        for cell in cells:  # one shared iterator: each cell is taken exactly once
            if stop_event.is_set():
                return
            await one(cell)

    status, error = "failed", ""
    try:
        runs = _cell_runs(store, experiment_id)
        done = {r["cell"] for r in runs if r["status"] == "completed"}
        todo = [cell for cell in experiment.cells() if cell not in done]
        _supersede(store, [r["id"] for r in runs if r["cell"] not in done
                           and not r["superseded"] and r["status"] != "running"])
        state.done, cells = len(done), iter(todo)
        report()
        await asyncio.gather(*(worker() for _ in range(min(experiment.concurrency,
                                                           len(todo)) or 1)))
        if isinstance(sink, BatchedStore):
            sink.flush()
        left = len(pending_cells(store, experiment_id))
        if fatal:
            status, error = "failed", fatal[0]
        elif left == 0:
            status = "completed"
        elif stop_event.is_set():
            status = "stopped"
        else:
            last = f" (last error: {failures[-1]})" if failures else ""
            status, error = "incomplete", f"{left} run(s) did not complete{last}; resume " \
                "to retry them"
    except BaseException as exc:
        stopped = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))
        status, error = ("stopped" if stopped else "failed"), f"{type(exc).__name__}: {exc}"
        raise
    finally:
        with _LOCK:
            _RUNNING.discard(experiment_id)
        _set(store, experiment_id, status=status, error=error[:2000], finished_at=now(),
             heartbeat_at=now())
    state.status, state.error = status, error
    report()
    return state


def run_experiment(store: Any, experiment_id: str, **kw: Any) -> Progress:
    """Synchronous `arun_experiment`."""
    from engine.protocols import run_sync
    return run_sync(arun_experiment(store, experiment_id, **kw))

