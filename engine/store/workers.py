"""The pool's side of the store: the `workers` table, the job queue's tables (procrastinate's,
in the same PostgreSQL database), the per-cell guard that makes a cell run exactly once, and
the pool's numbers (queue depth per endpoint, throughput, ETA). A job's payload is any JSON a
client wrote: it is read without trusting it (`read_job`, and the same test in SQL), and a job
that names no cell is refused (`PoisonJob`), never waited on.

A pool-run experiment's row names no process: its host is `POOL_HOST` and its heartbeat is
kept fresh by the workers while it has jobs, so it reads `interrupted` only when every worker
has been gone for `STALE_AFTER`.
"""
from __future__ import annotations

import json
import os
import reprlib
import threading
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NamedTuple, cast
from uuid import uuid4

import pandas as pd
from sqlalchemy import Table, func, select, text, update
from sqlalchemy.exc import OperationalError

from engine.cells import CELL_PATTERN, SUPERSEDED, Cell
from engine.errors import ParleyError
from engine.models import ConfigError, now
from engine.store.database import StoreWriteError
from engine.store.experiments import POOL_HOST as POOL_HOST  # the pool's, named here too
from engine.store.experiments import (
    SpendFigures,
    as_budget,
    budget_column,
    spend_on,
    supersede,
)
from engine.store.limits import shared as is_postgres
from engine.store.liveness import owner_gone
from engine.store.readback import aware, decode_tags
from engine.store.schema import ExperimentRow, RunRow, WorkerRow
from engine.store.statements import end_run_row
from engine.store.store import Store

TASK = "parley.run_cell"  # the queue's task name for one cell
WORKER_GONE_AFTER = timedelta(seconds=60)  # a worker on another host with no heartbeat
ORPHANED = "the worker running it stopped"  # a dead worker's run, ended by the next taker
WORKERS = cast(Table, WorkerRow.__table__)
# What a lost database raises through the store: a job that meets one is retried, a
# follower (`experiment run --workers --wait`) reads again.
DATABASE_ERRORS: tuple[type[Exception], ...] = (OperationalError, StoreWriteError)
_SCHEMA_LOCK = 7_716_001  # advisory lock key: one process applies the queue's schema


def require_postgres(store: Store) -> None:
    """Refuse the pool on any store but PostgreSQL, saying what to do instead."""
    if not is_postgres(store):
        raise ConfigError("workers need a PostgreSQL store (PARLEY_DB_URL=postgresql+psycopg:"
                          "//...); with SQLite run the experiment in this process (without "
                          "--workers)", "input")


# --------------------------------------------------------------------------- queue schema
_QUEUE_EXISTS = text("SELECT to_regclass('procrastinate_jobs') IS NOT NULL")


def has_queue(store: Store) -> bool:
    """True when the job queue's tables exist in this database."""
    if not is_postgres(store):
        return False
    with store.reading() as connection:
        return bool(connection.execute(_QUEUE_EXISTS).scalar())


def apply_queue_schema(store: Store, schema_sql: str) -> bool:
    """Create the job queue's tables once (`schema_sql`: procrastinate's schema); several
    workers starting together wait on one advisory lock, and the others find it done.
    Returns True when this call created them."""
    require_postgres(store)
    with store.writing() as connection:
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK})
        if connection.execute(_QUEUE_EXISTS).scalar():
            return False
        connection.connection.driver_connection.execute(schema_sql)  # one script
    return True


# --------------------------------------------------------------------------- job payloads
MAX_ID = 64  # characters of an experiment id a job may name (ids are 12; the column holds 32)
_BRIEF = reprlib.Repr()
_BRIEF.maxstring, _BRIEF.maxother, _BRIEF.maxlong, _BRIEF.maxlevel = 60, 60, 40, 2
_BRIEF.maxlist = _BRIEF.maxtuple = _BRIEF.maxdict = _BRIEF.maxset = 4


class PoisonJob(ParleyError):
    """A cell job that can never run (its payload names no cell of an experiment's plan): it
    fails once, is never retried, and its worker logs why."""


