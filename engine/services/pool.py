"""What the app does with the pool of workers: queue an experiment's pending cells for it
(`submit`) and stop an experiment it runs (`stop`); the pool itself is `engine.workers`."""
from __future__ import annotations

from engine.workers import stop, submit

__all__ = ["stop", "submit"]
