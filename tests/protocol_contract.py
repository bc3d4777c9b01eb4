"""The contract every protocol keeps, as a test class its tests inherit.

In the style of langchain-core's standard tests: a protocol's test module subclasses
`ProtocolContract`, names its registry entry and its `run_*` / `arun_*` pair, and inherits
every test below. The seats come from the registry (each slot's defaults, optional slots
seated too), every seat sits on the simulated model (spied on, so a test can prove what
reached a model and that nothing did), and each run writes to a temporary SQLite store.

What the contract holds a protocol to:
- validation happens before any call: a bad option, a bad template, an empty question or a
  seat without a model is a `ConfigError`, no model is called and nothing is stored;
- any one seat failing (raising, timing out, answering empty) leaves a finished run whose
  turns for that seat say so, with an error and no reply; nothing crashes, nothing is made up;
- `on_event` receives the turns in index order, after the run row is open and each turn is
  stored, and before the run ends;
- an overridden template's text reaches the model;
- `arun_*` gives what `run_*` gives on the same seeded models;
- the stored run is `completed`, keeps every turn, has an outcome, and its configuration
  validates as a `RunConfig` that runs again to the same shape;
- a stop mid-run (the stop flag, the store's `stop_run`, or cancelling the task) ends it
  `interrupted` with its turns kept, and no call starts once the run has seen the stop.

Two tests are strict xfails until issue 12 lands: a run in which no call succeeded is stored
`completed` (DESIGN section 4 says `failed`), and a stopped run's row shows none of the tokens
and time its turns spent.

A subclass may set `question` and `options` (a short run that reaches every template) and
refine `assert_failure_shown` with what its own result says about a failed seat.
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, ClassVar

import pytest
from langchain_core.messages import BaseMessage
from pydantic import Field

from engine import ConfigError, Seat, Store
from engine.config import RunConfig, SeatSpec
from engine.llm.calls import RunStopped
from engine.models import RunResult, Turn, now
from engine.protocols import REGISTRY, ProtocolSpec, arun_config, run_sync, seats_from_config
from engine.simulated.model import SimulatedChatModel

MARKER = "CONTRACT-MARKER"
RISK_OFFICER = ("Names the single biggest risk in the proposal and says whether it is "
                "acceptable")
# seconds: a hanging seat is cut off here; generous, so a healthy seat on a loaded 2-core
# machine is never cut off with it
CALL_TIMEOUT = 1.0
FAILURES = {  # how a seat fails -> the simulated fault that makes it fail every call
    "raises": {"fail": 1.0},
    "times out": {"timeout": 1.0, "hang": 5.0},
    "answers empty": {"empty": 1.0},
}
FAILURE_TEXT = {"raises": "SimulatedFault", "times out": "time", "answers empty": "empty reply"}


class SpyModel(SimulatedChatModel):
    """The simulated model, keeping the text of every conversation it was sent."""

    received: list[str] = Field(default_factory=list)

    def _note(self, messages: list[BaseMessage]) -> None:
        self.received.append("\n".join(str(m.content) for m in messages))

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kw: Any) -> Any:
        self._note(messages)
        return super()._generate(messages, stop, run_manager, **kw)

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None,
                         run_manager: Any = None, **kw: Any) -> Any:
        self._note(messages)
        return await super()._agenerate(messages, stop, run_manager, **kw)


def spy(**faults: float) -> SpyModel:
    """A spied simulated model, its spec written as the store would show it."""
    spec = "simulated" + ("?" + "&".join(f"{k}={v:g}" for k, v in sorted(faults.items()))
                          if faults else "")
    return SpyModel.from_options(faults, spec)


class ProtocolContract:
    """Inherit this, set `protocol`, `run` and `arun`; the tests below come with it."""

    protocol: ClassVar[str]  # the registry name
    run: ClassVar[Callable[..., RunResult]]  # `run_*`, wrapped in staticmethod
    arun: ClassVar[Callable[..., Coroutine[Any, Any, RunResult]]]  # `arun_*`, likewise
    question: ClassVar[str] = "Should a small team adopt a four-day week or keep five days?"
    options: ClassVar[dict[str, Any]] = {}  # a short run that still uses every template
    unused_templates: ClassVar[frozenset[str]] = frozenset()  # not reached by that run

    # ----------------------------------------------------------------- parametrisation
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """`seat` runs a test once per seated slot (its first seat), named after the slot."""
        if "seat" in metafunc.fixturenames:
            slots = [slot.name for slot in self.spec.slots
                     if not slot.optional or slot.defaults]
            metafunc.parametrize("seat", slots, ids=slots)
        if "failure" in metafunc.fixturenames:
            metafunc.parametrize("failure", list(FAILURES), ids=[
                f.replace(" ", "-") for f in FAILURES])

    # ----------------------------------------------------------------- helpers
    @property
    def spec(self) -> ProtocolSpec[Any]:
        return REGISTRY[self.protocol]

    def seats(self, models: dict[tuple[str, int], SpyModel] | None = None,
              **faults: float) -> tuple[dict[str, Any], dict[tuple[str, int], SpyModel]]:
        """Seat keyword arguments for a run, every seat on its own spy model; `models` puts a
        given model at (slot, position). `faults` applies to every other seat."""
        seated = {slot.name: [SeatSpec.parse(d, slot.name) for d in slot.defaults]
                  for slot in self.spec.slots if slot.optional and slot.defaults}
        config = RunConfig(protocol=self.protocol, seats=seated, options=dict(self.options))
        kwargs = seats_from_config(self.spec, config)
        spies: dict[tuple[str, int], SpyModel] = {}

        def swap(seat: Seat, slot: str, position: int) -> Seat:
            model = (models or {}).get((slot, position)) or spy(**faults)
            spies[slot, position] = model
            return seat.model_copy(update={"model": model})

        for slot in self.spec.slots:
            value = kwargs[slot.name]
            if isinstance(value, list):
                kwargs[slot.name] = [swap(s, slot.name, i) for i, s in enumerate(value)]
            elif value is not None:
                kwargs[slot.name] = swap(value, slot.name, 0)
        return kwargs, spies

    def go(self, store: Store | None = None, *, seats: dict[str, Any] | None = None,
           **run: Any) -> RunResult:
        """One synchronous run on the contract's question and options."""
        run.setdefault("retries", 0)
        if seats is None:
            seats, _ = self.seats()
        return type(self).run(run.pop("question", self.question), **seats, store=store,
                              **run)

    def assert_nothing_happened(self, store: Store, spies: dict[Any, SpyModel],
                                events: list[Turn]) -> None:
        assert all(not model.received for model in spies.values()), "a model was called"
        assert events == []
        assert store.runs().empty and store.turns().empty

    def assert_failure_shown(self, result: RunResult, seat: Seat, slot: str,
                             failure: str) -> None:
        """What the protocol's own result says about a seat whose every call failed; the base
        contract checks the turns, a subclass adds its result's fields."""

    # ----------------------------------------------------------------- validation
    def test_the_registry_entry_is_this_protocol(self) -> None:
        assert self.spec.name == self.protocol
        assert self.spec.runner is type(self).arun
        result = self.go()
        assert isinstance(result, self.spec.result_type)
        assert result.protocol == self.protocol and result.turns

    @pytest.mark.parametrize("question", ["", "   \n\t", None, "\u200b"])
    def test_an_empty_question_is_refused_before_any_call(self, store: Store,
                                                          question: Any) -> None:
        seats, spies = self.seats()
        events: list[Turn] = []
        with pytest.raises(ConfigError) as err:
            self.go(store, seats=seats, question=question, on_event=events.append)
        assert err.value.code == "input"
        self.assert_nothing_happened(store, spies, events)

    def test_bad_options_are_refused_before_any_call(self, store: Store) -> None:
        bad: list[dict[str, Any]] = [{"no_such_option": 1}]
        for option in self.spec.options:
            if option.minimum is not None:
                bad.append({option.name: option.minimum - 1})
            if option.maximum is not None:
                bad.append({option.name: option.maximum + 1})
            if isinstance(option.default, int) and option.minimum is not None:
                bad.append({option.name: "two"})
        for options in bad:
            seats, spies = self.seats()
            events: list[Turn] = []
            with pytest.raises(ConfigError):
                self.go(store, seats=seats | options, on_event=events.append)
            self.assert_nothing_happened(store, spies, events)

    def test_bad_templates_are_refused_before_any_call(self, store: Store) -> None:
        name, template = next(iter(self.spec.templates.items()))
        bad = [{"no_such_template": "Question: {question}"}, {name: "   "},
               {name: template.text + " {no_such_placeholder}"}]
        if template.required:
            kept = template.text
            for placeholder in template.required:
                kept = kept.replace("{" + placeholder + "}", "")
            bad.append({name: kept})
        for prompts in bad:
            seats, spies = self.seats()
            events: list[Turn] = []
            with pytest.raises(ConfigError):
                self.go(store, seats=seats, prompts=prompts, on_event=events.append)
            self.assert_nothing_happened(store, spies, events)

    def test_a_seat_without_a_model_is_refused_before_any_call(self, store: Store,
                                                                seat: str) -> None:
        seats, spies = self.seats()
        value = seats[seat]
        if isinstance(value, list):
            seats[seat] = [value[0].model_copy(update={"model": ""}), *value[1:]]
        else:
            seats[seat] = value.model_copy(update={"model": ""})
        events: list[Turn] = []
        with pytest.raises(ConfigError) as err:
            self.go(store, seats=seats, on_event=events.append)
        assert err.value.code == "no_model"
        self.assert_nothing_happened(store, spies, events)

    # ----------------------------------------------------------------- failing seats
    def test_a_failing_seat_is_recorded_on_its_turns(self, store: Store, seat: str,
                                                     failure: str) -> None:
        broken = spy(**FAILURES[failure])
        seats, _ = self.seats({(seat, 0): broken})
        result = self.go(store, seats=seats, timeout_per_call=CALL_TIMEOUT)
        failed = seats[seat][0] if isinstance(seats[seat], list) else seats[seat]
        own = [t for t in result.turns if t.seat == failed.name]
        assert own, f"{failed.name} ({seat}) was never called"
        assert len(broken.received) >= len(own)
        for turn in own:
            assert turn.status == "degraded" and turn.reply == ""
            assert FAILURE_TEXT[failure].lower() in turn.error.lower(), turn.error
        stored = stored_run(store, result)
        if any(t.ok for t in result.turns):
            assert stored["status"] == "completed"
        else:  # no model call succeeded
            assert stored["status"] == "failed"
            assert stored["error"].startswith("no model call succeeded")
        assert len(stored["turns"]) == len(result.turns)
        assert stored["degraded"] >= len(own)
        assert [t for t in stored["turns"] if t["seat"] == failed.name and
                (t["status"] != "degraded" or not t["error"] or t["reply"])] == []
        self.assert_failure_shown(result, failed, seat, failure)

    def test_a_run_where_no_call_succeeds_is_stored_failed(self, store: Store) -> None:
        seats, _ = self.seats(fail=1.0)
        result = self.go(store, seats=seats)
        assert result.turns and not any(t.ok for t in result.turns)
        stored = stored_run(store, result)
        assert stored["status"] == "failed" and not stored["degraded_run"]
        assert stored["error"].startswith(f"no model call succeeded ({len(result.turns)} call")

    # ----------------------------------------------------------------- events
    def test_events_arrive_in_order_while_the_run_is_open(self, store: Store) -> None:
        events: list[tuple[int, str, list[int]]] = []

        def listen(turn: Turn) -> None:
            runs = store.runs()
            assert len(runs) == 1
            run_id = runs["id"].iloc[0]
            events.append((turn.index, runs["status"].iloc[0],
                           list(store.turns(run_id)["idx"])))

        first = self.spec.slots[0].name
        seats, _ = self.seats({(first, 0): spy(latency=0.05)})  # the first seat answers last
        result = self.go(store, seats=seats, on_event=listen)
        indices = [index for index, _, _ in events]
        assert indices == [t.index for t in result.turns] == list(range(len(result.turns)))
        assert {status for _, status, _ in events} == {"running"}
        for index, _, stored in events:
            assert index in stored  # written to the store before the listener hears of it
        assert stored_run(store, result)["status"] == "completed"

    # ----------------------------------------------------------------- prompts
    def test_overridden_templates_reach_the_model(self, store: Store) -> None:
        prompts = {name: f"{t.text}\n({MARKER}-{name})"
                   for name, t in self.spec.templates.items()}
        seats, spies = self.seats()
        result = self.go(store, seats=seats, prompts=prompts)
        sent = [m["content"] for t in result.turns for m in t.messages]
        received = [text for model in spies.values() for text in model.received]
        for name in set(self.spec.templates) - self.unused_templates:
            mark = f"({MARKER}-{name})"
            assert any(mark in text for text in sent), f"template {name} was not sent"
            assert any(mark in text for text in received), f"template {name} never arrived"
        assert stored_run(store, result)["config"]["prompts"] == prompts

    def test_a_custom_role_reaches_every_prompt_of_its_seat(self, store: Store,
                                                            seat: str) -> None:
        """A role named in the library (as the Run page's Role box names it) is in every
        stored prompt of the seat that plays it, in the library's words, and in no other
        seat's prompt; the model received it too."""
        store.put_library("role", "risk_officer", {"description": RISK_OFFICER})
        seats, spies = self.seats()
        value = seats[seat]
        first = value[0] if isinstance(value, list) else value
        played = first.model_copy(update={"role": "risk_officer"})
        seats[seat] = [played, *value[1:]] if isinstance(value, list) else played
        result = self.go(store, seats=seats)
        stored = stored_run(store, result)["turns"]
        own = [t for t in stored if t["seat"] == played.name]
        assert own, f"{played.name} ({seat}) was never called"
        for turn in own:
            sent = "\n".join(m["content"] for m in turn["messages"])
            assert RISK_OFFICER in sent, (turn["phase"], sent[:300])
        for turn in stored:
            if turn["seat"] != played.name:
                assert RISK_OFFICER not in "\n".join(m["content"] for m in turn["messages"])
        model = spies[seat, 0]
        assert model.received and all(RISK_OFFICER in text for text in model.received)

    def test_a_role_typed_as_text_reaches_the_model_as_typed(self, store: Store) -> None:
        """A role that names nothing in the library is its own description."""
        slot = self.spec.slots[0].name
        seats, _ = self.seats()
        value = seats[slot]
        first = value[0] if isinstance(value, list) else value
        typed = "Weigh every answer against its cost in pounds"
        played = first.model_copy(update={"role": typed})
        seats[slot] = [played, *value[1:]] if isinstance(value, list) else played
        result = self.go(store, seats=seats)
        own = [t for t in result.turns if t.seat == played.name]
        assert own and all(typed in "\n".join(m["content"] for m in t.messages) for t in own)

    def test_the_default_templates_are_all_used(self) -> None:
        """Guards the override test: each template it checks is one the run renders."""
        seats, spies = self.seats()
        self.go(seats=seats)
        received = "\n".join(text for model in spies.values() for text in model.received)
        for name, template in self.spec.templates.items():
            if name in self.unused_templates:
                continue
            head = template.text.split("{", 1)[0].strip()
            assert head and head in received, f"template {name} was not used"

    # ----------------------------------------------------------------- async twin
    def test_the_async_twin_gives_the_same_result(self) -> None:
        def shape(result: RunResult) -> tuple[Any, ...]:
            dump = result.model_dump(mode="json", exclude={"turns", "duration", "run_id"})
            turns = sorted((t.phase, t.round, t.seat, t.status, t.reply)
                           for t in result.turns)
            return type(result), _without_durations(dump), turns

        seats, _ = self.seats(seed=7)
        twin, _ = self.seats(seed=7)
        made = self.go(seats=seats)
        awaited = run_sync(type(self).arun(self.question, **twin, retries=0))
        assert shape(awaited) == shape(made)

    # ----------------------------------------------------------------- the store
    def test_the_stored_run_is_complete_and_can_run_again(self, store: Store) -> None:
        result = self.go(store, label="contract", tags=["contract"])
        stored = stored_run(store, result)
        assert stored["status"] == "completed" and stored["protocol"] == self.protocol
        assert len(stored["turns"]) == len(result.turns) == stored["calls"]
        assert [t["idx"] for t in stored["turns"]] == [t.index for t in result.turns]
        assert "outcome" in stored["metrics"]
        assert stored["metrics"]["outcome"] == self.spec.outcome(result)
        assert self.spec.read_result(stored["result"]) is not None
        assert stored["simulated"] and stored["label"] == "contract"
        config = RunConfig.model_validate(stored["config"])
        assert config.protocol == self.protocol
        again = run_sync(arun_config(config, self.question, store=store, retries=0))
        assert type(again) is type(result) and len(again.turns) == len(result.turns)
        assert stored_run(store, again)["status"] == "completed"

    # ----------------------------------------------------------------- stopping
    def test_a_stop_flag_ends_the_run_interrupted(self, store: Store) -> None:
        stop = threading.Event()
        events: list[Turn] = []

        stopped_at: list[datetime] = []

        def listen(turn: Turn) -> None:
            events.append(turn)
            if not stop.is_set():
                stop.set()
                stopped_at.append(now())

        with pytest.raises(RunStopped):
            self.go(store, on_event=listen, stop_event=stop)
        self.assert_stopped(store, events, stopped_at[0])

    def test_stopping_in_the_store_ends_the_run_interrupted(self, store: Store) -> None:
        events: list[Turn] = []
        stopped_at: list[datetime] = []

        def listen(turn: Turn) -> None:
            events.append(turn)
            if not stopped_at:
                assert store.stop_run(store.runs()["id"].iloc[0])
                stopped_at.append(now())

        with pytest.raises(RunStopped):
            self.go(store, on_event=listen)
        self.assert_stopped(store, events, stopped_at[0])

    def test_a_stopped_run_keeps_what_it_spent(self, store: Store) -> None:
        stop = threading.Event()
        with pytest.raises(RunStopped):
            self.go(store, on_event=lambda turn: stop.set(), stop_event=stop)
        run = store.runs().iloc[0]
        turns = store.turns(run["id"])
        assert turns["tokens_in"].sum() > 0
        assert run["tokens_in"] == turns["tokens_in"].sum()
        assert run["tokens_out"] == turns["tokens_out"].sum() and run["latency"] > 0

    def test_cancelling_the_task_ends_the_run_interrupted(self, store: Store) -> None:
        events: list[Turn] = []
        seats, _ = self.seats(latency=0.01)

        async def main() -> None:
            tasks: list[asyncio.Future[Any]] = []

            def listen(turn: Turn) -> None:
                events.append(turn)
                asyncio.get_running_loop().call_soon(tasks[0].cancel)

            tasks.append(asyncio.ensure_future(type(self).arun(
                self.question, **seats, store=store, retries=0, on_event=listen)))
            await tasks[0]

        with pytest.raises(asyncio.CancelledError):
            asyncio.run(main())
        runs = store.runs()
        assert list(runs["status"]) == ["interrupted"]
        stored = store.get(runs["id"].iloc[0])
        assert events and {t.index for t in events} <= {t["idx"] for t in stored["turns"]}

    def assert_stopped(self, store: Store, events: list[Turn], stopped_at: datetime) -> None:
        """The run is `interrupted`, every turn heard of is kept, and no call started after
        the run saw the stop: a stop flag is seen at once, a stop through the store when the
        next turn is written (calls in flight then finish and are kept)."""
        runs = store.runs()
        assert list(runs["status"]) == ["interrupted"]
        stored = store.get(runs["id"].iloc[0])
        assert events and {t.index for t in events} <= {t["idx"] for t in stored["turns"]}
        turns = [(datetime.fromisoformat(t["started_at"]), datetime.fromisoformat(
            t["finished_at"])) for t in stored["turns"]]
        noticed = min((end for _, end in turns if end >= stopped_at), default=stopped_at)
        assert max(start for start, _ in turns) <= noticed  # nothing started once it was seen


def _without_durations(value: Any) -> Any:
    """A result dump without its timings (they differ between any two runs)."""
    if isinstance(value, dict):
        return {k: _without_durations(v) for k, v in value.items() if k != "duration"}
    if isinstance(value, list):
        return [_without_durations(v) for v in value]
    return value


def stored_run(store: Store, result: RunResult) -> dict[str, Any]:
    """The stored row of a run made with a store."""
    assert result.run_id is not None
    return store.get(result.run_id)