@dataclass(frozen=True)
class CellJob:
    """A cell job's payload, read: the experiment it names and the cell."""

    experiment_id: str
    cell: Cell


@dataclass(frozen=True)
class Unreadable:
    """What a job's payload decodes to when Python cannot read it (`load_payload`)."""

    reason: str

    def __repr__(self) -> str:
        return f"<unreadable: {self.reason}>"


def load_payload(raw: str | bytes) -> Any:
    """The job queue's JSON decoder: `json.loads`, but a payload PostgreSQL stores and Python
    cannot read (nested thousands deep, a number of 5,000 digits) becomes `Unreadable`
    instead of an error in the middle of fetching jobs."""
    try:
        return json.loads(raw)
    except (RecursionError, ValueError) as exc:
        return Unreadable(f"{type(exc).__name__}: {str(exc)[:80]}")


@dataclass(frozen=True)
class NotAnObject:
    """A job's payload that is no JSON object (or cannot be read), as the job queue hands it
    to the task (`job_args`): procrastinate passes a payload as keyword arguments and names
    the job by them, so any other value would fail in its own logging and leave the job
    `doing` for ever."""

    value: Any

    def __repr__(self) -> str:
        return brief(self.value)


def job_args(raw: str | bytes) -> Any:
    """The job queue's JSON decoder (`load_payload`), keeping every payload a mapping: one
    that is no JSON object reaches the task as `{"payload": NotAnObject(value)}`, which
    `read_job` refuses as the value itself. PostgreSQL's other JSON columns procrastinate
    reads are its own, always objects."""
    found = load_payload(raw)
    return found if isinstance(found, dict) else {"payload": NotAnObject(found)}


def brief(value: Any, limit: int = 80) -> str:
    """A payload value for a log line: its repr cut short (strings, nesting, lists, digits),
    on one line, at most `limit` characters."""
    try:
        text = _BRIEF.repr(value)
    except Exception:  # noqa: BLE001 - an int too long for repr, say: name the type instead
        text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


_KINDS = {list: "a JSON array", str: "a JSON string", bool: "a JSON boolean",
          int: "a JSON number", float: "a JSON number", type(None): "JSON null"}


def read_job(args: Any) -> CellJob:
    """A cell job's payload (`{"experiment_id": ID, "cell": "cell:Q:C:R"}`; other keys are
    ignored) read without trusting it: any JSON, or `Unreadable`. Raises `PoisonJob` saying
    what is wrong in one bounded line, and nothing else."""
    if isinstance(args, Mapping) and isinstance(args.get("payload"), NotAnObject):
        args = args["payload"].value
    if isinstance(args, Unreadable):
        raise PoisonJob(f"its payload cannot be read ({args.reason})")
    if not isinstance(args, Mapping):
        described = _KINDS.get(type(args), f"a {type(args).__name__}")
        raise PoisonJob(f"its payload is {described}, not a JSON object")
    for key in ("experiment_id", "cell"):
        if key not in args:
            raise PoisonJob(f"its payload has no {key!r} (its keys: "
                            f"{brief(list(args)[:5])})")
    experiment_id, tag = args["experiment_id"], args["cell"]
    if not isinstance(experiment_id, str) or not 1 <= len(experiment_id) <= MAX_ID \
            or not experiment_id.isprintable():
        raise PoisonJob(f"its experiment_id is not an experiment's id: {brief(experiment_id)}")
    cell = Cell.from_tags([tag])
    if cell is None:
        raise PoisonJob(f"its cell is not a cell:Q:C:R tag: {brief(tag)}")
    return CellJob(experiment_id, cell)


# A job whose payload could name a cell to run: an experiment id (a string of 1..MAX_ID
# characters) and a cell tag (CELL_PATTERN) whose indexes are below :nq, :nc, :nr (a plan's
# shape). Read in SQL, so that a hostile payload is never decoded; CASE keeps the casts from
# text that is not digits.
_RUNNABLE = (
    "(jsonb_typeof(args -> 'experiment_id') = 'string' "
    "AND length(args ->> 'experiment_id') BETWEEN 1 AND :max_id "
    "AND CASE WHEN args ->> 'cell' ~ :pattern THEN "
    "split_part(args ->> 'cell', ':', 2)::int < :nq "
    "AND split_part(args ->> 'cell', ':', 3)::int < :nc "
    "AND split_part(args ->> 'cell', ':', 4)::int < :nr ELSE false END) IS TRUE")


