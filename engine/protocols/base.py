"""What every protocol shares: its registry entry and the run lifecycle.

A protocol module defines its templates, validates (raising `ConfigError` before any call),
runs its phases through a `RunContext`, and returns a typed result whose `.turns` is the common
log. Its `ProtocolSpec` says everything the rest of Parley needs to know about it: seats,
options, prompts, the cost preflight, and how its result reads as an outcome line, as signals
(what experiments and Insights compare), as view blocks and as an Insights section. Code
outside `engine/protocols/` loops over the registry and never names a protocol.

`execute` wraps a protocol's body in the store lifecycle: a run row is opened as `running`
(unless the caller opened it), turns are written as they complete, and the run ends
`completed`, `failed` or `interrupted`. A run in which no model call succeeded is `failed`
(its error counts the failures by kind); a completed run that lost a decisive call or most of
its turns is flagged degraded with what it lost (`ProtocolSpec.losses`).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import wraps
from typing import TYPE_CHECKING, Any, ClassVar, Generic, ParamSpec, TypeVar

from engine.analysis.answers import answer_line, answers_match, hedge
from engine.analysis.rounds_dynamics import votes
from engine.config import PLANTED, RunConfig, RunOptions, SeatSpec
from engine.errors import UNEXPLAINED, counted
from engine.llm import otel
from engine.llm.calls import RunContext
from engine.llm.endpoints import registry_or_environment
from engine.llm.lines import Line, line_format
from engine.llm.runmodels import open_run
from engine.llm.transport import releasing
from engine.models import ConfigError, RunResult, RunStopped, Seat, Signals, Turn, now, total_cost
from engine.protocols import adversary
from engine.protocols.roles import role_lines, set_roles, stored_library
from engine.protocols.templates import Template, check_prompts, echo_phrases
from engine.simulated.world import answers_of
from engine.store import StoreWriteError

if TYPE_CHECKING:
    from engine.store import Store

INTERRUPTED = "interrupted: the process was stopped (Ctrl-C or SIGTERM)"
R = TypeVar("R", bound=RunResult)


# A closing ANSWER line (`closing_answer`): its ask, and its format for a server's grammar
ENDING = ("finish with one line that starts with ANSWER: and gives the short final answer "
          "(a number, a word or a short phrase).")
ANSWER_LINE = line_format("answer", Line("ANSWER", "short"), lead=True)
NO_POSITION = "(no answer stated)"  # an agent's final position that gives no answer
POSITION_CHARS = 300  # of a final position an answers-only judge reads


@dataclass(frozen=True)
class Slot:
    """A place at the table: one seat (`many=False`) or a list of seats."""

    name: str
    many: bool = False
    minimum: int = 1
    maximum: int = 1
    optional: bool = False
    defaults: tuple[dict[str, str], ...] = ()
    help: str = ""
    role: str = ""  # the role a seat here plays when its configuration names none
    # True when the protocol's own templates say this slot's roles (a roundtable agent's
    # system prompt); otherwise a seat whose role is set gains a `Your role: ...` line
    role_in_template: bool = False


@dataclass(frozen=True)
class Option:
    """A protocol option. `choices`, when given, are its only values (a page offers them as a
    select, and a configuration with another value is refused before any call); with
    `or_seat` a seat's name is a value too."""

    name: str
    default: Any
    minimum: int | None = None
    maximum: int | None = None
    help: str = ""
    choices: tuple[Any, ...] = ()
    or_seat: bool = False


