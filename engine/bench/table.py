"""`python -m engine bench`: the benchmark table. Figures are measured here, never asserted in tests.

Rows: engine throughput and per-call overhead on a zero-latency simulated model (with the
store), the panel's wall time against its critical path, then the dashboard and experiment
rows from their own modules.
"""
from __future__ import annotations

import asyncio
import importlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

Row = dict[str, Any]


def _row(name: str, value: float, unit: str, target: str = "", note: str = "") -> Row:
    return {"name": name, "value": value, "unit": unit, "target": target, "note": note}


def bench_throughput(debates: int = 40) -> list[Row]:
    """Turns per second through the whole engine (debate, simulated, SQLite store)."""
    from engine.protocols.debate import arun_debate
    from engine.simulated import SimulatedChatModel
    from engine.store import Store

    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{Path(folder) / 'bench.db'}")
        model = SimulatedChatModel()

        async def many() -> int:
            turns = 0
            for i in range(debates):
                result = await arun_debate(f"Should team {i} adopt the plan?", proponent=model,
                                           opponent=model, judge=model, max_rounds=3,
                                           store=store)
                turns += len(result.turns)
            return turns

        start = time.perf_counter()
        turns = asyncio.run(many())
        with_store = turns / (time.perf_counter() - start)

        async def many_without_store() -> int:
            turns = 0
            for i in range(debates):
                result = await arun_debate(f"Should team {i} adopt the plan?", proponent=model,
                                           opponent=model, judge=model, max_rounds=3)
                turns += len(result.turns)
            return turns

        start = time.perf_counter()
        turns = asyncio.run(many_without_store())
        without_store = turns / (time.perf_counter() - start)

        # Overhead: a call through the engine minus the same model's bare ainvoke.
        messages = [HumanMessage(content="Topic: x\n\nPresent your strongest opening argument.")]

        async def bare(n: int) -> float:
            begin = time.perf_counter()
            for _ in range(n):
                await model.ainvoke(messages)
            return (time.perf_counter() - begin) / n

        bare_per_call = statistics.median(asyncio.run(bare(200)) for _ in range(3))
    engine_per_call = 1 / with_store
    overhead_ms = max(0.0, (engine_per_call - bare_per_call) * 1000)
    overhead_no_store_ms = max(0.0, (1 / without_store - bare_per_call) * 1000)
    return [
        _row("engine throughput, debate on zero-latency simulated model, SQLite store",
             round(with_store, 1), "turns/s"),
        _row("engine throughput, same, no store", round(without_store, 1), "turns/s"),
        _row("engine overhead per call, with store (engine call - bare model call)",
             round(overhead_ms, 2), "ms"),
        _row("engine overhead per call, no store", round(overhead_no_store_ms, 2), "ms"),
    ]


def bench_panel(latency: float = 0.05, repeats: int = 5) -> list[Row]:
    """A three-debater panel at `latency` per call: wall time vs critical path vs serial."""
    try:
        from engine.protocols.panel import arun_panel
    except ImportError:
        return [_row("panel wall time", float("nan"), "ms", note="panel not available")]
    from engine.models import Seat
    from engine.simulated import SimulatedChatModel

    model = SimulatedChatModel(latency=latency)
    seats = [Seat(n, model, persona=f"You are the {n.upper()} debater.")
             for n in ("cautious", "creative", "literal")]
    walls = []
    for i in range(repeats):
        start = time.perf_counter()
        result = asyncio.run(arun_panel(f"Question {i}: should we adopt the plan?",
                                        debaters=seats, critic=Seat("critic", model),
                                        judge=Seat("judge", model)))
        walls.append(time.perf_counter() - start)
        calls = len(result.turns)
    wall = statistics.median(walls) * 1000
    critical = 4 * latency * 1000
    serial = calls * latency * 1000
    return [
        _row(f"panel, 3 debaters, {calls} calls at {latency * 1000:.0f} ms: wall time",
             round(wall, 1), "ms", f"within 10% of {critical:.0f} ms"),
        _row("panel wall time / critical path (4 dependent phases)",
             round(wall / critical, 3), "x", "<= 1.10"),
        _row(f"panel wall time / calls one after another ({serial:.0f} ms)",
             round(wall / serial, 3), "x"),
    ]


