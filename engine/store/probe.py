"""Measuring what reads cost the database: for benchmarks, never used by the app.

`reads(store, poll)` lists the SELECT statements `poll` sends through the store, then runs
them again on a raw connection and counts the rows and bytes the database hands back (every
value's UTF-8 length; 8 bytes a number; nothing for NULL).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event

from engine.store.database import Database


@dataclass(frozen=True)
class Reads:
    """What one call read: statements sent, rows and bytes returned."""

    statements: int
    rows: int
    bytes: int


def _size(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    return 8


def reads(store: Database, poll: Callable[[], Any]) -> Reads:
    """The statements, rows and bytes of the SELECTs `poll` sends through `store`."""
    sent: list[tuple[str, Any]] = []

    def keep(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            sent.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", keep)
    try:
        poll()
    finally:
        event.remove(store.engine, "before_cursor_execute", keep)
    rows = size = 0
    raw = store.engine.raw_connection()
    try:
        cursor = raw.cursor()
        for statement, parameters in sent:
            cursor.execute(statement, parameters)
            for fetched in cursor.fetchall():
                rows += 1
                size += sum(_size(v) for v in fetched)
    finally:
        raw.close()
    return Reads(len(sent), rows, size)
