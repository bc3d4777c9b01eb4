"""The protocol registry: one table that the CLI, the app and experiments loop over."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from engine.checks import require_name, unique_names
from engine.config import RunConfig, SeatSpec
from engine.llm.endpoints import with_base_url
from engine.llm.policy import CallPolicy
from engine.models import ConfigError, RunResult, Seat, is_simulated
from engine.protocols import (
    council,
    debate,
    duel,
    panel,
    peer_review,
    roundtable,
    single,
    society,
    vote,
)
from engine.protocols.adversary import check_seat, with_templates
from engine.protocols.base import Option, ProtocolSpec, Slot, describe_config, run_sync, seated
from engine.protocols.checks import check_options, require_seat
from engine.protocols.templates import Template, check_prompts
from engine.simulated import with_traits

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry

REGISTRY: dict[str, ProtocolSpec[Any]] = {
    spec.name: spec for spec in (
        debate.SPEC,
        peer_review.SPEC,
        roundtable.SPEC,
        duel.SPEC,
        panel.SPEC,
        vote.SPEC,
        society.SPEC,
        single.SPEC,
        council.SPEC,
    )
}


def get_protocol(name: str) -> ProtocolSpec[Any]:
    """The registry entry for `name`, or a `ConfigError` listing the protocols."""
    key = (name if isinstance(name, str) else "").strip().lower().replace("_", "-")
    if key not in REGISTRY:
        raise ConfigError(f"unknown protocol {name!r}; choose one of {', '.join(REGISTRY)}",
                          "input")
    return REGISTRY[key]


def stored_rounds(run: Mapping[str, Any]) -> list[dict[str, str | None]] | None:
    """A stored run's (a `Store.get` dict's) answers by round (DESIGN 2.12): one mapping per
    round from agent to its answer (None abstains); None when its protocol has no rounds of
    answers or its result is missing or unreadable."""
    spec = REGISTRY.get(str(run.get("protocol", "")))
    if spec is None or spec.answers_by_round is None:
        return None
    result = spec.read_result(run.get("result"))
    if result is None:
        return None
    try:  # a stored result is data: one that trips the hook has no rounds to show
        return spec.answers_by_round(result)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        return None


def prompt_templates(protocol: str) -> dict[str, dict[str, Any]]:
    """A protocol's default prompt templates and the placeholders each may use."""
    spec = get_protocol(protocol)
    return {name: {"template": t.text, "placeholders": list(t.placeholders), "help": t.help}
            for name, t in with_templates(spec.templates).items()}


def seats_from_config(spec: ProtocolSpec[Any], config: RunConfig | Mapping[str, Any]
                      ) -> dict[str, Any]:
    """Keyword arguments for `spec.runner` from a configuration: its seats by slot and its
    options.

    A slot the configuration leaves out takes the slot's defaults (an optional slot stays
    empty); a seat without a model takes the configuration's `model` (default `simulated`);
    a simulated seat's declared traits (its persona's and role's) set its world's parameters
    (`engine.simulated.with_traits`); a configuration-wide `base_url` is added to every
    `openai:` seat that names neither its own `?base_url=` nor an `?endpoint=` (the seat's
    own wins). Models stay spec strings, so they resolve under the run's endpoint registry;
    unknown keys, slots, options and values that cannot be right are refused here, before
    any call.
    """
    config = RunConfig.parse(config)
    unknown = sorted(set(config.seats) - {slot.name for slot in spec.slots})
    if unknown:
        raise ConfigError(f"{spec.name} has no seat {unknown[0]!r}; seats are "
                          f"{', '.join(s.name for s in spec.slots)}", "input")

    def make(entry: SeatSpec, slot: Slot) -> Seat:
        model = with_traits(entry.model or config.model, entry.traits)
        if config.base_url and model.strip().lower().startswith("openai:"):
            model = with_base_url(model, config.base_url)
        return Seat(entry.name or slot.name, model, entry.persona, entry.role or slot.role,
                    entry.temperature, icon=entry.icon)

    kwargs: dict[str, Any] = {}
    for slot in spec.slots:
        given = config.seats.get(slot.name)
        if given is None:
            given = [] if slot.optional else [SeatSpec.parse(d, slot.name)
                                              for d in slot.defaults]
        seats = [make(entry, slot) for entry in given]
        if slot.many:
            kwargs[slot.name] = seats
        elif len(seats) > 1:
            raise ConfigError(f"{spec.name}'s {slot.name} is one seat, got {len(seats)}",
                              "input")
        else:
            kwargs[slot.name] = seats[0] if seats else (
                None if slot.optional else make(SeatSpec(), slot))
    names = [seat.name for _, seat in seated(kwargs)]  # the slots' seats, in their order
    kwargs.update(check_options(spec, config.options, names))
    check_seat(config.adversary, names)
    return kwargs


