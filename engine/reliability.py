"""Reliability drills, shared by the tests (small counts) and the bench (full counts).

- `fault_soak`: many runs across every registered protocol on a simulated model that fails,
  hangs, returns nothing or returns garbage; checks that every run ends with a final status,
  that every failed call is recorded on its turn, and that nothing is invented.
- `concurrent_writers`: several processes writing runs into one database at once.
"""
from __future__ import annotations

import asyncio
import multiprocessing
import time
from collections import Counter
from typing import Any

FAULTY = "simulated?fail=0.2&timeout=0.1&empty=0.1&malformed=0.1&hang=2"


def soak_config(protocol: str, model: str = FAULTY) -> dict[str, Any]:
    """A registry protocol on the faulty model, with small rounds to keep the soak quick."""
    from .protocols import get_protocol
    spec = get_protocol(protocol)
    options = {}
    if spec.options and isinstance(spec.options[0].default, int):
        options[spec.options[0].name] = min(2, spec.options[0].default)
    seats: dict[str, Any] = {}
    for slot in spec.slots:
        if slot.many:
            seats[slot.name] = [{**dict(d), "model": model} for d in slot.defaults]
        elif slot.optional:
            seats[slot.name] = {"name": slot.name, "model": model}
        else:
            base = dict(slot.defaults[0]) if slot.defaults else {}
            seats[slot.name] = {**base, "model": model}
    return {"protocol": spec.name, "seats": seats, "options": options}


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


async def _soak(store: Any, runs: int, model: str, concurrency: int,
                timeout_per_call: float) -> dict[str, Any]:
    from .protocols import REGISTRY, arun_config
    names = list(REGISTRY)
    gate = asyncio.Semaphore(concurrency)
    crashes: list[str] = []

    async def one(i: int) -> None:
        protocol = names[i % len(names)]
        async with gate:
            try:
                await arun_config(soak_config(protocol, model), f"Soak question {i}: should we "
                                  "adopt the plan?", store=store, tags=["soak"],
                                  timeout_per_call=timeout_per_call, retries=1)
            except Exception as exc:  # a crash is what the soak looks for
                crashes.append(f"{protocol}: {type(exc).__name__}: {exc}")

    await asyncio.gather(*(one(i) for i in range(runs)))
    return {"crashes": crashes}


def fault_soak(store: Any, runs: int = 500, model: str = FAULTY, concurrency: int = 16,
               timeout_per_call: float = 0.3) -> dict[str, Any]:
    """Run `runs` runs round-robin over the registry on a faulty model; report what held."""
    start = time.perf_counter()
    outcome = asyncio.run(_soak(store, runs, model, concurrency, timeout_per_call))
    frame = store.runs(tag="soak")
    problems: list[str] = []
    degraded = errors_recorded = turns = 0
    for run_id in frame["id"]:
        run = store.get(run_id)
        problems += check_run(run)
        turns += len(run["turns"])
        for turn in run["turns"]:
            if turn["status"] == "degraded":
                degraded += 1
                errors_recorded += bool(turn["error"])
    return {"runs": len(frame), "crashes": outcome["crashes"], "problems": problems,
            "statuses": dict(Counter(frame["status"])),
            "protocols": dict(Counter(frame["protocol"])), "turns": turns,
            "degraded_turns": degraded, "errors_recorded": errors_recorded,
            "seconds": time.perf_counter() - start}


def _writer(url: str, runs: int, worker: int, queue: Any) -> None:
    from .protocols.peer_review import run_peer_review
    from .store import Store
    store = Store(url)
    failures = []
    for i in range(runs):
        try:
            run_peer_review(f"Task {worker}-{i}", producer="simulated", reviewer="simulated",
                            max_iterations=1, store=store, tags=[f"writer-{worker}"])
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
    queue.put((worker, failures))


def concurrent_writers(url: str, processes: int = 4, runs_each: int = 250) -> dict[str, Any]:
    """`processes` OS processes each storing `runs_each` runs in one database at once."""
    from .store import Store
    Store(url)  # migrate once before the writers race
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    start = time.perf_counter()
    workers = [context.Process(target=_writer, args=(url, runs_each, n, queue))
               for n in range(processes)]
    for worker in workers:
        worker.start()
    results = [queue.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    failures = [f for _, fs in results for f in fs]
    frame = Store(url).runs()
    return {"stored": len(frame), "completed": int((frame["status"] == "completed").sum()),
            "failures": failures,
            "locked": sum("locked" in f for f in failures),
            "seconds": time.perf_counter() - start}
