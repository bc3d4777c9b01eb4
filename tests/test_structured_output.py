"""Issue 15, structured output: JSON phases ask an OpenAI-compatible endpoint for output
constrained to their schema, fall back (json mode, then the prompted path) where the endpoint
refuses, detect that once per endpoint, and record on each turn the path it took.

Every model call here goes over HTTP to the loopback test server (`openai_stub`).
"""
from __future__ import annotations

import json

import pytest
from conftest import fresh_pg_url
from openai_stub import ENDPOINT_SETTINGS, SimulatedOpenAI, loopback_only
from sqlalchemy import create_engine, text

from engine import Seat, Store, get_model, run_vote
from engine.llm.capabilities import Capabilities
from engine.llm.endpoints import EndpointRegistry
from engine.llm.structured import (
    CONSTRAINED,
    JSON_MODE,
    PROMPTED,
    SUPPORT_KIND,
    StructuredOutput,
    json_schema,
)
from engine.models import ConfigError
from engine.protocols import REGISTRY, arun_config, run_sync
from engine.protocols.panel import CRITIQUE_SCHEMA, REBUTTAL_SCHEMA, SYNTHESIS_SCHEMA
from engine.protocols.roundtable import JUDGE_SCHEMA
from engine.protocols.tallying import PROPOSE_SCHEMA

QUESTION = "What is 6 x 7?"
MODES = ("constrained", "json mode", "prompted")


@pytest.fixture(autouse=True)
def loopback_env(monkeypatch):
    loopback_only(monkeypatch, *ENDPOINT_SETTINGS)


@pytest.fixture
def registry():
    """One registry for the runs of a test: what they learn of an endpoint is its."""
    return EndpointRegistry()


def supported(registry, endpoint):
    return registry.capabilities.known(SUPPORT_KIND, endpoint)


def formats(server) -> list[str | None]:
    return [(r["body"].get("response_format") or {}).get("type") for r in server.requests]


def vote(spec: str, **kw):
    return run_vote(QUESTION, voters=[Seat(name, spec) for name in ("a", "b", "c")], **kw)


def json_turns(result):
    return [t for t in result.turns if t.output_mode]


# ------------------------------------------------------------------ 1. schemas declared once
def test_json_phases_declare_their_schema():
    """Each JSON phase's schema is an object whose keys are the ones its prompt asks for, all
    required and nothing else (what OpenAI's strict mode takes)."""
    schemas = {PROPOSE_SCHEMA: ("stance", "answer", "reasoning"),
               CRITIQUE_SCHEMA: ("assessments", "overall"),
               REBUTTAL_SCHEMA: ("stance", "answer", "reasoning", "changed_mind"),
               SYNTHESIS_SCHEMA: ("answer", "rationale", "key_points"),
               JUDGE_SCHEMA: ("agreement_level", "dominant_position", "dissenting_views",
                              "rationale")}
    for schema, keys in schemas.items():
        assert schema.keys == keys
        assert schema.schema["required"] == list(keys)
        assert schema.schema["additionalProperties"] is False
    assert JUDGE_SCHEMA.schema["properties"]["agreement_level"]["enum"] == [
        "none", "weak", "moderate", "strong"]
    item = CRITIQUE_SCHEMA.schema["properties"]["assessments"]["items"]
    assert item["required"] == ["persona", "verdict", "flaw"]
    assert len({s.name for s in schemas}) == len(schemas)


# ------------------------------------------------------------------ 2. constrained requests
def test_constrained_request_carries_the_schema_and_the_cap():
    with SimulatedOpenAI() as stub:
        result = vote(f"openai:smol?base_url={stub.base_url}&max_tokens=40")
        bodies = [r["body"] for r in stub.requests]
    assert len(bodies) == 3 and not stub.refused
    for body in bodies:
        assert body["response_format"] == {"type": "json_schema", "json_schema": {
            "name": "proposal", "schema": PROPOSE_SCHEMA.schema, "strict": True}}
        assert body["max_tokens"] == 40  # the cap still reaches the server
    assert [t.output_mode for t in result.turns] == [CONSTRAINED] * 3
    assert all(t.ok and t.parsed["stance"] for t in result.turns)
    assert result.tally.winner


