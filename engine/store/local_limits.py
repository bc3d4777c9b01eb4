"""The endpoint limits' state a process keeps itself where its database does not share it
(SQLite, or no store): `LocalLimits`, held by a `Store` and by an endpoint registry's
capabilities."""
from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Callable
from typing import TypeVar

from engine.models import LimitState

T = TypeVar("T")


class LocalLimits:
    """The limits' state a process keeps itself where its database does not share it
    (SQLite, or no store): each endpoint's buckets behind a lock, and per event loop one
    semaphore per endpoint for its calls in flight. A `Store` holds one, so every run on it
    (every app session's, a CLI's, a worker's) counts against the same limits; an endpoint
    registry holds another for runs given no store. The arithmetic is `engine.llm.limits`'s."""

    def __init__(self) -> None:
        self._states: dict[str, LimitState] = {}
        self._lock = threading.Lock()
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[
            tuple[str, int], asyncio.Semaphore]] = weakref.WeakKeyDictionary()

    def change(self, endpoint: str, decide: Callable[[LimitState], T]) -> T:
        """Hand `endpoint`'s state (made on first use), its clock set to now, to `decide`
        under the lock, and return what `decide` returned."""
        with self._lock:
            state = self._states.setdefault(endpoint, LimitState(time.monotonic()))
            state.now = time.monotonic()
            return decide(state)

    def state(self, endpoint: str) -> LimitState | None:
        """`endpoint`'s state as last left, None before its first call."""
        with self._lock:
            return self._states.get(endpoint)

    def semaphore(self, endpoint: str, limit: int) -> asyncio.Semaphore:
        """The semaphore that holds `endpoint` to `limit` calls at once in the running event
        loop (every run of an experiment shares its loop)."""
        with self._lock:
            gates = self._gates.setdefault(asyncio.get_running_loop(), {})
            return gates.setdefault((endpoint, limit), asyncio.Semaphore(limit))
