"""Budgets (issue 28, bullet 3; DESIGN 2.11): an experiment's `budget_usd` stops it `stopped`
with the reason `budget` once its spend reaches it, in process and across a pool of workers,
within one cell's cost of the budget. The spend is real: an OpenAI-compatible server on
loopback reports usage, and `PARLEY_PRICES` prices its model."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai_stub import SimulatedOpenAI, loopback_only

import engine.experiments as ex
from engine.cli.main import main
from engine.experiments.budget import Spend, budget_of, set_budget
from engine.models import ConfigError
from engine.store import Store

ROOT = Path(__file__).resolve().parent.parent
MODEL = "openai:budget-model"
# dollars per million tokens: a vote's run costs cents, so a few dollars buy a few cells
PRICES = {MODEL: {"input": 200.0, "output": 600.0}}
QUESTIONS = [{"question": f"What is {i} plus {i}?", "expected": str(2 * i)} for i in range(12)]


@pytest.fixture(autouse=True)
def priced(monkeypatch):
    loopback_only(monkeypatch, "OPENAI_API_KEY", "OPENAI_BASE_URL")
    monkeypatch.setenv("PARLEY_PRICES", json.dumps(PRICES))


def _spec(base_url: str, budget: float | None, concurrency: int = 1) -> dict:
    config = {"protocol": "vote", "label": "vote", "model": MODEL, "base_url": base_url}
    return {"name": "budget", "questions": QUESTIONS, "repeats": 1, "concurrency": concurrency,
            "configs": [config], **({"budget_usd": budget} if budget is not None else {})}


def _cells(store: Store, experiment_id: str):
    runs = store.runs(experiment_id=experiment_id)
    runs["cost_usd"] = pd.to_numeric(runs["cost_usd"])
    return runs, float(runs["cost_usd"].sum())


# ------------------------------------------------------------------------ the spec's value
@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "ten", [1],
                                 2_000_000])
def test_a_bad_budget_is_refused_before_anything_runs(bad, store):
    with pytest.raises(ConfigError, match="budget_usd must be"):
        ex.plan({"questions": QUESTIONS, "configs": [{"protocol": "vote", "label": "v"}],
                 "budget_usd": bad}, store)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.floats(allow_nan=True), st.integers(), st.text(max_size=8),
                 st.booleans(), st.none()))
def test_budget_of_either_returns_a_positive_amount_or_says_why(value):
    try:
        number = budget_of(value)
    except ConfigError as exc:
        assert "budget_usd" in str(exc)
        return
    assert number is None or (math.isfinite(number) and 0 < number <= 1_000_000)


def test_one_more_cell_starts_only_while_it_and_those_in_flight_fit():
    assert Spend(0.0, 0, 0.4).allows(1.0)
    assert Spend(0.5, 0, 0.4).allows(1.0) and not Spend(0.7, 0, 0.4).allows(1.0)
    assert not Spend(0.2, 2, 0.4).allows(1.0)  # two in flight: a third would pass it
    assert not Spend(1.0, 0, 0.0).allows(1.0)  # reached: nothing starts, whatever a cell costs
    assert Spend(1.2, 0, 0.4).reason(1.0).startswith("budget: spent $1.2000 of the $1.0000")


def test_the_preflight_states_the_cost_and_the_budget(store, tmp_path, capsys):
    with SimulatedOpenAI() as server:
        plan = ex.plan(_spec(server.base_url, 1.5), store)
        assert plan.budget_usd == 1.5 and plan.spec()["budget_usd"] == 1.5
        assert plan.cost_usd is not None and plan.cost_usd > 0
        path = tmp_path / "spec.json"
        path.write_text(json.dumps(_spec(server.base_url, None)), encoding="utf-8")
        url = f"sqlite:///{tmp_path / 'cli.db'}"
        assert main(["experiment", "run", str(path), "--db", url, "--dry-run",
                     "--budget-usd", "2.5"]) == 0
    out = capsys.readouterr().out
    assert "(estimate); budget $2.5000" in out and "cost: $" in out


def test_an_unpriced_models_cost_is_unknown_in_the_preflight(store, monkeypatch):
    monkeypatch.delenv("PARLEY_PRICES")
    with SimulatedOpenAI() as server:
        plan = ex.plan(_spec(server.base_url, None), store)
    assert plan.cost_usd is None and plan.per_config[0]["cost_usd"] is None
    with SimulatedOpenAI() as server, pytest.raises(ConfigError, match="budget_usd needs a "
                                                    "price for every model, and 'vote'"):
        ex.plan(_spec(server.base_url, 1.0), store)  # a budget it could not count is refused


# ---------------------------------------------------------------------------- in process
@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_budget_stops_an_in_process_experiment_within_one_cell(store, concurrency):
    with SimulatedOpenAI() as server:
        plan = ex.plan(_spec(server.base_url, 1.0, concurrency), store)
        experiment_id = ex.create(store, plan)
        state = ex.run_experiment(store, experiment_id)
        runs, spent = _cells(store, experiment_id)
        cell = float(runs["cost_usd"].max())
        assert state.status == "stopped" and state.error.startswith("budget: spent $")
        assert ex.get(store, experiment_id)["status"] == "stopped"
        assert 0 < len(runs) < len(QUESTIONS)  # it stopped early, after some cells
        assert set(runs["status"]) == {"completed"}  # the cells in flight finished
        assert abs(spent - 1.0) <= cell, (spent, cell)
        # a larger budget lets a resume go on, and it ends once every cell is done
        set_budget(store, experiment_id, 100.0)
        assert ex.run_experiment(store, experiment_id).status == "completed"


def test_changing_the_budget_of_a_running_experiment_is_refused(store):
    experiment_id = ex.create(store, {"questions": QUESTIONS[:1],
                                      "configs": [{"protocol": "vote", "label": "v"}]})
    ex.get(store, experiment_id)
    from engine.store.experiments import set_values
    set_values(store, experiment_id, status="running")
    with pytest.raises(ConfigError, match="stop it before changing its budget"):
        set_budget(store, experiment_id, 5)


# --------------------------------------------------------------------------- two workers
def test_a_budget_holds_across_two_workers(tmp_path):
    from conftest import fresh_pg_url
    url = fresh_pg_url()
    store = Store(url)
    env = {**os.environ, "PARLEY_PRICES": json.dumps(PRICES)}
    with SimulatedOpenAI() as server:
        spec = tmp_path / "spec.json"
        spec.write_text(json.dumps(_spec(server.base_url, 1.0, 2)), encoding="utf-8")
        workers = [subprocess.Popen(
            [sys.executable, "-m", "engine", "worker", "--db", url, "--concurrency", "2",
             "--heartbeat", "2"], cwd=ROOT, env=env,
            stdout=(tmp_path / f"w{i}.log").open("w"), stderr=subprocess.STDOUT)
            for i in range(2)]
        try:
            done = subprocess.run([sys.executable, "-m", "engine", "experiment", "run",
                                   str(spec), "--db", url, "--workers", "--wait", "--quiet"],
                                  cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=240)
            experiment_id = str(ex.list_experiments(store)["id"].iloc[0])
            stopped = ex.get(store, experiment_id)
            stopped_runs, stopped_spent = _cells(store, experiment_id)
            # the workers read the plan before; a resume with a new budget reaches them
            resumed = subprocess.run([sys.executable, "-m", "engine", "experiment", "resume",
                                      experiment_id, "--db", url, "--workers", "--wait",
                                      "--quiet", "--budget-usd", "100"], cwd=ROOT, env=env,
                                     capture_output=True, text=True, timeout=240)
        finally:
            for process in workers:
                process.terminate()
            for process in workers:
                process.wait(timeout=30)
    found = stopped
    assert found["status"] == "stopped", (done.stdout, done.stderr, found)
    assert found["error"].startswith("budget: spent $")
    runs, spent = stopped_runs, stopped_spent
    cell = float(runs["cost_usd"].max())
    assert 0 < len(runs) < len(QUESTIONS)
    assert "running" not in set(runs["status"])
    assert abs(spent - 1.0) <= cell, (spent, cell)
    assert ex.get(store, experiment_id)["status"] == "completed", (resumed.stdout,
                                                                   resumed.stderr)


def test_jobs_deciding_together_on_two_workers_start_only_the_cells_that_fit():
    # Eight jobs on two workers (each its own lock session) decide on one spend at the same
    # moment: a cell is expected to cost $0.30 and the budget is $1.00, so three start and
    # the rest wait. A job's cell lock, taken in its budget turn, is in flight for the next
    # turn before its run is stored (CI once saw four jobs all read "none in flight").
    import threading

    from conftest import fresh_pg_url

    from engine.cells import Cell
    from engine.workers.pool import WorkerState, _claim
    store = Store(fresh_pg_url())
    experiment_id = ex.create(store, {"questions": QUESTIONS, "budget_usd": 1.0,
                                      "configs": [{"protocol": "vote", "label": "v"}]})
    workers = [WorkerState(store), WorkerState(store)]
    together = threading.Barrier(8)
    claims: dict[int, object] = {}

    def job(i: int) -> None:
        together.wait()
        claims[i] = _claim(workers[i % 2], experiment_id, Cell(i, 0, 0), 1.0, 0.3)
    threads = [threading.Thread(target=job, args=(i,)) for i in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        held = sorted(i for i, claim in claims.items() if claim.held)
        assert len(claims) == 8 and len(held) == 3, claims
        assert all(claim.wait for i, claim in claims.items() if i not in held), claims
        for i in held:  # one ends: one more fits
            workers[i % 2].locks.release(experiment_id, Cell(i, 0, 0))
            break
        assert _claim(workers[0], experiment_id, Cell(9, 0, 0), 1.0, 0.3).held
    finally:
        for state in workers:
            state.locks.close()


def test_a_job_waiting_on_the_budget_starts_nothing_once_the_experiment_is_stopped():
    # Three cells in flight fill a $1.00 budget at $0.30 a cell, so a fourth job waits; the
    # experiment is stopped meanwhile (by a user, or by another job's budget): when the
    # cells in flight end, the waiting job leaves, and starts no cell.
    import asyncio
    from types import SimpleNamespace

    from conftest import fresh_pg_url

    from engine.cells import Cell
    from engine.store.experiments import set_values
    from engine.store.workers import POOL_HOST
    from engine.workers.pool import WorkerState, claim_cell
    store = Store(fresh_pg_url())
    experiment_id = ex.create(store, {"questions": QUESTIONS, "budget_usd": 1.0,
                                      "configs": [{"protocol": "vote", "label": "v"}]})
    set_values(store, experiment_id, status="running", host=POOL_HOST)
    busy, waiting = WorkerState(store), WorkerState(store)
    try:
        for q in range(3):
            assert busy.locks.acquire(experiment_id, Cell(q, 0, 0))

        async def go():
            task = asyncio.ensure_future(claim_cell(
                SimpleNamespace(app=None), waiting, experiment_id, Cell(5, 0, 0),
                SimpleNamespace(cost_per_run=0.3), 1.0))
            await asyncio.sleep(1.0)
            assert not task.done()  # it waits for the cells in flight
            set_values(store, experiment_id, status="stopped")
            busy.locks.close()  # the cells in flight end: one more would fit now
            return await asyncio.wait_for(task, 30)
        claim = asyncio.run(go())
        assert not claim.held and claim.skipped == "skipped: the experiment is stopped"
        assert not store.runs(experiment_id=experiment_id).shape[0]
    finally:
        busy.locks.close()
        waiting.locks.close()


def test_the_stored_budget_is_read_in_the_database(backend):
    from engine.store.experiments import stored_budget
    with_one = ex.create(backend, {"questions": QUESTIONS[:1], "budget_usd": 2.5,
                                   "configs": [{"protocol": "vote", "label": "v"}]})
    without = ex.create(backend, {"questions": QUESTIONS[:1],
                                  "configs": [{"protocol": "vote", "label": "v"}]})
    assert stored_budget(backend, with_one) == 2.5 and stored_budget(backend, without) is None
    set_budget(backend, without, 7)
    assert stored_budget(backend, without) == 7.0
