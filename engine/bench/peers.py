"""Parley beside its peers (`python -m engine bench --only peers`): the same questions through
Parley, Inspect and promptfoo against one loopback OpenAI-compatible server.

The job is the one a user with an endpoint and a question list runs: `count` one-call
questions, `concurrency` in flight, against the server `engine.bench.http` starts (no latency,
then 0.2 s a call). Each side is one whole process started as its user starts it, timed from
start to exit, its peak RSS read from the kernel's accounting of that process (`os.wait4`):

- Parley: `python -m engine experiment run SPEC.yaml --yes --quiet`, the cheapest protocol (one
  call a run) on `openai:bench?base_url=...`, every run and turn stored in a new SQLite file;
- Inspect: `inspect eval TASK.py --model openai-api/bench/bench` with the server as the
  service's base URL (`BENCH_BASE_URL`), `--max-connections` and `--max-samples` the
  concurrency, a `generate()` solver and an `includes()` scorer, its log (JSON) in a temporary
  folder;
- promptfoo: `promptfoo eval -c CONFIG.yaml -j CONCURRENCY --no-cache` with an
  `openai:chat:bench` provider whose `apiBaseUrl` is the server, one test a question with a
  `contains` assertion, its results in a temporary file, telemetry and update checks off.

A peer whose command is not on PATH is not measured: its rows say so and how to install it
(`INSTALL`). Ratios are Parley's time over each peer's, from one run of this section, so the
machine's load weighs on every side alike. Figures are measured here, never asserted in tests.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.bench.http import MODEL, cli_command, questions, serving
from engine.bench.serving import high_water_mb
from engine.bench.table import Row, fact

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 1800.0  # seconds one side may take before it counts as failed

# How to install each peer; neither is in Parley's requirements.
INSTALL = {
    "Inspect": "pip install inspect-ai",
    "promptfoo": "npm install -g promptfoo",
}
COMMANDS = {"Inspect": "inspect", "promptfoo": "promptfoo"}


@dataclass(frozen=True)
class Outcome:
    """One side's whole process: wall time (s), peak RSS (MB), questions answered and failed."""

    seconds: float
    peak_mb: float
    answered: int
    failed: int


