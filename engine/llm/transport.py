"""The HTTP clients model calls go through, and the two rules they keep on the wire.

A redirect to another origin (scheme, host, port) is never followed: the server registered
for a key, or allowed for a prompt, is the only one that gets them; 301-303 would turn the call
into a GET elsewhere and 307/308 would re-send the whole prompt there. The call fails with
`RedirectRefused`, which is not retried. A redirect within the origin is followed: the key and
the address rule are bound to the origin, and a server moving a path within it (a trailing
slash, /v1 to /api/v1) reaches no one new.

A client built with `guard=True` (for a base URL that is not a registered endpoint) resolves
each host itself when it connects, refuses the connection (`AddressRefused`) when any address
the name resolves to is link-local or a cloud metadata address (`engine.llm.urls`), and
connects to the very addresses it checked, so no name, spelling or DNS rebinding between the
check and the connection reaches them. TLS still verifies the URL's host name (the origin's
name goes as SNI and in the Host header; only the socket gets the address).

A plain chat completion, what nearly every call of a run is, goes straight over an aiohttp
session of the async client's (`post_plain`, from `engine.llm.providers`): no httpx request
or response is made for it, and httpcore's connection pool, which costs a few milliseconds
of CPU a call with many connections open, is not used (aiohttp's costs about a third of
that). The session's connector checks the addresses (`guarded_connector`), its failures are
raised as the httpx errors httpcore raises for the same failure (a refused connection a
`ConnectError`, a read that timed out a `ReadTimeout`: `engine.llm.failures` classifies
them as before), and it reports the request's body sent as httpcore's trace does
(`engine.llm.reach`); it goes through the proxy httpx would take. Any other request (a
stream, a `response_format` argument) goes through httpx, as the sync client's do.

A response is read up to a cap (`engine.llm.sizes.body_cap` of the model's stored reply cap),
decompressed included: the clients accept only gzip and deflate, each decoded a bounded piece
at a time, so a 200 MB gzip body is never inflated past the cap, and a body in an encoding
Parley did not ask for is refused (`UnreadableResponse`). What is past the cap is never read.
A chat completion cut there is handed on honestly: the JSON read so far, closed where it
stops (its reply text cut there, its usage dropped as unread), and `CUT_HEADER` saying how
much was read and the response's size when the server declared it; `sizes.capped_reply`
reads that off the reply. A cut body that is not a chat completion fails the call with
`UnreadableResponse`, not retried.
"""
from __future__ import annotations

import asyncio
import functools
import importlib
import json
import socket
import ssl
import threading
import zlib
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from engine.errors import UNREADABLE, ParleyError, Unsent
from engine.llm.reach import answered, begin, hook, watch
from engine.llm.sizes import CUT_HEADER, REPLY_CAP, body_cap, size_text
from engine.llm.urls import risky_address

if TYPE_CHECKING:
    from engine.llm.capabilities import Capabilities

ACCEPTED = "gzip, deflate"  # the encodings a model's response may come in, each bounded
_REDIRECTS = (301, 302, 303, 307, 308)  # the statuses httpx follows a Location of
_CHUNK = 16 * 1024  # bytes read off a response at a time, as httpx-aiohttp reads them
ERROR_CAP = 4096  # bytes of an error response read: the SDK puts them all in its message
# headers of the server's that no longer describe the body handed on (or that only the
# transport may set)
_REPLACED = ("content-encoding", "content-length", "transfer-encoding", CUT_HEADER)
T = TypeVar("T")


class RedirectRefused(Unsent):
    """A model call's server redirected it to another origin, and the call was not followed."""

    def __init__(self, message: str, status_code: int):
        super().__init__(message)
        self.status_code = status_code  # a 3xx: `is_transient` does not retry it


class AddressRefused(Unsent):
    """A connection was not made: the host resolves to a link-local or metadata address."""


class UnreadableResponse(ParleyError):
    """A model's response was not read: an encoding Parley did not ask for, or a body past
    the cap whose start is not a chat completion. Not retried (the server would send the same
    again)."""

    failure = UNREADABLE


