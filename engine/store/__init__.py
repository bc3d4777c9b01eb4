"""The store: every query Parley makes, on SQLite (WAL) or PostgreSQL through SQLAlchemy 2."""
from engine.store.database import DEFAULT_URL, StoreWriteError
from engine.store.reading import RunFilters
from engine.store.records import strip_secrets
from engine.store.runs import STATUSES
from engine.store.store import Store

__all__ = ["strip_secrets", "DEFAULT_URL", "STATUSES", "RunFilters", "Store",
           "StoreWriteError"]
