"""One background-task runner: runs, re-runs, experiments and the demo keep going when the page
that started them goes away.

A `TaskRunner` owns one asyncio event loop on one daemon thread; every task is a coroutine on
that loop with its own stop `Event`. The app makes one runner per store (`pages/_shared.py`,
`st.cache_resource`), so all sessions of the process share it; nothing lives at module level,
and two runners on two stores know nothing of each other. A run's row is opened before the
run starts and the protocol runs under that id, so a page can open the run at once. What a
page shows is read back from the store; the runner adds only what the store cannot know (a
run's call estimate, whether a stop was asked, what the demo made).

Every method that starts, stops or deletes takes the `actor` doing it (`engine.access`) and
refuses with `NotAllowed` before anything happens when their role does not allow it; the
default, `LOCAL`, is the single local user (no sign-in) and the CLI.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from engine.access import LOCAL, Actor, require
from engine.config import RunConfig
from engine.experiments.runner import arun_experiment
from engine.llm.endpoints import EndpointRegistry
from engine.models import ConfigError, RunStopped
from engine.protocols import Resolved, arun_config, estimate, get_protocol, resolve_config
from engine.services.demo import DEMO_TAG, DemoRun, demo_missing
from engine.services.live import TurnFeed
from engine.services.rerun import rerun_options, rerun_resolved
from engine.store.experiments import get as get_experiment
from engine.store.experiments import progress as experiment_progress

if TYPE_CHECKING:
    from engine.store import Store

START_TIMEOUT = 60.0  # seconds a start waits for its task's checks before giving up
KEEP_FINISHED = 200  # finished tasks remembered (for their call estimates); the store has the rest
DEMO = "demo"  # the demo's task id: there is one demo per runner at a time

Kind = Literal["run", "experiment", "demo"]


@dataclass
class Task:
    """One background task: its stop flag, and how it ended. `protocol` and
    `estimated_calls` describe a run; `run_ids`, `errors` and `total` the demo's runs."""

    id: str
    kind: Kind
    protocol: str = ""
    estimated_calls: int = 0
    total: int = 1
    stop_event: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    error: str = ""
    run_ids: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    finished: int = 0
    started_by: str = ""
    job: asyncio.Future[Any] | None = None  # held so the loop never drops a running task

    @property
    def alive(self) -> bool:
        return not self.done.is_set()


