"""Statements several parts of the store share: inserting and updating turns, the heartbeat,
and ending a run. Built once: statements with bound parameters compile once and are cached."""
from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table, bindparam, func, select, update

from engine.models import now
from engine.store.schema import ExperimentRow, LibraryRow, MigrationRow, RunRow, TurnRow
from engine.text import clean_text

# The mapped classes' tables, typed as tables (SQLAlchemy types `__table__` as any FROM).
RUNS = cast(Table, RunRow.__table__)
TURNS = cast(Table, TurnRow.__table__)
LIBRARY = cast(Table, LibraryRow.__table__)
EXPERIMENTS = cast(Table, ExperimentRow.__table__)
MIGRATION_LOG = cast(Table, MigrationRow.__table__)
INSERT_TURN = TURNS.insert()
HEARTBEAT = update(RUNS).where(RUNS.c.id == bindparam("rid"),
                               RUNS.c.status == "running").values(heartbeat_at=bindparam("at"))
UPDATE_TURN = update(TURNS).where(TURNS.c.run_id == bindparam("rid"),
                                  TURNS.c.idx == bindparam("i")).values(
    parsed=bindparam("parsed"), warnings=bindparam("warnings"), status=bindparam("status"),
    error=bindparam("error"))


def end_run_row(connection: Any, run_id: str, status: str, error: str) -> int:
    """End a `running` run (never one already ended or deleted); returns rows changed."""
    changed = connection.execute(update(RUNS).where(
        RUNS.c.id == run_id, RUNS.c.status == "running").values(
        status=status, error=clean_text(error)[:2000], finished_at=now())).rowcount
    if changed:
        count_turns(connection, run_id)
    return changed


def count_turns(connection: Any, run_id: str) -> None:
    """Set a run's `calls` and `degraded` from its stored turns."""
    counts = connection.execute(select(func.count(), func.count().filter(
        TURNS.c.status != "ok")).where(TURNS.c.run_id == run_id)).one()
    connection.execute(update(RUNS).where(RUNS.c.id == run_id).values(
        calls=counts[0], degraded=counts[1]))