@dataclass(frozen=True)
class Resolved:
    """A configuration resolved once, the value the preflight, the runner and the store take:
    its protocol's entry (`spec`), the configuration as given (`given`) and as a run of it is
    stored (`config`: every slot seated, every seat with its effective model spec), the
    runner's seats by slot and its options (`seats`, `options`, checked), its call policy
    and the endpoint registry its seats' models resolve under (None: the environment's)."""

    spec: ProtocolSpec[Any]
    given: RunConfig
    config: RunConfig
    seats: dict[str, Any]
    options: dict[str, Any]
    endpoints: EndpointRegistry | None = None

    @property
    def policy(self) -> CallPolicy:
        """The configuration's call policy (unset fields: the seats' endpoints decide)."""
        return self.given.policy

    @property
    def simulated(self) -> bool:
        """True when the simulated model plays every seat."""
        return all(is_simulated(seat.model) for seats in self.config.seats.values()
                   for seat in seats)

    def estimate(self) -> dict[str, int]:
        """Preflight: the calls a run makes when nothing fails, the calls on its critical
        path (`waves`: how many call latencies it takes), and a token estimate."""
        spec = self.spec
        sizes = {slot.name: len(self.seats[slot.name]) if slot.many
                 else int(self.seats[slot.name] is not None) for slot in spec.slots}
        options = {o.name: self.options.get(o.name, o.default) for o in spec.options}
        calls = spec.estimate_calls(options, sizes)
        return {"calls": calls, "waves": spec.waves(options, sizes), "tokens": calls * 600}

    def stored(self) -> RunConfig:
        """The configuration a run's row keeps when its caller opens the row: `config` with
        every option at its value or default; the label lives on the row."""
        options = {o.name: self.config.options.get(o.name, o.default) for o in self.spec.options}
        return self.config.model_copy(update={"label": None, "options": options})

    def with_policy(self, policy: CallPolicy) -> Resolved:
        """The same resolution under another call policy (its seats are not resolved again)."""
        values = CallPolicy.read(policy.model_dump()).model_dump()
        return replace(self, given=self.given.model_copy(update=values),
                       config=self.config.model_copy(update=values))


def resolve_config(config: RunConfig | Mapping[str, Any] | Resolved,
                   endpoints: EndpointRegistry | None = None) -> Resolved:
    """Resolve a configuration once: every slot seated (defaults filled in), every seat with
    its effective model spec (the default model and base URL applied), the options and
    prompt overrides, its call policy; checked as a run would be, before any call. A
    `Resolved` given comes back as it is (under `endpoints`, when given)."""
    if isinstance(config, Resolved):
        return config if endpoints is None else replace(config, endpoints=endpoints)
    typed = RunConfig.parse(config)
    spec = get_protocol(typed.protocol)
    kwargs = seats_from_config(spec, typed)
    seats = {slot.name: kwargs[slot.name] for slot in spec.slots}
    options = {o.name: kwargs[o.name] for o in spec.options if o.name in kwargs}
    described = describe_config(spec.name, seats, options, typed.prompts)
    named = {slot: [seat.model_copy(update={"persona_name": given[i].persona_name,
                                            "traits": given[i].traits})
                    if i < len(given) and given[i].persona == seat.persona else seat
                    for i, seat in enumerate(entries)]
             for slot, entries in described.seats.items()
             for given in [typed.seats.get(slot, [])]}  # the library persona each played
    stored = described.model_copy(update={
        "seats": named, "label": typed.label, "order_seed": typed.order_seed,
        "adversary": typed.adversary, **typed.policy.model_dump()})
    return Resolved(spec, typed, stored, seats, options, endpoints)


async def arun_config(config: RunConfig | Mapping[str, Any] | Resolved, question: str,
                      **run: Any) -> RunResult:
    """Run a configuration on a question; `run` takes the run options (store, label, tags,
    expected ...). The configuration's label, prompt overrides, call policy, order seed and
    endpoint registry apply unless `run` gives its own. A `Resolved` configuration runs as
    resolved, its seats not resolved again."""
    resolved = resolve_config(config)
    given = resolved.given
    run.setdefault("label", given.label)
    for key, value in {"prompts": given.prompts or None, "adversary": given.adversary or None,
                       **given.policy.given(), "order_seed": given.order_seed,
                       "endpoints": resolved.endpoints}.items():
        if value is not None:
            run.setdefault(key, value)
    run.setdefault("config", resolved.stored())  # what the run's row keeps, resolved once
    result: RunResult = await resolved.spec.runner(question, **resolved.seats,
                                                   **resolved.options, **run)
    return result


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
        listed = [one for name, one in seated(resolved.seats) if name == slot.name]
        for one in listed:  # an unknown spec or a missing key fails here, before a run
            require_seat(one, slot.name, endpoints)
        if slot.many:
            unique_names(listed, slot.name)
    return resolved


def estimate(config: RunConfig | Mapping[str, Any] | Resolved) -> dict[str, int]:
    """Preflight: the calls a configuration makes when nothing fails, the calls on its critical
    path (`waves`: how many call latencies it takes), and a token estimate
    (`Resolved.estimate`)."""
    return resolve_config(config).estimate()


__all__ = ["resolve_config", "Resolved", "arun_config", "estimate",
           "seats_from_config", "stored_rounds", "check_options", "check_config",
           "REGISTRY", "ProtocolSpec", "Slot", "Option", "Template", "get_protocol",
           "prompt_templates", "run_sync"]
