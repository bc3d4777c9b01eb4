"""The simulated model: an offline, seeded model of agent dynamics that declares its world.

It is not a language model and understands nothing of a question. It reads two things only:
the run's `expected` answer, which is the truth of its world (nothing else: no answer key, no
lookup of bundled questions), and its parameters, given in the spec, e.g.
`simulated?skill=0.6&conformity=0.3&persuasion=0.5&seed=3`:

- `skill` (default 0.7): the chance an agent's own answer is the truth;
- `conformity` (default 0.3): the chance an agent that sees others' answers moves to their
  majority;
- `persuasion` (default 0.4): the chance an agent told its answer is wrong (by a critic, an
  opponent or a reviewer) moves to the alternative offered;
- `position_bias` (default 0): the chance a debate's judge rules for the side presented to it
  first, whatever was argued: a known position effect, for measuring; shown with the other
  parameters when it is set;
- `imitation` (default 0): the chance an agent that sees others' answers adopts the answer of
  one of them drawn at random, right or wrong alike: a symmetric world (the voter model), in
  which the expected share of right answers is the same in every round; shown when set;
- `stubbornness` (default 0): the chance an agent keeps its answer whatever it is shown or
  told (a persona's or a role's declared trait sets it for the seats that play it); shown
  when set;
- `push` (default 0): the chance an agent shown the answer a planted adversary argues for
  (a configuration's `adversary:`) adopts it; shown when set;
- `seed` (default 0): which of the world's reproducible draws a run gets.

Wrong answers are distractors derived from `expected`; without `expected` the world has no
truth and agents draw among a few neutral positions (see `engine.simulated.world`). What it is
asked comes from the structure the protocol passes with each call (a `Task`: its kind, the
reply format and what the seat has seen), never from the prompt's wording, so rewording a
template or the question changes no answer. Called without a task (directly, not by a
protocol), it says in plain text that it is simulated.

Every reply carries `response_metadata["simulated"] = True` and `["world"]`, the parameters.
Operational options: `latency` (seconds per call), `hang` (seconds a timed-out call
hangs) and fault rates `fail` (an exception), `ratelimit` (a transient error that a retry may
clear), `timeout` (the call hangs for `hang` seconds), `empty` (an empty reply) and `malformed`
(a reply that ignores the format).
"""
from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from engine.errors import RATE_LIMITED, ParleyError
from engine.models import ConfigError, Task, is_simulated
from engine.simulated.answers import json_reply
from engine.simulated.prose import text_reply
from engine.simulated.world import PARAMETERS, TRAITS, World, stable_int

FAULTS = ("fail", "ratelimit", "timeout", "empty", "malformed")
UNTASKED = ("This is Parley's simulated model. It answers only the structured tasks Parley's "
            "protocols give it, so called directly it has nothing to simulate.")


class SimulatedFault(ParleyError, RuntimeError):
    """An injected, non-transient model failure."""


class SimulatedRateLimitError(ParleyError, RuntimeError):
    """An injected transient failure (retried by guarded calls)."""

    status_code = 429
    failure = RATE_LIMITED


def compose(world: World, task: Task | None) -> str:
    """The reply text for a task (no faults); plain text saying so without one."""
    if task is None:
        return UNTASKED
    if task.keys:
        return json.dumps(json_reply(world, task), ensure_ascii=False)
    return text_reply(world, task)


def task_of(run_manager: Any) -> Task | None:
    """The task a protocol passed in the call's metadata (`parley_task`), if any."""
    metadata = run_manager.metadata if run_manager is not None else {}
    found = (metadata or {}).get("parley_task")
    return Task.model_validate(found) if found else None


