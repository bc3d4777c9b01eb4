"""Fork a stored run at round k: keep its turns before round k, optionally drop an
agent or edit one kept turn's reply, and run the rest with the same protocol, configuration,
question and expected answer. The new run records its parent: its metrics hold `forked_from`
(the run's id), `fork_round` (k) and `kept_turns`, and it is tagged `forked-from:ID`.

The kept turns are not called again: the protocol runs from its start, and each call whose
seat, phase and round match a kept turn is answered by that turn as stored
(`engine.config.Resume`, replayed by the run's `RunContext`), so the later rounds are built
from the kept answers exactly as the original built them. The kept turns keep their tokens,
cost and latency (the fork's totals are the whole debate's, comparable with the original's);
each says it was kept.

Forkable: the protocols whose calls are rounds of answers (`FORKABLE`: those whose registry
entry reads answers by round): society and single (round r is every agent's r-th answer),
roundtable (its turns by round), panel (round 1: proposals and the critique; round 2:
rebuttals and the synthesis), duel (round k: each side's k-th turn) and council (one
round). Any other is refused with a `ConfigError` saying which can be forked.

Dropping an agent removes it from the fork altogether: its kept turns go, and from round k on
the others no longer see its answers (the kept replies of the others stay as they were given,
when they could still see it). Only a seat of a slot with several seats can be dropped, and
not below the protocol's minimum. Editing turn INDEX (its index in the stored run, a kept
turn) replaces its reply with the text given, read again as a reply would be.

A fork of an imported run warns (`Fork.warnings`, and each kept turn says so): its kept turns
are what a file claimed, not calls made here.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.checks import require_text
from engine.config import Resume, RunConfig
from engine.models import ConfigError, RunResult, Turn
from engine.protocols import (
    REGISTRY,
    Resolved,
    arun_config,
    get_protocol,
    run_sync,
)
from engine.services.rerun import RERUN_TAG, rerun_options, rerun_resolved

if TYPE_CHECKING:
    from engine.store import Store

# the protocols whose calls are rounds of answers (their registry entry says how to read them)
FORKABLE = tuple(name for name, spec in REGISTRY.items() if spec.answers_by_round is not None)
FORK_TAG = "forked-from:"
MAX_EDIT = 20_000  # characters of an edited reply


@dataclass(frozen=True)
class Fork:
    """What a fork runs: `config` on `question`, with `options` for `arun_config` (label,
    tags, expected and `resume_from`, the kept turns)."""

    config: Resolved  # resolved once: the preflight checked it, the run takes it as it is
    question: str
    options: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def parse_edit(text: str) -> tuple[int, str]:
    """`INDEX=TEXT` (the CLI's `--edit`) as (index, text); a `ConfigError` when malformed."""
    index, sep, reply = str(text).partition("=")
    if not sep or not re.fullmatch(r"[0-9]{1,9}", index.strip()):
        raise ConfigError(f"--edit takes INDEX=TEXT (a kept turn's index), got {text!r}",
                          "input")
    return int(index.strip()), reply


def droppable(run: Mapping[str, Any]) -> list[str]:
    """The agents a fork of a stored run may drop: the seats of its slots with several."""
    spec = REGISTRY.get(str(run.get("protocol") or ""))
    config = run.get("config")
    seats = config.get("seats") if isinstance(config, Mapping) else None
    if spec is None or not isinstance(seats, Mapping):
        return []
    many = {slot.name for slot in spec.slots if slot.many}
    return [str(seat.get("name")) for slot, entries in seats.items() if slot in many
            for seat in (entries if isinstance(entries, list) else [])
            if isinstance(seat, Mapping)]


def _drop(config: RunConfig, agent: str) -> RunConfig:
    slots = {slot.name: slot for slot in get_protocol(config.protocol).slots}
    for name, seats in config.seats.items():
        if agent in [seat.name for seat in seats]:
            slot = slots[name]
            if not slot.many:
                raise ConfigError(f"{agent!r} sits alone in {config.protocol}'s {name}: only "
                                  "a seat among several can be dropped", "input")
            kept = [seat for seat in seats if seat.name != agent]
            if len(kept) < slot.minimum:
                raise ConfigError(f"{config.protocol} needs at least {slot.minimum} {name}: "
                                  f"{agent!r} cannot be dropped", "input")
            return config.model_copy(update={"seats": {**config.seats, name: kept}})
    seated = [seat.name for seats in config.seats.values() for seat in seats]
    raise ConfigError(f"no agent {agent!r} in this run; its seats are {', '.join(seated)}",
                      "input")


def _turn(stored: Mapping[str, Any]) -> Turn:
    fields = {name: stored[name] for name in Turn.model_fields if name in stored}
    fields["index"] = int(stored.get("idx", stored.get("index", 0)) or 0)
    fields["cost_usd"] = stored.get("cost_usd")
    return Turn.model_validate(fields)


def plan(run: Mapping[str, Any], round: int, drop: str | None = None,
         edits: Mapping[int, str] | None = None) -> Fork:
    """The fork of a stored run (`Store.get`) at `round`, checked before any call: a
    `ConfigError` says why it cannot be forked (its protocol, a round out of range, an agent
    it does not seat, an edit of a turn it does not keep, a run still going)."""
    protocol = str(run.get("protocol") or "")
    if protocol not in FORKABLE:
        raise ConfigError(f"a {protocol or 'stored'} run cannot be forked: only runs whose "
                          f"calls are rounds of answers can ({', '.join(FORKABLE)})", "input")
    if run.get("status") == "running":
        raise ConfigError("this run is still going: fork it once it has ended", "input")
    last = max((int(t.get("round") or 0) for t in run.get("turns") or []), default=0)
    if isinstance(round, bool) or not isinstance(round, int) or not 1 <= round <= max(last, 1):
        raise ConfigError(f"the round to fork at is a whole number from 1 to {last} (the "
                          f"run's rounds), got {round!r}", "input")
    given = RunConfig.parse(run.get("config") or {})
    # the seats and options the fork runs, resolved (and so checked) once, before any call
    config = rerun_resolved(_drop(given, drop.strip()) if drop and given.seats else given)
    kept = [_turn(t) for t in run.get("turns") or []
            if 1 <= int(t.get("round") or 0) < round and t.get("seat") != (drop or "").strip()]
    by_index = {turn.index: turn for turn in kept}
    for index, reply in (edits or {}).items():
        if index not in by_index:
            raise ConfigError(f"turn {index} is not kept by a fork at round {round}; the kept "
                              f"turns are {', '.join(map(str, sorted(by_index))) or 'none'}",
                              "input")
        text = require_text(reply, f"turn {index}'s edited reply")
        if len(text) > MAX_EDIT:
            raise ConfigError(f"an edited reply is at most {MAX_EDIT:,} characters", "input")
        turn = by_index[index]
        turn.reply, turn.status, turn.error = text, "ok", ""
        turn.warnings = [*turn.warnings, "reply edited in the fork"]
    warnings: tuple[str, ...] = ()
    if run.get("imported_at"):
        who = run.get("imported_by") or "an unnamed import"
        when = str(run.get("imported_at"))[:19].replace("T", " ")
        note = (f"run {run.get('id')} was imported (by {who} on {when} UTC): the turns the "
                "fork keeps are what its file claims, not calls made here")
        warnings = (note,)
        for turn in kept:
            turn.warnings = [*turn.warnings, note]
    options = rerun_options(run)
    options["tags"] = [t for t in options["tags"] if not str(t).startswith(
        (FORK_TAG, RERUN_TAG))] + [f"{FORK_TAG}{run.get('id')}"]  # a fork, not a re-run
    options["resume_from"] = Resume(run_id=str(run.get("id") or ""), round=round,
                                    turns=tuple(kept))
    return Fork(config=config, question=str(run.get("question") or ""), options=options,
                warnings=warnings)


def fork(store: Store, run_id: str, round: int, drop: str | None = None,
         edits: Mapping[int, str] | Sequence[str] | None = None,
         warn: Callable[[str], None] = lambda _text: None, **run_options: Any) -> RunResult:
    """Fork a stored run and run the fork synchronously into `store`; returns its result
    (its `run_id` is the new run). `edits` maps turn indexes to replies (or is a list of
    `INDEX=TEXT`); `warn` hears the plan's warnings (a fork of an imported run)."""
    if edits is not None and not isinstance(edits, Mapping):
        edits = dict(parse_edit(e) for e in edits)
    try:
        run = store.get(run_id)
    except KeyError:
        raise ConfigError(f"no run {run_id!r}; list them with python -m engine runs",
                          "input") from None
    planned = plan(run, round, drop, edits)
    for warning in planned.warnings:
        warn(warning)
    return run_sync(arun_config(planned.config, planned.question, store=store,
                                **planned.options, **run_options))


def forked_from(run: Mapping[str, Any]) -> tuple[str, int] | None:
    """(the run a stored run forked, its round), or None when it is not a fork."""
    metrics = run.get("metrics") or {}
    parent = metrics.get("forked_from") if isinstance(metrics, Mapping) else None
    if not parent:
        return None
    try:
        return str(parent), int(metrics.get("fork_round") or 0)
    except (TypeError, ValueError):
        return str(parent), 0

