"""One shape for a run's configuration, from the form, the CLI, a spec or the library to the
store and back to Re-run, and one frozen type for the options every run takes.

`RunConfig` is what is stored on a run (`runs.config`) and in the library, exactly as
`model_dump(mode="json")` writes it; `RunConfig.parse` reads any user-supplied mapping (YAML,
a form, an experiment spec, a stored run) and refuses what it cannot be, naming the key and
the keys allowed. Seats are grouped by slot, always as a list: a single slot holds one seat,
an optional slot that is absent is not seated, and a slot that is absent otherwise takes the
protocol's defaults.

`RunOptions` carries what every `run_*` accepts besides its seats and its own options (the
store, the listener, the run's label, tags and expected answer, call policy, the stop flag,
the endpoint registry ...). `run_*` functions take them as keyword arguments (`RunKwargs`)
and check them once, before any call.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, SerializationInfo, model_serializer

from engine.checks import check_run_options, require_order_seed, require_temperature
from engine.llm.policy import FIELDS as POLICY_FIELDS
from engine.llm.policy import CallPolicy, PolicyKwargs
from engine.models import ConfigError, Turn, known_keys
from engine.text import NAME_MAX

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry
    from engine.store import Store

CONFIG_KEYS = ("protocol", "label", "model", "base_url", "seats", "options", "prompts",
               *POLICY_FIELDS, "order_seed", "adversary")
PLANTED = "planted"  # an adversary's answer drawn from the question's set (DESIGN 2.13)
SEAT_KEYS = ("name", "model", "persona", "persona_name", "role", "temperature", "icon",
             "traits")
_TEXT_SEAT_KEYS = ("name", "model", "persona", "persona_name", "role", "icon")


class SeatSpec(BaseModel):
    """A seat as configured and stored: its name, model spec (never a key), persona prompt
    (and the library persona it came from), role, temperature and icon."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""
    model: str = ""  # a model spec; "" takes the configuration's default model
    persona: str = ""
    persona_name: str = ""
    role: str = ""
    temperature: float | None = None
    icon: str = ""
    # what the simulated model reads of the seat's persona and role: their declared traits
    # (`engine.simulated.TRAITS`), copied in as the persona's prompt is
    traits: dict[str, float] = Field(default_factory=dict)

    @classmethod
    def parse(cls, entry: Any, slot: str) -> SeatSpec:
        """A seat from a mapping or a bare model spec; a `ConfigError` names what is wrong."""
        if isinstance(entry, SeatSpec):
            return entry
        if entry is not None and not isinstance(entry, (str, Mapping)):
            raise ConfigError(f"seat {slot}: a seat is a mapping or a model spec, got "
                              f"{type(entry).__name__}", "input")
        values = {"model": entry} if isinstance(entry, str) else dict(entry or {})
        known_keys(values, SEAT_KEYS, f"seat {slot}")
        values = {key: value for key, value in values.items() if value is not None}
        for key in _TEXT_SEAT_KEYS:
            if key in values and not isinstance(values[key], str):
                raise ConfigError(f"seat {slot}: {key} must be text, got "
                                  f"{type(values[key]).__name__}", "input")
        if "temperature" in values:
            require_temperature(values["temperature"], f"seat {slot}: temperature")
        if "traits" in values:
            values["traits"] = check_traits(values["traits"], f"seat {slot}")
        return cls(**values)

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any, info: SerializationInfo) -> dict[str, Any]:
        """Traits only when declared: a seat without them is stored as it always was."""
        out: dict[str, Any] = handler(self)
        if not out.get("traits"):
            out.pop("traits", None)
        return out


def check_adversary(value: Any) -> dict[str, Any]:
    """A configuration's `adversary` (DESIGN 2.13): `{seat: NAME, answer: planted|TEXT}`,
    with `placebo: true` for its control (the same seat given a persona line of the same
    length that pushes nothing); a `ConfigError` names what is wrong. Whether the seat is
    one of the configuration's is checked with its seats."""
    if not isinstance(value, Mapping):
        raise ConfigError("adversary must be a mapping {seat: NAME, answer: planted or the "
                          "answer's text}", "input")
    known_keys(value, ("seat", "answer", "placebo"), "adversary")
    seat, answer = value.get("seat"), value.get("answer", PLANTED)
    if not isinstance(seat, str) or not seat.strip() or len(seat) > NAME_MAX:
        raise ConfigError("adversary needs the name of its seat (seat: NAME)", "input")
    if not isinstance(answer, (str, int, float)) or isinstance(answer, bool) or \
            not str(answer).strip() or len(str(answer)) > 500 or "\x00" in str(answer):
        raise ConfigError("adversary's answer is planted (drawn from the question's set) or "
                          "the wrong answer's text (at most 500 characters)", "input")
    placebo = value.get("placebo", False)
    if not isinstance(placebo, bool):
        raise ConfigError(f"adversary's placebo is true or false, got {placebo!r}", "input")
    text = str(answer).strip()
    return {"seat": seat.strip(), "answer": PLANTED if text.lower() == PLANTED else text,
            **({"placebo": True} if placebo else {})}