def http_module() -> Any:
    """The httpx flavour the openai SDK sends through (httpx2 for openai>=3, else httpx)."""
    try:
        from langchain_openai._compat import httpx
    except ImportError:  # older langchain-openai: the SDK uses httpx
        import httpx
    return httpx


def model_client(asynchronous: bool, *, guard: bool, proxy: str | None = None,
                 verify: Any = None, limits: Any = None, reply_cap: int | None = None) -> Any:
    """An httpx client for the openai SDK (sync, over httpcore; or async, with an aiohttp
    session for plain requests), with its defaults, that keeps both rules and reads a
    response up to the body cap of `reply_cap` (the stored cap of a reply, by default
    `REPLY_CAP`); `guard` adds the address check. `verify` is its TLS context (None: the
    process's, `tls_context`), `limits` its connection limits (None: the SDK's). An async
    one belongs to the event loop that first sends through it: `shared_clients` hands each
    loop its own, since a kept-alive connection from a finished loop fails the next call."""
    options: dict[str, Any] = {
        "proxy": proxy, "verify": verify if verify is not None else tls_context(),
        "event_hooks": {"response": [hook(_refuse_cross_origin, asynchronous)]},
        **({"limits": limits} if limits is not None else {}),
        **({"guard": guard} if asynchronous else {})}
    client = _bounded_classes()[asynchronous](body_cap(reply_cap or REPLY_CAP), **options)
    watch(client, asynchronous)  # whether a failed call's request reached the server
    if guard:
        guard_connections(client, asynchronous)
    return client


def guard_connections(client: Any, asynchronous: bool) -> None:
    """Make an httpx `client`'s direct connections check the addresses they go to (see the
    module); the aiohttp session's connector checks its own (`guarded_connector`).

    httpx takes no network backend, so the guard wraps the one its connection pool holds;
    a library that moved it fails here, loudly, rather than connecting unchecked. Proxied
    requests (a `proxy`, or the environment's for a host NO_PROXY does not name) connect to
    the proxy, which resolves the name itself: only the URL's spelling is checked for them."""
    pool: Any = getattr(getattr(client, "_transport", None), "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is None:
        raise RuntimeError(f"cannot check the addresses {type(client).__name__} connects to: "
                           "its transport has no connection pool with a network backend")
    core = importlib.import_module(type(pool).__module__.partition(".")[0])  # httpcore(2)
    pool._network_backend = (_AsyncGuard if asynchronous else _SyncGuard)(backend, core)


def origin(url: Any) -> str:
    """`scheme://host[:port]` of an httpx URL (the port only when not the default): two URLs
    of one origin give the same text, as httpx writes a scheme and host in lower case and
    drops a default port."""
    host = str(url.host)
    shown = f"[{host}]" if ":" in host else host
    return f"{url.scheme}://{shown}" + (f":{url.port}" if url.port else "")


def _refuse_cross_origin(response: Any) -> None:
    """A response hook: a redirect to another origin ends the call here, unfollowed."""
    if response.has_redirect_location:
        redirect_target(response.request.url, response.status_code, response.headers["location"])


def redirect_target(here: Any, status_code: int, location: str) -> Any:
    """Where a redirect from `here` (an httpx URL) to `location` goes, when it stays in the
    origin; `RedirectRefused` when it does not."""
    try:
        there: Any = here.join(location)
        shown = origin(there) if there.host else "a location with no host"
    except Exception:  # a Location httpx cannot read is not followed either
        there, shown = None, "an unreadable location"
    if there is not None and there.host and origin(here) == origin(there):
        return there
    raise RedirectRefused(f"the server at {origin(here)} answered {status_code}, "
                          f"redirecting to {shown[:200]}; Parley does not follow a model call "
                          "to another origin (if the server moved, point its base_url there)",
                          status_code)


def checked_addresses(host: str, port: int, found: Iterable[tuple[Any, ...]]) -> list[str]:
    """The addresses `getaddrinfo` gave for `host`, each allowed, or `AddressRefused`."""
    from engine.llm.endpoints import REGISTER_HELP
    addresses: list[str] = []
    for *_kind, sockaddr in found:
        address = str(sockaddr[0])
        reason = risky_address(address)
        if reason:
            named = "" if address.split("%")[0] == host.strip("[]") else \
                f" (it resolves to {address})"
            raise AddressRefused(f"refused to connect to {host}:{port}{named}: {reason}, "
                                 "reached only through a registered endpoint; "
                                 f"{REGISTER_HELP} if it is really meant")
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise OSError(f"{host} resolves to no address")
    return addresses


def _first(connect: Callable[..., Any], addresses: list[str], **options: Any) -> Any:
    """`connect(host=address)` for each address in turn until one connects."""
    error: BaseException | None = None
    for address in addresses:
        try:
            return connect(host=address, **options)
        except Exception as exc:  # the next address may answer (IPv6 down, IPv4 up)
            error = exc
    assert error is not None
    raise error


class _Guard:
    """A network backend (httpcore's interface) that checks, then connects to, addresses;
    `inner` is the backend it wraps, `core` the httpcore module whose errors it raises."""

    def __init__(self, inner: Any, core: Any):
        self._inner, self._core = inner, core

    def __getattr__(self, name: str) -> Any:
        """Everything but `connect_tcp` (a Unix socket, `sleep`) is the wrapped backend's."""
        return getattr(self._inner, name)


class _SyncGuard(_Guard):
    """The guard for the sync client."""

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None, socket_options: Any = None) -> Any:
        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:  # as the default backend reports it: a connection error
            raise self._core.ConnectError(str(exc)) from exc
        return _first(self._inner.connect_tcp, checked_addresses(host, port, found), port=port,
                      timeout=timeout, local_address=local_address,
                      socket_options=socket_options)


