"""Which protocol a benchmark runs, chosen from the registry by what it does, never by name.

`busiest()` is the protocol whose default configuration makes the most calls while running some
of them at once (the run that stresses the engine, the store and the pages most); `cheapest()`
makes the fewest calls (for drills that count runs, not calls); `crowd_by_rounds()` has many
seats answer together round after round.
"""
from __future__ import annotations

from typing import Any

from engine.protocols import REGISTRY, ProtocolSpec, estimate


def simulated(latency: float) -> str:
    """The simulated model's spec at `latency` seconds a call."""
    return f"simulated?latency={latency:g}"


def default_config(spec: ProtocolSpec[Any], model: str = "simulated") -> dict[str, Any]:
    """A protocol's default configuration on `model`."""
    return {"protocol": spec.name, "model": model}


def every_phase_config(spec: ProtocolSpec[Any], model: str, rounds: int = 1) -> dict[str, Any]:
    """`spec`'s default configuration on `model` with at most `rounds` rounds and each optional
    seat filled, so every phase the protocol has is asked."""
    config = default_config(spec, model)
    for option in spec.options:
        if option.name == spec.rounds_option:
            config["options"] = {option.name: min(rounds, option.default)}
    optional = {slot.name: [{"name": slot.name}] for slot in spec.slots if slot.optional}
    if optional:
        config["seats"] = optional
    return config


def busiest() -> ProtocolSpec[Any]:
    def weight(spec: ProtocolSpec[Any]) -> tuple[bool, int]:
        cost = estimate(default_config(spec))
        return cost["waves"] < cost["calls"], cost["calls"]
    return max(REGISTRY.values(), key=weight)


def cheapest() -> ProtocolSpec[Any]:
    return min(REGISTRY.values(), key=lambda spec: estimate(default_config(spec))["calls"])


def crowded_config(spec: ProtocolSpec[Any], seats: int, model: str = "simulated"
                   ) -> dict[str, Any]:
    """`spec`'s default configuration with its many-seat slot (if any) holding `seats` seats
    (within the slot's limits)."""
    config = default_config(spec, model)
    for slot in spec.slots:
        if slot.many:
            count = max(slot.minimum, min(slot.maximum, seats))
            config["seats"] = {slot.name: [{"name": f"{slot.name} {i + 1}"}
                                           for i in range(count)]}
            break
    return config


def waves(spec: ProtocolSpec[Any]) -> int:
    """The critical path, in calls, of `spec`'s default configuration."""
    return estimate(default_config(spec))["waves"]


def crowd_by_rounds() -> ProtocolSpec[Any]:
    """The protocol whose many seats answer together round after round: a many-seat slot, a
    `rounds` option, and calls that overlap (the society's shape)."""
    def fits(spec: ProtocolSpec[Any]) -> bool:
        cost = estimate(default_config(spec))
        return any(slot.many for slot in spec.slots) and cost["waves"] < cost["calls"] and \
            any(option.name == "rounds" for option in spec.options)
    return next(spec for spec in REGISTRY.values() if fits(spec))
