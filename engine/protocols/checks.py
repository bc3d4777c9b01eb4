"""A seat and a protocol's options checked before any call: a seat's name, role, temperature
and a model that resolves; each option against its `Option` row (the other checks, of text,
names, numbers and run options, are `engine.checks`)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.checks import require_int, require_name, require_temperature
from engine.llm.providers import SPEC_HELP
from engine.llm.runmodels import seat_model
from engine.models import ConfigError, Seat
from engine.text import NAME_MAX

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry
    from engine.protocols.base import Option, ProtocolSpec


def require_seat(seat: object, slot: str, endpoints: EndpointRegistry | None = None,
                 role: str = "") -> Seat:
    """A `Seat` (or a bare model / spec, which becomes one named after the slot) whose model
    resolves under `endpoints` (an `EndpointRegistry`; None: the environment's), playing
    `role` when it was given none."""
    if seat is None:
        raise ConfigError(f"{slot} needs a seat with a model", "no_model")
    if not isinstance(seat, Seat):
        seat = Seat(slot, seat)
    if not seat.name or not seat.name.strip():
        raise ConfigError(f"{slot}: every seat needs a name", "input")
    if seat.model is None or isinstance(seat.model, str) and not seat.model.strip():
        raise ConfigError(f"{slot} ({seat.name}) has no model; {SPEC_HELP}", "no_model")
    require_name(seat.name, f"{slot}: the seat name")
    for label, value in (("role", seat.role), ("icon", seat.icon)):
        if not isinstance(value, str) or len(value) > NAME_MAX or "\x00" in value:
            raise ConfigError(f"{slot}: the seat's {label} must be text of at most "
                              f"{NAME_MAX} characters without NUL", "limit")
    if seat.temperature is not None:
        require_temperature(seat.temperature, f"{slot}: temperature")
    # an unknown spec fails here; in a run, its calls reuse the model (engine.llm.runmodels)
    seat_model(seat.model, seat.temperature, endpoints)
    if len(seat.spec) > NAME_MAX:  # recorded on every turn: every backend must accept it
        raise ConfigError(f"{slot}: the model spec {seat.spec[:60]!r}... is {len(seat.spec)} "
                          f"characters; the limit is {NAME_MAX}", "limit")
    return seat if seat.role or not role else seat.model_copy(update={"role": role})


def check_options(spec: ProtocolSpec[Any], options: Any,
                  seat_names: Sequence[str] | None = None) -> dict[str, Any]:
    """A configuration's (or a runner's) options: each one the protocol has, whole numbers in
    range, flags true or false, one of its choices where it has them (`seat_names`, when
    known, for an option naming a seat). The protocol's `Option` rows are the one statement
    of these rules: its runner checks its arguments here too."""
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
        if isinstance(option.default, bool) and not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, got {value!r}", "input")
        if option.choices and not _chosen(option, value, seat_names):
            listed = ", ".join("none" if c is None else repr(c) for c in option.choices)
            seat = (" or a seat name" + (f" ({', '.join(seat_names)})" if seat_names else "")
                    if option.or_seat else "")
            raise ConfigError(f"{spec.name} option {name} must be one of {listed}{seat}, got "
                              f"{value!r}", "input")
    return dict(options)


def _chosen(option: Option, value: Any, seat_names: Sequence[str] | None) -> bool:
    """Whether `value` is one of the option's choices (text in any case and spacing), or a
    seat's name where the option takes one (any text when the seats are not known yet)."""
    text = value.strip().lower() if isinstance(value, str) else None
    if value in option.choices or (text is not None and text in option.choices):
        return True
    if option.or_seat and text:
        return seat_names is None or value.strip() in seat_names
    return False
