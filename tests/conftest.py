"""Shared fixtures: a temporary SQLite store per test, and scripted fake chat models."""
from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage

from engine import Store


@pytest.fixture
def store(tmp_path):
    """A fresh SQLite store in a temporary file."""
    return Store(f"sqlite:///{tmp_path / 'parley.db'}")


class RecordingModel(FakeMessagesListChatModel):
    """A fake chat model that answers from a list (or a function) and keeps what it received.

    `replies` items may be strings, or exceptions to raise for that call.
    `received` holds each call's messages as [(role, content), ...].
    """

    received: list = []
    script: list = []
    fn: object = None

    def __init__(self, replies=(), fn=None, **kw):
        super().__init__(responses=[AIMessage(content="unused")], **kw)
        object.__setattr__(self, "received", [])
        object.__setattr__(self, "script", list(replies))
        object.__setattr__(self, "fn", fn)

    def _answer(self, messages):
        convo = [(m.type, m.content) for m in messages]
        self.received.append(convo)
        if self.fn is not None:
            value = self.fn(convo)
        else:
            value = self.script[min(len(self.received), len(self.script)) - 1] \
                if self.script else ""
        if isinstance(value, BaseException):
            raise value
        return value

    def _generate(self, messages, stop=None, run_manager=None, **kw):
        from langchain_core.outputs import ChatGeneration, ChatResult
        return ChatResult(generations=[ChatGeneration(message=AIMessage(
            content=self._answer(messages)))])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kw):
        return self._generate(messages, stop, run_manager, **kw)


@pytest.fixture
def recording_model():
    """Factory: recording_model(["reply 1", "reply 2", ValueError("boom")]) or fn=callable."""
    return RecordingModel


@pytest.fixture
def db_url(tmp_path, monkeypatch):
    """A temporary SQLite URL set as PARLEY_DB_URL for the pages (their store is cached per
    URL, so tests never share one)."""
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    return url
