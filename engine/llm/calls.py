"""Guarded, concurrent model calls, and the run context every protocol records turns through.

A call gets a per-call timeout and retries with exponential backoff on transient errors (rate
limits, connection problems, 5xx, time-outs). What still fails is recorded on the turn, never
raised through a run. Each completed turn goes to the store (if any) and to `on_event`.

An attempt's timeout covers its wait for a slot at the endpoint (`engine.llm.limits`) and the
request: a call the endpoint's rate, or a 429's Retry-After, would hold past it ends at once,
its error saying "rate limited". A reply's token usage is read once and checked
(`engine.llm.prices.read_usage`); an attempt whose request reached the server and got no answer
back is billed its estimated input tokens (`engine.llm.reach`), so a paid call is never a
known $0.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from engine.errors import EMPTY, NOT_AN_API, RATE_LIMITED, TIMED_OUT, UNREADABLE, ParleyError
from engine.llm.failures import failure_of, is_transient, unreachable
from engine.llm.limits import CallGate, RateLimited, retry_after
from engine.llm.lines import LineFormat, LineOutput
from engine.llm.policy import DEFAULT_CONCURRENCY, DEFAULT_RETRIES, DEFAULT_TIMEOUT
from engine.llm.prices import Usage, call_cost, estimate_usage, model_price, read_usage
from engine.llm.reach import ATTEMPT, Attempt, reached
from engine.llm.replies import REASK, extract_json
from engine.llm.runmodels import seat_model
from engine.llm.sizes import ReplyCut, capped_reply
from engine.llm.structured import OutputSchema, StructuredOutput, generate
from engine.models import RunStopped, Seat, Task, Turn, is_simulated, model_spec, now
from engine.redaction import model_secrets, redact
from engine.text import clean_text

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry
    from engine.store import Store
    from engine.store.runs import Recorder

T = TypeVar("T")
STOP_LOOK = 1.0  # seconds between looks at the store for a Stop while a call waits for a slot

class CallAbandoned(ParleyError, TimeoutError):
    """A synchronous model did not answer in time; its thread was left behind to finish."""

    failure = TIMED_OUT


def sync_only(model: Any) -> bool:
    """True for a chat model with no async implementation of its own: langchain-core would
    run its `_generate` on the event loop's default executor, whose threads `asyncio.run`
    waits for at exit, so one hung call would keep the run from ever returning."""
    from langchain_core.language_models.chat_models import BaseChatModel
    return isinstance(model, BaseChatModel) and \
        getattr(type(model), "_agenerate", None) is BaseChatModel._agenerate


async def invoke_on_thread(model: Any, messages: list[BaseMessage],
                           timeout: float | None) -> Any:
    """`model.invoke(messages)` on a fresh daemon thread, awaited for at most `timeout`
    seconds; past it the thread is abandoned (it dies with the process) and `CallAbandoned`
    is raised, so the run goes on and returns."""
    done: concurrent.futures.Future[Any] = concurrent.futures.Future()
    context = contextvars.copy_context()

    # Running, it can no longer be cancelled: a wait that gives up on it leaves its outcome
    # unread (and a closed loop untold: asyncio's `wrap_future` chain checks).
    def work() -> None:
        if not done.set_running_or_notify_cancel():  # given up on before it started
            return
        try:
            done.set_result(context.run(model.invoke, messages))
        except Exception as exc:  # handed to the awaiting coroutine, as ainvoke would raise
            done.set_exception(exc)
        except BaseException as exc:  # noqa: BLE001 - never let a thread's exit go unseen
            done.set_exception(RuntimeError(f"the model's thread ended with "
                                            f"{type(exc).__name__}"))

    threading.Thread(target=work, name="parley-sync-call", daemon=True).start()
    try:
        return await asyncio.wait_for(asyncio.wrap_future(done), timeout)
    except TimeoutError:
        raise CallAbandoned(f"timed out after {timeout:g}s; the call's thread was "
                            "abandoned") from None


NOT_AN_API_ERROR = ("the server answered with something other than an OpenAI-compatible reply (a "
              "web page?): check the endpoint's base URL, which usually ends in /v1")


def describe_error(exc: BaseException) -> str:
    """One line naming the error type and its message."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, TimeoutError) and not text:
        text = "the model did not answer in time"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def parse_error(exc: BaseException) -> str:
    """The error a turn carries when its reply could not be read."""
    return f"the reply could not be read: {describe_error(exc)}"[:500]


