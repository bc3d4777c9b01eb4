"""The store: runs and their turns in SQLite (WAL) or PostgreSQL, through SQLAlchemy 2.

Turns are written as each completes, so a crash loses at most the call in flight; a run left
`running` by a process that is gone reads as `interrupted`. Schema changes are ordered, named
migrations recorded in `schema_migrations`, so an existing file is brought up to date on open;
a database written by a newer Parley is refused, and a read-only one opens for reading.

Every value goes through `engine.store.records` on its way in (refused or cleaned, the same on
both backends) and on its way out (a row that cannot be read shows as unreadable, with its id,
instead of failing the page that lists it). A write that fails (disk full) raises
`StoreWriteError`; a run's end that could not be written is kept and retried on the next
write and by the reaper, so a run never stays `running` once the store can be written again.
"""
from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import pandas as pd
from sqlalchemy import bindparam, delete, func, inspect, or_, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError

from engine.store import readback

from engine.store import records

from engine.store import schema
from engine.models import ConfigError, RunResult, Turn, now
from engine.store.records import strip_secrets  # noqa: F401  (public here since the first release)
from engine.store.schema import (MIGRATIONS, Base, ExperimentRow, LibraryRow, MigrationRow,  # noqa: F401
                     RunRow, TurnRow)
from engine.text import clean_text

_aware = readback.aware  # engine.experiments reads stored times through it

DEFAULT_URL = "sqlite:///data/parley.db"
STATUSES = records.RUN_STATUSES
STALE_AFTER = timedelta(minutes=10)  # a running row on another host with no heartbeat
READ_ONLY = "this database is read-only ({url}): runs can be read, not started or changed"


class StoreWriteError(RuntimeError):
    """The database refused a write (disk full, locked too long, connection lost)."""


def _pid_alive(pid: int) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _why(exc: OperationalError) -> str:
    detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return f"the store could not be written: {detail[0] if detail else type(exc).__name__}"


class Recorder:
    """Writes one run's turns as they complete."""

    def __init__(self, store: "Store", run_id: str):
        self.store, self.run_id = store, run_id

    def turn(self, turn: Turn) -> None:
        """Write a completed turn."""
        self.store.add_turn(self.run_id, turn)

    def update_turn(self, turn: Turn) -> None:
        """Write a recorded turn's changed status or parsed fields."""
        self.store.update_turn(self.run_id, turn)


