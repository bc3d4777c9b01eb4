"""The protocol registry: one table that the CLI, the app and experiments loop over."""
from __future__ import annotations

from typing import Any

from engine.models import ConfigError
from engine.protocols.templates import Template
from engine.protocols import debate, peer_review
from engine.protocols import duel, roundtable
from engine.protocols import panel, vote
from engine.protocols.base import Option, ProtocolSpec, Slot, run_sync

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
    key = (name if isinstance(name, str) else "").strip().lower().replace("_", "-")
    if key not in REGISTRY:
        raise ConfigError(f"unknown protocol {name!r}; choose one of {', '.join(REGISTRY)}",
                          "input")
    return REGISTRY[key]


def prompt_templates(protocol: str) -> dict[str, dict[str, Any]]:
    """A protocol's default prompt templates and the placeholders each may use."""
    spec = get_protocol(protocol)
    return {name: {"template": t.text, "placeholders": list(t.placeholders), "help": t.help}
            for name, t in spec.templates.items()}


CONFIG_KEYS = ("protocol", "label", "model", "base_url", "seats", "options", "prompts")
SEAT_KEYS = ("name", "model", "persona", "persona_name", "role", "temperature", "icon")


def _unknown(given: Any, allowed: tuple[str, ...], what: str) -> None:
    unknown = sorted(str(k) for k in given if k not in allowed)
    if unknown:
        raise ConfigError(f"{what} has no key {unknown[0]!r}; keys are {', '.join(allowed)}",
                          "input")


def check_options(spec: ProtocolSpec, options: Any) -> dict[str, Any]:
    """A configuration's options: each one the protocol has, whole numbers in range."""
    from engine.protocols.base import require_int
    if not isinstance(options, dict):
        raise ConfigError(f"{spec.name} options must be a mapping of option names to values",
                          "input")
    known = {o.name: o for o in spec.options}
    for name, value in options.items():
        if name not in known:
            raise ConfigError(f"{spec.name} has no option {name!r}; options are "
                              f"{', '.join(sorted(known)) or 'none'}", "input")
        option = known[name]
        if isinstance(option.default, int) and not isinstance(option.default, bool) and (
                option.minimum is not None or option.maximum is not None):
            require_int(value, name, option.minimum if option.minimum is not None else 0,
                        option.maximum, spec.name)
    return dict(options)


def seats_from_config(spec: ProtocolSpec, config: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for `spec.runner` built from a stored configuration.

    `config["seats"]` maps a slot name to a seat dict (`name, model, persona, role,
    temperature, icon`) or, for a list slot, a list of them; missing slots take the slot's
    defaults, and a seat without a model takes `config["model"]` (default `simulated`).
    A configuration-wide `base_url` is added to every `openai:` seat that names neither its
    own `?base_url=` nor an `?endpoint=` (the seat's own wins). Models stay spec strings, so
    they resolve under the run's endpoint registry; unknown keys, options and values that
    cannot be right are refused here, before any call.
    """
    from engine.llm.endpoints import with_base_url
    from engine.models import Seat
    from engine.protocols.base import require_temperature
    if not isinstance(config, dict):
        raise ConfigError("a configuration must be a mapping", "input")
    _unknown(config, CONFIG_KEYS, "a configuration")
    default_model = config.get("model") or "simulated"
    base_url = config.get("base_url")
    if not isinstance(default_model, str) or (base_url is not None and
                                              not isinstance(base_url, str)):
        raise ConfigError("a configuration's model and base_url must be text", "input")
    seats = config.get("seats") or {}
    if not isinstance(seats, dict):
        raise ConfigError("configuration seats must map slot names to seats", "input")
    unknown = sorted(set(seats) - {slot.name for slot in spec.slots})
    if unknown:
        raise ConfigError(f"{spec.name} has no seat {unknown[0]!r}; seats are "
                          f"{', '.join(s.name for s in spec.slots)}", "input")

    def make(entry: Any, slot: Slot) -> Seat:
        if entry is not None and not isinstance(entry, (str, dict)):
            raise ConfigError(f"seat {slot.name}: a seat is a mapping or a model spec, got "
                              f"{type(entry).__name__}", "input")
        entry = {"model": entry} if isinstance(entry, str) else dict(entry or {})
        _unknown(entry, SEAT_KEYS, f"seat {slot.name}")
        for key in ("name", "model", "persona", "role", "icon"):
            if entry.get(key) is not None and not isinstance(entry[key], str):
                raise ConfigError(f"seat {slot.name}: {key} must be text, got "
                                  f"{type(entry[key]).__name__}", "input")
        model = entry.get("model") or default_model
        if base_url and model.strip().lower().startswith("openai:"):
            model = with_base_url(model, base_url)
        temperature = entry.get("temperature")
        if temperature is not None:
            temperature = require_temperature(temperature, f"seat {slot.name}: temperature")
        return Seat(entry.get("name") or slot.name, model, entry.get("persona") or "",
                    entry.get("role") or "", temperature, icon=entry.get("icon") or "")

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
    kwargs.update(check_options(spec, config.get("options") or {}))
    return kwargs


async def arun_config(config: dict[str, Any], question: str, **run: Any) -> Any:
    """Run a stored configuration on a question; `run` takes store, label, tags, expected ..."""
    if not isinstance(config, dict):
        raise ConfigError("a configuration must be a mapping", "input")
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


__all__ = ["arun_config", "estimate", "seats_from_config", "check_options", "CONFIG_KEYS",
           "SEAT_KEYS", "REGISTRY", "ProtocolSpec", "Slot", "Option", "Template", "get_protocol",
           "prompt_templates", "run_sync"]
