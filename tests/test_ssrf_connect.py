"""Issue 26, bullet 7: the SSRF rule is checked on the resolved address, when connecting.

A base URL that came with data may not reach a link-local or cloud metadata address however
its host is spelled or whatever its name resolves to; a registered endpoint may. Names are
resolved by a patched `socket.getaddrinfo` (`metadata.test` is 169.254.169.254), and the
wire is watched where httpcore and aiohttp open sockets (`anyio.connect_tcp`,
`socket.create_connection`, `aiohappyeyeballs.start_connection`): a connection may only ever
go to 127.0.0.1, and a registered endpoint's connection to the
metadata address is carried to a loopback server standing in for it. No traffic leaves
loopback.
"""
from __future__ import annotations

import asyncio
import socket

import aiohappyeyeballs
import anyio
import openai
import pytest
from openai_stub import ENDPOINT_SETTINGS, loopback_only
from recording_server import RecordingServer

from engine import ConfigError, Seat, get_model, run_vote
from engine.llm.endpoints import Endpoint, EndpointRegistry
from engine.llm.failures import is_transient
from engine.llm.transport import AddressRefused
from engine.llm.urls import check_url, risky_host

METADATA = "169.254.169.254"
NAMES = {"metadata.test": [METADATA], "model.test": ["127.0.0.1"],
         "link.test": ["fe80::1"], "mixed.test": ["127.0.0.1", "169.254.7.7"],
         "nat64.test": ["64:ff9b::a9fe:a9fe"]}
QUESTION = "Should the team adopt the plan?"


class Wire:
    """What the patched resolver answered and where connections were opened."""

    def __init__(self) -> None:
        self.lookups: list[str] = []
        self.connects: list[str] = []
        self.rebind: list[str] = []  # answers for rebind.test, one per lookup


@pytest.fixture
def wire(monkeypatch) -> Wire:
    loopback_only(monkeypatch, *ENDPOINT_SETTINGS, "PARLEY_ALLOW_BASE_URLS")
    seen = Wire()
    real_lookup, real_connect = socket.getaddrinfo, anyio.connect_tcp
    real_create = socket.create_connection

    def lookup(host, port, family=0, type=0, proto=0, flags=0):
        name = host.decode() if isinstance(host, bytes) else str(host)
        if not name.endswith(".test"):
            return real_lookup(host, port, family, type, proto, flags)
        seen.lookups.append(name)
        answers = [seen.rebind.pop(0)] if name == "rebind.test" else NAMES.get(name)
        if not answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (a, port, 0, 0) if ":" in a else (a, port)) for a in answers]

    def carried(host: str) -> str:
        """Where a connection really goes: the metadata address's stand-in is loopback."""
        seen.connects.append(host)
        address = lookup(host, 0)[0][4][0] if host.endswith(".test") else host
        if address not in ("127.0.0.1", METADATA):
            raise AssertionError(f"a test tried to connect to {host} ({address})")
        return "127.0.0.1"

    async def connect_tcp(remote_host, remote_port, **kw):
        return await real_connect(carried(str(remote_host)), remote_port, **kw)

    def create_connection(address, *args, **kw):
        return real_create((carried(str(address[0])), address[1]), *args, **kw)

    real_start = aiohappyeyeballs.start_connection

    async def start_connection(addr_infos, **kw):
        """aiohttp connects to the addresses its connector resolved: the first is tried."""
        address, port = addr_infos[0][4][:2]
        return await real_start([(socket.AF_INET, socket.SOCK_STREAM, 6, "",
                                  (carried(str(address)), port))], **kw)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    monkeypatch.setattr(aiohappyeyeballs, "start_connection", start_connection)
    monkeypatch.setattr(anyio, "connect_tcp", connect_tcp)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    return seen


def free() -> EndpointRegistry:
    return EndpointRegistry(allow_free_urls=True)


def vote(model: str, endpoints: EndpointRegistry):
    return run_vote(QUESTION, voters=[Seat("a", model), Seat("b", model)],
                    endpoints=endpoints)


def test_a_host_name_resolving_to_a_link_local_address_is_refused_at_connect_time(wire):
    with RecordingServer() as server:
        result = vote(f"openai:m?base_url=http://metadata.test:{server.port}/v1", free())
    assert len(result.turns) == 2
    for turn in result.turns:
        assert turn.status == "degraded" and turn.attempts == 1, turn  # not retried
        assert turn.error.startswith(
            f"AddressRefused: refused to connect to metadata.test:{server.port} (it resolves "
            f"to {METADATA}): {METADATA} is a cloud metadata address, reached only through a "
            "registered endpoint"), turn.error
        assert "register it as an endpoint" in turn.error
    assert "metadata.test" in wire.lookups  # the name was resolved: the check ran on it
    assert wire.connects == [] and server.connections == 0  # and nothing was connected


@pytest.mark.parametrize("name", ("link.test", "mixed.test", "nat64.test"))
def test_any_link_local_address_among_those_a_name_resolves_to_is_refused(wire, name):
    model = get_model(f"openai:m?base_url=http://{name}:8/v1", endpoints=free())
    resolved = f"{name}:8 \\(it resolves to .*(link-local|metadata)"
    with pytest.raises(AddressRefused, match=resolved):
        asyncio.run(model.ainvoke("hello"))
    assert wire.connects == []


