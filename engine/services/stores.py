"""The store the app serves: opened, migrated, its old rows back-filled by the protocols."""
from __future__ import annotations

from engine.protocols.storing import Store


def served_store(url: str) -> Store:
    """The app's store for `url`: opened and migrated, the back-fills its migrations left to
    the protocols done (`engine.protocols.storing.Store`), and its reaper started (the
    pages' reads never write: runs whose process died are ended on a timer)."""
    opened = Store(url)
    opened.start_reaper()
    return opened
