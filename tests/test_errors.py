"""One error base, and a failure's kind decided where it is caught, by its class.

- every exception class the engine and the pages define derives from `ParleyError`;
- nothing in the source classifies an error by its class's name or its message's words;
- a failed call's kind comes from what was caught (a Parley error's kind, a 429, a library's
  time-out or connection class), never from the words of its error.
"""
from __future__ import annotations

import ast
import asyncio
import importlib
import re
from pathlib import Path

import httpx
import openai
import pytest

from engine import ConfigError, ParleyError, Seat
from engine.access import NotAllowed
from engine.errors import CONNECTION, EMPTY, RATE_LIMITED, TIMED_OUT, UNREADABLE
from engine.llm.calls import RunContext
from engine.llm.failures import failure_of
from engine.protocols.base import no_call_succeeded

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("engine/**/*.py"), *ROOT.glob("pages/*.py"), ROOT / "app.py"])
ERROR = r"(?:e|exc|error|err|exception|caught)"
# What classifying an error by its class's name or by the words of its message looks like.
CLASSIFYING = [
    re.compile(r"__name__\s*\.\s*lower\(\)"),
    re.compile(rf"type\({ERROR}\)\.__name__\s*(?:==|!=|\bin\b|\.startswith|\.endswith)"),
    re.compile(r"\{\s*type\(\w+\)\.__name__\s+for\b"),
    re.compile(rf"\bin\s+str\({ERROR}\)"),
    re.compile(rf"str\({ERROR}\)(?:\.\w+\([^)]*\))*\.lower\(\)"),
    re.compile(r"\bdef\s+failure_kind\b|_TRANSIENT_NAMES|_NEVER_SENT|_ANSWER_LOST"),
]
# A server's 400 says in words which part of a request it refused: whether it was the
# structured output asked for is read from them (the endpoint's format is then stepped down).
READS_A_SERVERS_WORDS = {"engine/llm/structured.py": 1}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_no_error_is_classified_by_its_class_name_or_its_words():
    found: dict[str, list[str]] = {}
    for path in SOURCES:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if any(pattern.search(line) for pattern in CLASSIFYING):
                found.setdefault(_rel(path), []).append(f"{number}: {line.strip()}")
    allowed = {path: lines for path, lines in found.items()
               if len(lines) <= READS_A_SERVERS_WORDS.get(path, 0)}
    assert {path: lines for path, lines in found.items() if path not in allowed} == {}


@pytest.mark.parametrize("line", [
    'name = type(exc).__name__.lower()',
    'return "unexpected response type" in str(exc).lower()',
    'if "rate limit" in str(error):',
    'names = {type(error).__name__ for error in chain}',
    'simulated = type(exc).__name__ == "SimulatedFault"',
])
def test_the_check_catches_a_classification_coming_back(line):
    assert any(pattern.search(line) for pattern in CLASSIFYING)


