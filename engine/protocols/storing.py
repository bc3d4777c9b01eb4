"""What the protocols hand the store, which knows none of them: a saved result's metrics and
assessment, the result types an import is checked against, and the back-fill of old rows that
migrations leave to the protocols' side.

The store sits below the protocols and never imports them; whoever holds the registry (this
module, above it) passes what the store needs as arguments. `Store` here is the store the
public API names (`from engine import Store`, DESIGN 4): the store composed with the
registry, so that opening one runs the migrations and then the back-fills they noted
(`Store.backfill`), and an import is checked against the protocols' result types unless the
caller hands its own. It is how the CLI, the pages and the workers open one.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engine.models import RunResult
from engine.protocols import REGISTRY, get_protocol
from engine.store import Store as BaseStore
from engine.store.transfer import ImportReport


def result_types() -> dict[str, type[Any]]:
    """Each protocol's result type, by name: what an import's runs are checked against."""
    return {name: spec.result_type for name, spec in REGISTRY.items()}


class Store(BaseStore):
    """The store with the protocols' side attached: migrated and back-filled as it opens;
    `import_runs` and `import_file` check runs against every protocol's result type when
    no `results` are given."""

    def __init__(self, url: str | None = None):
        super().__init__(url)
        self.backfill(REGISTRY)

    def save(self, result: RunResult, label: str | None = None, tags: Iterable[str] = (),
             config: Mapping[str, Any] | None = None, *,
             assessed: tuple[Mapping[str, Any], str, Sequence[str]] | None = None) -> str:
        """`Store.save`; a result no run finished here (read back, built by hand) is
        assessed by its protocol's registry entry."""
        if assessed is None and not (result.run_id and self.exists(result.run_id)):
            assessed = result.assessment()
            if assessed is None:
                spec = get_protocol(result.protocol)
                error, lost = spec.assess(result)
                assessed = (spec.metrics(result), error, lost)
        return super().save(result, label, tags, config, assessed=assessed)

    def import_file(self, data: str | bytes, *, results: Mapping[str, type[Any]] | None = None,
                    imported_by: str = "") -> ImportReport:
        return super().import_file(data, results=result_types() if results is None else results,
                                   imported_by=imported_by)

    def import_runs(self, data: str | bytes, *, results: Mapping[str, type[Any]] | None = None,
                    imported_by: str = "") -> list[str]:
        return super().import_runs(data, results=result_types() if results is None else results,
                                   imported_by=imported_by)

