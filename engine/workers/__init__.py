"""The pool of workers: an experiment's cells as jobs of a PostgreSQL-backed queue
(procrastinate, in the store's own database), run by `python -m engine worker` processes on
any machine that reaches the database. See `engine.workers.pool` (the queue, submit, stop)
and `engine.workers.worker` (a worker process); the store's side is `engine.store.workers`."""
from __future__ import annotations

from engine.workers.pool import (
    app_for,
    conninfo,
    endpoint_of,
    ensure_schema,
    queue_of,
    settle,
    stop,
    submit,
)
from engine.workers.worker import arun_worker, housekeeping

__all__ = ["app_for", "arun_worker", "conninfo", "endpoint_of", "ensure_schema",
           "housekeeping", "queue_of", "settle", "stop", "submit"]
