"""Measured call latency: the median seconds per call of a model's recent ok turns.

The preflight's time estimate rests on it (`engine.reports.timing`), never on a made-up
figure: a model with no ok turn stored has no measurement. "Recent" is bounded twice, so the
query stays cheap on a large store without an index on `turns.model`: the last `RECENT`
ok turns of the model among the last `WINDOW` turns stored (a range on the primary key).
"""
from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func, select

from engine.store.schema import TurnRow

if TYPE_CHECKING:
    from engine.store.database import Database

RECENT = 50  # ok turns a median is taken over
WINDOW = 20_000  # the most recent turns stored that are searched for them


@dataclass(frozen=True)
class Measured:
    """A model's measured pace: the median seconds per ok call over its last `calls` calls."""

    model: str
    median: float
    calls: int


def measured_latency(store: Database, models: Iterable[str], recent: int = RECENT,
                     window: int = WINDOW) -> dict[str, Measured]:
    """The median latency of each model's last `recent` ok turns (by the model spec a turn
    records), for the models that have any among the last `window` turns stored; a model
    with none is absent from the result."""
    wanted = [m for m in dict.fromkeys(models) if m]
    out: dict[str, Measured] = {}
    if not wanted:
        return out
    with store.engine.connect() as connection:
        last = connection.execute(select(func.max(TurnRow.id))).scalar()
        if last is None:
            return out
        for model in wanted:
            rows = connection.execute(
                select(TurnRow.latency)
                .where(TurnRow.id > last - window, TurnRow.model == model,
                       TurnRow.status == "ok")
                .order_by(TurnRow.id.desc()).limit(recent)).scalars().all()
            if rows:
                out[model] = Measured(model, float(statistics.median(rows)), len(rows))
    return out