def to_messages(messages: Sequence[dict[str, str]]) -> list[BaseMessage]:
    kinds = {"system": SystemMessage, "user": HumanMessage, "human": HumanMessage,
             "assistant": AIMessage, "ai": AIMessage}
    return [kinds[m["role"]](content=m["content"]) for m in messages]


def reply_text(message: Any) -> str:
    content = getattr(message, "content", message)
    if isinstance(content, list):  # content blocks (Anthropic and others)
        parts = [b.get("text", "") if isinstance(b, dict) else str(b) for b in content]
        return "".join(parts)
    return content if isinstance(content, str) else str(content)


@dataclass
class Outcome:
    """What a guarded call's attempts came to: the reply's text (or the last error), how many
    attempts, the usage read from the reply, and the estimated input tokens `lost` billed for
    the attempts that reached the server and got no answer back (`unanswered` of them)."""

    text: str = ""
    error: str = ""
    failure: str = ""  # what the error is counted as (`engine.errors`)
    attempts: int = 0
    usage: Usage = field(default_factory=lambda: Usage(0, 0))
    lost: int = 0
    lost_attempts: int = 0
    simulated: bool = False
    cut: ReplyCut | None = None  # where a reply past its cap was cut (engine.llm.sizes)

    def unanswered(self, tokens: int) -> int:
        """Count one more attempt billed its estimated input `tokens`; returns them."""
        self.lost, self.lost_attempts = self.lost + tokens, self.lost_attempts + 1
        return tokens

    def notes(self) -> list[str]:
        """The warnings the turn carries about its tokens."""
        notes = [self.usage.warning] if self.usage.warning else []
        if self.lost:
            many = self.lost_attempts > 1
            notes.append(f"{self.lost_attempts} attempt{'s' if many else ''} reached the "
                         "server and got no answer back: billed at the estimated input "
                         f"({self.lost:,} tokens)")
        return notes


