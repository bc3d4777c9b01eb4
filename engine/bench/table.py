"""`python -m engine bench`: the benchmark table. Figures are measured here, never asserted in
tests.

The engine's throughput, per-call overhead and critical paths are measured here; every other
section comes from its own module (`SECTION_TABLE` lists them in the table's order). The peers and
local-model sections, minutes of other tools' or a real model's work, run only when `--only`
names them; the workers sections need PostgreSQL (`--db-url` or PARLEY_TEST_PG_URL).
Protocols are read from the registry, never named here. `--json` prints the rows with where
and when each section was measured; the docs' benchmark tables are rendered from that
(`engine.bench.docs`), never typed.
"""
from __future__ import annotations

import asyncio
import importlib
import itertools
import json
import math
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.messages import HumanMessage

from engine.bench.choice import default_config, simulated

if TYPE_CHECKING:
    from engine.store import Store

Row = dict[str, Any]


def fact(name: str, value: float, unit: str, target: str = "", note: str = "") -> Row:
    """One row of the bench table: a measured figure with its unit, the target it answers to
    and a note; every section builds its rows with it."""
    return {"name": name, "value": value, "unit": unit, "target": target, "note": note}


def bench_throughput(runs_each: int = 8) -> list[Row]:
    """Turns per second through the whole engine: every registry protocol's default
    configuration on a zero-latency simulated model, with and without the SQLite store."""
    from engine.protocols import REGISTRY, arun_config
    from engine.simulated import SimulatedChatModel
    from engine.store import Store

    async def rate(store: Store | None) -> float:
        """Turns per second over every protocol's default configuration, `runs_each` times."""
        turns, start = 0, time.perf_counter()
        for i in range(runs_each):
            for spec in REGISTRY.values():
                result = await arun_config(default_config(spec, simulated(0)),
                                           f"Question {i}: should the team adopt the plan?",
                                           store=store)
                turns += len(result.turns)
        return turns / (time.perf_counter() - start)

    with tempfile.TemporaryDirectory() as folder:
        with_store = asyncio.run(rate(Store(f"sqlite:///{Path(folder) / 'bench.db'}")))
        without_store = asyncio.run(rate(None))

        # Overhead: a call through the engine minus the same model's bare ainvoke.
        model = SimulatedChatModel()
        messages = [HumanMessage(content="Topic: x\n\nPresent your strongest opening argument.")]

        async def bare() -> None:
            for _ in range(200):
                await model.ainvoke(messages)

        bare_per_call = median_time(lambda: asyncio.run(bare())) / 200
    overhead_ms = max(0.0, (1 / with_store - bare_per_call) * 1000)
    overhead_no_store_ms = max(0.0, (1 / without_store - bare_per_call) * 1000)
    every = f"{len(REGISTRY)} protocols' defaults x {runs_each}"
    return [
        fact(f"engine throughput, {every}, zero-latency simulated model, SQLite store",
             round(with_store, 1), "turns/s"),
        fact("engine throughput, same, no store", round(without_store, 1), "turns/s"),
        fact("engine overhead per call, with store (engine call - bare model call)",
             round(overhead_ms, 2), "ms"),
        fact("engine overhead per call, no store", round(overhead_no_store_ms, 2), "ms"),
    ]


def bench_critical_path(latency: float = 0.05, repeats: int = 5) -> list[Row]:
    """Protocols whose calls run at once (their critical path is shorter than their calls):
    wall time at `latency` per call against the critical path the registry declares."""
    from engine.protocols import REGISTRY, estimate

    rows: list[Row] = []
    for spec in REGISTRY.values():
        config = default_config(spec, simulated(latency))
        cost = estimate(config)
        if cost["waves"] >= cost["calls"]:
            continue  # one call after another: nothing to overlap
        wall = median_run_ms(config, repeats)
        critical = cost["waves"] * latency * 1000
        serial = cost["calls"] * latency * 1000
        rows += [
            fact(f"{spec.name}, default seats, {cost['calls']} calls at {latency * 1000:.0f} ms:"
                 " wall time", round(wall, 1), "ms", f"within 10% of {critical:.0f} ms"),
            fact(f"{spec.name} wall time / critical path ({cost['waves']} call"
                 f"{'s' if cost['waves'] != 1 else ''} deep)",
                 round(wall / critical, 3), "x", "<= 1.10"),
            fact(f"{spec.name} wall time / calls one after another ({serial:.0f} ms)",
                 round(wall / serial, 3), "x"),
        ]
    return rows


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
        fact(f"fault soak: runs stored with a final status ({protocols} protocols, 20% errors,"
             " 10% time-outs, 10% empty, 10% malformed)", soak["runs"], "runs",
             f"{soak_runs}"),
        fact("fault soak: crashes", len(soak["crashes"]), "", "0"),
        fact("fault soak: invariant violations (unrecorded errors, invented fields)",
             len(soak["problems"]), "", "0"),
        fact("fault soak: degraded turns, each with its error recorded",
             soak["errors_recorded"], f"of {soak['turns']} turns"),
        fact("fault soak: wall time", round(soak["seconds"], 1), "s"),
        fact(f"concurrent writers: {writers} processes x {runs_each} runs, stored",
             writers_report["completed"], "runs", f"{writers * runs_each}"),
        fact("concurrent writers: 'database is locked' failures", writers_report["locked"],
             "", "0"),
        fact("concurrent writers: wall time", round(writers_report["seconds"], 1), "s"),
    ]


