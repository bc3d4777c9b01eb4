"""What each endpoint's server supports, kept for every process of the deployment.

Detecting an endpoint's structured-output mode (`engine.llm.structured`) or whether it applies
a grammar (`engine.llm.lines`) costs requests, and the first calls of a process wait on it; a
new worker, CLI run or app server reads what another process learned instead. One row per
(kind, base URL, model). The rule between values (a mode found refused stays refused) is the
caller's: this module reads and writes rows.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

from sqlalchemy import Table, select
from sqlalchemy.dialects import postgresql, sqlite

from engine.models import now
from engine.store.schema import EndpointSupportRow

if TYPE_CHECKING:
    from engine.store.database import Database

SUPPORT = cast(Table, EndpointSupportRow.__table__)
URL_MAX, MODEL_MAX = 1000, 300  # a longer key is not kept (it is learned again instead)


def _fits(base_url: str, model: str) -> bool:
    return len(base_url) <= URL_MAX and len(model) <= MODEL_MAX


def learned(store: Database, feature: str, base_url: str, model: str) -> str | None:
    """The value stored for `feature` at (`base_url`, `model`), or None when none is."""
    if not _fits(base_url, model):
        return None
    with store.reading() as connection:
        value: str | None = connection.execute(select(SUPPORT.c.value).where(
            SUPPORT.c.kind == feature, SUPPORT.c.base_url == base_url,
            SUPPORT.c.model == model)).scalar_one_or_none()
    return value


def learn(store: Database, feature: str, base_url: str, model: str, value: str) -> None:
    """Store `value` for `feature` at (`base_url`, `model`), replacing what was there."""
    if not _fits(base_url, model):
        return
    dialect = postgresql if store.engine.dialect.name == "postgresql" else sqlite
    row = {"kind": feature, "base_url": base_url, "model": model, "value": value,
           "learned_at": now()}
    statement = dialect.insert(SUPPORT).values(**row)
    with store.writing() as connection:
        connection.execute(statement.on_conflict_do_update(
            index_elements=["kind", "base_url", "model"],
            set_={"value": value, "learned_at": row["learned_at"]}))