def timed(command: list[str], folder: Path, env: Mapping[str, str] | None = None,
          may_fail: bool = False) -> tuple[float, float]:
    """Run `command` in `folder` to its end: (wall seconds, peak RSS in MB of the process or
    of the largest of its children, read every 50 ms while they run: `ru_maxrss` would be at
    least the bench's own peak, which a child keeps from the fork). RuntimeError, with the
    end of its output, when it exits non-zero (unless `may_fail`: its caller reads what it
    wrote instead) or outlives `TIMEOUT`."""
    log_path = folder / "output.log"
    with open(log_path, "w+", encoding="utf-8") as log:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=folder,
                                   env={**os.environ, **(env or {})})
        deadline = start + TIMEOUT
        peak = 0.0
        while True:
            peak = max(peak, *(high_water_mb(pid) for pid in _tree(process.pid)))
            pid, status = os.waitpid(process.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                process.kill()
                process.wait()
                raise RuntimeError(f"{command[0]} ran past {TIMEOUT:g} s")
            time.sleep(0.05)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0 and not may_fail:
            log.seek(0)
            raise RuntimeError(f"{' '.join(command[:3])} exited {process.returncode}: "
                               f"{log.read()[-2000:]}")
    return seconds, peak


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants alive now (Linux's /proc children lists)."""
    found, index = [pid], 0
    while index < len(found):
        for task in Path(f"/proc/{found[index]}/task").glob("*/children"):
            try:
                found += [int(child) for child in task.read_text().split()]
            except (OSError, ValueError):
                pass
        index += 1
    return found


# ------------------------------------------------------------------ Parley
def run_parley(base_url: str, count: int, concurrency: int, folder: Path) -> Outcome:
    """An experiment through the CLI, every run stored in a new SQLite file."""
    seconds, peak = timed(cli_command(base_url, count, concurrency, folder), folder,
                          {"PYTHONPATH": str(ROOT)})
    with sqlite3.connect(folder / "bench.db") as db:
        done = dict(db.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall())
    answered = int(done.get("completed", 0))
    return Outcome(seconds, peak, answered, sum(done.values()) - answered)


# ------------------------------------------------------------------ Inspect
INSPECT_TASK = '''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

QUESTIONS = {questions}


@task
def bench():
    return Task(dataset=[Sample(input=q, target="42") for q in QUESTIONS],
                solver=generate(), scorer=includes())
'''


def run_inspect(base_url: str, count: int, concurrency: int, folder: Path) -> Outcome:
    """`inspect eval` of the questions with an openai-api model at the server."""
    (folder / "task.py").write_text(INSPECT_TASK.format(questions=repr(questions(count))),
                                    encoding="utf-8")
    logs = folder / "logs"
    seconds, peak = timed(
        [COMMANDS["Inspect"], "eval", "task.py", "--model", f"openai-api/bench/{MODEL}",
         "--max-connections", str(concurrency), "--max-samples", str(concurrency),
         "--log-dir", str(logs), "--log-format", "json", "--display", "none"], folder,
        {"BENCH_BASE_URL": base_url, "BENCH_API_KEY": "not-needed",
         "INSPECT_DISPLAY": "none"})
    answered = failed = 0
    for log in logs.glob("*.json"):  # the eval's log: its status and results
        header = json.loads(log.read_text(encoding="utf-8"))
        changed = sorted(set((header.get("plan") or {}).get("config") or {})
                         - {"max_connections", "max_samples"})
        if changed:  # a cache or batching on that the command never asked for
            raise RuntimeError(f"Inspect ran with options the bench did not give: {changed} "
                               "(see docs/benchmarks.md, Beside Inspect and promptfoo)")
        completed = int((header.get("results") or {}).get("completed_samples") or 0)
        answered += completed if header.get("status") == "success" else 0
        failed += count - completed
    return Outcome(seconds, peak, answered, failed)


# ------------------------------------------------------------------ promptfoo
def run_promptfoo(base_url: str, count: int, concurrency: int, folder: Path) -> Outcome:
    """`promptfoo eval` of the questions with an openai provider at the server."""
    (folder / "promptfooconfig.yaml").write_text(json.dumps({  # JSON is YAML
        "description": "peers bench",
        "prompts": ["{{question}}"],
        "providers": [{"id": f"openai:chat:{MODEL}",
                       "config": {"apiBaseUrl": base_url, "apiKey": "not-needed"}}],
        "tests": [{"vars": {"question": q}, "assert": [{"type": "contains", "value": "42"}]}
                  for q in questions(count)]}), encoding="utf-8")
    out = folder / "results.json"
    seconds, peak = timed(
        [COMMANDS["promptfoo"], "eval", "-c", "promptfooconfig.yaml", "-j", str(concurrency),
         "--no-cache", "--no-table", "--no-progress-bar", "-o", str(out)], folder,
        {"PROMPTFOO_DISABLE_TELEMETRY": "1", "PROMPTFOO_DISABLE_UPDATE": "1",
         "PROMPTFOO_CONFIG_DIR": str(folder / "promptfoo-home"),
         "PROMPTFOO_PASS_RATE_THRESHOLD": "0"}, may_fail=True)
    # On Node 20 promptfoo may exit 1 after writing its results (its logger written to after
    # it closed): the results file says what was answered; without it the run failed.
    if not out.exists():
        raise RuntimeError("promptfoo wrote no results: "
                           + (folder / "output.log").read_text(encoding="utf-8")[-2000:])
    stats = (json.loads(out.read_text(encoding="utf-8")).get("results") or {}).get("stats") or {}
    answered = int(stats.get("successes", 0)) + int(stats.get("failures", 0))
    return Outcome(seconds, peak, answered, int(stats.get("errors", 0)))


SIDES: dict[str, Callable[[str, int, int, Path], Outcome]] = {
    "Parley": run_parley, "Inspect": run_inspect, "promptfoo": run_promptfoo}


def installed(peer: str) -> bool:
    """Whether `peer`'s command is on PATH (Parley always is)."""
    return peer not in COMMANDS or shutil.which(COMMANDS[peer]) is not None


def rows_at(latency: float, count: int, concurrency: int) -> list[Row]:
    """Every side's rows at one latency, then Parley's ratios to each peer measured."""
    shown = f"{latency * 1000:.0f} ms" if latency else "no latency"
    label = f"{count} one-call questions, {concurrency} at once, {shown}"
    found: dict[str, Outcome] = {}
    rows: list[Row] = []
    with serving(latency) as (url, _):
        for side, run in SIDES.items():
            seconds = peak = float("nan")
            note = memory = f"skipped: not installed ({INSTALL.get(side)})"
            if installed(side):
                with tempfile.TemporaryDirectory() as folder:
                    outcome = found[side] = run(url, count, concurrency, Path(folder))
                seconds, peak = round(outcome.seconds, 2), round(outcome.peak_mb, 1)
                note, memory = f"{outcome.answered} answered, {outcome.failed} failed", ""
            rows += [fact(f"{label}: {side}, whole process", seconds, "s", note=note),
                     fact(f"{label}: {side}, peak RSS", peak, "MB", note=memory)]
    parley = found["Parley"]
    targets = {"Inspect": ("<= 1", "<= Inspect + 50 MB"), "promptfoo": ("<= 1.5", "")}
    for peer, (target, memory) in targets.items():
        if peer not in found:
            note = f"skipped: {peer} not installed ({INSTALL[peer]})"
            rows.append(fact(f"{label}: Parley / {peer}, whole process", float("nan"), "x",
                             target, note))
            continue
        rows.append(fact(f"{label}: Parley / {peer}, whole process",
                         round(parley.seconds / found[peer].seconds, 2), "x", target))
        if memory:
            rows.append(fact(f"{label}: Parley - {peer}, peak RSS",
                             round(parley.peak_mb - found[peer].peak_mb, 1), "MB", "<= 50"))
    return rows


def bench_peers(count: int = 200, concurrency: int = 32) -> list[Row]:
    """Every row of the section (see the module): no latency, then 0.2 s a call."""
    return [*rows_at(0.0, count, concurrency), *rows_at(0.2, count, concurrency)]
