"""Writing runs: start, record turns, finish or end, stop, save and delete.

Turns are written as each completes, so a crash loses at most the call in flight. Every value
goes through `engine.store.records` on its way in (refused or cleaned, the same on both
backends). A run deleted or stopped elsewhere is noticed at its next turn (`RunStopped`).
A store made by `Store.batched()` group-commits its runs' rows, turns and ends instead
(`engine.store.batching`).
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from engine.models import RunResult, RunStopped, Turn, is_simulated, now
from engine.store import facets, readback, records
from engine.store.database import Database
from engine.store.labels import delete_labels
from engine.store.schema import RunRow, TurnRow
from engine.store.signal_columns import signal_values
from engine.store.simulated import seat_models
from engine.store.statements import (
    FINISH_RUN,
    HEARTBEATS,
    INSERT_RUN,
    INSERT_TURN,
    RUNS,
    UPDATE_TURN,
    count_turns,
    end_run_row,
)
from engine.text import clean_text

if TYPE_CHECKING:
    from engine.store.batching import TurnBatch

STATUSES = records.RUN_STATUSES
# What a run's result says of the run, written at its end: each field of `RunResult` (every
# protocol's) that is a column of `runs` (`correct`, `unanswered`, `duration`, `cost_usd` ...),
# but the two its start wrote.
FROM_RESULT = tuple(name for name in (*RunResult.model_fields, *RunResult.model_computed_fields)
                    if name in RUNS.columns and name not in ("protocol", "expected"))


class Recorder:
    """Writes one run's turns as they complete, through its store (a transaction per turn)
    or its store's batch (group commit: `engine.store.batching.TurnBatch`)."""

    def __init__(self, sink: RunWriting | TurnBatch, run_id: str):
        self.sink, self.run_id = sink, run_id

    def turn(self, turn: Turn) -> None:
        """Write a completed turn (`RunStopped` when the run was ended elsewhere)."""
        self.sink.add_turn(self.run_id, turn)

    def update_turn(self, turn: Turn) -> None:
        """Write a recorded turn's changed status or parsed fields (a turn a batch still
        holds goes as it is at its flush)."""
        self.sink.update_turn(self.run_id, turn)


