"""The experiment rows of `python -m engine bench`: many runs at once in one event loop.

`runs` runs of the busiest protocol (`engine.bench.choice`) on `simulated?latency=L` at
`concurrency` runs in flight, written to a temporary SQLite store. Wall time is set against the
lower bound max(calls x L / concurrency, W x L): the calls cannot all overlap more than
`concurrency`-fold, and one run can never beat its critical path of W dependent calls (the
protocol's `estimate_waves`: 4 for the panel's propose, critique, rebuttal, synthesis). Engine
CPU time per call is the process CPU time over the calls. The same runs are then made with a
transaction per turn (the store as a single run uses it) and with no store, so the store's
share of the cost is measured, not guessed. Figures are measured here, never asserted in tests.
"""
from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.bench.choice import busiest, default_config, simulated, waves
from engine.bench.table import Row, fact

if TYPE_CHECKING:
    from engine.store import Store


def _questions(count: int) -> list[str]:
    from engine.questions import QUESTION_SETS
    bank = [q.text for name in ("definite", "open") for q in QUESTION_SETS.get(name, [])]
    return [bank[i % len(bank)] for i in range(count)]


def _config(latency: float) -> dict[str, Any]:
    """The busiest protocol's default configuration at `latency` a call, labelled."""
    spec = busiest()
    return {**default_config(spec, simulated(latency)), "label": f"bench {spec.name}"}


def _measure(store: Store, runs: int, latency: float, concurrency: int,
             mode: str) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, calls) for `runs` runs in one event loop."""
    from engine import experiments as ex
    from engine.protocols import arun_config
    questions = _questions(runs)
    if mode == "none":  # the same scheduling, no store at all
        async def bare() -> int:
            gate = asyncio.Semaphore(concurrency)

            async def one(question: str) -> int:
                async with gate:
                    return len((await arun_config(_config(latency), question)).turns)
            return sum(await asyncio.gather(*(one(q) for q in questions)))
        wall, cpu = time.perf_counter(), time.process_time()
        calls = asyncio.run(bare())
        return time.perf_counter() - wall, time.process_time() - cpu, calls
    experiment_id = ex.create(store, {"questions": questions, "configs": [_config(latency)],
                                      "concurrency": concurrency, "source": "bench"})
    wall, cpu = time.perf_counter(), time.process_time()
    state = asyncio.run(ex.arun_experiment(store, experiment_id,
                                           batched=mode != "per-turn"))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if state.status != "completed":
        raise RuntimeError(f"bench experiment ended {state.status}: {state.error}")
    calls = int(store.runs(experiment_id=experiment_id)["calls"].sum())
    return wall, cpu, calls


def bench_experiments(runs: int = 200, latency: float = 0.05,
                      concurrency: int = 32) -> list[Row]:
    """Rows for the bench table: wall time against the lower bound, the ratio (target
    <= 1.5x), engine CPU per call, and the store's share (batched vs per-turn vs none)."""
    from engine.store import Store
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{Path(folder) / 'bench.db'}")
        _measure(store, 2, 0.0, 2, "batched")  # warm up: imports, caches, the schema
        results = {mode: _measure(store, runs, latency, concurrency, mode)
                   for mode in ("batched", "per-turn", "none")}
    wall, cpu, calls = results["batched"]
    spec = busiest()
    phases = waves(spec)
    bound = max(calls * latency / concurrency, phases * latency)
    run_bound = max(runs * phases * latency / concurrency, phases * latency)
    label = (f"{runs} {spec.name} runs, {calls} calls at {latency * 1000:.0f} ms, "
             f"{concurrency} at a time")
    rows += [
        fact(f"experiment: {label}: wall time", round(wall, 3), "s"),
        fact(f"experiment lower bound: max(calls x latency / concurrency, {phases} dependent "
             "calls x latency)",
             round(bound, 3), "s"),
        fact("experiment wall time / lower bound", round(wall / bound, 3), "x", "<= 1.5"),
        fact("experiment wall time / runs x critical path / concurrency "
             f"({run_bound:.2f} s; concurrency bounds runs, not calls)",
             round(wall / run_bound, 3), "x"),
        fact("experiment engine CPU time per call (process CPU / calls)",
             round(cpu / calls * 1000, 3), "ms"),
    ]
    for mode, title in (("per-turn", "a transaction per turn"), ("none", "no store")):
        other_wall, other_cpu, other_calls = results[mode]
        rows += [
            fact(f"experiment, {title}: wall time / lower bound",
                 round(other_wall / bound, 3), "x"),
            fact(f"experiment, {title}: CPU time per call",
                 round(other_cpu / other_calls * 1000, 3), "ms"),
        ]
    return rows
