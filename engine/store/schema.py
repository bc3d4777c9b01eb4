"""The store's tables and how a database is opened (their ordered, named migrations are in
`engine.store.migrations`).

`Store` (engine.store.runs) owns every query; this module only says what the tables are. Column
sizes here are the limits `engine.store.records` checks before anything is written, so that SQLite
(which would accept anything) and PostgreSQL (which refuses) hold exactly the same values.
"""
from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    case,
    create_engine,
    event,
    false,
    func,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql.elements import Grouping


class Moment(TypeDecorator[datetime]):
    """A timezone-aware time. Reading is tolerant: SQLite keeps whatever text was written,
    and a value that is not a time reads as None (the row shows as unreadable) instead of
    failing the whole query."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def result_processor(self, dialect: Any, coltype: Any) -> Any:
        inner = self.impl_instance.dialect_impl(dialect).result_processor(dialect, coltype)
        if inner is None:
            return None

        def process(value: Any) -> Any:
            if value is None:  # most heartbeats and every unfinished run: no call inside
                return None
            try:
                return inner(value)
            except (ValueError, TypeError):
                return None
        return process


class Base(DeclarativeBase):
    pass


# `runs` and `turns` are the one description of a run and a turn: the records an import
# checks and an export writes (`engine.store.records.RunRecord`, `TurnRecord`), the values a
# run's and a turn's facts are written as (`records.turn_values`, `column_values`) and how a
# stored value is read back (`engine.store.readback`) all follow from these columns: their SQL
# type, size and nullability, and `info` where that is not enough:
# - `json`: the text holds JSON: an `object`, `tags` (a list of names), `texts` (a list of
#   text) or `messages` (a list of text mappings); `empty`: its value when there is none
#   ({} or [], or None for an object a file may leave out);
# - `rule`: a check beyond the type: `id` and `protocol` (identifiers, refused when
#   malformed), `status` (one of the table's statuses), `error` (a failure's text, keys
#   redacted), `money` (US dollars, NULL when unknown) or `metrics` (a flat JSON object);
# - `file`: False for a column no file sets (an import fills it: who imported it, or a value
#   read off another column);
# - `null`: what NULL reads as, for a column older rows hold NULL in.
JSON_OBJECT: dict[str, Any] = {"json": "object", "empty": {}}
OPTIONAL_OBJECT: dict[str, Any] = {"json": "object", "empty": None}
IDENTIFIER: dict[str, Any] = {"rule": "id"}
ERROR: dict[str, Any] = {"rule": "error"}
MONEY: dict[str, Any] = {"rule": "money"}
STATUS: dict[str, Any] = {"rule": "status"}
NOT_FROM_FILES: dict[str, Any] = {"file": False}


ANSWERS_INDEX = ("status", "protocol", "label", "simulated", "confidence_level",
                 "judge_confidence", "correct", "seats", "mind_changes", "persuaded", "misled",
                 "consensus", "tied", "first_share")


class RunRow(Base):
    __tablename__ = "runs"
    # Every column Insights' grouped summary reads (`engine.store.aggregates`), so that adding
    # up a million runs reads this index, not the rows (migration 0012 adds it to older files).
    # And a protocol's runs of one kind in time order, for a sample (`RunReading.selecting`).
    __table_args__ = (Index("ix_runs_summary", "protocol", "status", "label", "simulated",
                            "degraded_run", "correct", "unanswered", "tokens_in", "tokens_out",
                            "duration", "cost_usd"),
                      Index("ix_runs_sample", "protocol", "simulated", "created_at", "id"),
                      # Every column Insights' opening answers add up (`answer_summary`).
                      Index("ix_runs_answers", *ANSWERS_INDEX))
    id: Mapped[str] = mapped_column(String(32), primary_key=True, info=IDENTIFIER)
    protocol: Mapped[str] = mapped_column(String(32), index=True, info={"rule": "protocol"})
    question: Mapped[str] = mapped_column(Text)
    expected: Mapped[str | None] = mapped_column(Text, nullable=True)
    config: Mapped[str] = mapped_column(Text, default="{}", info=JSON_OBJECT)
    label: Mapped[str | None] = mapped_column(String(200), index=True, nullable=True)
    tags: Mapped[str] = mapped_column(Text, default="[]", info={"json": "tags", "empty": []})
    status: Mapped[str] = mapped_column(String(16), index=True, info=STATUS)
    error: Mapped[str] = mapped_column(Text, default="", info=ERROR)
    result: Mapped[str] = mapped_column(Text, default="{}", info=JSON_OBJECT)
    metrics: Mapped[str] = mapped_column(Text, default="{}",
                                         info={**JSON_OBJECT, "rule": "metrics"})
    models: Mapped[str] = mapped_column(Text, default="")
    simulated: Mapped[bool] = mapped_column(Boolean, default=False)
    correct: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    # Given an expected answer, the run gave none: `correct` is then false (DESIGN 4).
    # Migration 0023 adds it to older databases.
    unanswered: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    calls: Mapped[int] = mapped_column(Integer, default=0)
    degraded: Mapped[int] = mapped_column(Integer, default=0)  # degraded turns
    # A completed run that lost a decisive call or most of its turns, and what it lost.
    degraded_run: Mapped[bool] = mapped_column(Boolean, default=False)
    lost: Mapped[str] = mapped_column(Text, default="")
    tokens_in: Mapped[int] = mapped_column(Integer, default=0)
    tokens_out: Mapped[int] = mapped_column(Integer, default=0)
    latency: Mapped[float] = mapped_column(Float, default=0.0)
    duration: Mapped[float] = mapped_column(Float, default=0.0)
    # US dollars, the sum of the turns' (engine.models.total_cost); NULL: unknown (unpriced)
    cost_usd: Mapped[float | None] = mapped_column(Float, nullable=True, info=MONEY)
    experiment_id: Mapped[str | None] = mapped_column(String(32), index=True, nullable=True,
                                                      info=IDENTIFIER)
    # Who started the run: a signed-in e-mail address, "local" (no sign-in), "cli:USER" (the
    # CLI, by operating-system user), an experiment's run who started the experiment, or ""
    # (not recorded: older runs). Migration 0016 adds it to older databases.
    started_by: Mapped[str] = mapped_column(String(200), default="", server_default="")
    # An imported run: who imported it and when (its `started_by` is then its file's claim);
    # "" and NULL for a run made here. Migration 0018 adds both to older databases.
    imported_by: Mapped[str] = mapped_column(String(200), default="", server_default="",
                                             info=NOT_FROM_FILES)
    imported_at: Mapped[datetime | None] = mapped_column(Moment, nullable=True,
                                                         info=NOT_FROM_FILES)
    host: Mapped[str] = mapped_column(String(200), default="")
    pid: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(Moment, index=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(Moment, nullable=True, index=True)
    finished_at: Mapped[datetime | None] = mapped_column(Moment, nullable=True, index=True)
    # The protocol-independent signals of a completed run, typed (`engine.store.signal_columns`
    # reads them off `metrics`; NULL where the protocol has none). Migration 0028 adds them to
    # older databases, filled from the stored metrics.
    seats: Mapped[int | None] = mapped_column(Integer, nullable=True, info=NOT_FROM_FILES)
    mind_changes: Mapped[int | None] = mapped_column(Integer, nullable=True, info=NOT_FROM_FILES)
    persuaded: Mapped[int | None] = mapped_column(Integer, nullable=True, info=NOT_FROM_FILES)
    misled: Mapped[int | None] = mapped_column(Integer, nullable=True, info=NOT_FROM_FILES)
    consensus: Mapped[float | None] = mapped_column(Float, nullable=True, info=NOT_FROM_FILES)
    tied: Mapped[bool | None] = mapped_column(Boolean, nullable=True, info=NOT_FROM_FILES)
    confidence_level: Mapped[str | None] = mapped_column(String(16), nullable=True,
                                                         info=NOT_FROM_FILES)
    judge_confidence: Mapped[float | None] = mapped_column(Float, nullable=True,
                                                           info=NOT_FROM_FILES)
    first_share: Mapped[float | None] = mapped_column(Float, nullable=True, info=NOT_FROM_FILES)


class TurnRow(Base):
    __tablename__ = "turns"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True,
                                    info=NOT_FROM_FILES)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True,
                                        info=NOT_FROM_FILES)
    idx: Mapped[int] = mapped_column(Integer)
    phase: Mapped[str] = mapped_column(String(40))
    round: Mapped[int] = mapped_column(Integer, default=0)
    seat: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(Text, default="")
    model: Mapped[str] = mapped_column(String(200), default="")
    messages: Mapped[str] = mapped_column(Text, default="[]",
                                          info={"json": "messages", "empty": []})
    reply: Mapped[str] = mapped_column(Text, default="")
    parsed: Mapped[str] = mapped_column(Text, default="{}", info=OPTIONAL_OBJECT)
    status: Mapped[str] = mapped_column(String(16), info=STATUS)
    error: Mapped[str] = mapped_column(Text, default="", info=ERROR)
    warnings: Mapped[str] = mapped_column(Text, default="[]",
                                          info={"json": "texts", "empty": [], **ERROR})
    latency: Mapped[float] = mapped_column(Float, default=0.0)
    tokens_in: Mapped[int] = mapped_column(Integer, default=0)
    tokens_out: Mapped[int] = mapped_column(Integer, default=0)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    simulated: Mapped[bool] = mapped_column(Boolean, default=False)
    started_at: Mapped[datetime] = mapped_column(Moment)
    finished_at: Mapped[datetime] = mapped_column(Moment)
    # A JSON call's path (constrained, json mode, prompted); NULL in rows stored before it.
    output_mode: Mapped[str | None] = mapped_column(String(16), nullable=True,
                                                    info={"null": ""})
    # US dollars (NULL: unpriced, so unknown); the tokens are an estimate when the provider
    # reported no usage (`usage_estimated`). Migration 0014 adds both to older databases.
    cost_usd: Mapped[float | None] = mapped_column(Float, nullable=True, info=MONEY)
    usage_estimated: Mapped[bool] = mapped_column(Boolean, default=False,
                                                  server_default=false())
    # The size in bytes of what the model sent when `reply` is a cut of it (NULL: stored
    # whole; engine.llm.sizes). Migration 0019 adds it to older databases.
    reply_bytes: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # What a degraded turn's failure is counted as (`engine.errors`: set where it was caught);
    # "" for a turn that succeeded, and for turns stored before migration 0036 (read as
    # unexplained).
    failure: Mapped[str] = mapped_column(String(64), default="", server_default="")


class LibraryRow(Base):
    """Personas and roles (kind = persona | role), and saved configurations (kind = config)."""

    __tablename__ = "library"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16), index=True)
    name: Mapped[str] = mapped_column(String(200))
    body: Mapped[str] = mapped_column(Text, default="{}")
    builtin: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[datetime] = mapped_column(Moment)


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
    # Who started (or last resumed) it, as a run's `started_by`; each of its runs records the
    # name its start had. Migration 0017 adds it to older databases ("": not recorded).
    started_by: Mapped[str] = mapped_column(String(200), default="", server_default="")
    # The version of its question set (`engine.store.versions.set_version`); migration
    # 0022 adds it to older databases, computed from each experiment's stored questions.
    set_version: Mapped[str] = mapped_column(String(16), default="", server_default="")
    created_at: Mapped[datetime] = mapped_column(Moment, index=True)
    started_at: Mapped[datetime | None] = mapped_column(Moment, nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(Moment, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(Moment, nullable=True)


class ApprovalRow(Base):
    """An approved baseline: the experiment a person approved as the one its name's later
    experiments are gated against (`engine.store.approvals`). The newest approval of a name
    is its baseline; earlier ones stay as its history."""

    __tablename__ = "approvals"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    experiment_id: Mapped[str] = mapped_column(
        ForeignKey("experiments.id", ondelete="CASCADE"), index=True)
    approved_by: Mapped[str] = mapped_column(String(200), default="")
    approved_at: Mapped[datetime] = mapped_column(Moment, index=True)


class FacetRow(Base):
    """A tag or model spec some stored run has, for the runs filters (`engine.store.facets`)."""

    __tablename__ = "run_facets"
    field: Mapped[str] = mapped_column("kind", String(16), primary_key=True)  # tag | model
    value: Mapped[str] = mapped_column(String(500), primary_key=True)


class SearchDocRow(Base):
    """One searchable text of a run: its question, a turn's reply or its final answer. Written
    and deleted by triggers on `runs` and `turns` (`engine.store.search_index`), read through
    the full-text index made beside it (FTS5 on SQLite, a tsvector on PostgreSQL)."""

    __tablename__ = "search_docs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(32), index=True)
    turn_id: Mapped[int | None] = mapped_column(Integer, index=True, nullable=True)
    source: Mapped[str] = mapped_column("kind", String(16))  # question | turn | answer
    body: Mapped[str] = mapped_column(Text, default="")


class WorkerRow(Base):
    """A worker process of the pool (`python -m engine worker`): where it runs, the
    endpoints it serves (empty: all) and its heartbeat."""

    __tablename__ = "workers"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    host: Mapped[str] = mapped_column(String(200), default="")
    pid: Mapped[int] = mapped_column(Integer, default=0)
    endpoints: Mapped[str] = mapped_column(Text, default="")
    concurrency: Mapped[int] = mapped_column(Integer, default=1)
    # No longer written: the cells a worker finished are counted from its runs
    # (`engine.store.workers.finished_by`); kept so older databases need no migration.
    cells_done: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[datetime] = mapped_column(Moment, index=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(Moment, nullable=True)
    stopped_at: Mapped[datetime | None] = mapped_column(Moment, nullable=True)


class EndpointLimitRow(Base):
    """One registered endpoint's shared rate state (`engine.store.limits`): the levels of its
    requests and tokens buckets (None: full), when they were last refilled and when its
    cool-down after a 429 ends, in seconds on the database's clock."""

    __tablename__ = "endpoint_limits"
    endpoint: Mapped[str] = mapped_column(String(64), primary_key=True)
    requests: Mapped[float | None] = mapped_column(Float, nullable=True)
    tokens: Mapped[float | None] = mapped_column(Float, nullable=True)
    stamp: Mapped[float] = mapped_column(Float, default=0.0)
    cool_until: Mapped[float] = mapped_column(Float, default=0.0)