class _AsyncGuard(_Guard):
    """The guard for the async client: the lookup counts against the connect timeout."""

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None, socket_options: Any = None) -> Any:
        import anyio
        try:
            with anyio.fail_after(timeout):
                found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                addresses = checked_addresses(host, port, found)
                error: BaseException | None = None
                for address in addresses:
                    try:
                        return await self._inner.connect_tcp(
                            host=address, port=port, timeout=timeout,
                            local_address=local_address, socket_options=socket_options)
                    except Exception as exc:  # the next address may answer
                        error = exc
                assert error is not None
                raise error
        except TimeoutError as exc:
            raise self._core.ConnectTimeout(f"connecting to {host}:{port} timed out") from exc
        except OSError as exc:  # as the default backend reports it: a connection error
            raise self._core.ConnectError(str(exc)) from exc


# --------------------------------------------------------------------------- bounded reading
@functools.cache
def _bounded_classes() -> tuple[type, type]:
    """The openai SDK's default clients (sync, async), each reading a response it is not
    asked to stream up to its `body_cap` (see the module). Made once: the SDK is imported
    only when a model needs it."""
    openai = importlib.import_module("openai")
    from openai._constants import DEFAULT_CONNECTION_LIMITS

    # the SDK, imported on first use, is Any to mypy: its classes cannot be base classes
    class BoundedClient(openai.DefaultHttpxClient):  # type: ignore[name-defined, misc]
        """The SDK's sync client, reading at most `body_cap` bytes of a response."""

        def __init__(self, cap: int, **options: Any):
            super().__init__(**options)
            self.body_cap = cap
            self.headers["accept-encoding"] = ACCEPTED

        def send(self, request: Any, *, stream: bool = False, **options: Any) -> Any:
            response = super().send(request, stream=True, **options)
            if stream:  # a streamed call reads its own events (Parley asks for none)
                return response
            try:
                body = BoundedBody(response.status_code, response.headers,
                                   response.request.url, self.body_cap)
                for chunk in response.iter_raw():
                    if body.feed(chunk):
                        break
                else:
                    body.end()
            finally:
                response.close()
            return body.response(response)

    # the SDK, imported on first use, is Any to mypy: its classes cannot be base classes
    class AsyncBoundedClient(openai.DefaultAsyncHttpxClient):  # type: ignore[name-defined, misc]
        """The SDK's async client, reading at most `body_cap` bytes of a response, with the
        aiohttp session plain requests go over (`session`); `guard` checks the addresses
        that session connects to."""

        def __init__(self, cap: int, *, guard: bool = False, **options: Any):
            super().__init__(**options)
            self.body_cap, self.guard, self._session = cap, guard, None
            self._proxies: dict[str, Any] = {}
            self.verify = options.get("verify")
            self.limits = options.get("limits") or DEFAULT_CONNECTION_LIMITS
            self.headers["accept-encoding"] = ACCEPTED

        def session(self) -> Any:
            """The aiohttp session, made on its first request: connections kept alive, at
            most the pool's limit of them, TLS through the client's context, the addresses
            checked when `guard`, no cookies kept (httpx keeps them)."""
            self._session = self._session or aiohttp_session(self.verify, self.limits,
                                                             self.guard)
            return self._session

        def _init_proxy_transport(self, proxy: Any, *args: Any, **options: Any) -> Any:
            transport = super()._init_proxy_transport(proxy, *args, **options)
            transport.parley_proxy = proxy  # what a plain request to its URLs goes through
            return transport

        async def aclose(self) -> None:
            if self._session is not None:
                await self._session.close()
            await super().aclose()

        async def send(self, request: Any, *, stream: bool = False, **options: Any) -> Any:
            response = await super().send(request, stream=True, **options)
            if stream:
                return response
            try:
                body = BoundedBody(response.status_code, response.headers,
                                   response.request.url, self.body_cap)
                async for chunk in response.aiter_raw():
                    if body.feed(chunk):
                        break
                else:
                    body.end()
            finally:
                await response.aclose()
            return body.response(response)

    return BoundedClient, AsyncBoundedClient


