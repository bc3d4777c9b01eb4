"""Statements several parts of the store share: inserting and updating turns, the heartbeat,
and ending a run. Built once: statements with bound parameters compile once and are cached."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from sqlalchemy import Connection, Table, bindparam, or_, select, update

from engine.models import now
from engine.store.records import error_text, seconds, totals
from engine.store.schema import (
    BackfillRow,
    ExperimentRow,
    LibraryRow,
    MigrationRow,
    RunRow,
    TurnRow,
)

# The mapped classes' tables, typed as tables (SQLAlchemy types `__table__` as any FROM).
RUNS = cast(Table, RunRow.__table__)
TURNS = cast(Table, TurnRow.__table__)
LIBRARY = cast(Table, LibraryRow.__table__)
EXPERIMENTS = cast(Table, ExperimentRow.__table__)
MIGRATION_LOG = cast(Table, MigrationRow.__table__)
BACKFILL_LOG = cast(Table, BackfillRow.__table__)  # back-fills left to the protocols
INSERT_TURN = TURNS.insert()
INSERT_RUN = RUNS.insert()
# A `running` run's end: the columns come as parameters (`rid` names the run); a run is
# simulated once any of its turns is (`any_simulated`), or when it started so.
FINISH_RUN = update(RUNS).where(RUNS.c.id == bindparam("rid"), RUNS.c.status == "running").values(
    simulated=or_(RUNS.c.simulated, bindparam("any_simulated")))
# The heartbeat of the `running` runs among `ids` (a list): its row count says whether one of
# them was ended elsewhere.
HEARTBEATS = update(RUNS).where(RUNS.c.id.in_(bindparam("ids", expanding=True)),
                                RUNS.c.status == "running").values(heartbeat_at=bindparam("at"))
UPDATE_TURN = update(TURNS).where(TURNS.c.run_id == bindparam("rid"),
                                  TURNS.c.idx == bindparam("i")).values(
    parsed=bindparam("parsed"), warnings=bindparam("warnings"), status=bindparam("status"),
    error=bindparam("error"))


def present(connection: Connection, column: Any, values: Iterable[Any]) -> set[Any]:
    """Those of `values` that `column` holds, asked 500 at a time (a bound list per query)."""
    wanted = sorted(set(values))
    found: set[Any] = set()
    for start in range(0, len(wanted), 500):
        found |= set(connection.execute(select(column).where(
            column.in_(wanted[start:start + 500]))).scalars())
    return found


def end_run_row(connection: Connection, run_id: str, status: str, error: str) -> int:
    """End a `running` run (never one already ended or deleted); returns rows changed."""
    changed = connection.execute(update(RUNS).where(
        RUNS.c.id == run_id, RUNS.c.status == "running").values(
        status=status, error=error_text(error)[:2000], finished_at=now())).rowcount
    if changed:
        count_turns(connection, run_id)
    return changed


def count_turns(connection: Any, run_id: str) -> None:
    """Set a run's totals from its stored turns (`engine.store.records.totals`) and its
    `duration` (first call's start to last call's end), so that a stopped or failed run
    shows what it did spend."""
    rows = connection.execute(select(
        TURNS.c.status, TURNS.c.tokens_in, TURNS.c.tokens_out, TURNS.c.latency,
        TURNS.c.started_at, TURNS.c.finished_at, TURNS.c.cost_usd).where(
        TURNS.c.run_id == run_id)).all()
    starts = [r.started_at for r in rows if r.started_at is not None]
    ends = [r.finished_at for r in rows if r.finished_at is not None]
    span = (max(ends) - min(starts)).total_seconds() if starts and ends else 0.0
    connection.execute(update(RUNS).where(RUNS.c.id == run_id).values(
        **totals(rows), duration=seconds(span)))
