"""The database under the store: opening it (WAL SQLite or PostgreSQL, read-only when it
must be), migrations, write transactions, run ends waiting for a write, and the reaper.

Schema changes are ordered, named migrations recorded in `schema_migrations`, so an existing
file is brought up to date on open; a database written by a newer Parley is refused, and a
read-only one opens for reading. A write that fails (disk full) raises `StoreWriteError`; a
run's end that could not be written is kept and retried on the next write and by the reaper,
so a run never stays `running` once the store can be written again.

Reads never write: runs left `running` by a process that is gone are marked `interrupted` by
`reap`, which runs when the store opens and then on a timer (`start_reaper`); until then,
reads present such rows as `interrupted` by the same rule (`engine.store.liveness`).
"""
from __future__ import annotations

import os
import re
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import case, inspect, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import NoSuchModuleError, OperationalError, SQLAlchemyError

from engine.errors import ParleyError
from engine.models import ConfigError, now
from engine.store import schema
from engine.store.liveness import GONE, owner_gone
from engine.store.local_limits import LocalLimits
from engine.store.migrations import BACKFILLS, MIGRATIONS, refuse_newer
from engine.store.schema import MigrationRow, RunRow
from engine.store.statements import BACKFILL_LOG, MIGRATION_LOG, end_run_row


def default_url() -> str:
    """The default store: `data/parley.db` in the project folder (the one holding app.py,
    where an editable install's engine lives), so the app, the CLI and the Python API share
    one store from whatever folder they start in; `data/parley.db` under the working folder
    when the engine is installed without the app."""
    root = Path(__file__).resolve().parents[2]
    if (root / "app.py").is_file():
        return f"sqlite:///{(root / 'data' / 'parley.db').as_posix()}"
    return "sqlite:///data/parley.db"


DEFAULT_URL = default_url()
MIGRATION_LOCK = 0x5061726C6579  # "Parley": the advisory lock a PostgreSQL migration holds
READ_ONLY = "this database is read-only ({url}): runs can be read, not started or changed"


# What `Database.owner_gone` reads of a row.
SIGNS = ("id", "status", "host", "pid", "heartbeat_at")


def signs_of_life(*names: str) -> list[Any]:
    """The columns `names` (of `SIGNS`) of a run, NULL but in a `running` row: only its owner
    can be gone, so a query of many runs reads these of the few that run."""
    running = RunRow.status == "running"
    return [case((running, getattr(RunRow, name)), else_=None).label(name) for name in names]


class StoreWriteError(ParleyError, RuntimeError):
    """The database refused a write (disk full, locked too long, connection lost)."""


def _why(exc: OperationalError) -> str:
    detail = str(exc.orig or exc).strip().splitlines()
    return f"the store could not be written: {detail[0] if detail else type(exc).__name__}"


SCHEMES = "sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/NAME"


def cannot_open(url: str, exc: BaseException) -> str:
    """Why a database could not be opened, in one line naming its host and port (the
    password masked): an unsupported scheme, a bad port, a server that cannot be reached."""
    try:
        parsed = make_url(url)
    except Exception:  # not even a URL: say what one looks like, never echo a password
        return f"the database URL could not be read; use {SCHEMES}"
    shown = parsed.render_as_string(hide_password=True)
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql") or isinstance(exc, (ImportError,
                                                                   NoSuchModuleError)):
        return (f"cannot open the database {shown}: the scheme {parsed.drivername!r} is not "
                f"supported; use {SCHEMES}")
    where = (f" (host {parsed.host or 'localhost'}, port {parsed.port or 5432})"
             if backend == "postgresql" else "")
    detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    reason = detail[0] if detail else type(exc).__name__
    if parsed.password:  # a driver may quote the URL back: its password as a whole word
        reason = re.sub(rf"(?<![\w]){re.escape(str(parsed.password))}(?![\w])", "***", reason)
    return f"cannot open the database {shown}{where}: {reason[:300]}"


