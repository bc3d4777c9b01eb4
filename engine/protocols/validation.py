"""A run configuration checked as a run would check it, before any call."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.checks import require_name, unique_names
from engine.models import ConfigError
from engine.protocols import estimate, get_protocol, seats_from_config
from engine.protocols.adversary import with_templates
from engine.protocols.checks import require_seat
from engine.protocols.templates import check_prompts

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry


def validate_config(config: Mapping[str, Any], endpoints: EndpointRegistry | None = None
                    ) -> dict[str, int]:
    """Check a configuration as a run would, before any call; returns the cost preflight.

    Seat models resolve under `endpoints` (an `EndpointRegistry`; None: the environment's),
    so a base URL the app may not call, or a key written into a spec, is refused here.
    Raises `ConfigError` naming the protocol, seat, option or prompt placeholder to fix.
    """
    if not isinstance(config, Mapping):
        raise ConfigError("a configuration must be a mapping", "input")
    spec = get_protocol(str(config.get("protocol", "")))
    check_prompts(spec.name, with_templates(spec.templates), config.get("prompts"))
    if config.get("label") not in (None, ""):
        require_name(config["label"], "a configuration label")
    kwargs = seats_from_config(spec, dict(config))
    for slot in spec.slots:
        seats = kwargs.get(slot.name)
        listed = [one for one in (seats if isinstance(seats, list) else [seats])
                  if one is not None]
        for one in listed:  # an unknown spec or a missing key fails here, before a run
            require_seat(one, slot.name, endpoints)
        if slot.many:
            unique_names(listed, slot.name)
    return estimate(dict(config))
