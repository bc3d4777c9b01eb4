"""Values shared by every protocol: seats, turns, the error users fix, and the result base."""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, computed_field

from engine.errors import ParleyError

ERROR_CODES = ("input", "limit", "no_model")


class ConfigError(ParleyError, ValueError):
    """Bad arguments, raised before any model call; the message says what to change."""

    def __init__(self, message: str, code: str = "input"):
        if code not in ERROR_CODES:
            raise ValueError(f"ConfigError code must be one of {ERROR_CODES}, got {code!r}")
        super().__init__(message)
        self.code = code


def known_keys(given: Iterable[Any], allowed: Sequence[str], what: str,
               noun: str = "key") -> None:
    """Refuse a mapping whose keys (`given`) are not all `allowed`: a `ConfigError` naming
    the first unknown one (in sorted order) and every allowed one."""
    unknown = sorted(str(k) for k in given if k not in allowed)
    if unknown:
        raise ConfigError(f"{what} has no {noun} {unknown[0]!r}; {noun}s are "
                          f"{', '.join(allowed)}", "input")


class RunStopped(ParleyError):
    """The run was asked to stop (the Stop button, or an experiment being halted)."""


@dataclass
class LimitState:
    """One endpoint's buckets as of `stamp` (None: full), its cool-down's end, and (shared
    state only) its calls in flight; times in seconds on one clock, `now` the present.
    `lease` (id, seconds) asks the shared store for a lease in the same transaction (the
    arithmetic on it is `engine.llm.limits`'; the store keeps it on PostgreSQL)."""

    now: float
    requests: float | None = None
    tokens: float | None = None
    stamp: float = 0.0
    cool_until: float = 0.0
    in_flight: int = 0
    lease: tuple[str, float] | None = None


class Seat(BaseModel):
    """Who sits where: a name, a model (chat model or spec string), a persona and a role."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    model: Any = "simulated"
    persona: str = ""
    role: str = ""
    temperature: float | None = None
    icon: str = ""

    def __init__(self, name: str = "", model: Any = "simulated", persona: str = "",
                 role: str = "", temperature: float | None = None, **kw: Any):
        super().__init__(name=name, model=model, persona=persona, role=role,
                         temperature=temperature, **kw)

    @property
    def spec(self) -> str:
        """The model as a spec string, for the record (never includes keys)."""
        return model_spec(self.model)


def model_spec(model: Any) -> str:
    """A printable, secret-free description of a model or spec string."""
    if model is None:
        return ""
    if isinstance(model, str):
        return model.split("?")[0] if "key=" in model.lower() else model
    spec = getattr(model, "parley_spec", None)
    if spec:
        return str(spec)
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    class_name = type(model).__name__
    return f"{class_name}:{name}" if isinstance(name, str) and name else class_name


SIMULATED = "simulated"  # the model spec of the offline simulated model (DESIGN 3)


def is_simulated(spec: str) -> bool:
    """Whether a model spec names the offline simulated model: its provider part (before any
    `:` and `?`, in any case and spacing) is `simulated`, as `get_model` reads it. The one
    rule every layer asks: a run's flag, its seats' cost, the preflight, the reports."""
    return spec.strip().partition("?")[0].partition(":")[0].strip().lower() == SIMULATED


def now() -> datetime:
    return datetime.now(UTC)


class Turn(BaseModel):
    """One model call as recorded: what was sent, what came back, and how it went."""

    index: int
    phase: str
    round: int = 0
    seat: str
    role: str = ""
    model: str = ""
    messages: list[dict[str, str]] = Field(default_factory=list)
    reply: str = ""
    parsed: dict[str, Any] = Field(default_factory=dict)
    status: Literal["ok", "degraded"] = "ok"
    error: str = ""
    # What a degraded turn's failure is counted as (`engine.errors`: set where it was caught)
    failure: str = ""
    warnings: list[str] = Field(default_factory=list)
    latency: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    attempts: int = 1
    simulated: bool = False
    started_at: datetime = Field(default_factory=now)
    finished_at: datetime = Field(default_factory=now)
    # A JSON call's path: "constrained", "json mode" or "prompted" ("" for free text).
    output_mode: str = ""
    # US dollars (engine.llm.prices): 0 for the simulated model, None when unpriced;
    # `usage_estimated` when the provider reported no usage and the tokens are an estimate
    cost_usd: float | None = None
    usage_estimated: bool = False
    # The size in bytes of what the model sent when `reply` is cut from it (None: stored
    # whole); a warning says where and why (`engine.llm.sizes`)
    reply_bytes: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def total_cost(turns: Iterable[Any]) -> float | None:
    """A run's cost in US dollars: the sum of its turns' `cost_usd`, None (unknown) when a
    turn that succeeded, or that consumed tokens, is unpriced. A failed call that consumed
    nothing adds 0 whether priced or not. Turns are `Turn`s, rows or mappings with the same
    fields."""
    total = 0.0
    for turn in turns:
        field = turn.get if isinstance(turn, dict) else functools.partial(getattr, turn)
        cost = field("cost_usd", None)
        if cost is None or cost != cost:  # None, or NaN from a data frame: unknown
            if field("status", "ok") == "ok" or field("tokens_in", 0) or field("tokens_out", 0):
                return None
            continue
        total += float(cost)
    return total


class RunResult(BaseModel):
    """Common base of every protocol's result: the turn log and run-level facts."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # Whether the protocol's runs give a short final answer (`final_answer`) to score: a run
    # of one asked a question with an expected answer that gave none is wrong and
    # `unanswered` (DESIGN 4); a protocol that gives none (a duel) is never scored.
    gives_answer: ClassVar[bool] = False

    protocol: str = ""
    run_id: str | None = None
    turns: list[Turn] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    expected: str | None = None
    correct: bool | None = None
    unanswered: bool = False  # given an expected answer, it gave none (`correct` is False)
    duration: float = 0.0
    # the seat names in the order they were presented to one another (DESIGN 2.10)
    order: list[str] = Field(default_factory=list)
    # What the protocol that finished the run makes of it, handed to `Store.save` with the
    # result: a function giving (metrics, error, what it lost). Set by the run loop
    # (`protocols.base.execute`), never stored or exported.
    _assessment: Callable[[], tuple[dict[str, Any], str, list[str]]] | None = \
        PrivateAttr(default=None)

    def assessment(self) -> tuple[dict[str, Any], str, list[str]] | None:
        """(metrics, error, lost) from the protocol that finished the run; None for a
        result no run finished (built by hand, or read back from the store)."""
        return None if self._assessment is None else self._assessment()

    @computed_field  # type: ignore[prop-decorator]  # mypy types no decorator over @property
    @property
    def cost_usd(self) -> float | None:
        """The run's cost in US dollars (`total_cost` of its turns; None: unknown)."""
        return total_cost(self.turns)

    def final_answer(self) -> str | None:
        """The run's final short answer, scored against `expected`; None when the protocol
        gives none (or produced none)."""
        return None

    @property
    def question_text(self) -> str:
        for field in ("question", "topic", "task"):
            value = getattr(self, field, None)
            if isinstance(value, str):
                return value
        return ""