def _runnable(shape: tuple[int, int, int] | None) -> dict[str, Any]:
    nq, nc, nr = shape or (2**31 - 1,) * 3
    return {"pattern": f"^{CELL_PATTERN}$", "max_id": MAX_ID, "nq": nq, "nc": nc, "nr": nr}


def _cell_jobs(store: Store, columns: str, where: str, **params: Any) -> list[dict[str, Any]]:
    """`columns` of the queue's cell jobs (`TASK`) that `where` keeps (SQL after `WHERE`, its
    values bound from `params`; it may go on with GROUP BY, ORDER BY, LIMIT); none without
    the queue's tables."""
    if not has_queue(store):
        return []
    with store.reading() as connection:
        return [dict(row) for row in connection.execute(text(
            f"SELECT {columns} FROM procrastinate_jobs WHERE task_name = :task AND {where}"),
            {"task": TASK, **params}).mappings()]


_OPEN = "status IN ('todo', 'doing') AND args->>'experiment_id' = :eid"  # queued or running


def open_jobs(store: Store, experiment_id: str) -> list[dict[str, Any]]:
    """The experiment's cell jobs still queued (`todo`) or running (`doing`): id, status,
    cell tag."""
    return _cell_jobs(store, "id, status::text AS status, args->>'cell' AS cell",
                      f"{_OPEN} ORDER BY id", eid=experiment_id)


def has_open_jobs(store: Store, experiment_id: str, besides: int | None = None,
                  shape: tuple[int, int, int] | None = None) -> bool:
    """True when a cell job of the experiment other than `besides` is queued or running and
    can run: its payload names a well-formed cell, inside `shape` (the plan's questions,
    configurations, repeats) when given. A job that never can is not waited on: a worker
    that takes it refuses it (`PoisonJob`), and `refused_jobs` counts it."""
    return bool(_cell_jobs(store, "id", f"{_OPEN} AND id <> :besides AND {_RUNNABLE} LIMIT 1",
                           eid=experiment_id, besides=-1 if besides is None else besides,
                           **_runnable(shape)))


def refused_jobs(store: Store, experiment_id: str, shape: tuple[int, int, int]) -> int:
    """How many jobs naming the experiment can never run (a malformed cell, or one outside
    `shape`), whether a worker has refused them yet (`failed`) or not (queued)."""
    return sum(row["n"] for row in _cell_jobs(
        store, "count(*) AS n", "status IN ('todo', 'doing', 'failed') AND "
        f"args->>'experiment_id' = :eid AND NOT ({_RUNNABLE})", eid=experiment_id,
        **_runnable(shape)))


def unheld_jobs(store: Store) -> set[int]:
    """The cell jobs marked running (`doing`) whose cell lock no session holds: jobs between
    their start and their lock, jobs their worker lost (it could not write their end), and
    jobs that name no cell (they never hold one; a worker refuses them when they run again).
    Read from `pg_locks`, never by taking a lock."""
    jobs = _cell_jobs(store, f"id, CASE WHEN {_RUNNABLE} THEN args->>'experiment_id' END AS "
                      f"eid, CASE WHEN {_RUNNABLE} THEN args->>'cell' END AS cell",
                      "status = 'doing'", **_runnable(None))
    if not jobs:
        return set()
    with store.reading() as connection:
        held = set(connection.execute(text(
            "SELECT classid::bigint, objid::bigint FROM pg_locks "
            "WHERE locktype = 'advisory' AND objsubid = 2 AND granted")).all())
    out = set()
    for job in jobs:
        try:
            found = read_job({"experiment_id": job["eid"], "cell": job["cell"]})
        except PoisonJob:
            out.add(int(job["id"]))
            continue
        keys = _lock_keys(found.experiment_id, found.cell)
        if (keys["a"] & 0xFFFFFFFF, keys["b"] & 0xFFFFFFFF) not in held:
            out.add(int(job["id"]))
    return out


