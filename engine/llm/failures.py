"""What a failed model call's exception is, decided once, by its class, where it is caught.

The guarded call (`engine.llm.calls`) asks here whether an attempt's exception is worth
retrying (`is_transient`), what the turn counts it as (`failure_of`, one of `engine.errors`'
kinds) and whether the server was not reached (`unreachable`). Library errors (openai,
anthropic, httpx) are matched against the library's own classes, taken from the library
only once it is imported: no exception of a library never imported can be raised, and the
simulated path never pays for importing one.
"""
from __future__ import annotations

import sys

from engine.errors import CONNECTION, NOT_AN_API, RATE_LIMITED, TIMED_OUT, ParleyError


def classes(module: str, *names: str) -> tuple[type[BaseException], ...]:
    """The exception classes `names` of `module` when it is imported, else none."""
    loaded = sys.modules.get(module)
    found = (getattr(loaded, name, None) for name in names) if loaded is not None else ()
    return tuple(c for c in found if isinstance(c, type) and issubclass(c, BaseException))


def httpx_classes(*names: str) -> tuple[type[BaseException], ...]:
    """`names` of httpx in either flavour the SDKs send through (httpx, httpx2)."""
    return classes("httpx", *names) + classes("httpx2", *names)


def _connection_classes() -> tuple[type[BaseException], ...]:
    """A provider SDK's or an HTTP client's failure to reach, or keep, its server (its
    time-outs included)."""
    return (ConnectionError, *classes("openai", "APIConnectionError"),
            *classes("anthropic", "APIConnectionError"), *httpx_classes("TransportError"))


def _timeout_classes() -> tuple[type[BaseException], ...]:
    return (TimeoutError, *classes("openai", "APITimeoutError"),
            *classes("anthropic", "APITimeoutError"), *httpx_classes("TimeoutException"))


def status(exc: BaseException) -> int | None:
    """The HTTP status an error carries (an answer the server gave), else None."""
    code = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None),
                                                        "status_code", None)
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def is_transient(exc: BaseException) -> bool:
    """True for errors worth retrying: rate limits (429), server errors (5xx), time-outs and
    connection trouble."""
    code = status(exc)
    if code is not None and (code == 429 or code >= 500):
        return True
    return isinstance(exc, (*_timeout_classes(), *_connection_classes()))


def unreachable(exc: BaseException) -> bool:
    """True for a failure to reach the server (refused, reset, DNS), not a reply it gave."""
    return isinstance(exc, _connection_classes()) and not isinstance(exc, _timeout_classes())


def failure_of(exc: BaseException, *, not_an_api: bool = False) -> str:
    """What a call that ended with `exc` is counted as: a kind of `engine.errors` (a Parley
    error's own, a 429, a time-out, a connection error, a reply that was not an API's when
    the client saw one, `not_an_api`), else the exception's class as its error names it."""
    if isinstance(exc, ParleyError) and exc.failure:
        return exc.failure
    if status(exc) == 429:
        return RATE_LIMITED
    if isinstance(exc, _timeout_classes()):
        return TIMED_OUT
    if isinstance(exc, _connection_classes()):
        return CONNECTION
    if not_an_api:
        return NOT_AN_API
    return type(exc).__name__