class EndpointLeaseRow(Base):
    """A call in flight to an endpoint; it stops counting at `expires` (database clock, in
    seconds), so the calls of a killed process lapse."""

    __tablename__ = "endpoint_leases"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    endpoint: Mapped[str] = mapped_column(String(64), index=True)
    expires: Mapped[float] = mapped_column(Float)


class EndpointSupportRow(Base):
    """What one endpoint's server was found to support (`engine.store.support`): for `kind`
    "structured" the output mode its JSON calls take, for "grammar" whether it applies a GBNF
    grammar ("yes"/"no"); learned once by any process of the deployment, read by the rest."""

    __tablename__ = "endpoint_support"
    feature: Mapped[str] = mapped_column("kind", String(16), primary_key=True)
    base_url: Mapped[str] = mapped_column(String(1000), primary_key=True)
    model: Mapped[str] = mapped_column(String(300), primary_key=True)
    value: Mapped[str] = mapped_column(String(32))
    learned_at: Mapped[datetime] = mapped_column(Moment)


class PreferenceRow(Base):
    """A person's pairwise judgement of two runs' final answers (`engine.store.labels`):
    `choice` a | b | tie, and which run was shown on the left (`shown_left` a | b; NULL when
    they were not shown side by side). Deleted with either run."""

    __tablename__ = "preferences"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_a: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    run_b: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    shown_left: Mapped[str | None] = mapped_column(String(1), nullable=True)
    rater: Mapped[str] = mapped_column(String(200), index=True)
    choice: Mapped[str] = mapped_column(String(3))
    comment: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(Moment, index=True)
    # An imported label: who imported it and when ("" and NULL: judged here); its rater is
    # then the file's claim. Migration 0018 adds both to older databases.
    imported_by: Mapped[str] = mapped_column(String(200), default="", server_default="")
    imported_at: Mapped[datetime | None] = mapped_column(Moment, nullable=True)


