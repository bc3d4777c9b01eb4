"""What the protocols hand the store, which knows none of them: a saved result's metrics and
assessment, the result types an import is checked against, and the back-fill of old rows that
migrations leave to the protocols' side.

The store sits below the protocols and never imports them; whoever holds the registry (this
module, above it) passes what the store needs as arguments. `open_store` is how the CLI, the
pages and the workers open a store: the migrations run as it opens, then the back-fills they
noted run here, with the registry (`Store.backfill`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from engine.models import RunResult
from engine.protocols import REGISTRY, get_protocol
from engine.store import Store
from engine.store.transfer import ImportReport


def result_types() -> dict[str, type[Any]]:
    """Each protocol's result type, by name: what an import's runs are checked against."""
    return {name: spec.result_type for name, spec in REGISTRY.items()}


def backfill(store: Any) -> list[str]:
    """Do the back-fills of old rows the store's migrations left to the protocols (their
    metrics, assessment, which of them give an answer); returns their names."""
    return list(store.backfill(REGISTRY))


def open_store(url: str | None = None) -> Store:
    """A store at `url` (`Store`'s default without one), migrated and back-filled."""
    store = Store(url)
    backfill(store)
    return store


def save_result(store: Any, result: RunResult, label: str | None = None,
                tags: Iterable[str] = (), config: Mapping[str, Any] | None = None) -> str:
    """Store a finished result (or relabel one already stored) with what its protocol makes
    of it (metrics, error, what it lost: `Store.save`); returns the run id."""
    spec = get_protocol(result.protocol)
    error, lost = spec.assess(result)
    return str(store.save(result, label, tags, config,
                          assessed=(spec.metrics(result), error, lost)))


def import_file(store: Any, data: str | bytes, *, imported_by: str = "") -> ImportReport:
    """`Store.import_file` checked against the protocols Parley runs."""
    report: ImportReport = store.import_file(data, results=result_types(),
                                             imported_by=imported_by)
    return report


def import_runs(store: Any, data: str | bytes, *, imported_by: str = "") -> list[str]:
    """`Store.import_runs` checked against the protocols Parley runs: the ids added."""
    return list(store.import_runs(data, results=result_types(), imported_by=imported_by))