def bench_reliability(soak_runs: int = 500, writers: int = 4, runs_each: int = 250
                      ) -> list[Row]:
    """The fault soak and the concurrent writers at full size (tests run them smaller)."""
    from engine.bench.reliability import concurrent_writers, fault_soak
    from engine.store import Store

    with tempfile.TemporaryDirectory() as folder:
        soak = fault_soak(Store(f"sqlite:///{Path(folder) / 'soak.db'}"), runs=soak_runs)
        writers_report = concurrent_writers(f"sqlite:///{Path(folder) / 'writers.db'}",
                                            writers, runs_each)
    protocols = len(soak["protocols"])
    return [
        _row(f"fault soak: runs stored with a final status ({protocols} protocols, 20% errors,"
             " 10% time-outs, 10% empty, 10% malformed)", soak["runs"], "runs",
             f"{soak_runs}"),
        _row("fault soak: crashes", len(soak["crashes"]), "", "0"),
        _row("fault soak: invariant violations (unrecorded errors, invented fields)",
             len(soak["problems"]), "", "0"),
        _row("fault soak: degraded turns, each with its error recorded",
             soak["errors_recorded"], f"of {soak['turns']} turns"),
        _row("fault soak: wall time", round(soak["seconds"], 1), "s"),
        _row(f"concurrent writers: {writers} processes x {runs_each} runs, stored",
             writers_report["completed"], "runs", f"{writers * runs_each}"),
        _row("concurrent writers: 'database is locked' failures", writers_report["locked"],
             "", "0"),
        _row("concurrent writers: wall time", round(writers_report["seconds"], 1), "s"),
    ]


OPTIONAL = (("engine.bench.dashboard", "bench_dashboard"), ("engine.bench.experiments",
                                                     "bench_experiments"),
            ("engine.bench.live", "bench_live"))


def collect(quick: bool = False, only: list[str] | None = None) -> list[Row]:
    sections: list[tuple[str, Any]] = [
        ("throughput", lambda: bench_throughput(10 if quick else 40)),
        ("panel", lambda: bench_panel(repeats=2 if quick else 5)),
        ("reliability", lambda: bench_reliability(60, 4, 25) if quick else bench_reliability()),
    ]
    for module_name, function_name in OPTIONAL:
        try:
            function = getattr(importlib.import_module(module_name), function_name)
        except (ImportError, AttributeError):
            continue
        size = {"bench_dashboard": {"n": 1000 if quick else 10000},
                "bench_experiments": {"runs": 20 if quick else 200},
                "bench_live": {"repeats": 20 if quick else 200}}[function_name]
        sections.append((function_name.removeprefix("bench_"),
                         lambda f=function, s=size: f(**s)))
    rows: list[Row] = []
    for name, run in sections:
        if only and not any(o in name for o in only):
            continue
        rows.extend(run())
    return rows


def format_table(rows: list[Row]) -> str:
    header = ("benchmark", "value", "unit", "target")
    body = [(r["name"] + (f" [{r['note']}]" if r.get("note") else ""), f"{r['value']:g}",
             r["unit"], r.get("target", "")) for r in rows]
    widths = [max(len(str(x[i])) for x in [header, *body]) for i in range(4)]
    lines = [" | ".join(str(c).ljust(w) for c, w in zip(header, widths)),
             "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in body]
    return "\n".join(lines)


def main(quick: bool = False, only: list[str] | None = None) -> int:
    print(format_table(collect(quick=quick, only=only)), flush=True)
    return 0