class RatingRow(Base):
    """A person's 1-5 score of a run, or of one of its turns by index (`turn`; NULL: the
    whole run), with a comment. Deleted with its run."""

    __tablename__ = "ratings"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    turn: Mapped[int | None] = mapped_column(Integer, nullable=True)
    rater: Mapped[str] = mapped_column(String(200), index=True)
    score: Mapped[int] = mapped_column(Integer)
    comment: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(Moment, index=True)
    # An imported label: who imported it and when ("" and NULL: judged here); its rater is
    # then the file's claim. Migration 0018 adds both to older databases.
    imported_by: Mapped[str] = mapped_column(String(200), default="", server_default="")
    imported_at: Mapped[datetime | None] = mapped_column(Moment, nullable=True)


# One person's judgement counts once (DESIGN 4): one preference per rater and unordered pair
# of runs, one rating per rater and run or turn (NULL, the whole run, read as -1). Unique
# indexes on expressions, the same on SQLite and PostgreSQL; the store replaces a rater's
# earlier label (`engine.store.labels`), migration 0018 keeps the latest of older duplicates.
# (PostgreSQL takes an expression other than a call only in parentheses: `Grouping`.)
ONE_PREFERENCE = Index(
    "ux_preferences_one", PreferenceRow.rater,
    Grouping(case((PreferenceRow.run_a < PreferenceRow.run_b, PreferenceRow.run_a),
                  else_=PreferenceRow.run_b)),
    Grouping(case((PreferenceRow.run_a < PreferenceRow.run_b, PreferenceRow.run_b),
                  else_=PreferenceRow.run_a)), unique=True)
