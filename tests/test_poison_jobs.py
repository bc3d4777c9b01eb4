"""A poisoned job never stalls the pool (finding: a job whose cell is `cell:²:0:0` made every
worker's housekeeping raise `ValueError` every 2 s, and its experiment stayed `running`).

A job whose payload names no cell of an existing experiment's plan (a malformed or missing
cell, an index beyond the plan, an experiment that does not exist, values of the wrong type,
a payload that is no JSON object or that Python cannot even decode) is failed once, never
retried, logged on one bounded line, and never waited on; the experiment beside it completes
with every cell exactly once and says how many jobs naming it were refused.

PostgreSQL tests use PARLEY_TEST_PG_URL (skipped without it unless PARLEY_REQUIRE_PG=1), with
the `pg_url` fixture of tests/test_workers.py: a fresh database per test.
"""
from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import text
from waiting import wait_for

import engine.experiments as ex
from engine.cells import Cell
from engine.experiments.planning import plan_of
from engine.protocols import run_sync
from engine.store import Store
from engine.store import workers as pool_store
from engine.store.experiments import claim
from engine.store.workers import MAX_ID, PoisonJob, Unreadable, brief, load_payload, read_job
from engine.workers.pool import WorkerState, app_for, ensure_schema, submit
from engine.workers.worker import housekeeping

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = [{"question": f"What is {i} plus {i}?", "expected": str(2 * i)} for i in range(3)]
DEEP = "[" * 5000 + "]" * 5000  # PostgreSQL stores it; Python's json cannot read it back
LONG_NUMBER = "7" * 5000  # past Python's int digit limit
REFUSAL = re.compile(r"job (\d+) refused: (.*)")


def _spec(latency: float = 0.02) -> dict:
    model = f"simulated?latency={latency}"
    return {"name": "poison", "questions": QUESTIONS, "repeats": 1, "concurrency": 4,
            "configs": [{"protocol": "vote", "label": "vote", "model": model},
                        {"protocol": "panel", "label": "panel", "model": model}]}


def _insert(store: Store, args: str, *, status: str = "todo",
            queue: str = "parley-default") -> int:
    """A job row written as a hostile client would, bypassing procrastinate; `args` is the
    payload's JSON text."""
    with store.writing() as connection:
        return int(connection.execute(text(
            "INSERT INTO procrastinate_jobs (queue_name, task_name, args, status) "
            "VALUES (:queue, :task, CAST(:args AS jsonb), CAST(:status AS "
            "procrastinate_job_status)) RETURNING id"),
            {"queue": queue, "task": pool_store.TASK, "args": args, "status": status}
        ).scalar_one())


def _jobs(store: Store) -> dict[int, dict]:
    with store.engine.connect() as connection:
        rows = connection.execute(text(
            "SELECT j.id, j.status::text AS status, j.attempts, "
            "count(*) FILTER (WHERE e.type = 'failed') AS failed, "
            "count(*) FILTER (WHERE e.type = 'deferred_for_retry') AS retried "
            "FROM procrastinate_jobs j LEFT JOIN procrastinate_events e ON e.job_id = j.id "
            "GROUP BY j.id")).mappings().all()
    return {int(r["id"]): dict(r) for r in rows}


def _completed_per_cell(store: Store, experiment_id: str) -> Counter:
    runs = store.runs(experiment_id=experiment_id)
    return Counter(Cell.from_tags(list(r["tags"])) for _, r in runs.iterrows()
                   if r["status"] == "completed")


def _heartbeat(store: Store):
    with store.engine.connect() as connection:
        return connection.execute(text("SELECT max(heartbeat_at) FROM workers")).scalar()