def test_refused_format_falls_back_to_the_prompted_path():
    """An endpoint that refuses `response_format` (HTTP 400, as OpenAI's "not supported")
    still runs: its turns take the prompted path and say so."""
    with SimulatedOpenAI(refuse="all") as stub:
        result = vote(f"openai:smol?base_url={stub.base_url}")
        assert formats(stub) == ["json_schema", "json_object", None, None, None]
        assert len(stub.refused) == 2
    assert [t.output_mode for t in result.turns] == [PROMPTED] * 3
    assert all(t.ok and not t.error for t in result.turns)
    assert result.tally.winner


def test_schema_refused_takes_json_mode():
    with SimulatedOpenAI(refuse="schema") as stub:
        result = vote(f"openai:smol?base_url={stub.base_url}")
        assert formats(stub) == ["json_schema", "json_object", "json_object", "json_object"]
    assert [t.output_mode for t in result.turns] == [JSON_MODE] * 3
    assert all(t.ok for t in result.turns)


def test_a_server_error_naming_the_format_is_a_refusal():
    """llama-cpp-python's server answers json_schema with HTTP 500 (its request validation
    names `response_format`); json mode, with the schema beside it, is what it constrains."""
    with SimulatedOpenAI(refuse="schema", refuse_status=500) as stub:
        result = vote(f"openai:smol?base_url={stub.base_url}")
        assert formats(stub) == ["json_schema", "json_object", "json_object", "json_object"]
        assert stub.requests[1]["body"]["response_format"]["schema"] == PROPOSE_SCHEMA.schema
    assert [t.output_mode for t in result.turns] == [JSON_MODE] * 3
    assert all(t.ok and t.attempts == 1 for t in result.turns)


def test_detection_happens_once_per_endpoint(registry):
    """Concurrent first calls wait for one detection; later runs and phases under the same
    registry go straight to the path found: one refused request per endpoint and refused
    format, not one per call; a run under another registry (and no store) detects again."""
    with SimulatedOpenAI(refuse="schema") as one, SimulatedOpenAI(refuse="schema") as two:
        for _ in range(2):
            vote(f"openai:smol?base_url={one.base_url}", endpoints=registry)
        run_sync(arun_config({"protocol": "panel", "model": "openai:smol",
                              "base_url": two.base_url}, QUESTION, endpoints=registry))
        result = run_sync(arun_config({"protocol": "panel", "model": "openai:smol",
                                       "base_url": two.base_url}, QUESTION,
                                      endpoints=registry))
        assert len(one.refused) == 1 and len(two.refused) == 1
        assert len(one.requests) == 7 and len(two.requests) > 10
        vote(f"openai:smol?base_url={one.base_url}")
        assert len(one.refused) == 2
    assert set(t.output_mode for t in json_turns(result)) == {JSON_MODE}
    assert supported(registry, (one.base_url, "smol")) == JSON_MODE


def test_a_reply_that_ignores_the_format_steps_the_endpoint_down():
    """A reply that is not the object asked for means the server ignored the format: the
    endpoint steps down a mode (json mode, then the prompted path) for the next requests."""
    schema = json_schema("pair", {"a": {"type": "string"}, "b": {"type": "string"}})
    capabilities = Capabilities()

    class Model:
        parley_output = {"structured": "auto", "endpoint": ("http://x/v1", "m"),
                         "capabilities": capabilities}

    def known():
        return capabilities.known(SUPPORT_KIND, ("http://x/v1", "m"))

    output = StructuredOutput(Model(), schema)
    assert output.mode == CONSTRAINED
    assert not output.ignored('{"a": "1", "b": "2"}', {"a": "1", "b": "2"})
    assert not output.ignored('{"a": "1", "b": "a long string cut at the ca', None)
    assert known() is None
    assert output.ignored('{"a": "1"}', {"a": "1"})  # a key missing: no schema held it
    assert known() == JSON_MODE
    output.mode = JSON_MODE
    assert output.ignored("Sure! Here is my answer.", None)
    assert known() == PROMPTED
    output.mode = CONSTRAINED
    output._remember(CONSTRAINED)  # never an upgrade once refused
    assert known() == PROMPTED and StructuredOutput(Model(), schema).mode == PROMPTED


