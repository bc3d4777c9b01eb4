"""Crash safety: an experiment process killed with SIGKILL mid-run loses nothing it committed.

The child journals, beside the store, each turn as the engine completes it (after the store
was handed it) and each batch the store committed (its run rows, turns and run ends). After
the kill: the database passes `PRAGMA integrity_check`; every committed run row, turn and run
end is there; at most the turns of the one loop
iteration the kill interrupted are missing; the runs in flight read `interrupted`; resuming
finishes exactly the missing cells, with no duplicate completed runs.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

from conftest import integrity

from engine import Store
from engine import experiments as ex
from engine.questions import DEFINITE

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [{"question": q.text, "expected": q.expected} for q in DEFINITE[:5]]
CONCURRENCY = 3

CHILD = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {root!r})
    from engine import Store
    from engine.llm import calls
    from engine import experiments as ex

    url, experiment_id, journal_path = sys.argv[1:4]
    journal = open(journal_path, "a", buffering=1)
    original_record = calls.RunContext.record
    original_write_batch = Store.write_batch

    def record(self, turn):
        original_record(self, turn)  # the store has been handed the turn
        run_id = getattr(self.recorder, "run_id", None)
        journal.write(json.dumps(["completed", run_id, turn.index]) + "\\n")

    def write_batch(self, starts, pairs, endings):
        ended = original_write_batch(self, starts, pairs, endings)  # committed
        for run_id, turn in pairs:
            journal.write(json.dumps(["committed", run_id, turn.index]) + "\\n")
        for row in starts:
            journal.write(json.dumps(["started", row["id"], -1]) + "\\n")
        for ending in endings:
            journal.write(json.dumps(["finished", ending["rid"], -1]) + "\\n")
        return ended

    calls.RunContext.record = record
    Store.write_batch = write_batch
    ex.run_experiment(Store(url), experiment_id)
""")


def _journal(path: Path) -> dict[str, set[tuple[str, int]]]:
    entries: dict[str, set[tuple[str, int]]] = {"completed": set(), "committed": set(),
                                                "started": set(), "finished": set()}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            kind, run_id, index = json.loads(line)
        except ValueError:  # the kill may cut the last line short
            continue
        entries[kind].add((run_id, index))
    return entries


def test_sigkill_mid_experiment_then_resume(tmp_path):
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    store = Store(url)
    experiment_id = ex.create(store, {
        "questions": QUESTIONS, "repeats": 2, "concurrency": CONCURRENCY,
        "configs": [{"protocol": "panel", "label": "slow", "model": "simulated?latency=0.15"}]})
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(root=str(ROOT)), encoding="utf-8")
    journal = tmp_path / "journal.jsonl"
    child = subprocess.Popen([sys.executable, str(script), url, experiment_id, str(journal)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # kill once some runs finished and others are mid-way
            status = list(store.runs(experiment_id=experiment_id)["status"])
            # a run's row commits with its loop pass's batch, so wait until one in flight is
            # stored as running: killing in the moment between two batches would leave none
            if status.count("completed") >= 2 and "running" in status:
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the experiment never got going")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()

    assert integrity(store) == "ok"
    seen = _journal(journal)
    stored = {(r, int(i)) for r, i in zip(store.turns()["run_id"], store.turns()["idx"])}
    assert seen["committed"] and seen["committed"] <= stored  # nothing committed was lost
    lost = seen["completed"] - stored
    print(f"completed before the kill: {len(seen['completed'])}, missing: {len(lost)}")
    assert len(lost) <= CONCURRENCY * 4, lost  # only the interrupted loop iteration's turns
    runs = store.runs(experiment_id=experiment_id)
    status = dict(zip(runs["id"], runs["status"]))
    # every run row and run end committed in a batch is there: group commit lost none of them
    assert {r for r, _ in seen["started"]} <= set(status)
    assert seen["finished"] and all(status[r] == "completed" for r, _ in seen["finished"])
    assert "running" not in set(runs["status"])
    assert "interrupted" in set(runs["status"])  # the runs in flight at the kill
    assert ex.get(store, experiment_id)["status"] == "interrupted"

    state = ex.run_experiment(store, experiment_id)
    assert state.status == "completed"
    runs = store.runs(experiment_id=experiment_id)
    completed = runs[runs["status"] == "completed"]
    per_cell = Counter(ex.Cell.from_tags(tags) for tags in completed["tags"])
    assert len(per_cell) == len(QUESTIONS) * 2 and set(per_cell.values()) == {1}
    assert integrity(store) == "ok"