def queue_depth(store: Store) -> pd.DataFrame:
    """Cell jobs per endpoint queue: queued and running."""
    return pd.DataFrame(_cell_jobs(
        store, "queue_name AS queue, count(*) FILTER (WHERE status = 'todo') AS queued, "
        "count(*) FILTER (WHERE status = 'doing') AS running",
        "status IN ('todo', 'doing') GROUP BY queue_name ORDER BY queue_name"),
        columns=["queue", "queued", "running"])


# --------------------------------------------------------------------------- exactly once
def _key(value: str) -> int:
    """A signed 32-bit advisory lock key for `value`."""
    return zlib.crc32(value.encode()) - 2**31


def _lock_keys(experiment_id: str, cell: Cell) -> dict[str, int]:
    return {"a": _key(experiment_id), "b": _key(cell.tag)}


class CellLocks:
    """The advisory locks of the cells one worker runs, all held on one session of its own
    (a connection in autocommit, opened on first use): taking or leaving a lock is one round
    trip, and a worker running K cells at once holds one connection for them, not K. The
    locks go with the session, so a worker that dies (or loses the database) releases them.

    A session's advisory locks stack (asking again for one it holds says yes), so the locks
    this object holds are also kept here, and asking for one of them says no: two jobs of one
    worker naming the same cell never both run it. Thread-safe."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._guard = threading.Lock()
        self._connection: Any = None
        self._session = 0  # which session took each lock held: a lost one holds none
        self._held: dict[tuple[int, int], int] = {}

    def _open(self) -> Any:
        if self._connection is None:
            require_postgres(self.store)
            self._connection = self.store.engine.connect().execution_options(
                isolation_level="AUTOCOMMIT")
            self._session += 1
        return self._connection

    def _lost(self) -> None:
        """The session is gone, and its locks with it; the next call opens another."""
        if self._connection is not None:
            self._connection.invalidate()
            self._connection.close()
            self._connection = None

    def acquire(self, experiment_id: str, cell: Cell) -> bool:
        """Take the cell's lock; False when another session, or another of this worker's
        jobs, holds it (that one runs the cell)."""
        keys = _lock_keys(experiment_id, cell)
        key = (keys["a"], keys["b"])
        with self._guard:
            if key in self._held:
                return False
            try:
                got = bool(self._open().execute(
                    text("SELECT pg_try_advisory_lock(:a, :b)"), keys).scalar())
            except OperationalError:
                self._lost()
                raise
            if got:
                self._held[key] = self._session
            return got

    def release(self, experiment_id: str, cell: Cell) -> None:
        """Leave the cell's lock (nothing when it is not held here, or its session is
        gone)."""
        keys = _lock_keys(experiment_id, cell)
        with self._guard:
            session = self._held.pop((keys["a"], keys["b"]), None)
            if session is None or session != self._session or self._connection is None:
                return
            try:
                self._connection.execute(text("SELECT pg_advisory_unlock(:a, :b)"), keys)
            except OperationalError:  # the session is gone, and its locks with it
                self._lost()

    def close(self) -> None:
        """Close the session: every lock it holds is released."""
        with self._guard:
            self._held.clear()
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def take_cell(store: Store, experiment_id: str, cell: Cell) -> bool:
    """With the cell's lock held (`CellLocks`): False when the cell already has a completed
    run (it never runs again); else end the runs a dead worker left `running` for it as
    `interrupted`, mark every earlier try `superseded`, and return True. The usual cell, with
    no try before it, costs one read (the lock keeps every other writer off its runs)."""
    with store.reading() as connection:
        rows = connection.execute(select(RunRow.id, RunRow.status, RunRow.tags).where(
            RunRow.experiment_id == experiment_id,
            RunRow.tags.contains(f'"{cell.tag}"'))).mappings().all()
    runs = [r for r in rows if cell.tag in decode_tags(r["tags"])]
    if any(r["status"] == "completed" for r in runs):
        return False
    orphans = [r["id"] for r in runs if r["status"] == "running"]
    if orphans:  # their worker is gone: the lock was free
        with store.writing() as connection:
            for run_id in orphans:
                end_run_row(connection, run_id, "interrupted", ORPHANED)
    supersede(store, [r["id"] for r in runs if SUPERSEDED not in decode_tags(r["tags"])])
    return True


# --------------------------------------------------------------------------- experiments
class PoolState(NamedTuple):
    """What a job reads of its experiment before each cell (`pool_state`)."""

    status: str
    host: str
    started_by: str  # who started it: its runs record that name, not the worker's
    budget: float | None  # its `budget_usd` as stored now (a resume may have set a new one)
    error: str  # why it stopped ("" while it runs)

    @property
    def skipped(self) -> str:
        """Why a job of the experiment starts no cell ("" while the pool runs it)."""
        if (self.status, self.host) == ("running", POOL_HOST):
            return ""
        return f"skipped: the experiment is {self.status}"


def pool_state(store: Store, experiment_id: str) -> PoolState | None:
    """An experiment's stored status, host, who started it, budget and error, in one read
    without the rest of its spec (None when there is no such experiment): what a job checks
    before each cell, and what a budget stop's message is rewritten from. Who started it and
    the budget are read here, not kept by the worker: a resume by someone else changes them."""
    with store.reading() as connection:
        found = connection.execute(select(ExperimentRow.status, ExperimentRow.host,
                                          ExperimentRow.started_by, budget_column(store),
                                          ExperimentRow.error)
                                   .where(ExperimentRow.id == experiment_id)).first()
    return None if found is None else PoolState(str(found[0]), str(found[1]),
                                                 str(found[2] or ""), as_budget(found[3]),
                                                 str(found[4] or ""))


def pool_running(store: Store) -> list[str]:
    """The experiments the pool runs now (stored `running` on `POOL_HOST`)."""
    with store.engine.connect() as connection:
        return list(connection.execute(select(ExperimentRow.id).where(
            ExperimentRow.status == "running", ExperimentRow.host == POOL_HOST)).scalars())


def lock_id(cell: Cell) -> int:
    """The number `pg_locks` shows as a held cell lock's `objid` (`held_cells`)."""
    return _key(cell.tag) & 0xFFFFFFFF


