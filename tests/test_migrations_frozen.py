"""Migration 0001 creates the tables as they first shipped and every later change is a
migration of its own: a database built from 0001 up holds exactly the schema today's code
describes (`Base.metadata.create_all`, and the search index beside it): the same tables,
columns, types, nullability, keys and indexes, on SQLite and on PostgreSQL."""
from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import applied_migrations, fresh_pg_url
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.types import NullType

from engine import Store
from engine.store import shipped as frozen
from engine.store.migrations import MIGRATIONS
from engine.store.schema import Base
from engine.store.search_index import create_index


def _index_sql(sql: str) -> str:
    """An index's definition without what only spelling changes: quotes, spaces, case and
    `IF NOT EXISTS`."""
    sql = re.sub(r"(?i)\s+if\s+not\s+exists\s+", " ", sql)
    return re.sub(r"\s+", " ", sql.replace('"', "").replace("`", "")).strip().lower()


def _indexes(connection: Any) -> dict[str, str]:
    """Every index of the database by name, with its definition as the database states it
    (expression indexes included, which the inspector leaves out)."""
    if connection.dialect.name == "sqlite":
        rows = connection.execute(text(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"))
    else:
        rows = connection.execute(text(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"))
    return {name: _index_sql(sql) for name, sql in rows}


def _type(kind: Any, dialect: Any) -> str:
    """A reflected column type as its DDL ("" for a column of no type: a full-text table's)."""
    return "" if isinstance(kind, NullType) else str(kind.compile(dialect)).upper()


def schema(url: str) -> dict[str, Any]:
    """The tables of the database at `url`: per table its columns (type, nullability), its
    primary key and its foreign keys; and every index."""
    bound = create_engine(url)
    try:
        with bound.connect() as connection:
            inspector = inspect(connection)
            tables = {}
            for name in sorted(inspector.get_table_names()):
                columns = {c["name"]: (_type(c["type"], connection.dialect), c["nullable"])
                           for c in inspector.get_columns(name)}
                keys = sorted(
                    (tuple(fk["constrained_columns"]), fk["referred_table"],
                     tuple(fk["referred_columns"]), (fk.get("options") or {}).get("ondelete"))
                    for fk in inspector.get_foreign_keys(name))
                primary = tuple(inspector.get_pk_constraint(name)["constrained_columns"])
                tables[name] = {"columns": columns, "primary key": primary,
                                "foreign keys": keys}
            return {"tables": tables, "indexes": _indexes(connection)}
    finally:
        bound.dispose()


def todays(url: str) -> None:
    """The schema as today's code describes it, made in one step."""
    bound = create_engine(url)
    with bound.begin() as connection:
        Base.metadata.create_all(connection)
        create_index(connection)
    bound.dispose()


def _fresh(backend: str, tmp_path, name: str) -> str:
    return f"sqlite:///{tmp_path / name}" if backend == "sqlite" else fresh_pg_url()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_store_built_from_0001_up_has_todays_schema(backend, tmp_path):
    url = _fresh(backend, tmp_path, "migrated.db")
    store = Store(url)
    assert applied_migrations(store) == sorted(name for name, _ in MIGRATIONS)
    store.close()
    migrated = schema(url)
    url = _fresh(backend, tmp_path, "today.db")  # on PostgreSQL: the same database, emptied
    todays(url)
    made = schema(url)
    migrated["tables"].pop("schema_migrations")  # the log: written by `Store.migrate` alone
    made["tables"].pop("schema_migrations")
    assert set(migrated["tables"]) == set(made["tables"])
    for table in made["tables"]:
        assert migrated["tables"][table] == made["tables"][table], table
    assert migrated["indexes"] == made["indexes"]


def test_0001_creates_the_runs_and_turns_that_first_shipped(tmp_path):
    """Migration 0001 alone makes the first store's runs and turns (the engine's foundation)
    and no more: a column added since is a later migration's, never 0001's."""
    bound = create_engine(f"sqlite:///{tmp_path / 'first.db'}")
    name, apply = MIGRATIONS[0]
    with bound.begin() as connection:
        apply(connection)
        inspector = inspect(connection)
        assert sorted(inspector.get_table_names()) == ["runs", "turns"]
        runs = [c["name"] for c in inspector.get_columns("runs")]
        turns = [c["name"] for c in inspector.get_columns("turns")]
    bound.dispose()
    assert name == "0001_runs_and_turns"
    assert runs == [
        "id", "protocol", "question", "expected", "config", "label", "tags", "status", "error",
        "result", "metrics", "models", "simulated", "correct", "calls", "degraded",
        "tokens_in", "tokens_out", "latency", "duration", "experiment_id", "host", "pid",
        "created_at", "heartbeat_at", "finished_at"]
    assert turns == [
        "id", "run_id", "idx", "phase", "round", "seat", "role", "model", "messages", "reply",
        "parsed", "status", "error", "warnings", "latency", "tokens_in", "tokens_out",
        "attempts", "simulated", "started_at", "finished_at"]
    assert len(frozen.SHIPPED.tables) == 13  # every table a migration creates, as it shipped


def test_the_comparison_sees_a_column_or_an_index_that_differs(tmp_path):
    """The comparison can fail: a database that lacks one column, or one index, of today's
    schema compares unequal."""
    today = f"sqlite:///{tmp_path / 'today.db'}"
    todays(today)
    made = schema(today)
    for change in ("ALTER TABLE turns DROP COLUMN reply_bytes", "DROP INDEX ix_runs_sample"):
        url = f"sqlite:///{tmp_path / 'changed.db'}"
        todays(url)
        bound = create_engine(url)
        with bound.begin() as connection:
            connection.execute(text(change))
        bound.dispose()
        assert schema(url) != made, change
        (tmp_path / "changed.db").unlink()
