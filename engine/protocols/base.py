"""What every protocol shares: its description for the registry, and the run lifecycle.

A protocol module defines its templates, validates (raising `ConfigError` before any call),
runs its phases through a `RunContext`, and returns a result whose `.turns` is the common log.
`execute` wraps that in the store lifecycle: a run row is opened as `running`, turns are
written as they complete, and the run ends `completed`, `failed` or `interrupted`.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.llm.calls import RunContext, RunStopped
from engine.models import ConfigError, RunResult, Seat
from engine.llm.providers import resolve_model
from engine.store import StoreWriteError
from engine.protocols.templates import Template, check_prompts
from engine.text import NAME_MAX, fold_name, has_visible

INTERRUPTED = "interrupted: the process was stopped (Ctrl-C or SIGTERM)"
RUN_OPTIONS = ("on_event", "prompts", "store", "label", "tags", "expected", "timeout_per_call",
               "retries", "concurrency", "stop_event", "config", "experiment_id", "endpoints")
ROUNDS_MAX = 20  # debate rounds, peer-review iterations and duel rounds: 1..20
QUESTION_MAX = 20_000
MAX_RETRIES = 10
MAX_CONCURRENCY = 64
MAX_CALL_TIMEOUT = 3600.0


@dataclass(frozen=True)
class Slot:
    """A place at the table: one seat (`many=False`) or a list of seats."""

    name: str
    many: bool = False
    minimum: int = 1
    maximum: int = 1
    optional: bool = False
    defaults: tuple[dict[str, str], ...] = ()
    help: str = ""


@dataclass(frozen=True)
class Option:
    name: str
    default: Any
    minimum: int | None = None
    maximum: int | None = None
    help: str = ""


@dataclass(frozen=True)
class ProtocolSpec:
    """One row of the registry that the CLI, the app and experiments loop over."""

    name: str
    title: str
    seed: str
    question_name: str
    runner: Callable[..., Awaitable[RunResult]]
    slots: tuple[Slot, ...]
    options: tuple[Option, ...]
    templates: Mapping[str, Template]
    estimate_calls: Callable[[Mapping[str, Any], Mapping[str, int]], int]
    summary: Callable[[RunResult], str]
    phases: tuple[str, ...] = field(default_factory=tuple)
    view: Callable[[dict[str, Any]], list[Any]] | None = None  # stored run -> views.Block list
    rounds_option: str | None = None  # the option the CLI's --rounds sets (None: no rounds)


def require_text(value: Any, field_name: str) -> str:
    """A question/topic/task with something visible in it, or a `ConfigError` naming the
    field."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{field_name} must be non-empty text", "input")
    if "\x00" in value:
        raise ConfigError(f"{field_name} must not contain NUL bytes", "input")
    if len(value) > QUESTION_MAX:
        raise ConfigError(f"{field_name} is {len(value)} characters; the limit is 20,000",
                          "limit")
    if not has_visible(value):
        raise ConfigError(f"{field_name} must contain visible characters (it holds only "
                          "spaces, zero-width or control characters)", "input")
    return value


def require_name(value: Any, what: str) -> str:
    """A name that every backend stores alike: text with something visible, at most
    `NAME_MAX` characters, no NUL."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{what} must be non-empty text", "input")
    if "\x00" in value:
        raise ConfigError(f"{what} must not contain NUL bytes", "input")
    if len(value) > NAME_MAX:
        raise ConfigError(f"{what} is {len(value)} characters; the limit is {NAME_MAX}",
                          "limit")
    if not has_visible(value):
        raise ConfigError(f"{what} must contain visible characters", "input")
    return value


def require_seat(seat: Any, slot: str, endpoints: Any = None) -> Seat:
    """A `Seat` (or a bare model / spec, which becomes one named after the slot) whose model
    resolves under `endpoints` (an `EndpointRegistry`; None: the environment's)."""
    if seat is None:
        raise ConfigError(f"{slot} needs a seat with a model", "no_model")
    if not isinstance(seat, Seat):
        seat = Seat(slot, seat)
    if not seat.name or not seat.name.strip():
        raise ConfigError(f"{slot}: every seat needs a name", "input")
    require_name(seat.name, f"{slot}: the seat name")
    for label, value in (("role", seat.role), ("icon", seat.icon)):
        if not isinstance(value, str) or len(value) > NAME_MAX or "\x00" in value:
            raise ConfigError(f"{slot}: the seat's {label} must be text of at most "
                              f"{NAME_MAX} characters without NUL", "limit")
    if seat.temperature is not None:
        require_temperature(seat.temperature, f"{slot}: temperature")
    resolve_model(seat.model, seat.temperature, endpoints)  # an unknown spec fails here
    if len(seat.spec) > NAME_MAX:  # recorded on every turn: every backend must accept it
        raise ConfigError(f"{slot}: the model spec {seat.spec[:60]!r}... is {len(seat.spec)} "
                          f"characters; the limit is {NAME_MAX}", "limit")
    return seat


def require_temperature(value: Any, what: str = "temperature") -> float:
    """A sampling temperature: a number in 0..2."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
            or not 0 <= value <= 2:
        raise ConfigError(f"{what} must be a number in 0..2, got {value!r}", "input")
    return float(value)


def require_int(value: Any, name: str, low: int, high: int | None, protocol: str) -> int:
    """A whole number in `low..high` (no upper bound when `high` is None)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number, got {value!r}", "input")
    if value < low or (high is not None and value > high):
        span = f"{low}..{high}" if high is not None else f"at least {low}"
        raise ConfigError(f"{name} must be {span} for a {protocol}, got {value}", "limit")
    return value


def unique_names(seats: Sequence[Seat], what: str) -> None:
    """Seat names must differ after folding case, spacing and look-alike letters (NFKC)."""
    seen: dict[str, str] = {}
    for seat in seats:
        key = fold_name(seat.name)
        if key in seen:
            same = "appears twice" if seen[key] == seat.name else (
                f"and {seen[key]!r} are the same name (case, spacing and look-alike letters "
                "are ignored)")
            raise ConfigError(f"{what} names must be unique; {seat.name!r} {same}", "input")
        seen[key] = seat.name


def check_run_options(run: Mapping[str, Any]) -> None:
    """The common run options checked before any call: retries, per-call timeout,
    concurrency, label and tags."""
    retries = run.get("retries")
    if retries is not None:
        require_int(retries, "retries", 0, MAX_RETRIES, "run")
    timeout = run.get("timeout_per_call")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(
            timeout, (int, float)) or not 0 < timeout <= MAX_CALL_TIMEOUT):
        raise ConfigError(f"timeout_per_call must be seconds in (0, {MAX_CALL_TIMEOUT:g}], "
                          f"got {timeout!r}", "input")
    concurrency = run.get("concurrency")
    if concurrency is not None:
        require_int(concurrency, "concurrency", 1, MAX_CONCURRENCY, "run")
    if run.get("label") not in (None, ""):
        require_name(run["label"], "label")
    tags = run.get("tags")
    if tags is not None:
        if isinstance(tags, str) or not isinstance(tags, (list, tuple, set, frozenset)):
            raise ConfigError(f"tags must be a list of text, got {type(tags).__name__}",
                              "input")
        for tag in tags:
            require_name(tag, "a tag")


