"""The store: every query Parley makes, on SQLite (WAL) or PostgreSQL through SQLAlchemy 2."""
from engine.store.records import strip_secrets
from engine.store.runs import (DEFAULT_URL, STALE_AFTER, STATUSES, Recorder, Store,
                               StoreWriteError)
from engine.store.schema import (MIGRATIONS, Base, ExperimentRow, LibraryRow, MigrationRow,
                                 RunRow, TurnRow)

__all__ = ["strip_secrets", "DEFAULT_URL", "STALE_AFTER", "STATUSES", "Recorder", "Store",
           "StoreWriteError", "MIGRATIONS", "Base", "ExperimentRow", "LibraryRow",
           "MigrationRow", "RunRow", "TurnRow"]
