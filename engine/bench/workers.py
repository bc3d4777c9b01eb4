"""The workers rows of `python -m engine bench`: one experiment through a pool of 1, 2 and 4
worker processes on PostgreSQL.

`runs` runs of the busiest protocol (`engine.bench.choice`) on `simulated?latency=L`, queued with
`python -m engine experiment run SPEC --workers --wait` for workers started with
`python -m engine worker --concurrency K`. A worker runs K cells (runs) at once, and a run can
never beat its critical path of W dependent calls (the protocol's `estimate_waves`), so the lower
bound is runs x W x L / (workers x K): every slot busy from first to last with runs that take
exactly their critical path. The wall time is the submitting command's, from queueing to the
last run's end (the workers are started, and have said so, before it); the span is the pool's
own, from the first run's start to the last run's end. It needs a PostgreSQL
URL (`--db-url`, else PARLEY_TEST_PG_URL); without one the rows say "not measured".
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from engine.bench.choice import busiest, waves
from engine.bench.serving import served
from engine.bench.table import Row, fact

ROOT = Path(__file__).resolve().parent.parent.parent
READY = "worker on "  # what a worker prints once it serves the pool


def _spec(folder: Path, runs: int, latency: float, name: str) -> Path:
    from engine.bench.experiments import _config, _questions
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"name": name, "questions": _questions(runs),
                                "configs": [_config(latency)]}), encoding="utf-8")
    return path


def _engine(*args: str) -> list[str]:
    return [sys.executable, "-m", "engine", *args]


def _experiment(url: str, folder: Path, runs: int, latency: float, concurrency: int,
                workers: int, name: str) -> tuple[float, float, int, int]:
    """(the submitting command's wall seconds, the span from the first run's start to the last
    run's end, calls, runs stored) of one experiment called `name`: run in process at
    `concurrency` runs at once (`workers` 0, `experiment run --concurrency K`), or queued for
    `workers` workers started with `--concurrency K` (`--workers --wait`)."""
    from engine.experiments import list_experiments
    from engine.store import Store
    spec = _spec(folder, runs, latency, name)
    extra = ["--workers", "--wait"] if workers else ["--concurrency", str(concurrency)]
    with ExitStack() as pool:  # each worker started once it says it serves; stopped after
        for _ in range(workers):
            pool.enter_context(served(_engine("worker", "--concurrency", str(concurrency), "--db",
                                              url), READY, "a bench worker", 120, cwd=ROOT,
                                      start_new_session=True))
        started = time.perf_counter()
        done = subprocess.run(_engine("experiment", "run", str(spec), *extra, "--yes", "--quiet",
                                      "--db", url), cwd=ROOT, capture_output=True, text=True,
                              timeout=3600)
        wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"bench experiment {name} failed: "
                           f"{(done.stderr or done.stdout)[-500:]}")
    store = Store(url)
    listed = list_experiments(store)
    table = store.runs(experiment_id=str(listed[listed["name"] == name]["id"].iloc[0]))
    store.close()
    span = (table["finished_at"].max() - table["created_at"].min()).total_seconds()
    return wall, span, int(table["calls"].sum()), len(table)


def _unmeasured(label: str) -> list[Row]:
    return [fact(f"{label}: not measured (needs PostgreSQL: --db-url or PARLEY_TEST_PG_URL)",
                 0, "")]


def bench_workers(db_url: str | None = None, runs: int = 2000, latency: float = 0.05,
                  counts: tuple[int, ...] = (1, 2, 4), concurrency: int = 4) -> list[Row]:
    """Rows for the bench table: per pool size, the wall time and its ratio to the lower
    bound runs x W x L / (workers x K); "not measured" without a PostgreSQL URL."""
    url = db_url or os.environ.get("PARLEY_TEST_PG_URL")
    spec = busiest()
    depth = waves(spec)
    label = f"{runs} {spec.name} runs at {latency * 1000:.0f} ms per call"
    if not url:
        return _unmeasured(f"workers: {label}")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        for count in counts:
            name = f"bench-workers-{count}x{concurrency}-{time.strftime('%H%M%S')}"
            wall, span, calls, _ = _experiment(url, Path(folder), runs, latency, concurrency,
                                               count, name)
            bound = runs * depth * latency / (count * concurrency)
            rows += [
                fact(f"workers: {label}, {calls} calls, {count} worker(s) x {concurrency} "
                     "runs at once: wall time", round(wall, 2), "s"),
                fact(f"workers: {count} worker(s): wall / lower bound (runs x {depth} dependent"
                     f" calls x latency / (workers x {concurrency}) = {bound:.1f} s)",
                     round(wall / bound, 3), "x"),
                fact(f"workers: {count} worker(s): first run's start to last run's end "
                     "(the wall time less queueing and following)", round(span, 2), "s"),
                fact(f"workers: {count} worker(s): that span / lower bound",
                     round(span / bound, 3), "x"),
            ]
    return rows


def bench_worker_overhead(db_url: str | None = None, runs: int = 200, latency: float = 0.05,
                          concurrency: int = 32, repeats: int = 5) -> list[Row]:
    """One worker against the in-process runner at `concurrency` runs at once: the same
    experiment on the same PostgreSQL, in process then on one worker, back to back,
    `repeats` times (so the machine's load falls on both alike). Rows: each runner's median
    span (first run's start to last run's end) and the median of the per-pair ratios, the
    target being 1.3x."""
    import statistics
    url = db_url or os.environ.get("PARLEY_TEST_PG_URL")
    spec = busiest()
    label = (f"worker overhead: {runs} {spec.name} runs at {latency * 1000:.0f} ms per call, "
             f"{concurrency} at once")
    if not url:
        return _unmeasured(label)
    inside: list[float] = []
    pooled: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        for number in range(repeats):
            for workers, spans in ((0, inside), (1, pooled)):  # in process, then one worker
                name = (f"bench-overhead-{'worker' if workers else 'inprocess'}-{number}-"
                        f"{time.strftime('%H%M%S')}")
                _, span, _, stored = _experiment(url, Path(folder), runs, latency, concurrency,
                                                 workers, name)
                if stored != runs:
                    raise RuntimeError(f"bench experiment {name} stored {stored} runs, not {runs}")
                spans.append(span)
    ratios = sorted(p / i for p, i in zip(pooled, inside, strict=True))
    bound = runs * waves(spec) * latency / concurrency
    return [
        fact(f"{label}: in process, median span (lower bound {bound:.2f} s)",
             round(statistics.median(inside), 2), "s"),
        fact(f"{label}: one worker, median span", round(statistics.median(pooled), 2), "s"),
        fact(f"{label}: one worker / in process, median of {repeats} pairs "
             f"(range {ratios[0]:.2f}-{ratios[-1]:.2f})",
             round(statistics.median(ratios), 2), "x", "<= 1.3"),
    ]
