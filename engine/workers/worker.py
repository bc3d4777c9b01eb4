"""One worker process of the pool (`python -m engine worker`): a procrastinate worker on the
endpoints' queues, beside a housekeeping loop that every worker runs.

Housekeeping, every `heartbeat` seconds: the worker's row in the `workers` table gets its
heartbeat (each finished cell is counted as it ends); jobs of workers that stopped
heartbeating (killed, or cut off) go back to the queue for another worker (procrastinate's
stalled jobs); and each experiment the pool runs gets its heartbeat while it has jobs, or its
final status when it has none left. A step that fails for one job or experiment is logged
and the round goes on with the rest: one bad row never stops the others' housekeeping.

A worker that loses the database does not die: procrastinate stops its worker when a query
or the heartbeat fails, and this loop starts a new one after a pause (doubling up to a
minute); psycopg's pool opens fresh connections once the server answers again, and
housekeeping skips a tick that fails. Jobs it was running when the link went are retried by
the pool as stalled; the per-cell guard keeps a cell from running twice.
"""
from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from engine.llm.endpoints import registry_or_environment
from engine.llm.providers import PROVIDERS, get_model
from engine.models import now
from engine.store import Store
from engine.store import workers as pool_store
from engine.store.experiments import set_values
from engine.store.workers import PoisonJob, brief
from engine.workers.pool import (
    QUEUE_PREFIX,
    Gatekeeper,
    WorkerState,
    app_for,
    ensure_schema,
    plan_for,
    settle,
)

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry

log = logging.getLogger("parley.worker")
HEARTBEAT = 10.0  # seconds between heartbeats; a worker silent for 3 of them is stalled


@contextmanager
def _each(what: str) -> Iterator[None]:
    """One item's step of a round: a failure is logged (on one line) and the round goes on;
    a lost database ends the round (the next tick tries again)."""
    try:
        yield
    except pool_store.DATABASE_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001 - one bad row must not stop the rest
        log.warning("housekeeping: %s failed (%s: %s); going on with the rest", what,
                    type(exc).__name__, brief(str(exc), 200))


async def housekeeping(app: Any, state: WorkerState, heartbeat: float) -> None:
    """One round of the worker's periodic duties (see the module's docstring)."""
    store = state.store
    pool_store.beat(store, state.worker_id)
    for job in await app.job_manager.get_stalled_jobs(
            task_name=pool_store.TASK, seconds_since_heartbeat=3 * heartbeat):
        with _each(f"retrying job {job.id}"):
            payload = job.task_kwargs
            log.warning("job %s (%s) was left by a worker that stopped; retrying it", job.id,
                        brief(payload.get("cell") if isinstance(payload, dict) else payload))
            await app.job_manager.retry_job(job)
    # A job marked running whose cell lock stayed free for a whole round was lost by its
    # live worker (the database went away as it ended): queue it again (it skips a cell
    # that completed).
    unheld = pool_store.unheld_jobs(store)
    for job_id in sorted(unheld & state.unheld):
        with _each(f"retrying job {job_id}"):
            log.warning("job %s is marked running but no worker holds its cell; retrying it",
                        job_id)
            await app.job_manager.retry_job_by_id_async(job_id, retry_at=now())
    state.unheld = unheld
    for experiment_id in pool_store.pool_running(store):
        with _each(f"settling experiment {experiment_id}"):
            plan = plan_for(state, experiment_id)
            if pool_store.has_open_jobs(store, experiment_id, shape=plan.shape):
                set_values(store, experiment_id, heartbeat_at=now())
            else:
                settle(store, experiment_id, plan=plan)


def _refused_once(record: logging.LogRecord) -> bool:
    """Drops procrastinate's own report of a refused job (its whole payload and a traceback):
    `run_cell` has logged it on one line."""
    return not (record.exc_info and isinstance(record.exc_info[1], PoisonJob))


async def _keep_house(app: Any, state: WorkerState, heartbeat: float) -> None:
    while True:
        await asyncio.sleep(heartbeat)
        try:
            await housekeeping(app, state, heartbeat)
        except Exception as exc:  # the database is away: the next tick tries again
            log.warning("housekeeping failed (%s: %s); trying again in %ss",
                        type(exc).__name__, brief(str(exc), 200), heartbeat)


def warm_up() -> None:
    """Import what a cell needs before the first one runs: the protocols, the chat-model base
    every provider builds on and each installed provider's integration (langchain-core,
    langchain-openai...: seconds on a loaded machine). Imported by the first cells instead,
    they held the event loop, so every cell begun waited, and for long enough the worker's
    heartbeat stopped and its jobs were taken as stalled."""
    get_model("simulated")
    for _package, module, _cls, _key in PROVIDERS.values():
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module)


async def arun_worker(store: Store, *, concurrency: int = 4, endpoints: Sequence[str] = (),
                      heartbeat: float = HEARTBEAT, registry: EndpointRegistry | None = None,
                      on_ready: Callable[[], Any] | None = None) -> None:
    """Serve the pool until SIGINT or SIGTERM: `concurrency` cells at a time from the
    queues of `endpoints` (all queues when empty). `registry` is the `EndpointRegistry`
    models resolve under (None: the environment's); `on_ready` is called once the worker
    is registered and warmed up, before it takes its first job."""
    pool_store.require_postgres(store)
    ensure_schema(store)
    warm_up()
    # where procrastinate reports each job's end (a filter already there is not added again)
    logging.getLogger("procrastinate.worker").addFilter(_refused_once)
    store.start_reaper()
    # one registry for every cell this worker runs: they share what it learns and its clients
    state = WorkerState(store, registry_or_environment(registry), sink=store.batched())
    app = app_for(store, state, slots=concurrency)
    keeper = app.job_manager  # fetches several jobs at once: gives back the ones not started
    assert isinstance(keeper, Gatekeeper)
    state.worker_id = pool_store.register(store, endpoints, concurrency)
    # Without endpoints, no `queues`: procrastinate then listens on every queue.
    queues: dict[str, Any] = {"queues": [QUEUE_PREFIX + n for n in endpoints]} if endpoints \
        else {}
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    pause = 1.0
    if on_ready is not None:
        on_ready()
    async with app.open_async():
        side = asyncio.create_task(_keep_house(app, state, heartbeat))
        try:
            while not stopping.is_set():
                work = asyncio.create_task(app.run_worker_async(
                    **queues, concurrency=concurrency, name=f"{store.host}:{os.getpid()}",
                    additional_context={"parley": state}, install_signal_handlers=False,
                    update_heartbeat_interval=heartbeat,
                    stalled_worker_timeout=3 * heartbeat))
                waiter = asyncio.create_task(stopping.wait())
                done, _ = await asyncio.wait({work, waiter},
                                             return_when=asyncio.FIRST_COMPLETED)
                if waiter in done:
                    work.cancel()
                    await asyncio.gather(work, return_exceptions=True)
                    await keeper.give_back()
                    break
                waiter.cancel()
                await keeper.give_back()
                problem = work.exception()
                log.warning("the worker stopped (%s); starting again in %.0fs",
                            problem or "lost the database", pause)
                await asyncio.sleep(pause)
                pause = min(60.0, pause * 2)
        finally:
            side.cancel()
            await asyncio.gather(side, return_exceptions=True)
            try:
                pool_store.beat(store, state.worker_id, stopped=True)
            finally:
                state.locks.close()
                store.stop_reaper()
