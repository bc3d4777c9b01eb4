"""Issue 16, Done when: a shared endpoint limit holds across two pool workers. Two
`python -m engine worker` processes take the cells of one experiment whose seats call the
loopback server through an endpoint with `rpm` set; the request times the server records
never exceed the rate by more than one burst in any window, and the limit did bind (the calls
took as long as the rate makes them). Needs PostgreSQL (PARLEY_TEST_PG_URL; `.ci/run` sets it).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from openai_stub import SimulatedOpenAI
from sqlalchemy import text

from engine.llm.limits import burst
from engine.store import Store

ROOT = Path(__file__).resolve().parent.parent


def _most_in_window(times: list[float], width: float) -> int:
    return max(sum(1 for t in times if start <= t < start + width) for start in times)


def test_two_workers_share_an_endpoints_rpm(pg_url, tmp_path):  # noqa: F811
    rpm, cells = 240, 6  # 4 a second, a burst of 4; 6 panels of 8 calls each
    with SimulatedOpenAI() as server:
        env = {**os.environ, "PYTHONIOENCODING": "utf-8", "PARLEY_ENDPOINTS": json.dumps(
            {"stub": {"base_url": server.base_url, "rpm": rpm}})}
        logs = [tmp_path / f"worker{i}.log" for i in range(2)]
        workers = []
        for log in logs:
            with log.open("a", encoding="utf-8") as out:
                workers.append(subprocess.Popen(
                    [sys.executable, "-m", "engine", "worker", "--db", pg_url,
                     "--concurrency", "4", "--heartbeat", "2"], cwd=ROOT, env=env,
                    stdout=out, stderr=subprocess.STDOUT))
        spec = tmp_path / "spec.yaml"
        spec.write_text(json.dumps({
            "name": "limited", "concurrency": 8,
            "questions": [f"Question {i}: is {i + 2} prime?" for i in range(cells)],
            "configs": [{"protocol": "panel", "label": "panel",
                         "model": "openai:limited?endpoint=stub"}]}), encoding="utf-8")
        try:
            submitted = subprocess.run(
                [sys.executable, "-m", "engine", "experiment", "run", str(spec), "--db", pg_url,
                 "--workers", "--wait", "--quiet", "--yes"], cwd=ROOT, env=env,
                capture_output=True, text=True, timeout=300)
            assert submitted.returncode == 0, (submitted.stdout, submitted.stderr)
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.wait(timeout=60)
        times = sorted(r["at"] for r in server.requests)
    # both workers ran cells of it
    store = Store(pg_url)
    with store.engine.connect() as connection:
        pids = set(connection.execute(text(
            "SELECT DISTINCT pid FROM runs WHERE status = 'completed'")).scalars())
    assert pids == {w.pid for w in workers}, [log.read_text() for log in logs]
    assert len(times) >= cells * 8
    # The workers were idle and waiting when the cells were queued, so their opening calls
    # (admitted in turn, but each waiting for its process's HTTP client) arrive together in
    # the first half second; after that, one burst and a half second's lag on top of the rate.
    steady = [t for t in times if t >= times[0] + 0.5]
    rate, extra = rpm / 60, burst(rpm) + rpm / 60 * 0.5
    for width in (1.0, 2.0, 5.0):
        assert _most_in_window(steady, width) <= rate * width + extra, width
    # the limit did bind: the calls took as long as the rate makes them
    assert steady[-1] - steady[0] >= (len(steady) - extra) / rate - 0.5
