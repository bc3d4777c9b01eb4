"""The protocol registry: one table that the CLI, the app and experiments loop over."""
from __future__ import annotations

from typing import Any

from ..models import ConfigError
from ..templates import Template
from . import debate, peer_review
from . import duel, roundtable
from . import panel, vote
from .base import Option, ProtocolSpec, Slot, run_sync

REGISTRY: dict[str, ProtocolSpec] = {
    spec.name: spec for spec in (
        debate.SPEC,
        peer_review.SPEC,
        roundtable.SPEC,
        duel.SPEC,
        panel.SPEC,
        vote.SPEC,
    )
}


def get_protocol(name: str) -> ProtocolSpec:
    """The registry entry for `name`, or a `ConfigError` listing the protocols."""
    key = (name or "").strip().lower().replace("_", "-")
    if key not in REGISTRY:
        raise ConfigError(f"unknown protocol {name!r}; choose one of {', '.join(REGISTRY)}",
                          "input")
    return REGISTRY[key]


def prompt_templates(protocol: str) -> dict[str, dict[str, Any]]:
    """A protocol's default prompt templates and the placeholders each may use."""
    spec = get_protocol(protocol)
    return {name: {"template": t.text, "placeholders": list(t.placeholders), "help": t.help}
            for name, t in spec.templates.items()}


def seats_from_config(spec: ProtocolSpec, config: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for `spec.runner` built from a stored configuration.

    `config["seats"]` maps a slot name to a seat dict (`name, model, persona, role,
    temperature, icon`) or, for a list slot, a list of them; missing slots take the slot's
    defaults, and a seat without a model takes `config["model"]` (default `simulated`).
    """
    from ..models import Seat
    from ..providers import get_model
    default_model = config.get("model") or "simulated"
    base_url = config.get("base_url")
    seats = config.get("seats") or {}
    if not isinstance(seats, dict):
        raise ConfigError("configuration seats must map slot names to seats", "input")
    unknown = sorted(set(seats) - {slot.name for slot in spec.slots})
    if unknown:
        raise ConfigError(f"{spec.name} has no seat {unknown[0]!r}; seats are "
                          f"{', '.join(s.name for s in spec.slots)}", "input")

    def make(entry: Any, slot: Slot) -> Seat:
        entry = {"model": entry} if isinstance(entry, str) else dict(entry or {})
        model = entry.get("model") or default_model
        if base_url and isinstance(model, str) and model.startswith("openai:"):
            model = get_model(model, base_url=base_url)
        return Seat(entry.get("name") or slot.name, model, entry.get("persona", ""),
                    entry.get("role", ""), entry.get("temperature"), icon=entry.get("icon", ""))

    kwargs: dict[str, Any] = {}
    for slot in spec.slots:
        given = seats.get(slot.name)
        if slot.many:
            entries = given if given is not None else list(slot.defaults)
            if not isinstance(entries, list):
                raise ConfigError(f"{slot.name} must be a list of seats", "input")
            kwargs[slot.name] = [make(e, slot) for e in entries]
        elif given is None and slot.optional:
            kwargs[slot.name] = None
        else:
            kwargs[slot.name] = make(given if given is not None else
                                     (slot.defaults[0] if slot.defaults else {}), slot)
    options = dict(config.get("options") or {})
    known = {o.name for o in spec.options}
    for name in options:
        if name not in known:
            raise ConfigError(f"{spec.name} has no option {name!r}; options are "
                              f"{', '.join(sorted(known)) or 'none'}", "input")
    kwargs.update(options)
    return kwargs


async def arun_config(config: dict[str, Any], question: str, **run: Any) -> Any:
    """Run a stored configuration on a question; `run` takes store, label, tags, expected ..."""
    spec = get_protocol(config.get("protocol", ""))
    kwargs = seats_from_config(spec, config)
    if config.get("prompts"):
        run.setdefault("prompts", config["prompts"])
    run.setdefault("label", config.get("label"))
    return await spec.runner(question, **kwargs, **run)


def estimate(config: dict[str, Any]) -> dict[str, int]:
    """Preflight: the calls a configuration makes when nothing fails, and a token estimate."""
    spec = get_protocol(config.get("protocol", ""))
    kwargs = seats_from_config(spec, config)
    sizes = {slot.name: len(kwargs[slot.name]) if slot.many else int(kwargs[slot.name]
                                                                      is not None)
             for slot in spec.slots}
    options = {o.name: kwargs.get(o.name, o.default) for o in spec.options}
    calls = spec.estimate_calls(options, sizes)
    return {"calls": calls, "tokens": calls * 600}


__all__ = ["arun_config", "estimate", "seats_from_config","REGISTRY", "ProtocolSpec", "Slot", "Option", "Template", "get_protocol",
           "prompt_templates", "run_sync"]
