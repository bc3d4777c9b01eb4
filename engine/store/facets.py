"""The values the runs filters can offer (tags and model specs), kept apart as they are seen.

Reading them from the runs (`SELECT DISTINCT tags, models`) reads every row: 0.4 s at 100,000
runs, seconds at a million, on every visit of the Runs and Insights pages. So each run's tags
and model specs are added to `run_facets` when the run is written (started, saved, imported,
tagged, or bulk-loaded), one row per distinct value, and the filters read that small table.
A value stays offered after the last run holding it is deleted (its filter then matches no
run); the per-run tags that name a cell or a re-run's source are never offered, nor kept.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from engine.store.readback import decode_tags
from engine.store.schema import FacetRow

# Tags every run carries its own of (an experiment's cell, a re-run's source): no filter.
INTERNAL_TAGS = ("cell:", "rerun-of:")


def values_of(tags: Any, models: Any) -> set[tuple[str, str]]:
    """The (kind, value) facets of one run: each tag a filter may offer (a list, or its JSON
    text) and each model spec of its comma-joined `models`."""
    if isinstance(tags, str):
        tags = decode_tags(tags)
    found = {("tag", t) for t in (tags if isinstance(tags, list) else [])
             if isinstance(t, str) and t and not t.startswith(INTERNAL_TAGS)}
    found |= {("model", m) for m in str(models or "").split(",") if m}
    return {(field, value[:500]) for field, value in found}


def record(connection: Connection, runs: Iterable[Mapping[str, Any]]) -> None:
    """Add the facets of `runs` (mappings with `tags` and `models`) that are not kept yet."""
    found: set[tuple[str, str]] = set()
    for run in runs:
        found |= values_of(run.get("tags"), run.get("models"))
    if not found:
        return
    insert = pg_insert if connection.dialect.name == "postgresql" else sqlite_insert
    rows = [{"kind": field, "value": value} for field, value in sorted(found)]
    connection.execute(insert(FacetRow).on_conflict_do_nothing(), rows)


def read(connection: Connection) -> dict[str, list[str]]:
    """Every kept value, by kind ("tag", "model"), sorted."""
    out: dict[str, list[str]] = {"tag": [], "model": []}
    for field, value in connection.execute(select(FacetRow.field, FacetRow.value)
                                           .order_by(FacetRow.field, FacetRow.value)):
        out.setdefault(field, []).append(value)
    return out