class RunWriting(Database):
    """The store's run lifecycle (a part of `Store`)."""

    _batch: TurnBatch | None = None  # set on the store `batched()` returns

    def start_run(self, protocol: str, question: str, *, config: Mapping[str, Any] | None = None,
                  label: str | None = None, tags: Iterable[str] = (),
                  expected: str | None = None, experiment_id: str | None = None,
                  started_by: str = "") -> str:
        """Open a run row as `running`; returns its id. Values are checked before anything is
        written (`ConfigError`), as a run starts before any model call. `started_by` is who
        started it (`engine.access.Actor.user`), "" when not recorded."""
        run_id = uuid4().hex[:12]
        config = dict(config or {})
        values = records.new_run(protocol, question, config=config, label=label, tags=tags,
                                 expected=expected, experiment_id=experiment_id,
                                 started_by=started_by)
        models = sorted({model for _, model in seat_models(config)})
        row = {**values, "id": run_id, "status": "running", "models": clean_text(",".join(models)),
               # A run is simulated if any seat is (the reports name the seats).
               "simulated": any(is_simulated(m) for m in models),
               "experiment_id": experiment_id, "host": self.host[:200], "pid": os.getpid(),
               "created_at": now(), "heartbeat_at": now()}
        found = facets.values_of(values.get("tags"), row["models"]) - self._facets
        batch = self._batch
        if batch is not None and batch.deferring():  # inserted with the batch's next flush
            batch.start(run_id, row)
            return run_id
        with self.writing() as connection:
            connection.execute(INSERT_RUN, row)
            if found:
                facets.record(connection, [{"tags": values.get("tags"), "models": row["models"]}])
        self._facets |= found  # kept once committed: the next run with them writes none
        return run_id

    def recorder(self, run_id: str) -> Recorder:
        """The sink a protocol's run context writes `run_id`'s turns through: one transaction
        per turn, or group commit when this store was made by `batched()`."""
        return Recorder(self._batch or self, run_id)

    def add_turn(self, run_id: str, turn: Turn) -> None:
        """Write a completed turn. A run deleted or stopped elsewhere raises `RunStopped`
        (after keeping the turn of a stopped run: its call was made)."""
        ended = self.add_turns([(run_id, turn)])
        if ended:
            raise RunStopped(ended[run_id])

    def add_turns(self, pairs: Sequence[tuple[str, Turn]]) -> dict[str, str]:
        """Write several runs' turns in one transaction (group commit for batch runners);
        returns {run id: why} for the runs that are no longer `running` (deleted, or stopped
        from another process), whose owners should stop."""
        if not pairs:
            return {}
        if self._batch is not None:  # a run row the batch still holds goes first
            self._batch.flush()
        return self.write_batch([], pairs, [])

    def update_turn(self, run_id: str, turn: Turn) -> None:
        """Write a recorded turn's status, error, parsed fields and warnings again."""
        values = records.turn_values(run_id, turn)
        with self.writing() as connection:
            connection.execute(UPDATE_TURN, {
                "rid": run_id, "i": values["idx"], "parsed": values["parsed"],
                "warnings": values["warnings"], "status": values["status"],
                "error": values["error"]})

    def flush_turns(self) -> None:
        """Write the turns a batched store holds (nothing to do on a plain store)."""
        if self._batch is not None:
            self._batch.flush()

    def finish_run(self, run_id: str, result: RunResult, metrics: Mapping[str, Any], *,
                   error: str = "", lost: Sequence[str] = ()) -> None:
        """End a `running` run with its result, its metrics (the protocol's signals, handed in
        by whoever finished the run: the store knows no protocol) and totals (a run stopped
        or deleted meanwhile stays as it is): `completed`, or `failed` with `error` when one
        is given (no model call succeeded). A completed run that `lost` something decisive (see
        `ProtocolSpec.losses`) is flagged `degraded_run`, with what it lost. A batched store
        writes what it holds (this run's turns among it) in the same transaction
        (`StoreWriteError` when that cannot be written)."""
        ending = _ending(run_id, result, metrics, error, lost)
        if self._batch is not None:
            self._batch.finish_now(run_id, ending)
            return
        with self.writing() as connection:
            connection.execute(FINISH_RUN, ending)

    async def afinish_run(self, run_id: str, result: RunResult, metrics: Mapping[str, Any], *,
                          error: str = "", lost: Sequence[str] = ()) -> None:
        """`finish_run` for a run in an event loop: a batched store writes the end with the
        batch's next flush (group commit) and returns once it is committed."""
        if self._batch is None or not self._batch.deferring():
            self.finish_run(run_id, result, metrics, error=error, lost=lost)
            return
        await self._batch.finish(run_id, _ending(run_id, result, metrics, error, lost))

    def write_batch(self, starts: Sequence[Mapping[str, Any]], pairs: Sequence[tuple[str, Turn]],
                    endings: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        """Write a batch's new run rows, turns and run ends in one transaction (a statement
        for each kind, and one for the heartbeat of the runs with turns); returns {run id:
        why} for the runs no longer `running` (deleted, or stopped from another process),
        whose owners should stop. A run deleted between its heartbeat and its turns' insert
        fails the transaction: then each run is written on its own."""
        try:
            with self.writing() as connection:
                new = [row for row in starts
                       if facets.values_of(row.get("tags"), row.get("models")) - self._facets]
                ended = _write_batch(connection, starts, pairs, endings, new)
        except IntegrityError:
            ids = dict.fromkeys([*(r["id"] for r in starts), *(r for r, _ in pairs),
                                 *(e["rid"] for e in endings)])
            if len(ids) <= 1:
                return {r: "the run was deleted" for r, _ in pairs}
            ended = {}
            for run_id in ids:
                ended |= self.write_batch([r for r in starts if r["id"] == run_id],
                                          [p for p in pairs if p[0] == run_id],
                                          [e for e in endings if e["rid"] == run_id])
            return ended
        for row in starts:  # kept once committed: the next run with them writes none
            self._facets |= facets.values_of(row.get("tags"), row.get("models"))
        return ended

    def end_run(self, run_id: str, status: str, error: str = "") -> bool:
        """Close a `running` run that did not complete (`failed` or `interrupted`), keeping its
        turns. When the store cannot be written the end waits (see `flush_pending`) and this
        returns False; it never raises for a failed write. A batched store writes what it
        can of the run's turns first."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}")
        if self._batch is not None:
            self._batch.before_end(run_id, status, error)
        return self._end_or_wait(run_id, status, error)

    def stop_run(self, run_id: str, reason: str = "stopped by the user") -> bool:
        """Mark a `running` run `interrupted` from any process; its owner notices at its next
        turn and stops. Returns False when the run was not running."""
        with self.writing() as connection:
            return end_run_row(connection, run_id, "interrupted", reason) == 1

    def save(self, result: RunResult, label: str | None = None, tags: Iterable[str] = (),
             config: Mapping[str, Any] | None = None, *,
             assessed: tuple[Mapping[str, Any], str, Sequence[str]] | None = None) -> str:
        """Store a finished result (or relabel one already stored); returns the run id. A new
        one is stored with what its protocol makes of it, (metrics, error, lost): `assessed`
        when given (`engine.protocols.storing.Store.save` hands them in), else what the run
        that finished it handed in on the result (`RunResult.assessment`). It ends as
        `execute` ends a run: `failed` with `error` when one is given, else `completed`,
        flagged degraded with what it `lost`."""
        if result.run_id and self.exists(result.run_id):
            new_label, new_tags = records.labels(label, tags)
            with self.writing() as connection:
                if label is not None:
                    connection.execute(update(RunRow).where(RunRow.id == result.run_id)
                                       .values(label=new_label))
                add_tags(connection, [result.run_id], new_tags)
            return result.run_id
        assessed = assessed if assessed is not None else result.assessment()
        if assessed is None:
            raise ValueError("a result no run finished is saved with its protocol's "
                             "assessment: engine.protocols.storing.Store.save hands it in")
        # A result saved without its configuration keeps no seats by slot: it cannot be
        # re-run (its turns still name every seat and model).
        run_id = self.start_run(result.protocol, result.question_text,
                                config=config or {"protocol": result.protocol, "seats": {}},
                                label=label, tags=tags, expected=result.expected)
        self.add_turns([(run_id, turn) for turn in result.turns])
        result.run_id = run_id
        metrics, error, lost = assessed
        self.finish_run(run_id, result, metrics, error=error, lost=lost)
        return run_id

    def exists(self, run_id: str) -> bool:
        """True when a run with this id is stored (whatever its state)."""
        with self.engine.connect() as connection:
            return connection.execute(select(RunRow.id).where(RunRow.id == run_id)).first() \
                is not None

    def delete(self, run_ids: Iterable[str]) -> int:
        """Delete runs, their turns and their labels, whatever their state (a `running` run's
        owner stops at its next turn); returns how many runs were deleted."""
        ids = list(run_ids)
        with self.writing() as connection:
            connection.execute(delete(TurnRow).where(TurnRow.run_id.in_(ids)))
            delete_labels(connection, ids)
            count = connection.execute(delete(RunRow).where(RunRow.id.in_(ids))).rowcount or 0
        with self._lock:
            for run_id in ids:
                self._pending.pop(run_id, None)
        return count


def add_tags(connection: Any, run_ids: Sequence[str], tags: Sequence[str]) -> None:
    """Add `tags` to each of the runs `run_ids` (kept sorted, each once), and to the
    filters' values (`engine.store.facets`)."""
    if not run_ids or not tags:
        return
    for run_id, old in connection.execute(select(RunRow.id, RunRow.tags).where(
            RunRow.id.in_(list(run_ids)))).all():
        connection.execute(update(RunRow).where(RunRow.id == run_id).values(tags=json.dumps(
            sorted(set(readback.decode_tags(old)) | set(tags)), ensure_ascii=False)))
    facets.record(connection, [{"tags": list(tags)}])


def _ending(run_id: str, result: RunResult, metrics: Mapping[str, Any], error: str,
            lost: Sequence[str]) -> dict[str, Any]:
    """The values `FINISH_RUN` ends a run with (see `RunWriting.finish_run`)."""
    turns = result.turns
    dump = result.model_dump(mode="json", exclude={"turns"})
    metrics = {**metrics, "warnings": len(result.warnings)}
    return {
        "rid": run_id, "status": "failed" if error else "completed",
        "error": records.error_text(error)[:2000], "degraded_run": bool(lost) and not error,
        "lost": clean_text("; ".join(lost)), "result": records.dumps(dump),
        "metrics": records.dumps(metrics), **signal_values(metrics),
        **records.totals(turns),
        **records.column_values(RUNS, {name: getattr(result, name) for name in FROM_RESULT}),
        "any_simulated": any(t.simulated for t in turns),
        "finished_at": now(), "heartbeat_at": now()}


def _write_batch(connection: Any, starts: Sequence[Mapping[str, Any]],
                 pairs: Sequence[tuple[str, Turn]],
                 endings: Sequence[Mapping[str, Any]],
                 new: Sequence[Mapping[str, Any]] = ()) -> dict[str, str]:
    """`RunWriting.write_batch` in `connection`'s transaction (`new`: the starts whose
    facets this process has not written yet)."""
    for group in _alike(starts):  # a row ended before it was written has more columns
        connection.execute(INSERT_RUN, group)
    if new:
        facets.record(connection, new)
    ended = _write_turns(connection, pairs, fresh={row["id"] for row in starts})
    for group in _alike(endings):
        connection.execute(FINISH_RUN, group)
    return ended


def _alike(rows: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """`rows` grouped by their columns, so that each group is one executemany."""
    shapes: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        shapes.setdefault(tuple(sorted(row)), []).append(dict(row))
    return list(shapes.values())


def _write_turns(connection: Any, pairs: Sequence[tuple[str, Turn]],
                 fresh: set[str] | frozenset[str] = frozenset()) -> dict[str, str]:
    """Write several runs' turns in `connection`'s transaction, the runs' heartbeat first
    (one statement; none for the runs inserted in this transaction, `fresh`); returns {run
    id: why} for the runs no longer `running` (deleted, or stopped from another process: the
    turns of a stopped run are kept, as its calls were made)."""
    if not pairs:
        return {}
    values = [records.turn_values(r, t) for r, t in pairs]
    ended: dict[str, str] = {}
    stopped: list[str] = []
    beating = sorted({r for r, _ in pairs} - fresh)
    beat = connection.execute(HEARTBEATS, {"ids": beating, "at": now()}).rowcount \
        if beating else 0
    for run_id in beating if beat != len(beating) else ():  # one or more ended elsewhere
        row = connection.execute(select(RunRow.status, RunRow.error).where(
            RunRow.id == run_id)).first()
        if row is not None and row.status == "running":
            continue
        ended[run_id] = ("the run was deleted" if row is None else
                         f"the run was ended elsewhere ({row.status}"
                         f"{': ' + row.error if row.error else ''})")
        if row is not None and row.status == "interrupted":
            stopped.append(run_id)  # keep the call that was in flight
            continue
        values = [v for v in values if v["run_id"] != run_id]
    if values:
        connection.execute(INSERT_TURN, values)
    for run_id in stopped:
        count_turns(connection, run_id)
    return ended
