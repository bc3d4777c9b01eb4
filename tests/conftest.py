"""Shared fixtures: a temporary SQLite store per test, the store on every backend (`backend`:
SQLite always, PostgreSQL when PARLEY_TEST_PG_URL is set), and scripted fake chat models."""
from __future__ import annotations

import os

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from sqlalchemy import create_engine, text

from engine import Store
from engine.store import Base, MigrationRow


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


def _fresh_pg(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as connection:
        Base.metadata.drop_all(connection)
        MigrationRow.__table__.drop(connection, checkfirst=True)
        for table in ("experiment_cells", "experiments"):
            connection.execute(text(f"DROP TABLE IF EXISTS {table} CASCADE"))
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def backend_url(request, tmp_path):
    """A new SQLite file, or the emptied PostgreSQL test database (skipped without one)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'parley.db'}"
    url = os.environ.get("PARLEY_TEST_PG_URL")
    if not url:
        if os.environ.get("PARLEY_REQUIRE_PG") == "1":
            pytest.fail("PARLEY_REQUIRE_PG=1 but PARLEY_TEST_PG_URL is not set")
        pytest.skip("no PostgreSQL server (set PARLEY_TEST_PG_URL; .ci/run starts one)")
    _fresh_pg(url)
    return url


@pytest.fixture
def backend(backend_url):
    return Store(backend_url)
