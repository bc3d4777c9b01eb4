"""The library: saved personas, roles and run configurations, by kind and unique name."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete, select, update

from engine.models import ConfigError, now
from engine.store import readback, records
from engine.store.database import Database
from engine.store.schema import LibraryRow
from engine.store.statements import LIBRARY

CONFIG = "config"  # the library kind of a saved run configuration


class Library(Database):
    """The store's library entries (a part of `Store`)."""

    def library(self, kind: str) -> list[dict[str, Any]]:
        """A kind's library entries by name (an entry whose body cannot be read says so in
        `unreadable`)."""
        with self.engine.connect() as connection:
            rows = connection.execute(select(LibraryRow.__table__).where(
                LibraryRow.kind == kind).order_by(LibraryRow.name)).mappings().all()
        out = []
        for row in rows:
            body, why = readback.decode(row["body"], dict, {})
            entry = {"id": row["id"], "name": row["name"], "builtin": bool(row["builtin"]),
                     **{k: v for k, v in body.items() if k not in ("id", "name", "builtin")}}
            if why:
                entry["unreadable"] = f"body {why}"
            out.append(entry)
        return out

    def put_library(self, kind: str, name: str, body: Mapping[str, Any],
                    item_id: int | None = None, builtin: bool = False) -> int:
        """Create or replace a library entry; names are unique within a kind."""
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"a {kind} needs a name", "input")
        item = records.library_item(kind, name, body)
        with self.writing() as connection:
            clash = connection.execute(select(LibraryRow.id).where(
                LibraryRow.kind == kind, LibraryRow.name == item.name)).scalar()
            if clash is not None and clash != item_id:
                raise ConfigError(f"a {kind} named {item.name!r} already exists", "input")
            values = {"name": item.name, "body": json.dumps(item.body, ensure_ascii=False),
                      "updated_at": now()}
            if item_id is not None and connection.execute(
                    update(LibraryRow).where(LibraryRow.id == item_id)
                    .values(**values)).rowcount:
                return item_id
            return int(connection.execute(LIBRARY.insert().values(
                kind=kind, builtin=builtin, **values)).inserted_primary_key[0])

    def delete_library(self, item_id: int) -> None:
        """Delete one library entry."""
        with self.writing() as connection:
            connection.execute(delete(LibraryRow).where(LibraryRow.id == item_id))

    def saved_config(self, label: str) -> dict[str, Any]:
        """The run configuration saved as `label` (its body, labelled), ready for a run;
        `ConfigError` when there is none."""
        found: dict[str, Any] | None = next(
            (s["config"] for s in self.saved_configs() if s["label"] == label), None)
        if found is None:
            raise ConfigError(f"no saved configuration named {label!r}", "input")
        return found

    def saved_configs(self) -> list[dict[str, Any]]:
        """Every saved run configuration, each as `{"id", "label", "config"}` (`config`: its
        body, labelled, as a run takes it)."""
        return [{"id": r["id"], "label": r["name"], "config": {
            **{k: v for k, v in r.items() if k not in ("id", "name", "builtin")},
            "label": r["name"]}} for r in self.library(CONFIG)]