@dataclass(frozen=True)
class ProtocolSpec(Generic[R]):
    """One row of the registry that the CLI, the app, experiments and reports loop over.

    The hooks read the protocol's own typed result: `summary` (the CLI's lines), `outcome`
    (a few words for the runs table), `signals` (the protocol-independent numbers experiments
    and Insights compare, plus the protocol's own), `view` (the run detail's blocks),
    `insights` (its section of the Insights page, from the runs' stored signals) and `lost`
    (the decisive calls the run lost, as short phrases: a judge, a synthesis, the last
    reviewer; read from the result and its turns); `answers_by_round` (each round's answers
    by agent, where the protocol has rounds of answers).
    """

    name: str
    title: str
    source: str  # the specification document the protocol follows (a seed's number, "000")
    question_name: str
    runner: Callable[..., Awaitable[R]]
    result_type: type[R]
    slots: tuple[Slot, ...]
    options: tuple[Option, ...]
    templates: Mapping[str, Template]
    estimate_calls: Callable[[Mapping[str, Any], Mapping[str, int]], int]
    summary: Callable[[R], str]
    outcome: Callable[[R], str]
    signals: Callable[[R], Signals]
    view: Callable[[R], list[Any]]
    insights: Callable[[Any], Any] | None = None
    phases: tuple[str, ...] = field(default_factory=tuple)
    rounds_option: str | None = None  # the option the CLI's --rounds sets (None: no rounds)
    color: str = "#607d8b"  # the protocol's colour in charts that put protocols side by side
    # Calls that must wait for one another when nothing fails (the critical path, in calls):
    # a run takes about this many call latencies. None: every call waits for the one before.
    estimate_waves: Callable[[Mapping[str, Any], Mapping[str, int]], int] | None = None
    lost: Callable[[R], list[str]] = lambda result: []
    # DESIGN 2.10: the seats whose position carried the run's outcome (a debate's winner, the
    # seats that voted for the winning answer); None when the run has no such outcome
    carried: Callable[[R], list[str] | None] = lambda result: None
    # DESIGN 2.12: the answers by round, one mapping per round from agent to its answer (None
    # abstains), for `engine.analysis.dynamics`; None for a protocol without rounds of answers
    answers_by_round: Callable[[R], list[dict[str, str | None]]] | None = None
    # The leaderboard's input: the run's pairwise outcomes as (winner seat, loser seat) pairs
    # (a debate's verdict, a council's rankings); None for a protocol that has none
    pairwise: Callable[[R], list[tuple[str, str]]] | None = None
    # seat -> whether it argued the right side, where exactly one side was right (a debate
    # with `expected`); None when no side was, or the protocol has no sides
    right_sides: Callable[[R], dict[str, bool] | None] | None = None
    # DESIGN 2.13: whether the protocol shows agents each other's messages (through
    # `RunContext.peer`), so that a placebo arm of it means something
    shows_peers: bool = False
    # DESIGN 2.13's answers-only judge: the final positions a judge, chairman or synthesiser
    # read in a transcript, by agent (None: the run's answer came from no such reader), and
    # the phase of that reader's call
    final_positions: Callable[[R], dict[str, str] | None] | None = None
    judge_phase: str = ""

    def assess(self, result: R) -> tuple[str, list[str]]:
        """How a run that ended ended: (the error of a run in which no model call succeeded,
        or ""; what a completed run lost, see `losses`)."""
        error = no_call_succeeded(result.turns)
        return error, [] if error else self.losses(result)

    def losses(self, result: R) -> list[str]:
        """What a completed run lost: the protocol's decisive calls (`lost`), and most of its
        turns when more than half of them are degraded (the rule every protocol shares)."""
        out = list(self.lost(result))
        bad = sum(1 for t in result.turns if not t.ok)
        if result.turns and bad * 2 > len(result.turns):
            out.append(f"{bad} of {len(result.turns)} calls")
        return out

    def waves(self, options: Mapping[str, Any], sizes: Mapping[str, int]) -> int:
        """The critical path in calls (see `estimate_waves`)."""
        return (self.estimate_waves or self.estimate_calls)(options, sizes)

    def read_result(self, dump: Mapping[str, Any] | None) -> R | None:
        """A stored result dump as this protocol's typed result; None when it is missing or
        cannot be read (an old or damaged row)."""
        if not dump:
            return None
        try:
            return self.result_type.model_validate(dict(dump))
        except Exception:  # a damaged or foreign dump is shown as unreadable, never a crash
            return None

    def metrics(self, result: R) -> dict[str, Any]:
        """What the store keeps on the run row for reports: the signals, flat; each round's
        answers counted (`engine.analysis.votes`) for the consensus report, where the
        protocol has rounds of answers; the order seats were presented in and the seats that
        carried the outcome for the position report, where the run has an order."""
        signals = self.signals(result)
        out = {**signals.extra, **signals.common(), "outcome": self.outcome(result),
               **output_counts(result.turns)}
        if result.order:
            carried = self.carried(result)
            out |= {"order": list(result.order),
                    "carried": None if carried is None else list(carried)}
        if self.answers_by_round is not None:
            out["round_votes"] = votes(self.answers_by_round(result))
        return out


