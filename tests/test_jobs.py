"""Background runs: they complete and are stored, stop as `interrupted`, and survive a refresh."""
from __future__ import annotations

import time

import pytest

from engine import ConfigError, Store
from engine.services.tasks import JobManager

DEBATE = {"protocol": "debate", "model": "simulated", "options": {"max_rounds": 2}}
SLOW = {"protocol": "debate", "model": "simulated?latency=0.25", "options": {"max_rounds": 10}}
GENEROUS = 120.0  # seconds; only a hung run ever waits this long


def wait_until(predicate, timeout: float = GENEROUS) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def test_background_job_completes_and_is_stored(store):
    jobs = JobManager(store)
    run_id = jobs.start(DEBATE, "Should we adopt tabs?", label="bg", tags=["t"], retries=0)
    assert store.exists(run_id)  # the row exists as soon as start returns
    assert jobs.wait(run_id, GENEROUS) == "completed"
    run = store.get(run_id)
    assert run["label"] == "bg" and run["tags"] == ["t"]
    assert len(run["turns"]) == 5 and run["result"]["verdict"]
    progress = jobs.progress(run_id)
    assert progress["status"] == "completed"
    assert progress["calls_done"] == progress["estimated_calls"] == 5
    assert progress["fraction"] == 1.0
    assert run_id not in jobs.live()


def test_bad_configuration_raises_before_any_run(store):
    jobs = JobManager(store)
    with pytest.raises(ConfigError, match="max_rounds"):
        jobs.start({"protocol": "debate", "options": {"max_rounds": 0}}, "Q?")
    with pytest.raises(ConfigError, match="topic"):
        jobs.start(DEBATE, "   ")
    with pytest.raises(ConfigError, match="no option"):
        jobs.start({"protocol": "debate", "options": {"rounds": 2}}, "Q?")
    with pytest.raises(ConfigError, match="has no option 'colour'"):
        jobs.start(DEBATE, "Q?", colour="red")
    assert store.runs().empty


def test_stop_interrupts_and_keeps_completed_turns(store):
    jobs = JobManager(store)
    run_id = jobs.start(SLOW, "Should we stop?")
    wait_until(lambda: len(store.turns(run_id)) >= 2)
    assert run_id in jobs.live()
    assert jobs.stop(run_id) is True
    assert jobs.wait(run_id, GENEROUS) == "interrupted"
    run = store.get(run_id)
    assert run["status"] == "interrupted"
    assert 2 <= len(run["turns"]) < 21  # what was done is kept; the rest never ran
    assert all(turn["reply"] for turn in run["turns"])
    assert jobs.stop(run_id) is False  # nothing left to stop


def test_a_second_manager_sees_the_live_state(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    first = JobManager(Store(url))
    run_id = first.start(SLOW, "Does a refresh lose the run?")
    wait_until(lambda: len(first.store.turns(run_id)) >= 1)
    # A refreshed page: a new session, a new store object, only the run id from the address.
    second = JobManager(Store(url))
    progress = second.progress(run_id)
    assert progress["status"] == "running"
    assert progress["calls_done"] >= 1
    assert progress["estimated_calls"] == 21  # the process-wide job table knows the estimate
    assert progress["phase"] in progress["phases"]
    assert run_id in second.live()
    assert second.stop(run_id) is True  # and it can stop it
    assert second.wait(run_id, GENEROUS) == "interrupted"
    assert first.progress(run_id)["status"] == "interrupted"