def _read_only(exc: OperationalError) -> bool:
    """True when SQLite refused a write because its file (or directory) is read-only: its
    result code, SQLITE_READONLY or one of its extended codes."""
    code = getattr(exc.orig, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_READONLY


class Database:
    """One database opened for the store; every method opens and closes its own session."""

    def __init__(self, url: str | None = None):
        self.url = url or os.environ.get("PARLEY_DB_URL") or DEFAULT_URL
        self.host = socket.gethostname()
        self.read_only = False
        self._pending: dict[str, tuple[str, str]] = {}  # run id -> the end not yet written
        # the run facets this process has written (`engine.store.facets`: never deleted), so
        # a run whose tags and models are all known starts with one statement, not two
        self._facets: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None
        self._reaper_stop = threading.Event()
        self.local_limits = LocalLimits()  # endpoint limits kept here when not in the database
        try:
            self._open()
        except ConfigError:
            raise
        except (SQLAlchemyError, ImportError, ValueError, OSError) as exc:
            raise ConfigError(cannot_open(self.url, exc), "input") from None

    def _open(self) -> None:
        """Connect, migrate (or open read-only) and start the reaper."""
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
            if not sqlite or not _read_only(exc):
                raise
            self.engine.dispose()
            self._open_read_only(path)
            return
        self.reap()

    def _open_read_only(self, path: str | None) -> None:
        self.read_only = True
        self.engine = schema.engine(schema.read_only_url(self.url, path), True, read_only=True)
        try:
            self.check_schema()
        except OperationalError:  # WAL without -shm in a directory it may not write
            self.engine.dispose()
            self.engine = schema.engine(schema.read_only_url(self.url, path, immutable=True),
                                        True, read_only=True)
            self.check_schema()

    @property
    def url_safe(self) -> str:
        """The database URL with any password hidden."""
        return make_url(self.url).render_as_string(hide_password=True)

    def close(self) -> None:
        """Stop the reaper and close the database's connections."""
        self.stop_reaper()
        self.engine.dispose()

    # ----------------------------------------------------------------- schema
    def migrate(self) -> list[str]:
        """Apply the migrations this database has not seen; returns their names."""
        applied: list[str] = []
        with self._migrating() as connection:
            MIGRATION_LOG.create(connection, checkfirst=True)
            done = set(connection.execute(select(MigrationRow.name)).scalars())
            refuse_newer(done)
            for name, apply in MIGRATIONS:
                if name in done:
                    continue
                apply(connection)
                connection.execute(MIGRATION_LOG.insert().values(
                    name=name, applied_at=now()))
                applied.append(name)
        return applied

    def backfill(self, protocols: Mapping[str, Any]) -> list[str]:
        """Do the back-fills of old rows that migrations left to the protocols' side
        (`migrations.BACKFILLS`), each with the protocol registry handed in (`protocols`,
        by name) and in one transaction with its note's removal; returns their names. A
        read-only store, or one with none pending, does nothing."""
        if self.read_only:
            return []
        with self.engine.connect() as connection:
            if not inspect(connection).has_table(BACKFILL_LOG.name) or connection.execute(
                    select(BACKFILL_LOG.c.name).limit(1)).first() is None:
                return []
        done: list[str] = []
        with self._migrating() as connection:
            pending = sorted(connection.execute(select(BACKFILL_LOG.c.name)).scalars())
            for name in pending:
                if name in BACKFILLS:  # a note no step of this Parley reads stays
                    BACKFILLS[name](connection, protocols)
                    connection.execute(BACKFILL_LOG.delete().where(BACKFILL_LOG.c.name == name))
                    done.append(name)
        return done

    @contextmanager
    def _migrating(self) -> Iterator[Any]:
        """A write transaction holding, on PostgreSQL, the migration lock: processes opening
        a database at once (workers starting together) migrate and back-fill one after
        another, not racing to change the same tables."""
        with self.writing(retry=False) as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                                   {"key": MIGRATION_LOCK})
            yield connection

    def check_schema(self) -> None:
        """Without writing: refuse a database from a newer Parley, or one (read-only) that
        lacks a migration this Parley needs."""
        with self.engine.connect() as connection:
            if not inspect(connection).has_table("schema_migrations"):
                raise ConfigError(f"{self.url_safe} holds no Parley tables and is read-only",
                                  "input")
            done = set(connection.execute(select(MigrationRow.name)).scalars())
        refuse_newer(done)
        missing = [name for name, _ in MIGRATIONS if name not in done]
        if missing:
            raise ConfigError(f"this read-only database needs migration {missing[0]}; open it "
                              "once with write access to upgrade it", "input")

    @contextmanager
    def reading(self) -> Iterator[Any]:
        """A connection for reads that need no transaction of their own. On PostgreSQL it is
        in autocommit: a read is one round trip, with no BEGIN before it and no ROLLBACK when
        the connection goes back to the pool (at READ COMMITTED every statement sees its own
        snapshot in a transaction too, so nothing is lost). Elsewhere a plain connection."""
        with self.engine.connect() as connection:
            if connection.dialect.name == "postgresql":
                connection = connection.execution_options(isolation_level="AUTOCOMMIT")
            yield connection

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

    @contextmanager
    def loading(self, durable: bool = True) -> Iterator[Any]:
        """One connection for a bulk load, the caller opening a transaction per chunk
        (`connection.begin()`); refused on a read-only database, a refused write raises
        `StoreWriteError`. `durable=False` is for a benchmark's own throwaway SQLite file:
        commits do not wait for the disk (`synchronous=OFF`: a power cut can lose the file, a
        killed process cannot) and 64 MB of pages stay cached, both restored afterwards."""
        if self.read_only:
            raise ConfigError(READ_ONLY.format(url=self.url_safe), "input")
        try:
            with self.engine.connect() as connection:
                bulk = not durable and connection.dialect.name == "sqlite"
                if bulk:
                    connection.exec_driver_sql("PRAGMA synchronous=OFF")
                    connection.exec_driver_sql("PRAGMA cache_size=-65536")
                    connection.commit()  # ends the autobegun transaction: chunks begin their own
                try:
                    yield connection
                finally:
                    if bulk:  # back to the pool as `schema._sqlite_pragmas` left it
                        connection.exec_driver_sql("PRAGMA synchronous=NORMAL")
                        connection.exec_driver_sql("PRAGMA cache_size=-2000")
                        connection.commit()
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
                    end_run_row(connection, run_id, status, error)
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

    def _end_or_wait(self, run_id: str, status: str, error: str) -> bool:
        """End a `running` run: its end joins those waiting and is written with them
        (`flush_pending`); when the store cannot be written it stays waiting and this returns
        False. Never raises for a failed write (a read-only store refuses it: `writing`)."""
        if self.read_only:
            raise ConfigError(READ_ONLY.format(url=self.url_safe), "input")
        with self._lock:
            self._pending[run_id] = (status, error)
        self.flush_pending()
        with self._lock:
            return run_id not in self._pending

    # ----------------------------------------------------------------- liveness
    def owner_gone(self, row: Any) -> bool:
        """True when `row` (with status, host, pid, heartbeat_at; an id when it has one) is
        `running` but its process is gone (`engine.store.liveness`). A run whose end waits
        in this process is not gone: its end is written as soon as the store can be."""
        if row["status"] != "running":
            return False
        if "id" in row.keys():
            with self._lock:
                if row["id"] in self._pending:
                    return False
        return owner_gone(row["host"], row["pid"], row["heartbeat_at"], here=self.host)

    def gone_rows(self, columns: Mapping[str, Sequence[Any]]) -> set[int]:
        """The places of the rows in `columns` (name -> values, with `SIGNS`) whose owner is
        gone (`owner_gone`)."""
        return {i for i, status in enumerate(columns["status"]) if status == "running"
                and self.owner_gone({name: columns[name][i] for name in SIGNS})}

    def _stale(self, narrow: Callable[[Any], Any] = lambda query: query) -> list[str]:
        """The ids of runs (among those `narrow` keeps of a query) left `running` by processes
        that are gone."""
        query = select(*(getattr(RunRow, name) for name in SIGNS)).where(
            RunRow.status == "running")
        with self.engine.connect() as connection:
            rows = connection.execute(narrow(query)).mappings().all()
        return [row["id"] for row in rows if self.owner_gone(row)]

    def reap(self) -> int:
        """Write the run ends waiting for the store, then mark as `interrupted` the runs left
        `running` by processes that are gone; returns how many. A read-only store writes
        nothing. Runs on open and on the reaper's timer, never inside a read."""
        if self.read_only:
            return 0
        self.flush_pending()
        stale = self._stale()
        for run_id in stale:
            self._end_or_wait(run_id, "interrupted", GONE)
        return len(stale)

    def start_reaper(self, interval: float = 30.0) -> None:
        """Reap every `interval` seconds in a daemon thread until `stop_reaper` (a second
        call while it runs does nothing). A read-only store has nothing to reap."""
        with self._lock:
            if self.read_only or (self._reaper is not None and self._reaper.is_alive()):
                return
            self._reaper_stop = threading.Event()
            self._reaper = threading.Thread(target=self._reap_every, args=(interval,),
                                            name="parley-store-reaper", daemon=True)
            self._reaper.start()

    def stop_reaper(self) -> None:
        """Stop the reaper thread (if any) and wait for it."""
        with self._lock:
            reaper, self._reaper = self._reaper, None
        self._reaper_stop.set()
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join()

    def _reap_every(self, interval: float) -> None:
        stop = self._reaper_stop
        while not stop.wait(interval):
            try:
                self.reap()
            except (SQLAlchemyError, StoreWriteError):  # locked or unreachable: next tick
                continue
