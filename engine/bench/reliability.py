"""Reliability drills, shared by the tests (small counts) and the bench (full counts).

- `fault_soak`: many runs across every registered protocol on a simulated model that fails,
  hangs, returns nothing or returns garbage; checks that every run ends with a final status,
  that every failed call is recorded on its turn, and that nothing is invented.
- `concurrent_writers`: several processes writing runs into one database at once.
"""
from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import tempfile
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.store import Store

FAULTY = "simulated?fail=0.2&timeout=0.1&empty=0.1&malformed=0.1&hang=2"


def check_run(run: dict[str, Any]) -> list[str]:
    """Invariants every stored run must keep, whatever its models did; returns violations."""
    problems = []
    if run["status"] not in ("completed", "failed", "interrupted"):
        problems.append(f"run {run['id']} left {run['status']}")
    for turn in run["turns"]:
        where = f"run {run['id']} turn {turn['idx']}"
        if turn["status"] == "degraded" and not turn["error"]:
            problems.append(f"{where}: degraded with no error recorded")
        if turn["status"] == "ok" and not (turn["reply"] or "").strip():
            problems.append(f"{where}: ok with an empty reply")
        if turn["status"] == "degraded" and turn["error"] != "" and turn["parsed"] and \
                not turn["error"].startswith("unreadable JSON"):
            problems.append(f"{where}: fields parsed from a failed call")
    return problems


def fault_soak(store: Store, runs: int = 500, model: str = FAULTY, concurrency: int = 16,
               timeout_per_call: float = 0.3) -> dict[str, Any]:
    """Run `runs` runs round-robin over the registry on a faulty model; report what held."""
    from engine.bench.choice import every_phase_config
    from engine.protocols import REGISTRY, arun_config
    names, gate = list(REGISTRY), asyncio.Semaphore(concurrency)
    crashes: list[str] = []

    async def one(i: int) -> None:
        protocol = names[i % len(names)]
        async with gate:
            try:
                # every phase asked, at most two rounds to keep the soak quick
                await arun_config(every_phase_config(REGISTRY[protocol], model, 2),
                                  f"Soak question {i}: should we adopt the plan?", store=store,
                                  tags=["soak"], timeout_per_call=timeout_per_call, retries=1)
            except Exception as exc:  # a crash is what the soak looks for
                crashes.append(f"{protocol}: {type(exc).__name__}: {exc}")

    async def every() -> None:
        await asyncio.gather(*(one(i) for i in range(runs)))

    start = time.perf_counter()
    asyncio.run(every())
    frame = store.runs(tag="soak")
    stored = [store.get(run_id) for run_id in frame["id"]]
    turns = [turn for run in stored for turn in run["turns"]]
    degraded = [turn for turn in turns if turn["status"] == "degraded"]
    return {"runs": len(frame), "crashes": crashes,
            "problems": [problem for run in stored for problem in check_run(run)],
            "statuses": dict(Counter(frame["status"])),
            "protocols": dict(Counter(frame["protocol"])), "turns": len(turns),
            "degraded_turns": len(degraded),
            "errors_recorded": sum(bool(turn["error"]) for turn in degraded),
            "seconds": time.perf_counter() - start}


def _writer(url: str, runs: int, worker: int, report: str) -> None:
    from engine.bench.choice import cheapest, default_config
    from engine.protocols import arun_config, run_sync
    from engine.store import Store
    store = Store(url)
    config = default_config(cheapest())
    failures = []
    for i in range(runs):
        try:
            run_sync(arun_config(config, f"Task {worker}-{i}", store=store,
                                 tags=[f"writer-{worker}"]))
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
    with open(report, "w", encoding="utf-8") as handle:
        json.dump(failures, handle)


def concurrent_writers(url: str, processes: int = 4, runs_each: int = 250,
                       deadline: float = 900.0) -> dict[str, Any]:
    """`processes` OS processes each storing `runs_each` runs in one database at once.

    Each writer leaves its failures in a file; a writer that dies or outlives `deadline`
    seconds is reported as a failure (and stopped), never waited on forever.
    """
    from engine.store import Store
    Store(url)  # migrate once before the writers race
    context = multiprocessing.get_context("spawn")
    start = time.perf_counter()
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        reports = [os.path.join(folder, f"writer-{n}.json") for n in range(processes)]
        workers = [context.Process(target=_writer, args=(url, runs_each, n, reports[n]))
                   for n in range(processes)]
        for worker in workers:
            worker.start()
        for n, worker in enumerate(workers):
            worker.join(max(1.0, deadline - (time.perf_counter() - start)))
            if worker.is_alive():
                worker.terminate()
                worker.join(10)
                failures.append(f"writer {n} did not finish within {deadline:.0f} s")
            elif worker.exitcode != 0 or not os.path.exists(reports[n]):
                failures.append(f"writer {n} exited with code {worker.exitcode}")
            else:
                with open(reports[n], encoding="utf-8") as handle:
                    failures += json.load(handle)
    frame = Store(url).runs()
    return {"stored": len(frame), "completed": int((frame["status"] == "completed").sum()),
            "failures": failures,
            "locked": sum("locked" in f for f in failures),
            "seconds": time.perf_counter() - start}