# --------------------------------------------------------------------------- a real worker
def test_a_poisoned_job_is_failed_once_and_never_stalls_housekeeping(
        pg_url, tmp_path):  # noqa: F811
    store = Store(pg_url)
    ensure_schema(store)
    experiment_id = ex.create(store, _spec())  # 3 questions x 2 configurations: 6 cells
    assert submit(store, experiment_id) == 6
    eid = json.dumps(experiment_id)
    poison = {  # payload JSON -> what the worker must say about it
        f'{{"experiment_id": {eid}, "cell": "cell:²:0:0"}}': "is not a cell:Q:C:R tag",
        f'{{"experiment_id": {eid}, "cell": "cell:3:0:0"}}': "is outside the plan",
        f'{{"experiment_id": {eid}, "cell": "cell:0:0:1"}}': "is outside the plan",
        '{"experiment_id": "nosuchexperiment", "cell": "cell:0:0:0"}': "there is no experiment",
        f'{{"experiment_id": {eid}}}': "has no 'cell'",
        '{"cell": "cell:0:0:0"}': "has no 'experiment_id'",
        f'{{"experiment_id": {eid}, "cell": 5}}': "is not a cell:Q:C:R tag",
        '{"experiment_id": ["x"], "cell": "cell:0:0:0"}': "is not an experiment's id",
        f'{{"experiment_id": {eid}, "cell": {{"q": 0, "c": 0, "r": 0}}}}':
            "is not a cell:Q:C:R tag",
        f'{{"experiment_id": {eid}, "cell": "{"x" * 100_000}"}}': "is not a cell:Q:C:R tag",
        '[1, 2]': "is a JSON array, not a JSON object",
        '"cell:0:0:0"': "is a JSON string, not a JSON object",
        f'{{"experiment_id": {eid}, "cell": {DEEP}}}': "cannot be read (RecursionError",
        f'{{"experiment_id": {eid}, "cell": {LONG_NUMBER}}}': "cannot be read (ValueError",
    }
    expected = {_insert(store, args): why for args, why in poison.items()}
    # Left `doing` by a worker that is gone (as the finding's database had it).
    stranded = _insert(store, f'{{"experiment_id": {eid}, "cell": "cell:²:0:0"}}',
                       status="doing")
    expected[stranded] = "is not a cell:Q:C:R tag"
    # Through procrastinate itself, with a key that would collide with the task's context.
    app = app_for(store)
    with app.open():
        deferred = app.configure_task(pool_store.TASK, queue="parley-default").defer(
            experiment_id=experiment_id, cell="cell:٣:0:0", context="hostile")
    expected[deferred] = "is not a cell:Q:C:R tag"
    # On a queue no worker serves: it never runs, and the experiment does not wait for it.
    unserved = _insert(store, f'{{"experiment_id": {eid}, "cell": "cell:9:0:0"}}',
                       queue="parley-nowhere")
    naming_it = 12  # the poison jobs above whose payload names the experiment (as a string)

    log = tmp_path / "worker.log"
    with log.open("a", encoding="utf-8") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "engine", "worker", "--db", pg_url, "--concurrency", "4",
             "--heartbeat", "2", "--endpoint", "default"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: ex.get(store, experiment_id)["status"] != "running",
                 lambda: "the experiment to end: " + log.read_text()[-3000:], 120, every=0.2)
        wait_for(lambda: all(_jobs(store)[j]["status"] == "failed" for j in expected),
                 lambda: f"every poison job to fail: {_jobs(store)}", 60, every=0.2)
        beat = _heartbeat(store)
        wait_for(lambda: _heartbeat(store) > beat,  # housekeeping goes on
                 lambda: "the worker's next heartbeat: " + log.read_text()[-3000:], 60,
                 every=0.2)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)

    found = ex.get(store, experiment_id)
    assert found["status"] == "completed"
    assert f"{naming_it} job(s) naming it were refused" in found["error"]
    per_cell = _completed_per_cell(store, experiment_id)
    assert per_cell == Counter({cell: 1 for cell in plan_of(found["spec"]).cells()})
    assert len(store.runs(experiment_id=experiment_id)) == 6  # no run for a poison cell
    jobs = _jobs(store)
    for job_id in expected:
        assert jobs[job_id]["status"] == "failed" and jobs[job_id]["failed"] == 1, jobs[job_id]
        # Failed, never retried (the stranded one went back to the queue once, as stalled).
        assert jobs[job_id]["retried"] == (1 if job_id == stranded else 0), jobs[job_id]
    assert jobs[unserved]["status"] == "todo"
    assert [j["status"] for i, j in jobs.items() if i not in expected and i != unserved] \
        == ["succeeded"] * 6
    written = log.read_text(encoding="utf-8")
    refusals = Counter(int(m[1]) for m in REFUSAL.finditer(written))
    assert refusals == Counter(dict.fromkeys(expected, 1)), written[-3000:]
    for line in written.splitlines():
        found_line = REFUSAL.search(line)
        if found_line:
            assert expected[int(found_line[1])] in found_line[2], line
            assert len(line) < 400, line  # bounded: no payload printed whole
    assert "Traceback" not in written, written[-3000:]
    assert "housekeeping" not in written, written[-3000:]  # no round, no step failed


