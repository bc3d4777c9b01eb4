"""What the app does with the pool of workers: queue an experiment's pending cells for it
(`submit`) and stop an experiment it runs (`stop`); the pool itself is `engine.workers`.
Both need a role that may run experiments (`engine.access`; `LOCAL` without sign-in)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.access import LOCAL, Actor, require
from engine.workers import pool

if TYPE_CHECKING:
    from engine.store import Store


def submit(store: Store, experiment_id: str, actor: Actor = LOCAL, app: Any = None) -> int:
    """Queue `experiment_id`'s pending cells for the pool (`engine.workers.pool.submit`), started
    by `actor.user` (the workers give its runs that name); returns how many were queued."""
    require(actor, "run experiments")
    return pool.submit(store, experiment_id, app, started_by=actor.user)


def stop(store: Store, experiment_id: str, actor: Actor = LOCAL) -> int:
    """Stop the pool's experiment (`engine.workers.pool.stop`); returns the jobs cancelled."""
    require(actor, "run experiments")
    return pool.stop(store, experiment_id)