class RunContext:
    """Per-run state: seats' resolved models, the turn log, the sink, limits and stop flag."""

    def __init__(self, protocol: str, *, on_event: Callable[[Turn], Any] | None = None,
                 recorder: Recorder | None = None,
                 prompts: dict[str, str] | None = None,
                 timeout: float | None = None, retries: int | None = None,
                 concurrency: int | None = None, backoff: float = 0.5,
                 stop_event: threading.Event | None = None,
                 endpoints: EndpointRegistry | None = None,
                 expected: str | None = None, variant: str = "", store: Store | None = None,
                 kept: Sequence[Turn] = (), kept_from: str = "",
                 role_library: Mapping[str, str] | None = None,
                 role_lines: Mapping[str, str] | None = None,
                 answers: Sequence[str] = (), phrases: Iterable[str] = (),
                 adversary_seat: str = "", adversary_line: str = "", planted: str = ""):
        self.protocol = protocol
        self.on_event = on_event
        self.recorder = recorder
        self.prompts = prompts or {}
        # None: the seat's endpoint decides (its registered timeout / retries), else the default
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.concurrency = concurrency or DEFAULT_CONCURRENCY
        self.stop_event = stop_event
        self.endpoints = endpoints  # the EndpointRegistry spec strings resolve under
        self.store = store  # on PostgreSQL, endpoint limits are shared through it
        self.run_id: str | None = None  # the stored run's id (set by `execute`), for a Stop
        self._looked = 0.0  # when the store was last asked whether the run was stopped
        # What a simulated seat's world is made of: the run's expected answer (its truth) and
        # the variant (an experiment's question and repeat, so that repeats differ).
        self.expected = str(expected).strip() if expected is not None and \
            str(expected).strip() else None
        self.variant = variant
        self.answers = tuple(answers)  # what the question's form allows (a yes/no question)
        # The placeholder phrases of the run's prompts (`protocols.templates.echo_phrases`): a
        # stance that echoes one is no position.
        self.phrases = frozenset(phrases)
        # A planted adversary (DESIGN 2.13): its seat, the line its system prompt gains, and
        # the planted answer a simulated world reads ("" for the placebo persona's control).
        self.adversary_seat, self.adversary_line = adversary_seat, adversary_line
        self.planted = planted
        # Roles (`engine.protocols.roles`): the library's own descriptions by folded name,
        # for templates that carry a role, and the `Your role: ...` line a seat's system
        # prompt gains, by seat name (only seats whose role is set have one).
        self.role_library: dict[str, str] = dict(role_library or {})
        self.role_lines: dict[str, str] = dict(role_lines or {})
        self.turns: list[Turn] = []
        # A placebo run's donor messages by (seat, phase, round) (`engine.config.Donor`;
        # None: peers' messages are their own)
        self.donor: Mapping[tuple[str, str, int], str] | None = None
        self.semaphore = asyncio.Semaphore(self.concurrency)  # bound to the run's loop on use
        self._models: dict[int, Any] = {}
        self._next_index = 0
        # a fork's kept turns (`engine.config.Resume`): replayed in place of their calls
        self.kept_from = kept_from
        self._kept: dict[tuple[str, str, int], list[Turn]] = {}
        for turn in kept:
            self._kept.setdefault((turn.seat, turn.phase, turn.round), []).append(turn)

    def peer(self, seat: str, phase: str, round: int, text: str) -> str:
        """What a prompt carries of another agent's message (`seat`'s reply in `phase` and
        `round`, `text`): the message itself, or in a placebo run the donor run's message of
        that seat, phase and round ("" when the donor has none: nothing said)."""
        if self.donor is None:
            return text
        return self.donor.get((seat, phase, round), "")

    def model_for(self, seat: Seat) -> Any:
        key = id(seat.model)
        if key not in self._models:  # the model the seat's check resolved, in a run
            self._models[key] = seat_model(seat.model, seat.temperature, self.endpoints)
        return self._models[key]

    def check_stop(self) -> None:
        if self.stop_event is not None and self.stop_event.is_set():
            raise RunStopped("stopped by the user")

    async def check_stopped(self) -> None:
        """`check_stop`, and a stop through the store (the run ended elsewhere, or deleted),
        looked up at most once every `STOP_LOOK` seconds off the event loop: what a call
        waiting for a slot at its endpoint awaits between looks, so a Stop ends the wait
        (`RunStopped`)."""
        self.check_stop()
        if self.store is None or self.run_id is None or \
                time.monotonic() - self._looked < STOP_LOOK:
            return
        self._looked = time.monotonic()
        try:
            state = await asyncio.to_thread(self.store.run_state, self.run_id)
        except KeyError:
            raise RunStopped("the run was deleted") from None
        except Exception:  # a store that cannot be read just now: asked again next time
            return
        if state.get("status") != "running":
            error = state.get("error") or ""
            raise RunStopped(f"the run was ended elsewhere ({state.get('status')}"
                             f"{': ' + error if error else ''})")

    def task_config(self, seat: Seat, task: Task | None, round: int) -> dict[str, Any] | None:
        """The invoke config that hands `task` to a simulated seat's model (None for any other
        model, or without a task): the seat, role, round, expected answer and variant filled in
        here, never by the protocol's text."""
        if task is None:
            return None
        filled = task.model_copy(update={
            "seat": seat.name, "role": task.role or seat.role, "round": round,
            "expected": self.expected, "variant": self.variant, "answers": self.answers,
            **({"adversary": self.adversary_seat, "planted": self.planted}
               if self.planted else {})})
        return {"metadata": {"parley_task": filled.model_dump()}}

    def with_system(self, seat: Seat, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        """`messages` led by the seat's system prompt (its persona, then its role's line, then
        a planted adversary's brief), unless the protocol wrote a system message of its own
        (which then gains only the brief)."""
        full = list(messages)
        brief = self.adversary_line if seat.name == self.adversary_seat else ""
        system = "\n\n".join(part for part in (seat.persona, self.role_lines.get(seat.name),
                                                brief) if part)
        own = next((i for i, m in enumerate(full) if m["role"] == "system"), None)
        if own is None and system:
            full.insert(0, {"role": "system", "content": system})
        elif own is not None and brief:  # the planted brief reaches every protocol's seat
            full[own] = {**full[own], "content": f"{full[own]['content']}\n\n{brief}"}
        return full

    async def call(self, seat: Seat, messages: list[dict[str, str]], *, phase: str,
                   round: int = 0,
                   parse: Callable[[str], tuple[dict[str, Any], list[str]]] | None = None,
                   task: Task | None = None,
                   output: StructuredOutput | LineOutput | None = None) -> Turn:
        """Make one guarded call for `seat` and record it as a turn (never raises a model error).

        `parse(reply) -> (fields, warnings)` fills `turn.parsed`; a reply that is empty is a
        degraded turn with the error `empty reply`. `task` says what is asked, as structure;
        only a simulated model receives it. `output` (`call_json`'s, `call_lines`'s) asks
        for structured output and says which path the call took.
        """
        self.check_stop()
        kept = self._kept.get((seat.name, phase, round))
        if kept:
            return self._replay(kept.pop(0), parse)
        full = self.with_system(seat, messages)
        own = self.model_for(seat)
        model = own if output is None else output.wrap(own)
        started = now()
        clock = time.perf_counter()
        # A simulated seat is labelled simulated even when its call fails.
        simulated = is_simulated(model_spec(own))
        config = self.task_config(seat, task, round) if simulated else None
        got = await self._attempts(model, full, config, output, simulated)
        # A server may echo the key it was sent ("Incorrect API key provided: sk-..."): the
        # error keeps no key, and a reply none of this seat's configured keys.
        secrets = model_secrets(own)
        error = redact(got.error, secrets)
        text = redact(got.text, secrets, shapes=False)
        tokens_in, tokens_out = got.usage.tokens_in + got.lost, got.usage.tokens_out
        # Numbered as it completes (no await between here and `record`), so the log, the store
        # and `on_event` see one increasing order even when a phase's calls run concurrently.
        index = self._next_index
        self._next_index += 1
        turn = Turn(index=index, phase=phase, round=round, seat=seat.name, role=seat.role,
                    model=model_spec(seat.model), messages=full, reply=text,
                    status="degraded" if error else "ok", error=error, failure=got.failure,
                    latency=time.perf_counter() - clock, tokens_in=tokens_in,
                    tokens_out=tokens_out, attempts=got.attempts, simulated=got.simulated,
                    cost_usd=call_cost(model_price(own), tokens_in, tokens_out,
                                       simulated=got.simulated),
                    usage_estimated=got.usage.estimated or bool(got.lost), started_at=started,
                    finished_at=now(), output_mode=output.mode if output is not None else "")
        if not error:
            self._parse(turn, parse)
        turn.warnings.extend(got.notes())
        if got.text != text:
            turn.warnings.append("the reply held a configured key: it was stored redacted")
        if got.cut is not None:
            turn.reply_bytes, turn.warnings = got.cut.size, [*turn.warnings, got.cut.warning]
        self.record(turn)
        return turn

    async def _attempts(self, model: Any, full: list[dict[str, str]],
                        config: dict[str, Any] | None,
                        output: StructuredOutput | LineOutput | None,
                        simulated: bool) -> Outcome:
        """The call's attempts through its endpoint's gate: the first that gives a reply, or
        the last failure once a failure is not transient or the retries are spent.

        Its timeout and retries are the run's own settings (CLI flags, a spec, the form)
        first, then what the model's registered endpoint sets (`parley_call`, set by
        `get_model` only), then the defaults; the gate holds the endpoint to its limits
        (`engine.llm.limits`: rpm, tpm, concurrency; shared by every process when the store
        is PostgreSQL); the host (`get_model` records it, "" for other models) names the
        server in errors."""
        got = Outcome(simulated=simulated)
        call = getattr(model, "parley_call", None) or {}
        timeout = self.timeout if self.timeout is not None else call.get("timeout", DEFAULT_TIMEOUT)
        retries = self.retries if self.retries is not None else call.get("retries", DEFAULT_RETRIES)
        gate = CallGate(call, self.store, timeout, stop=self.check_stopped)
        host, cap = str(call.get("host") or ""), int(call.get("max_tokens") or 0)
        async with self.semaphore, gate:
            if output is not None:  # the endpoint's grammar probed, its JSON mode waited for
                await output.prepare(gate, timeout)
            for attempt in range(retries + 1):
                got.attempts = attempt + 1
                record, used = Attempt(), 0
                bound = ATTEMPT.set(record)  # what the HTTP client saw (engine.llm.reach)
                try:
                    message = await self._send(model, full, config, gate, timeout)
                    # storable everywhere: a lone surrogate or NUL becomes U+FFFD
                    got.text, got.cut = capped_reply(clean_text(reply_text(message)), message,
                                                     model)
                    got.usage = read_usage(message, full, got.text, cap)
                    used = got.usage.tokens_in + got.usage.tokens_out
                    got.error, got.failure = ("", "") if got.text.strip() else ("empty reply",
                                                                                 EMPTY)
                    break
                except (asyncio.CancelledError, RunStopped):
                    raise
                except Exception as exc:  # a model failure is recorded, never raised
                    gate.refused(exc)
                    # what the error is, decided here, by its class and what the client saw
                    got.failure = failure_of(exc, not_an_api=record.not_an_api)
                    foreign = got.failure == NOT_AN_API  # a reply no client could read
                    got.error = NOT_AN_API_ERROR if foreign else describe_error(exc)
                    if host and (unreachable(exc) or foreign):
                        got.error = f"{got.error} (calling {host})"
                    if not got.simulated and reached(exc, record):  # sent, no answer back
                        used = got.unanswered(estimate_usage(full, "")[0])
                    if not self._retry(got, exc, attempt, retries, timeout):
                        break
                finally:
                    ATTEMPT.reset(bound)
                    gate.release(used)
                # a transient failure (the endpoint's call in flight freed): back off, retry
                await asyncio.sleep(self.backoff * (2 ** attempt) * (0.5 + random.random()))
        return got

    @staticmethod
    async def _send(model: Any, full: list[dict[str, str]], config: dict[str, Any] | None,
                    gate: CallGate, timeout: float) -> Any:
        """One attempt: a slot at the endpoint, then the request, both within `timeout`."""
        waited = await gate.acquire(full, within=timeout or None)
        # what the wait for a slot left of the attempt's time (to the millisecond)
        left = max(round(timeout - waited, 3), 0.001) if timeout else None
        if sync_only(model):
            return await invoke_on_thread(model, to_messages(full), left)
        # Only a simulated model gets a config: a duck-typed model may take the messages alone.
        pending = (model.ainvoke(to_messages(full), config=config)
                   if config is not None else generate(model, to_messages(full)))
        # past the timeout the call (in this task, not one of its own) is cancelled: its HTTP
        # request is closed, so a server that stops on disconnect stops generating
        async with asyncio.timeout(left):
            return await pending

    @staticmethod
    def _retry(got: Outcome, exc: Exception, attempt: int, retries: int,
               timeout: float) -> bool:
        """Whether a failed attempt is tried again: a transient failure with retries left,
        unless no slot was had in time, or a 429 asks for longer than an attempt's timeout
        (said on the turn: waiting would only pass the timeout)."""
        if isinstance(exc, RateLimited) or not is_transient(exc) or attempt == retries:
            return False
        asked = retry_after(exc)  # a 429's Retry-After, when it gives one
        if asked is not None and timeout and asked >= timeout:
            got.failure = RATE_LIMITED
            got.error = (f"{got.error}; rate limited: the server asked for {asked:g} s before "
                         f"another request (Retry-After), more than this call's {timeout:g} s "
                         "timeout, so it was not retried")
            return False
        return True

    def _replay(self, kept: Turn, parse: Callable[[str], tuple[dict[str, Any], list[str]]] | None
                ) -> Turn:
        """A fork's kept turn recorded in place of its call (no model sees it): as stored,
        numbered in this run, read again by `parse` (an edited reply is read as written)."""
        index = self._next_index
        self._next_index += 1
        turn = kept.model_copy(deep=True, update={
            "index": index, "parsed": {} if parse is not None else dict(kept.parsed),
            "warnings": [*kept.warnings, f"kept from run {self.kept_from}: not called again"]})
        if turn.ok:
            self._parse(turn, parse)
        self.record(turn)
        return turn

    @staticmethod
    def _parse(turn: Turn, parse: Callable[[str], tuple[dict[str, Any], list[str]]] | None
               ) -> None:
        """`parse(turn.reply)` into the turn's parsed fields and warnings, before it is
        recorded; a parser bug on a hostile reply degrades this turn only."""
        if parse is None:
            return
        try:
            fields, warnings = parse(turn.reply)
            turn.parsed = dict(fields)
            turn.warnings = [*turn.warnings, *warnings]
        except Exception as exc:
            turn.status, turn.error, turn.failure = "degraded", parse_error(exc), UNREADABLE

    async def call_json(self, seat: Seat, messages: list[dict[str, str]], *, phase: str,
                        round: int = 0, keys: Sequence[str] = (),
                        validate: Callable[[dict[str, Any]], str] | None = None,
                        task: Task | None = None, schema: OutputSchema | None = None
                        ) -> tuple[dict[str, Any] | None, Turn]:
        """A call whose reply must be a JSON object, with one bounded re-ask.

        `schema` (the phase's declared shape) is asked of an endpoint that constrains output
        to it (`engine.llm.structured`); every turn records the path it took. `validate(obj)`
        returns "" when the object is usable, else why not. If the first reply does not parse
        (or validate), the seat is asked once more with its reply and the reason; if that
        fails too, the last turn is marked degraded and `(None, turn)` comes back.
        Model failures are not re-asked (the guarded call already retried them).
        """
        output = StructuredOutput(self.model_for(seat), schema, self.store)
        keys = keys or (schema.keys if schema is not None else ())
        for asked in (False, True):
            turn = await self.call(seat, messages, phase=phase, round=round, task=task,
                                   output=output)
            if not turn.ok:
                return None, turn
            obj, why = self._read_json(turn.reply, validate, output)
            if obj is not None:
                self.update(turn, parsed=obj)
                return obj, turn
            if asked:
                break
            self.update(turn, warnings=[f"unreadable JSON, asked again: {why}"])
            messages = list(turn.messages) + [
                {"role": "assistant", "content": turn.reply},
                {"role": "user", "content": REASK.format(
                    why=why, keys=", ".join(f'"{k}"' for k in keys) or "asked for")}]
        self.update(turn, status="degraded", error=f"unreadable JSON after one re-ask: {why}",
                    failure=UNREADABLE)
        return None, turn

    async def call_lines(self, seat: Seat, messages: list[dict[str, str]], *,
                         line: LineFormat | None, **call: Any) -> Turn:
        """`call` for a free-text reply read by its labelled lines (`line`): constrained by
        the format's grammar where the seat's endpoint applies one (`engine.llm.lines`);
        `line` None is a plain `call`."""
        output = LineOutput(self.model_for(seat), line, self.store) if line is not None else None
        return await self.call(seat, messages, output=output, **call)

    @staticmethod
    def _read_json(text: str, validate: Callable[[dict[str, Any]], str] | None,
                   output: StructuredOutput) -> tuple[dict[str, Any] | None, str]:
        """A JSON reply read tolerantly and validated: (object, "") or (None, why not). A
        reply that ignores the structured output asked for steps the endpoint down (an
        object it holds is still read)."""
        obj, why = extract_json(text)
        output.ignored(text, obj)
        if obj is not None and validate is not None:
            try:
                why = validate(obj)
            except Exception as exc:  # a validator that trips on a hostile value
                why = parse_error(exc)
            obj = obj if not why else None
        return obj, why

    def guard(self, turn: Turn, read: Callable[..., T], *args: Any) -> T | None:
        """`read(*args)` for a protocol's reading of a reply; if it raises, the turn is marked
        degraded with the error and None comes back (the run goes on)."""
        try:
            return read(*args)
        except Exception as exc:  # any reply, however broken, degrades only its own turn
            self.update(turn, status="degraded", error=parse_error(exc), failure=UNREADABLE)
            return None

    def record(self, turn: Turn) -> None:
        """Append a turn to the log, write it to the store, then tell the listener.

        A stop asked for while this call was in flight ends the run here, the turn kept, as a
        stop through the store does: calls already started when Stop was pressed are the
        last ones, even in a phase with no call left to start."""
        self.turns.append(turn)
        if self.recorder is not None:
            self.recorder.turn(turn)
        if self.on_event is not None:
            self.on_event(turn)
        self.check_stop()

    def update(self, turn: Turn, **fields: Any) -> None:
        """Change a recorded turn's parsed fields or status after the fact (e.g. a failed parse)."""
        for key, value in fields.items():
            setattr(turn, key, value)
        if self.recorder is not None:
            self.recorder.update_turn(turn)
