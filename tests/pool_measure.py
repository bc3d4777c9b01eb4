"""The measurements docs/workers.md gives for what the pool adds to procrastinate:
`python tests/pool_measure.py fetch|reads --db postgresql+psycopg://...` (else
PARLEY_TEST_PG_URL). It empties the job queue's tables of that database: give it one of its own.

- `fetch`: how many jobs one worker of `--concurrency 32` runs at once while its event loop is
  busy (each job spends its time in slices of CPU, 0.5 ms by default (`--cpu`), with 20 ms
  waits between, as cells on one loop do: 32 of them keep about 0.8 of a core busy), with
  procrastinate's own fetch (one job a round trip) and with the pool's (`Gatekeeper`, as
  many jobs as free slots in one round trip).
- `reads`: the pool's reads of the queue by payload (SQL on the store's connections) against
  procrastinate's API for the same answer (`list_jobs` filtered in Python, `list_queues`).

It is not a test (pytest collects `test_*` files only).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import procrastinate  # noqa: E402
from procrastinate.manager import JobManager  # noqa: E402
from sqlalchemy import text  # noqa: E402

from engine.store import Store  # noqa: E402
from engine.store import workers as pool_store  # noqa: E402
from engine.workers.pool import Gatekeeper, app_for, conninfo, ensure_schema  # noqa: E402

SLOTS = 32


def _empty(store: Store) -> None:
    with store.writing() as connection:
        connection.execute(text("DELETE FROM procrastinate_jobs"))
        connection.execute(text("DELETE FROM procrastinate_workers"))


async def _fetch_once(url: str, jobs: int, work: float, batched: bool,
                      cpu: float) -> str:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
    app.job_manager = Gatekeeper(app.connector, None, SLOTS) if batched \
        else JobManager(app.connector)
    running, peak, finished, samples = 0, 0, 0, []
    done = asyncio.Event()

    @app.task(name="measure.hold")
    async def hold(n: int) -> None:
        nonlocal running, peak, finished
        running += 1
        peak = max(peak, running)
        end = time.monotonic() + work
        while time.monotonic() < end:
            spin = time.monotonic() + cpu
            while time.monotonic() < spin:
                pass
            await asyncio.sleep(0.02)
        running -= 1
        finished += 1
        if finished == jobs:
            done.set()

    async with app.open_async():
        await app.configure_task("measure.hold", queue="measure").batch_defer_async(
            *[{"n": i} for i in range(jobs)])

        async def sample() -> None:
            while not done.is_set():
                samples.append(running)
                await asyncio.sleep(0.05)
        start = time.monotonic()
        worker = asyncio.create_task(app.run_worker_async(
            queues=["measure"], concurrency=SLOTS, install_signal_handlers=False))
        sampler = asyncio.create_task(sample())
        await done.wait()
        wall = time.monotonic() - start
        worker.cancel()
        await asyncio.gather(worker, sampler, return_exceptions=True)
    name = "the pool's fetch (Gatekeeper)" if batched else "procrastinate's fetch_job"
    return (f"{name}: {jobs} jobs of {work:g} s, concurrency {SLOTS}: wall {wall:.1f} s "
            f"(at least {jobs * work / SLOTS:.1f} s), {statistics.mean(samples):.1f} running "
            f"at once on average, {peak} at most")


def fetch(store: Store, jobs: int, work: float, cpu: float) -> None:
    for batched in (False, True):
        _empty(store)
        print(asyncio.run(_fetch_once(conninfo(store.url), jobs, work, batched, cpu)), flush=True)


def _median_ms(call: Any, times: int = 7) -> float:
    spent = []
    for _ in range(times):
        start = time.perf_counter()
        call()
        spent.append(time.perf_counter() - start)
    return statistics.median(spent) * 1000


def reads(store: Store, jobs: int) -> None:
    _empty(store)
    with store.writing() as connection:
        connection.execute(text(
            "INSERT INTO procrastinate_jobs (queue_name, task_name, args) "
            "SELECT 'parley-default', :task, jsonb_build_object('experiment_id', 'e' || "
            "(i % 10), 'cell', 'cell:' || i || ':0:0') FROM generate_series(1, :n) AS i"),
            {"task": pool_store.TASK, "n": jobs})
    app = app_for(store)
    with app.open():
        manager = app.job_manager

        def listed() -> bool:
            found = [*manager.list_jobs(task=pool_store.TASK, status="todo"),
                     *manager.list_jobs(task=pool_store.TASK, status="doing")]
            return any(job.task_kwargs.get("experiment_id") == "e3" for job in found)
        print(f"{jobs} queued jobs of 10 experiments: has_open_jobs (SQL) "
              f"{_median_ms(lambda: pool_store.has_open_jobs(store, 'e3')):.1f} ms; "
              f"list_jobs todo and doing, filtered in Python {_median_ms(listed):.1f} ms")
        print(f"queue depth: queue_depth (SQL) "
              f"{_median_ms(lambda: pool_store.queue_depth(store)):.1f} ms; list_queues "
              f"{_median_ms(lambda: list(manager.list_queues(task=pool_store.TASK))):.1f} ms")

    def opened() -> None:
        other = app_for(store)
        with other.open():
            list(other.job_manager.list_queues(task=pool_store.TASK))
    print(f"list_queues with procrastinate's connector opened for it (a CLI call, a page "
          f"rerun): {_median_ms(opened, 5):.1f} ms")
    _empty(store)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["fetch", "reads"])
    parser.add_argument("--db", default=os.environ.get("PARLEY_TEST_PG_URL", ""))
    parser.add_argument("--jobs", type=int, default=0, help="192 (fetch), 20000 (reads)")
    parser.add_argument("--work", type=float, default=2.0, help="seconds a fetch job lasts")
    parser.add_argument("--cpu", type=float, default=0.0005,
                        help="seconds of CPU a fetch job spends between its 20 ms waits")
    args = parser.parse_args()
    store = Store(args.db)
    ensure_schema(store)
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if args.what == "fetch":
        fetch(store, args.jobs or 192, args.work, args.cpu)
    else:
        reads(store, args.jobs or 20_000)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
