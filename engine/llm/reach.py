"""Whether a failed model call's request reached its server: what the attempt is billed by.

A request that reached the server and got no answer back (a time-out after it was sent, a
connection cut while the server was working on it) may have been paid for: the server read
the prompt and may have generated. Such an attempt is billed its estimated input tokens
(`engine.llm.calls`). A request that never reached the server (the connection refused, the
host unreachable, a name that does not resolve) costs nothing, and neither does one the
server answered with an error status: providers bill no refused request.

Parley's own HTTP clients (`get_model`'s OpenAI models, `watch`) tell exactly: a request
hook gives each request a trace callback (httpcore's `trace` extension), which marks the
attempt in progress (`Attempt`, in a context variable the guarded call sets) once the
request's body has gone out in full, and a response hook records the status that came back.
For any other model the error decides (`reached`): a time-out, or a connection lost after it
was made, counts as reached; a refused or failed connection does not.
"""
from __future__ import annotations

import http.client
import socket
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from engine.errors import Unsent
from engine.llm.failures import classes, httpx_classes, status


@dataclass
class Attempt:
    """One attempt of a guarded call, as its HTTP client saw it: `watched` once a request
    went through a watched client; `sent` when the last request's body went out in full;
    `status` the last response's status, once its headers came (None before), and `json`
    whether that response said its body is JSON."""

    watched: bool = False
    sent: bool = False
    status: int | None = None
    json: bool = True

    @property
    def not_an_api(self) -> bool:
        """True when the server answered a request with success and a body that is not JSON
        (a web page at a wrong base URL), which no OpenAI-compatible client can read."""
        return self.watched and self.status is not None and 200 <= self.status < 300 and \
            not self.json


ATTEMPT: ContextVar[Attempt | None] = ContextVar("parley_attempt", default=None)

_HTTPX_UNSENT = ("ConnectError", "ConnectTimeout", "PoolTimeout", "UnsupportedProtocol",
                    "ProxyError", "InvalidURL")
_HTTPX_CUT_OFF = ("ReadTimeout", "ReadError", "RemoteProtocolError")


def _never_sent() -> tuple[type[BaseException], ...]:
    """Errors (anywhere in the chain of causes) that say the request never reached the
    server: the HTTP clients' (httpx, either flavour) and the socket's own, and Parley's."""
    return (ConnectionRefusedError, socket.gaierror, Unsent, *httpx_classes(*_HTTPX_UNSENT))


def _answer_lost() -> tuple[type[BaseException], ...]:
    """Errors that say the connection was lost while the server had the request."""
    return (ConnectionResetError, BrokenPipeError, http.client.IncompleteRead,
            *httpx_classes(*_HTTPX_CUT_OFF),
            *classes("aiohttp", "ServerDisconnectedError", "ClientPayloadError"))


def begin(inner: Any = None, asynchronous: bool = True) -> Callable[..., Any] | None:
    """A request starts under the attempt in progress, if any: it is marked watched and not
    yet sent, and the trace callback that marks it sent comes back (`inner`, the trace it
    replaces, is called after it); None when no attempt is in progress."""
    attempt = ATTEMPT.get()
    if attempt is None:
        return None
    attempt.watched, attempt.sent, attempt.status, attempt.json = True, False, None, True
    return _tracer(attempt, inner, asynchronous)


def answered(status_code: int, content_type: str) -> None:
    """A response's status and `Content-Type` came back to the attempt in progress, if any."""
    attempt = ATTEMPT.get()
    if attempt is not None:
        attempt.status = int(status_code)
        mime_type = content_type.split(";")[0].strip().lower()
        attempt.json = mime_type in ("", "text/event-stream") or mime_type.endswith(("/json",
                                                                            "+json"))


def watch(client: Any, asynchronous: bool) -> None:
    """Make an httpx client report each request's progress to the attempt in progress."""
    def on_start(request: Any) -> None:
        trace = begin(request.extensions.get("trace"), asynchronous)
        if trace is not None:
            request.extensions["trace"] = trace

    def on_answer(response: Any) -> None:
        answered(response.status_code, response.headers.get("content-type", ""))

    current = client.event_hooks
    # first among the response hooks: a redirect the client's own hook refuses is an answer
    client.event_hooks = {"request": [*current.get("request", []), hook(on_start, asynchronous)],
                          "response": [hook(on_answer, asynchronous),
                                       *current.get("response", [])]}


def hook(function: Callable[[Any], None], asynchronous: bool) -> Callable[[Any], Any]:
    """`function` as an httpx event hook: itself for a sync client; for an async one, which
    awaits its hooks, a coroutine function that calls it."""
    if not asynchronous:
        return function

    async def awaited(argument: Any) -> None:
        function(argument)
    return awaited


def _tracer(attempt: Attempt, inner: Any, asynchronous: bool) -> Callable[..., Any]:
    """httpcore's trace callback (a coroutine function for an async client): marks
    `attempt` sent when a request body has gone out, then calls the trace it replaces."""
    def trace(name: str, info: dict[str, Any]) -> Any:  # what the replaced trace returns
        if name.endswith("send_request_body.complete"):
            attempt.sent = True
        return inner(name, info) if inner is not None else None
    if not asynchronous:
        return trace

    async def atrace(name: str, info: dict[str, Any]) -> None:
        pending = trace(name, info)  # the replaced trace's coroutine, awaited here
        if pending is not None:
            await pending
    return atrace


def causes(exc: BaseException) -> list[BaseException]:
    """`exc` and what it was raised from, outermost first (at most 20 deep)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 20 and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def reached(exc: BaseException, attempt: Attempt | None) -> bool:
    """Whether an attempt that failed with `exc` reached its server and got no answer back
    (billed) rather than never reaching it, or being refused by it (not billed)."""
    if attempt is not None and attempt.watched:
        return attempt.sent and (attempt.status is None or 200 <= attempt.status < 300)
    chain = causes(exc)
    never, lost = _never_sent(), _answer_lost()
    if any(isinstance(error, never) or status(error) for error in chain):
        return False
    return any(isinstance(error, (*lost, TimeoutError)) for error in chain)