class AnswerResult(RunResult):
    """A result whose `answer` is the run's final short answer, scored ("" when it gave
    none)."""

    gives_answer: ClassVar[bool] = True
    answer: str = ""

    def final_answer(self) -> str | None:
        """`answer`; None when the run gave none (never invented)."""
        return self.answer or None


def tally_carried(counted: Any) -> list[str] | None:
    """The seats whose ballot is a tally's winner (None when every seat abstained)."""
    if counted is None or counted.winner is None:
        return None
    return [seat for seat, ballot in counted.ballots.items() if ballot == counted.winner]


def warn_hedge(ctx: RunContext, turn: Turn, text: str) -> bool:
    """Whether a reply declares several different answers (DESIGN 4, `analysis.answers.
    hedge`): then its turn carries the warning saying which, and the seat's answer is none
    (every reader of answers already reads a hedge as no answer)."""
    why = ctx.guard(turn, hedge, text) if text else ""
    if why and why not in turn.warnings:
        ctx.update(turn, warnings=[*turn.warnings, why])
    return bool(why)


def closing_answer(ctx: RunContext, turn: Turn, failed: str, reader: str, whole: str
                   ) -> tuple[str, str, list[str]]:
    """(the reply, its last ANSWER line, warnings) of the call whose ANSWER line is the run's
    final answer (a chairman's, a synthesis's): nothing from a failed call, no answer from a
    reply without an ANSWER line or declaring several different ones, never an invented one.
    `failed` and `reader` name the caller in the warnings, `whole` what is left without."""
    left = f"; {whole} has no final answer"
    if not turn.ok:
        return "", "", [f"{failed} failed ({turn.error}){left}"]
    answer = ctx.guard(turn, answer_line, turn.reply) or ""
    if answer:
        return turn.reply, answer, []
    why = ("declared several different answers" if warn_hedge(ctx, turn, turn.reply)
           else "gave no ANSWER line")
    return turn.reply, "", [f"{reader} {why}{left}"]


def output_counts(turns: Sequence[Turn]) -> dict[str, int]:
    """How many JSON calls took each output path (`engine.llm.structured`), for the run's
    metrics; nothing for a run without JSON calls."""
    counts = Counter(t.output_mode for t in turns
                     if t.output_mode in ("constrained", "json mode", "prompted"))
    if not counts:
        return {}
    return {"json_constrained": counts["constrained"], "json_mode": counts["json mode"],
            "json_prompted": counts["prompted"]}


def presentation_order(names: Sequence[str], seed: int | None) -> list[str]:
    """The order seats are presented to one another (DESIGN 2.10): `names` as configured
    when `seed` is None, else a permutation of them drawn from `random.Random(seed)` (the same
    seed gives the same order, in every process)."""
    order = list(names)
    if seed is not None:
        random.Random(seed).shuffle(order)
    return order


S = TypeVar("S", bound=Seat)


def seated(seats: Mapping[str, Any]) -> list[tuple[str, Seat]]:
    """(slot, seat) for every seat of a runner's seats by slot (a slot holds one seat, a list
    of them or None), slot by slot in their order."""
    return [(slot, seat) for slot, value in seats.items()
            for seat in (value if isinstance(value, (list, tuple)) else [value])
            if isinstance(seat, Seat)]