OPT_IN = ("local-model", "peers")  # sections that run only when `only` names them
# Every section of the table, in its order: (name `--only` matches, the module of
# `engine.bench` that measures it, its function, its arguments at full size and with `quick`).
SECTION_TABLE: tuple[tuple[str, str, str, dict[str, Any], dict[str, Any]], ...] = (
    ("throughput", "table", "bench_throughput", {"runs_each": 8}, {"runs_each": 2}),
    ("critical-path", "table", "bench_critical_path", {"repeats": 5}, {"repeats": 2}),
    ("reliability", "table", "bench_reliability", {},
     {"soak_runs": 60, "writers": 4, "runs_each": 25}),
    ("dashboard", "dashboard", "bench_dashboard", {"counts": [10000]}, {"counts": [1000]}),
    ("experiments", "experiments", "bench_experiments", {"runs": 200}, {"runs": 20}),
    ("experiment-results", "results", "bench_results", {"n": 20_000}, {"n": 2000}),
    ("live", "live", "bench_live", {"repeats": 200}, {"repeats": 20}),
    ("search", "search", "bench_search", {"n": 10000}, {"n": 1000}),
    ("browser", "browser", "bench_browser", {"n": 100_000}, {"n": 1000}),
    ("http", "http", "bench_http", {"count": 300, "runs": 200}, {"count": 60, "runs": 40}),
    ("peers", "peers", "bench_peers", {"count": 200}, {"count": 40}),
    ("local-model", "localmodel", "bench_local_model", {"runs_each": 2}, {"runs_each": 1}),
    ("workers", "workers", "bench_workers", {"runs": 2000}, {"runs": 200}),
    ("worker-overhead", "workers", "bench_worker_overhead", {"repeats": 5}, {"repeats": 3}),
    ("otel", "otel", "bench_otel", {"runs": 200}, {"runs": 20}),
)


SECTIONS = tuple(row[0] for row in SECTION_TABLE)


def _chosen(name: str, only: list[str] | None) -> bool:
    if only:
        return any(o in name for o in only)
    return name not in OPT_IN


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _commit() -> str:
    """The checkout's commit (read-only `git rev-parse`), "" outside a git checkout."""
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10, cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def command(section: str, quick: bool = False, sizes: Sequence[int] | None = None) -> str:
    """The command that measures `section` again."""
    chosen = (f" --sizes {','.join(str(n) for n in sizes)}"
              if sizes and section == "dashboard" else "")
    return f"python -m engine bench --only {section}" + (" --quick" if quick else "") + chosen


def collect(quick: bool = False, only: list[str] | None = None, base_url: str | None = None,
            db_url: str | None = None, remark: str = "", sizes: Sequence[int] | None = None
            ) -> list[Row]:
    """Every chosen section's rows, each with where and when it was measured: its section, the
    command that measures it again, the UTC time the section ended, its wall time, the load
    average (1, 5, 15 min: `os.getloadavg()`, what `uptime` prints) before and after it, the
    machine's CPUs, the commit and `remark` (what else the machine was doing). `sizes`: the
    dashboard's stored-run counts, a set of rows each (default 10,000; 1,000 with `quick`)."""
    given: dict[str, dict[str, Any]] = {  # the arguments a section takes from the command
        "dashboard": {"counts": list(sizes)} if sizes else {},
        "local-model": {"base_url": base_url},
        "workers": {"db_url": db_url}, "worker-overhead": {"db_url": db_url}}
    rows: list[Row] = []
    commit, cpus = _commit(), os.cpu_count()
    for name, module, function, full, small in SECTION_TABLE:
        if not _chosen(name, only):
            continue
        load_before, start = _load(), time.perf_counter()
        # its module imported only when the section runs
        found = getattr(importlib.import_module(f"engine.bench.{module}"), function)(
            **{**(small if quick else full), **given.get(name, {})})
        seconds = round(time.perf_counter() - start, 1)
        when = datetime.now(UTC).isoformat(timespec="seconds")
        context = {"command": command(name, quick, sizes), "measured_at": when, "seconds": seconds,
                   "load_before": load_before, "load_after": _load(), "cpus": cpus,
                   "commit": commit, "remark": remark}
        rows += [{"section": name, **row, **context} for row in found]
    return rows


def to_json(rows: list[Row]) -> str:
    """`rows` as one JSON document (`{"format": 1, "rows": [...]}`, a row a line, so a diff
    shows which figures moved); a figure that could not be measured (NaN) is null."""
    def clean(value: Any) -> Any:
        return None if isinstance(value, float) and not math.isfinite(value) else value
    lines = [json.dumps({key: clean(value) for key, value in row.items()},
                        ensure_ascii=False, allow_nan=False) for row in rows]
    return '{"format": 1, "rows": [\n' + ",\n".join(lines) + "\n]}"


def format_table(rows: list[Row]) -> str:
    header = ("benchmark", "value", "unit", "target")
    body = [(r["name"] + (f" [{r['note']}]" if r.get("note") else ""), f"{r['value']:g}",
             r["unit"], r.get("target", "")) for r in rows]
    widths = [max(len(str(x[i])) for x in [header, *body]) for i in range(4)]
    lines = [" | ".join(str(c).ljust(w) for c, w in zip(header, widths)),
             "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in body]
    return "\n".join(lines)


def median_time(work: Callable[[], Any], repeats: int = 3) -> float:
    """The median wall time of `repeats` calls of `work`, in seconds."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def median_run_ms(config: dict[str, Any], repeats: int) -> float:
    """The median wall time of `repeats` runs of `config`, each on a question of its own, in
    milliseconds."""
    from engine.protocols import arun_config
    questions = (f"Question {i}: should we adopt the plan?" for i in itertools.count())
    return median_time(lambda: asyncio.run(arun_config(config, next(questions))), repeats) * 1000


def timed(name: str, work: Callable[[], Any], target: str = "", repeats: int = 3) -> Row:
    """A row of seconds: the median wall time of `repeats` calls of `work` (`median_time`)."""
    return fact(name, round(median_time(work, repeats), 3), "s", target)
