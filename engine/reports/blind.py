"""What the simulated model cannot tell apart, said before anyone reads a tie as a finding.

The simulated model reads a run's structure, its expected answer and its world's parameters
(`engine.simulated`), never a prompt's wording: a persona's system prompt, a role's line, a
template override, a seat's name or a label reach it only as text it does not read (a seat's
name keys its seeded draws, so a renamed seat gets other noise, not other behaviour). Two
configurations on the simulated model that differ only there are one configuration to it:
their numbers are equal, or differ by seeded noise, whatever the change was.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.config import RunConfig
from engine.models import ConfigError, is_simulated
from engine.protocols import Resolved, resolve_config
from engine.protocols.baselines import PLACEBO_SUFFIX

UNREAD = "personas, roles' words, prompt templates, seat names"


Config = Mapping[str, Any] | RunConfig | Resolved


def _resolved(config: Config) -> RunConfig | None:
    """The configuration as a run of it is stored (a `Resolved` one as it is); None when it
    cannot be read."""
    try:
        return resolve_config(config if isinstance(config, (Resolved, RunConfig))
                              else dict(config)).config
    except (ConfigError, TypeError, ValueError):
        return None


def _label(config: Config) -> str:
    """A configuration's own label ("" when it has none)."""
    if isinstance(config, Resolved):
        config = config.given
    return str((config.label if isinstance(config, RunConfig) else config.get("label")) or "")


def simulated_key(config: Config) -> str | None:
    """What the simulated model reads of a configuration, as one comparable text; None for
    a configuration with a seat on another model (or one that cannot be read)."""
    resolved = _resolved(config)
    if resolved is None:
        return None
    seats = []
    for slot, entries in sorted(resolved.seats.items()):
        for seat in entries:
            if not is_simulated(seat.model or resolved.model):
                return None
            seats.append(f"{slot}:{seat.model or resolved.model}:{seat.role.strip().lower()}")
    planted = resolved.adversary or {}  # the placebo persona is text it does not read
    pushed = "" if not planted or planted.get("placebo") else \
        f"{planted['seat']}:{planted['answer']}"
    # a placebo arm's agents read other questions' answers, which the simulated model reads
    arm = PLACEBO_SUFFIX in _label(config)
    return "|".join([resolved.protocol, repr(sorted(resolved.options.items(), key=str)),
                     str(resolved.order_seed), pushed, *seats, *["placebo"] * arm])


def blind_groups(configs: Sequence[Config]) -> list[list[str]]:
    """The labels of configurations (two or more to a group, in the order given) that the
    simulated model cannot tell apart: all on the simulated model, differing only in text
    it does not read."""
    groups: dict[str, list[str]] = {}
    for number, config in enumerate(configs, 1):
        key = simulated_key(config)
        if key is not None:
            groups.setdefault(key, []).append(_label(config) or f"configuration {number}")
    return [labels for labels in groups.values() if len(labels) > 1]


def blind_notes(configs: Sequence[Config]) -> list[str]:
    """One sentence per group of `blind_groups`, for a preflight, a results page or the
    CLI ([] when every configuration differs in what the simulator reads)."""
    return [f"{', '.join(labels[:-1])} and {labels[-1]} differ only in what the simulated "
            f"model does not read ({UNREAD}): on it they are one configuration, so equal "
            "numbers (or differences within seeded noise) say nothing about the change. "
            "Compare them on a real model, or set the simulated world's parameters per "
            "seat (simulated?skill=...&conformity=...)." for labels in blind_groups(configs)]


def unread_note(config: Config) -> str:
    """For one configuration on the simulated model (the Run page's preflight): which of its
    texts the simulated model does not read (personas, roles' words, prompt overrides), so no
    one expects them to change a simulated run; "" when it carries none, or a seat is on
    another model. Seats whose persona or role declares traits are named: those it reads."""
    resolved = _resolved(config)
    if resolved is None or simulated_key(config) is None:
        return ""
    seats = [seat for entries in resolved.seats.values() for seat in entries]
    unread = [what for what, present in (
        ("personas' prompts", any(seat.persona.strip() for seat in seats)),
        ("roles' words", any(seat.role.strip() for seat in seats)),
        ("prompt overrides", bool(resolved.prompts))) if present]
    if not unread:
        return ""
    traited = [seat.name for seat in seats if seat.traits]
    read = (f" It does read the declared traits of {', '.join(traited)}." if traited else
            " Declare traits on a persona or role (stubbornness, accuracy, conformity) to "
            "change what the simulator does.")
    return (f"The simulated model does not read {', '.join(unread)}: this run's dynamics "
            f"come from its world's parameters, whatever those texts say.{read}")


def config_worlds(configs: Sequence[Config], label: str = "") -> list[str]:
    """The simulated world of each configuration on the simulated model, one line each
    ("LABEL: skill 0.7 · ...", `label` or its own; its seats named where they live in
    different worlds, as a persona's declared traits make them): what its simulated numbers
    show."""
    from engine.views.blocks import worlds
    out = []
    for number, config in enumerate(configs, 1):
        resolved = _resolved(config)
        if resolved is None:
            continue
        named = label or _label(config) or f"configuration {number}"
        lines = worlds("", resolved.stored())
        if len(lines) == 1:
            out.append(f"{named}: {lines[0]}")
        else:
            out += [f"{named}, {line}" for line in lines]
    return out
