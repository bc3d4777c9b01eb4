"""What an endpoint supports, learned once for the deployment: detection never serialises the
calls that wait for it, and its answer is kept in the store (engine.store.support), where a
new process reads it instead of learning it again (both backends)."""
from __future__ import annotations

import asyncio

import pytest
from conftest import table_columns
from langchain_core.messages import AIMessage
from sqlalchemy import text

from engine import Seat, run_vote
from engine.llm import lines, structured
from engine.llm.capabilities import Capabilities
from engine.llm.endpoints import EndpointRegistry
from engine.llm.lines import PROBE_GRAMMAR
from engine.llm.structured import CONSTRAINED, JSON_MODE, StructuredOutput, json_schema
from engine.protocols import arun_config, run_sync
from engine.store import Store, support
from tests.openai_stub import ENDPOINT_SETTINGS, SimulatedOpenAI, loopback_only

QUESTION = "What is 6 x 7?"
SCHEMA = json_schema("answer", {"answer": {"type": "string"}})


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    loopback_only(monkeypatch, *ENDPOINT_SETTINGS)


def supported(registry, endpoint):
    return registry.capabilities.known(structured.SUPPORT_KIND, endpoint)


class Waiting:
    """A chat model of an OpenAI-compatible endpoint whose first request answers after a
    moment and whose others answer only once `crowd` of them are in flight together (or fail after
    `limit` seconds): calls sent one at a time never get there."""

    extra_body = None

    def __init__(self, crowd: int, limit: float = 20.0):
        self.capabilities = Capabilities()  # its registry's
        self.parley_output = {"structured": "auto", "endpoint": ("http://fake.test/v1", "m"),
                              "capabilities": self.capabilities}
        self.crowd, self.limit = crowd, limit
        self.sent: list[str] = []
        self.together = asyncio.Event()
        self.waiting = 0

    def bind(self, extra_body):
        self.sent.append(extra_body["response_format"]["type"])
        return self

    async def ainvoke(self, messages):
        if len(self.sent) == 1:  # detecting: the others start meanwhile
            await asyncio.sleep(0.2)
        else:
            self.waiting += 1
            if self.waiting == self.crowd:
                self.together.set()
            await asyncio.wait_for(self.together.wait(), self.limit)
        return AIMessage(content='{"answer": "42"}')


def test_calls_that_waited_for_detection_send_together():
    """Eight first calls to an endpoint: one detects, the seven that waited for it then send
    concurrently (each used to send while holding the endpoint's lock, one at a time)."""
    model = Waiting(crowd=7)

    async def calls():
        outputs = [StructuredOutput(model, SCHEMA) for _ in range(8)]
        return await asyncio.gather(*(o.invoke(model, []) for o in outputs)), outputs

    replies, outputs = asyncio.run(calls())
    assert [r.content for r in replies] == ['{"answer": "42"}'] * 8
    assert model.sent == ["json_schema"] * 8
    assert {o.mode for o in outputs} == {CONSTRAINED}
    assert model.capabilities.known(structured.SUPPORT_KIND,
                                    ("http://fake.test/v1", "m")) == CONSTRAINED


def vote(stub: SimulatedOpenAI, store: Store, registry=None):
    return run_vote(QUESTION, voters=[Seat(n, f"openai:smol?base_url={stub.base_url}")
                                      for n in ("a", "b", "c")], store=store,
                    endpoints=registry)


def test_a_new_process_reads_the_detected_mode_from_the_store(backend):
    """A server that refuses json_schema costs the first process one refused request; a
    process that starts afterwards on the same store sends json mode from its first call;
    one on another store detects again."""
    with SimulatedOpenAI(refuse="schema") as stub:
        registry = EndpointRegistry()
        first = vote(stub, backend, registry)
        assert len(stub.refused) == 1
        assert support.learned(backend, "structured", stub.base_url, "smol") == JSON_MODE
        registry = EndpointRegistry()  # a new process: it knows nothing of its own
        assert supported(registry, (stub.base_url, "smol")) is None
        stub.requests.clear()
        second = vote(stub, Store(backend.url), registry)
        assert len(stub.refused) == 1  # no new refusal
        assert [(r["body"].get("response_format") or {}).get("type")
                for r in stub.requests] == ["json_object"] * 3
        vote(stub, Store(backend.url.replace("parley.db", "other.db"))
             if backend.url.startswith("sqlite") else None)
        assert len(stub.refused) == 2  # a store that knows nothing: detected again
    assert {t.output_mode for t in first.turns + second.turns} == {JSON_MODE}


