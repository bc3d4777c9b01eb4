"""A plain request goes straight over the async model client's aiohttp session
(engine.llm.transport's `post_plain`): its failures reach the SDK as the httpx errors
httpcore raises for the same failure, it says when a request's body
went out (what a failed attempt is billed by), it connects only to checked addresses, its
pool is the endpoint's concurrency; a call goes through httpx, to a proxy the settings or
the environment name. Every server is on loopback."""
from __future__ import annotations

import asyncio
import socket
import threading
from types import SimpleNamespace

import pytest
from openai_stub import loopback_only
from recording_server import RecordingServer

from engine import get_model
from engine.errors import CONNECTION, TIMED_OUT
from engine.llm import transport
from engine.llm.capabilities import Capabilities
from engine.llm.failures import failure_of, unreachable
from engine.llm.reach import ATTEMPT, Attempt, reached
from engine.llm.transport import AddressRefused, http_module, shared_clients


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Listener:
    """A loopback TCP server that reads each request's head and body, then `then`s it:
    "hang" (never answers), "cut" (closes the connection) or "garbage" (a line that is not
    HTTP)."""

    def __init__(self, then: str):
        self.then, self.read = then, []
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.socket.accept()
            except OSError:
                return
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                body += conn.recv(65536)
            self.read.append(body)
            if self.then == "garbage":
                conn.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            if self.then != "hang":
                conn.close()

    def close(self) -> None:
        self.stop.set()
        self.socket.close()


async def post(client, url: str, timeout: float = 30.0):
    """POST a small chat request straight over `client`'s aiohttp session, as a plain chat
    completion goes (`transport.post_plain`), under a fresh attempt."""
    attempt = Attempt()
    ATTEMPT.set(attempt)
    try:
        status, _headers, _body = await transport.post_plain(
            client, url, [("Content-Type", "application/json")], b'{"model":"m","messages":[]}',
            {"connect": 5.0, "read": timeout, "write": timeout, "pool": timeout})
        return SimpleNamespace(status_code=status), attempt, None
    except Exception as exc:  # what the SDK would wrap
        return None, attempt, exc
    finally:
        await client.aclose()


def client(guard: bool = False, **options):
    return transport.model_client(True, guard=guard, **options)


def test_a_refused_connection_is_a_connect_error_never_sent():
    """httpx-aiohttp's own table makes it a ConnectTimeout (counted a time-out); here it is
    httpcore's ConnectError, from the ConnectionRefusedError, and the request never left."""
    httpx = http_module()
    url = f"http://127.0.0.1:{closed_port()}/v1/chat/completions"
    _, attempt, error = asyncio.run(post(client(), url))
    assert type(error) is httpx.ConnectError, repr(error)
    assert isinstance(error.__cause__.__cause__, ConnectionRefusedError)
    assert failure_of(error) == CONNECTION and unreachable(error)
    assert attempt.watched and not attempt.sent and not reached(error, attempt)


@pytest.mark.parametrize("then,kind,failure", (
    ("hang", "ReadTimeout", TIMED_OUT),
    ("cut", "RemoteProtocolError", CONNECTION),
    ("garbage", "RemoteProtocolError", CONNECTION)))
def test_a_request_that_went_out_and_got_no_answer_was_sent(then, kind, failure):
    """A server that read the whole request and then hung, hung up or answered in something
    other than HTTP: httpcore's error for it, and the attempt counts as having reached the
    server (billed)."""
    server = Listener(then)
    try:
        url = f"http://127.0.0.1:{server.port}/v1/chat/completions"
        _, attempt, error = asyncio.run(post(client(), url, timeout=1.0))
    finally:
        server.close()
    assert type(error).__name__ == kind, repr(error)
    assert isinstance(error, http_module().TransportError) and failure_of(error) == failure
    assert server.read and attempt.sent and reached(error, attempt)


def test_an_answered_request_was_sent_and_its_status_kept():
    with RecordingServer() as server:
        response, attempt, error = asyncio.run(post(client(), f"{server.base_url}/chat/"
                                                                "completions"))
    assert error is None and response.status_code == 200
    assert attempt.sent and attempt.status == 200


def test_the_guarded_connector_checks_an_address_written_in_the_url():
    """aiohttp never asks its resolver about an IP address: the connector checks it too."""
    async def resolve(host: str) -> list:
        connector = transport.guarded_connector()()
        try:
            return await connector._resolve_host(host, 80)
        finally:
            await connector.close()
    with pytest.raises(AddressRefused, match="169.254.169.254"):
        asyncio.run(resolve("169.254.169.254"))
    with pytest.raises(AddressRefused, match="link-local"):
        asyncio.run(resolve("fe80::1"))
    assert [found["host"] for found in asyncio.run(resolve("127.0.0.1"))] == ["127.0.0.1"]


def test_the_pool_is_the_endpoints_concurrency_and_cookies_stay_httpxs():
    """A shared client's aiohttp session holds at most the endpoint's limit of connections,
    keeps them alive, and keeps no cookies of its own (httpx keeps them, as before)."""
    async def session_of(concurrency):
        _, shared = shared_clients(Capabilities(), "http://127.0.0.1:9/v1", guard=False,
                                   concurrency=concurrency)
        session = shared.current().session()
        try:
            return (session.connector.limit, session.connector.force_close,
                    type(session.cookie_jar).__name__)
        finally:
            await session.close()
    assert asyncio.run(session_of(3)) == (3, False, "DummyCookieJar")
    assert asyncio.run(session_of(None))[0] == 1000  # the openai SDK's default limit


@pytest.mark.parametrize("source", ("code", "environment"))
def test_a_proxy_from_code_or_the_environment_carries_the_call(monkeypatch, source):
    """The call goes to the proxy, in absolute form, for the server's name (which only the
    proxy resolves); from the environment as httpx reads it (HTTP_PROXY)."""
    loopback_only(monkeypatch, "OPENAI_API_KEY", "OPENAI_BASE_URL", "PARLEY_ENDPOINTS")
    with RecordingServer() as proxy:
        options = {}
        if source == "code":
            options["openai_proxy"] = f"http://127.0.0.1:{proxy.port}"
        else:
            monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        model = get_model("openai:m?grammar=off&base_url=http://model.invalid/v1", **options)
        reply = asyncio.run(transport.releasing(model.ainvoke("hello")))
    assert "reached" in reply.content
    assert [r["path"] for r in proxy.requests] == ["http://model.invalid/v1/chat/completions"]
    assert proxy.requests[0]["host"] == "model.invalid"