class Store:
    """Runs and turns in one database; every method opens and closes its own session."""

    def __init__(self, url: str | None = None):
        self.url = url or os.environ.get("PARLEY_DB_URL") or DEFAULT_URL
        self.host = socket.gethostname()
        self.read_only = False
        self._pending: dict[str, tuple[str, str]] = {}  # run id -> the end not yet written
        self._lock = threading.Lock()
        sqlite = make_url(self.url).get_backend_name() == "sqlite"
        path = schema.sqlite_path(self.url) if sqlite else None
        if sqlite and schema.sqlite_read_only(self.url, path):
            self._open_read_only(path)
            return
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.engine = schema.engine(self.url, sqlite, read_only=False)
        if not sqlite and schema.pg_read_only(self.engine):
            self.read_only = True
            self.check_schema()
            return
        try:
            self.migrate()
        except OperationalError as exc:  # a read-only file system, or a file root cannot write
            if not sqlite or "readonly" not in str(exc).replace("-", "").lower():
                raise
            self.engine.dispose()
            self._open_read_only(path)

    def _open_read_only(self, path: str | None) -> None:
        self.read_only = True
        self.engine = schema.engine(schema.read_only_url(self.url, path), True, read_only=True)
        try:
            self.check_schema()
        except OperationalError:  # WAL without -shm in a directory it may not write
            self.engine.dispose()
            self.engine = schema.engine(schema.read_only_url(self.url, path, immutable=True), True,
                                  read_only=True)
            self.check_schema()

    # ----------------------------------------------------------------- schema
    def migrate(self) -> list[str]:
        """Apply the migrations this database has not seen; returns their names."""
        applied: list[str] = []
        with self.writing(retry=False) as connection:
            MigrationRow.__table__.create(connection, checkfirst=True)
            done = set(connection.execute(select(MigrationRow.name)).scalars())
            schema.refuse_newer(done)
            for name, apply in MIGRATIONS:
                if name in done:
                    continue
                apply(connection)
                connection.execute(MigrationRow.__table__.insert().values(
                    name=name, applied_at=now()))
                applied.append(name)
        return applied

    def check_schema(self) -> None:
        """Without writing: refuse a database from a newer Parley, or one (read-only) that
        lacks a migration this Parley needs."""
        with self.engine.connect() as connection:
            if not inspect(connection).has_table("schema_migrations"):
                raise ConfigError(f"{self.url_safe} holds no Parley tables and is read-only",
                                  "input")
            done = set(connection.execute(select(MigrationRow.name)).scalars())
        schema.refuse_newer(done)
        missing = [name for name, _ in MIGRATIONS if name not in done]
        if missing:
            raise ConfigError(f"this read-only database needs migration {missing[0]}; open it "
                              "once with write access to upgrade it", "input")

    def migrations(self) -> list[str]:
        """The names of the migrations this database has had."""
        with self.engine.connect() as connection:
            return list(connection.execute(select(MigrationRow.name)
                                           .order_by(MigrationRow.name)).scalars())

    # ----------------------------------------------------------------- writing
    @contextmanager
    def writing(self, retry: bool = True) -> Iterator[Any]:
        """A write transaction: refused (`ConfigError`) on a read-only database; a write the
        database refuses raises `StoreWriteError`. Run ends waiting to be written go first."""
        if self.read_only:
            raise ConfigError(READ_ONLY.format(url=self.url_safe), "input")
        if retry and self._pending:
            self.flush_pending()
        try:
            with self.engine.begin() as connection:
                yield connection
        except OperationalError as exc:
            raise StoreWriteError(_why(exc)) from exc

    def flush_pending(self) -> int:
        """Write the run ends that a failed write left waiting; returns how many were written
        (the rest stay for the next try). Never raises for a failed write."""
        with self._lock:
            waiting = list(self._pending.items())
        written = 0
        for run_id, (status, error) in waiting:
            try:
                with self.writing(retry=False) as connection:
                    _end(connection, run_id, status, error)
            except StoreWriteError:
                break
            with self._lock:
                if self._pending.get(run_id) == (status, error):
                    del self._pending[run_id]
            written += 1
        return written

    @property
    def pending(self) -> dict[str, tuple[str, str]]:
        """Run ends waiting for the store to accept writes again (run id -> status, error)."""
        with self._lock:
            return dict(self._pending)

    # ----------------------------------------------------------------- run lifecycle
    def start_run(self, protocol: str, question: str, *, config: Mapping[str, Any] | None = None,
                  label: str | None = None, tags: Iterable[str] = (),
                  expected: str | None = None, experiment_id: str | None = None) -> str:
        """Open a run row as `running`; returns its id. Values are checked before anything is
        written (`ConfigError`), as a run starts before any model call."""
        run_id = uuid4().hex[:12]
        config = dict(config or {})
        values = records.new_run(protocol, question, config=config, label=label, tags=tags,
                                 expected=expected, experiment_id=experiment_id)
        seats = config.get("seats", [])
        seats = [s for v in (seats.values() if isinstance(seats, Mapping) else seats)
                 for s in (v if isinstance(v, list) else [v])]
        models = sorted({str(s.get("model", "")) for s in seats if isinstance(s, Mapping)})
        with self.writing() as connection:
            connection.execute(RunRow.__table__.insert().values(
                id=run_id, **values, status="running", models=clean_text(",".join(models)),
                simulated=bool(models) and all(m.startswith("simulated") for m in models),
                experiment_id=experiment_id, host=self.host[:200], pid=os.getpid(),
                created_at=now(), heartbeat_at=now()))
        return run_id

    def recorder(self, run_id: str) -> Recorder:
        """The sink a protocol's run context writes `run_id`'s turns through."""
        return Recorder(self, run_id)

    def add_turn(self, run_id: str, turn: Turn) -> None:
        """Write a completed turn. A run deleted or stopped elsewhere raises `RunStopped`
        (after keeping the turn of a stopped run: its call was made)."""
        ended = self.add_turns([(run_id, turn)])
        if ended:
            from engine.llm.calls import RunStopped
            raise RunStopped(ended[run_id])

    def add_turns(self, pairs: Sequence[tuple[str, Turn]]) -> dict[str, str]:
        """Write several runs' turns in one transaction (group commit for batch runners);
        returns {run id: why} for the runs that are no longer `running` (deleted, or stopped
        from another process), whose owners should stop."""
        if not pairs:
            return {}
        values = [records.turn_values(r, t) for r, t in pairs]
        ended: dict[str, str] = {}
        stopped: list[str] = []
        try:
            with self.writing() as connection:
                for run_id in sorted({r for r, _ in pairs}):
                    if connection.execute(_HEARTBEAT, {"rid": run_id, "at": now()}).rowcount:
                        continue
                    row = connection.execute(select(RunRow.status, RunRow.error).where(
                        RunRow.id == run_id)).first()
                    ended[run_id] = ("the run was deleted" if row is None else
                                     f"the run was ended elsewhere ({row.status}"
                                     f"{': ' + row.error if row.error else ''})")
                    if row is not None and row.status == "interrupted":
                        stopped.append(run_id)  # keep the call that was in flight
                        continue
                    values = [v for v in values if v["run_id"] != run_id]
                if values:
                    connection.execute(_INSERT_TURN, values)
                for run_id in stopped:
                    _count(connection, run_id)
        except IntegrityError:  # deleted between the heartbeat and the insert
            return {r: "the run was deleted" for r, _ in pairs}
        return ended

    def update_turn(self, run_id: str, turn: Turn) -> None:
        """Write a recorded turn's status, error, parsed fields and warnings again."""
        values = records.turn_values(run_id, turn)
        with self.writing() as connection:
            connection.execute(_UPDATE_TURN, {
                "rid": run_id, "i": values["idx"], "parsed": values["parsed"],
                "warnings": values["warnings"], "status": values["status"],
                "error": values["error"]})

    def finish_run(self, run_id: str, result: RunResult,
                   metrics: Mapping[str, Any] | None = None) -> None:
        """Mark a `running` run `completed` with its result, its metrics (the protocol's
        signals; computed through the registry when not given) and totals (a run stopped or
        deleted meanwhile stays as it is)."""
        turns = result.turns
        dump = result.model_dump(mode="json", exclude={"turns"})
        if metrics is None:
            from engine.protocols import get_protocol
            metrics = get_protocol(result.protocol).metrics(result)
        metrics = {**metrics, "warnings": len(result.warnings)}
        with self.writing() as connection:
            connection.execute(update(RunRow).where(
                RunRow.id == run_id, RunRow.status == "running").values(
                status="completed", result=records.dumps(dump),
                metrics=records.dumps(metrics), correct=result.correct, calls=len(turns),
                degraded=sum(1 for t in turns if t.status != "ok"),
                tokens_in=min(sum(t.tokens_in for t in turns), records.INT_MAX),
                tokens_out=min(sum(t.tokens_out for t in turns), records.INT_MAX),
                latency=records.seconds(sum(records.seconds(t.latency) for t in turns)),
                duration=records.seconds(result.duration),
                simulated=bool(turns) and all(t.simulated for t in turns),
                finished_at=now(), heartbeat_at=now()))

    def end_run(self, run_id: str, status: str, error: str = "") -> bool:
        """Close a `running` run that did not complete (`failed` or `interrupted`), keeping its
        turns. When the store cannot be written the end waits (see `flush_pending`) and this
        returns False; it never raises for a failed write."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}")
        try:
            with self.writing() as connection:
                _end(connection, run_id, status, error)
        except StoreWriteError:
            with self._lock:
                self._pending[run_id] = (status, error)
            return False
        with self._lock:
            self._pending.pop(run_id, None)
        return True

    def stop_run(self, run_id: str, reason: str = "stopped by the user") -> bool:
        """Mark a `running` run `interrupted` from any process; its owner notices at its next
        turn and stops. Returns False when the run was not running."""
        with self.writing() as connection:
            return _end(connection, run_id, "interrupted", reason) == 1

    def save(self, result: RunResult, label: str | None = None, tags: Iterable[str] = (),
             config: Mapping[str, Any] | None = None) -> str:
        """Store a finished result (or relabel one already stored); returns the run id."""
        if result.run_id and self.exists(result.run_id):
            new_label, new_tags = records.labels(label, tags)
            with self.writing() as connection:
                old = connection.execute(select(RunRow.tags).where(
                    RunRow.id == result.run_id)).scalar()
                values: dict[str, Any] = {}
                if label is not None:
                    values["label"] = new_label
                if new_tags:
                    values["tags"] = json.dumps(sorted(set(readback.decode_tags(old)) |
                                                       set(new_tags)), ensure_ascii=False)
                if values:
                    connection.execute(update(RunRow).where(RunRow.id == result.run_id)
                                       .values(**values))
            return result.run_id
        # A result saved without its configuration keeps no seats by slot: it cannot be
        # re-run (its turns still name every seat and model).
        run_id = self.start_run(result.protocol, result.question_text,
                                config=config or {"protocol": result.protocol, "seats": {}},
                                label=label, tags=tags, expected=result.expected)
        self.add_turns([(run_id, turn) for turn in result.turns])
        result.run_id = run_id
        self.finish_run(run_id, result)
        return run_id

    # ----------------------------------------------------------------- reading
    def exists(self, run_id: str) -> bool:
        """True when a run with this id is stored (whatever its state)."""
        with self.engine.connect() as connection:
            return connection.execute(select(RunRow.id).where(RunRow.id == run_id)).first() \
                is not None

    def _stale(self) -> list[str]:
        """Runs left `running` by processes that are gone (on this host: the pid is dead;
        elsewhere: no heartbeat for `STALE_AFTER`)."""
        with self.engine.connect() as connection:
            rows = connection.execute(select(RunRow.id, RunRow.host, RunRow.pid,
                                             RunRow.heartbeat_at)
                                      .where(RunRow.status == "running")).all()
        cutoff = now() - STALE_AFTER
        with self._lock:
            waiting = set(self._pending)
        return [run_id for run_id, host, pid, beat in rows if run_id not in waiting and (
            not _pid_alive(pid) if host == self.host
            else beat is None or readback.aware(beat) < cutoff)]

    def reap(self) -> int:
        """Write the run ends waiting for the store, then mark as `interrupted` the runs left
        `running` by processes that are gone. A read-only store writes nothing."""
        if self.read_only:
            return 0
        self.flush_pending()
        stale = self._stale()
        for run_id in stale:
            self.end_run(run_id, "interrupted", "the process running it stopped")
        return len(stale)

    def get(self, run_id: str) -> dict[str, Any]:
        """One run as a dict: its row, `result` (the protocol's fields) and `turns`. A value
        that cannot be read takes its empty default, and `unreadable` says which and why."""
        self.reap()
        with self.engine.connect() as connection:
            row = connection.execute(select(RunRow.__table__).where(
                RunRow.id == run_id)).mappings().first()
            if row is None:
                raise KeyError(f"no run {run_id!r} in {self.url_safe}")
            turns = connection.execute(select(TurnRow.__table__).where(
                TurnRow.run_id == run_id).order_by(TurnRow.idx, TurnRow.id)).mappings().all()
        out = readback.run_dict(dict(row))
        out["turns"] = [readback.turn_dict(dict(t)) for t in turns]
        broken = [f"turn {t['idx']}: {t['unreadable']}" for t in out["turns"]
                  if t["unreadable"]]
        out["unreadable"] = "; ".join(filter(None, [out["unreadable"], *broken]))
        if self.read_only and out["status"] == "running" and run_id in self._stale():
            out["status"] = "interrupted"
        return out

    def run_state(self, run_id: str) -> dict[str, Any]:
        """A run's live state without its turns: status, error, turn count and when it last
        changed (one row and one count; what a live view polls). Writes nothing: a run whose
        owner is gone reads as `interrupted`."""
        with self.engine.connect() as connection:
            row = connection.execute(select(
                RunRow.status, RunRow.error, RunRow.heartbeat_at, RunRow.finished_at).where(
                RunRow.id == run_id)).first()
            if row is None:
                raise KeyError(f"no run {run_id!r} in {self.url_safe}")
            turns = connection.execute(select(func.count()).where(
                TurnRow.run_id == run_id)).scalar() or 0
        status, error, beat, finished = row
        if status == "running" and run_id in self._stale():
            status = "interrupted"
        updated = finished or beat
        return {"status": status, "error": error or "", "turns": int(turns),
                "updated": readback.aware(updated).isoformat() if updated else None}

    def turns_after(self, run_id: str, after: int) -> list[dict[str, Any]]:
        """The turns of `run_id` with an index above `after`, in speaking order, as
        `get(run_id)["turns"]` gives them: what a live view has not read yet."""
        with self.engine.connect() as connection:
            rows = connection.execute(select(TurnRow.__table__).where(
                TurnRow.run_id == run_id, TurnRow.idx > after).order_by(
                TurnRow.idx, TurnRow.id)).mappings().all()
        return [readback.turn_dict(dict(t)) for t in rows]

    @property
    def url_safe(self) -> str:
        """The database URL with any password hidden."""
        return make_url(self.url).render_as_string(hide_password=True)

    def runs(self, *, protocol: str | None = None, label: str | None = None,
             tag: str | None = None, status: str | None = None, model: str | None = None,
             search: str | None = None, since: datetime | None = None,
             until: datetime | None = None, experiment_id: str | None = None,
             ids: Sequence[str] | None = None, limit: int | None = None,
             with_result: bool = False, with_config: bool = True) -> pd.DataFrame:
        """Runs as a DataFrame, newest first; filters combine with AND (all are bound, never
        spliced into SQL). `metrics` and `config` come back parsed; `result` on request, and
        `config` can be left out when a caller (Insights over 10,000 runs) never reads it.
        `unreadable` is "" for a sound row, else which values could not be read and why."""
        self.reap()
        skip = {"result"} - ({"result"} if with_result else set())
        if not with_config:
            skip.add("config")
        columns = [c for c in RunRow.__table__.columns if c.name not in skip]
        query = select(*columns).order_by(RunRow.created_at.desc())
        if protocol:
            query = query.where(RunRow.protocol == protocol)
        if label:
            query = query.where(RunRow.label == label)
        if status:
            query = query.where(RunRow.status == status)
        if experiment_id:
            query = query.where(RunRow.experiment_id == experiment_id)
        if ids is not None:
            query = query.where(RunRow.id.in_(list(ids)))
        if tag:
            query = query.where(RunRow.tags.contains(json.dumps(tag), autoescape=True))
        if model:
            query = query.where(RunRow.models.contains(model, autoescape=True))
        if search:
            query = query.where(or_(RunRow.question.contains(search, autoescape=True),
                                    RunRow.label.contains(search, autoescape=True),
                                    RunRow.id == search))
        if since:
            query = query.where(RunRow.created_at >= since)
        if until:
            query = query.where(RunRow.created_at <= until)
        if limit:
            query = query.limit(limit)
        with self.engine.connect() as connection:
            frame = pd.DataFrame(connection.execute(query).mappings().all(),
                                 columns=[c.name for c in columns])
        frame = readback.tolerant_frame(frame, readback.RUN_JSON, required_times=("created_at",))
        if self.read_only and not frame.empty and (frame["status"] == "running").any():
            stale = set(self._stale())
            frame["status"] = [("interrupted" if s == "running" and i in stale else s)
                               for i, s in zip(frame["id"], frame["status"])]
        return frame

    def turns(self, run_id: str | Sequence[str] | None = None, *, phase: str | None = None,
              seat: str | None = None, status: str | None = None,
              with_messages: bool = False) -> pd.DataFrame:
        """Turns as a DataFrame, in run then speaking order (`unreadable` as for `runs`)."""
        columns = [c for c in TurnRow.__table__.columns
                   if with_messages or c.name != "messages"]
        query = select(*columns).order_by(TurnRow.run_id, TurnRow.idx, TurnRow.id)
        if isinstance(run_id, str):
            query = query.where(TurnRow.run_id == run_id)
        elif run_id is not None:
            query = query.where(TurnRow.run_id.in_(list(run_id)))
        if phase:
            query = query.where(TurnRow.phase == phase)
        if seat:
            query = query.where(TurnRow.seat == seat)
        if status:
            query = query.where(TurnRow.status == status)
        with self.engine.connect() as connection:
            frame = pd.DataFrame(connection.execute(query).mappings().all(),
                                 columns=[c.name for c in columns])
        return readback.tolerant_frame(frame, readback.TURN_JSON,
                               required_times=("started_at", "finished_at"))

    def delete(self, run_ids: Iterable[str]) -> int:
        """Delete runs and their turns, whatever their state (a `running` run's owner stops at
        its next turn); returns how many runs were deleted."""
        ids = list(run_ids)
        with self.writing() as connection:
            connection.execute(delete(TurnRow).where(TurnRow.run_id.in_(ids)))
            count = connection.execute(delete(RunRow).where(RunRow.id.in_(ids))).rowcount or 0
        with self._lock:
            for run_id in ids:
                self._pending.pop(run_id, None)
        return count

    # ----------------------------------------------------------------- export / import
    def export_run(self, run_id: str) -> str:
        """One run as a JSON document (row, result and turns with prompts and replies)."""
        return json.dumps(self.get(run_id), ensure_ascii=False, default=str, indent=2)

    def export_jsonl(self, run_ids: Iterable[str] | None = None) -> str:
        """Many runs as JSON lines (all runs when `run_ids` is None)."""
        if run_ids is None:
            with self.engine.connect() as connection:
                run_ids = list(connection.execute(select(RunRow.id).order_by(
                    RunRow.created_at.desc())).scalars())
        return "".join(json.dumps(self.get(i), ensure_ascii=False, default=str) + "\n"
                       for i in run_ids)

    def import_runs(self, data: str | bytes) -> list[str]:
        """Import runs exported by `export_run` / `export_jsonl`; existing ids are skipped.
        Every record is checked first (`engine.store.records`): a bad one is refused with its line
        number (`ConfigError`) and nothing of the file is written."""
        docs = records.parse_import(data)
        if not docs:
            return []
        if self.read_only:
            raise ConfigError(READ_ONLY.format(url=self.url_safe), "input")
        imported: list[str] = []
        with self.writing() as connection:
            wanted = [record.id for _, record in docs]
            present = set()
            for start in range(0, len(wanted), 500):
                present |= set(connection.execute(select(RunRow.id).where(
                    RunRow.id.in_(wanted[start:start + 500]))).scalars())
            for _, record in docs:
                if record.id in present:
                    continue
                present.add(record.id)
                connection.execute(RunRow.__table__.insert().values(
                    **records.run_columns(record)))
                if record.turns:
                    connection.execute(_INSERT_TURN, [records.turn_columns(record.id, t)
                                                      for t in record.turns])
                imported.append(record.id)
        return imported

    # ----------------------------------------------------------------- library
    def library(self, kind: str) -> list[dict[str, Any]]:
        """A kind's library entries by name (an entry whose body cannot be read says so in
        `unreadable`)."""
        with self.engine.connect() as connection:
            rows = connection.execute(select(LibraryRow.__table__).where(
                LibraryRow.kind == kind).order_by(LibraryRow.name)).mappings().all()
        out = []
        for row in rows:
            body, why = readback.decode(row["body"], dict, {})
            entry = {"id": row["id"], "name": row["name"], "builtin": bool(row["builtin"]),
                     **{k: v for k, v in body.items() if k not in ("id", "name", "builtin")}}
            if why:
                entry["unreadable"] = f"body {why}"
            out.append(entry)
        return out

    def put_library(self, kind: str, name: str, body: Mapping[str, Any],
                    item_id: int | None = None, builtin: bool = False) -> int:
        """Create or replace a library entry; names are unique within a kind."""
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"a {kind} needs a name", "input")
        item = records.library_item(kind, name, body)
        with self.writing() as connection:
            clash = connection.execute(select(LibraryRow.id).where(
                LibraryRow.kind == kind, LibraryRow.name == item.name)).scalar()
            if clash is not None and clash != item_id:
                raise ConfigError(f"a {kind} named {item.name!r} already exists", "input")
            values = {"name": item.name, "body": json.dumps(item.body, ensure_ascii=False),
                      "updated_at": now()}
            if item_id is not None and connection.execute(
                    update(LibraryRow).where(LibraryRow.id == item_id)
                    .values(**values)).rowcount:
                return item_id
            return connection.execute(LibraryRow.__table__.insert().values(
                kind=kind, builtin=builtin, **values)).inserted_primary_key[0]

    def delete_library(self, item_id: int) -> None:
        """Delete one library entry."""
        with self.writing() as connection:
            connection.execute(delete(LibraryRow).where(LibraryRow.id == item_id))

    def integrity_check(self) -> str:
        """SQLite's `PRAGMA integrity_check` ("ok" when sound; always "ok" elsewhere)."""
        if not self.url.startswith("sqlite"):
            return "ok"
        with self.engine.connect() as connection:
            return str(connection.execute(text("PRAGMA integrity_check")).scalar())

    def columns(self, table: str) -> list[str]:
        """The column names of a table as the database has them."""
        return [c["name"] for c in inspect(self.engine).get_columns(table)]