class Signals(BaseModel):
    """What a run's result says in protocol-independent terms, for experiments and Insights
    (None: the protocol has no such signal, or the run produced none), plus the protocol's own
    numbers in `extra` for its Insights section. Stored flat on the run row (`metrics`)."""

    answer: str | None = None  # the final answer (a tally winner, a judge's ANSWER ...)
    first_answer: str | None = None  # round one's plurality, where there is a round one
    consensus: float | None = None  # the final winner's share of the ballots
    level: str | None = None  # a confidence level (high/medium/low) or an agreement level
    judge_confidence: float | None = None  # a judge's own stated confidence
    seats: int | None = None  # agents whose minds could change
    mind_changes: int | None = None  # of them, how many changed (measured, not claimed)
    persuaded: int | None = None  # wrong -> right, where an expected answer is known
    misled: int | None = None  # right -> wrong
    # each round's plurality answer ("" when every agent abstained), where there are rounds
    round_answers: list[str] | None = None
    # conformity over consecutive rounds (`engine.analysis.conformity.Conformity`): each count
    # with its chances, right/wrong ones only where an expected answer is known
    right_before: int | None = None
    right_to_wrong: int | None = None
    wrong_before: int | None = None
    wrong_to_right: int | None = None
    off_majority: int | None = None
    adopted_majority: int | None = None
    had_correct: bool | None = None
    discarded_correct: bool | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    def common(self) -> dict[str, Any]:
        """The protocol-independent signals as a flat mapping."""
        return self.model_dump(exclude={"extra"})


class Task(BaseModel):
    """What a protocol asks a seat, as structure rather than wording.

    Protocols pass one with each call; `RunContext` hands it only to the simulated model
    (which reads nothing else of the prompt), after filling in the seat, its role, the round,
    the run's `expected` answer and the run's variant (an experiment's question and repeat).
    `kind` is what is asked: answer (a cold answer), revise (answer again after a critique),
    critique (a verdict on each answer in `others`), judge (rule on `others` or on `sides`),
    argue (one side's argument), draft (a producer's text; `own` is its previous draft),
    review (approve or not the draft in `others`), statement (a duel's turn), turn (a
    roundtable turn), rank (a council member ranks the labelled answers in `others`) or chair
    (a council's chairman, `others` best first). The reply format is `keys` (a JSON
    object), `sections` (labelled lines) and/or `stance_line` (a closing `STANCE:` line).
    """

    kind: str
    keys: tuple[str, ...] = ()
    sections: tuple[str, ...] = ()
    stance_line: bool = False
    own: str | None = None  # the seat's own earlier answer (or draft), None when it has none
    others: dict[str, str] = Field(default_factory=dict)  # what others said, by seat name
    verdict: str = ""  # the critique's verdict on the seat's own answer
    side: str = ""  # the side the seat argues (for / against, a / b)
    sides: dict[str, str] = Field(default_factory=dict)  # side -> seat name, for a judge
    seat: str = ""
    role: str = ""
    round: int = 0
    expected: str | None = None
    variant: str = ""
    answers: tuple[str, ...] = ()  # the answers the question's form allows (yes and no)
    adversary: str = ""  # the planted seat's name, when a run has one (not its control)
    planted: str = ""  # the wrong answer the planted seat is told to win the others over to