def presented(seats: Sequence[S], seed: int | None) -> tuple[list[str], list[S]]:
    """(the presentation order of `seats` drawn from `seed`, the seats in that order); the
    stored configuration keeps the configured order, so a re-run draws the same one. The
    seats' names are unique (checked with the seats), so the order names each once."""
    order = presentation_order([seat.name for seat in seats], seed)
    return order, sorted(seats, key=lambda seat: order.index(seat.name))


async def execute(spec: ProtocolSpec[Any], question: str,
                  body: Callable[[RunContext], Awaitable[R]],
                  seats: Mapping[str, Seat | list[Seat] | None], options: Mapping[str, Any],
                  run: RunOptions, order: Sequence[str] = ()) -> R:
    """Run `body` under the store lifecycle: open the run row (unless `run.run_id` names one
    the caller opened), record turns as they complete, and end the run with its status
    (the result's `duration`: the seconds `body` took).
    `order` is the presentation order the run used (`presentation_order`), kept on the
    result; the stored configuration says the run's order seed. `spec` is the protocol's own
    registry entry: its templates, slots, metrics and assessment end the run."""
    protocol, templates = spec.name, spec.templates
    prompts = check_prompts(protocol, adversary.with_templates(templates), run.prompts)
    store = run.store
    planted = planted_seat(run, seats, prompts)
    ctx = RunContext(protocol, on_event=run.on_event, prompts=prompts,
                     timeout=run.policy.timeout_per_call, retries=run.policy.retries,
                     concurrency=run.policy.concurrency, stop_event=run.stop_event,
                     endpoints=run.endpoints, expected=run.expected,
                     variant=world_variant(run.tags), store=store, **kept_turns(run),
                     answers=answers_of(question), **planted,
                     phrases=echo_phrases([*(t.text for t in templates.values()),
                                           *prompts.values()]),
                     **seat_roles(spec, seats, store))
    ctx.donor = None if run.donor is None else run.donor.messages
    expected = run.expected
    run_id = run.run_id
    began = now()

    def traced(status: str) -> None:
        _trace(protocol, run_id, ctx.turns, status, began, run)
    if store is not None:
        if run_id is None:
            pinned = {"order_seed": run.order_seed,  # the run's own, over the configuration's
                      **({"adversary": dict(run.adversary)} if run.adversary else {})}
            config = (run.config or describe_config(protocol, seats, options, prompts)
                      ).model_copy(update=pinned)
            run_id = store.start_run(protocol, question, config=config.stored(),
                                     label=run.label, tags=(*run.tags, *(
                                         (adversary.TAG,) if run.adversary else ())),
                                     expected=expected,
                                     experiment_id=run.experiment_id,
                                     started_by=run.started_by)
        ctx.recorder = store.recorder(run_id)
        ctx.run_id = run_id  # a Stop through the store ends a wait for a slot (RunStopped)
    started = time.monotonic()
    try:
        result = await body(ctx)
    except BaseException as exc:  # keep what was recorded: a run never stays `running`
        status, error = _ended(exc)
        if store is not None and run_id is not None:
            store.end_run(run_id, status, error)
        traced(status)
        raise
    result.protocol = protocol
    result.turns = ctx.turns
    result.order = list(order)
    result.run_id = run_id
    result.duration = time.monotonic() - started  # the body's, before the run is stored
    if expected is not None and str(expected).strip():
        score(result, str(expected))
    error = await _finish(spec, store, run_id, result, run, began)
    traced("failed" if error else "completed")
    return result


async def _finish(spec: ProtocolSpec[Any], store: Store | None, run_id: str | None,
                  result: RunResult, run: RunOptions, began: Any) -> str:
    """Store the ended run with the metrics and assessment its protocol (`spec`) makes of it
    (when there is a store), returning once it is written (a batched store writes it with
    other runs' writes: group commit); returns its error ("" when it did not fail)."""
    result._assessment = lambda: (spec.metrics(result), *spec.assess(result))  # for a save
    if store is None or run_id is None:  # the store gives every run it keeps an id
        return no_call_succeeded(result.turns)
    error, lost = spec.assess(result)
    try:
        await store.afinish_run(run_id, result, {**spec.metrics(result), **fork_metrics(run),
                                                 **adversary.metrics(result, run.adversary,
                                                                     _seat_names(result)),
                                                 **donor_metrics(run)},
                                error=error, lost=lost)
    except Exception as exc:  # a bug: the run says so rather than stay `running`
        store.end_run(run_id, "failed", _ended(exc)[1])
        _trace(result.protocol, run_id, result.turns, "failed", began, run)
        raise
    return error