# --------------------------------------------------------------------------- housekeeping
def _state(store: Store) -> WorkerState:
    state = WorkerState(store)
    state.worker_id = pool_store.register(store, [], 1)
    return state


def _round(store: Store, state: WorkerState) -> None:
    app = app_for(store)

    async def go() -> None:
        async with app.open_async():
            await housekeeping(app, state, 2.0)
    run_sync(go())


def test_an_experiment_with_only_poison_jobs_left_is_settled_not_kept_running(
        pg_url):  # noqa: F811
    store = Store(pg_url)
    ensure_schema(store)
    experiment_id = ex.create(store, _spec())
    claim(store, experiment_id, pool=True)  # on the pool, with no real job queued
    eid = json.dumps(experiment_id)
    for args in (f'{{"experiment_id": {eid}, "cell": "cell:²:0:0"}}',
                 f'{{"experiment_id": {eid}, "cell": "cell:7:0:0"}}',
                 f'{{"experiment_id": {eid}, "cell": {DEEP}}}'):
        _insert(store, args)
    _insert(store, f'{{"experiment_id": {eid}, "cell": "cell:²:0:0"}}', status="doing")
    plan = plan_of(ex.get(store, experiment_id)["spec"])
    assert not pool_store.has_open_jobs(store, experiment_id, shape=plan.shape)
    assert pool_store.refused_jobs(store, experiment_id, plan.shape) == 4
    _round(store, _state(store))
    found = ex.get(store, experiment_id)
    assert found["status"] == "incomplete"  # nothing ran; the poison was never waited on
    assert "6 run(s) did not complete" in found["error"]
    assert "4 job(s) naming it were refused" in found["error"]


def test_a_real_job_is_still_waited_on_beside_poison(pg_url):  # noqa: F811
    store = Store(pg_url)
    ensure_schema(store)
    experiment_id = ex.create(store, _spec())
    assert submit(store, experiment_id) == 6
    _insert(store, f'{{"experiment_id": {json.dumps(experiment_id)}, "cell": "cell:²:0:0"}}')
    plan = plan_of(ex.get(store, experiment_id)["spec"])
    assert pool_store.has_open_jobs(store, experiment_id, shape=plan.shape)
    _round(store, _state(store))
    assert ex.get(store, experiment_id)["status"] == "running"


def test_unheld_jobs_reads_hostile_running_jobs_without_raising(pg_url):  # noqa: F811
    store = Store(pg_url)
    ensure_schema(store)
    ids = {_insert(store, args, status="doing") for args in (
        '{"experiment_id": "e", "cell": "cell:²:0:0"}', '[1]', '"x"', '{"cell": 5}',
        f'{{"experiment_id": "e", "cell": {DEEP}}}',
        f'{{"experiment_id": "e", "cell": {LONG_NUMBER}}}',
        f'{{"experiment_id": "{"e" * (MAX_ID + 1)}", "cell": "cell:0:0:0"}}')}
    fine = _insert(store, '{"experiment_id": "e", "cell": "cell:0:0:0"}', status="doing")
    # None of them holds a lock: all are unheld (the poison ones never can hold one).
    assert pool_store.unheld_jobs(store) == ids | {fine}


def test_one_bad_experiment_does_not_stop_the_round_for_the_others(
        pg_url, monkeypatch, caplog):  # noqa: F811
    store = Store(pg_url)
    ensure_schema(store)
    bad, good = ex.create(store, _spec()), ex.create(store, _spec())
    for experiment_id in (bad, good):
        claim(store, experiment_id, pool=True)
    import engine.workers.worker as worker_module
    real = worker_module.plan_for

    def plan_for(state, experiment_id):
        if experiment_id == bad:
            raise KeyError("a spec the round cannot read")
        return real(state, experiment_id)
    monkeypatch.setattr(worker_module, "plan_for", plan_for)
    with caplog.at_level(logging.WARNING, logger="parley.worker"):
        _round(store, _state(store))  # does not raise
    assert ex.get(store, bad)["status"] == "running"
    assert ex.get(store, good)["status"] == "incomplete"  # settled all the same
    assert f"settling experiment {bad} failed (KeyError" in caplog.text


# --------------------------------------------------------------------------- readers
@pytest.mark.parametrize("tag", [
    "cell:²:0:0", "cell:٣:0:0", "cell:0:0:١", "cell:01:0:0", "cell:-1:0:0", "cell:+1:0:0",
    "cell: 1:0:0", "cell:1:0:0\n", "cell:1:0", "cell:1:0:0:0", "Cell:1:0:0", "cell:1_0:0:0",
    "cell:1000000000:0:0", "cell:" + "9" * 5000 + ":0:0", "cell:" * 10_000, "", 5, None,
    ["cell:1:0:0"], {"q": 1}, 1.5, True])
