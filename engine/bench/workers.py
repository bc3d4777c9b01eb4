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
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from engine.bench.choice import busiest, default_config, waves
from engine.bench.table import fact

ROOT = Path(__file__).resolve().parent.parent.parent
READY = "worker on "  # what a worker prints once it serves the pool


def _spec(folder: Path, runs: int, latency: float, name: str) -> Path:
    from engine.bench.experiments import _questions
    spec = busiest()
    config = {**default_config(spec, f"simulated?latency={latency:g}"),
              "label": f"bench {spec.name}"}
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"name": name, "questions": _questions(runs),
                                "configs": [config]}), encoding="utf-8")
    return path


def _engine(*args: str) -> list[str]:
    return [sys.executable, "-m", "engine", *args]


def _start_workers(url: str, count: int, concurrency: int, folder: Path
                   ) -> list[subprocess.Popen]:
    """`count` workers, each with its log file; returns once every one has said it serves."""
    workers = []
    for number in range(count):
        log = (folder / f"worker-{count}-{number}.log").open("w", encoding="utf-8")
        workers.append(subprocess.Popen(
            _engine("worker", "--concurrency", str(concurrency), "--db", url), cwd=ROOT,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    deadline = time.monotonic() + 120
    logs = [folder / f"worker-{count}-{number}.log" for number in range(count)]
    while not all(READY in log.read_text(encoding="utf-8") for log in logs):
        if time.monotonic() > deadline or any(w.poll() is not None for w in workers):
            _stop(workers)
            raise RuntimeError("a bench worker did not start: "
                               + " | ".join(log.read_text(encoding="utf-8")[-500:]
                                            for log in logs))
        time.sleep(0.1)
    return workers


def _stop(workers: list[subprocess.Popen]) -> None:
    for worker in workers:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
    for worker in workers:
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()


def _measure(url: str, workers: int, concurrency: int, runs: int, latency: float,
             folder: Path) -> tuple[float, float, int]:
    """(wall seconds, the pool's seconds from the first run's start to the last run's end,
    calls) for one experiment of `runs` runs through `workers` workers."""
    from engine.experiments import list_experiments
    from engine.store import Store
    name = f"bench workers {workers}x{concurrency} {time.strftime('%H%M%S')}"
    spec = _spec(folder, runs, latency, name.replace(" ", "-"))
    pool = _start_workers(url, workers, concurrency, folder)
    try:
        started = time.perf_counter()
        done = subprocess.run(_engine("experiment", "run", str(spec), "--workers", "--wait",
                                      "--yes", "--quiet", "--db", url), cwd=ROOT,
                              capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - started
    finally:
        _stop(pool)
    if done.returncode != 0:
        raise RuntimeError(f"bench experiment on {workers} workers failed: "
                           f"{(done.stderr or done.stdout)[-500:]}")
    store = Store(url)
    listed = list_experiments(store)
    found = listed[listed["name"] == name.replace(" ", "-")]
    table = store.runs(experiment_id=str(found["id"].iloc[0]))
    span = (table["finished_at"].max() - table["created_at"].min()).total_seconds()
    return wall, span, int(table["calls"].sum())


def bench_workers(db_url: str | None = None, runs: int = 2000, latency: float = 0.05,
                  counts: tuple[int, ...] = (1, 2, 4), concurrency: int = 4) -> list[dict]:
    """Rows for the bench table: per pool size, the wall time and its ratio to the lower
    bound runs x W x L / (workers x K); "not measured" without a PostgreSQL URL."""
    url = db_url or os.environ.get("PARLEY_TEST_PG_URL")
    spec = busiest()
    depth = waves(spec)
    label = f"{runs} {spec.name} runs at {latency * 1000:.0f} ms per call"
    if not url:
        return [fact(f"workers: {label}: not measured (needs PostgreSQL: --db-url or "
                     "PARLEY_TEST_PG_URL)", 0, "")]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as folder:
        for count in counts:
            wall, span, calls = _measure(url, count, concurrency, runs, latency, Path(folder))
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


def _span(url: str, name: str) -> tuple[float, int]:
    """(seconds from the first run's start to the last run's end, runs) of the experiment
    called `name`."""
    from engine.experiments import list_experiments
    from engine.store import Store
    listed = list_experiments(Store(url))
    found = listed[listed["name"] == name]
    table = Store(url).runs(experiment_id=str(found["id"].iloc[0]))
    return (table["finished_at"].max() - table["created_at"].min()).total_seconds(), len(table)


def _one(url: str, folder: Path, runs: int, latency: float, concurrency: int, pooled: bool,
         number: int) -> float:
    """The span of one experiment run in process (`experiment run --concurrency K`) or on
    one worker started with `--concurrency K` (`--workers --wait`)."""
    name = f"bench-overhead-{'worker' if pooled else 'inprocess'}-{number}-" \
           f"{time.strftime('%H%M%S')}"
    spec = _spec(folder, runs, latency, name)
    pool = _start_workers(url, 1, concurrency, folder) if pooled else []
    try:
        extra = ["--workers", "--wait"] if pooled else ["--concurrency", str(concurrency)]
        done = subprocess.run(_engine("experiment", "run", str(spec), *extra, "--yes",
                                      "--quiet", "--db", url), cwd=ROOT,
                              capture_output=True, text=True, timeout=3600)
    finally:
        _stop(pool)
    if done.returncode != 0:
        raise RuntimeError(f"bench experiment {name} failed: "
                           f"{(done.stderr or done.stdout)[-500:]}")
    span, stored = _span(url, name)
    if stored != runs:
        raise RuntimeError(f"bench experiment {name} stored {stored} runs, not {runs}")
    return span


def bench_worker_overhead(db_url: str | None = None, runs: int = 200, latency: float = 0.05,
                          concurrency: int = 32, repeats: int = 5) -> list[dict]:
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
        return [fact(f"{label}: not measured (needs PostgreSQL: --db-url or "
                     "PARLEY_TEST_PG_URL)", 0, "")]
    inside: list[float] = []
    pooled: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        for number in range(repeats):
            inside.append(_one(url, Path(folder), runs, latency, concurrency, False, number))
            pooled.append(_one(url, Path(folder), runs, latency, concurrency, True, number))
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


def _args(argv: list[str]) -> Any:
    import argparse
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db-url")
    parser.add_argument("--runs", type=int, default=2000)
    return parser.parse_args(argv)


if __name__ == "__main__":
    from engine.bench.table import format_table
    options = _args(sys.argv[1:])
    print(format_table(bench_workers(options.db_url, options.runs)))
