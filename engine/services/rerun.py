"""Re-run a stored run: its stored configuration turned back into an `arun_config` one.

A run stores its configuration as `{"protocol", "seats": [seat, ...], "options", "prompts"}`
with the seats as one flat list, in the order the protocol listed its slots (see
`protocols.base.describe_config`). `rerun_config` puts each seat back in its slot, so the same
seats, models, personas, options and prompt overrides run again on the same question.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engine.models import ConfigError
from engine.protocols import arun_config, get_protocol, run_sync
from engine.protocols.base import RUN_OPTIONS, ProtocolSpec, Slot

_SEAT_KEYS = ("name", "model", "persona", "role", "temperature", "icon")


def rerun_config(stored: Mapping[str, Any], phases: Mapping[str, Iterable[str]] | None = None
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config for `arun_config`, extra runner keyword arguments) from a stored configuration.

    Options the protocol's registry entry lists go into the config; any other stored option
    that has a value (from an older registry, say) is passed straight to the runner. `phases`
    (seat name -> the phases it spoke in) helps place an optional seat such as a judge.
    """
    spec = get_protocol(str(stored.get("protocol", "")))
    seats = stored.get("seats") or []
    if isinstance(seats, Mapping):  # already keyed by slot (a saved configuration)
        by_slot = dict(seats)
    elif isinstance(seats, Sequence) and not isinstance(seats, str):
        by_slot = _assign(spec, [dict(s) for s in seats if isinstance(s, Mapping)],
                          {k: set(v) for k, v in (phases or {}).items()})
    else:
        raise ConfigError("the stored configuration has no seats to re-run", "input")
    known = {o.name for o in spec.options}
    options = dict(stored.get("options") or {})
    config = {"protocol": spec.name, "seats": by_slot,
              "options": {k: v for k, v in options.items() if k in known},
              "prompts": dict(stored.get("prompts") or {})}
    for key in ("model", "base_url"):
        if stored.get(key):
            config[key] = stored[key]
    extra = {k: v for k, v in options.items() if k not in known and v is not None}
    machinery = sorted(k for k in extra if k in RUN_OPTIONS)
    if machinery:  # stored data never sets how a run is made (its store, endpoints, retries)
        raise ConfigError(f"{spec.name} has no option {machinery[0]!r}; options are "
                          f"{', '.join(sorted(known)) or 'none'}", "input")
    return config, extra


def _clean(seat: Mapping[str, Any]) -> dict[str, Any]:
    return {k: seat[k] for k in _SEAT_KEYS if seat.get(k) not in (None, "")}


def _assign(spec: ProtocolSpec, seats: list[dict[str, Any]],
            phases: Mapping[str, set[str]]) -> dict[str, Any]:
    """Put a flat, slot-ordered seat list back into the protocol's slots.

    A seat that records its `slot` goes there. Otherwise single slots take one seat each in
    order and a list slot takes what the single slots after it leave; an optional single slot
    after a list counts as present when the last seat is named after it (`judge`) or the list
    would otherwise be longer than its maximum.
    """
    if seats and all(s.get("slot") for s in seats):
        out: dict[str, Any] = {}
        for seat in seats:
            slot = next((x for x in spec.slots if x.name == seat["slot"]), None)
            if slot is None:
                raise ConfigError(f"{spec.name} has no seat {seat['slot']!r}", "input")
            if slot.many:
                out.setdefault(slot.name, []).append(_clean(seat))
            else:
                out[slot.name] = _clean(seat)
        return out
    slots = list(spec.slots)
    present = _present_slots(slots, seats, phases)
    out = {}
    position = 0
    for index, slot in enumerate(slots):
        if not present[slot.name]:
            continue
        if slot.many:
            after = sum(1 for s in slots[index + 1:] if present[s.name])
            count = len(seats) - position - after
            out[slot.name] = [_clean(s) for s in seats[position:position + count]]
            position += count
        else:
            if position >= len(seats):
                raise ConfigError(f"the stored configuration has no seat for {slot.name}",
                                  "input")
            out[slot.name] = _clean(seats[position])
            position += 1
    return out


def _present_slots(slots: list[Slot], seats: list[dict[str, Any]],
                   phases: Mapping[str, set[str]]) -> dict[str, bool]:
    present = {s.name: not s.optional for s in slots}
    optional = [s for s in slots if s.optional and not s.many]
    if not optional:
        return present
    many = next((s for s in slots if s.many), None)
    fixed = sum(1 for s in slots if not s.many and not s.optional)
    spare = len(seats) - fixed - (many.minimum if many else 0)
    names = [str(s.get("name", "")).lower() for s in seats]
    roles = [str(s.get("role", "")).lower() for s in seats]
    spoke = phases.get(str(seats[-1].get("name", "")), set()) if seats else set()
    for slot in reversed(optional):
        if spare <= 0:
            break
        too_many = many is not None and len(seats) - fixed > many.maximum
        if (many is None or too_many or slot.name in spoke or slot.name in names[-1:]
                or slot.name in roles[-1:]):
            present[slot.name] = True
            spare -= 1
            fixed += 1
    return present


def _phases(run: Mapping[str, Any]) -> dict[str, set[str]]:
    spoke: dict[str, set[str]] = {}
    for turn in run.get("turns") or []:
        spoke.setdefault(str(turn.get("seat", "")), set()).add(str(turn.get("phase", "")))
    return spoke


def rerun(store: Any, run: Mapping[str, Any], **run_options: Any) -> Any:
    """Run a stored run (`Store.get`) again: same configuration, question, label, tags and
    expected answer. Synchronous; returns the new result (its `run_id` is the new run).

    A stored seat keeps its endpoint (`openai:M?base_url=URL` or `?endpoint=NAME`): the URL is
    data now, so it gets a key only if it is a registered endpoint's URL under
    `run_options["endpoints"]` (default: the environment's registry)."""
    config, extra = rerun_config(run.get("config") or {}, _phases(run))
    options = {"store": store, "label": run.get("label") or None,
               "tags": list(run.get("tags") or []), "expected": run.get("expected") or None,
               **extra, **run_options}
    return run_sync(arun_config(config, str(run.get("question", "")), **options))


def start_rerun(store: Any, run: Mapping[str, Any], jobs: Any = None,
                endpoints: Any = None) -> str:
    """Start a re-run and return its run id: in the background through `jobs`
    (`engine.services.tasks.JobManager`) when given, else synchronously (the call returns when the new
    run is stored). Stored options the job manager cannot pass also mean a synchronous run.
    `endpoints` is the caller's `EndpointRegistry` (the app's, built from its settings)."""
    config, extra = rerun_config(run.get("config") or {}, _phases(run))
    routed = {"endpoints": endpoints} if endpoints is not None else {}
    if jobs is not None and not extra:
        return jobs.start(config, str(run.get("question", "")),
                          expected=run.get("expected") or None, label=run.get("label") or None,
                          tags=list(run.get("tags") or []), **routed)
    return rerun(store, run, **routed).run_id
