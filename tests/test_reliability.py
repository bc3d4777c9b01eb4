"""Reliability drills at CI size; `python -m engine bench --only reliability` runs full size."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import integrity

from engine import Store
from engine.bench.reliability import check_run, fault_soak
from engine.protocols import REGISTRY

ROOT = Path(__file__).resolve().parents[1]


def test_fault_soak_every_protocol_completes_honestly(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'soak.db'}")
    runs = 10 * len(REGISTRY)
    report = fault_soak(store, runs=runs, concurrency=8)
    assert report["crashes"] == []
    assert report["problems"] == []
    assert report["runs"] == runs
    assert set(report["protocols"]) == set(REGISTRY)
    assert set(report["statuses"]) <= {"completed", "failed", "interrupted"}
    # faults were really injected, and every one is on its turn with its error
    assert report["degraded_turns"] > 0
    assert report["errors_recorded"] == report["degraded_turns"]


def test_check_run_flags_what_it_must():
    run = {"id": "r", "status": "running", "turns": [
        {"idx": 0, "status": "degraded", "error": "", "reply": "", "parsed": {}},
        {"idx": 1, "status": "ok", "error": "", "reply": " ", "parsed": {}},
        {"idx": 2, "status": "degraded", "error": "TimeoutError", "reply": "",
         "parsed": {"stance": "invented"}}]}
    problems = check_run(run)
    assert len(problems) == 4
    assert any("left running" in p for p in problems)


def test_concurrent_writer_processes_share_one_sqlite_file(tmp_path):
    # The drill runs in a fresh interpreter, as `python -m engine bench` does: the writers are
    # spawned from a clean parent, not from a test process holding browsers and event loops.
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    code = ("import json, sys; from engine.bench.reliability import concurrent_writers; "
            f"print(json.dumps(concurrent_writers({url!r}, processes=4, runs_each=15, "
            "deadline=300)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["failures"] == [] and report["locked"] == 0
    assert report["stored"] == 60 and report["completed"] == 60
    assert integrity(Store(url)) == "ok"
