"""Budgets (DESIGN 2.11): an experiment's `budget_usd` stops it `stopped` with the reason
`budget` once its spend reaches it, in process and across a pool of workers, within one cell
of its dearest configuration; a cell is expected to cost what its own configuration's cells
cost; a call whose cost is unknown stops a budgeted experiment; the stored stop message ends
with the final spend. The spend is real: an OpenAI-compatible server on loopback reports
usage, priced by `PARLEY_PRICES` or as a registered endpoint's."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai_stub import SimulatedOpenAI, _Handler, loopback_only

import engine.experiments as ex
from engine.cli.main import main
from engine.experiments.budget import (
    ENOUGH,
    Spend,
    budget_of,
    expected_costs,
    restated,
    set_budget,
)
from engine.models import ConfigError
from engine.store import Store
from engine.store.experiments import LabelCosts, SpendFigures, experiment_spend

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


# The endpoint: a loopback server registered as a priced endpoint, $1,000 per
# million tokens each way, reporting 110 tokens in and 110 out for every call: $0.22 a call,
# so a vote (3 calls) costs $0.66 a cell and a 6-round society (18 calls) $3.96.
PER_MILLION = 1000.0
PRICED = "openai:endpoint-model?endpoint=priced"  # no PARLEY_PRICES entry: the endpoint prices it
CALL = {"input_tokens": 110, "output_tokens": 110, "total_tokens": 220}


class _Reported(_Handler):
    """The stub's answer, with the usage its server's `usage(n)` gives the n-th call (a
    request without the grammar probe's field)."""

    def _answer(self, number, body, content, usage):
        server = self.server
        with server.lock:
            calls = sum(1 for r in server.requests if "grammar" not in r["body"])
        super()._answer(number, body, content, server.reported(calls))


class PricedServer(SimulatedOpenAI):
    """`SimulatedOpenAI` reporting `usage(n)` for its n-th call (`CALL` by default; kept as
    `reported`, since the stub's own `usage` replaces a reply's usage field whole)."""

    def __init__(self, usage=None):
        super().__init__()
        self.RequestHandlerClass = _Reported
        self.reported = usage or (lambda number: CALL)


def _endpoints(base_url: str, priced: bool = True) -> str:
    prices = {"price_input": PER_MILLION, "price_output": PER_MILLION} if priced else {}
    return json.dumps({"priced": {"base_url": base_url, **prices}})


def _mixed(budget: float, concurrency: int) -> dict:
    """A vote ($0.66 a cell) and a 6-round society ($3.96 a cell) over twelve questions."""
    return {"name": "mixed", "questions": QUESTIONS, "repeats": 1, "concurrency": concurrency,
            "budget_usd": budget,
            "configs": [{"protocol": "vote", "label": "vote", "model": PRICED},
                        {"protocol": "society", "label": "society", "model": PRICED,
                         "options": {"rounds": 6}}]}


def _held_within_one_dearest_cell(store: Store, experiment_id: str, budget: float) -> None:
    """The issue's figures hold: every cell ran to its end at its configuration's cost, the
    spend is within one dearest cell of the budget, and the stored stop message gives it."""
    runs, spent = _cells(store, experiment_id)
    found = ex.get(store, experiment_id)
    assert found["status"] == "stopped", found["error"]
    assert set(runs["status"]) == {"completed"}, runs["status"].tolist()
    costs = runs.groupby("label")["cost_usd"]
    assert costs.min().to_dict() == pytest.approx({"vote": 0.66, "society": 3.96})
    assert costs.max().to_dict() == pytest.approx({"vote": 0.66, "society": 3.96})
    assert len(runs) < 2 * len(QUESTIONS)  # it stopped early
    assert abs(spent - budget) <= 3.96 + 1e-9, (spent, runs.groupby("label").size(),
                                                found["error"])
    assert found["error"].startswith(f"budget: spent ${spent:,.4f} of the ${budget:,.4f} "
                                     "budget (Budget on the Experiments form, budget_usd in "
                                     "the spec): "), (spent, found["error"])


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
    costs = {"v": 0.4}
    assert Spend(0.0, costs).decide(1.0, "v") == "go"
    assert Spend(0.5, costs).decide(1.0, "v") == "go"
    assert Spend(0.7, costs).decide(1.0, "v") == "stop"  # nothing in flight: it would pass
    assert Spend(0.2, costs, ("v", "v")).decide(1.0, "v") == "wait"  # a third would pass
    assert Spend(1.0, {"v": 0.0}).decide(1.0, "v") == "stop"  # reached, whatever a cell costs
    assert Spend(1.2, costs).reason(1.0, "v").startswith(
        "budget: spent $1.2000 of the $1.0000 budget (Budget on the Experiments form, "
        "budget_usd in the spec): the spend has reached it")


def test_each_cell_is_expected_to_cost_what_its_own_configuration_costs():
    # Cheap votes have run; societies cost six times as much. A society cell is expected to
    # cost a society's cost, not the mean of every run (which the votes drag down).
    figures = SpendFigures(10.0, 0, {"vote": LabelCosts(9, 0.66), "society": LabelCosts(2, 3.96)})
    expected = expected_costs(figures, {"vote": 1.8, "society": 10.8, "new": 0.5})
    assert expected == {"vote": 0.66, "society": 3.96, "new": 0.5}  # "new": the preflight's
    # one society in flight: a second fits $20 beside it, a third does not
    now = Spend(10.0, expected, ("society",))
    assert now.committed == pytest.approx(13.96) and now.decide(20.0, "society") == "go"
    assert Spend(10.0, expected, ("society",) * 2).decide(20.0, "society") == "wait"
    assert Spend(10.0, expected, ("society",) * 2).decide(20.0, "vote") == "go"
    assert Spend(17.0, expected).decide(20.0, "society") == "stop"  # under by < one cell
    assert "one more cell of 'society' (about $3.9600) would pass it" in \
        Spend(17.0, expected).reason(20.0, "society")
    # a cell in flight that has already spent more than expected raises the expectation
    hot = SpendFigures(10.0, 0, {"society": LabelCosts(2, 3.96, running=1, running_most=5.5)})
    assert expected_costs(hot, {"society": 10.8})["society"] == 5.5
    # no completed run and no price here: no expected cost, so nothing starts
    unpriced = expected_costs(SpendFigures(0.0, 0, {}), {"vote": None})
    assert Spend(0.0, unpriced).decide(20.0, "vote") == "stop"
    assert "a cell of 'vote' has no expected cost" in Spend(0.0, unpriced).reason(20.0, "vote")


def test_a_call_of_unknown_cost_stops_a_budgeted_experiment_at_once():
    now = Spend(0.5, {"v": 0.1}, ("v",), unknown=3)
    assert now.decide(100.0, "v") == "stop"
    reason = now.reason(100.0, "v")
    assert reason.startswith("budget: spent $0.5000 of the $100.0000 budget so far, with 1 "
                             "cell(s) in flight to finish (Budget on the Experiments form, "
                             "budget_usd in the spec): 3 call(s) cost an unknown amount")


def test_the_stop_message_is_restated_with_the_spend_once_the_cells_in_flight_end():
    stopped = Spend(19.5, {"s": 3.96}, ("s", "s")).reason(20.0, "s")
    assert "so far, with 2 cell(s) in flight" in stopped
    final = restated(stopped, 27.42, 0)
    assert final.startswith("budget: spent $27.4200 of the $20.0000 budget (Budget on the "
                            "Experiments form, budget_usd in the spec): one more cell of 's'")
    assert restated(final, 27.42, 0) == final
    assert restated("stopped by the user", 1.0, 0) == "stopped by the user"
    big = Spend(1234.5, {"s": 1.0}).reason(1000.0, "s")
    assert restated(big, 2345.25, 0).startswith("budget: spent $2,345.2500 of the $1,000.0000")


def _finish(store: Store, experiment_id: str, label: str, cost: float,
            status: str = "completed") -> None:
    from engine.models import Turn
    run_id = store.start_run("vote", "q", label=label, experiment_id=experiment_id)
    store.add_turn(run_id, Turn(index=0, phase="p", seat="s", cost_usd=cost, tokens_in=1))
    if status != "running":
        store.end_run(run_id, status)


def test_a_configuration_costs_its_largest_until_enough_have_run_then_its_95th_percentile(
        backend):
    experiment_id = ex.create(backend, {"questions": QUESTIONS[:1],
                                        "configs": [{"protocol": "vote", "label": "v"}]})
    _finish(backend, experiment_id, "v", 9.0)  # one freak run (a retry storm, say)
    for _ in range(ENOUGH - 2):
        _finish(backend, experiment_id, "v", 1.0)
    _finish(backend, experiment_id, "cheap", 0.1)
    _finish(backend, experiment_id, "v", 50.0, "failed")  # not a completed cell's cost
    _finish(backend, experiment_id, "v", 2.5, "running")  # in flight, $2.50 so far
    figures = experiment_spend(backend, experiment_id, ENOUGH)
    assert figures.spent == pytest.approx(9.0 + ENOUGH - 2 + 0.1 + 50.0 + 2.5)
    assert figures.labels["v"] == LabelCosts(ENOUGH - 1, 9.0, 1, 2.5)  # the largest so far
    assert figures.labels["cheap"] == LabelCosts(1, 0.1)
    _finish(backend, experiment_id, "v", 1.0)  # the twentieth: the freak is set aside
    assert experiment_spend(backend, experiment_id, ENOUGH).labels["v"].ranked == 1.0
    assert expected_costs(experiment_spend(backend, experiment_id, ENOUGH), {})["v"] == 2.5


def test_only_calls_since_the_experiments_start_count_as_unknown(backend):
    # A resume is a person's decision to go on after an unknown cost stopped it.
    from engine.models import Turn
    from engine.store.experiments import set_values
    experiment_id = ex.create(backend, {"questions": QUESTIONS[:1],
                                        "configs": [{"protocol": "vote", "label": "v"}]})
    run_id = backend.start_run("vote", "q", label="v", experiment_id=experiment_id)
    backend.add_turn(run_id, Turn(index=0, phase="p", seat="s", cost_usd=None, tokens_in=5))
    backend.add_turn(run_id, Turn(index=1, phase="p", seat="s", cost_usd=None,
                                  status="degraded"))  # consumed nothing: costs nothing
    backend.end_run(run_id, "completed")
    assert experiment_spend(backend, experiment_id, ENOUGH).unknown == 1
    from engine.models import now
    set_values(backend, experiment_id, started_at=now())
    assert experiment_spend(backend, experiment_id, ENOUGH).unknown == 0


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


def test_configurations_of_different_cost_end_within_one_dearest_cell(store, monkeypatch):
    # The gate used to expect every cell to cost the mean of all completed runs, which the
    # cheap votes drag down: eight societies started at once and $20 became $28 or more.
    with PricedServer() as server:
        monkeypatch.setenv("PARLEY_ENDPOINTS", _endpoints(server.base_url))
        experiment_id = ex.create(store, ex.plan(_mixed(20.0, 8), store))
        state = ex.run_experiment(store, experiment_id)
    assert state.status == "stopped"
    _held_within_one_dearest_cell(store, experiment_id, 20.0)


def test_an_endpoint_turning_hostile_after_the_first_cell_is_stopped(store, monkeypatch):
    # From its fourth call on, the endpoint reports 10**30 tokens in: that call's cost is
    # unknown (or, read as implausible, estimated), never free. It used to run 8 of 8 cells,
    # $10.56 really spent, while the budget's books said $1.32.
    hostile = {"input_tokens": 10**30, "output_tokens": 110, "total_tokens": 10**30 + 110}
    spec = {**_mixed(4.0, 1), "questions": QUESTIONS[:8],
            "configs": [{"protocol": "society", "label": "society", "model": PRICED,
                         "options": {"rounds": 2}}]}  # 6 calls: $1.32 a cell
    with PricedServer(lambda number: CALL if number <= 6 else hostile) as server:
        monkeypatch.setenv("PARLEY_ENDPOINTS", _endpoints(server.base_url))
        plan = ex.plan(spec, store)
        assert plan.per_config[0]["calls_per_run"] == 6
        experiment_id = ex.create(store, plan)
        state = ex.run_experiment(store, experiment_id)
    runs = store.runs(experiment_id=experiment_id)
    assert state.status == "stopped" and state.error.startswith("budget: spent $")
    assert len(runs) < 8
    assert runs.sort_values("created_at")["cost_usd"].iloc[0] == pytest.approx(1.32)
    if runs["cost_usd"].isna().any():  # unknown: the budget says why it stopped
        assert "call(s) cost an unknown amount" in state.error


def test_a_price_gone_mid_experiment_stops_it_with_the_reason(store, monkeypatch):
    # After the first cell the endpoint's price is gone (the experiment resumed by a process
    # started without it: an experiment resolves its seats' models, and so their prices, once
    # per start): the next cell's calls cost an unknown amount, and the budget cannot count
    # them as free.
    with PricedServer() as server:
        monkeypatch.setenv("PARLEY_ENDPOINTS", _endpoints(server.base_url))
        spec = {**_mixed(100.0, 1), "configs": _mixed(1, 1)["configs"][:1]}
        experiment_id = ex.create(store, ex.plan(spec, store))
        stop = threading.Event()

        def one_cell(state):
            if state.done >= 1:
                stop.set()
        first = ex.run_experiment(store, experiment_id, on_progress=one_cell, stop_event=stop)
        assert first.status == "stopped" and len(store.runs(experiment_id=experiment_id)) == 1
        monkeypatch.setenv("PARLEY_ENDPOINTS", _endpoints(server.base_url, False))
        state = ex.run_experiment(store, experiment_id)
        runs = store.runs(experiment_id=experiment_id)
        assert state.status == "stopped", state.error
        assert "3 call(s) cost an unknown amount" in state.error, state.error
        assert state.error.startswith("budget: spent $0.6600 of the $100.0000 budget (Budget")
        assert len(runs) == 2 and runs["cost_usd"].isna().sum() == 1
        # priced again, a resume goes on: the unknown calls were before this start
        monkeypatch.setenv("PARLEY_ENDPOINTS", _endpoints(server.base_url))
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
@contextmanager
def _two_workers(tmp_path: Path, url: str, env: dict, concurrency: int):
    """Two `python -m engine worker` processes on the store at `url`, stopped at the end."""
    workers = [subprocess.Popen(
        [sys.executable, "-m", "engine", "worker", "--db", url, "--concurrency",
         str(concurrency), "--heartbeat", "2"], cwd=ROOT, env=env,
        stdout=(tmp_path / f"w{i}.log").open("w"), stderr=subprocess.STDOUT)
        for i in range(2)]
    try:
        yield workers
    finally:
        for process in workers:
            process.terminate()
        for process in workers:
            process.wait(timeout=30)


def _run_on_pool(tmp_path: Path, url: str, env: dict, spec: dict):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "engine", "experiment", "run", str(path),
                           "--db", url, "--workers", "--wait", "--quiet"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)


