"""Each table as the migration that creates it first shipped it, frozen.

`engine.store.schema` says what the tables are now; a migration must not read it to create a
table, or a database made from the first migration up would hold today's columns before the
later migrations that add them run. So the migrations that create tables create these, on a
metadata of their own, and every later change is a migration of its own
(`engine.store.migrations`); a test builds a database both ways and compares them
(tests/test_migrations_frozen.py).

Only columns and indexes live here (defaults on the Python side are the ORM's business).
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

SHIPPED = MetaData()


def _moment(name: str, nullable: bool = False, index: bool = False) -> Column[Any]:
    return Column(name, DateTime(timezone=True), nullable=nullable, index=index)


def _text(name: str) -> Column[Any]:
    return Column(name, Text, nullable=False)


# 0001_runs_and_turns
RUNS = Table(
    "runs", SHIPPED,
    Column("id", String(32), primary_key=True),
    Column("protocol", String(32), nullable=False, index=True),
    _text("question"),
    Column("expected", Text, nullable=True),
    _text("config"),
    Column("label", String(200), nullable=True, index=True),
    _text("tags"),
    Column("status", String(16), nullable=False, index=True),
    _text("error"),
    _text("result"),
    _text("metrics"),
    _text("models"),
    Column("simulated", Boolean, nullable=False),
    Column("correct", Boolean, nullable=True),
    Column("calls", Integer, nullable=False),
    Column("degraded", Integer, nullable=False),
    Column("tokens_in", Integer, nullable=False),
    Column("tokens_out", Integer, nullable=False),
    Column("latency", Float, nullable=False),
    Column("duration", Float, nullable=False),
    Column("experiment_id", String(32), nullable=True, index=True),
    Column("host", String(200), nullable=False),
    Column("pid", Integer, nullable=False),
    _moment("created_at", index=True),
    _moment("heartbeat_at", nullable=True),
    _moment("finished_at", nullable=True),
)

TURNS = Table(
    "turns", SHIPPED,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False,
           index=True),
    Column("idx", Integer, nullable=False),
    Column("phase", String(40), nullable=False),
    Column("round", Integer, nullable=False),
    Column("seat", String(200), nullable=False),
    _text("role"),
    Column("model", String(200), nullable=False),
    _text("messages"),
    _text("reply"),
    _text("parsed"),
    Column("status", String(16), nullable=False),
    _text("error"),
    _text("warnings"),
    Column("latency", Float, nullable=False),
    Column("tokens_in", Integer, nullable=False),
    Column("tokens_out", Integer, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("simulated", Boolean, nullable=False),
    _moment("started_at"),
    _moment("finished_at"),
)

# 0002_library
LIBRARY = Table(
    "library", SHIPPED,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(16), nullable=False, index=True),
    Column("name", String(200), nullable=False),
    _text("body"),
    Column("builtin", Boolean, nullable=False),
    _moment("updated_at"),
)

# 0003_experiments
EXPERIMENTS = Table(
    "experiments", SHIPPED,
    Column("id", String(32), primary_key=True),
    Column("name", String(200), nullable=False),
    _text("spec"),
    Column("status", String(16), nullable=False, index=True),
    _text("error"),
    Column("total", Integer, nullable=False),
    Column("host", String(200), nullable=False),
    Column("pid", Integer, nullable=False),
    _moment("created_at", index=True),
    _moment("started_at", nullable=True),
    _moment("heartbeat_at", nullable=True),
    _moment("finished_at", nullable=True),
)

# 0008_workers
WORKERS = Table(
    "workers", SHIPPED,
    Column("id", String(32), primary_key=True),
    Column("host", String(200), nullable=False),
    Column("pid", Integer, nullable=False),
    _text("endpoints"),
    Column("concurrency", Integer, nullable=False),
    Column("cells_done", Integer, nullable=False),
    _moment("started_at", index=True),
    _moment("heartbeat_at", nullable=True),
    _moment("stopped_at", nullable=True),
)

# 0009_endpoint_limits
ENDPOINT_LIMITS = Table(
    "endpoint_limits", SHIPPED,
    Column("endpoint", String(64), primary_key=True),
    Column("requests", Float, nullable=True),
    Column("tokens", Float, nullable=True),
    Column("stamp", Float, nullable=False),
    Column("cool_until", Float, nullable=False),
)

ENDPOINT_LEASES = Table(
    "endpoint_leases", SHIPPED,
    Column("id", String(32), primary_key=True),
    Column("endpoint", String(64), nullable=False, index=True),
    Column("expires", Float, nullable=False),
)

# 0013_run_facets
RUN_FACETS = Table(
    "run_facets", SHIPPED,
    Column("kind", String(16), primary_key=True),
    Column("value", String(500), primary_key=True),
)

# 0015_labels
PREFERENCES = Table(
    "preferences", SHIPPED,
    Column("id", String(32), primary_key=True),
    Column("run_a", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False,
           index=True),
    Column("run_b", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False,
           index=True),
    Column("shown_left", String(1), nullable=True),
    Column("rater", String(200), nullable=False, index=True),
    Column("choice", String(3), nullable=False),
    _text("comment"),
    _moment("created_at", index=True),
)

RATINGS = Table(
    "ratings", SHIPPED,
    Column("id", String(32), primary_key=True),
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False,
           index=True),
    Column("turn", Integer, nullable=True),
    Column("rater", String(200), nullable=False, index=True),
    Column("score", Integer, nullable=False),
    _text("comment"),
    _moment("created_at", index=True),
)

# 0021_endpoint_support
ENDPOINT_SUPPORT = Table(
    "endpoint_support", SHIPPED,
    Column("kind", String(16), primary_key=True),
    Column("base_url", String(1000), primary_key=True),
    Column("model", String(300), primary_key=True),
    Column("value", String(32), nullable=False),
    _moment("learned_at"),
)

# 0022_set_version
APPROVALS = Table(
    "approvals", SHIPPED,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False, index=True),
    Column("experiment_id", String(32), ForeignKey("experiments.id", ondelete="CASCADE"),
           nullable=False, index=True),
    Column("approved_by", String(200), nullable=False),
    _moment("approved_at", index=True),
)

# 0026_backfills
BACKFILLS = Table(
    "backfills", SHIPPED,
    Column("name", String(100), primary_key=True),
    _moment("noted_at"),
)
