"""Running experiments: the runner and resume (in the background:
`engine.services.tasks.TaskRunner.start_experiment`). Runs are written through a batched store
(`Store.batched()`: group commit); every query is in `engine.store.experiments`."""
from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.cells import Cell
from engine.config import Donor
from engine.experiments.budget import BudgetGate, estimates_of
from engine.experiments.notices import notify_ended
from engine.experiments.planning import Plan, plan_of
from engine.llm.endpoints import registry_or_environment
from engine.llm.runmodels import close_shared, open_shared
from engine.models import ConfigError, RunStopped, now
from engine.store import Store, StoreWriteError
from engine.store.experiments import (
    Progress,
    cell_runs,
    claim,
    row,
    set_unchanged,
    set_values,
    supersede,
)

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry

HEARTBEAT_EVERY = 5.0  # seconds between heartbeats of a running experiment's row
DONOR_WAIT = 900.0  # seconds a placebo cell waits for its donor run, still running, to end
DONOR_POLL = 0.25  # seconds between looks at the donor's state
# seconds a batch of turns gathers before its commit (a run's end is committed at once): at
# 32 runs in flight, a commit per loop iteration cost more CPU than the turns' own writes
TURN_WINDOW = 0.02

def pending_cells(store: Store, experiment_id: str) -> list[Cell]:
    """The cells with no completed run, in plan order: what a resume will run."""
    experiment = plan_of(row(store, experiment_id)["spec"])
    done = {r["cell"] for r in cell_runs(store, experiment_id) if r["status"] == "completed"}
    return [cell for cell in experiment.cells() if cell not in done]


@dataclass
class CellOutcome:
    """How one cell's run ended: `completed`, `failed` (stored so: a resume redoes it),
    `interrupted` (stopped) or `fatal` (a configuration error, the same for every run of that
    configuration); `error` says why, `finished` is 1 when the run got to its end, and
    `exception` is what a run that raised raised (the pool retries a lost database)."""

    status: str
    error: str = ""
    finished: int = 1
    exception: Exception | None = None


async def arun_cell(experiment: Plan, experiment_id: str, cell: Cell, *, store: Store,
                    stop_event: threading.Event, endpoints: EndpointRegistry | None = None,
                    on_turn: Callable[[Any], Any] | None = None,
                    started_by: str = "") -> CellOutcome:
    """Run one cell of an experiment (its configuration on its question, tagged with the
    cell, its row recording `started_by`: who started the experiment) and say how it ended.
    The in-process runner and the pool's workers (`engine.workers`) both run cells through
    this."""
    from engine.protocols import arun_config
    from engine.protocols.adversary import drawn
    from engine.protocols.base import no_call_succeeded
    item, config = experiment.questions[cell.q], experiment.configs[cell.c]
    seed = experiment.order_seed_of(cell)  # None: the configuration's own order
    # the set's answers only for an adversary to draw from: listed for every cell, they made
    # an experiment's cells quadratic in its questions
    answers = [q.get("expected") for q in experiment.questions] if config.get("adversary") \
        else []
    try:  # a planted answer: one per question and repeat, whatever the configuration
        config = drawn(config, item.get("expected"), answers, experiment.seed,
                       str(item["question"]), cell.q, cell.r)
    except ConfigError as exc:
        return CellOutcome("fatal", f"configuration {config['label']!r}: {exc}", finished=0)
    source = experiment.donor_of(cell)
    donor: Donor | None = None
    if source is not None:
        found = await donor_of(store, experiment, experiment_id, source, stop_event)
        if isinstance(found, str):
            return CellOutcome("interrupted" if stop_event.is_set() else "failed",
                               f"configuration {config['label']!r}: {found}", finished=0)
        donor = found
    try:
        result = await arun_config(
            config, str(item["question"]), store=store, label=config["label"],
            tags=[cell.tag], expected=item.get("expected"), stop_event=stop_event,
            experiment_id=experiment_id, started_by=started_by, endpoints=endpoints,
            on_event=on_turn, **({"order_seed": seed} if seed is not None else {}),
            **({"donor": donor} if donor is not None else {}))
    except RunStopped:
        return CellOutcome("interrupted", finished=0)
    except ConfigError as exc:
        return CellOutcome("fatal", f"configuration {config['label']!r}: {exc}", finished=0)
    except Exception as exc:  # a bug in a run; the run is stored `failed` with its error
        return CellOutcome("failed", f"{type(exc).__name__}: {exc}", finished=0, exception=exc)
    failed = no_call_succeeded(result.turns)  # stored `failed`: resume redoes it
    return CellOutcome("failed", failed) if failed else CellOutcome("completed")


