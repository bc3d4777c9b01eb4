"""An OpenAI-compatible model's plain chat completion goes out without the SDK's body transform.

`engine.llm.providers` sends it through the SDK's client with the body langchain-openai
builds (`_lean_completion`): these tests pin that the server receives what langchain-openai's
own path sends, that the reply reads the same, and that a call with a `response_format`
argument still takes langchain-openai's own path.
"""
from __future__ import annotations

import asyncio
import json

import openai.resources.chat.completions.completions as sdk_completions
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from openai_stub import ENDPOINT_SETTINGS, loopback_only
from recording_server import RecordingServer

from engine import get_model
from engine.llm import providers

MESSAGES = [SystemMessage("You are a careful analyst."), HumanMessage("Should we ship?"),
            AIMessage("I lean yes."), HumanMessage("Others said no. Answer in JSON.")]
FORMAT = {"response_format": {"type": "json_object"}}


@pytest.fixture(autouse=True)
def loopback(monkeypatch):
    loopback_only(monkeypatch, *ENDPOINT_SETTINGS, "PARLEY_ALLOW_BASE_URLS")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-lean")


def parley_model(server: RecordingServer, **body):
    """Parley's model of the server, its request body given `body`'s fields too (as
    `engine.llm.structured.generate` adds them)."""
    model = get_model(f"openai:m?base_url={server.base_url}&temperature=0.3")
    return model.bind(extra_body={**(model.extra_body or {}), **body}) if body else model


def sent(server: RecordingServer) -> list[tuple[str, str, dict]]:
    return [(r["path"], r["auth"], json.loads(r["body"])) for r in server.requests]


def test_the_server_receives_what_langchain_openai_itself_sends():
    with RecordingServer() as lean, RecordingServer() as own:
        reply = asyncio.run(parley_model(lean, **FORMAT).ainvoke(MESSAGES))
        # langchain-openai's own path, given the same fields Parley's model carries
        bound = parley_model(lean)
        plain = ChatOpenAI(model="m", base_url=own.base_url, api_key="not-needed",
                           temperature=0.3, max_retries=0,
                           extra_body={**(bound.extra_body or {}), **FORMAT})
        expected = asyncio.run(plain.ainvoke(MESSAGES))
    assert sent(lean) == sent(own)
    assert sent(lean)[0][2]["response_format"] == {"type": "json_object"}
    assert sent(lean)[0][2]["max_tokens"] == 1024  # the output cap
    assert len(sent(lean)[0][2]["messages"]) == 4
    assert reply.content == expected.content
    assert reply.usage_metadata == expected.usage_metadata
    assert "headers" in reply.response_metadata  # the transport's cut header is read there


def test_a_plain_completion_skips_the_sdks_transform(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the SDK's body transform ran")
    monkeypatch.setattr(sdk_completions, "async_maybe_transform", refuse)
    with RecordingServer() as server:
        reply = asyncio.run(parley_model(server, **FORMAT).ainvoke(MESSAGES))
    assert json.loads(str(reply.content))["answer"] == "reached"


def test_a_response_format_argument_takes_langchain_openais_own_path(monkeypatch):
    lean = []
    real = providers._lean_completion

    async def counted(model, payload, plain):
        lean.append(payload)
        return await real(model, payload, plain)
    monkeypatch.setattr(providers, "_lean_completion", counted)
    with RecordingServer() as server:
        asyncio.run(parley_model(server).ainvoke(MESSAGES))
        asyncio.run(parley_model(server).bind(response_format={"type": "json_object"})
                    .ainvoke(MESSAGES))
        assert len(server.requests) == 2
    assert len(lean) == 1  # the first call only