def test_the_synchronous_path_checks_too(wire):
    with RecordingServer() as server:
        model = get_model(f"openai:m?base_url=http://metadata.test:{server.port}/v1",
                          endpoints=free())
        with pytest.raises(AddressRefused, match="a cloud metadata address"):
            model.invoke("hello")
    assert wire.connects == [] and server.connections == 0


def test_a_name_resolving_to_loopback_is_called_by_its_name(wire):
    """Local model servers are the main use; the Host header keeps the URL's name."""
    with RecordingServer() as server:
        result = vote(f"openai:m?base_url=http://model.test:{server.port}/v1", free())
        model = get_model(f"openai:m?base_url=http://model.test:{server.port}/v1",
                          endpoints=free())
        assert model.invoke("hello").content
    assert [t.status for t in result.turns] == ["ok", "ok"], [t.error for t in result.turns]
    assert {r["host"] for r in server.requests} == {f"model.test:{server.port}"}
    # the guard resolved the name once per connection and connected to the address it checked
    assert set(wire.connects) == {"127.0.0.1"}


def test_the_connection_goes_to_the_address_that_was_checked(wire):
    """DNS rebinding: a second lookup would answer the metadata address; none is made."""
    with RecordingServer() as server:
        wire.rebind[:] = ["127.0.0.1", METADATA, METADATA]
        model = get_model(f"openai:m?base_url=http://rebind.test:{server.port}/v1",
                          endpoints=free())
        assert asyncio.run(model.ainvoke("hello")).content
    assert wire.lookups == ["rebind.test"] and wire.connects == ["127.0.0.1"]
    assert len(server.requests) == 1


def test_a_registered_endpoint_may_reach_the_metadata_address(wire):
    """The operator registered it: its name resolves to 169.254.169.254 and it connects
    (carried to the loopback stand-in)."""
    with RecordingServer() as server:
        url = f"http://metadata.test:{server.port}/v1"
        endpoints = EndpointRegistry([Endpoint("meta", url)], allow_free_urls=False)
        result = vote("openai:m?endpoint=meta", endpoints)
        by_url = vote(f"openai:m?base_url={url}", endpoints)  # its URL, arriving with data
        in_code = get_model("openai:m", endpoints=free(), base_url=url)  # the operator's own
        assert in_code.invoke("hello").content
    assert [t.status for t in (*result.turns, *by_url.turns)] == ["ok"] * 4
    # httpcore's default backend connects by name, aiohttp's connector to what it resolved
    assert set(wire.connects) == {"metadata.test", METADATA}
    assert len(server.requests) == 5


@pytest.mark.parametrize("host", (
    "169\u3002254\u3002169\u3002254", "169\uff0e254\uff0e169\uff0e254",
    "169\uff61254\uff61169\uff61254", "\uff11\uff16\uff19.254.169.254",
    "metadata\u3002google\u3002internal", "2852039166", "0xa9fea9fe",
    "[::ffff:169.254.169.254]", "[64:ff9b::a9fe:a9fe]", "[fe80::1]"))
def test_a_risky_address_is_refused_however_it_is_spelled(wire, host):
    url = f"http://{host}:8/v1"
    assert risky_host(check_url(url)) and risky_host(url)
    with pytest.raises(ConfigError, match="is refused: .*(link-local|metadata)"):
        get_model(f"openai:m?base_url={url}", endpoints=free())
    assert wire.connects == []


def test_ideographic_dots_are_normalised_in_a_checked_url():
    assert check_url("http://model\u3002example\uff0ecom\uff61/v1") == \
        "http://model.example.com./v1"


def test_a_name_that_does_not_resolve_is_still_a_connection_error(wire):
    model = get_model("openai:m?base_url=http://nowhere.test:8/v1", endpoints=free())
    with pytest.raises(openai.APIConnectionError) as caught:
        asyncio.run(model.ainvoke("hello"))
    assert is_transient(caught.value) and wire.connects == []


def test_a_refused_address_is_not_transient():
    assert not is_transient(AddressRefused("refused to connect to x: ..."))


def test_the_openai_clients_of_a_free_url_are_guarded(wire):
    """Both clients of a free URL check addresses: the sync one wraps its connection pool's
    backend, the async one's aiohttp session connects through the guarded connector; a
    registered endpoint's do neither (a library that moved the backend fails `get_model`
    instead)."""
    guarded = get_model("openai:m?base_url=http://model.test:8/v1", endpoints=free())
    plain = get_model("openai:m", endpoints=free(), base_url="http://model.test:8/v1")

    async def connector(model):
        # the async client builds one client per event loop: what it builds is checked
        session = model.http_async_client.build().session()
        kind = type(session.connector).__name__
        await session.close()
        return kind
    assert type(guarded.http_client._transport._pool._network_backend).__name__.endswith(
        "Guard")
    assert not type(plain.http_client._transport._pool._network_backend).__name__.endswith(
        "Guard")
    assert asyncio.run(connector(guarded)) == "GuardedConnector"
    assert asyncio.run(connector(plain)) == "TCPConnector"
    assert wire.lookups == []  # nothing is resolved before a call
