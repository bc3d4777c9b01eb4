"""Redirects carry prompts to hosts nobody registered: a model call never follows a redirect
to another origin, and the refusal is recorded on the turn, unretried.

Two loopback servers: "home", the endpoint the operator registered (its key in
`HOME_API_KEY`), which answers every call with a redirect, and "elsewhere", where the redirect
points, which would answer a call (so a followed redirect would succeed and fail these tests)
and counts every connection it accepts. The openai SDK's own clients follow redirects (the
first test shows it); Parley's (engine.llm.transport) do so only within the origin.
"""
from __future__ import annotations

import asyncio
import json

import openai
import pytest
from openai_stub import ENDPOINT_SETTINGS, loopback_only
from recording_server import RecordingServer

from engine import Seat, get_model, run_vote
from engine.llm.failures import is_transient
from engine.llm.endpoints import Endpoint, EndpointRegistry
from engine.llm.transport import RedirectRefused

HOME_KEY = "sk-parley-HOME-key-never-elsewhere-5d1e"
CANARY = "sk-parley-CANARY-openai-key-0b7f"
STATUSES = (301, 302, 303, 307, 308)
QUESTION = "Should the team adopt the plan?"


@pytest.fixture(autouse=True)
def loopback(monkeypatch):
    loopback_only(monkeypatch, *ENDPOINT_SETTINGS, "PARLEY_ALLOW_BASE_URLS")
    monkeypatch.setenv("HOME_API_KEY", HOME_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)


def registry(home: RecordingServer, allow_free_urls: bool = False) -> EndpointRegistry:
    return EndpointRegistry([Endpoint("home", home.base_url, key_env="HOME_API_KEY")],
                            allow_free_urls=allow_free_urls,
                            environ={"HOME_API_KEY": HOME_KEY, "OPENAI_API_KEY": CANARY})


def vote(model: str, endpoints: EndpointRegistry):
    return run_vote(QUESTION, voters=[Seat("a", model), Seat("b", model)],
                    endpoints=endpoints)


def nothing_reached(elsewhere: RecordingServer) -> None:
    """Not a request, not even a connection: so neither the prompt nor a key went there."""
    assert elsewhere.connections == 0 and elsewhere.requests == []


def test_the_sdk_default_client_follows_a_redirect_to_another_origin():
    """The finding, shown on the SDK's own client: a 307 re-sends the prompt elsewhere."""
    with RecordingServer() as elsewhere, \
            RecordingServer(redirect=(307, elsewhere.origin + "{path}")) as home:
        with openai.DefaultHttpxClient() as client:
            client.post(home.base_url + "/chat/completions", json={"prompt": "secret plan"})
        assert [r["body"] for r in elsewhere.requests] == ['{"prompt":"secret plan"}']


@pytest.mark.parametrize("status", STATUSES)
def test_a_redirect_to_another_origin_is_refused_and_recorded_on_the_turn(status):
    with RecordingServer() as elsewhere, \
            RecordingServer(redirect=(status, elsewhere.origin + "{path}")) as home:
        result = vote("openai:m?endpoint=home", registry(home))
    assert len(result.turns) == 2
    for turn in result.turns:
        assert turn.status == "degraded" and turn.attempts == 1, turn  # not retried
        assert turn.error == (
            f"RedirectRefused: the server at {home.origin} answered {status}, redirecting to "
            f"{elsewhere.origin}; Parley does not follow a model call to another origin "
            "(if the server moved, point its base_url there)")
    nothing_reached(elsewhere)
    assert len(home.requests) == 2  # one call per voter, each carrying home's own key
    assert {r["auth"] for r in home.requests} == {f"Bearer {HOME_KEY}"}


@pytest.mark.parametrize("status", (302, 307))
def test_a_redirect_from_a_base_url_that_came_with_data_is_refused_too(status):
    with RecordingServer() as elsewhere, \
            RecordingServer(redirect=(status, elsewhere.origin + "{path}")) as free:
        endpoints = EndpointRegistry(allow_free_urls=True)
        result = vote(f"openai:m?base_url={free.base_url}", endpoints)
    assert all(t.error.startswith(f"RedirectRefused: the server at {free.origin} answered "
                                  f"{status}") for t in result.turns), result.turns
    nothing_reached(elsewhere)


@pytest.mark.parametrize("location", (
    "https://127.0.0.1:{port}{path}",   # only the scheme changes
    "http://localhost:{port}{path}",    # only the host's name changes
    "http://127.0.0.1:{other}{path}",   # only the port changes
    "//127.0.0.1:{other}{path}",        # scheme-relative
    "http:/{path}",                     # absolute with no host
), ids=("scheme", "host", "port", "scheme-relative", "no-host"))
def test_a_redirect_that_changes_the_scheme_host_or_port_is_refused(location):
    with RecordingServer() as elsewhere, RecordingServer() as home:
        home.redirect = (308, location.replace("{port}", str(home.port))
                         .replace("{other}", str(elsewhere.port)))
        result = vote("openai:m?endpoint=home", registry(home))
    for turn in result.turns:
        assert turn.error.startswith(f"RedirectRefused: the server at {home.origin} answered "
                                     "308, redirecting to "), turn.error
        assert turn.attempts == 1
    assert len(home.requests) == 2  # nothing followed, even back to home itself
    nothing_reached(elsewhere)


@pytest.mark.parametrize("status", STATUSES)
def test_a_redirect_within_the_origin_is_followed(status):
    """Same scheme, host and port: the registered server, which holds the key anyway."""
    with RecordingServer() as elsewhere, \
            RecordingServer(redirect=(status, "/moved{path}"), reply="moved") as home:
        result = vote("openai:m?endpoint=home", registry(home))
    assert [t.status for t in result.turns] == ["ok", "ok"], [t.error for t in result.turns]
    assert all(json.loads(t.reply)["answer"] == "moved" for t in result.turns)
    moved = [r for r in home.requests if r["path"] == "/moved/v1/chat/completions"]
    assert len(moved) == 2 and {r["auth"] for r in moved} == {f"Bearer {HOME_KEY}"}
    # 307 and 308 re-send the prompt; 301-303 turn the POST into a GET, as browsers do
    assert {r["method"] for r in moved} == ({"POST"} if status in (307, 308) else {"GET"})
    nothing_reached(elsewhere)


def test_the_synchronous_path_refuses_too():
    """`invoke` goes through the sync client (`http_client`), built with the same rule."""
    with RecordingServer() as elsewhere, \
            RecordingServer(redirect=(307, elsewhere.origin + "{path}")) as home:
        model = get_model("openai:m?endpoint=home", endpoints=registry(home))
        with pytest.raises(RedirectRefused, match="answered 307"):
            model.invoke("secret plan")
        with pytest.raises(RedirectRefused, match="answered 307"):
            asyncio.run(model.ainvoke("secret plan"))
    nothing_reached(elsewhere)
    assert "secret plan" in json.dumps(home.requests)


def test_a_refused_redirect_is_not_transient():
    error = RedirectRefused("the server at http://x answered 307, ...", 307)
    assert not is_transient(error)


def test_a_model_built_in_code_with_a_proxy_keeps_the_rule():
    """`openai_proxy` from code goes into Parley's clients instead of replacing them."""
    with RecordingServer() as home:
        model = get_model("openai:m?endpoint=home", endpoints=registry(home),
                          openai_proxy="http://127.0.0.1:9")
    hooks = model.http_async_client.build().event_hooks["response"]  # each loop's client
    assert hooks and model.http_client.event_hooks["response"]
    assert model.openai_proxy is None
