"""A plain chat completion goes straight over the endpoint's aiohttp session.

`engine.llm.providers` sends a chat completion with no stream and no `response_format`
argument without the openai SDK's request building or httpx (`_lean_completion`, over
`engine.llm.transport`'s `post_plain`): these tests pin that no SDK request is built for it,
that the server sees what the SDK itself sends, that its failures are the SDK's own classes
with the causes the rest of Parley reads, and that the calls that still go through the SDK
(a stream, a `response_format` argument) keep the redirect rule and the body cap. Every
server is on loopback.
"""
from __future__ import annotations

import asyncio
import json
import socket

import aiohttp
import openai
import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from openai._base_client import AsyncAPIClient
from openai_stub import ENDPOINT_SETTINGS, SimulatedOpenAI, loopback_only
from oversized_server import ANSWER, MB, Oversized
from recording_server import RecordingServer

from engine import get_model
from engine.llm import providers
from engine.llm.reach import ATTEMPT, Attempt, causes, reached
from engine.llm.sizes import REPLY_CAP, body_cap
from engine.llm.transport import RedirectRefused, http_module, releasing

KEY = "sk-plain-post-test-key"
MESSAGES = [SystemMessage("You are a careful analyst."), HumanMessage("Should we ship?")]


@pytest.fixture(autouse=True)
def loopback(monkeypatch):
    loopback_only(monkeypatch, *ENDPOINT_SETTINGS, "PARLEY_ALLOW_BASE_URLS")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


@pytest.fixture
def straight(monkeypatch):
    """The calls that took the direct path (`providers._lean_completion`), in order."""
    taken: list[tuple] = []
    real = providers._lean_completion

    async def counted(*args):
        taken.append(args)
        return await real(*args)
    monkeypatch.setattr(providers, "_lean_completion", counted)
    return taken


def model_of(base_url: str, **options):
    return get_model(f"openai:m?grammar=off&base_url={base_url}", **options)


def test_a_plain_completion_builds_no_sdk_request_and_no_httpx_one(monkeypatch):
    """With the SDK's `post` and the httpx client's `send` both failing, two calls succeed:
    the SDK builds the request's frame (URL, headers) once for the client, never a request
    per call, and nothing goes through httpx."""
    def refuse(*args, **kwargs):
        raise AssertionError("a plain completion went through the SDK's request or httpx")
    built = []
    real_build = AsyncAPIClient._build_request

    def counted(self, options, **kwargs):
        built.append(options.url)
        return real_build(self, options, **kwargs)
    monkeypatch.setattr(AsyncAPIClient, "post", refuse)
    monkeypatch.setattr(AsyncAPIClient, "_build_request", counted)
    monkeypatch.setattr(http_module().AsyncClient, "send", refuse)
    with RecordingServer() as server:
        model = model_of(server.base_url)

        async def twice():
            return [await model.ainvoke(MESSAGES) for _ in range(2)]
        replies = asyncio.run(releasing(twice()))
    assert [json.loads(str(r.content))["answer"] for r in replies] == ["reached", "reached"]
    assert len(server.requests) == 2 and built == ["/chat/completions"]
    assert replies[0].usage_metadata["total_tokens"] == 2
    assert replies[0].response_metadata["headers"]["content-type"] == "application/json"


def test_the_server_sees_the_request_the_sdk_sends():
    """Path, headers (the bearer key, the model's default headers, the SDK's own, the
    accepted encodings) and body as langchain-openai's own path sends them through the SDK
    with the same settings, `extra_body` merged into the body."""
    extra = {"X-Team": "debate"}
    with RecordingServer() as direct, RecordingServer() as own:
        model = model_of(direct.base_url, default_headers=extra, timeout=30, api_key=KEY)
        asyncio.run(releasing(model.ainvoke(MESSAGES)))
        plain = ChatOpenAI(model="m", base_url=own.base_url, api_key=KEY, max_retries=0,
                           default_headers=extra, timeout=30, extra_body=model.extra_body,
                           max_tokens=None, include_response_headers=True)
        asyncio.run(plain.ainvoke(MESSAGES))
    mine, theirs = direct.requests[0], own.requests[0]
    assert (mine["method"], mine["path"]) == (theirs["method"], theirs["path"]) == (
        "POST", "/v1/chat/completions")
    assert json.loads(mine["body"]) == json.loads(theirs["body"])
    assert json.loads(mine["body"])["max_tokens"] == 1024  # extra_body, merged in
    sent = {name: value for name, value in mine["headers"] if name not in ("host",)}
    expected = {name: value for name, value in theirs["headers"] if name not in ("host",)}
    sent.pop("content-length"), expected.pop("content-length")
    assert sent["authorization"] == f"Bearer {KEY}" and sent["x-team"] == "debate"
    assert sent["accept-encoding"] == "gzip, deflate"
    assert sent["x-stainless-read-timeout"] == "30.0"
    assert sent == expected


def test_an_http_error_is_the_sdks_class_with_its_response():
    """A 429 with Retry-After: `openai.RateLimitError`, its response's status, headers and
    body as the SDK makes them (what retries and the limiter read)."""
    with SimulatedOpenAI() as server:
        server.throttle(1, retry_after=1.5)
        model = model_of(server.base_url)
        with pytest.raises(openai.RateLimitError) as caught:
            asyncio.run(releasing(model.ainvoke(MESSAGES)))
    error = caught.value
    assert error.status_code == 429 and error.response.headers["retry-after"] == "1.5"
    assert error.message.startswith("Error code: 429")
    assert isinstance(error.response, http_module().Response)


