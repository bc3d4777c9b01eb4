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

from ..calls import RunContext, RunStopped
from ..models import ConfigError, RunResult, Seat
from ..providers import resolve_model
from ..store import StoreWriteError
from ..templates import Template, check_prompts

INTERRUPTED = "interrupted: the process was stopped (Ctrl-C or SIGTERM)"
RUN_OPTIONS = ("on_event", "prompts", "store", "label", "tags", "expected", "timeout_per_call",
               "retries", "concurrency", "stop_event", "config", "experiment_id")


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


def require_text(value: Any, field_name: str) -> str:
    """A non-empty question/topic/task, or a `ConfigError` naming the field."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{field_name} must be non-empty text", "input")
    if "\x00" in value:
        raise ConfigError(f"{field_name} must not contain NUL bytes", "input")
    if len(value) > 20_000:
        raise ConfigError(f"{field_name} is {len(value)} characters; the limit is 20,000",
                          "limit")
    return value


def require_seat(seat: Any, slot: str) -> Seat:
    """A `Seat` (or a bare model / spec, which becomes one named after the slot)."""
    if seat is None:
        raise ConfigError(f"{slot} needs a seat with a model", "no_model")
    if not isinstance(seat, Seat):
        seat = Seat(slot, seat)
    if not seat.name or not seat.name.strip():
        raise ConfigError(f"{slot}: every seat needs a name", "input")
    resolve_model(seat.model, seat.temperature)  # an unknown spec fails here, before any call
    return seat


def require_int(value: Any, name: str, low: int, high: int | None, protocol: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number, got {value!r}", "input")
    if value < low or (high is not None and value > high):
        span = f"{low}..{high}" if high is not None else f"at least {low}"
        raise ConfigError(f"{name} must be {span} for a {protocol}, got {value}", "limit")
    return value


def unique_names(seats: Sequence[Seat], what: str) -> None:
    seen: set[str] = set()
    for seat in seats:
        if seat.name in seen:
            raise ConfigError(f"{what} names must be unique; {seat.name!r} appears twice",
                              "input")
        seen.add(seat.name)


async def execute(protocol: str, question: str, templates: Mapping[str, Template],
                  body: Callable[[RunContext], Awaitable[RunResult]],
                  seats: Mapping[str, Any], options: Mapping[str, Any],
                  run: Mapping[str, Any]) -> RunResult:
    """Run `body` under the store lifecycle; `run` holds the common keyword arguments."""
    prompts = check_prompts(protocol, templates, run.get("prompts"))
    store = run.get("store")
    ctx = RunContext(protocol, on_event=run.get("on_event"), prompts=prompts,
                     timeout=run.get("timeout_per_call"), retries=run.get("retries"),
                     concurrency=run.get("concurrency"), stop_event=run.get("stop_event"))
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
        from ..analysis import normalize_stance
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
    return run

