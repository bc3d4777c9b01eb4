"""Issue 28 (1, 2), DESIGN 2.11: prices, and what each turn and run cost.

Prices come from the shipped list prices, `PARLEY_PRICES`, `[prices."SPEC"]` in secrets or a
registered endpoint's `price_input`/`price_output`; a model with no price costs "unknown"
(None), never 0; the simulated model costs 0 and says simulated. The cost of real calls is
checked over HTTP to the loopback OpenAI-compatible server (`openai_stub`), which reports
usage as a real one does, in `test_cost_protocols.py`; this file holds the prices, the
turn's arithmetic, the store (both backends), migration and import.
"""
from __future__ import annotations

import asyncio
import json
import math
import os

import pytest
from conftest import applied_migrations, table_columns
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from sqlalchemy import inspect, text

from engine import ConfigError, Seat, Store, get_model, run_vote
from engine.llm.calls import RunContext
from engine.llm.endpoints import EndpointRegistry
from engine.llm.prices import DEFAULTS, Price, PriceTable, estimate_usage
from engine.models import Turn, total_cost
from engine.store.migrations import SUMMARY_INDEXES

EXAMPLES = int(os.environ.get("PARLEY_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=10000, database=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])
MINI = "openai:gpt-4o-mini"


@pytest.fixture(autouse=True)
def no_price_settings(monkeypatch):
    for name in ("PARLEY_PRICES", "PARLEY_ENDPOINTS", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


# ------------------------------------------------------------------ the price table
def test_defaults_cover_the_common_models_each_with_date_and_source():
    for spec in ("openai:gpt-4o", MINI, "openai:gpt-4.1", "openai:gpt-4.1-mini",
                 "openai:gpt-4.1-nano", "openai:o3", "openai:o4-mini",
                 "anthropic:claude-3-5-haiku", "anthropic:claude-sonnet-4",
                 "anthropic:claude-opus-4"):
        price = DEFAULTS[spec]
        assert price.input > 0 and price.output >= price.input, spec
        assert "read 2026-12-05 from https://" in price.source, spec
    assert (DEFAULTS[MINI].input, DEFAULTS[MINI].output) == (0.15, 0.60)


def test_dated_snapshots_take_their_familys_price_and_unknown_models_none():
    table = PriceTable()
    assert table.lookup("anthropic:claude-sonnet-4-20250514") == \
        DEFAULTS["anthropic:claude-sonnet-4"]
    assert table.lookup("openai:gpt-4o-2024-08-06") == DEFAULTS["openai:gpt-4o"]
    assert table.lookup("openai:gpt-4o-2024-05-13").input == 5.0  # priced on its own
    assert table.lookup("openai:my-finetune") is None
    assert table.lookup("ollama:llama3") is None
    # the same name served elsewhere is not OpenAI's bill
    assert table.lookup(MINI, own_api=False) is None


def test_environment_wins_over_secrets_over_defaults():
    env = {"PARLEY_PRICES": json.dumps({MINI: {"input": 1, "output": 2}})}
    secrets = {"prices": {MINI: {"input": 3, "output": 4},
                          "openai:gpt-4o": {"input": 5, "output": 6}}}
    table = PriceTable.from_settings(env, secrets)
    assert (table.lookup(MINI).input, table.lookup(MINI).output) == (1.0, 2.0)
    assert table.lookup("openai:gpt-4o").input == 5.0
    assert table.lookup("openai:gpt-4.1").source.startswith("list price")
    # an override prices a model wherever it is served; the exact recorded spec first
    assert table.lookup(f"{MINI}?endpoint=local", own_api=False).input == 1.0


@pytest.mark.parametrize("raw, words", [
    ("{not json", "must be JSON"),
    ("[1, 2]", "must map model specs"),
    (json.dumps({MINI: {"input": -1, "output": 1}}), "input must be a number"),
    (json.dumps({MINI: {"input": "cheap", "output": 1}}), "input must be a number"),
    (json.dumps({MINI: {"input": 1, "output": True}}), "output must be a number"),
    (json.dumps({MINI: {"input": 1}}), "exactly input and output"),
    (json.dumps({MINI: {"input": 1, "output": 1, "cached": 0.1}}), "exactly input and output"),
    (json.dumps({MINI: 0.5}), "exactly input and output"),
    (json.dumps({"": {"input": 1, "output": 1}}), "keyed by a model spec"),
    ('{"openai:m": {"input": NaN, "output": 1}}', "input must be a number"),
    ('{"openai:m": {"input": 1e999, "output": 1}}', "input must be a number"),
])
def test_malformed_parley_prices_is_a_clear_config_error(raw, words, monkeypatch):
    with pytest.raises(ConfigError) as caught:
        PriceTable.from_settings({"PARLEY_PRICES": raw})
    assert words in str(caught.value) and "PARLEY_PRICES" in str(caught.value)
    assert caught.value.code == "input"
    monkeypatch.setenv("PARLEY_PRICES", raw)  # and before any call: at get_model / the CLI
    with pytest.raises(ConfigError):
        get_model(MINI, api_key="sk-test-not-a-key")


def test_malformed_secrets_prices_are_a_clear_config_error():
    with pytest.raises(ConfigError, match=r"\[prices\] in secrets.toml: 'openai:m' output"):
        PriceTable.from_settings({}, {"prices": {"openai:m": {"input": 1, "output": -2}}})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4), max_leaves=12)


@FUZZ
@given(st.one_of(st.text(max_size=200),
                 st.dictionaries(st.text(max_size=30), json_values, max_size=4).map(json.dumps),
                 st.dictionaries(st.text(min_size=1, max_size=30), st.fixed_dictionaries(
                     {"input": json_values, "output": json_values}), max_size=3).map(
                     lambda d: json.dumps(d, allow_nan=True))))
def test_fuzzed_price_json_is_read_or_refused_with_config_error(raw):
    try:
        table = PriceTable.from_settings({"PARLEY_PRICES": raw})
    except ConfigError as exc:
        assert str(exc).startswith("PARLEY_PRICES") and "\n" not in str(exc)
        return
    for price in (price for layer in table.overrides for price in layer.values()):
        assert math.isfinite(price.input) and price.input >= 0
        assert math.isfinite(price.output) and price.output >= 0


# ------------------------------------------------------------------ endpoints and models
def test_endpoint_price_wins_and_is_checked():
    env = {"PARLEY_ENDPOINTS": json.dumps({"local": {
        "base_url": "http://127.0.0.1:9/v1", "price_input": 0.5, "price_output": 1.5}}),
        "PARLEY_PRICES": json.dumps({"openai:m": {"input": 9, "output": 9}})}
    registry = EndpointRegistry.from_settings(env)
    model = get_model("openai:m?endpoint=local", endpoints=registry)
    assert (model.parley_price.input, model.parley_price.output) == (0.5, 1.5)
    assert model.parley_price.source == "endpoint local"
    for entry, words in (({"price_input": 1}, "both price_input and price_output"),
                         ({"price_input": -1, "price_output": 1}, "price_input must be"),
                         ({"price_input": 1, "price_output": "x"}, "price_output must be")):
        bad = {"PARLEY_ENDPOINTS": json.dumps({"local": {"base_url": "http://127.0.0.1:9/v1",
                                                         **entry}})}
        with pytest.raises(ConfigError, match=words):
            EndpointRegistry.from_settings(bad)


def test_secrets_prices_reach_the_model():
    registry = EndpointRegistry.from_settings(
        {"OPENAI_API_KEY": "sk-test-not-a-key"},
        {"prices": {"openai:house-model": {"input": 2, "output": 3}}})
    model = get_model("openai:house-model", endpoints=registry)
    assert model.parley_price.input == 2.0 and "secrets.toml" in model.parley_price.source


def test_a_list_price_applies_at_the_providers_own_api_only():
    registry = EndpointRegistry.from_settings({"OPENAI_API_KEY": "sk-test-not-a-key"})
    assert get_model(MINI, endpoints=registry).parley_price == DEFAULTS[MINI]
    local = get_model(f"{MINI}?base_url=http://127.0.0.1:9/v1", endpoints=registry)
    assert local.parley_price is None


# ------------------------------------------------------------------ a turn's cost
def one_turn(model, **context) -> Turn:
    ctx = RunContext("test", retries=0, backoff=0, **context)
    return asyncio.run(ctx.call(Seat("s", model), [{"role": "user", "content": "x" * 40}],
                                phase="p"))


def priced(message: AIMessage, price: Price | None) -> object:
    model = GenericFakeChatModel(messages=iter([message]))
    object.__setattr__(model, "parley_price", price)
    return model


def test_reported_usage_times_price_per_million():
    usage = {"input_tokens": 1200, "output_tokens": 300, "total_tokens": 1500}
    turn = one_turn(priced(AIMessage(content="hi", usage_metadata=usage), Price(2.5, 10.0)))
    assert (turn.tokens_in, turn.tokens_out, turn.usage_estimated) == (1200, 300, False)
    assert turn.cost_usd == pytest.approx((1200 * 2.5 + 300 * 10.0) / 1e6)


def test_missing_usage_is_estimated_flagged_and_priced():
    turn = one_turn(priced(AIMessage(content="y" * 20), Price(1.0, 2.0)))
    assert turn.usage_estimated and (turn.tokens_in, turn.tokens_out) == (10, 5)
    assert estimate_usage([{"content": "x" * 40}], "y" * 20) == (10, 5)
    assert turn.cost_usd == pytest.approx((10 * 1.0 + 5 * 2.0) / 1e6)


def test_unpriced_is_unknown_never_zero_and_simulated_is_zero():
    usage = {"input_tokens": 5, "output_tokens": 5, "total_tokens": 10}
    assert one_turn(priced(AIMessage(content="hi", usage_metadata=usage), None)).cost_usd \
        is None
    sim = one_turn(get_model("simulated"))
    assert sim.simulated and sim.cost_usd == 0.0


def test_a_failed_call_that_consumed_nothing_costs_zero_when_priced(recording_model):
    model = recording_model([ValueError("refused")])
    object.__setattr__(model, "parley_price", Price(1.0, 1.0))
    turn = one_turn(model)
    assert turn.status == "degraded" and (turn.tokens_in, turn.tokens_out) == (0, 0)
    assert turn.cost_usd == 0.0
    object.__setattr__(model, "parley_price", None)
    unpriced = one_turn(model)
    assert unpriced.cost_usd is None and total_cost([unpriced]) == 0.0  # consumed nothing


def test_a_call_that_timed_out_is_billed_its_estimated_input_and_a_refusal_nothing(
        recording_model):
    """A model Parley's HTTP clients do not carry (another provider's, a fake) is judged by
    its error: a time-out or a connection lost after connecting reached the server (billed
    its estimated input, flagged), a refused connection or an error status did not ($0)."""
    class Refused(ConnectionError):
        def __init__(self):
            super().__init__("refused")
            self.__cause__ = ConnectionRefusedError("[Errno 111] Connection refused")

    class Served(Exception):
        status_code = 500
    for failure, billed in ((TimeoutError("slow"), True), (ConnectionResetError("reset"), True),
                            (Refused(), False), (Served("boom"), False),
                            (ValueError("no"), False)):
        model = recording_model([failure])
        object.__setattr__(model, "parley_price", Price(1000.0, 1000.0))
        turn = one_turn(model)
        assert turn.status == "degraded"
        if billed:
            assert (turn.tokens_in, turn.tokens_out) == (10, 0) and turn.usage_estimated
            assert turn.cost_usd == pytest.approx(10 * 1000.0 / 1e6)
            assert "reached the server" in " ".join(turn.warnings)
        else:
            assert (turn.tokens_in, turn.cost_usd, turn.usage_estimated) == (0, 0.0, False)
    # a simulated seat never reaches a server: its injected time-out is not billed
    failed = one_turn(get_model("simulated?timeout=1&hang=5"), timeout=0.2)
    assert failed.status == "degraded" and "Timeout" in failed.error
    assert (failed.tokens_in, failed.cost_usd, failed.usage_estimated) == (0, 0.0, False)


def test_run_total_is_the_sum_and_unknown_when_an_ok_turn_is_unpriced():
    def t(cost, status="ok", tokens=1):
        return Turn(index=0, phase="p", seat="s", cost_usd=cost, status=status,
                    tokens_in=tokens)
    assert total_cost([t(0.25), t(0.5)]) == 0.75
    assert total_cost([t(0.25), t(None)]) is None
    assert total_cost([t(0.25), t(None, "degraded", 0)]) == 0.25
    assert total_cost([t(0.25), t(None, "degraded", 7)]) is None  # consumed, unpriced
    assert total_cost([]) == 0.0


# ------------------------------------------------------------------ the store, both backends
def unpriced_vote(store: Store) -> str:
    usage = {"input_tokens": 10, "output_tokens": 10, "total_tokens": 20}
    seats = [Seat(n, GenericFakeChatModel(messages=iter(
        [AIMessage(content="ANSWER: 4", usage_metadata=usage)] * 3))) for n in "abc"]
    return run_vote("2+2?", voters=seats, store=store).run_id


def test_store_keeps_costs_and_unknown_stays_none(backend):
    simulated = run_vote("2+2?", voters=[Seat(n) for n in "abc"], store=backend).run_id
    unpriced = unpriced_vote(backend)
    runs = backend.runs().set_index("id")
    assert runs.loc[simulated, "cost_usd"] == 0.0
    assert runs.loc[unpriced, "cost_usd"] is None
    got = backend.get(unpriced)
    assert got["cost_usd"] is None and all(t["cost_usd"] is None for t in got["turns"])
    assert all(t["usage_estimated"] is False for t in got["turns"])
    assert backend.get(simulated)["cost_usd"] == 0.0
    turns = backend.turns(simulated)
    assert list(turns["cost_usd"]) == [0.0] * len(turns)
    exported = json.loads(backend.export_run(unpriced))
    assert exported["cost_usd"] is None and exported["turns"][0]["cost_usd"] is None


def test_migration_back_fills_old_rows(backend):
    """0014 on a database made before it: the columns are added; old turns cost unknown,
    except simulated ones (0), and a run costs 0 only when all it spent is known."""
    url = backend.url
    simulated = run_vote("2+2?", voters=[Seat(n) for n in "abc"], store=backend).run_id
    unpriced = unpriced_vote(backend)
    with backend.engine.begin() as connection:  # as 0013 left it
        connection.execute(text("DROP INDEX ix_runs_summary"))
        for table, column in (("runs", "cost_usd"), ("turns", "cost_usd"),
                              ("turns", "usage_estimated")):
            connection.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        connection.execute(text("CREATE INDEX ix_runs_summary ON "
                                + SUMMARY_INDEXES["ix_runs_summary"]))
        connection.execute(text("DELETE FROM schema_migrations WHERE name = '0014_costs'"))
    backend.engine.dispose()
    reopened = Store(url)
    assert "0014_costs" in applied_migrations(reopened)
    assert {"cost_usd"} <= set(table_columns(reopened, "runs"))
    assert {"cost_usd", "usage_estimated"} <= set(table_columns(reopened, "turns"))
    assert reopened.get(simulated)["cost_usd"] == 0.0
    assert all(t["cost_usd"] == 0.0 for t in reopened.get(simulated)["turns"])
    assert reopened.get(unpriced)["cost_usd"] is None
    assert reopened.runs().set_index("id").loc[unpriced, "cost_usd"] is None
    assert reopened.migrate() == []
    indexes = {i["name"]: i["column_names"] for i in inspect(reopened.engine).get_indexes("runs")}
    assert "cost_usd" in indexes["ix_runs_summary"]  # Insights adds costs up from the index


# ------------------------------------------------------------------ import
def test_an_import_checks_turn_costs_and_recomputes_the_run_total(tmp_path):
    source = Store(f"sqlite:///{tmp_path / 'a.db'}")
    run_id = unpriced_vote(source)
    doc = json.loads(source.export_run(run_id))
    for turn in doc["turns"]:
        turn["cost_usd"] = 0.125
    doc["cost_usd"] = 999.0  # a forged total is never trusted
    target = Store(f"sqlite:///{tmp_path / 'b.db'}")
    assert target.import_runs(json.dumps(doc)) == [run_id]
    assert target.get(run_id)["cost_usd"] == pytest.approx(0.125 * len(doc["turns"]))
    for bad in (-0.01, "0.5", True, 1e13):
        hostile = {**doc, "id": "hostile", "turns": [{**doc["turns"][0], "cost_usd": bad}]}
        with pytest.raises(ConfigError, match="cost_usd"):
            target.import_runs(json.dumps(hostile))
    with pytest.raises(ConfigError, match="cost_usd"):
        target.import_runs(json.dumps({**doc, "id": "neg", "cost_usd": -1}))
    nan = json.dumps({**doc, "id": "nan"}).replace('"cost_usd": 999.0', '"cost_usd": NaN')
    with pytest.raises(ConfigError, match="cost_usd"):
        target.import_runs(nan)
    assert set(target.runs()["id"]) == {run_id}  # nothing of a bad file was written


def test_an_old_export_without_costs_imports_unknown_unless_simulated(tmp_path):
    source = Store(f"sqlite:///{tmp_path / 'a.db'}")
    ids = [unpriced_vote(source), run_vote("2+2?", voters=[Seat(n) for n in "abc"],
                                           store=source).run_id]
    lines = []
    for line in source.export_jsonl(ids).splitlines():
        doc = json.loads(line)
        doc.pop("cost_usd")
        for turn in doc["turns"]:
            turn.pop("cost_usd"), turn.pop("usage_estimated")
        lines.append(json.dumps(doc))
    target = Store(f"sqlite:///{tmp_path / 'b.db'}")
    assert sorted(target.import_runs("\n".join(lines))) == sorted(ids)
    assert target.get(ids[0])["cost_usd"] is None
    assert target.get(ids[1])["cost_usd"] == 0.0
