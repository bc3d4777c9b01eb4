"""The pool's commands: `worker` (serve the pool), `workers` (what the pool is doing), and
`experiment run | resume --workers [--wait]` (submit to the pool, and follow it)."""
from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from engine.access import cli_user
from engine.cli.runflags import endpoints_from_args, store_from_args
from engine.experiments import Progress, duration_text, progress
from engine.llm.transport import releasing
from engine.text import say

if TYPE_CHECKING:
    from engine.store import Store

WAIT_EVERY = 1.0  # seconds between progress reads while following a pool experiment


def pool_text(store: Store) -> str:
    """The pool for a terminal: its live workers, queue depth per endpoint, throughput and
    the ETA of what is queued."""
    from engine.store import workers as pool_store
    lines = []
    live = pool_store.workers(store)
    if live.empty:
        lines.append("no workers running; start one with python -m engine worker")
    else:
        view = live.assign(started=live["started"].astype(str).str.slice(0, 19),
                           heartbeat=live["heartbeat"].astype(str).str.slice(0, 19))
        lines.append(view.to_string(index=False))
    depth = pool_store.queue_depth(store)
    rate = pool_store.throughput(store)
    left = int(depth["queued"].sum() + depth["running"].sum()) if not depth.empty else 0
    lines.append("queues: " + (", ".join(f"{q} {n} queued, {r} running" for q, n, r in
                                         depth.itertuples(index=False)) or "empty"))
    eta = duration_text(60 * left / rate) if rate and left else ("0s" if not left else "?")
    lines.append(f"throughput: {rate:.1f} cells/min (last 5 minutes); ETA {eta} for "
                 f"{left} cell(s)")
    return "\n".join(lines)


def cmd_worker(args: Any) -> int:
    """`worker`: serve the pool until Ctrl-C or SIGTERM."""
    import asyncio
    import logging

    from engine.workers.worker import arun_worker
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    store = store_from_args(args)
    queues = ", ".join(args.endpoint) if args.endpoint else "all"
    asyncio.run(releasing(arun_worker(
        store, concurrency=args.concurrency, endpoints=args.endpoint, heartbeat=args.heartbeat,
        registry=endpoints_from_args(args), on_ready=lambda: say(
            f"worker on {store.url_safe}: {args.concurrency} at a time, queues {queues}",
            file=sys.stderr))))
    return 0


def cmd_workers(args: Any) -> int:
    """`workers`: print the pool."""
    from engine.store.workers import require_postgres
    store = store_from_args(args)
    require_postgres(store)
    say(pool_text(store))
    return 0


def cmd_stop(args: Any) -> int:
    """`experiment stop ID`: stop an experiment the pool runs."""
    from engine.workers.pool import stop
    count = stop(store_from_args(args), args.experiment_id)
    say(f"experiment {args.experiment_id} stopped; {count} job(s) cancelled or aborted")
    return 0


def run_on_pool(store: Store, experiment_id: str, wait: bool, quiet: bool) -> int:
    """Submit an experiment's pending cells to the pool; with `wait`, follow its progress
    until its status is final. Exit status as the in-process run's: 0 completed, 130
    stopped, 1 otherwise."""
    from engine.workers.pool import submit
    count = submit(store, experiment_id, started_by=cli_user())
    say(f"experiment {experiment_id}: {count} cell(s) queued for the workers")
    if not wait:
        say(f"follow it with: python -m engine experiment show {experiment_id} (or "
            "python -m engine workers)")
        return 0
    from engine.store.workers import DATABASE_ERRORS
    state = progress(store, experiment_id)
    shown = -1
    while state.status == "running":
        if not quiet and state.done != shown:
            shown = state.done
            sys.stderr.write(state.line() + "\n")
            sys.stderr.flush()
        time.sleep(WAIT_EVERY)
        try:
            state = progress(store, experiment_id)
        except DATABASE_ERRORS as exc:  # the pool goes on without us: read again
            sys.stderr.write(f"cannot read the store ({type(exc).__name__}); trying again\n")
    return ending(experiment_id, state, " --workers")


def ending(experiment_id: str, state: Progress, resume_flags: str = "") -> int:
    """Say how an experiment ended (a resume command when it did not complete) and return
    the exit status: 0 completed, 130 stopped, 1 otherwise."""
    if state.status == "completed":
        say(f"experiment {experiment_id} completed: {state.done} runs in "
            f"{duration_text(state.elapsed)}")
        return 0
    say(f"experiment {experiment_id} {state.status}: {state.done}/{state.total} runs done"
        + (f"; {state.error}" if state.error else "")
        + f"\nresume with: python -m engine experiment resume {experiment_id}{resume_flags}",
        file=sys.stderr)
    return 130 if state.status == "stopped" else 1