async def donor_of(store: Store, experiment: Plan, experiment_id: str, source: Cell,
                   stop_event: threading.Event, wait: float = DONOR_WAIT
                   ) -> Donor | str:
    """A placebo cell's donor: the completed run of cell `source` (its configuration on
    the donor question, `Plan.donor_of`) with its agents' messages by seat, phase and round
    (the last usable reply of each). A donor still running is waited for, up to `wait`
    seconds; returns why not (text) when it failed, was stopped or did not finish in time,
    and a resume redoes both."""
    waited = 0.0
    while True:
        runs = [r for r in cell_runs(store, experiment_id)
                if r["cell"] == source and not r["superseded"]]
        done = [r for r in runs if r["status"] == "completed"]
        if done:
            break
        ended = runs and all(r["status"] not in ("running", "planned") for r in runs)
        if ended or stop_event.is_set() or waited >= wait:
            why = "failed" if ended else "was stopped" if stop_event.is_set() else \
                f"did not complete within {wait:g} s"
            return (f"the placebo run's donor (question {source.q + 1}, repeat {source.r + 1}) "
                    f"{why}; resume to retry both")
        await asyncio.sleep(DONOR_POLL)
        waited += DONOR_POLL
    run_id = str(done[-1]["id"])
    store.flush_turns()  # a batched store's turns of the donor, written
    turns = store.turns(run_id)
    messages: dict[tuple[str, str, int], str] = {}
    for seat, phase, number, reply, status in zip(
            turns["seat"], turns["phase"], turns["round"], turns["reply"], turns["status"],
            strict=True):
        if status == "ok" and isinstance(reply, str) and reply.strip():
            messages[(str(seat), str(phase), int(number))] = reply
    return Donor(str(experiment.questions[source.q]["question"]), run_id, messages)


def _ending(fatal: list[str], left: int, over_budget: str, stopped: bool,
            failures: list[str]) -> tuple[str, str]:
    """An in-process run's final status and error, from how it went."""
    if fatal:
        return "failed", fatal[0]
    if left == 0:
        return "completed", ""
    if over_budget:  # the budget is spent: no new cell started, the ones in flight finished
        return "stopped", over_budget
    if stopped:
        return "stopped", ""
    last = f" (last error: {failures[-1]})" if failures else ""
    return "incomplete", f"{left} run(s) did not complete{last}; resume to retry them"