def test_ignored_format_still_reads_the_reply():
    with SimulatedOpenAI(ignore_format=True) as stub:
        result = vote(f"openai:smol?base_url={stub.base_url}")
        assert formats(stub)[0] == "json_schema"
    assert all(t.ok and t.parsed.get("stance") for t in result.turns)


# ------------------------------------------------------------------ 5. the switch
def test_structured_off_sends_no_response_format():
    with SimulatedOpenAI() as stub:
        result = vote(f"openai:smol?base_url={stub.base_url}&structured=off")
        assert formats(stub) == [None] * 3
    assert [t.output_mode for t in result.turns] == [PROMPTED] * 3
    assert result.turns[0].model.startswith("openai:smol")


def test_forced_modes_skip_detection(registry):
    with SimulatedOpenAI() as stub:
        vote(f"openai:smol?base_url={stub.base_url}&structured=json", endpoints=registry)
        vote(f"openai:smol?base_url={stub.base_url}&structured=schema", endpoints=registry)
        assert formats(stub) == ["json_object"] * 3 + ["json_schema"] * 3
    assert supported(registry, (stub.base_url, "smol")) is None


def test_endpoint_switch_and_the_seat_wins(monkeypatch):
    with SimulatedOpenAI() as stub:
        monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps(
            {"local": {"base_url": stub.base_url, "structured": "json"}}))
        result = vote("openai:smol?endpoint=local")
        vote("openai:smol?endpoint=local&structured=off")
        assert formats(stub) == ["json_object"] * 3 + [None] * 3
    assert [t.output_mode for t in result.turns] == [JSON_MODE] * 3


def test_bad_switch_values_are_refused(monkeypatch):
    with pytest.raises(ConfigError, match="structured must be one of auto, schema, json, off"):
        get_model("openai:smol?base_url=http://127.0.0.1:9/v1&structured=maybe")
    monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps(
        {"local": {"base_url": "http://127.0.0.1:9/v1", "structured": "yes"}}))
    with pytest.raises(ConfigError, match="structured must be one of"):
        get_model("openai:smol?endpoint=local")
    with pytest.raises(ConfigError, match="no parameter 'structured'"):
        get_model("anthropic:claude?structured=off", api_key="x")


def test_simulated_and_free_text_calls_keep_the_prompted_path():
    result = vote("simulated")
    assert [t.output_mode for t in result.turns] == [PROMPTED] * 3
    roundtable = run_sync(arun_config({"protocol": "roundtable", "model": "simulated"},
                                      QUESTION))
    assert {t.output_mode for t in roundtable.turns} == {""}  # free text, no judge


# ------------------------------------------------------------------ every protocol, constrained
@pytest.mark.parametrize("protocol", list(REGISTRY))
def test_every_protocol_runs_constrained_over_the_stub(protocol):
    """Every protocol runs over the stub; its JSON turns say "constrained", its free-text
    turns say nothing, and nothing was refused or asked again."""
    with SimulatedOpenAI() as stub:
        config: dict = {"protocol": protocol, "model": "openai:smol", "base_url": stub.base_url}
        if protocol == "roundtable":  # the optional judge is its JSON phase
            config["seats"] = {"judge": [{"name": "judge"}]}
        result = run_sync(arun_config(config, QUESTION))
        sent = formats(stub)
    assert result.turns and all(t.ok for t in result.turns)
    assert all(t.output_mode in ("", CONSTRAINED) for t in result.turns)
    assert sent.count("json_schema") == len(json_turns(result))
    assert not any("asked again" in w for t in result.turns for w in t.warnings)
    if protocol in ("vote", "panel", "roundtable"):
        assert json_turns(result)


