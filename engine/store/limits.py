"""Endpoint limits every process shares on PostgreSQL: the rows behind `engine.llm.limits`
(and `LocalLimits`, the state a process keeps itself where the database does not share it).

An endpoint has one row (`endpoint_limits`: its requests and tokens buckets and its cool-down
after a 429) read and written under `SELECT ... FOR UPDATE`, so processes on any machine take
turns at it; each call in flight holds a lease (`endpoint_leases`) that stops counting at its
expiry, so the calls of a killed process lapse on their own. Times are seconds on the
database's clock, which every machine shares. The arithmetic is the caller's: this module only
reads the state under the lock, hands it over, and writes back what the caller changed.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast

from sqlalchemy import Table, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert

from engine.models import LimitState
from engine.store.schema import EndpointLeaseRow, EndpointLimitRow

if TYPE_CHECKING:
    from engine.store.database import Database

LIMITS = cast(Table, EndpointLimitRow.__table__)
LEASES = cast(Table, EndpointLeaseRow.__table__)
T = TypeVar("T")


def shared(store: Database | None) -> bool:
    """True when `store` is on PostgreSQL, where limits are kept in the database."""
    return store is not None and store.engine.dialect.name == "postgresql"


def change(store: Database, endpoint: str, decide: Callable[[LimitState], T]) -> T:
    """Lock `endpoint`'s row (made on first use), drop its lapsed leases, hand its state to
    `decide`, write back what `decide` changed (and the lease it asked for) in the same
    transaction, and return what `decide` returned."""
    with store.writing() as connection:
        connection.execute(insert(LIMITS).values(endpoint=endpoint, stamp=0.0, cool_until=0.0)
                           .on_conflict_do_nothing(index_elements=["endpoint"]))
        row = connection.execute(select(LIMITS).where(LIMITS.c.endpoint == endpoint)
                                 .with_for_update()).one()
        clock = float(connection.execute(
            select(func.extract("epoch", func.clock_timestamp()))).scalar_one())
        connection.execute(delete(LEASES).where(LEASES.c.endpoint == endpoint,
                                                LEASES.c.expires < clock))
        in_flight = connection.execute(select(func.count()).select_from(LEASES).where(
            LEASES.c.endpoint == endpoint)).scalar_one()
        state = LimitState(clock, row.requests, row.tokens, row.stamp, row.cool_until,
                           int(in_flight))
        result = decide(state)
        connection.execute(update(LIMITS).where(LIMITS.c.endpoint == endpoint).values(
            requests=state.requests, tokens=state.tokens, stamp=state.stamp,
            cool_until=state.cool_until))
        if state.lease is not None:
            lease_id, seconds = state.lease
            connection.execute(LEASES.insert().values(id=lease_id, endpoint=endpoint,
                                                      expires=clock + seconds))
    return result


def end_lease(store: Database, lease_id: str) -> None:
    """Drop a call's lease: the call is over."""
    with store.writing() as connection:
        connection.execute(delete(LEASES).where(LEASES.c.id == lease_id))