async def arun_experiment(store: Store, experiment_id: str, *,  # noqa: PLR0915
                          stop_event: threading.Event | None = None,
                          on_progress: Callable[[Progress], Any] | None = None,
                          batched: bool = True, endpoints: EndpointRegistry | None = None,
                          on_turn: Callable[[Any], Any] | None = None,
                          started_by: str = "", notify_url: str | None = None) -> Progress:
    """Run (or resume) an experiment: every cell without a completed run, `concurrency` runs
    at a time in this event loop. Ends `completed`, `stopped` (stop_event, or its
    `budget_usd` spent or a cost it cannot count: the error then starts "budget:" and gives
    the final spend, `engine.experiments.budget`), `incomplete` (some runs failed;
    resume retries them) or `failed` (a configuration error).

    `started_by` is who starts it (`engine.access.Actor.user`, or the CLI's user): the
    experiment's row records it and every run this start makes carries it.

    Runs are written with group commit (`Store.batched()`: the rows, turns and ends of the
    runs that wrote in one loop iteration, in one transaction), or one transaction per turn
    when `batched` is False. `endpoints` is the `EndpointRegistry` models resolve under
    (None: the environment's); `on_turn` hears every finished turn of every run. The
    store's reaper runs while the experiment does. When it ends, a notice is POSTed to
    `notify_url` (default the environment's `PARLEY_NOTIFY_URL`; `engine.llm.notify`).
    """
    stop_event = stop_event or threading.Event()
    endpoints = registry_or_environment(endpoints)  # one for all its runs when none is given
    open_shared()  # a seat spec resolved once for every run of this start (engine.llm.runmodels)
    store.reap()  # runs left `running` by a dead process become `interrupted`, so are redone
    store.start_reaper()
    set_unchanged(store, experiment_id)
    # running in this process, started by `started_by` (refused when a live runner holds it)
    claimed = claim(store, experiment_id, started_by)
    experiment = plan_of(claimed["spec"])
    state = Progress(experiment_id, "running", experiment.runs)
    clock = time.monotonic()
    finished_here = 0
    fatal: list[str] = []
    failures: list[str] = []
    cells: Iterator[Cell] = iter(())
    sink = store.batched(TURN_WINDOW) if batched else store
    beat = [time.monotonic()]

    def report() -> None:
        state.elapsed = time.monotonic() - clock
        left = state.total - state.done
        state.remaining = left * state.elapsed / finished_here if finished_here else None
        if on_progress is not None:
            on_progress(state)

    async def one(cell: Cell) -> None:
        nonlocal finished_here
        state.running += 1
        try:
            outcome = await arun_cell(experiment, experiment_id, cell, store=sink,
                                      stop_event=stop_event, endpoints=endpoints,
                                      on_turn=on_turn, started_by=started_by)
        finally:
            state.running -= 1
        if outcome.status == "completed":
            state.done += 1
            finished_here += 1
        elif outcome.status == "failed":
            state.failed += 1
            failures.append(outcome.error)
            finished_here += outcome.finished
        elif outcome.status == "interrupted":
            state.interrupted += 1
        else:  # the same configuration error for every run of it: stop all
            fatal.append(outcome.error)
            stop_event.set()
        if time.monotonic() - beat[0] > HEARTBEAT_EVERY:
            beat[0] = time.monotonic()
            set_values(store, experiment_id, heartbeat_at=now())
        report()

    gate = BudgetGate(store, experiment_id, experiment.budget_usd, estimates_of(experiment),
                sink.flush_turns)

    async def worker() -> None:
        for cell in cells:  # one shared iterator: each cell is taken exactly once
            label = experiment.configs[cell.c]["label"]
            if stop_event.is_set() or not await gate.enter(label):
                return
            try:
                await one(cell)
            finally:
                gate.leave(label)

    status, error = "failed", ""
    try:
        runs = cell_runs(store, experiment_id)
        done = {r["cell"] for r in runs if r["status"] == "completed"}
        todo = [cell for cell in experiment.cells() if cell not in done]
        supersede(store, [r["id"] for r in runs if r["cell"] not in done
                          and not r["superseded"] and r["status"] != "running"])
        state.done, cells = len(done), iter(todo)
        report()
        await asyncio.gather(*(worker() for _ in range(min(experiment.concurrency,
                                                           len(todo)) or 1)))
        sink.flush_turns()
        left = len(pending_cells(store, experiment_id))
        status, error = _ending(fatal, left, gate.final_reason(), stop_event.is_set(),
                                failures)
    except BaseException as exc:
        stopped = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))
        status, error = ("stopped" if stopped else "failed"), f"{type(exc).__name__}: {exc}"
        raise
    finally:
        with contextlib.suppress(StoreWriteError):  # what ended is written, even on Ctrl-C
            sink.flush_turns()
        close_shared()
        set_values(store, experiment_id, status=status, error=error[:2000],
                   finished_at=now(), heartbeat_at=now())
        await asyncio.to_thread(notify_ended, store, experiment_id, notify_url)
    state.status, state.error = status, error
    report()
    return state


def run_experiment(store: Store, experiment_id: str, **kw: Any) -> Progress:
    """Synchronous `arun_experiment`."""
    from engine.protocols import run_sync
    return run_sync(arun_experiment(store, experiment_id, **kw))
