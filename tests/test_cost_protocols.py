"""Issue 28 (1, 2), DESIGN 2.11, end to end: every protocol over HTTP to the loopback
OpenAI-compatible server (`openai_stub`, which reports usage as a real server does), priced by
a registered endpoint, by `PARLEY_PRICES` or by secrets; an unpriced model's cost is unknown in
the store, the export, the CLI and the Runs page, never $0.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
from pathlib import Path

import insights_frames as frames
import pytest
from apptest_helpers import plain
from openai_stub import ENDPOINT_SETTINGS, SimulatedOpenAI, loopback_only
from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.cli.main import main
from engine.experiments.runner import arun_experiment
from engine.llm.endpoints import EndpointRegistry
from engine.protocols import REGISTRY, arun_config, run_sync
from engine.views.blocks import UNKNOWN_COST

PAGES = Path(__file__).resolve().parent.parent / "pages"
QUESTION = "What is 6 x 7?"
PRICE_IN, PRICE_OUT = 2.5, 10.0  # dollars per million tokens


@pytest.fixture
def server(monkeypatch):
    loopback_only(monkeypatch, *ENDPOINT_SETTINGS, "PARLEY_PRICES")
    with SimulatedOpenAI() as stub:
        monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps({
            "priced": {"base_url": stub.base_url, "price_input": PRICE_IN,
                       "price_output": PRICE_OUT},
            "free": {"base_url": stub.base_url}}))
        yield stub


@pytest.fixture
def db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)  # the pages' store is cached per URL
    return url


def run(protocol: str, model: str, url: str, **kw):
    return run_sync(arun_config({"protocol": protocol, "model": model}, QUESTION,
                                store=Store(url), **kw))


def expected_cost(turn, price_in=PRICE_IN, price_out=PRICE_OUT) -> float:
    return (turn.tokens_in * price_in + turn.tokens_out * price_out) / 1_000_000


@pytest.mark.parametrize("protocol", list(REGISTRY))
def test_cost_is_usage_times_price_on_every_protocol(protocol, server, db):
    result = run(protocol, "openai:stub-model?endpoint=priced", db)
    assert result.turns and all(t.tokens_in > 0 and not t.usage_estimated
                                for t in result.turns if t.ok)
    for turn in result.turns:
        assert turn.cost_usd == pytest.approx(expected_cost(turn), abs=1e-12)
    total = sum(expected_cost(t) for t in result.turns)
    assert result.cost_usd == pytest.approx(total, abs=1e-12) and total > 0
    store = Store(db)
    row = store.runs(ids=[result.run_id]).iloc[0]
    assert round(row["cost_usd"], 2) == round(total, 2)  # to the cent, and closer
    assert row["cost_usd"] == pytest.approx(total, abs=1e-12)
    got = store.get(result.run_id)
    assert got["cost_usd"] == pytest.approx(sum(t["cost_usd"] for t in got["turns"]))
    exported = json.loads(store.export_run(result.run_id))
    assert exported["cost_usd"] == pytest.approx(total, abs=1e-12)


def test_parley_prices_and_secrets_prices_take_effect(server, db, monkeypatch):
    monkeypatch.setenv("PARLEY_PRICES", json.dumps(
        {"openai:stub-model": {"input": 1.0, "output": 4.0}}))
    result = run("vote", "openai:stub-model?endpoint=free", db)
    assert result.cost_usd == pytest.approx(sum(expected_cost(t, 1.0, 4.0)
                                                for t in result.turns))
    monkeypatch.delenv("PARLEY_PRICES")
    registry = EndpointRegistry.from_settings(
        dict(os.environ),
        {"prices": {"openai:stub-model?endpoint=free": {"input": 3.0, "output": 6.0}}})
    result = run("vote", "openai:stub-model?endpoint=free", db, endpoints=registry)
    assert result.cost_usd == pytest.approx(sum(expected_cost(t, 3.0, 6.0)
                                                for t in result.turns))


def test_an_unpriced_model_costs_unknown_everywhere(server, db, capsys):
    result = run("vote", "openai:stub-model?endpoint=free", db)
    assert result.cost_usd is None and all(t.cost_usd is None for t in result.turns)
    store = Store(db)
    assert store.runs(ids=[result.run_id]).iloc[0]["cost_usd"] is None
    assert store.get(result.run_id)["cost_usd"] is None
    assert json.loads(store.export_run(result.run_id))["cost_usd"] is None
    line = json.loads(store.export_jsonl([result.run_id]))
    assert line["cost_usd"] is None and line["turns"][0]["cost_usd"] is None
    assert main(["export", "--format", "csv", "--db", db, result.run_id]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert "cost_usd" in header.split(",")
    # the CLI: the run's summary, the list and one run
    assert main(["run", "vote", QUESTION, "--db", db, "--model",
                 "openai:stub-model?endpoint=free"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert f"cost {UNKNOWN_COST}" in first and "tokens" in first
    assert main(["run", "vote", QUESTION, "--db", db, "--model",
                 "openai:stub-model?endpoint=priced"]) == 0
    priced = capsys.readouterr().out.splitlines()[0]
    assert "cost $0.0" in priced and "unknown" not in priced
    assert main(["run", "vote", QUESTION, "--db", db]) == 0
    assert "cost $0 (simulated)" in capsys.readouterr().out.splitlines()[0]
    assert main(["runs", "--db", db]) == 0
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines()[1:]}
    assert "unknown (unpriced)" in lines[result.run_id]
    assert main(["runs", "--db", db, "--json"]) == 0
    listed = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert listed[result.run_id]["cost_usd"] is None
    assert main(["show", result.run_id, "--db", db]) == 0
    assert f"cost: {UNKNOWN_COST}" in capsys.readouterr().out


def test_the_runs_page_shows_cost_beside_tokens(server, db):
    unpriced = run("vote", "openai:stub-model?endpoint=free", db).run_id
    priced = run("vote", "openai:stub-model?endpoint=priced", db)
    simulated = run("vote", "simulated", db).run_id
    at = AppTest.from_file(str(PAGES / "runs.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value.set_index("id")
    assert table.loc[unpriced, "cost"] == UNKNOWN_COST
    assert table.loc[simulated, "cost"] == "$0 (simulated)"
    assert table.loc[priced.run_id, "cost"] == f"${priced.cost_usd:.4f}"
    at = AppTest.from_file(str(PAGES / "runs.py"), default_timeout=60)
    at.query_params["run"] = unpriced
    at.run()
    assert not at.exception, at.exception
    # a tile, or (when a value of the row is too long for a tile) a caption over bold text
    labels = [c.value for c in at.caption]
    assert any(m.label == "Cost" and "unknown" in m.value for m in at.metric) or (
        "Cost" in labels and any("unknown" in m.value for m in at.markdown))


def test_malformed_parley_prices_stops_the_cli_before_any_call(server, db, monkeypatch,
                                                             capsys):
    monkeypatch.setenv("PARLEY_PRICES", '{"openai:stub-model": {"input": -1, "output": 1}}')
    assert main(["run", "vote", QUESTION, "--db", db, "--model",
                 "openai:stub-model?endpoint=free"]) == 2
    err = capsys.readouterr().err
    assert "PARLEY_PRICES" in err and "input must be a number" in err
    assert len(err.strip().splitlines()) == 1 and not server.requests


def test_an_experiments_summary_shows_cost_per_run(server, db, capsys):
    store = Store(db)
    plan = ex.plan({"name": "costs", "questions": [{"question": QUESTION, "expected": "42"}],
                    "configs": [
                        {"label": "sim", "protocol": "vote", "model": "simulated"},
                        {"label": "priced", "protocol": "vote",
                         "model": "openai:stub-model?endpoint=priced"},
                        {"label": "free", "protocol": "vote",
                         "model": "openai:stub-model?endpoint=free"}],
                    "repeats": 2, "concurrency": 2}, store)
    experiment_id = ex.create(store, plan)
    asyncio.run(arun_experiment(store, experiment_id))
    report = ex.report(store, experiment_id, "both")
    table = report.summary.set_index("configuration")
    costs = store.runs(experiment_id=experiment_id)
    priced = [c for c, m in zip(costs["cost_usd"], costs["models"]) if "priced" in m]
    assert len(priced) == 2 and all(c > 0 for c in priced)
    assert table.loc["priced", "cost_per_run"] == pytest.approx(sum(priced) / 2, abs=1e-9)
    assert math.isnan(table.loc["free", "cost_per_run"])  # unknown, never 0
    assert table.loc["sim (simulated)", "cost_per_run"] == 0.0
    assert main(["experiment", "show", experiment_id, "--db", db]) == 0
    out = capsys.readouterr().out
    assert "per run" in out and "cost unknown" in out and f"{sum(priced) / 2:.4f}" in out


def test_insights_shows_cost_per_run_beside_tokens(server, db):
    from engine.reports import insights
    from engine.store import RunFilters
    store = Store(db)
    priced = [run("vote", "openai:stub-model?endpoint=priced", db) for _ in range(2)]

    def cost_metric(store_filters: RunFilters) -> str:
        summary = insights.load_summary(store, store_filters)
        section = insights.cost_of(summary, frames.load_runs(store, store_filters))
        return dict(section.metrics)["Cost per run"]
    mean = sum(r.cost_usd for r in priced) / 2
    assert cost_metric(RunFilters()) == f"${mean:.4f}"
    # the SQL path (Store.run_summary) and the frame path add costs up alike
    by_sql = insights.load_summary(store, RunFilters())
    by_frame = frames.summarise(frames.load_runs(store, RunFilters()))
    assert by_sql["cost"].sum() == pytest.approx(by_frame["cost"].sum())
    run("vote", "openai:stub-model?endpoint=free", db)
    assert cost_metric(RunFilters()) == UNKNOWN_COST
    assert int(insights.load_summary(store, RunFilters())["unpriced"].sum()) == 1


def test_the_app_says_what_is_wrong_with_malformed_prices(db, monkeypatch):
    """A bad PARLEY_PRICES is named on Home; the app keeps working on the list prices."""
    monkeypatch.setenv("PARLEY_PRICES", "{oops")
    at = AppTest.from_file(str(PAGES.parent / "app.py"), default_timeout=300).run()
    assert not at.exception, at.exception
    assert any("PARLEY_PRICES must be JSON" in plain(e.value) for e in at.error)