# ------------------------------------------------------------------ 3. stored, exported
def test_output_mode_is_stored_exported_and_imported(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    with SimulatedOpenAI(refuse="schema") as stub:
        result = vote(f"openai:smol?base_url={stub.base_url}", store=store)
    stored = store.get(result.run_id)
    assert [t["output_mode"] for t in stored["turns"]] == [JSON_MODE] * 3
    document = json.loads(store.export_run(result.run_id))
    assert {t["output_mode"] for t in document["turns"]} == {JSON_MODE}
    other = Store(f"sqlite:///{tmp_path / 'b.db'}")
    other.import_runs(json.dumps(document))
    assert [t["output_mode"] for t in other.get(result.run_id)["turns"]] == [JSON_MODE] * 3
    older = json.loads(json.dumps(document))  # a file exported before structured output
    older["id"] = "older1"
    for turn in older["turns"]:
        del turn["output_mode"]
    other.import_runs(json.dumps(older))
    assert [t["output_mode"] for t in other.get("older1")["turns"]] == [""] * 3


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migration_adds_the_column_to_an_older_database(backend, tmp_path):
    """A database made before `0007_turn_output` (no column, no migration row) gains the
    column on open; its turns read "" and new turns store their path."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        url = fresh_pg_url()
    old = vote("simulated", store=Store(url))
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text("ALTER TABLE turns DROP COLUMN output_mode"))
        connection.execute(text("DELETE FROM schema_migrations "
                                "WHERE name = '0007_turn_output'"))
    engine.dispose()
    store = Store(url)
    assert [t["output_mode"] for t in store.get(old.run_id)["turns"]] == [""] * 3
    new = vote("simulated", store=store)
    assert [t["output_mode"] for t in store.get(new.run_id)["turns"]] == [PROMPTED] * 3


def test_turn_field_defaults_to_free_text():
    from engine.models import Turn
    assert Turn(index=0, phase="p", seat="s").output_mode == ""
    assert set(MODES) == {CONSTRAINED, JSON_MODE, PROMPTED}


def test_run_view_and_metrics_show_the_path(tmp_path):
    """The run view's turn caption names a JSON call's path; the run's metrics count them."""
    from engine.reports.runs import _turn_entry
    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    with SimulatedOpenAI(refuse="schema") as stub:
        result = vote(f"openai:smol?base_url={stub.base_url}", store=store)
    stored = store.get(result.run_id)
    assert [_turn_entry(t)["output"] for t in stored["turns"]] == ["JSON json mode"] * 3
    assert _turn_entry({"output_mode": ""})["output"] == ""
    metrics = stored["metrics"]
    assert (metrics["json_constrained"], metrics["json_mode"], metrics["json_prompted"]) == \
        (0, 3, 0)
    roundtable = run_sync(arun_config({"protocol": "roundtable", "model": "simulated"},
                                      QUESTION, store=store))
    assert "json_mode" not in store.get(roundtable.run_id)["metrics"]


# ------------------------------------------------------------------ 4. line formats
def grammars(server) -> list[str | None]:
    return [r["body"].get("grammar") for r in server.requests]


def test_line_formats_send_no_grammar_when_the_switch_is_off():
    """`grammar=off`: no grammar and no probe (tests/test_line_grammar.py: `auto`)."""
    with SimulatedOpenAI(grammar="honour") as stub:
        result = run_sync(arun_config({"protocol": "roundtable",
                                       "model": "openai:smol?grammar=off",
                                       "base_url": stub.base_url}, QUESTION))
        assert grammars(stub) == [None] * len(stub.requests)
    assert {t.output_mode for t in result.turns} == {""}


def test_a_grammar_endpoint_constrains_line_formats(monkeypatch):
    """A seat or endpoint that takes GBNF (llama.cpp's `grammar` field) gets a grammar that
    ends the reply with its labelled line; the turns say "grammar"."""
    with SimulatedOpenAI() as stub:
        roundtable = run_sync(arun_config({"protocol": "roundtable", "model":
                                           f"openai:smol?base_url={stub.base_url}&grammar=gbnf"},
                                          QUESTION))
        sent = grammars(stub)
        assert sent and all(g and '"STANCE: "' in g and g.startswith("root ::=") for g in sent)
        monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps(
            {"llama": {"base_url": stub.base_url, "grammar": "gbnf"}}))
        debate = run_sync(arun_config({"protocol": "debate", "model":
                                       "openai:smol?endpoint=llama"}, QUESTION))
        judge = stub.requests[-1]["body"]
        assert '"ANSWER: "' in judge["grammar"]
        assert "grammar" not in stub.requests[-2]["body"]  # an argument is free prose
    assert {t.output_mode for t in roundtable.turns} == {"grammar"}
    assert [t.output_mode for t in debate.turns if t.phase == "judge"] == ["grammar"]
    assert all(t.ok and t.parsed.get("stance") for t in roundtable.turns)
    assert "json_mode" not in roundtable.model_dump()