def test_a_new_process_reads_the_grammar_probe_from_the_store(backend):
    """The grammar probe's answer is kept too: a new process on the store sends the phases
    their grammar without probing."""
    config = {"protocol": "single", "model": "openai:smol"}
    with SimulatedOpenAI(grammar="honour") as stub:
        config["base_url"] = stub.base_url
        run_sync(arun_config(config, QUESTION, store=backend))
        probes = [r for r in stub.requests if r["body"].get("grammar") == PROBE_GRAMMAR]
        assert len(probes) == 1
        stub.requests.clear()
        registry = EndpointRegistry()  # a new process's
        run_sync(arun_config(config, QUESTION, store=Store(backend.url), endpoints=registry))
        assert stub.requests and all(r["body"].get("grammar") not in (None, PROBE_GRAMMAR)
                                     for r in stub.requests)
        assert registry.capabilities.known(lines.SUPPORT_KIND, (stub.base_url, "smol")) == "yes"


def test_a_store_that_cannot_be_written_leaves_detection_to_the_process(tmp_path):
    """Detection goes on when the store refuses the write (read-only): the run completes,
    the mode is known to this process, nothing is stored."""
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    Store(url)
    with SimulatedOpenAI(refuse="schema") as stub:
        store = Store(url)
        with store.engine.begin() as connection:
            connection.execute(text("CREATE TRIGGER no_support BEFORE INSERT ON "
                                    "endpoint_support BEGIN SELECT RAISE(ABORT, 'no'); END"))
        registry = EndpointRegistry()
        result = vote(stub, store, registry)
        assert all(t.ok for t in result.turns)
        assert supported(registry, (stub.base_url, "smol")) == JSON_MODE
        assert support.learned(store, "structured", stub.base_url, "smol") is None


def test_the_migration_adds_the_table_to_an_older_database(backend):
    """A database from before the table gains it when opened (migration 0021)."""
    with backend.engine.begin() as connection:
        connection.execute(text("DROP TABLE endpoint_support"))
        connection.execute(text("DELETE FROM schema_migrations "
                                "WHERE name = '0021_endpoint_support'"))
    backend.engine.dispose()
    reopened = Store(backend.url)
    assert "value" in table_columns(reopened, "endpoint_support")
    support.learn(reopened, "grammar", "http://127.0.0.1:1/v1", "m", "yes")
    support.learn(reopened, "grammar", "http://127.0.0.1:1/v1", "m", "no")  # replaced
    assert support.learned(reopened, "grammar", "http://127.0.0.1:1/v1", "m") == "no"
    assert reopened.migrate() == []


def test_a_call_waits_for_detection_before_its_limits_admit_it():
    """`prepare` (the guarded call's step before its endpoint's limits admit it) returns only
    once a detection in flight has its answer: the call is then admitted at the endpoint's
    rate, not held after admission and sent with every other waiting call at once."""
    order = []

    class Answering(Waiting):
        async def ainvoke(self, messages):
            message = await super().ainvoke(messages)
            order.append("answered")
            return message
    model = Answering(crowd=1)

    async def calls():
        first = asyncio.create_task(StructuredOutput(model, SCHEMA).invoke(model, []))
        await asyncio.sleep(0.05)  # the detecting request is in flight

        async def admitted():
            await StructuredOutput(model, SCHEMA).prepare()
            order.append("admitted")
        await asyncio.gather(first, admitted())

    asyncio.run(calls())
    assert order == ["answered", "admitted"]
    assert model.capabilities.known(structured.SUPPORT_KIND,
                                    ("http://fake.test/v1", "m")) == CONSTRAINED