def _ended(exc: BaseException) -> tuple[str, str]:
    """The status and error a run ends with when `exc` stops it: `interrupted` for a Stop
    (`RunStopped`), Ctrl-C, SIGTERM or a cancel, else `failed`; a store write that failed
    says so as it is, anything else (a bug) with its class."""
    if isinstance(exc, RunStopped):
        return "interrupted", str(exc)
    if isinstance(exc, KeyboardInterrupt | asyncio.CancelledError):
        return "interrupted", f"{INTERRUPTED}: {exc}" if str(exc) and isinstance(
            exc, asyncio.CancelledError) else INTERRUPTED
    if isinstance(exc, StoreWriteError):
        return "failed", str(exc)
    return "failed", f"{type(exc).__name__}: {exc}"


def _trace(protocol: str, run_id: str | None, turns: list[Turn], status: str, began: Any,
           run: RunOptions) -> None:
    """The ended run as an OpenTelemetry trace, when an OTLP endpoint is set (`otel`)."""
    if otel.enabled():
        otel.export_run(protocol, run_id, turns, status, started=began, finished=now(),
                        cost_usd=total_cost(turns), label=run.label,
                        experiment_id=run.experiment_id)


def seat_roles(spec: ProtocolSpec[Any], seats: Mapping[str, Seat | list[Seat] | None],
               store: Store | None) -> dict[str, Any]:
    """The run context's arguments for the seats' roles (`engine.protocols.roles`): the
    library's own role descriptions (read only when a seat's role is set) and the
    `Your role: ...` line of each seat whose role is set, where its slot's templates do not
    say the role themselves."""
    slots = {slot.name: slot for slot in spec.slots}
    given = [(seat, slots.get(name)) for name, seat in seated(seats)]
    chosen = set_roles((seat, slot.role if slot else "") for seat, slot in given)
    if not chosen:
        return {}
    library = stored_library(store, [spec])
    lined = [seat for seat, slot in given
             if seat in chosen and not (slot and slot.role_in_template)]
    return {"role_library": library, "role_lines": role_lines(lined, library)}


def score(result: RunResult, expected: str) -> None:
    """Score a run against its expected answer (DESIGN 4): `correct` says whether its final
    answer gives it (`answers_match`); a run of a protocol that gives answers which gave
    none (every seat abstained, its judge or chairman gave no usable answer, or it hedged) is
    wrong and `unanswered`, so that it counts against accuracy instead of leaving it. A
    protocol that gives no answer (a duel) leaves the run unscored."""
    result.expected = expected
    answer = result.final_answer()
    if answer is not None:
        result.correct, result.unanswered = bool(answers_match(answer, expected)), False
    elif result.gives_answer:
        result.correct, result.unanswered = False, True


def _seat_names(result: RunResult) -> list[str]:
    """The seats that took turns in a run, in the order they first did."""
    return list(dict.fromkeys(turn.seat for turn in result.turns))


def planted_seat(run: RunOptions, seats: Mapping[str, Seat | list[Seat] | None],
                 prompts: Mapping[str, str]) -> dict[str, Any]:
    """The run context's arguments for a configuration's adversary (DESIGN 2.13): its seat,
    the line its system prompt gains (`adversary.brief`) and the planted answer the simulated
    model reads (none for the placebo persona, which pushes nothing). A `ConfigError` when
    its seat is not one of the run's, or its answer was never drawn (`planted` outside an
    experiment)."""
    given = run.adversary
    if not given:
        return {}
    adversary.check_seat(given, [seat.name for _, seat in seated(seats)])
    if str(given["answer"]).lower() == PLANTED:
        raise ConfigError("adversary answer: planted is drawn per question from an "
                          "experiment's question set; for a single run give the wrong "
                          "answer's text", "input")
    return {"adversary_seat": given["seat"], "adversary_line": adversary.brief(given, prompts),
            "planted": "" if given.get("placebo") else str(given["answer"])}


