"""Endpoint limits: requests per minute (`rpm`), tokens per minute (`tpm`) and calls in flight
(`concurrency`), as a registered endpoint sets them (engine.llm.endpoints).

Requests and tokens are token buckets: a bucket holds one second's allowance (never less than
one request, or one call's tokens when a call needs more) and refills at the per-minute rate,
so in any window of T seconds at most `rpm x T / 60` requests go, plus one bucket (the burst).
A call takes one request and its estimated tokens (its prompt at about four characters a
token, plus its whole output cap) when both buckets hold enough, and gives back afterwards
what it did not use. Only a sane figure is settled: the call's reported usage, at most its
estimate (`settled`), so no reply, however absurd its usage, puts a bucket in debt. A 429
from the endpoint empties the requests bucket and sets a cool-down (its Retry-After when
given, at most 300 s), during which no call to that endpoint starts.

A state read back is clamped into its bounds first (`clamp`: a bucket neither in debt nor
over full, a stamp not in the future, a cool-down at most 300 s away, NaN as empty), so a
state an older process wrote, or a row edited by hand, cannot hold an endpoint shut.

The wait for a slot counts inside the call's timeout: a call whose wait for the rate (or a
cool-down) is longer than what is left of its time ends at once with `RateLimited`, and a
call that waits never outlives a Stop (`CallGate`'s `stop`, looked at least once a second). A
wait for one of the endpoint's calls in flight (`concurrency`) is a queue, not a rate: each
call ahead ends within its own timeout, so that wait does not count.

Where the state lives decides who shares it. With a PostgreSQL store it is in the database
(`engine.store.limits`: a row per endpoint under `SELECT ... FOR UPDATE`, a lease per call in
flight that lapses at its expiry), so every process and machine on that database shares the
limits and a 429 slows the whole pool. Otherwise (SQLite, or no store) it is this process's:
the buckets in memory and a semaphore per event loop for `concurrency`, kept by the store
(`Store.local_limits`, which every run on it shares) or, for a run given no store, by the
endpoint registry that resolved its models (`EndpointRegistry.capabilities`).
"""
from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import uuid4

from engine.errors import RATE_LIMITED, ParleyError
from engine.llm.failures import status
from engine.models import LimitState
from engine.store import StoreWriteError
from engine.store.limits import change, end_lease, shared
from engine.store.local_limits import LocalLimits

if TYPE_CHECKING:
    from engine.store import Store

DEFAULT_COOL_DOWN = 2.0  # seconds without a call after a 429 that gives no Retry-After
LONGEST_COOL_DOWN = 300.0
LEASE_MARGIN = 30.0  # a lease outlives its call's timeout by this much
EPSILON = 1e-9  # a bucket this close to enough is enough (refilling rounds)
POLL = 0.05  # seconds between looks while the endpoint's calls in flight are all taken
LONGEST_SLEEP = 1.0  # a waiting call looks again at least this often
T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """What an endpoint allows, and how long a shared lease on it lasts (seconds)."""

    endpoint: str
    rpm: int | None = None
    tpm: int | None = None
    concurrency: int | None = None
    lease: float = 3600.0 + LEASE_MARGIN
    max_tokens: int = field(default=0, compare=False)

    @classmethod
    def of(cls, call: Mapping[str, Any], timeout: float) -> Limits | None:
        """The limits in a model's call policy (`parley_call`), None when it sets none."""
        if not any(call.get(name) for name in ("rpm", "tpm", "concurrency")):
            return None
        return cls(str(call.get("gate"))[:64], call.get("rpm"), call.get("tpm"),
                   call.get("concurrency"), (timeout or 3600.0) + LEASE_MARGIN,
                   int(call.get("max_tokens") or 0))


class RateLimited(ParleyError):
    """No slot at the endpoint within the call's time: its rate, or a 429's cool-down, holds
    the call longer than its timeout leaves. The call ends degraded and is not retried."""

    failure = RATE_LIMITED


class Wait(float):
    """Seconds to wait before asking again, and what stands in the way (`reason`): "cool-down"
    (after a 429), "requests" or "tokens" (the rate), "in flight" (the endpoint's calls in
    flight: a queue whose wait does not count against a call's timeout)."""

    reason: str

    def __new__(cls, seconds: float, reason: str) -> Wait:
        wait = super().__new__(cls, seconds)
        wait.reason = reason
        return wait


