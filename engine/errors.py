"""Parley's one error base, and the kinds a failed model call is counted by.

Every exception Parley defines derives from `ParleyError`, so a page or the CLI that shows
what went wrong catches one class. A failed call's kind is decided where its exception is
caught (`engine.llm.failures`), by the exception's class, and travels on the turn
(`Turn.failure`): nothing reads it back from an error's text or a class's name.
"""
from __future__ import annotations

# What a failed model call is counted as (`Turn.failure`): the words a run's error (`no model
# call succeeded (3 calls: 2 timed out, 1 connection error)`) and the CLI's progress show.
RATE_LIMITED = "rate limited"
TIMED_OUT = "timed out"
CONNECTION = "connection errors"
EMPTY = "empty replies"
UNREADABLE = "unreadable replies"
NOT_AN_API = "replies that were not an API's (check the base URL)"
UNEXPLAINED = "unexplained"

SINGULAR = {CONNECTION: "connection error", EMPTY: "empty reply",
            UNREADABLE: "unreadable reply",
            NOT_AN_API: "reply that was not an API's (check the base URL)"}


class ParleyError(Exception):
    """The base of every error Parley raises. `failure` is what a model call that ends with
    it is counted as ("" when it is no call's failure, or the class's own name says it)."""

    failure: str = ""


class Unsent(ParleyError):
    """A model call's request never reached a server that would bill it (the connection was
    not made, or a redirect was not followed): an attempt that ends with it costs nothing."""

    failure = CONNECTION


def counted(failure: str, count: int) -> str:
    """A failure as counted: `1 connection error`, `2 connection errors`."""
    return f"{count} {SINGULAR.get(failure, failure) if count == 1 else failure}"