def _settled(store: Store, experiment_id: str, timeout: float = 120.0) -> None:
    """Wait until no run of the experiment is running and its stop message no longer
    counts cells in flight: the follower returns once the status is final, and the cells
    in flight end after it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = (store.runs(experiment_id=experiment_id)["status"] == "running").any()
        if not running and "in flight" not in ex.get(store, experiment_id)["error"]:
            return
        time.sleep(0.5)
    raise AssertionError(f"still in flight after {timeout}s: "
                         f"{ex.get(store, experiment_id)['error']}")


def test_a_budget_holds_across_two_workers(tmp_path):
    from conftest import fresh_pg_url
    url = fresh_pg_url()
    store = Store(url)
    env = {**os.environ, "PARLEY_PRICES": json.dumps(PRICES)}
    with SimulatedOpenAI() as server, _two_workers(tmp_path, url, env, 2):
        done = _run_on_pool(tmp_path, url, env, _spec(server.base_url, 1.0, 2))
        experiment_id = str(ex.list_experiments(store)["id"].iloc[0])
        _settled(store, experiment_id)
        stopped = ex.get(store, experiment_id)
        stopped_runs, stopped_spent = _cells(store, experiment_id)
        # the workers read the plan before; a resume with a new budget reaches them
        resumed = subprocess.run([sys.executable, "-m", "engine", "experiment", "resume",
                                  experiment_id, "--db", url, "--workers", "--wait",
                                  "--quiet", "--budget-usd", "100"], cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=240)
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


def test_configurations_of_different_cost_end_within_one_dearest_cell_on_two_workers(
        tmp_path):
    # Two workers, four cells each in flight: $32 were spent of a $20 budget when every
    # cell was expected to cost the mean of all completed runs.
    from conftest import fresh_pg_url
    url = fresh_pg_url()
    store = Store(url)
    with PricedServer() as server:
        env = {**os.environ, "PARLEY_ENDPOINTS": _endpoints(server.base_url)}
        with _two_workers(tmp_path, url, env, 4):
            done = _run_on_pool(tmp_path, url, env, _mixed(20.0, 8))
            experiment_id = str(ex.list_experiments(store)["id"].iloc[0])
            assert done.returncode == 130, (done.stdout, done.stderr)  # stopped
            _settled(store, experiment_id)
    _held_within_one_dearest_cell(store, experiment_id, 20.0)


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
        claims[i] = _claim(workers[i % 2], experiment_id, Cell(i, 0, 0), 1.0, {"v": 0.3})
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
        assert _claim(workers[0], experiment_id, Cell(9, 0, 0), 1.0, {"v": 0.3}).held
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
                SimpleNamespace(per_config=[{"label": "v", "runs": 1, "cost_usd": 0.3}]), 1.0))
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
    from engine.store.workers import pool_state

    def stored_budget(store, experiment_id):
        return pool_state(store, experiment_id).budget
    with_one = ex.create(backend, {"questions": QUESTIONS[:1], "budget_usd": 2.5,
                                   "configs": [{"protocol": "vote", "label": "v"}]})
    without = ex.create(backend, {"questions": QUESTIONS[:1],
                                  "configs": [{"protocol": "vote", "label": "v"}]})
    assert stored_budget(backend, with_one) == 2.5 and stored_budget(backend, without) is None
    set_budget(backend, without, 7)
    assert stored_budget(backend, without) == 7.0


@pytest.mark.parametrize("value", [float("nan"), "nan", " NaN "])
def test_a_budget_that_is_not_a_number_is_called_so(value):
    with pytest.raises(ConfigError) as caught:
        budget_of(value)
    assert str(caught.value) == f"budget_usd must be a number of US dollars, got {value!r}"
