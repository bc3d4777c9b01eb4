"""Issue 15: local models behind an OpenAI-compatible server. Output is bounded in the field
the server reads, an abandoned call closes its connection, call policy is configurable and
checked, the endpoint travels with the seat, and progress says what happened.

Every call here goes over HTTP to the loopback test server (`openai_stub`).
"""
from __future__ import annotations

import json
import time

import pytest
from openai_stub import SimulatedOpenAI

from engine import Seat, Store, get_model, run_vote
from engine.cli.main import main
from engine.llm.endpoints import EndpointRegistry
from engine.llm.providers import DEFAULT_MAX_TOKENS
from engine.models import ConfigError
from engine.services.rerun import rerun

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
              "all_proxy")
QUESTION = "What is 6 x 7?"


@pytest.fixture(autouse=True)
def loopback_env(monkeypatch):
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PARLEY_ENDPOINTS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def stub():
    with SimulatedOpenAI() as server:
        yield server


def bodies(server) -> list[dict]:
    return [r["body"] for r in server.requests]


def vote(model, **kw):
    seats = [Seat(name, model) for name in ("a", "b", "c")]
    return run_vote(QUESTION, voters=seats, **kw)


# ------------------------------------------------------------------ 1. bounded output
def test_cap_reaches_the_server_in_max_tokens(stub):
    """The seat's cap arrives as `max_tokens` (what llama.cpp's server reads), never as
    `max_completion_tokens` alone (which it ignores)."""
    vote(get_model(f"openai:smol?max_tokens=30&base_url={stub.base_url}"))
    assert bodies(stub) and all(b.get("max_tokens") == 30 for b in bodies(stub))
    assert not any("max_completion_tokens" in b for b in bodies(stub))


def test_default_cap_reaches_the_server(stub):
    vote(get_model(f"openai:smol?base_url={stub.base_url}"))
    assert all(b.get("max_tokens") == DEFAULT_MAX_TOKENS for b in bodies(stub))


def test_endpoint_cap_applies_and_the_seat_wins(stub, monkeypatch):
    monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps(
        {"local": {"base_url": stub.base_url, "max_tokens": 77}}))
    get_model("openai:smol?endpoint=local").invoke("hi")
    get_model("openai:smol?endpoint=local&max_tokens=12").invoke("hi")
    assert [b["max_tokens"] for b in bodies(stub)] == [77, 12]


def test_openai_own_api_keeps_its_field():
    """OpenAI's API reads `max_completion_tokens`: its models keep langchain's field."""
    model = get_model("openai:gpt-4o-mini", endpoints=EndpointRegistry(), api_key="sk-x")
    assert model.max_tokens == DEFAULT_MAX_TOKENS and not model.extra_body


def test_hung_reply_is_abandoned_and_its_connection_closed():
    """Past the timeout Parley gives up on the call and closes the request: the server sees
    the client disconnect, so a server that stops on disconnect stops generating."""
    with SimulatedOpenAI(hang=10) as server:
        model = get_model(f"openai:smol?base_url={server.base_url}")
        clock = time.monotonic()
        result = vote(model, timeout_per_call=0.5, retries=0)
        assert time.monotonic() - clock < 8
        assert [t.status for t in result.turns] == ["degraded"] * 3
        assert all("TimeoutError" in t.error for t in result.turns)
        deadline = time.monotonic() + 8
        while len(server.disconnected) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.disconnected == [True, True, True]