ONE_RATING = Index("ux_ratings_one", RatingRow.rater, RatingRow.run_id,
                   func.coalesce(RatingRow.turn, -1), unique=True)


class MigrationRow(Base):
    __tablename__ = "schema_migrations"
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    applied_at: Mapped[datetime] = mapped_column(Moment)


class BackfillRow(Base):
    """A back-fill of old rows that a migration left to the protocols' side (it needs their
    code: metrics, assessment, which protocols give an answer), by the migration's name;
    deleted once done (`engine.store.migrations.BACKFILLS`)."""

    __tablename__ = "backfills"
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    noted_at: Mapped[datetime] = mapped_column(Moment)


# --------------------------------------------------------------------------- opening
def sqlite_path(url: str) -> str | None:
    """The file a SQLite URL names (None for an in-memory database)."""
    database = make_url(url).database or ""
    if database.startswith("file:"):
        database = database[5:].split("?", 1)[0]
    return None if database in ("", ":memory:") or "mode=memory" in url else database


def sqlite_read_only(url: str, path: str | None) -> bool:
    """Asked for read-only (`?mode=ro`, `immutable=1`), or a file this user may not write
    (root may write anything; `Store` also falls back when a write is refused on open)."""
    query = make_url(url).query
    if query.get("mode") == "ro" or query.get("immutable") == "1":
        return True
    if path is None or not os.path.exists(path):
        return False
    folder = os.path.dirname(os.path.abspath(path))
    return not os.access(path, os.W_OK) or (
        not os.access(folder, os.W_OK) and not os.path.exists(path + "-wal"))