async def execute(protocol: str, question: str, templates: Mapping[str, Template],
                  body: Callable[[RunContext], Awaitable[RunResult]],
                  seats: Mapping[str, Any], options: Mapping[str, Any],
                  run: Mapping[str, Any]) -> RunResult:
    """Run `body` under the store lifecycle; `run` holds the common keyword arguments."""
    prompts = check_prompts(protocol, templates, run.get("prompts"))
    store = run.get("store")
    ctx = RunContext(protocol, on_event=run.get("on_event"), prompts=prompts,
                     timeout=run.get("timeout_per_call"), retries=run.get("retries"),
                     concurrency=run.get("concurrency"), stop_event=run.get("stop_event"),
                     endpoints=run.get("endpoints"))
    expected = run.get("expected")
    run_id = None
    if store is not None:
        config = run.get("config") or describe_config(protocol, seats, options, prompts)
        run_id = store.start_run(protocol, question, config=config, label=run.get("label"),
                                 tags=run.get("tags") or (), expected=expected,
                                 experiment_id=run.get("experiment_id"))
        ctx.recorder = store.recorder(run_id)
    try:
        result = await body(ctx)
    except RunStopped as exc:
        if store is not None:
            store.end_run(run_id, "interrupted", str(exc))
        raise
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:  # Ctrl-C, SIGTERM, a cancel
        if store is not None:
            store.end_run(run_id, "interrupted", INTERRUPTED if isinstance(
                exc, KeyboardInterrupt) or not str(exc) else f"{INTERRUPTED}: {exc}")
        raise
    except StoreWriteError as exc:  # the end waits in the store until it can be written
        if store is not None:
            store.end_run(run_id, "failed", str(exc))
        raise
    except BaseException as exc:  # a bug or a crash: keep what was recorded, never `running`
        if store is not None:
            store.end_run(run_id, "failed", f"{type(exc).__name__}: {exc}")
        raise
    result.protocol = protocol
    result.turns = ctx.turns
    result.run_id = run_id
    if expected is not None and str(expected).strip():
        from engine.analysis import normalize_stance
        result.expected = str(expected)
        answer = result.final_answer() if hasattr(result, "final_answer") else None
        result.correct = (None if answer is None else
                          normalize_stance(answer) == normalize_stance(str(expected)))
    if store is not None:
        try:
            store.finish_run(run_id, result)
        except StoreWriteError as exc:
            store.end_run(run_id, "failed", str(exc))
            raise
    return result


def describe_config(protocol: str, seats: Mapping[str, Any] | Sequence[Seat],
                    options: Mapping[str, Any], prompts: Mapping[str, str]) -> dict[str, Any]:
    """The run's configuration as stored: seats by spec (never keys) with their slot, options
    and prompt overrides. `seats` maps slot names to a seat, a list of seats or None."""
    slotted = (seats.items() if isinstance(seats, Mapping) else [("", s) for s in seats])
    flat = [(slot, seat) for slot, value in slotted if value is not None
            for seat in (value if isinstance(value, (list, tuple)) else [value])]
    return {"protocol": protocol,
            "seats": [{"slot": slot, "name": s.name, "model": s.spec, "persona": s.persona,
                       "role": s.role, "temperature": s.temperature, "icon": s.icon}
                      for slot, s in flat],
            "options": {k: v for k, v in options.items() if not callable(v)},
            "prompts": dict(prompts)}


def run_sync(coro: Awaitable[Any]) -> Any:
    """Run a coroutine to completion, also from code that already has an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def split_run_options(kwargs: dict[str, Any], protocol: str) -> dict[str, Any]:
    """Take the common run options out of `kwargs`; anything left over is a `ConfigError`."""
    run = {k: kwargs.pop(k) for k in list(kwargs) if k in RUN_OPTIONS}
    if kwargs:
        name = sorted(kwargs)[0]
        raise ConfigError(f"run_{protocol.replace('-', '_')} has no option {name!r}", "input")
    check_run_options(run)
    return run