def kept_turns(run: RunOptions) -> dict[str, Any]:
    """The run context's arguments for a fork's kept turns (`RunOptions.resume_from`)."""
    resume = run.resume_from
    return {} if resume is None else {"kept": resume.turns, "kept_from": resume.run_id}


def fork_metrics(run: RunOptions) -> dict[str, Any]:
    """A fork's metrics: the run and round it started from and how many turns it kept."""
    resume = run.resume_from
    return {} if resume is None else {"forked_from": resume.run_id, "fork_round": resume.round,
                                      "kept_turns": len(resume.turns)}


def donor_metrics(run: RunOptions) -> dict[str, Any]:
    """A placebo run's metrics: the donor's question and run (`engine.config.Donor`); an
    answers-only judge's: the run it judged (`source_run`)."""
    donor = run.donor
    return ({} if donor is None else {"donor_question": donor.question,
                                      "donor_run": donor.run_id}) | (
        {"source_run": run.source_run} if run.source_run else {})


def no_call_succeeded(turns: list[Turn]) -> str:
    """The error of a run in which no model call succeeded, counting the failures by kind
    (`no model call succeeded (7 calls: 5 timed out, 2 connection errors)`); "" when one
    did (or none was made)."""
    if not turns or any(t.ok for t in turns):
        return ""
    kinds = Counter(turn.failure or UNEXPLAINED for turn in turns)
    listed = ", ".join(counted(kind, n) for kind, n in kinds.most_common())
    calls = "1 call" if len(turns) == 1 else f"{len(turns)} calls"
    return f"no model call succeeded ({calls}: {listed})"


def world_variant(tags: tuple[str, ...]) -> str:
    """An experiment cell's question and repeat (`cell:Q:C:R` -> `Q:R`), which a simulated
    world is keyed on so that repeats differ while configurations compared on one question
    and repeat meet the same world; "" for a run outside an experiment."""
    cell = next((tag for tag in tags if tag.startswith("cell:")), "")
    return ":".join(cell.split(":")[1::2])


def describe_config(protocol: str, seats: Mapping[str, Seat | list[Seat] | None],
                    options: Mapping[str, Any], prompts: Mapping[str, str]) -> RunConfig:
    """The configuration of a run made from seats given directly (Python callers): seats by
    slot with their model specs (never keys), the options that are values, and the prompt
    overrides."""
    grouped = {slot: [SeatSpec(name=s.name, model=s.spec, persona=s.persona, role=s.role,
                               temperature=s.temperature, icon=s.icon)
                      for s in (value if isinstance(value, (list, tuple)) else [value])]
               for slot, value in seats.items() if value is not None}
    return RunConfig(protocol=protocol, seats=grouped,
                     options={k: v for k, v in options.items() if not callable(v)},
                     prompts=dict(prompts))


T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion, also from code that already has an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(releasing(coro))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, releasing(coro)).result()


P = ParamSpec("P")


def synchronous(arun: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The synchronous twin of a protocol's runner `arun_X`, named `run_X` (`run_sync`)."""
    @wraps(arun)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(arun(*args, **kwargs))
    run.__name__ = run.__qualname__ = arun.__name__.removeprefix("a")
    run.__doc__ = f"Synchronous `{arun.__name__}`."
    return run


def split_run_options(kwargs: dict[str, Any], protocol: str) -> RunOptions:
    """The common run options among a runner's keyword arguments, checked before any call;
    anything that is not one is a `ConfigError` naming it. A runner's first step, it opens
    the run's memo of seat models (`engine.llm.runmodels`): each resolved once."""
    open_run()
    options = RunOptions.from_kwargs(kwargs, protocol)
    # one registry for the run's seats when the caller gave none: they share what it learns
    return replace(options, endpoints=registry_or_environment(options.endpoints))
