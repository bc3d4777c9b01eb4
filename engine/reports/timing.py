"""The preflight's time estimate and its endpoint notes, from what is known, never made up.

Each seat's model is paced by the median latency of its recent ok turns in the store
(`engine.store.latency`), a simulated seat by the latency its spec declares; a model with
neither has no measurement yet, and then the preflight gives no time at all. The estimate
takes the slowest pace among the seats and the shape of the work: one run lasts at least its
critical path (`waves` dependent calls) and at least its calls spread over the calls it keeps
in flight; an experiment's runs overlap `runs at once`, and an endpoint that serves fewer
calls at once than are asked for holds them to its limit (and gets a note).
"""
from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.llm.endpoints import Endpoint, EndpointRegistry
from engine.llm.policy import DEFAULT_CONCURRENCY, CallPolicy, endpoint_defaults
from engine.llm.providers import parse_spec
from engine.models import is_simulated
from engine.protocols import Resolved, estimate, resolve_config
from engine.store.latency import measured_latency

if TYPE_CHECKING:
    from engine.store import Store

Configs = Sequence[Mapping[str, Any] | Resolved]


@dataclass(frozen=True)
class Pace:
    """How fast one seat model answers, as far as is known: `seconds` per call (None: no
    measurement yet), over `calls` measured calls (0 for a simulated seat's declared latency),
    and the registered endpoint it is called through (None when none)."""

    model: str
    seconds: float | None
    calls: int
    simulated: bool
    endpoint: Endpoint | None


def endpoint_of(spec: str, endpoints: EndpointRegistry | None = None) -> Endpoint | None:
    """The registered endpoint a model spec is called through (its `?endpoint=`, its
    `?base_url=` when registered, or the provider's own URL the operator set), or None."""
    if is_simulated(spec):
        return None
    provider, _name, query = parse_spec(spec)
    registry = endpoints if endpoints is not None else EndpointRegistry.from_settings(
        os.environ)
    return registry.route(provider, endpoint=query.get("endpoint"),
                          base_url=query.get("base_url")).endpoint


def seat_models(configs: Configs) -> list[str]:
    """Every distinct effective model spec of the configurations' seats (default model and
    base URL applied), in seat order."""
    found: dict[str, None] = {}
    for config in configs:
        for seats in resolve_config(config).config.seats.values():
            for seat in seats:
                found.setdefault(seat.model)
    return list(found)


def paces(configs: Configs, store: Store | None = None,
          endpoints: EndpointRegistry | None = None) -> list[Pace]:
    """The pace of every seat model of the configurations (see `Pace`)."""
    models = seat_models(configs)
    real = [m for m in models if not is_simulated(m)]
    measured = measured_latency(store, real) if store is not None and real else {}
    out = []
    for model in models:
        if is_simulated(model):
            latency = parse_spec(model)[2].get("latency", 0.0)
            out.append(Pace(model, float(latency), 0, True, None))
            continue
        found = measured.get(model)
        out.append(Pace(model, found.median if found else None, found.calls if found else 0,
                        False, endpoint_of(model, endpoints)))
    return out


def policy_defaults(config: Mapping[str, Any] | Resolved, endpoints: EndpointRegistry | None = None
                    ) -> tuple[CallPolicy, dict[str, list[str]]]:
    """What a run of `config` would use with no call policy of its own: per field, what the
    seats' endpoints set (`engine.llm.policy.endpoint_defaults`), else the default; and, per
    field, the endpoint names it came from (empty: the default)."""
    used = {p.endpoint.name: p.endpoint.policy() for p in paces([config], None, endpoints)
            if p.endpoint is not None}
    return endpoint_defaults(used)


def time_estimate(configs: Configs, *, runs: int = 1, runs_at_once: int = 1,
                  store: Store | None = None, endpoints: EndpointRegistry | None = None
                  ) -> dict[str, Any]:
    """The preflight's time for `runs` runs of each configuration, `runs_at_once` in flight:
    `{"seconds": float | None, "text": sentence, "notes": [endpoint notes]}`. `seconds` is
    None (and the sentence says which model has no measurement yet) unless every seat model
    has a pace. Each configuration is resolved once (a `Resolved` one not again)."""
    resolved = [resolve_config(c) for c in configs]
    seat_paces = paces(resolved, store, endpoints)
    notes = concurrency_notes(resolved, seat_paces)
    unknown = [p.model for p in seat_paces if p.seconds is None]
    if unknown:
        return {"seconds": None, "notes": notes,
                "text": f"no time estimate: no measurement yet for {', '.join(unknown)} "
                        "(its first calls measure it)"}
    slowest = max(seat_paces, key=lambda p: (p.seconds or 0.0, p.calls))
    per_call = slowest.seconds or 0.0
    # the calls a run may keep in flight: its own, else the default (an endpoint's limit
    # holds it lower)
    shapes = [(estimate(c), c.policy.concurrency or DEFAULT_CONCURRENCY) for c in resolved]
    run_seconds = [per_call * max(cost["waves"], math.ceil(cost["calls"] / at_once))
                   for cost, at_once in shapes]
    calls = runs * sum(cost["calls"] for cost, _ in shapes)
    served = [p.endpoint.concurrency for p in seat_paces
              if p.endpoint is not None and p.endpoint.concurrency is not None]
    at_once = min([runs_at_once * max(a for _, a in shapes), *served])
    seconds = max(runs * sum(run_seconds) / max(1, runs_at_once),
                  max(run_seconds), calls * per_call / max(1, at_once))
    if slowest.simulated:
        basis = f"the simulated model's declared {per_call:g} s per call"
    else:
        basis = (f"the measured median of {per_call:.3g} s per call over the last "
                 f"{slowest.calls} calls of {slowest.model}")
    waves = max(cost["waves"] for cost, _ in shapes)
    return {"seconds": seconds, "notes": notes,
            "text": f"{duration(seconds)} at {basis} (critical path {waves} calls, "
                    f"concurrency {at_once}" + (f"; {runs_at_once} run(s) at once of {runs}"
                                                 f" per configuration" if runs > 1 else "")
                    + ")"}


def concurrency_notes(configs: Sequence[Resolved], seat_paces: Sequence[Pace]) -> list[str]:
    """A note per registered endpoint that serves fewer calls at once than a configuration
    asks for with its own concurrency (its calls then queue, and a per-call timeout counts
    the queue). With none set, a run keeps to the endpoint's limit and nothing is noted."""
    asked = max([c.policy.concurrency or 0 for c in configs] or [0])
    out = []
    for endpoint in {p.endpoint.name: p.endpoint for p in seat_paces
                     if p.endpoint is not None}.values():
        limit = endpoint.concurrency
        if limit is not None and limit < asked:
            out.append(f"endpoint {endpoint.name} serves {limit} call(s) at a time and a run "
                       f"asks for up to {asked} at once: calls queue for it, and a per-call "
                       f"timeout counts the wait (set concurrency to {limit})")
    return out


def duration(seconds: float) -> str:
    """`about N min` (`about N s` under a minute, `under 1 s` for less)."""
    if seconds < 1:
        return "under 1 s"
    if seconds < 60:
        return f"about {round(seconds)} s"
    return f"about {seconds / 60:.0f} min" if seconds >= 600 else \
        f"about {seconds / 60:.1f} min"
