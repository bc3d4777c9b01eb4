"""Which seats of a stored run the offline simulated model played: the store keeps the
`simulated` flag (any seat simulated), and exports, tables and pages say "all" or
"mixed: judge, critic" from a run's configuration (or its model specs)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.models import is_simulated


def seat_models(config: Any) -> list[tuple[str, str]]:
    """(seat name, model spec) of every seat a stored configuration names (slot order)."""
    if not isinstance(config, Mapping) or not isinstance(config.get("seats"), Mapping):
        return []
    default = str(config.get("model") or "")
    out = []
    for slot, value in config["seats"].items():
        for seat in value if isinstance(value, list) else [value]:
            if isinstance(seat, Mapping):
                out.append((str(seat.get("name") or slot), str(seat.get("model") or default)))
            elif isinstance(seat, str):  # a seat given as its bare model spec
                out.append((str(slot), seat or default))
    return out


def simulation(simulated: Any, models: Any, config: Any = None) -> tuple[str, list[str]]:
    """Whether a run is simulated, as text and as the seats the simulated model played.

    A run is simulated when any seat is: the text is "all" when every seat is, "mixed: judge,
    critic" when some are (naming them), and "" for a real run. The seats come from the stored
    configuration; without one (a list read without configurations, an old import) from the
    run's model specs, and from the store's own flag (a failed call carries no flag)."""
    seats = seat_models(config)
    if seats:
        names = [name for name, model in seats if is_simulated(model)]
        everyone = len(names) == len(seats)
    else:
        specs = [m for m in str(models or "").split(",") if m]
        names = [m for m in specs if is_simulated(m)]
        everyone = len(names) == len(specs)
        if not names and bool(simulated):
            return "all", []
    if not names:
        return "", []
    return ("all" if everyone else "mixed: " + ", ".join(names)), names