def test_a_refused_connection_is_an_api_connection_error_never_sent():
    """httpcore's ConnectError under the SDK's APIConnectionError, from aiohttp's error and
    the refusal itself; the attempt was watched and its request never went out."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = model_of(f"http://127.0.0.1:{port}/v1")
    attempt = Attempt()

    async def call():
        ATTEMPT.set(attempt)
        await model.ainvoke(MESSAGES)
    with pytest.raises(openai.APIConnectionError) as caught:
        asyncio.run(releasing(call()))
    error = caught.value
    assert not isinstance(error, openai.APITimeoutError)
    chain = causes(error)  # langchain-openai's subclass of the SDK's error first
    assert [type(e) for e in chain[1:3]] == [openai.APIConnectionError,
                                             http_module().ConnectError]
    assert isinstance(chain[3], aiohttp.ClientConnectorError)
    assert isinstance(chain[4], ConnectionRefusedError)
    assert attempt.watched and not attempt.sent and not reached(error, attempt)
    assert str(error.request.url) == f"http://127.0.0.1:{port}/v1/chat/completions"


def test_a_stream_goes_through_the_sdk_and_keeps_the_redirect_rule(straight):
    """A streamed call is not a plain one: it goes through the SDK's client, whose response
    hook refuses a redirect to another origin."""
    with RecordingServer() as elsewhere, \
            RecordingServer(redirect=(307, elsewhere.origin + "{path}")) as home:
        model = model_of(home.base_url, streaming=True)
        with pytest.raises(RedirectRefused, match="answered 307"):
            asyncio.run(releasing(model.ainvoke(MESSAGES)))
    assert straight == [] and len(home.requests) == 1
    assert json.loads(home.requests[0]["body"])["stream"] is True
    assert elsewhere.connections == 0 and elsewhere.requests == []


def test_a_response_format_call_goes_through_the_sdk_and_is_read_to_the_cap(straight):
    """A `response_format` argument takes langchain-openai's own path through the SDK's
    client, whose body cap cuts a 30 MB answer where the plain path would."""
    with Oversized(30 * MB) as server:
        model = model_of(server.base_url).bind(response_format={"type": "json_object"})
        reply = asyncio.run(releasing(model.ainvoke(MESSAGES)))
        plain = asyncio.run(releasing(model_of(server.base_url).ainvoke(MESSAGES)))
    assert straight and len(straight) == 1  # the second call only
    for each in (reply, plain):
        assert str(each.content).startswith(ANSWER)
        assert each.response_metadata["headers"]["x-parley-cut"].startswith(
            f"read={body_cap(REPLY_CAP)}; size=")
    assert server.requests == 2


@pytest.mark.parametrize("status", (302, 307))
def test_a_plain_completion_follows_a_redirect_within_the_origin_only(straight, status):
    """The direct path keeps the rule: within the origin followed (307 re-sends the body, 302
    turns the POST into a GET, as httpx does), to another origin refused, nothing sent
    there."""
    with RecordingServer() as elsewhere, \
            RecordingServer(redirect=(status, "/moved{path}"), reply="moved") as home:
        reply = asyncio.run(releasing(model_of(home.base_url).ainvoke(MESSAGES)))
        home.redirect = (status, elsewhere.origin + "{path}")
        with pytest.raises(RedirectRefused, match=f"answered {status}"):
            asyncio.run(releasing(model_of(home.base_url).ainvoke(MESSAGES)))
    assert json.loads(str(reply.content))["answer"] == "moved" and len(straight) == 2
    moved = [r for r in home.requests if r["path"] == "/moved/v1/chat/completions"]
    assert [r["method"] for r in moved] == (["POST"] if status == 307 else ["GET"])
    assert (moved[0]["body"] != "") == (status == 307)
    assert elsewhere.connections == 0 and elsewhere.requests == []


def test_a_plain_completion_goes_through_the_proxy_httpx_would_take(monkeypatch):
    """A proxy from the environment carries the direct path's request too (in absolute form,
    for a name only the proxy resolves), with nothing sent through httpx."""
    def refuse(*args, **kwargs):
        raise AssertionError("a plain completion went through httpx")
    monkeypatch.setattr(http_module().AsyncClient, "send", refuse)
    with RecordingServer() as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        reply = asyncio.run(releasing(model_of("http://model.invalid/v1").ainvoke(MESSAGES)))
    assert json.loads(str(reply.content))["answer"] == "reached"
    assert [(r["path"], r["host"]) for r in proxy.requests] == [
        ("http://model.invalid/v1/chat/completions", "model.invalid")]


def test_a_read_that_times_out_is_an_api_timeout_error():
    """A server that takes the request and never answers: the SDK's APITimeoutError over
    httpcore's ReadTimeout, as the SDK's own path raises it, the request having gone out."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # the connection is taken into the backlog and never answered
        model = model_of(f"http://127.0.0.1:{silent.getsockname()[1]}/v1", timeout=2)
        attempt = Attempt()

        async def call():
            ATTEMPT.set(attempt)
            await model.ainvoke(MESSAGES)
        with pytest.raises(openai.APITimeoutError) as caught:
            asyncio.run(releasing(call()))
    chain = causes(caught.value)
    assert [type(e) for e in chain[1:3]] == [openai.APITimeoutError, http_module().ReadTimeout]
    assert attempt.watched and attempt.sent