def check_traits(traits: Any, where: str) -> dict[str, float]:
    """Declared simulated traits (stubbornness, accuracy, conformity), each a rate in 0..1;
    a `ConfigError` names what is wrong. Blank values are left out."""
    from engine.simulated import TRAITS
    if not isinstance(traits, Mapping):
        raise ConfigError(f"{where}: traits must map {', '.join(TRAITS)} to rates in 0..1",
                          "input")
    out: dict[str, float] = {}
    for name, value in traits.items():
        if name not in TRAITS:
            raise ConfigError(f"{where} has no trait {name!r}; traits are "
                              f"{', '.join(TRAITS)}", "input")
        if value is None or value == "":
            continue
        try:
            rate = float(value) if isinstance(value, (int, float, str)) and \
                not isinstance(value, bool) else math.nan
        except ValueError:
            rate = math.nan
        if not 0 <= rate <= 1:
            raise ConfigError(f"{where}: {name} must be a rate in 0..1, got {value!r}",
                              "input")
        out[str(name)] = rate
    return out


class RunConfig(CallPolicy):
    """A run's configuration: protocol, seats by slot, options, prompt overrides, label, the
    default model (and base URL) for seats that name none, and its call policy (the fields
    of `CallPolicy`, flat, as a user writes them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    protocol: str
    seats: dict[str, list[SeatSpec]] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)
    prompts: dict[str, str] = Field(default_factory=dict)
    label: str | None = None
    model: str = "simulated"
    base_url: str | None = None
    # the seed of the order seats are presented in (DESIGN 2.10); None: the configured order
    order_seed: int | None = None
    # DESIGN 2.13: {seat, answer, placebo}: the seat told to win the others over to a planted
    # wrong answer (`planted`: drawn from the question's set), or with `placebo` its control
    adversary: dict[str, Any] | None = None

    @classmethod
    def parse(cls, data: Any) -> RunConfig:
        """A configuration from any mapping (YAML, a form, a spec, a stored run); unknown
        keys and values that cannot be right are a `ConfigError` naming them."""
        if isinstance(data, RunConfig):
            return data
        if not isinstance(data, Mapping):
            raise ConfigError("a configuration must be a mapping", "input")
        known_keys(data, CONFIG_KEYS, "a configuration")
        protocol = data.get("protocol")
        if not isinstance(protocol, str) or not protocol.strip():
            raise ConfigError("a configuration needs a protocol", "input")
        model, base_url = data.get("model") or "simulated", data.get("base_url")
        if not isinstance(model, str) or (base_url is not None and
                                          not isinstance(base_url, str)):
            raise ConfigError("a configuration's model and base_url must be text", "input")
        seats = data.get("seats") or {}
        if not isinstance(seats, Mapping):
            raise ConfigError("configuration seats must map slot names to seats", "input")
        grouped = {str(slot): [SeatSpec.parse(e, str(slot)) for e in
                               (given if isinstance(given, list) else [given])]
                   for slot, given in seats.items() if given is not None}
        options = data.get("options") or {}
        prompts = data.get("prompts") or {}
        if not isinstance(options, Mapping):
            raise ConfigError("configuration options must be a mapping of option names to "
                              "values", "input")
        if not isinstance(prompts, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in prompts.items()):
            raise ConfigError("configuration prompts must map template names to text",
                              "input")
        label = data.get("label")
        if label is not None and not isinstance(label, str):
            raise ConfigError("a configuration's label must be text", "input")
        policy: dict[str, Any] = CallPolicy.read(data).given()
        if data.get("order_seed") is not None:
            policy["order_seed"] = require_order_seed(data["order_seed"])
        if data.get("adversary") is not None:
            policy["adversary"] = check_adversary(data["adversary"])
        return cls(protocol=protocol.strip(), seats=grouped, options=dict(options),
                   prompts=dict(prompts), label=(label or "").strip() or None, model=model,
                   base_url=base_url or None, **policy)

    def stored(self) -> dict[str, Any]:
        """The configuration as the store and the library keep it (plain JSON; the call
        policy and the order seed only when they are set)."""
        return self.model_dump(mode="json", exclude={
            key for key in (*POLICY_FIELDS, "order_seed", "adversary")
            if getattr(self, key) is None})

    @property
    def policy(self) -> CallPolicy:
        """The configuration's call policy as its own record."""
        return CallPolicy(**{name: getattr(self, name) for name in POLICY_FIELDS})