# --------------------------------------------------------------------------- statements
_runs = RunRow.__table__
_turns = TurnRow.__table__
_INSERT_TURN = _turns.insert()
_HEARTBEAT = update(_runs).where(_runs.c.id == bindparam("rid"),
                                 _runs.c.status == "running").values(heartbeat_at=bindparam("at"))
_UPDATE_TURN = update(_turns).where(_turns.c.run_id == bindparam("rid"),
                                    _turns.c.idx == bindparam("i")).values(
    parsed=bindparam("parsed"), warnings=bindparam("warnings"), status=bindparam("status"),
    error=bindparam("error"))


def _end(connection: Any, run_id: str, status: str, error: str) -> int:
    """End a `running` run (never one already ended or deleted); returns rows changed."""
    changed = connection.execute(update(_runs).where(
        _runs.c.id == run_id, _runs.c.status == "running").values(
        status=status, error=clean_text(error)[:2000], finished_at=now())).rowcount
    if changed:
        _count(connection, run_id)
    return changed


def _count(connection: Any, run_id: str) -> None:
    """Set a run's `calls` and `degraded` from its stored turns."""
    counts = connection.execute(select(func.count(), func.count().filter(
        _turns.c.status != "ok")).where(_turns.c.run_id == run_id)).one()
    connection.execute(update(_runs).where(_runs.c.id == run_id).values(
        calls=counts[0], degraded=counts[1]))