# ------------------------------------------------------------------ the arithmetic
def burst(per_minute: float, need: float = 1.0) -> float:
    """A bucket's size: one second's allowance, and at least `need` (one call's share)."""
    return max(need, 1.0, per_minute / 60.0)


def refill(level: float | None, elapsed: float, per_minute: float, size: float) -> float:
    """A bucket's level after `elapsed` seconds of refilling, never above its size."""
    if level is None:
        return size
    return min(size, level + max(0.0, elapsed) * per_minute / 60.0)


def bring_up_to_date(limits: Limits, state: LimitState, tokens: float = 0.0) -> None:
    """Refill both buckets to `state.now` (a bucket the endpoint does not limit stays None)."""
    elapsed = state.now - state.stamp
    if limits.rpm:
        state.requests = refill(state.requests, elapsed, limits.rpm, burst(limits.rpm))
    if limits.tpm:
        state.tokens = refill(state.tokens, elapsed, limits.tpm, burst(limits.tpm, tokens))
    state.stamp = max(state.stamp, state.now)


def admit(limits: Limits, state: LimitState, tokens: float, count_flight: bool) -> float:
    """Take one request of `tokens` from `state` when every limit allows it and return 0;
    otherwise leave the buckets be and return the seconds to wait before asking again.
    `count_flight`: `state.in_flight` holds the calls in flight (the shared state)."""
    if state.now < state.cool_until:
        return Wait(state.cool_until - state.now, "cool-down")
    if count_flight and limits.concurrency and state.in_flight >= limits.concurrency:
        return Wait(POLL, "in flight")
    bring_up_to_date(limits, state, tokens)
    waits = [Wait(0.0, "")]
    if limits.rpm and state.requests is not None and state.requests < 1.0 - EPSILON:
        waits.append(Wait((1.0 - state.requests) * 60.0 / limits.rpm, "requests"))
    if limits.tpm and state.tokens is not None:
        need = min(tokens, burst(limits.tpm, tokens))
        if state.tokens < need - EPSILON:
            waits.append(Wait((need - state.tokens) * 60.0 / limits.tpm, "tokens"))
    if max(waits) > 0:
        return max(waits)
    if limits.rpm and state.requests is not None:
        state.requests -= 1.0
    if limits.tpm and state.tokens is not None:
        state.tokens -= tokens
    return 0.0


def settled(tokens: float, estimate: float) -> float:
    """The tokens a finished call settles: what it used, within 0..its estimate (the prompt's
    estimate plus the output cap: an honest call stays within it), NaN as the estimate."""
    if not isinstance(tokens, (int, float)) or tokens != tokens:
        return estimate
    return min(max(float(tokens), 0.0), estimate)


def clamp(limits: Limits, state: LimitState) -> LimitState:
    """A state as read, into its bounds: each bucket 0..its size (NaN or infinity as empty;
    the tokens bucket may hold one big call's share above its size), the stamp not after
    `now`, a cool-down at most `LONGEST_COOL_DOWN` away (NaN as none)."""
    def finite(value: float | None, default: float) -> float:
        return default if value is None or not math.isfinite(value) else float(value)
    if not math.isfinite(state.now):
        state.now = time.monotonic()
    state.stamp = min(finite(state.stamp, state.now), state.now)
    state.cool_until = min(finite(state.cool_until, 0.0), state.now + LONGEST_COOL_DOWN)
    if state.requests is not None:
        state.requests = min(max(finite(state.requests, 0.0), 0.0),
                             burst(limits.rpm) if limits.rpm else math.inf)
    if state.tokens is not None:
        state.tokens = max(finite(state.tokens, 0.0), 0.0)
    return state


def settle(limits: Limits, state: LimitState, extra_tokens: float) -> None:
    """Charge a finished call's tokens beyond its estimate (a refund when negative)."""
    if limits.tpm:
        bring_up_to_date(limits, state)
        if state.tokens is not None:
            state.tokens = min(burst(limits.tpm), state.tokens - extra_tokens)


def cool(limits: Limits, state: LimitState, seconds: float) -> None:
    """After a 429: no call starts for `seconds`, and the requests bucket starts empty."""
    bring_up_to_date(limits, state)
    state.cool_until = max(state.cool_until, state.now + seconds)
    if limits.rpm:
        state.requests = 0.0


