"""Shared fixtures: a temporary SQLite store per test, the store on every backend (`backend`:
SQLite always, PostgreSQL when PARLEY_TEST_PG_URL is set), and scripted fake chat models.

Run by pytest-xdist (`-n 2`, which pyproject.toml's addopts asks for), each worker gets a
PostgreSQL database of its own, created beside PARLEY_TEST_PG_URL's and named after the worker,
so that one worker's emptying of the database never meets another's tests.

Markers: `browser` (the tests that drive Chromium) and `slow` (the measured slowest, `SLOW`);
`python -m pytest -q -m "not browser and not slow"` runs the fast lane."""
from __future__ import annotations

import json
import os
from uuid import uuid4

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from openai_stub import ENDPOINT_SETTINGS, SimulatedOpenAI, loopback_only
from sqlalchemy import create_engine, make_url, text

from engine import Store
from engine.store import Base, MigrationRow

# Fixtures several test modules share, with their helpers, which the tests import from the
# plugin (never from another test module): the browser tests' `page`, `app`, `shared_app`
# and `shots`, and the store full of hostile strings, `hostile`.
pytest_plugins = ["plugins.browser", "plugins.hostile"]


def _worker_database(url: str, worker: str) -> str:
    """`url` with its database replaced by `<database>_<worker>`, created when missing."""
    base = make_url(url)
    name = f"{base.database}_{worker}"
    engine = create_engine(base, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        if connection.execute(text("SELECT 1 FROM pg_database WHERE datname = :name"),
                              {"name": name}).first() is None:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return base.set(database=name).render_as_string(hide_password=False)


NEXT_ITEM = pytest.StashKey[object]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    """Note the test this process runs next (a pytest-xdist worker runs its own share, in its
    own order), before the fixtures are torn down: the browser session stops when that test
    needs no browser (plugins.browser.page)."""
    item.stash[NEXT_ITEM] = nextitem


# The tests that drive Chromium: every test of a `test_browser*` file, and any other test that
# asks for a browser page or the shared app server (or is marked `browser` by hand).
BROWSER_FIXTURES = frozenset({"page", "shared_app"})


# The slow tests, by measurement: each took this many seconds of its own (setup, call and
# teardown, over all its parameters) in `python -m pytest -m "not browser" --durations` on the
# 2-core machine (a shared one: the figures say which tests to leave out, not how fast they
# are). A file name stands for all its tests. Re-measure before adding or removing one.
SLOW: dict[str, float] = {
}


def _slow(item) -> bool:
    test = item.nodeid.split("[", 1)[0]
    return test in SLOW or test.split("::", 1)[0] in SLOW


def pytest_collection_modifyitems(config, items):
    """Mark the browser tests `browser` and the measured slow ones `slow`, so that
    `-m "not browser and not slow"` runs the fast lane."""
    for item in items:
        if item.path.name.startswith("test_browser") or BROWSER_FIXTURES & set(
                getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)
        if _slow(item):
            item.add_marker(pytest.mark.slow)


def pytest_configure(config):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    url = os.environ.get("PARLEY_TEST_PG_URL")
    if worker and url and url.startswith("postgresql"):
        os.environ["PARLEY_TEST_PG_URL"] = _worker_database(url, worker)


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


def fresh_pg_url() -> str:
    """The PostgreSQL test database (PARLEY_TEST_PG_URL), emptied: the test is skipped
    without one, and fails instead when PARLEY_REQUIRE_PG=1 (CI)."""
    url = os.environ.get("PARLEY_TEST_PG_URL")
    if not url:
        if os.environ.get("PARLEY_REQUIRE_PG") == "1":
            pytest.fail("PARLEY_REQUIRE_PG=1 but PARLEY_TEST_PG_URL is not set")
        pytest.skip("no PostgreSQL server (set PARLEY_TEST_PG_URL; .ci/run starts one)")
    _fresh_pg(url)
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def backend_url(request, tmp_path):
    """A new SQLite file, or the emptied PostgreSQL test database (skipped without one)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'parley.db'}"
    return fresh_pg_url()


@pytest.fixture
def backend(backend_url):
    return Store(backend_url)


@pytest.fixture
def pg_url():
    """A fresh database on the test server, dropped after the test."""
    url = os.environ.get("PARLEY_TEST_PG_URL")
    if not url:
        if os.environ.get("PARLEY_REQUIRE_PG") == "1":
            pytest.fail("PARLEY_REQUIRE_PG=1 but PARLEY_TEST_PG_URL is not set")
        pytest.skip("no PostgreSQL server (set PARLEY_TEST_PG_URL; .ci/run starts one)")
    name = f"parley_pool_{uuid4().hex[:10]}"
    admin = create_engine(make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    yield make_url(url).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as connection:
        connection.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                "WHERE datname = :name"), {"name": name})
        connection.execute(text(f"DROP DATABASE IF EXISTS {name}"))
    admin.dispose()


@pytest.fixture
def stub_endpoint(monkeypatch):
    """The loopback OpenAI-compatible stub (`openai_stub.SimulatedOpenAI`), registered as the
    endpoint `stub` (`openai:MODEL?endpoint=stub`), with no endpoint setting, key or price
    of the environment in the way."""
    loopback_only(monkeypatch, *ENDPOINT_SETTINGS, "PARLEY_PRICES")
    with SimulatedOpenAI() as stub:
        monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps({"stub": {"base_url": stub.base_url}}))
        yield stub