def test_a_malformed_cell_tag_is_no_cell(tag):
    assert Cell.from_tags([tag]) is None


def test_cell_tags_read_back_exactly():
    for cell in (Cell(0, 0, 0), Cell(12, 3, 4), Cell(999_999_999, 999_999_999, 999_999_999)):
        assert Cell.from_tags([cell.tag]) == cell
    assert Cell.from_tags(["superseded", "cell:²:0:0", "cell:2:1:0"]) == Cell(2, 1, 0)
    for tags in ("cell:1:2:3", None, 5, b"cell:1:2:3", [], ()):
        assert Cell.from_tags(tags) is None  # a text is not a list of tags


def test_a_plan_holds_only_its_cells():
    plan = plan_of({**_spec(), "source": "inline", "configs": _spec()["configs"]})
    assert plan.shape == (3, 2, 1)
    assert all(plan.holds(c) for c in plan.cells())
    assert not any(plan.holds(c) for c in (Cell(3, 0, 0), Cell(0, 2, 0), Cell(0, 0, 1)))


@pytest.mark.parametrize("args, why", [
    (["experiment_id", "cell"], "is a JSON array, not a JSON object"),
    ("x", "is a JSON string"), (None, "is JSON null"), (5, "is a JSON number"),
    (Unreadable("RecursionError: too deep"), "cannot be read (RecursionError"),
    ({}, "has no 'experiment_id'"), ({"experiment_id": "e"}, "has no 'cell'"),
    ({"experiment_id": 5, "cell": "cell:0:0:0"}, "is not an experiment's id: 5"),
    ({"experiment_id": "", "cell": "cell:0:0:0"}, "is not an experiment's id"),
    ({"experiment_id": "e" * (MAX_ID + 1), "cell": "cell:0:0:0"}, "not an experiment's id"),
    ({"experiment_id": "e\n", "cell": "cell:0:0:0"}, "is not an experiment's id"),
    ({"experiment_id": "e", "cell": "cell:²:0:0"}, "is not a cell:Q:C:R tag: 'cell:²:0:0'"),
    ({"experiment_id": "e", "cell": ["cell:0:0:0"]}, "is not a cell:Q:C:R tag"),
    ({"experiment_id": "e", "cell": 10**5000}, "is not a cell:Q:C:R tag: <int>"),
    ({"experiment_id": "e", "cell": "x\n" * 100_000}, "is not a cell:Q:C:R tag"),
    ({"k" * 10_000: 1}, "has no 'experiment_id' (its keys: ['kkkk"),
])
def test_a_hostile_payload_is_refused_in_one_bounded_line(args, why):
    with pytest.raises(PoisonJob) as refused:
        read_job(args)
    message = str(refused.value)
    assert why in message and "\n" not in message and len(message) < 300


def test_a_good_payload_is_read_and_other_keys_are_ignored():
    job = read_job({"experiment_id": "abc", "cell": "cell:1:2:3", "priority": [1]})
    assert (job.experiment_id, job.cell) == ("abc", Cell(1, 2, 3))


def test_payloads_python_cannot_read_decode_to_unreadable():
    assert load_payload('{"cell": "cell:0:0:0"}') == {"cell": "cell:0:0:0"}
    assert load_payload(b'[1]') == [1]
    assert isinstance(load_payload(DEEP), Unreadable)
    assert isinstance(load_payload(LONG_NUMBER), Unreadable)
    assert "RecursionError" in load_payload(DEEP).reason
    for value in (DEEP, "x" * 100_000, 10**5000, {"a": [[[["deep"]]]] * 50}, load_payload(DEEP)):
        line = brief(value)
        assert len(line) <= 80 and "\n" not in line


def test_a_payload_that_is_no_object_reaches_the_task_as_a_mapping_and_is_refused():
    for raw, why in (("[1, 2]", "is a JSON array, not a JSON object"),
                     ('"cell:0:0:0"', "is a JSON string"), (DEEP, "cannot be read")):
        args = pool_store.job_args(raw)
        assert isinstance(args, dict) and len(repr(args)) < 200
        with pytest.raises(PoisonJob, match=re.escape(why)):
            read_job(args)
    assert pool_store.job_args('{"cell": "cell:0:0:0"}') == {"cell": "cell:0:0:0"}
