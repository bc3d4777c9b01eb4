"""A seat checked before any call: its name, role, temperature and a model that resolves
(the other checks, of text, names, numbers and run options, are `engine.checks`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from engine.checks import require_name, require_temperature
from engine.llm.providers import SPEC_HELP
from engine.llm.runmodels import seat_model
from engine.models import ConfigError, Seat
from engine.text import NAME_MAX

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry


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


def require_flags(**flags: object) -> None:
    """Each of `flags` (an option's name and value) is true or false; a `ConfigError`
    naming the first that is not."""
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            raise ConfigError(f"{name} must be true or false, got {flag!r}", "input")
