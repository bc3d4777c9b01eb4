"""A run configuration checked as a run would check it, before any call."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.checks import require_name, unique_names
from engine.config import RunConfig
from engine.models import ConfigError
from engine.protocols import Resolved, get_protocol, resolve_config
from engine.protocols.adversary import with_templates
from engine.protocols.checks import require_seat
from engine.protocols.templates import check_prompts

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry

def check_config(config: RunConfig | Mapping[str, Any],
                 endpoints: EndpointRegistry | None = None) -> Resolved:
    """Check a configuration as a run would, before any call, and return it resolved (the
    value the preflight, `TaskRunner.start_run` and `arun_config` take without resolving it
    again).

    Seat models resolve under `endpoints` (an `EndpointRegistry`; None: the environment's),
    so a base URL the app may not call, or a key written into a spec, is refused here.
    Raises `ConfigError` naming the protocol, seat, option or prompt placeholder to fix.
    """
    if not isinstance(config, (Mapping, RunConfig)):
        raise ConfigError("a configuration must be a mapping", "input")
    given = config if isinstance(config, Mapping) else config.model_dump()
    spec = get_protocol(str(given.get("protocol", "")))
    check_prompts(spec.name, with_templates(spec.templates), given.get("prompts"))
    if given.get("label") not in (None, ""):
        require_name(given["label"], "a configuration label")
    resolved = resolve_config(config, endpoints)
    for slot in spec.slots:
        seats = resolved.seats.get(slot.name)
        listed = [one for one in (seats if isinstance(seats, list) else [seats])
                  if one is not None]
        for one in listed:  # an unknown spec or a missing key fails here, before a run
            require_seat(one, slot.name, endpoints)
        if slot.many:
            unique_names(listed, slot.name)
    return resolved

