"""Settling after a worker's jobs end (`engine.workers.pool.Gatekeeper.finish_job`): of a
worker's jobs of one experiment ending one after another, only the last asks the database
whether the experiment is done; jobs of other experiments ask for theirs."""
from __future__ import annotations

import asyncio

import procrastinate
from procrastinate.jobs import Status
from procrastinate.testing import InMemoryConnector

from engine.store.workers import TASK
from engine.workers import pool


def _settles(monkeypatch) -> list[tuple[str, int]]:
    """The (experiment, job id) of every settle a job's end asked for."""
    asked: list[tuple[str, int]] = []

    async def off_loop(call, state, job):
        assert call is pool.settle_after
        asked.append((job.task_kwargs["experiment_id"], job.id))
    monkeypatch.setattr(pool, "off_loop", off_loop)
    return asked


async def _jobs(payloads: list[dict], slots: int = 1):
    connector = InMemoryConnector()
    app = procrastinate.App(connector=connector)
    keeper = pool.Gatekeeper(connector, state=object(), slots=slots)
    app.job_manager = keeper
    task = app.configure_task(name=TASK)
    for payload in payloads:
        await task.defer_async(**payload)
    worker_id = await keeper.register_worker()
    fetched = []
    for _ in payloads:
        job = await keeper.fetch_job(None, worker_id)
        assert job is not None
        fetched.append(job)
    return keeper, fetched


def _payload(experiment: str, n: int) -> dict:
    return {"experiment_id": experiment, "cell": f"q{n}c0r0"}


def test_only_the_last_of_a_workers_jobs_of_one_experiment_asks_to_settle(monkeypatch):
    asked = _settles(monkeypatch)

    async def go():
        keeper, jobs = await _jobs([_payload("e1", 0), _payload("e1", 1), _payload("e2", 0),
                                    _payload("e1", 2)])
        for job in (jobs[1], jobs[2], jobs[0]):
            await keeper.finish_job(job, Status.SUCCEEDED, delete_job=False)
        # e2's only job settles at once; e1's two ended while its third was still held
        assert asked == [("e2", jobs[2].id)]
        await keeper.finish_job(jobs[3], Status.SUCCEEDED, delete_job=False)
        assert asked == [("e2", jobs[2].id), ("e1", jobs[3].id)]
    asyncio.run(go())


def test_a_job_queued_again_no_longer_holds_back_its_experiments_settling(monkeypatch):
    asked = _settles(monkeypatch)

    async def go():
        keeper, jobs = await _jobs([_payload("e1", 0), _payload("e1", 1)])
        await keeper.retry_job(jobs[1])
        await keeper.finish_job(jobs[0], Status.SUCCEEDED, delete_job=False)
        assert asked == [("e1", jobs[0].id)]
    asyncio.run(go())


def test_a_failed_job_asks_nothing_but_lets_the_others_settle(monkeypatch):
    asked = _settles(monkeypatch)

    async def go():
        keeper, jobs = await _jobs([_payload("e1", 0), _payload("e1", 1)])
        await keeper.finish_job(jobs[0], Status.FAILED, delete_job=False)
        assert asked == []
        await keeper.finish_job(jobs[1], Status.SUCCEEDED, delete_job=False)
        assert asked == [("e1", jobs[1].id)]
    asyncio.run(go())


def test_a_read_outside_a_transaction_leaves_none_open(backend):
    """`Database.reading`: on PostgreSQL in autocommit (no BEGIN, no ROLLBACK round trip);
    on either backend the read sees what was committed, and the pooled connection is back
    to transactions afterwards for the writes that need them."""
    from sqlalchemy import text
    # The table is not the store's, so emptying the test database leaves it: it goes here,
    # before (a run that stopped midway) and after.
    with backend.writing() as connection:
        connection.execute(text("DROP TABLE IF EXISTS reads_probe"))
        connection.execute(text("CREATE TABLE reads_probe (n INTEGER)"))
        connection.execute(text("INSERT INTO reads_probe VALUES (7)"))
    try:
        with backend.reading() as connection:
            assert connection.execute(text("SELECT n FROM reads_probe")).scalar() == 7
            if connection.dialect.name == "postgresql":
                assert connection.connection.dbapi_connection.autocommit
                assert not connection.in_transaction() or \
                    connection.connection.dbapi_connection.info.transaction_status == 0
        with backend.engine.connect() as connection:
            if connection.dialect.name == "postgresql":
                assert not connection.connection.dbapi_connection.autocommit
    finally:
        with backend.writing() as connection:
            connection.execute(text("DROP TABLE reads_probe"))