def read_only_url(url: str, path: str | None, immutable: bool = False) -> str:
    """The SQLite URI that opens `path` for reading only."""
    if path is None:
        return url
    flag = "immutable=1" if immutable else "mode=ro"
    return f"sqlite:///file:{os.path.abspath(path)}?{flag}&uri=true"


def engine(url: str, sqlite: bool, read_only: bool) -> Any:
    """A SQLAlchemy engine; SQLite connections get WAL and a busy timeout (read-only ones only
    the timeout: setting WAL is a write)."""
    if not sqlite:
        return create_engine(url)
    made = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
    event.listen(made, "connect", _sqlite_read_pragmas if read_only else _sqlite_pragmas)
    return made


def pg_read_only(bound: Any) -> bool:
    """A PostgreSQL session that may not write (read-only transactions, or no INSERT right on
    an existing runs table)."""
    with bound.connect() as connection:
        if connection.execute(text("SHOW transaction_read_only")).scalar() == "on":
            return True
        if connection.execute(text("SELECT to_regclass('runs') IS NULL")).scalar():
            return False
        return not connection.execute(text(
            "SELECT has_table_privilege(current_user, 'runs', 'INSERT')")).scalar()


# Reads map up to 256 MB of the file rather than copy each page in through a read call (and
# SQLite's 2 MB page cache): an experiment's 20,000 runs are 80 MB of pages, read again on each
# visit; a third of the CPU time of that read and, on a busy machine, most of its wall time.
MMAP_SIZE = 256 * 1024 * 1024


def _pragmas(*settings: str) -> Any:
    """A connect hook that sets `settings` (`PRAGMA setting`) on each new SQLite connection."""
    def apply(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        for setting in settings:
            cursor.execute(f"PRAGMA {setting}")
        cursor.close()
    return apply


_sqlite_read_pragmas = _pragmas("busy_timeout=30000", f"mmap_size={MMAP_SIZE}")
_sqlite_pragmas = _pragmas("journal_mode=WAL", "busy_timeout=30000", "synchronous=NORMAL",
                           "foreign_keys=ON", f"mmap_size={MMAP_SIZE}")