def retry_after(exc: BaseException) -> float | None:
    """The seconds a 429 error's Retry-After (or retry-after-ms) header asks for, at most
    `LONGEST_COOL_DOWN`; None for another error, or a 429 that asks for nothing readable."""
    if status(exc) != 429:
        return None
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    seconds: float | None = None
    try:
        if headers.get("retry-after-ms"):
            seconds = float(headers["retry-after-ms"]) / 1000.0
        elif headers.get("retry-after"):
            value = str(headers["retry-after"]).strip()
            seconds = float(value) if value.replace(".", "", 1).isdigit() else (
                parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        seconds = None
    if seconds is None or not math.isfinite(seconds):
        return None
    return min(LONGEST_COOL_DOWN, max(0.0, seconds))


def estimate_tokens(messages: Sequence[Mapping[str, str]], max_tokens: int = 0) -> int:
    """A call's tokens before it is made: about four characters a token for the prompt, and
    the endpoint's output cap when it sets one."""
    return sum(len(m.get("content", "")) for m in messages) // 4 + 1 + max_tokens


# ------------------------------------------------------------------ where the state lives
@dataclass
class Ticket:
    """One admitted request: its estimate, and its lease when the state is shared."""

    limits: Limits
    tokens: float
    lease_id: str | None = None


class Limiter:
    """An endpoint's limit state where it lives: in a PostgreSQL `store`, shared by every
    process on that database (a lease per call in flight), else this process's, in `held`
    (the store's, else the endpoint registry's: `engine.store.local_limits.LocalLimits`)."""

    def __init__(self, held: LocalLimits, store: Store | None = None):
        self.held = held
        self.store = store if store is not None and shared(store) else None

    def _change(self, limits: Limits, step: Callable[[LimitState], T]) -> T:
        def clamped(state: LimitState) -> T:
            return step(clamp(limits, state))
        if self.store is not None:
            return change(self.store, limits.endpoint, clamped)
        return self.held.change(limits.endpoint, clamped)

    def try_acquire(self, limits: Limits, tokens: float) -> tuple[float, Ticket | None]:
        lease_id = uuid4().hex if self.store is not None and limits.concurrency else None

        def step(state: LimitState) -> float:
            wait = admit(limits, state, tokens, count_flight=self.store is not None)
            if wait == 0 and lease_id is not None:
                state.lease = (lease_id, limits.lease)
            return wait
        wait = self._change(limits, step)
        return (wait, None) if wait > 0 else (0.0, Ticket(limits, tokens, lease_id))

    def release(self, ticket: Ticket, tokens: float) -> None:
        used = settled(tokens, ticket.tokens)
        try:
            if ticket.lease_id is not None and self.store is not None:
                end_lease(self.store, ticket.lease_id)
            if ticket.limits.tpm:
                self._change(ticket.limits, lambda s: settle(ticket.limits, s,
                                                             used - ticket.tokens))
        except StoreWriteError:  # the lease lapses at its expiry; the estimate stays charged
            pass

    def cool_down(self, limits: Limits, seconds: float) -> None:
        self._change(limits, lambda s: cool(limits, s, seconds))


async def acquire(limiter: Limiter, limits: Limits,
                  tokens_estimate: float, *, within: float | None = None,
                  stop: Callable[[], Awaitable[None]] | None = None) -> Ticket:
    """Wait (polling, with jittered sleeps so waiting processes do not move in step) until
    `limits` let one request of `tokens_estimate` tokens go; the ticket goes to `release`.
    `within` (seconds; None or 0: no limit) bounds the wait for the rate: a wait that would
    pass it raises `RateLimited` at once (a wait for calls in flight does not count).
    `stop` is awaited between looks and raises to end the wait (a run's Stop).
    (A call cancelled while its shared request is being taken leaves its lease to lapse.)"""
    deadline = time.monotonic() + within if within else None
    while True:
        if limiter.store is not None:  # the row lock may be held elsewhere: wait for
            # it off the event loop, so this process's calls already let go are sent on time
            wait, ticket = await asyncio.to_thread(limiter.try_acquire, limits, tokens_estimate)
        else:
            wait, ticket = limiter.try_acquire(limits, tokens_estimate)
        if ticket is not None:
            return ticket
        queued = getattr(wait, "reason", "") == "in flight"
        if deadline is not None and not queued and wait >= deadline - time.monotonic():
            raise RateLimited(_too_long(limits, wait, within or 0.0))
        if stop is not None:
            await stop()
        pause = min(wait, LONGEST_SLEEP) * (0.75 + 0.5 * random.random())
        began = time.monotonic()
        await asyncio.sleep(pause)
        if queued and deadline is not None:  # a queue's wait is not the rate's: not counted
            deadline += time.monotonic() - began


def _too_long(limits: Limits, wait: float, within: float) -> str:
    """Why a call gets no slot in time, for its turn's error."""
    reason = getattr(wait, "reason", "")
    why = {"cool-down": f"cooling down for {wait:.1f} s after a 429 (its Retry-After)",
           "requests": f"at its requests per minute ({limits.rpm}) for {wait:.1f} s",
           "tokens": f"at its tokens per minute ({limits.tpm}) for {wait:.1f} s"
           }.get(reason, f"busy for {wait:.1f} s")
    return (f"rate limited: endpoint {limits.endpoint} is {why}, longer than what is left of "
            f"this call's {within:g} s timeout")


# ------------------------------------------------------------------ the call's gate
class CallGate:
    """What one guarded call passes through: held around all its attempts (this process's
    `concurrency` semaphore), and each attempt `acquire`s, `release`s and reports a refusal."""

    def __init__(self, call: Mapping[str, Any], store: Store | None, timeout: float,
                 stop: Callable[[], Awaitable[None]] | None = None):
        self.limits = Limits.of(call, timeout)
        self.stop = stop  # raises to end a wait (the run's Stop)
        # this process keeps the limits when the database does not: the store's, else those
        # of the registry that resolved the model (`parley_call`), else the call's own
        held = getattr(store, "local_limits", None) or getattr(
            call.get("capabilities"), "local_limits", None) or LocalLimits()
        self.limiter = Limiter(held, store if self.limits is not None else None)
        # this process's `concurrency`, per event loop: every run of an experiment shares it
        self._semaphore = held.semaphore(self.limits.endpoint, self.limits.concurrency) \
            if self.limits is not None and self.limits.concurrency and \
            self.limiter.store is None else None
        self._ticket: Ticket | None = None

    async def __aenter__(self) -> None:
        if self._semaphore is None:
            return
        if not self._semaphore.locked():  # a slot free and none queued: taken at once
            await self._semaphore.acquire()
            return
        taking = asyncio.ensure_future(self._semaphore.acquire())
        try:
            while not taking.done():  # a call queued behind the endpoint's calls in flight
                await asyncio.wait({taking}, timeout=LONGEST_SLEEP)  # ends on a Stop
                if not taking.done() and self.stop is not None:
                    await self.stop()
        except BaseException:
            if not taking.cancel() and not taking.cancelled() and taking.exception() is None:
                self._semaphore.release()  # taken just as the wait ended: given back
            raise

    async def __aexit__(self, *exc: object) -> None:
        if self._semaphore is not None:
            self._semaphore.release()

    async def acquire(self, messages: Sequence[Mapping[str, str]],
                      within: float | None = None) -> float:
        """Wait until the endpoint's limits let this attempt go, and return the seconds
        waited; `RateLimited` when the rate would hold it longer than `within` seconds (the
        attempt's timeout)."""
        if self.limits is None:
            return 0.0
        began = time.monotonic()
        self._ticket = await acquire(self.limiter, self.limits,
                                     estimate_tokens(messages, self.limits.max_tokens),
                                     within=within, stop=self.stop)
        waited = time.monotonic() - began
        return waited if waited >= LONGEST_SLEEP / 100 else 0.0  # a look, not a wait

    def release(self, tokens: int) -> None:
        """The attempt is over: record its actual tokens, free its call in flight."""
        ticket, self._ticket = self._ticket, None
        if ticket is not None:
            self.limiter.release(ticket, tokens)

    def refused(self, exc: BaseException) -> None:
        """A 429 from the endpoint: cool the endpoint down for everyone sharing the state, for
        its Retry-After (or retry-after-ms) when it gives one, else `DEFAULT_COOL_DOWN`."""
        if self.limits is not None and status(exc) == 429:
            seconds = retry_after(exc)
            self.limiter.cool_down(self.limits, DEFAULT_COOL_DOWN if seconds is None else seconds)
