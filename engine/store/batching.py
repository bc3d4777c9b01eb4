"""Group commit: the turns of many runs in one event loop written together.

An experiment keeps dozens of runs in flight; one transaction per turn made SQLite the
bottleneck of the loop (`python -m engine bench --only experiments` shows both). A store made
by `Store.batched()` queues each completed turn and writes it at the event loop's next
iteration together with every other turn that completed in the same iteration (and always
before a run is finished or ended). A crash loses at most the turns completed in the loop
iteration it interrupts; `window` (seconds) can widen the batch. A run deleted or stopped
elsewhere is noticed at the flush and its owner stops at its next turn (`RunStopped`).
"""
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from engine.models import RunStopped, Turn
from engine.store.database import StoreWriteError


class RunWriting(Protocol):
    """What a batch writes through (`engine.store.runs.RunWriting`, which holds the batch)."""

    def add_turns(self, pairs: Sequence[tuple[str, Turn]]) -> dict[str, str]: ...

    def update_turn(self, run_id: str, turn: Turn) -> None: ...


class BatchedRecorder:
    """Queues one run's turns in its store's batch."""

    def __init__(self, batch: TurnBatch, run_id: str):
        self.batch, self.run_id = batch, run_id

    def turn(self, turn: Turn) -> None:
        """Queue a completed turn (`RunStopped` when the run was ended elsewhere)."""
        self.batch.add(self.run_id, turn)

    def update_turn(self, turn: Turn) -> None:
        """Write a recorded turn's changed fields (a queued turn goes as it is at flush)."""
        self.batch.update(self.run_id, turn)


class TurnBatch:
    """The turns a batched store has not written yet, and the runs found ended elsewhere."""

    def __init__(self, store: RunWriting, window: float = 0.0):
        self.store, self.window = store, window
        self._pending: dict[tuple[str, int], tuple[str, Turn]] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._ended: dict[str, str] = {}  # runs deleted or stopped elsewhere: why
        self._unwritten = ""  # why the last flush failed (its turns wait for the next one)

    def recorder(self, run_id: str) -> BatchedRecorder:
        """The sink for one run's turns."""
        return BatchedRecorder(self, run_id)

    def add(self, run_id: str, turn: Turn) -> None:
        """Queue a turn; the flush is scheduled on the running loop (at once without one)."""
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

    def update(self, run_id: str, turn: Turn) -> None:
        """Write a turn's changed fields, unless it is still queued (then it goes as it is)."""
        if (run_id, turn.index) not in self._pending:
            self.store.update_turn(run_id, turn)

    def flush(self) -> None:
        """Write every queued turn, and the heartbeat of the runs they belong to. When the
        store cannot be written (disk full) the turns stay queued for the next flush; a run
        whose turns are still unwritten when it ends is stored `failed`."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if not self._pending:
            return
        batch = list(self._pending.values())
        try:
            ended = self.store.add_turns(batch)
        except StoreWriteError as exc:
            self._unwritten = str(exc)
            return
        self._unwritten = ""
        for key in [(r, t.index) for r, t in batch]:
            self._pending.pop(key, None)
        self._ended.update(ended)

    def queued(self) -> list[tuple[str, Turn]]:
        """The turns waiting to be written (`written` once a transaction holds them)."""
        return list(self._pending.values())

    def written(self, batch: Sequence[tuple[str, Turn]], ended: dict[str, str]) -> None:
        """`batch` (what `queued` gave) was written by another transaction (a run's end,
        `RunWriting.finish_run`); `ended` the runs it found ended elsewhere."""
        self._unwritten = ""
        for key in [(r, t.index) for r, t in batch]:
            self._pending.pop(key, None)
        self._ended.update(ended)
        if not self._pending and self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _drop(self, run_id: str) -> None:
        for key in [k for k in self._pending if k[0] == run_id]:
            del self._pending[key]

    def before_finish(self, run_id: str) -> None:
        """Write the queued turns; `StoreWriteError` when this run's still cannot be."""
        self.flush()
        if any(r == run_id for r, _ in self._pending):
            self._drop(run_id)
            raise StoreWriteError(self._unwritten or "the store could not be written")

    def before_end(self, run_id: str) -> None:
        """Write the queued turns; an ending run's unwritten ones go (its error says why)."""
        self.flush()
        self._drop(run_id)
        self._ended.pop(run_id, None)