class TaskRunner:
    """Starts, watches and stops the background tasks of one store."""

    def __init__(self, store: Store):
        self.store = store
        self.feed = TurnFeed(store)
        self._tasks: dict[str, Task] = {}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="parley-tasks",
                                        daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ starting
    def start_run(self, config: RunConfig | Mapping[str, Any] | Resolved, question: str, *,
                  expected: str | None = None, endpoints: EndpointRegistry | None = None,
                  label: str | None = None, tags: Iterable[str] = (), actor: Actor = LOCAL,
                  **options: Any) -> str:
        """Open the run's row, start `config` on `question` under that id, and return the id.
        The row records who started it (`actor.user`, its `started_by`).

        `options` go to the protocol as they would from `arun_config` (the call policy,
        `prompts` ...). The configuration is resolved once (a `Resolved` one not again): the
        estimate, the row and the run take that value. One the protocol refuses raises its
        `ConfigError` here, before any call, and leaves no row.
        """
        require(actor, "start runs")
        resolved = resolve_config(config, endpoints)  # seats and options checked, no row yet
        calls = estimate(resolved)["calls"]
        run: dict[str, Any] = {"label": label if label is not None else resolved.given.label,
                               "tags": list(tags), "expected": expected or None}
        protocol = resolved.spec.name
        run_id = self.store.start_run(protocol, question, config=resolved.stored().stored(),
                                      started_by=actor.user, **run)
        task = Task(run_id, "run", protocol=protocol, estimated_calls=calls)
        self._add(task)
        work = arun_config(resolved, question, store=self.store, run_id=run_id,
                           stop_event=task.stop_event, **run, **options)
        self._submit(task, work)
        return run_id

    def start_rerun(self, run: Mapping[str, Any], endpoints: EndpointRegistry | None = None,
                    actor: Actor = LOCAL) -> str:
        """Start a stored run (`Store.get`) again: its stored configuration on its question,
        with its label, tags and expected answer; returns the new run's id."""
        require(actor, "start runs")
        config = rerun_resolved(run.get("config") or {}, endpoints)
        return self.start_run(config, str(run.get("question", "")), endpoints=endpoints,
                              actor=actor, **rerun_options(run))

    def start_experiment(self, experiment_id: str, endpoints: EndpointRegistry | None = None,
                         actor: Actor = LOCAL, notify_url: str | None = None) -> str:
        """Run (or resume) an experiment; returns its id once its row says `running`, started
        by `actor.user` (the row and every run this start makes record it). Starting one this
        runner is running already changes nothing; one running elsewhere is a
        `ConfigError`. Its end is notified to `notify_url` (default the environment's
        `PARLEY_NOTIFY_URL`)."""
        require(actor, "run experiments")
        current = self.task(experiment_id)
        if current is not None and current.alive:
            return experiment_id
        row = get_experiment(self.store, experiment_id)
        if row["status"] == "running":
            raise ConfigError(f"experiment {experiment_id} is already running (process "
                              f"{row['pid']} on {row['host']}); stop it there first", "input")
        task = Task(experiment_id, "experiment")
        self._add(task)
        self._submit(task, arun_experiment(self.store, experiment_id,
                                           stop_event=task.stop_event, endpoints=endpoints,
                                           started_by=actor.user, notify_url=notify_url))
        return experiment_id

    def start_demo(self, actor: Actor = LOCAL) -> str:
        """Make the demo runs (`demo_plan`: every demo question through every protocol, and
        the two demo models meeting on them; all simulated) one after another in the
        background; returns the demo's task id. Only the runs not stored yet are made
        (`demo_missing`), so pressing the button twice stores no duplicates; while the demo is
        going, starting it again changes nothing."""
        require(actor, "start runs")
        with self._lock:
            current = self._tasks.get(DEMO)
            if current is not None and current.alive:
                return DEMO
            plan = demo_missing(self.store)
            task = Task(DEMO, "demo", total=max(1, len(plan)), started_by=actor.user)
            self._tasks[DEMO] = task
        self._submit(task, self._demo(task, plan))
        return DEMO

    async def _demo(self, task: Task, plan: list[DemoRun]) -> None:
        """The demo's runs in turn; a run that raises is reported in `errors` and the demo
        moves on, so one broken protocol does not hide the others."""
        for demo in plan:
            if task.stop_event.is_set():
                return
            try:  # a run that raises past its protocol is stored `failed` by it
                result = await arun_config(demo.config, demo.question.text, store=self.store,
                                           stop_event=task.stop_event, tags=[DEMO_TAG],
                                           expected=demo.question.expected,
                                           started_by=task.started_by)
                task.run_ids.append(str(result.run_id))
            except RunStopped:
                return
            except Exception as exc:  # noqa: BLE001 - reported, not hidden
                task.errors.append(f"{demo.config.protocol}: {type(exc).__name__}: {exc}")
            finally:
                task.finished += 1

    # ------------------------------------------------------------------ the loop
    def _add(self, task: Task) -> None:
        with self._lock:
            self._tasks[task.id] = task
            finished = [key for key, t in self._tasks.items() if not t.alive]
            for key in finished[:max(0, len(finished) - KEEP_FINISHED)]:
                del self._tasks[key]

    def _submit(self, task: Task, work: Coroutine[Any, Any, Any]) -> None:
        """Run `work` as `task` on the loop; return once its checks have run, raising the
        `ConfigError` they raised."""
        future = asyncio.run_coroutine_threadsafe(self._launch(task, work), self._loop)
        try:
            future.result(START_TIMEOUT)
        except concurrent.futures.TimeoutError:
            raise RuntimeError(f"the task did not start within {START_TIMEOUT:.0f} "
                               "seconds") from None

    async def _launch(self, task: Task, work: Coroutine[Any, Any, Any]) -> None:
        job = asyncio.ensure_future(work)
        task.job = job
        # The loop runs ready callbacks in order, so the job's first step (everything up to
        # its first real wait) has run when this coroutine resumes: a protocol's checks, an
        # experiment's claim on its row. A refusal there is the caller's to see.
        await asyncio.sleep(0)
        if job.done() and not job.cancelled():
            refused = job.exception()
            if isinstance(refused, ConfigError) and self._never_started(task):
                task.error = str(refused)
                task.done.set()
                with self._lock:
                    self._tasks.pop(task.id, None)
                raise refused
        job.add_done_callback(lambda finished: self._finish(task, finished))

    def _never_started(self, task: Task) -> bool:
        """True when a refused task left nothing behind: a run row its protocol never began
        is deleted (it was opened for the run, which was refused before any call)."""
        if task.kind != "run":
            return task.kind == "experiment"
        if self.store.run_state(task.id)["status"] != "running":
            return False  # the protocol began and recorded its failure
        self.store.delete([task.id])
        return True

    def _finish(self, task: Task, job: asyncio.Future[Any]) -> None:
        error = None if job.cancelled() else job.exception()
        if error is not None and not isinstance(error, RunStopped):
            task.error = f"{type(error).__name__}: {error}"
            if task.kind == "run":  # never left `running`: a run that cannot end is failed
                self.store.end_run(task.id, "failed", task.error)
        task.done.set()

    # ------------------------------------------------------------------ watching
    def task(self, task_id: str) -> Task | None:
        """This runner's task `task_id` (a run id, an experiment id or `DEMO`), finished ones
        too; None when this runner never started it."""
        with self._lock:
            return self._tasks.get(task_id)

    def live(self) -> list[str]:
        """Ids of the runs this runner is running (re-runs included, demo runs not)."""
        with self._lock:
            ids = [key for key, t in self._tasks.items() if t.kind == "run" and t.alive]
        return [run_id for run_id in ids if self.store.exists(run_id)]

    def stop(self, task_id: str, actor: Actor = LOCAL) -> bool:
        """Ask a task to stop: a run ends `interrupted` after its call in flight, an experiment
        `stopped` (a resume redoes its runs in flight), the demo after its current run. A run
        this runner does not hold (another process's, or one stuck) is marked `interrupted`
        in the store at once, and its owner stops at its next turn. False when nothing ran."""
        require(actor, "stop runs")
        task = self.task(task_id)
        if task is not None and task.alive:
            task.stop_event.set()
            return True
        return self.store.stop_run(task_id) if task is None or task.kind == "run" else False

    def delete(self, run_ids: Iterable[str], actor: Actor = LOCAL) -> int:
        """Delete stored runs (with their turns), stopping first those this runner runs;
        returns how many runs were deleted."""
        require(actor, "delete runs")
        ids = list(run_ids)
        for run_id in ids:
            task = self.task(run_id)
            if task is not None and task.alive:
                task.stop_event.set()
        return int(self.store.delete(ids))

    def wait(self, task_id: str, timeout: float = 120.0) -> str:
        """Block until the task is over (or `timeout`); returns its status. A run this runner
        does not hold is waited for in the store."""
        task = self.task(task_id)
        if task is not None:
            task.done.wait(timeout)
            return str(self.progress(task_id)["status"])
        deadline = time.monotonic() + timeout
        status = self.store.run_state(task_id)["status"]
        while status == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
            status = self.store.run_state(task_id)["status"]
        return str(status)

    def progress(self, task_id: str, protocol: str = "") -> dict[str, Any]:
        """A task's live state. For a run (any stored run): status, calls done / estimated,
        the current phase and the turns so far, read through the runner's `TurnFeed` (only
        the turns written since the last poll). `protocol` names a run's protocol when this
        runner did not start it (for its phases). For an experiment: its `Progress` as a
        dict; for the demo: runs done of planned, the runs made and the errors."""
        task = self.task(task_id)
        if task is not None and task.kind == "experiment":
            return asdict(experiment_progress(self.store, task_id))
        if task is not None and task.kind == "demo":
            status = "running" if task.alive else (
                "interrupted" if task.stop_event.is_set() else "completed")
            return {"id": task.id, "status": status, "done": task.finished,
                    "total": task.total, "fraction": min(1.0, task.finished / task.total),
                    "run_ids": list(task.run_ids), "errors": list(task.errors)}
        return self._run_progress(task_id, task, protocol)

    def _run_progress(self, run_id: str, task: Task | None, protocol: str) -> dict[str, Any]:
        live = self.feed.poll(run_id)
        status, turns = live.state["status"], live.turns
        done = len(turns)
        estimated = task.estimated_calls if task is not None else 0
        if status == "completed":
            estimated = max(estimated, done)
        phases = _phases(task.protocol if task is not None else protocol)
        phase = turns[-1]["phase"] if turns else (phases[0] if phases else "")
        return {"run_id": run_id, "status": status, "calls_done": done,
                "estimated_calls": estimated,
                "fraction": min(1.0, done / estimated) if estimated else 0.0,
                "phase": phase, "phases": phases,
                "phase_number": phases.index(phase) + 1 if phase in phases else 0,
                "error": live.state["error"] or (task.error if task is not None else ""),
                "stopping": bool(task is not None and task.alive and task.stop_event.is_set()),
                "turns": turns}


def _phases(protocol: str) -> list[str]:
    try:
        return list(get_protocol(protocol).phases) if protocol else []
    except ConfigError:
        return []