class RunKwargs(PolicyKwargs, total=False):
    """The keyword arguments every `run_*` / `arun_*` takes besides its seats and options
    (the call policy's among them)."""

    store: Store
    on_event: Callable[[Turn], Any] | None
    prompts: Mapping[str, str] | None
    label: str | None
    tags: Any
    expected: str | None
    stop_event: threading.Event | None
    config: RunConfig | Mapping[str, Any] | None
    experiment_id: str | None
    started_by: str
    endpoints: EndpointRegistry
    run_id: str | None
    batched: bool
    order_seed: int | None
    resume_from: Resume | None
    adversary: Mapping[str, Any] | None
    donor: Donor | None
    source_run: str | None


@dataclass(frozen=True)
class Donor:
    """The placebo arm's donor (DESIGN 2.13): a stored run of the same configuration on
    another question of the set. Every message from another agent that one of this run's
    prompts would carry is replaced by what that agent said in the donor run in the same
    phase and round (`messages`, by (seat, phase, round); a message the donor lacks, a failed
    call, is carried as nothing said), so the agents read as much peer reasoning, about the
    wrong problem. The run's metrics record `donor_question` and `donor_run`."""

    question: str
    run_id: str
    messages: Mapping[tuple[str, str, int], str] = field(default_factory=dict)


@dataclass(frozen=True)
class Resume:
    """Where a fork of a stored run starts: `turns`, the stored run's turns before
    round `round` (a reply possibly edited), are replayed in place of their calls, in the
    order the protocol asks for them (by seat, phase and round): no model sees them again;
    every later call is made. `run_id` names the run forked; the fork's metrics say so
    (`forked_from`, `fork_round`, `kept_turns`)."""

    run_id: str
    round: int
    turns: tuple[Turn, ...] = ()


@dataclass(frozen=True)
class RunOptions:
    """The common options of one run, checked once before any call.

    `run_id` names a run row the caller has already opened (the background task runner does,
    so it knows the id before the run starts); `batched` asks the store to group-commit the
    run's turns (experiments, with dozens of runs in flight); `started_by` is who started
    the run, recorded on the row the run opens (`engine.access`; "" when not recorded).
    """

    store: Store | None = None
    on_event: Callable[[Turn], Any] | None = None
    prompts: Mapping[str, str] = field(default_factory=dict)
    label: str | None = None
    tags: tuple[str, ...] = ()
    expected: str | None = None
    policy: CallPolicy = field(default_factory=CallPolicy)
    stop_event: threading.Event | None = None
    config: RunConfig | None = None
    experiment_id: str | None = None
    started_by: str = ""
    endpoints: EndpointRegistry | None = None
    run_id: str | None = None
    batched: bool = False
    order_seed: int | None = None  # DESIGN 2.10: None keeps the configured order
    resume_from: Resume | None = None  # a fork: the kept turns replayed, not called
    adversary: Mapping[str, Any] | None = None  # DESIGN 2.13, its answer drawn: seat, answer
    donor: Donor | None = None  # a placebo run: peers' messages come from this run
    source_run: str | None = None  # an answers-only judge: the run whose answers it judged

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any], protocol: str) -> RunOptions:
        """Options from a runner's keyword arguments; anything else is a `ConfigError`."""
        names = set(RunKwargs.__annotations__)
        unknown = sorted(k for k in kwargs if k not in names)
        if unknown:
            raise ConfigError(f"run_{protocol.replace('-', '_')} has no option "
                              f"{unknown[0]!r}", "input")
        policy = CallPolicy.read(kwargs)
        check_run_options(kwargs)
        values = {k: v for k, v in kwargs.items() if k not in POLICY_FIELDS}
        values["policy"] = policy
        values["tags"] = tuple(values.get("tags") or ())
        values["prompts"] = dict(values.get("prompts") or {})
        if values.get("config") is not None:
            values["config"] = RunConfig.parse(values["config"])
        if values.get("donor") is not None and not isinstance(values["donor"], Donor):
            raise ConfigError("donor must be a Donor (a stored run on another question)",
                              "input")
        return cls(**values)
