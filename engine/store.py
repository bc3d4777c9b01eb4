"""The store: runs and their turns in SQLite (WAL) or PostgreSQL, through SQLAlchemy 2.

Turns are written as each completes, so a crash loses at most the call in flight; a run left
`running` by a process that is gone reads as `interrupted`. Schema changes are ordered, named
migrations recorded in `schema_migrations`, so an existing file is brought up to date on open.
"""
from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from uuid import uuid4

import pandas as pd
from sqlalchemy import (Boolean, bindparam, DateTime, Float, ForeignKey, Integer, String, Text, create_engine,
                        delete, event, inspect, or_, select, text, update)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from .models import ConfigError, RunResult, Turn, now

DEFAULT_URL = "sqlite:///data/parley.db"
STATUSES = ("running", "completed", "failed", "interrupted")
_SECRET_WORDS = ("key", "secret", "token", "password", "authorization")
STALE_AFTER = timedelta(minutes=10)  # a running row on another host with no heartbeat


class Base(DeclarativeBase):
    pass


class RunRow(Base):
    __tablename__ = "runs"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    protocol: Mapped[str] = mapped_column(String(32), index=True)
    question: Mapped[str] = mapped_column(Text)
    expected: Mapped[str | None] = mapped_column(Text, nullable=True)
    config: Mapped[str] = mapped_column(Text, default="{}")
    label: Mapped[str | None] = mapped_column(String(200), index=True, nullable=True)
    tags: Mapped[str] = mapped_column(Text, default="[]")
    status: Mapped[str] = mapped_column(String(16), index=True)
    error: Mapped[str] = mapped_column(Text, default="")
    result: Mapped[str] = mapped_column(Text, default="{}")
    metrics: Mapped[str] = mapped_column(Text, default="{}")
    models: Mapped[str] = mapped_column(Text, default="")
    simulated: Mapped[bool] = mapped_column(Boolean, default=False)
    correct: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    calls: Mapped[int] = mapped_column(Integer, default=0)
    degraded: Mapped[int] = mapped_column(Integer, default=0)
    tokens_in: Mapped[int] = mapped_column(Integer, default=0)
    tokens_out: Mapped[int] = mapped_column(Integer, default=0)
    latency: Mapped[float] = mapped_column(Float, default=0.0)
    duration: Mapped[float] = mapped_column(Float, default=0.0)
    experiment_id: Mapped[str | None] = mapped_column(String(32), index=True, nullable=True)
    host: Mapped[str] = mapped_column(String(200), default="")
    pid: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class TurnRow(Base):
    __tablename__ = "turns"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    idx: Mapped[int] = mapped_column(Integer)
    phase: Mapped[str] = mapped_column(String(40))
    round: Mapped[int] = mapped_column(Integer, default=0)
    seat: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(Text, default="")
    model: Mapped[str] = mapped_column(String(200), default="")
    messages: Mapped[str] = mapped_column(Text, default="[]")
    reply: Mapped[str] = mapped_column(Text, default="")
    parsed: Mapped[str] = mapped_column(Text, default="{}")
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str] = mapped_column(Text, default="")
    warnings: Mapped[str] = mapped_column(Text, default="[]")
    latency: Mapped[float] = mapped_column(Float, default=0.0)
    tokens_in: Mapped[int] = mapped_column(Integer, default=0)
    tokens_out: Mapped[int] = mapped_column(Integer, default=0)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    simulated: Mapped[bool] = mapped_column(Boolean, default=False)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class LibraryRow(Base):
    """Personas and roles (kind = persona | role), and saved configurations (kind = config)."""

    __tablename__ = "library"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16), index=True)
    name: Mapped[str] = mapped_column(String(200))
    body: Mapped[str] = mapped_column(Text, default="{}")
    builtin: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ExperimentRow(Base):
    """An experiment's spec (questions x configurations x repeats); its runs point back by
    `runs.experiment_id` and name their cell in a `cell:Q:C:R` tag (see engine.experiments)."""

    __tablename__ = "experiments"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    spec: Mapped[str] = mapped_column(Text, default="{}")
    status: Mapped[str] = mapped_column(String(16), index=True)
    error: Mapped[str] = mapped_column(Text, default="")
    total: Mapped[int] = mapped_column(Integer, default=0)
    host: Mapped[str] = mapped_column(String(200), default="")
    pid: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class MigrationRow(Base):
    __tablename__ = "schema_migrations"
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    applied_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