def test_bad_grammar_values_are_refused(monkeypatch):
    with pytest.raises(ConfigError, match="grammar must be one of auto, off, gbnf"):
        get_model("openai:smol?base_url=http://127.0.0.1:9/v1&grammar=regex")
    monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps(
        {"llama": {"base_url": "http://127.0.0.1:9/v1", "grammar": True}}))
    with pytest.raises(ConfigError, match="grammar must be one of auto, off, gbnf"):
        get_model("openai:smol?endpoint=llama")


def test_json_strings_are_bounded_except_for_openai_itself():
    """A stance is a short one-line string (a `pattern` the local servers' schema grammars
    enforce: at most 40 characters, no raw line break); OpenAI's own API gets plain strings."""
    import re
    stance = PROPOSE_SCHEMA.schema["properties"]["stance"]
    assert re.fullmatch(stance["pattern"][1:-1], "Paris")
    assert not re.fullmatch(stance["pattern"][1:-1], "a\nb")
    assert not re.fullmatch(stance["pattern"][1:-1], "x" * 41)
    local = PROPOSE_SCHEMA.response_format(CONSTRAINED, "127.0.0.1")
    assert local["json_schema"]["schema"] == PROPOSE_SCHEMA.schema
    hosted = json.dumps(PROPOSE_SCHEMA.response_format(CONSTRAINED, "api.openai.com"))
    assert "pattern" not in hosted and '"stance": {"type": "string"}' in hosted


def test_a_run_asks_langchain_once_what_watches_a_models_calls(monkeypatch):
    """Whether anything (a callback, tracer, cache) would see a model's calls is asked of
    langchain-core once per run and model, not once per call; the next run asks again, so a
    watcher set up between runs sees its calls."""
    from langchain_core.callbacks.manager import AsyncCallbackManager
    configure = AsyncCallbackManager.configure.__func__
    asked = []

    def counted(cls, *args, **kwargs):
        asked.append(1)
        return configure(cls, *args, **kwargs)

    monkeypatch.setattr(AsyncCallbackManager, "configure", classmethod(counted))
    with SimulatedOpenAI() as stub:
        spec = f"openai:smol?base_url={stub.base_url}"
        for run in (1, 2):
            result = vote(spec)
            assert len(stub.requests) == 3 * run and all(t.ok for t in result.turns)
            assert len(asked) == run