# --------------------------------------------------------------------------- the chat model
class SimulatedChatModel(BaseChatModel):
    """Offline, seeded chat model that answers in the requested format; labelled simulated."""

    world: World = World()  # the world it simulates: its parameters and seed
    latency: float = 0.0
    faults: dict[str, float] = {}  # the rate of each of FAULTS given (the others: none)
    hang: float = 30.0
    parley_spec: str = "simulated"
    # Fault draws count attempts per prompt (a retry may succeed), shared by concurrent calls.
    _attempts: dict[int, int] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def from_options(cls, options: dict[str, Any], spec: str | None = None
                     ) -> SimulatedChatModel:
        known = {"seed", "latency", "hang", *PARAMETERS, *FAULTS}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(f"simulated model has no option {unknown[0]!r}; use "
                              f"{', '.join(sorted(known))}", "no_model")
        values: dict[str, Any] = {}
        for key, raw in options.items():
            try:
                values[key] = int(raw) if key == "seed" else float(raw)
            except (TypeError, ValueError):
                raise ConfigError(f"simulated option {key} must be a number, got {raw!r}",
                                  "no_model") from None
            if key in (*PARAMETERS, *FAULTS) and not 0 <= values[key] <= 1:
                raise ConfigError(f"simulated option {key} is a rate in 0..1, got {raw}",
                                  "no_model")
            if key in ("latency", "hang") and not 0 <= values[key] <= 600:
                raise ConfigError(f"simulated option {key} is seconds in 0..600, got {raw}",
                                  "no_model")
        label = spec or "simulated" + ("?" + "&".join(f"{k}={v}" for k, v in
                                                      sorted(values.items())) if values else "")
        world = World(**{key: values.pop(key) for key in (*PARAMETERS, "seed") if key in values})
        faults = {key: values.pop(key) for key in FAULTS if key in values}
        return cls(parley_spec=label, world=world, faults=faults, **values)

    @property
    def _llm_type(self) -> str:
        return "parley-simulated"

    def _fault(self, messages: list[BaseMessage], task: Task | None) -> str | None:
        rates = [(name, rate) for name in FAULTS if (rate := self.faults.get(name, 0.0)) > 0]
        if not rates:
            return None
        # Keyed on the task when there is one, so rewording never changes which calls fail.
        key = stable_int(task.model_dump_json()) if task is not None else stable_int(
            *(m.content for m in messages))
        with self._lock:
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
        draw = random.Random(stable_int(self.world.seed, "fault", key, attempt)).random()
        for name, rate in rates:
            if draw < rate:
                return name
            draw -= rate
        return None

    def _start(self, messages: list[BaseMessage], run_manager: Any
               ) -> tuple[Task | None, str | None, float]:
        """The call's task, the fault injected into it (if any) and the seconds it waits."""
        task = task_of(run_manager)
        fault = self._fault(messages, task)
        return task, fault, self.hang if fault == "timeout" else self.latency

    def _reply(self, messages: list[BaseMessage], task: Task | None,
               fault: str | None) -> ChatResult:
        if fault == "fail":
            raise SimulatedFault("simulated model failure (injected fault)")
        if fault == "ratelimit":
            raise SimulatedRateLimitError("simulated rate limit (injected fault)")
        if fault == "empty":
            text = ""
        elif fault == "malformed":
            text = "Sorry, I lost the thread there. (simulated malformed reply)"
        else:
            text = compose(self.world, task)
        tokens_in = sum(len(str(m.content).split()) for m in messages) * 4 // 3 + 3
        tokens_out = len(text.split()) * 4 // 3
        return ChatResult(generations=[ChatGeneration(message=AIMessage(
            content=text, response_metadata={"simulated": True, "world": self.world.params(),
                                             "model_name": self.parley_spec},
            usage_metadata={"input_tokens": tokens_in, "output_tokens": tokens_out,
                            "total_tokens": tokens_in + tokens_out}))])

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kw: Any) -> ChatResult:
        task, fault, wait = self._start(messages, run_manager)
        if wait:
            time.sleep(wait)
        return self._reply(messages, task, fault)

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None,
                         **kw: Any) -> ChatResult:
        task, fault, wait = self._start(messages, run_manager)
        if wait:
            await asyncio.sleep(wait)
        return self._reply(messages, task, fault)


def world_of(spec: str) -> dict[str, Any]:
    """The world (parameters, defaults filled in) a `simulated?...` spec string sets; a
    `ConfigError` when the spec is not one this model takes."""
    query = urlsplit(spec.strip()).query
    model = SimulatedChatModel.from_options(dict(parse_qsl(query, keep_blank_values=True)))
    return dict(model.world.params())


def with_traits(spec: str, traits: dict[str, float] | None) -> str:
    """A simulated spec with a persona's (or role's) declared traits set as the parameters of
    its world (`TRAITS`: stubbornness, accuracy as skill, conformity), which override what
    the spec sets; any other spec, or no traits, comes back unchanged."""
    if not traits or not is_simulated(spec):
        return spec
    query = dict(parse_qsl(urlsplit(spec.strip()).query, keep_blank_values=True))
    for trait, value in traits.items():
        if trait in TRAITS:
            query[TRAITS[trait]] = f"{float(value):g}"
    return "simulated?" + "&".join(f"{key}={value}" for key, value in query.items())