def _create(tables: Sequence[str]):
    def apply(connection) -> None:
        Base.metadata.create_all(connection, tables=[Base.metadata.tables[t] for t in tables])
    return apply


# Ordered, named migrations; append only. Each runs once per database.
MIGRATIONS: list[tuple[str, Any]] = [
    ("0001_runs_and_turns", _create(["runs", "turns"])),
    ("0002_library", _create(["library"])),
    ("0003_experiments", _create(["experiments"])),
]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def strip_secrets(value: Any) -> Any:
    """Drop any mapping entry whose key names a secret (api_key, token, password ...)."""
    if isinstance(value, Mapping):
        return {k: strip_secrets(v) for k, v in value.items()
                if not any(word in str(k).lower() for word in _SECRET_WORDS)}
    if isinstance(value, (list, tuple)):
        return [strip_secrets(v) for v in value]
    return value


def _aware(moment: datetime | None) -> datetime | None:
    if moment is not None and moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Recorder:
    """Writes one run's turns as they complete."""

    def __init__(self, store: "Store", run_id: str):
        self.store, self.run_id = store, run_id

    def turn(self, turn: Turn) -> None:
        self.store.add_turn(self.run_id, turn)

    def update_turn(self, turn: Turn) -> None:
        self.store.update_turn(self.run_id, turn)