def _held_on(connection: Any, experiment_id: str) -> list[int]:
    return [int(found) for found in connection.execute(text(
        "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 "
        "AND granted AND classid::bigint = :a"),
        {"a": _key(experiment_id) & 0xFFFFFFFF}).scalars()]


def held_cells(store: Store, experiment_id: str) -> list[int]:
    """The cells of the experiment whose lock some session holds now (the cells in flight
    on every worker), each as its `lock_id`; read from `pg_locks`, never by taking a lock."""
    with store.engine.connect() as connection:
        return _held_on(connection, experiment_id)


@contextmanager
def budget_turn(store: Store, experiment_id: str, every: int
                ) -> Iterator[tuple[SpendFigures, list[int]]]:
    """One job's turn at its experiment's budget, across every worker: the experiment's
    budget lock (an advisory lock, in a transaction) is held while the block runs, so that
    no two jobs decide on the same spend at once. Yields `experiment_spend`'s figures (with
    `every`) read in that transaction and the cells whose lock some session holds now
    (`held_cells`): a cell taken a moment ago holds its lock before its run is stored. So a
    cell whose lock is taken before the block ends is in flight for the next job's turn."""
    with store.engine.begin() as connection:
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                           {"key": _key(f"budget {experiment_id}")})
        yield spend_on(connection, experiment_id, every), _held_on(connection, experiment_id)


@contextmanager
def settle_lock(store: Store, experiment_id: str) -> Iterator[None]:
    """Hold the experiment's advisory lock (in a transaction) while the block runs, so that
    the job that ends last and a worker's periodic check never settle it at once."""
    with store.writing() as connection:
        connection.execute(text("SELECT pg_advisory_xact_lock(:a)"), {"a": _key(experiment_id)})
        yield


