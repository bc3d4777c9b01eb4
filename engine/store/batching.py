"""Group commit: the runs of many runs in one event loop written together.

A store made by `Store.batched()` queues what its runs write (a run's row as it starts, each
completed turn, a run's end) and writes it all at the event loop's next iteration, in one
transaction (a statement for the new run rows, one for the turns, one for the heartbeat of
the runs with turns): a transaction per turn made the store the bottleneck of an
experiment's loop. A run's end is awaited (`finish`), so a run counted as done is stored as
done; `window` (seconds) can widen a batch. A crash loses at most what was queued in the
iteration it interrupts; a run deleted or stopped elsewhere is noticed at the flush
(`RunStopped` at its next turn); when the store cannot be written everything stays queued,
and a run that ends meanwhile is stored `failed` (`before_end`).
"""
from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from engine.models import RunStopped, Turn, now
from engine.store.database import StoreWriteError
from engine.store.records import error_text


class RunWriting(Protocol):
    """What a batch writes through (`engine.store.runs.RunWriting`, which holds the batch)."""

    def write_batch(self, starts: Sequence[Mapping[str, Any]],
                    pairs: Sequence[tuple[str, Turn]],
                    endings: Sequence[Mapping[str, Any]]) -> dict[str, str]: ...

    def update_turn(self, run_id: str, turn: Turn) -> None: ...


class TurnBatch:
    """What a batched store has not written yet (run rows, turns, run ends), and the runs
    found ended elsewhere."""

    def __init__(self, store: RunWriting, window: float = 0.0):
        self.store, self.window = store, window
        self._starts: dict[str, dict[str, Any]] = {}  # run id -> its row, not yet inserted
        self._pending: dict[tuple[str, int], tuple[str, Turn]] = {}
        # run id -> its end's values and who awaits their commit (None: nobody)
        self._finishes: dict[str, tuple[dict[str, Any], asyncio.Future[None] | None]] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._ended: dict[str, str] = {}  # runs deleted or stopped elsewhere: why
        self._unwritten = ""  # why the last flush failed (what it held waits for the next)

    @staticmethod
    def deferring() -> bool:
        """Whether writes can wait for a flush: only on a running event loop (without one,
        nothing would ever flush them)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    def _schedule(self, soon: bool = False) -> None:
        """Flush after `window` (at the loop's next iteration when `soon`: a run's end is
        awaited), at once without a loop."""
        if self._handle is not None and not (soon and self.window):
            return
        if not self.deferring():
            self.flush()
            return
        if self._handle is not None:
            self._handle.cancel()
        self._handle = asyncio.get_running_loop().call_later(
            0.0 if soon else self.window, self.flush)

    def start(self, run_id: str, row: dict[str, Any]) -> None:
        """Queue a new run's row (written before, or with, its first turns)."""
        self._starts[run_id] = row
        self._schedule()

    def add_turn(self, run_id: str, turn: Turn) -> None:
        """Queue a turn; the flush is scheduled on the running loop (at once without one).
        `RunStopped` when the run was ended elsewhere."""
        if run_id in self._ended:  # the owner stops at its next turn, as with the plain store
            raise RunStopped(self._ended[run_id])
        self._pending[(run_id, turn.index)] = (run_id, turn)
        self._schedule()

    def update_turn(self, run_id: str, turn: Turn) -> None:
        """Write a turn's changed fields, unless it is still queued (then it goes as it is)."""
        if (run_id, turn.index) not in self._pending:
            self.store.update_turn(run_id, turn)

    def finish(self, run_id: str, ending: dict[str, Any]) -> asyncio.Future[None]:
        """Queue a run's end; the future is done once it is committed, with `StoreWriteError`
        when the store refused it (twice: the flush tries again at once when ends wait)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._finishes[run_id] = (ending, done)
        self._schedule(soon=True)
        return done

    def finish_now(self, run_id: str, ending: dict[str, Any]) -> None:
        """Write a run's end and everything queued now; `StoreWriteError` when it cannot be."""
        self._finishes[run_id] = (ending, None)
        self.flush()
        if run_id in self._finishes:
            del self._finishes[run_id]
            raise StoreWriteError(self._unwritten or "the store could not be written")

    def flush(self) -> None:
        """Write everything queued in one transaction. When the store cannot be written (disk
        full) it stays queued for the next flush, except the run ends awaited: those fail
        (their runs end `failed`, see `before_end`) after one more try."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if not (self._starts or self._pending or self._finishes):
            return
        for attempt in (1, 2):
            starts, pairs = dict(self._starts), list(self._pending.values())
            finishes = dict(self._finishes)
            try:
                ended = self.store.write_batch(list(starts.values()), pairs,
                                               [ending for ending, _ in finishes.values()])
                break
            except StoreWriteError as exc:
                self._unwritten = str(exc)
                if not finishes or attempt == 2:
                    self._fail(finishes, exc)
                    return
        self._unwritten = ""
        for run_id in starts:
            self._starts.pop(run_id, None)
        for key in [(r, t.index) for r, t in pairs]:
            self._pending.pop(key, None)
        self._ended.update(ended)
        for run_id, (_, done) in finishes.items():
            self._finishes.pop(run_id, None)
            if done is not None and not done.done():
                done.set_result(None)

    def _fail(self, finishes: Mapping[str, tuple[dict[str, Any], asyncio.Future[None] | None]],
              exc: StoreWriteError) -> None:
        """The awaited run ends of a flush the store refused: their runs hear why."""
        for run_id, (_, done) in finishes.items():
            if done is None:
                continue  # `finish_now` says so itself
            self._finishes.pop(run_id, None)
            if not done.done():
                done.set_exception(StoreWriteError(str(exc)))

    def _drop(self, run_id: str) -> None:
        for key in [k for k in self._pending if k[0] == run_id]:
            del self._pending[key]
        self._finishes.pop(run_id, None)

    def before_end(self, run_id: str, status: str, error: str) -> None:
        """Write what is queued before a run that did not complete ends; an ending run's
        unwritten turns go (its error says why). A run whose row is still unwritten is
        queued ended (`status`, `error`), so that it never appears as `running` later."""
        self.flush()
        self._drop(run_id)
        self._ended.pop(run_id, None)
        row = self._starts.get(run_id)
        if row is not None:
            row.update(status=status, error=error_text(error)[:2000], finished_at=now())
