"""`python -m engine run` says how a run ended in its exit status: 0 for a completed run (even
with degraded turns), 1 for a run stored `failed` because no model call succeeded."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from engine import Store

ROOT = Path(__file__).resolve().parents[1]


def _run(db: str, model: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", "run", "vote", "What is 6 x 7?",
                           "--model", model, "--retries", "0", "--db", db], cwd=ROOT, env=os.environ.copy(),
                          capture_output=True, text=True, timeout=180)


def test_a_run_where_every_call_failed_exits_1_and_says_why(tmp_path):
    db = f"sqlite:///{tmp_path / 'p.db'}"
    done = _run(db, "simulated?fail=1")
    assert done.returncode == 1, (done.stdout, done.stderr)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: run ") and "failed: no model call succeeded" in last
    runs = Store(db).runs()
    assert list(runs["status"]) == ["failed"] and runs["id"].iloc[0] in last


def test_a_completed_run_with_some_failed_calls_exits_0(tmp_path):
    db = f"sqlite:///{tmp_path / 'p.db'}"
    done = _run(db, "simulated?fail=0.5&seed=1")
    assert done.returncode == 0, (done.stdout, done.stderr)
    runs = Store(db).runs()
    assert list(runs["status"]) == ["completed"]
    statuses = list(Store(db).turns(runs["id"].iloc[0])["status"])
    assert "ok" in statuses and set(statuses) - {"ok"}, statuses  # some calls did fail
