"""The store: every query Parley makes, on SQLite (WAL) or PostgreSQL through SQLAlchemy 2."""
from engine.store.database import DEFAULT_URL, StoreWriteError
from engine.store.liveness import STALE_AFTER
from engine.store.migrations import MIGRATIONS
from engine.store.reading import RunFilters
from engine.store.records import strip_secrets
from engine.store.runs import STATUSES, Recorder
from engine.store.schema import (
    Base,
    ExperimentRow,
    LibraryRow,
    MigrationRow,
    RunRow,
    TurnRow,
)
from engine.store.store import Store

__all__ = ["strip_secrets", "DEFAULT_URL", "STALE_AFTER", "STATUSES", "Recorder", "RunFilters",
           "Store", "StoreWriteError", "MIGRATIONS", "Base", "ExperimentRow", "LibraryRow",
           "MigrationRow", "RunRow", "TurnRow"]