def _exception_classes():
    for path in sorted(ROOT.glob("engine/**/*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if module.endswith("__main__"):
            continue
        names = [node.name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.ClassDef)]
        if not names:
            continue
        loaded = importlib.import_module(module.removesuffix(".__init__"))
        for name in names:
            cls = getattr(loaded, name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                yield f"{module}.{name}", cls


def test_every_parley_exception_derives_from_one_base():
    """Every error does; a signal raised like Ctrl-C (a `BaseException`, which no `except
    Exception` may catch) is no error and stays apart."""
    classes = dict(_exception_classes())
    assert len(classes) >= 12  # the twelve the issue counted, and those added since
    assert [name for name, cls in classes.items() if not issubclass(cls, ParleyError)] == [
        "engine.cli.main.Terminated"]
    assert not issubclass(classes["engine.cli.main.Terminated"], Exception)


def test_the_errors_a_page_shows_are_caught_as_one():
    assert issubclass(ConfigError, ValueError) and issubclass(NotAllowed, PermissionError)
    assert issubclass(ConfigError, ParleyError) and issubclass(NotAllowed, ParleyError)


# --------------------------------------------------------------------------- kinds
class Failing:
    """A duck-typed model whose every call raises `error`."""

    def __init__(self, error: BaseException):
        self.error = error

    async def ainvoke(self, messages):
        raise self.error


def one_failed_turn(error: BaseException):
    ctx = RunContext("test", retries=0, backoff=0)
    return asyncio.run(ctx.call(Seat("seat", Failing(error)), [
        {"role": "user", "content": "Say hello."}], phase="test"))


def test_the_words_of_an_error_do_not_make_its_kind():
    """An error that merely says "rate limited", "timed out" and "connection refused" is
    counted as what it is (its class), not as what its words suggest."""
    named = type("APITimeoutError", (Exception,), {})
    turn = one_failed_turn(named("rate limited; timed out; connection refused; unreadable"))
    assert turn.status == "degraded" and turn.failure == "APITimeoutError"
    assert no_call_succeeded([turn]) == "no model call succeeded (1 call: 1 APITimeoutError)"


REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


@pytest.mark.parametrize(("error", "kind"), [
    (openai.RateLimitError("Error code: 429", response=httpx.Response(429, request=REQUEST),
                           body=None), RATE_LIMITED),
    (openai.APITimeoutError(REQUEST), TIMED_OUT),
    (openai.APIConnectionError(request=REQUEST), CONNECTION),
    (httpx.ConnectError("[Errno 111]"), CONNECTION),
    (TimeoutError(), TIMED_OUT),
    (ConnectionResetError("reset by peer"), CONNECTION),
    (ValueError("Unexpected response type from OpenAI-compatible endpoint"), "ValueError"),
])
def test_a_library_error_is_classified_by_its_class(error, kind):
    assert failure_of(error) == kind
    assert one_failed_turn(error).failure == kind


def test_a_reply_that_was_not_an_apis_is_what_the_client_saw():
    assert failure_of(ValueError("anything"), not_an_api=True) != "ValueError"


def test_kinds_set_where_the_call_ended():
    class Empty:
        async def ainvoke(self, messages):
            return ""
    ctx = RunContext("test", retries=0, backoff=0)
    empty = asyncio.run(ctx.call(Seat("seat", Empty()), [
        {"role": "user", "content": "Hi."}], phase="test"))
    assert empty.failure == EMPTY

    def broken(text):
        raise KeyError(text)
    ctx = RunContext("test", retries=0, backoff=0)

    class Says:
        async def ainvoke(self, messages):
            return "hello"
    unread = asyncio.run(ctx.call(Seat("seat", Says()), [
        {"role": "user", "content": "Hi."}], phase="test", parse=broken))
    assert unread.failure == UNREADABLE and unread.error.startswith("the reply could not")
    assert no_call_succeeded([empty, unread]) == (
        "no model call succeeded (2 calls: 1 empty reply, 1 unreadable reply)")


@pytest.mark.parametrize(("error", "billed"), [
    (httpx.ConnectError("[Errno 111] Connection refused"), False),
    (httpx.ReadTimeout("the server took too long"), True),
    (httpx.RemoteProtocolError("Server disconnected"), True),
    (ConnectionRefusedError(), False),
    (TimeoutError(), True),
    (type("ReadTimeout", (Exception,), {})("named like httpx's, but not it"), False),
])
def test_whether_a_failed_request_reached_its_server_is_told_by_class(error, billed):
    """An attempt no HTTP client watched is billed by its error's class (and its causes'):
    a read cut off or timed out reached the server; a refused connection did not."""
    from engine.llm.reach import reached
    wrapped = openai.APIConnectionError(request=REQUEST)
    wrapped.__cause__ = error
    assert reached(error, None) is billed and reached(wrapped, None) is billed


def test_the_cli_says_a_parley_error_in_one_line(monkeypatch, capsys, tmp_path):
    """A refusal the CLI's command raises (here a role's) ends it with one line and exit 1,
    never a traceback."""
    from engine.access import Actor, Role
    import importlib
    cli = importlib.import_module("engine.cli.main")

    def refuse(args):
        raise NotAllowed(Actor("val@example.com", Role.VIEWER), "delete runs")
    monkeypatch.setattr(cli, "cmd_delete", refuse)
    assert cli.main(["delete", "x", "--db", f"sqlite:///{tmp_path / 'p.db'}"]) == 1
    assert capsys.readouterr().err == (
        "error: val@example.com (viewer) may not delete runs: that needs the admin role\n")
