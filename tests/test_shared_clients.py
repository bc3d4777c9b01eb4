"""One HTTP client per endpoint (and event loop), kept by the endpoint registry and shared by
every seat, run and experiment resolved under it: keep-alive on, one TLS context for the
process, none for plain http, and each seat's model resolved once per run
(engine.llm.transport.shared_clients, engine.llm.capabilities, engine.llm.runmodels)."""
from __future__ import annotations

import asyncio
import ssl

import pytest

from engine import run_panel, run_single
from engine.llm import providers, runmodels, transport
from engine.llm.endpoints import EndpointRegistry
from engine.llm.providers import get_model
from engine.models import Seat
from tests.openai_stub import SimulatedOpenAI, loopback_only


class CountingServer(SimulatedOpenAI):
    """The loopback OpenAI-compatible server, counting the TCP connections it accepts."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.connections = 0

    def process_request(self, request, client_address):
        with self.lock:
            self.connections += 1
        super().process_request(request, client_address)


@pytest.fixture
def server(monkeypatch):
    loopback_only(monkeypatch, "OPENAI_API_KEY", "OPENAI_BASE_URL", "PARLEY_ENDPOINTS")
    with CountingServer() as running:
        yield running


@pytest.fixture
def tls_loads(monkeypatch):
    """How many times a CA store is loaded into a TLS context (what building a verifying
    context costs), wherever httpx, httpcore, aiohttp or ssl does it. aiohttp builds its two
    default contexts once, when it is imported: that is done before the count starts, since
    what matters is that no model and no client builds one of its own."""
    import aiohttp.connector  # noqa: F401 - its import-time contexts are not a client's
    loads = []
    for name in ("load_verify_locations", "load_default_certs", "set_default_verify_paths"):
        original = getattr(ssl.SSLContext, name)

        def counted(self, *args, _original=original, _name=name, **kw):
            loads.append(_name)
            return _original(self, *args, **kw)
        monkeypatch.setattr(ssl.SSLContext, name, counted)
    transport.tls_context.cache_clear()  # the process's context not yet built
    yield loads
    transport.tls_context.cache_clear()


def _sessions_ssl(models) -> list:
    """The TLS context of the aiohttp session each model's async client sends through, each
    session made as a first request makes it (in an event loop)."""
    async def made():
        contexts = []
        for model in models:
            session = model.http_async_client.build().session()
            contexts.append(session.connector._ssl)
            await session.close()
        return contexts
    return asyncio.run(made())


def spec(server) -> str:
    return f"openai:test-model?grammar=off&base_url={server.base_url}"


def test_two_runs_on_one_endpoint_share_one_client_and_both_succeed(server):
    """Two synchronous runs in a row (each its own event loop) on one endpoint under one
    registry: one client object for every seat of both, each call answered (a kept-alive
    connection of the first run's closed loop is never reused by the second); another
    registry (another app session, a run given none) has its own."""
    registry = EndpointRegistry()
    seen = []
    for question in ("What is 2+2?", "What is 3+3?"):
        result = run_single(question, agent=Seat("a", spec(server)), retries=0,
                            timeout_per_call=30, on_event=lambda turn: None,
                            endpoints=registry)
        assert [t.status for t in result.turns] == ["ok"], [t.error for t in result.turns]
        seen.append(get_model(spec(server), endpoints=registry).http_async_client)
    assert seen[0] is seen[1]
    assert get_model(spec(server), endpoints=registry).http_client is get_model(
        f"openai:other?base_url={server.base_url}", endpoints=registry).http_client
    assert get_model(spec(server), endpoints=EndpointRegistry()).http_client is not \
        get_model(spec(server), endpoints=registry).http_client
    assert len(server.requests) == 2


def test_calls_of_one_run_reuse_their_connections(server):
    """A panel over HTTP (three debaters, a critic and a judge: 8 calls, 3 at a time at most)
    opens no more connections than it has calls at once: they are kept alive."""
    seats = [Seat(f"d{n}", spec(server)) for n in range(3)]
    result = run_panel("Which is larger, 7 or 9?", debaters=seats,
                       critic=Seat("critic", spec(server)), judge=Seat("judge", spec(server)),
                       retries=0, timeout_per_call=30)
    assert all(t.ok for t in result.turns), [t.error for t in result.turns]
    assert len(server.requests) == len(result.turns) == 8
    assert server.connections <= 3  # one connection a call opened 8


def test_an_http_endpoint_builds_no_tls_context(tls_loads):
    """Plain http needs no CA store: models of two http endpoints, their clients and the
    aiohttp sessions those send through load none; two https endpoints share the process's
    one context, loaded once, whichever registry resolves them."""
    plain = [get_model(f"openai:{name}?base_url=http://127.0.0.1:{port}/v1")
             for port in (8001, 8002) for name in ("m", "n")]
    contexts = _sessions_ssl(plain)
    assert tls_loads == []
    assert all(context.cert_store_stats()["x509_ca"] == 0 for context in contexts)
    first = get_model("openai:m?base_url=https://one.invalid/v1")
    second = get_model("openai:m?base_url=https://two.invalid/v1", endpoints=EndpointRegistry())
    one, two = _sessions_ssl([first, second])
    assert len(tls_loads) == 1, tls_loads
    assert one is two is transport.tls_context()


def test_each_event_loop_has_its_own_client_and_a_closed_one_is_dropped(server):
    """The shared async client builds one client per loop; a loop's is closed when its run
    releases it, or when `asyncio.run` ends (a caller's own, which releases nothing), and a
    loop that was closed some other way is dropped when another asks."""
    shared = get_model(spec(server)).http_async_client
    made = []

    async def current():
        made.append(shared.current())
        return shared.current() is made[-1]  # the same loop: the same client

    assert asyncio.run(current()) and asyncio.run(current())
    assert made[0] is not made[1] and made[0].is_closed and made[1].is_closed
    assert shared.loops() == 0  # each closed as its asyncio.run ended

    loop = asyncio.new_event_loop()  # closed without closing its async generators
    assert loop.run_until_complete(current())
    loop.close()
    assert shared.loops() == 1 and not made[-1].is_closed
    assert asyncio.run(current()) and shared.loops() == 0  # dropped when the next loop asked

    async def used():
        return shared.current()

    client = asyncio.run(transport.releasing(used()))
    assert client.is_closed and shared.loops() == 0  # closed by the run that opened it


def test_a_runs_seat_model_is_resolved_once(server, monkeypatch):
    """A panel whose five seats share one spec string resolves it once, not once per check
    and again per call."""
    resolved = []

    def counting(*args, **kw):
        resolved.append(args[0])
        return providers.resolve_model(*args, **kw)
    monkeypatch.setattr(runmodels, "resolve_model", counting)
    model = spec(server)
    run_panel("Which is larger, 7 or 9?", debaters=[Seat(f"d{n}", model) for n in range(3)],
              critic=Seat("critic", model), judge=Seat("judge", model), retries=0,
              timeout_per_call=30)
    assert resolved == [model]
    run_single("What is 2+2?", agent=Seat("a", model), retries=0, timeout_per_call=30)
    assert len(resolved) == 2  # the next run resolves its own


def test_an_experiments_runs_share_each_seat_spec(server, monkeypatch, store):
    """An experiment's cells repeat its configurations: each seat spec is resolved once for
    all its runs (once per run before), and the runs complete over HTTP."""
    from engine import experiments as ex
    from engine.protocols import run_sync
    resolved = []

    def counting(*args, **kw):
        resolved.append(args[0])
        return providers.resolve_model(*args, **kw)
    monkeypatch.setattr(runmodels, "resolve_model", counting)
    questions = [f"What is {n} + {n}?" for n in range(6)]
    experiment_id = ex.create(store, {"questions": questions, "concurrency": 3,
                                      "configs": [{"protocol": "single",
                                                   "model": spec(server)}]})
    checked = len(resolved)  # the plan's check, when it is made
    state = run_sync(ex.arun_experiment(store, experiment_id))
    assert state.status == "completed", state.error
    assert resolved[checked:] == [spec(server)]
    run_single("What is 2+2?", agent=Seat("a", spec(server)), retries=0, timeout_per_call=30)
    assert len(resolved) == checked + 2  # a run outside the experiment resolves its own
