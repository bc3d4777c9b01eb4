"""What each endpoint's server supports, and the HTTP clients that reach it: one cache, owned
by an endpoint registry (`EndpointRegistry.capabilities`).

Detecting a server's structured-output mode (`engine.llm.structured`) or whether it applies a
grammar (`engine.llm.lines`) costs requests, and building an HTTP client costs its connection
pool (`engine.llm.transport.shared_clients`). Every model a registry resolves carries the
registry's `Capabilities`, so every seat, run and experiment under that registry (a CLI
process's, a worker's, an app session's) learns an endpoint once and shares its clients. What
is learned is kept in the run's store too (`engine.store.support`, one row per kind, base URL
and model), where a new process reads it instead of learning it again.

Values are the store's: text per (kind, base URL, model). The rule between two values (a
structured mode found refused stays refused) is the caller's, given as `keep`.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.store import support
from engine.store.local_limits import LocalLimits

if TYPE_CHECKING:
    from engine.store import Store

log = logging.getLogger(__name__)
Endpoint = tuple[str, str]  # (base URL, model)
CLIENTS_MAX = 64  # endpoints whose clients are kept; base URLs that come with data are many


class Capabilities:
    """One registry's knowledge of its endpoints: what each supports (by kind), the lock one
    detecting call holds per event loop, the shared HTTP clients per endpoint, and the
    endpoints' limits for runs given no store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str, str], str] = {}
        self._clients: OrderedDict[tuple[Any, ...], tuple[Any, Any]] = OrderedDict()
        # each endpoint's limits for the runs given no store (a store keeps its own)
        self.local_limits = LocalLimits()
        # Per event loop, (kind, endpoint) -> the lock its one detecting call holds: the calls
        # that start while it is out wait for its answer instead of each asking the server.
        self._detecting: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[tuple[str, str, str], asyncio.Lock]] = \
            weakref.WeakKeyDictionary()

    # ------------------------------------------------------------------ what is supported
    def known(self, feature: str, endpoint: Endpoint) -> str | None:
        """The value learned for `feature` at `endpoint` by this registry, or None (a dict's
        read is atomic: every call of every JSON phase asks, without the lock)."""
        return self._known.get((feature, *endpoint))

    def learn(self, feature: str, endpoint: Endpoint, value: str, store: Store | None = None, *,
              keep: Callable[[str, str], bool] | None = None) -> bool:
        """Record `value` for `feature` at `endpoint`, unless `keep(known, value)` says the value
        known already stays; True when that changed what was known. A change goes to `store`
        too, for every process of the deployment (a store that cannot be written leaves it to
        this registry)."""
        key = (feature, *endpoint)
        with self._lock:
            known = self._known.get(key)
            changed = known != value and (known is None or keep is None or not keep(known, value))
            if changed:
                self._known[key] = value
        if changed and store is not None:
            try:
                support.learn(store, feature, *endpoint, value)
            except Exception as exc:  # a read-only or busy store: this registry still knows
                log.warning("could not store what %s supports (%s): %s", endpoint[0], feature, exc)
        return changed

    def recall(self, feature: str, endpoint: Endpoint, store: Store | None,
               allowed: tuple[str, ...]) -> str | None:
        """The value known for `feature` at `endpoint`: this registry's, else the one a process
        stored (one of `allowed`; then this registry's too); None when neither knows it. A
        store that cannot be read is as one that does not know."""
        known = self.known(feature, endpoint)
        if known is not None or store is None:
            return known
        try:
            stored = support.learned(store, feature, *endpoint)
        except Exception as exc:  # learned again instead
            log.warning("could not read what %s supports (%s): %s", endpoint[0], feature, exc)
            return None
        if stored not in allowed:
            return None
        with self._lock:
            return self._known.setdefault((feature, *endpoint), stored)

    def detecting(self, feature: str, endpoint: Endpoint) -> asyncio.Lock:
        """The running event loop's lock for detecting `feature` at `endpoint` (made on first
        use): the one detecting call holds it."""
        with self._lock:
            locks = self._detecting.setdefault(asyncio.get_running_loop(), {})
            return locks.setdefault((feature, *endpoint), asyncio.Lock())

    # ------------------------------------------------------------------ shared clients
    def clients(self, key: tuple[Any, ...], build: Callable[[], tuple[Any, Any]]
                ) -> tuple[Any, Any]:
        """The (sync, async) clients kept under `key`, built by `build` on first use; the
        `CLIENTS_MAX` most recently used are kept (a model holding an evicted pair keeps it)."""
        with self._lock:
            found = self._clients.get(key)
            if found is not None:
                self._clients.move_to_end(key)
                return found
        made = build()
        with self._lock:
            made = self._clients.setdefault(key, made)
            while len(self._clients) > CLIENTS_MAX:
                self._clients.popitem(last=False)
        return made
