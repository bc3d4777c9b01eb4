"""Liveness: the one rule that says whether the process owning a `running` row is gone.

A run or an experiment row records the host, the pid and a heartbeat of the process running
it. On the same host the pid decides (a dead pid is gone at once); on another host, whose
processes cannot be seen, a heartbeat older than `STALE_AFTER` does. The reaper writes
`interrupted` on such rows (on open and on a timer); reads present them as `interrupted`
without writing, by this same rule.
"""
from __future__ import annotations

import os
from datetime import datetime, timedelta

from engine.models import now
from engine.store.readback import aware

STALE_AFTER = timedelta(minutes=10)  # a running row on another host with no heartbeat
GONE = "the process running it stopped"  # the error a reaped run is stored with


def pid_alive(pid: object) -> bool:
    """True when a process with this id exists on this host (one we may not signal counts)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def owner_gone(host: str | None, pid: object, heartbeat_at: datetime | None, *,
               here: str, at: datetime | None = None) -> bool:
    """True when the process that owns a `running` row is gone: on this host (`here`) its
    pid is dead; on another host its last heartbeat is older than `STALE_AFTER`."""
    if host == here:
        return not pid_alive(pid)
    beat = aware(heartbeat_at)
    return beat is None or beat < (at or now()) - STALE_AFTER
