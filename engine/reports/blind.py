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

from engine.models import ConfigError
from engine.protocols import resolve_config
from engine.protocols.baselines import PLACEBO_SUFFIX

UNREAD = "personas, roles' words, prompt templates, seat names"


def _simulated(model: str) -> bool:
    return model.strip().lower().startswith("simulated")


def simulated_key(config: Mapping[str, Any]) -> str | None:
    """What the simulated model reads of a configuration, as one comparable text; None for
    a configuration with a seat on another model (or one that cannot be read)."""
    try:
        resolved = resolve_config(dict(config))
    except (ConfigError, TypeError, ValueError):
        return None
    seats = []
    for slot, entries in sorted(resolved.seats.items()):
        for seat in entries:
            if not _simulated(seat.model or resolved.model):
                return None
            seats.append(f"{slot}:{seat.model or resolved.model}:{seat.role.strip().lower()}")
    # a placebo arm's agents read other questions' answers, which the simulated model reads
    arm = PLACEBO_SUFFIX in str(config.get("label") or "")
    return "|".join([resolved.protocol, repr(sorted(resolved.options.items(), key=str)),
                     str(resolved.order_seed), *seats, *["placebo"] * arm])


def blind_groups(configs: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The labels of configurations (two or more to a group, in the order given) that the
    simulated model cannot tell apart: all on the simulated model, differing only in text
    it does not read."""
    groups: dict[str, list[str]] = {}
    for number, config in enumerate(configs, 1):
        key = simulated_key(config)
        if key is not None:
            groups.setdefault(key, []).append(str(config.get("label") or f"configuration "
                                                                         f"{number}"))
    return [labels for labels in groups.values() if len(labels) > 1]


def blind_notes(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """One sentence per group of `blind_groups`, for a preflight, a results page or the
    CLI ([] when every configuration differs in what the simulator reads)."""
    return [f"{', '.join(labels[:-1])} and {labels[-1]} differ only in what the simulated "
            f"model does not read ({UNREAD}): on it they are one configuration, so equal "
            "numbers (or differences within seeded noise) say nothing about the change. "
            "Compare them on a real model, or set the simulated world's parameters per "
            "seat (simulated?skill=...&conformity=...)." for labels in blind_groups(configs)]


__all__ = ["UNREAD", "blind_groups", "blind_notes", "simulated_key"]