class _Inflate:
    """A gzip or deflate body decoded a bounded piece at a time: `decode(data, room)` gives at
    most `room` bytes, so a bomb never inflates past the cap (the input it did not reach is
    left unread). Deflate is zlib-wrapped or raw, as httpx reads it."""

    def __init__(self, encoding: str):
        self._raw_fallback = encoding == "deflate"
        self._zlib = zlib.decompressobj(zlib.MAX_WBITS | (16 if encoding != "deflate" else 0))
        self._started = False

    def decode(self, data: bytes, room: int) -> bytes:
        try:
            out = self._zlib.decompress(data, room)
        except zlib.error:
            if not self._raw_fallback or self._started:
                raise
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._zlib.decompress(data, room)
        self._started = True
        return out

    def flush(self, room: int) -> bytes:
        return self._zlib.decompress(b"", room) if room > 0 else b""


class BoundedBody:
    """What is read of one response: at most `cap` bytes of its decoded body (`ERROR_CAP` of
    an error's; `feed` says when to stop), then handed on as a response of its own
    (`response`): the body whole, or cut as the module says."""

    def __init__(self, status_code: int, headers: Any, url: Any, cap: int):
        self.status_code, self.headers, self.url = status_code, headers, url
        self.cap = cap if status_code < 400 else min(cap, ERROR_CAP)
        self.chunks: list[bytes] = []
        self.size = 0  # decoded bytes kept
        self.raw = 0  # bytes read off the wire
        self.cut = False
        encoding = headers.get("content-encoding", "").strip().lower()
        self.encoding = encoding or "identity"
        if self.encoding in ("gzip", "x-gzip", "deflate"):
            self.inflate: _Inflate | None = _Inflate(self.encoding)
        elif self.encoding == "identity":
            self.inflate = None
        else:
            raise UnreadableResponse(
                f"the server at {self.where()} sent a body encoded as "
                f"{encoding[:40]!r}, which Parley did not ask for (it accepts {ACCEPTED})")

    def where(self) -> str:
        """The origin of the response's URL (an httpx URL, or text), for a message."""
        return origin(http_module().URL(str(self.url)))

    def feed(self, chunk: bytes) -> bool:
        """Take one piece read off the wire; True when the cap is reached (read no more)."""
        self.raw += len(chunk)
        room = self.cap + 1 - self.size  # one byte past the cap tells a cut from a fit
        piece = chunk[:room] if self.inflate is None else self._decode(chunk, room)
        self.chunks.append(piece)
        self.size += len(piece)
        # a compressed body that inflates to little is still read no further than the cap
        self.cut = self.size > self.cap or self.raw > self.cap
        return self.cut

    def end(self) -> None:
        """The body ended within the cap: what the decoder still holds."""
        if self.inflate is not None:
            rest = self.inflate.flush(self.cap + 1 - self.size)
            self.chunks.append(rest)
            self.size += len(rest)
            self.cut = self.size > self.cap

    def _decode(self, chunk: bytes, room: int) -> bytes:
        assert self.inflate is not None
        try:
            return self.inflate.decode(chunk, room)
        except zlib.error as exc:
            raise http_module().DecodingError(
                f"the {self.encoding} body could not be decoded: {exc}") from exc

    def content(self, items: Iterable[tuple[str, str]]) -> tuple[bytes, list[tuple[str, str]]]:
        """The body handed on, no longer encoded (when cut, a chat completion closed where the
        reading stopped), and the response's header `items` that still describe it, with
        `CUT_HEADER` when it was cut."""
        body = b"".join(self.chunks)[:self.cap]
        headers = [(k, v) for k, v in items if k.lower() not in _REPLACED]
        if self.cut:
            declared = self.headers.get("content-length", "")
            size = f"; size={int(declared)}" if self.encoding == "identity" and \
                declared.strip().isdigit() else ""
            headers.append((CUT_HEADER, f"read={len(body)}{size}"))
            if 200 <= self.status_code < 300:
                body = self._completion(body)
        return body, headers

    def response(self, original: Any) -> Any:
        """The httpx response handed to the SDK in place of `original` (see `content`)."""
        body, headers = self.content(original.headers.multi_items())
        httpx = http_module()
        made = httpx.Response(original.status_code, headers=headers, content=body,
                              request=original.request, extensions=original.extensions)
        made.history = list(original.history)
        made.elapsed = original.elapsed
        return made

    def _completion(self, body: bytes) -> bytes:
        """A chat completion's start as a whole document: its reply text cut where the
        reading stopped, its usage (unread, or read in part) dropped."""
        import jiter  # the openai SDK's own JSON reader, installed with it
        refused = (f"the server at {self.where()} sent more than {size_text(self.cap)} and what "
                   "Parley read of it is not a chat completion; it read no further")
        try:
            document = jiter.from_json(body, partial_mode="trailing-strings")
        except ValueError:
            raise UnreadableResponse(refused) from None
        choices = document.get("choices") if isinstance(document, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        if not isinstance(message, dict) or not isinstance(message.get("content", ""), str):
            raise UnreadableResponse(refused)
        message.setdefault("role", "assistant")
        message.setdefault("content", "")
        document.pop("usage", None)
        return json.dumps(document, ensure_ascii=False).encode("utf-8")


# ------------------------------------------------------------------------ aiohttp underneath
class _Sending:
    """A request on its way out through aiohttp: the trace callback of its attempt
    (`engine.llm.reach.begin`, called as httpcore calls its `trace` extension) and the bytes
    of its body still to be written."""

    def __init__(self, trace: Callable[..., Any], remaining: int):
        self.trace: Callable[..., Any] | None = trace
        self.remaining = remaining

    async def wrote(self, size: int) -> None:
        """`size` more bytes of the body went out: once all of it has, say so to the trace
        as httpcore does."""
        self.remaining -= size
        if self.remaining <= 0 and self.trace is not None:
            trace, self.trace = self.trace, None
            await trace("http11.send_request_body.complete", {})


# The request the current task sends through aiohttp; the task aiohttp writes its body from
# copies the context, so it sees the same one.
_SENDING: ContextVar[_Sending | None] = ContextVar("parley_sending", default=None)


async def _headers_written(_session: Any, _context: Any, _params: Any) -> None:
    sending = _SENDING.get()
    if sending is not None and sending.remaining <= 0:  # a request with no body
        await sending.wrote(0)


async def _chunk_written(_session: Any, _context: Any, params: Any) -> None:
    sending = _SENDING.get()
    if sending is not None:  # aiohttp calls this as it hands the chunk to the socket
        await sending.wrote(len(params.chunk))


def httpx_error(error: BaseException) -> Any:
    """The httpx error class httpcore raises for the failure aiohttp reports as `error` (None:
    none of the transport's), so that the SDK's errors and `engine.llm.failures` read a
    failure the same whichever client met it (httpx-aiohttp's own table makes a refused
    connection a `ConnectTimeout`, counted a time-out)."""
    import aiohttp
    httpx = http_module()
    proxy = (aiohttp.ClientProxyConnectionError, aiohttp.ClientHttpProxyError)
    mirrors = ((proxy, httpx.ProxyError), (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
               (aiohttp.ClientConnectorError, httpx.ConnectError),  # refused, unreachable, DNS, TLS
               (TimeoutError, httpx.ReadTimeout),  # aiohttp's read time-outs are TimeoutErrors too
               (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
               ((aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError,
                 aiohttp.ClientResponseError), httpx.RemoteProtocolError),  # cut off, or not HTTP
               (aiohttp.ClientConnectionError, httpx.ReadError))  # reset, closed
    # the first that matches: a more specific aiohttp class comes before its bases
    return next((mirror for kinds, mirror in mirrors if isinstance(error, kinds)), None)


@functools.cache
def guarded_connector() -> type:
    """aiohttp's TCP connector checking every address it is to connect to (`checked_addresses`,
    `AddressRefused`): a name's as it resolves (its cached answer too) and an address written
    in the URL, which aiohttp's resolver never sees. It overrides the connector's one lookup,
    `_resolve_host`; an aiohttp without it fails here, loudly, rather than connect unchecked."""
    import aiohttp
    if not callable(getattr(aiohttp.TCPConnector, "_resolve_host", None)):
        raise RuntimeError("cannot check the addresses aiohttp connects to: its TCPConnector "
                           "has no _resolve_host")

    class GuardedConnector(aiohttp.TCPConnector):
        """A TCP connector that connects only to addresses `checked_addresses` allows."""

        async def _resolve_host(self, host: str, port: int, traces: Any = None) -> Any:
            found = await super()._resolve_host(host, port, traces=traces)
            checked_addresses(host, port, [(item["family"], 0, 0, "", (item["host"], port))
                                           for item in found])
            return found

    return GuardedConnector


def aiohttp_session(verify: Any, limits: Any, guard: bool) -> Any:
    """An aiohttp session for plain requests (`post_plain`): connections kept alive (for
    `limits.keepalive_expiry`), at most `limits.max_connections` of them; TLS through `verify`
    (a context, used as given); `guard` checks the addresses; no cookies kept; a request's
    body reported as it goes out (`_Sending`)."""
    import aiohttp
    kept = {} if limits.keepalive_expiry is None else {"keepalive_timeout": limits.keepalive_expiry}
    connector = (guarded_connector() if guard else aiohttp.TCPConnector)(
        limit=limits.max_connections or 0, ssl=verify, **kept)
    sent = aiohttp.TraceConfig()
    sent.on_request_headers_sent.append(_headers_written)
    sent.on_request_chunk_sent.append(_chunk_written)
    sent.freeze()
    return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
                                 trace_configs=[sent])


# ------------------------------------------------------------------ clients shared per endpoint
@functools.cache
def tls_context() -> Any:
    """The process's one verifying TLS context (httpx's default: the system's CA store), built
    when the first https client needs it and never changed after: a context keeps its own
    copy of the CA store, and loading it is most of what building a client costs; plain http
    needs none."""
    return http_module().create_ssl_context()


def trusting_nothing() -> ssl.SSLContext:
    """A TLS context for a client that only ever speaks plain http: it loads no CA store, and
    a TLS connection made through it (none is) would fail verification, never go unchecked."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def shared_clients(capabilities: Capabilities, base_url: str | None, *, guard: bool,
                   proxy: str | None = None, concurrency: int | None = None,
                   reply_cap: int | None = None) -> tuple[Any, Any]:
    """The (sync, async) clients (`model_client`) for the server at `base_url` (None: the
    provider's own https API), kept by `capabilities` (the endpoint registry's) and so shared
    by every model, seat, run and experiment resolved under that registry with the same
    rules: connections are kept alive between calls, in a pool of `concurrency` (the
    endpoint's limit; None: the SDK's default size). The async client hands each event loop
    its own connection pool (`loop_client_type`)."""
    parts = urlsplit(base_url or "https://api.openai.com")
    scheme = (parts.scheme or "https").lower()
    key = (scheme, (parts.hostname or "").lower(), parts.port, guard, proxy, concurrency,
           reply_cap)

    def build() -> tuple[Any, Any]:
        verify = trusting_nothing() if scheme == "http" and not proxy else tls_context()
        limits = None
        if concurrency:
            limits = http_module().Limits(max_connections=concurrency,
                                          max_keepalive_connections=concurrency)
        options: dict[str, Any] = {"guard": guard, "proxy": proxy, "verify": verify,
                                   "limits": limits, "reply_cap": reply_cap}
        return model_client(False, **options), loop_client_type()(
            functools.partial(model_client, True, **options))
    return capabilities.clients(key, build)


# The shared clients that opened connections in the current `releasing` scope (its tasks
# share the list, as they copy the context): the scope closes them when it ends.
_OPENED: ContextVar[list[Any] | None] = ContextVar("parley_opened_clients", default=None)


async def releasing(coro: Coroutine[Any, Any, T]) -> T:
    """`coro`, then the running event loop's connections of every shared client it used are
    closed: what a caller of `asyncio.run` awaits (a synchronous run's, a CLI experiment's),
    so that the loop's kept-alive model connections are shut in the loop that opened them,
    not left to the garbage collector."""
    opened: list[Any] = []
    token = _OPENED.set(opened)
    try:
        return await coro
    finally:
        _OPENED.reset(token)
        for client in opened:
            await client.release()


async def _closing(shared: Any) -> AsyncIterator[None]:
    """Suspended at its `yield` while its event loop runs: `asyncio.run` closes the async
    generators still open once its coroutine is done (`loop.shutdown_asyncgens`), and this one
    then closes that loop's client of `shared` (a `LoopClient`), in the loop, so that a
    caller's own `asyncio.run(model.ainvoke(...))` leaves no connection open and aiohttp no
    "Unclosed client session" to report when the client is collected."""
    try:
        yield
    finally:
        await shared.release()


@functools.cache
def loop_client_type() -> type:
    """`LoopClient`, made on first use: it subclasses the httpx flavour the openai SDK takes,
    which a process that never calls an OpenAI-compatible server does not import."""
    httpx = http_module()

    # httpx, imported on first use, is Any to mypy: its classes cannot be base classes
    class LoopClient(httpx.AsyncClient):  # type: ignore[name-defined, misc]
        """An async httpx client (what the openai SDK takes) that sends each request through
        the running event loop's own client, built by `build` on the loop's first request
        and kept alive for that loop's later ones. A connection never crosses loops (one
        from a closed loop fails), and a closed loop's client is dropped the next time a
        loop asks."""

        def __init__(self, build: Callable[[], Any]):
            super().__init__(transport=_Unused(), trust_env=False)
            self.build = build  # a new client for a loop
            # per loop: the loop, its client and the generator that closes it (`_closing`)
            self._loops: dict[int, tuple[asyncio.AbstractEventLoop, Any, Any]] = {}
            self._lock = threading.Lock()

        def current(self) -> Any:
            """The running loop's client (built on its first request)."""
            loop = asyncio.get_running_loop()
            with self._lock:
                found = self._loops.get(id(loop))
                if found is not None and found[0] is loop:
                    return found[1]
                for ident, (other, *_client) in list(self._loops.items()):
                    if other.is_closed():
                        del self._loops[ident]
            client = self.build()
            closer = _closing(self)
            with self._lock:
                made = self._loops.setdefault(id(loop), (loop, client, closer))[1]
            if made is not client:
                return made
            step: Any = closer.__anext__()
            try:  # to its `yield`, which registers it with the running loop
                step.send(None)
            except StopIteration:
                pass
            opened = _OPENED.get()
            if opened is not None:
                opened.append(self)  # closed when its `releasing` scope ends
            return made

        def loops(self) -> int:
            """How many event loops hold a client of this one (closed ones not yet dropped)."""
            with self._lock:
                return len(self._loops)

        async def send(self, request: Any, **kwargs: Any) -> Any:
            return await self.current().send(request, **kwargs)

        async def release(self) -> None:
            """Close the running loop's client, if it has one (see `releasing`)."""
            loop = asyncio.get_running_loop()
            with self._lock:
                found = self._loops.pop(id(loop), None)
            if found is not None and found[0] is loop:
                await found[1].aclose()

        async def aclose(self) -> None:
            await self.release()

    # httpx, imported on first use, is Any to mypy: its classes cannot be base classes
    class _Unused(httpx.AsyncBaseTransport):  # type: ignore[name-defined, misc]
        """The transport of a `LoopClient` itself, which sends nothing through it."""

        async def handle_async_request(self, request: Any) -> Any:
            raise RuntimeError("a LoopClient sends through its event loop's own client")

    return LoopClient


# ------------------------------------------------------------------- plain requests, direct
def plain_client(shared: Any) -> Any:
    """The running event loop's client of `shared` (a model's async client) when `shared`
    is Parley's (`shared_clients`), whose aiohttp session a plain request may go straight
    over (`post_plain`); else None."""
    kind: Any = loop_client_type()
    return shared.current() if isinstance(shared, kind) else None


def proxy_for(client: Any, url: str) -> Any:
    """The proxy (an httpx Proxy; None: none) the httpx `client` (`plain_client`) sends a
    request to `url` through, from the settings or the environment (NO_PROXY read), as
    httpx picks it; kept per URL."""
    if url not in client._proxies:
        client._proxies[url] = getattr(client._transport_for_url(http_module().URL(url)),
                                       "parley_proxy", None)
    return client._proxies[url]


async def post_plain(client: Any, url: str, headers: list[tuple[str, str]], body: bytes,
                     timeout: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    """POST `body` to `url` straight over the aiohttp session of `client` (`plain_client`),
    making no httpx request or response: (status, headers, body) as its `send` hands them
    on, under the same rules (a redirect followed within the origin and refused out of it,
    the body read up to the cap, the attempt told when the body went out and what status
    came back, through the proxy httpx would take), aiohttp's failures raised as httpcore's
    errors (`httpx_error`). `timeout` is an httpx request's timeout extension."""
    import aiohttp
    session, proxy = client.session(), proxy_for(client, url)
    via = {} if proxy is None else {"proxy": str(proxy.url), "proxy_headers": proxy.headers,
                                    "proxy_auth": aiohttp.BasicAuth(*proxy.auth) if proxy.auth
                                    else None}
    limits = aiohttp.ClientTimeout(sock_connect=timeout.get("connect"),
                                   sock_read=timeout.get("read"), connect=timeout.get("pool"))
    method, data = "POST", body
    for _hop in range(client.max_redirects + 1):
        trace = begin()
        token = _SENDING.set(None if trace is None else _Sending(trace, len(data)))
        try:
            async with session.request(method, url, data=data or None, headers=headers,
                                       allow_redirects=False, auto_decompress=False,
                                       compress=False, timeout=limits, **via) as response:
                status = response.status
                answered(status, response.headers.get("content-type", ""))
                if status in _REDIRECTS and "location" in response.headers:
                    url = str(redirect_target(http_module().URL(url), status,
                                              response.headers["location"]))
                    if status == 303 or (status in (301, 302) and method == "POST"):
                        method, data = "GET", b""  # as httpx: the body is dropped
                        headers = [(k, v) for k, v in headers if k.lower() not in (
                            "content-type", "content-length", "transfer-encoding")]
                    continue
                reading = BoundedBody(status, response.headers, url, client.body_cap)
                async for chunk in response.content.iter_chunked(_CHUNK):
                    if reading.feed(chunk):
                        break
                else:
                    reading.end()
            kept, handed = reading.content(response.headers.items())
            return status, handed, kept
        except (aiohttp.ClientError, TimeoutError) as exc:
            mirror = httpx_error(exc)
            if mirror is None:
                raise
            raise mirror(str(exc) or type(exc).__name__) from exc
        finally:
            _SENDING.reset(token)
    raise http_module().TooManyRedirects("Exceeded maximum allowed redirects.")