# --------------------------------------------------------------------------- workers
def register(store: Store, endpoints: Sequence[str], concurrency: int) -> str:
    """Add this worker process to the `workers` table; returns its id."""
    worker_id = uuid4().hex[:12]
    with store.writing() as connection:
        connection.execute(WORKERS.insert().values(
            id=worker_id, host=store.host[:200], pid=os.getpid(),
            endpoints=",".join(endpoints), concurrency=concurrency, cells_done=0,
            started_at=now(), heartbeat_at=now()))
    return worker_id


def beat(store: Store, worker_id: str, stopped: bool = False) -> None:
    """A worker's heartbeat (and its end)."""
    values: dict[str, Any] = {"heartbeat_at": now()}
    if stopped:
        values["stopped_at"] = now()
    with store.writing() as connection:
        connection.execute(update(WorkerRow).where(WorkerRow.id == worker_id).values(**values))


def finished_by(connection: Any, worker: Any) -> int:
    """The experiment runs a worker finished (completed or failed), read from the runs it
    stored (its host and pid, from its start to its stop): the runs are the record, so a
    worker killed between storing a run and anything after it is still counted exactly."""
    query = select(func.count()).select_from(RunRow).where(
        RunRow.experiment_id.is_not(None), RunRow.host == worker["host"],
        RunRow.pid == worker["pid"], RunRow.created_at >= worker["started_at"],
        RunRow.status.in_(("completed", "failed")))
    if worker["stopped_at"] is not None:
        query = query.where(RunRow.created_at <= worker["stopped_at"])
    return int(connection.execute(query).scalar_one())


def workers(store: Store, include_stopped: bool = False) -> pd.DataFrame:
    """The pool's workers, newest first: host, pid, endpoints, started, last heartbeat, cells
    done (`finished_by`) and state (`running`, `stopped`, or `gone`: dead pid here, or no
    heartbeat for `WORKER_GONE_AFTER` on another host)."""
    columns = ["host", "pid", "endpoints", "concurrency", "started", "heartbeat",
               "cells_done", "state"]
    out = []
    moment = now()
    with store.engine.connect() as connection:
        rows = connection.execute(select(WORKERS).order_by(
            WorkerRow.started_at.desc())).mappings().all()
        for r in rows:
            beat_at = aware(r["heartbeat_at"])
            if r["stopped_at"] is not None:
                state = "stopped"
            elif (r["host"] == store.host and owner_gone(r["host"], r["pid"], beat_at,
                                                          here=store.host)) or \
                    beat_at is None or beat_at < moment - WORKER_GONE_AFTER:
                state = "gone"
            else:
                state = "running"
            if state == "running" or include_stopped:
                out.append({"host": r["host"], "pid": r["pid"],
                            "endpoints": r["endpoints"] or "all",
                            "concurrency": r["concurrency"], "started": aware(r["started_at"]),
                            "heartbeat": beat_at, "cells_done": finished_by(connection, r),
                            "state": state})
    return pd.DataFrame(out, columns=columns)


def throughput(store: Store, minutes: float = 5.0) -> float:
    """Experiment cells completed per minute over the last `minutes` (any process)."""
    since = now() - timedelta(minutes=minutes)
    with store.engine.connect() as connection:
        count = connection.execute(select(func.count()).select_from(RunRow).where(
            RunRow.experiment_id.is_not(None), RunRow.status == "completed",
            RunRow.finished_at >= since)).scalar()
    return float(count or 0) / minutes


def running_runs(store: Store, experiment_id: str) -> list[dict[str, Any]]:
    """The experiment's runs stored `running`: id and cell tag."""
    with store.engine.connect() as connection:
        rows = connection.execute(select(RunRow.id, RunRow.tags).where(
            RunRow.experiment_id == experiment_id, RunRow.status == "running")).all()
    out = []
    for run_id, tags in rows:
        cell = Cell.from_tags(decode_tags(tags))
        if cell is not None:
            out.append({"id": run_id, "cell": cell.tag})
    return out