class Store:
    """Runs and turns in one database; every method opens and closes its own session."""

    def __init__(self, url: str | None = None):
        self.url = url or os.environ.get("PARLEY_DB_URL") or DEFAULT_URL
        self.host = socket.gethostname()
        args: dict[str, Any] = {}
        if self.url.startswith("sqlite"):
            path = self.url.split(":///", 1)[-1]
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            args["connect_args"] = {"check_same_thread": False, "timeout": 30}
        self.engine = create_engine(self.url, **args)
        if self.url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self.migrate()

    # ----------------------------------------------------------------- schema
    def migrate(self) -> list[str]:
        """Apply the migrations this database has not seen; returns their names."""
        applied: list[str] = []
        with self.engine.begin() as connection:
            MigrationRow.__table__.create(connection, checkfirst=True)
            done = set(connection.execute(select(MigrationRow.name)).scalars())
            for name, apply in MIGRATIONS:
                if name in done:
                    continue
                apply(connection)
                connection.execute(MigrationRow.__table__.insert().values(
                    name=name, applied_at=now()))
                applied.append(name)
        return applied

    def migrations(self) -> list[str]:
        with Session(self.engine) as session:
            return list(session.scalars(select(MigrationRow.name).order_by(MigrationRow.name)))

    # ----------------------------------------------------------------- run lifecycle
    def start_run(self, protocol: str, question: str, *, config: Mapping[str, Any] | None = None,
                  label: str | None = None, tags: Iterable[str] = (),
                  expected: str | None = None, experiment_id: str | None = None) -> str:
        """Open a run row as `running`; returns its id."""
        run_id = uuid4().hex[:12]
        config = strip_secrets(dict(config or {}))
        seats = config.get("seats", []) if isinstance(config, Mapping) else []
        models = sorted({str(s.get("model", "")) for s in seats if isinstance(s, Mapping)})
        with Session(self.engine) as session, session.begin():
            session.add(RunRow(
                id=run_id, protocol=protocol, question=question, expected=expected,
                config=_dumps(config), label=label or None, tags=_dumps(sorted(set(tags))),
                status="running", models=",".join(models),
                simulated=bool(models) and all(m.startswith("simulated") for m in models),
                experiment_id=experiment_id, host=self.host, pid=os.getpid(),
                created_at=now(), heartbeat_at=now()))
        return run_id

    def recorder(self, run_id: str) -> Recorder:
        return Recorder(self, run_id)

    def add_turn(self, run_id: str, turn: Turn) -> None:
        # Prebuilt Core statements with bound parameters, not the ORM unit of work: this is
        # the hot path of every run, and a compiled statement is reused from the cache.
        with self.engine.begin() as connection:
            connection.execute(_INSERT_TURN, _turn_values(run_id, turn))
            connection.execute(_HEARTBEAT, {"rid": run_id, "at": now()})

    def add_turns(self, pairs: Sequence[tuple[str, Turn]]) -> None:
        """Write several runs' turns in one transaction (group commit for batch runners)."""
        if not pairs:
            return
        with self.engine.begin() as connection:
            connection.execute(_INSERT_TURN, [_turn_values(r, t) for r, t in pairs])
            for run_id in sorted({r for r, _ in pairs}):
                connection.execute(_HEARTBEAT, {"rid": run_id, "at": now()})

    def update_turn(self, run_id: str, turn: Turn) -> None:
        with self.engine.begin() as connection:
            connection.execute(_UPDATE_TURN, {
                "rid": run_id, "i": turn.index, "parsed": _dumps(turn.parsed),
                "warnings": _dumps(turn.warnings), "status": turn.status, "error": turn.error})

    def finish_run(self, run_id: str, result: RunResult) -> None:
        """Mark a run `completed` with its result, headline metrics and totals."""
        turns = result.turns
        dump = result.model_dump(mode="json", exclude={"turns"})
        metrics = {**result.outcome(), "warnings": len(result.warnings)}
        with Session(self.engine) as session, session.begin():
            session.execute(update(RunRow).where(RunRow.id == run_id).values(
                status="completed", result=_dumps(dump), metrics=_dumps(metrics),
                correct=result.correct, calls=len(turns),
                degraded=sum(1 for t in turns if t.status != "ok"),
                tokens_in=sum(t.tokens_in for t in turns),
                tokens_out=sum(t.tokens_out for t in turns),
                latency=sum(t.latency for t in turns), duration=result.duration,
                simulated=bool(turns) and all(t.simulated for t in turns),
                finished_at=now(), heartbeat_at=now()))

    def end_run(self, run_id: str, status: str, error: str = "") -> None:
        """Close a run that did not complete (`failed` or `interrupted`), keeping its turns."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}")
        with Session(self.engine) as session, session.begin():
            calls = session.scalar(select(TurnRow.id).where(TurnRow.run_id == run_id).limit(1))
            session.execute(update(RunRow).where(RunRow.id == run_id).values(
                status=status, error=error[:2000], finished_at=now(),
                calls=len(session.scalars(select(TurnRow.id).where(
                    TurnRow.run_id == run_id)).all()) if calls is not None else 0))

    def save(self, result: RunResult, label: str | None = None, tags: Iterable[str] = (),
             config: Mapping[str, Any] | None = None) -> str:
        """Store a finished result (or relabel one already stored); returns the run id."""
        if result.run_id and self.exists(result.run_id):
            with Session(self.engine) as session, session.begin():
                row = session.get(RunRow, result.run_id)
                assert row is not None
                if label is not None:
                    row.label = label
                if tags:
                    row.tags = _dumps(sorted(set(json.loads(row.tags)) | set(tags)))
            return result.run_id
        run_id = self.start_run(result.protocol, result.question_text, config=config or {
            "protocol": result.protocol,
            "seats": [{"name": s, "model": m} for s, m in
                      dict((t.seat, t.model) for t in result.turns).items()]},
            label=label, tags=tags, expected=result.expected)
        for turn in result.turns:
            self.add_turn(run_id, turn)
        result.run_id = run_id
        self.finish_run(run_id, result)
        return run_id

    # ----------------------------------------------------------------- reading
    def exists(self, run_id: str) -> bool:
        with Session(self.engine) as session:
            return session.get(RunRow, run_id) is not None

    def reap(self) -> int:
        """Mark as `interrupted` the runs left `running` by processes that are gone."""
        stale: list[str] = []
        with Session(self.engine) as session:
            rows = session.execute(select(RunRow.id, RunRow.host, RunRow.pid,
                                          RunRow.heartbeat_at)
                                   .where(RunRow.status == "running")).all()
        cutoff = now() - STALE_AFTER
        for run_id, host, pid, heartbeat in rows:
            if host == self.host:
                if not _pid_alive(pid):
                    stale.append(run_id)
            elif heartbeat is None or _aware(heartbeat) < cutoff:
                stale.append(run_id)
        for run_id in stale:
            self.end_run(run_id, "interrupted", "the process running it stopped")
        return len(stale)

    def get(self, run_id: str) -> dict[str, Any]:
        """One run as a dict: its row, `result` (the protocol's fields) and `turns`."""
        self.reap()
        with Session(self.engine) as session:
            row = session.get(RunRow, run_id)
            if row is None:
                raise KeyError(f"no run {run_id!r} in {self.url_safe}")
            turns = session.scalars(select(TurnRow).where(TurnRow.run_id == run_id)
                                    .order_by(TurnRow.idx)).all()
            out = _run_dict(row)
            out["turns"] = [_turn_dict(t) for t in turns]
        return out

    @property
    def url_safe(self) -> str:
        """The database URL with any password hidden."""
        return self.engine.url.render_as_string(hide_password=True)

    def runs(self, *, protocol: str | None = None, label: str | None = None,
             tag: str | None = None, status: str | None = None, model: str | None = None,
             search: str | None = None, since: datetime | None = None,
             until: datetime | None = None, experiment_id: str | None = None,
             ids: Sequence[str] | None = None, limit: int | None = None,
             with_result: bool = False, with_config: bool = True) -> pd.DataFrame:
        """Runs as a DataFrame, newest first; filters combine with AND (all are bound, never
        spliced into SQL). `metrics` and `config` come back parsed; `result` on request, and
        `config` can be left out when a caller (Insights over 10,000 runs) never reads it."""
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
        for name in ("config", "metrics", "tags", "result"):
            if name in frame:
                frame[name] = [json.loads(v) if v else {} for v in frame[name]]
        return frame

    def turns(self, run_id: str | Sequence[str] | None = None, *, phase: str | None = None,
              seat: str | None = None, status: str | None = None,
              with_messages: bool = False) -> pd.DataFrame:
        """Turns as a DataFrame, in run then speaking order."""
        columns = [c for c in TurnRow.__table__.columns
                   if with_messages or c.name != "messages"]
        query = select(*columns).order_by(TurnRow.run_id, TurnRow.idx)
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
        for name in ("parsed", "warnings", "messages"):
            if name in frame:
                frame[name] = [json.loads(v) if v else None for v in frame[name]]
        return frame

    def delete(self, run_ids: Iterable[str]) -> int:
        ids = list(run_ids)
        with Session(self.engine) as session, session.begin():
            session.execute(delete(TurnRow).where(TurnRow.run_id.in_(ids)))
            return session.execute(delete(RunRow).where(RunRow.id.in_(ids))).rowcount or 0

    # ----------------------------------------------------------------- export / import
    def export_run(self, run_id: str) -> str:
        """One run as a JSON document (row, result and turns with prompts and replies)."""
        return json.dumps(self.get(run_id), ensure_ascii=False, default=str, indent=2)

    def export_jsonl(self, run_ids: Iterable[str] | None = None) -> str:
        """Many runs as JSON lines (all runs when `run_ids` is None)."""
        ids = list(run_ids) if run_ids is not None else list(self.runs()["id"])
        return "".join(json.dumps(self.get(i), ensure_ascii=False, default=str) + "\n"
                       for i in ids)

    def import_runs(self, data: str) -> list[str]:
        """Import runs exported by `export_run` / `export_jsonl`; existing ids are skipped."""
        text_data = data.strip()
        if not text_data:
            return []
        try:
            docs = [json.loads(text_data)] if text_data.startswith("{") and "\n{" not in \
                text_data else [json.loads(line) for line in text_data.splitlines()
                                if line.strip()]
        except json.JSONDecodeError as exc:
            raise ConfigError(f"import: not JSON or JSON lines ({exc.msg} at line {exc.lineno})",
                              "input") from None
        imported = []
        with Session(self.engine) as session, session.begin():
            for number, doc in enumerate(docs, 1):
                if not isinstance(doc, dict) or "id" not in doc or "protocol" not in doc:
                    raise ConfigError(f"import: record {number} is not a Parley run export",
                                      "input")
                if session.get(RunRow, doc["id"]) is not None:
                    continue
                session.add(_row_from_dict(doc))
                session.flush()
                for turn in doc.get("turns", []):
                    session.add(TurnRow(run_id=doc["id"], **_turn_fields(turn)))
                imported.append(doc["id"])
        return imported

    # ----------------------------------------------------------------- library
    def library(self, kind: str) -> list[dict[str, Any]]:
        with Session(self.engine) as session:
            rows = session.scalars(select(LibraryRow).where(LibraryRow.kind == kind)
                                   .order_by(LibraryRow.name)).all()
            return [{"id": r.id, "name": r.name, "builtin": r.builtin, **json.loads(r.body)}
                    for r in rows]

    def put_library(self, kind: str, name: str, body: Mapping[str, Any],
                    item_id: int | None = None, builtin: bool = False) -> int:
        """Create or replace a library entry; names are unique within a kind."""
        if not name or not name.strip():
            raise ConfigError(f"a {kind} needs a name", "input")
        clean = strip_secrets({k: v for k, v in body.items() if k not in ("id", "name",
                                                                          "builtin")})
        with Session(self.engine) as session, session.begin():
            clash = session.scalar(select(LibraryRow).where(
                LibraryRow.kind == kind, LibraryRow.name == name.strip()))
            if clash is not None and clash.id != item_id:
                raise ConfigError(f"a {kind} named {name.strip()!r} already exists", "input")
            row = session.get(LibraryRow, item_id) if item_id is not None else None
            if row is None:
                row = LibraryRow(kind=kind, name=name.strip(), builtin=builtin,
                                 updated_at=now())
                session.add(row)
            row.name, row.body, row.updated_at = name.strip(), _dumps(clean), now()
            session.flush()
            return row.id

    def delete_library(self, item_id: int) -> None:
        with Session(self.engine) as session, session.begin():
            session.execute(delete(LibraryRow).where(LibraryRow.id == item_id))

    def integrity_check(self) -> str:
        if not self.url.startswith("sqlite"):
            return "ok"
        with self.engine.connect() as connection:
            return str(connection.execute(text("PRAGMA integrity_check")).scalar())

    def columns(self, table: str) -> list[str]:
        return [c["name"] for c in inspect(self.engine).get_columns(table)]


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


_INSERT_TURN = TurnRow.__table__.insert()
_HEARTBEAT = update(RunRow.__table__).where(RunRow.__table__.c.id == bindparam("rid")).values(
    heartbeat_at=bindparam("at"))

_turns = TurnRow.__table__
_UPDATE_TURN = update(_turns).where(_turns.c.run_id == bindparam("rid"),
                                    _turns.c.idx == bindparam("i")).values(
    parsed=bindparam("parsed"), warnings=bindparam("warnings"), status=bindparam("status"),
    error=bindparam("error"))


def _turn_values(run_id: str, turn: Turn) -> dict[str, Any]:
    return dict(run_id=run_id, idx=turn.index, phase=turn.phase, round=turn.round,
                seat=turn.seat, role=turn.role, model=turn.model,
                messages=_dumps(turn.messages), reply=turn.reply, parsed=_dumps(turn.parsed),
                status=turn.status, error=turn.error, warnings=_dumps(turn.warnings),
                latency=turn.latency, tokens_in=turn.tokens_in, tokens_out=turn.tokens_out,
                attempts=turn.attempts, simulated=turn.simulated,
                started_at=turn.started_at, finished_at=turn.finished_at)


_TURN_JSON = ("messages", "parsed", "warnings")
_RUN_JSON = ("config", "tags", "result", "metrics")


def _turn_dict(row: TurnRow) -> dict[str, Any]:
    out = {c.name: getattr(row, c.name) for c in TurnRow.__table__.columns if c.name != "id"}
    for name in _TURN_JSON:
        out[name] = json.loads(out[name]) if out[name] else None
    for name in ("started_at", "finished_at"):
        out[name] = _aware(out[name]).isoformat() if out[name] else None
    return out


def _run_dict(row: RunRow) -> dict[str, Any]:
    out = {c.name: getattr(row, c.name) for c in RunRow.__table__.columns}
    for name in _RUN_JSON:
        out[name] = json.loads(out[name]) if out[name] else {}
    for name in ("created_at", "heartbeat_at", "finished_at"):
        out[name] = _aware(out[name]).isoformat() if out[name] else None
    return out


def _parse_time(value: Any) -> datetime | None:
    if value in (None, ""):
        return None
    return _aware(datetime.fromisoformat(str(value)))


def _row_from_dict(doc: Mapping[str, Any]) -> RunRow:
    fields = {c.name for c in RunRow.__table__.columns}
    values = {k: v for k, v in doc.items() if k in fields}
    for name in _RUN_JSON:
        if name in values and not isinstance(values[name], str):
            values[name] = _dumps(strip_secrets(values[name]) if name == "config"
                                  else values[name])
    for name in ("created_at", "heartbeat_at", "finished_at"):
        values[name] = _parse_time(values.get(name))
    values["created_at"] = values["created_at"] or now()
    if values.get("status") == "running":
        values["status"] = "interrupted"
    return RunRow(**values)


def _turn_fields(turn: Mapping[str, Any]) -> dict[str, Any]:
    fields = {c.name for c in TurnRow.__table__.columns} - {"id", "run_id"}
    values = {k: v for k, v in turn.items() if k in fields}
    for name in _TURN_JSON:
        if name in values and not isinstance(values[name], str):
            values[name] = _dumps(values[name])
    for name in ("started_at", "finished_at"):
        values[name] = _parse_time(values.get(name)) or now()
    return values
