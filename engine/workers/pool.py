"""The pool's job queue: procrastinate over the store's PostgreSQL database, its one task
(`run_cell`), and what the CLI and the Experiments page do with it (submit, stop, settle).

procrastinate (a well-kept, async-native, PostgreSQL-only job queue) keeps its tables in the
store's database, so the pool needs no other service. Each cell of an experiment is one job,
queued on its endpoint's queue (`parley-<endpoint>`, or `parley-default`), so a worker can
serve only some endpoints. procrastinate hands a job to one worker; the store's per-cell
guard (`engine.store.workers.CellLocks` and `take_cell`) makes sure that a cell that
finished never runs again, even when a job is retried or submitted twice.

A job whose payload names no cell of an existing experiment's plan (it did not come from
`submit`) is refused: it fails once, is logged once, and is not waited on (`PoisonJob`).
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl

import procrastinate
from procrastinate.jobs import Job, Status
from procrastinate.manager import JobManager
from procrastinate.schema import SchemaManager

from engine.experiments import budget as budgets
from engine.experiments.notices import notify_ended
from engine.experiments.planning import Plan, plan_of
from engine.experiments.runner import arun_cell, pending_cells
from engine.models import now
from engine.store import Store
from engine.store import workers as pool_store
from engine.store.experiments import claim, experiment_spent, get, row, set_unchanged, set_values
from engine.store.simulated import seat_models
from engine.store.workers import PoisonJob

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry

log = logging.getLogger("parley.worker")
QUEUE_PREFIX = "parley-"
DEFAULT_ENDPOINT = "default"
STOPPED = "stopped by the user"


def conninfo(url: str) -> str:
    """The psycopg connection string for a PostgreSQL store's URL (`postgresql+psycopg://`
    becomes `postgresql://`; everything else is kept). Any other store is refused before
    (`engine.store.workers.require_postgres`)."""
    return "postgresql://" + url.partition("://")[2]


def endpoint_of(config: Mapping[str, Any]) -> str:
    """The endpoint a configuration's calls go to: the first `?endpoint=NAME` among its
    model specs (its default model's, then its seats'), else `default`."""
    for spec in (str(config.get("model") or ""), *(m for _, m in seat_models(config))):
        name = dict(parse_qsl(spec.partition("?")[2])).get("endpoint")
        if name:
            return name
    return DEFAULT_ENDPOINT


def queue_of(config: Mapping[str, Any]) -> str:
    """The queue a configuration's cells go to."""
    return QUEUE_PREFIX + endpoint_of(config)


TOUCH_EVERY = 1.0  # seconds: a worker's and an experiment's heartbeat, written as cells end


@dataclass
class WorkerState:
    """What one worker process's jobs share: its store, its endpoints, its row's id, the
    session holding its cells' locks, and the plans of the experiments it ran cells of."""

    store: Store
    endpoints: EndpointRegistry | None = None
    worker_id: str = ""
    sink: Store | None = None  # the store runs are written through (group commit); `store` if None
    plans: dict[str, Plan] = field(default_factory=dict)  # experiments' plans, by id
    unheld: set[int] = field(default_factory=set)  # running jobs seen without their lock
    locks: pool_store.CellLocks = field(init=False)  # its cells' locks, on one session
    touched: dict[str, float] = field(default_factory=dict)  # heartbeats written, by row
    # Each experiment's cells by configuration label, keyed by their locks' ids
    # (`pool_store.lock_id`): which configurations the cells in flight are of.
    cell_labels: dict[str, dict[int, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.locks = pool_store.CellLocks(self.store)

    def due(self, what: str) -> bool:
        """True (and noted) when `what`'s heartbeat was last written TOUCH_EVERY ago or
        more: 32 cells ending in a second write it once, not 32 times."""
        moment = time.monotonic()
        if moment - self.touched.get(what, -TOUCH_EVERY) < TOUCH_EVERY:
            return False
        self.touched[what] = moment
        return True


def plan_for(state: WorkerState, experiment_id: str) -> Plan:
    """An experiment's plan, read once per worker (a spec never changes once stored);
    `PoisonJob` when its stored spec cannot be read."""
    if experiment_id not in state.plans:
        found = row(state.store, experiment_id)
        if found["unreadable"]:
            raise PoisonJob(f"experiment {experiment_id!r} has a spec that cannot be read "
                            f"({str(found['unreadable'])[:80]})")
        state.plans[experiment_id] = plan_of(found["spec"])
    return state.plans[experiment_id]


T = TypeVar("T")


async def off_loop(call: Callable[..., T], *args: Any,
                   undo: Callable[[T], Any] | None = None) -> T:
    """`call(*args)` (the store's synchronous queries) in a thread, so that the event loop
    goes on with the worker's other cells and its job fetching while it waits on the
    database. Cancelled meanwhile, it lets the call end before it gives way: the lock a
    cell's bookkeeping needs is never left while that bookkeeping still runs; `undo` is then
    called with what the call returned (a lock it took is left)."""
    task = asyncio.ensure_future(asyncio.to_thread(call, *args))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait({task})
        if undo is not None and not task.cancelled() and task.exception() is None:
            undo(task.result())
        raise


def _look_up(state: WorkerState, job: pool_store.CellJob
             ) -> tuple[pool_store.PoolState, Plan]:
    """A job's experiment (its status, host, who started it: its runs record that name,
    not this worker's, and its budget as stored now) and plan; `PoisonJob` when the job
    names no cell of an existing experiment's plan."""
    experiment_id, target = job.experiment_id, job.cell
    found = pool_store.pool_state(state.store, experiment_id)
    if found is None:
        raise PoisonJob(f"there is no experiment {experiment_id!r}")
    experiment = plan_for(state, experiment_id)
    if not experiment.holds(target):
        q, c, r = experiment.shape
        raise PoisonJob(f"{target.tag} is outside the plan of experiment {experiment_id!r}"
                        f" ({q} question(s) x {c} configuration(s) x {r} repeat(s))")
    return found, experiment


@dataclass(frozen=True)
class Claim:
    """What `_claim` did: the cell taken, its lock held (`held`), or why not."""

    skipped: str = ""  # why this job does not run the cell
    wait: bool = False  # the budget waits for the cells in flight to show what they cost
    stop: str = ""  # the budget is spent: the stopped experiment's error

    @property
    def held(self) -> bool:
        return not (self.skipped or self.wait or self.stop)


def cells_in_flight(state: WorkerState, experiment_id: str, figures: Any,
                    held: list[int]) -> tuple[str, ...]:
    """The configuration label of each cell of the experiment in flight on any worker: per
    configuration, the more of its cells whose lock is held (`held`, from `budget_turn`) and
    its runs stored running (`figures.labels`)."""
    if experiment_id not in state.cell_labels:
        plan = plan_for(state, experiment_id)
        state.cell_labels[experiment_id] = {
            pool_store.lock_id(cell): str(plan.configs[cell.c]["label"])
            for cell in plan.cells()}
    labels = state.cell_labels[experiment_id]
    locked = Counter(labels[key] for key in held if key in labels)
    out: list[str] = []
    for label in sorted({*locked, *figures.labels}):
        running = figures.labels[label].running if label in figures.labels else 0
        out += [label] * max(locked[label], running)
    return tuple(out)


def _claim(state: WorkerState, experiment_id: str, target: Any,
           budget: float | None = None,
           estimates: Mapping[str, float | None] | None = None) -> Claim:
    """Take the cell's lock and then the cell (`take_cell`), in one trip to a thread. With a
    `budget`, the lock is taken in the experiment's budget turn (`budget_turn`), only when
    the spend allows one more cell of its configuration beside the cells in flight on every
    worker: the next job's turn, on any worker, then counts it in flight. `estimates` is
    the preflight's cost of a run of each configuration (`budget.estimates_of`)."""
    locks = state.locks
    if budget is None:
        got = locks.acquire(experiment_id, target)
    else:
        label = str(plan_for(state, experiment_id).configs[target.c]["label"])
        with pool_store.budget_turn(state.store, experiment_id, budgets.ENOUGH) as (
                figures, held):
            now = budgets.spend(figures, estimates or {},
                                cells_in_flight(state, experiment_id, figures, held))
            decision = now.decide(budget, label)
            if decision == "wait":
                return Claim(wait=True)
            if decision == "stop":
                return Claim(stop=now.reason(budget, label))
            got = locks.acquire(experiment_id, target)
    if not got:
        return Claim("skipped: another worker runs this cell")
    try:
        if pool_store.take_cell(state.store, experiment_id, target):
            return Claim()
    except BaseException:
        locks.release(experiment_id, target)
        raise
    locks.release(experiment_id, target)
    return Claim("skipped: the cell already completed")


async def _touch(state: WorkerState, experiment_id: str) -> None:
    """The worker's and the experiment's heartbeats as a cell ends, each once a second at
    most (housekeeping writes them every heartbeat besides), each in a thread only when due:
    `due` notes the write, so it is asked once per heartbeat."""
    if state.due(state.worker_id):
        await off_loop(pool_store.beat, state.store, state.worker_id)
    if state.due(experiment_id):
        await off_loop(lambda: set_values(state.store, experiment_id, heartbeat_at=now()))


def settle_after(state: WorkerState, job: Job) -> str | None:
    """Settle the experiment of a cell job whose end is stored (`Gatekeeper.finish_job`).
    Checked only once the job's own end is committed, of two jobs ending together at least
    one sees the other ended too, so the last job always settles its experiment (checked
    from inside the job, both could see the other still running, and the experiment waited
    for a worker's housekeeping). A job naming no cell settles nothing (housekeeping does)."""
    try:
        cell_job = pool_store.read_job(job.task_kwargs)
        plan = plan_for(state, cell_job.experiment_id)
    except PoisonJob:
        return None
    return settle(state.store, cell_job.experiment_id, mine=job.id, plan=plan)


async def run_cell(context: Any, /, **payload: Any) -> str:
    """The queue's task: run one cell unless its experiment is no longer running, another
    worker holds the cell, or the cell already has a completed run. Says what it did. A job
    naming no cell of an existing experiment's plan raises `PoisonJob`, logged here: it fails
    once (the retry strategy retries only a lost database). The store's queries before and
    after the cell run in threads (`off_loop`): the experiment's state and budget in one
    read, then the cell's lock (one round trip on the worker's lock session,
    `WorkerState.locks`, taken in the experiment's budget turn when it has a budget) and its
    check (`take_cell`) in one trip; a budget's stop message is given the spend once the
    cell's run is stored (`restate_spend`); the experiment is settled once the job's end is
    stored (`settle_after`)."""
    state: WorkerState = context.additional_context["parley"]
    store, locks = state.store, state.locks
    # `context` is positional-only, so that a payload's own "context" key is just a bad key.
    try:
        job = pool_store.read_job(payload)
        found, experiment = await off_loop(_look_up, state, job)
    except PoisonJob as problem:
        log.error("job %s refused: %s", context.job.id, problem)  # once, on one line
        raise
    experiment_id, target = job.experiment_id, job.cell
    if found.skipped:
        return found.skipped
    # The budget as stored now: a resume may have given the experiment a new one since this
    # worker read its plan (`set_budget`); the rest of a spec never changes.
    claim = await claim_cell(context, state, experiment_id, target, experiment, found.budget)
    if not claim.held:
        return claim.skipped
    try:
        outcome = await arun_cell(experiment, experiment_id, target,
                                  store=state.sink or store, stop_event=threading.Event(),
                                  endpoints=state.endpoints, started_by=found.started_by)
    finally:
        await off_loop(locks.release, experiment_id, target)
    if found.budget is not None:  # a budget that stopped it meanwhile: the spend now
        await off_loop(restate_spend, store, experiment_id)
    if isinstance(outcome.exception, pool_store.DATABASE_ERRORS):
        raise outcome.exception  # the database went away mid-cell: the job is tried again
    if outcome.status == "fatal":
        await astop(context.app, store, experiment_id, status="failed", error=outcome.error)
    else:
        await _touch(state, experiment_id)
    return outcome.status + (f": {outcome.error}" if outcome.error else "")


async def claim_cell(context: Any, state: WorkerState, experiment_id: str, target: Any,
                     experiment: Plan, budget: float | None) -> Claim:
    """Take the cell (`_claim`), with its lock held when `held`. With a budget
    (`engine.experiments.budget`), after waiting while cells in flight on any worker decide
    it (and no cell starts once the experiment was stopped meanwhile); once the budget stops
    it (the spend reached it, the cell would pass it with none in flight, or a cost is
    unknown), the experiment is stopped (reason `budget`) with its running cells left to
    finish and its queued jobs cancelled, and the claim says so."""
    locks = state.locks

    def leave(claim: Claim) -> None:
        if claim.held:
            locks.release(experiment_id, target)
    while True:
        if budget is not None and state.sink is not None:
            # On the event loop, as the batch's own flushes are: a flush in a thread took
            # the same queued turns as one on the loop, and both wrote them (a society's
            # 18 turns stored as 21, and the budget counted the copies as spent).
            state.sink.flush_turns()
        claim = await off_loop(_claim, state, experiment_id, target, budget,
                               budgets.estimates_of(experiment), undo=leave)
        if claim.stop:
            await astop(context.app, state.store, experiment_id, error=claim.stop,
                        finish_running=True)
            # the cells in flight may all have ended before the stop was stored
            await off_loop(restate_spend, state.store, experiment_id)
            return Claim("skipped: the experiment's budget is spent")
        if not claim.wait:
            return claim
        await asyncio.sleep(0.2)
        # Stopped meanwhile (by someone, or by another job's budget): no cell starts.
        found = await off_loop(pool_store.pool_state, state.store, experiment_id)
        if found is None or found.skipped:
            return Claim(found.skipped if found else "skipped: the experiment is gone")


def restate_spend(store: Store, experiment_id: str) -> None:
    """Rewrite a budget stop's message (`budget.restated`) with the experiment's spend and
    cells in flight as they are now: every job that ends a cell of a budgeted experiment
    calls this once its run is stored and its lock left, and so does the job that stopped
    it once the stop is stored, under the experiment's lock; so the last of them, once the
    cells in flight have ended, leaves the final spend. Nothing for any other status."""
    def mine() -> str | None:
        found = pool_store.pool_state(store, experiment_id)
        if found is None or found.status != "stopped" or not found.error.startswith(
                budgets.REASON + ":"):
            return None
        return found.error
    if mine() is None:  # the usual case, read without the lock
        return
    with pool_store.settle_lock(store, experiment_id):
        error = mine()
        if error is None:
            return
        now = budgets.restated(error, experiment_spent(store, experiment_id),
                               len(pool_store.held_cells(store, experiment_id)))
        if now != error:
            set_values(store, experiment_id, error=now)


# procrastinate's fetch (`procrastinate_fetch_job_v2`, a volatile function: each call sees the
# jobs the calls before it took) called up to :count times in one statement; OFFSET 0 keeps
# the planner from expanding `(job).*` into one call per column.
FETCH_MANY = """
SELECT (job).id, (job).status, (job).task_name, (job).priority, (job).lock,
       (job).queueing_lock, (job).args, (job).scheduled_at, (job).queue_name,
       (job).attempts, (job).worker_id
  FROM (SELECT procrastinate_fetch_job_v2(%(queues)s::varchar[], %(worker_id)s) AS job
          FROM generate_series(1, %(count)s) OFFSET 0) AS fetched
 WHERE (job).id IS NOT NULL"""


def _experiment_of(job: Job) -> str:
    """The experiment a job's payload names ("" when it names none as text)."""
    payload = job.task_kwargs
    found = payload.get("experiment_id") if isinstance(payload, dict) else None
    return found if isinstance(found, str) else ""


class Gatekeeper(JobManager):
    """procrastinate's job manager, fetching several jobs in one round trip; in a worker
    (`state` given), a cell job's end, once stored, settles its experiment when it was the
    last (`settle_after`). docs/workers.md says why each is needed.

    procrastinate fetches one job per round trip, one at a time: a worker running 32 cells
    in one busy event loop started about 30 a second at most, so it ran 12 at once, not 32.
    With `slots` (the worker's concurrency) above 1, one fetch takes as many jobs as the
    worker has free slots (its slots less the jobs handed out and not yet ended) and hands
    them out one by one as procrastinate asks, at once: never more than it can start, so no
    job waits `doing` behind a busy slot.

    A job that ends while another job of its experiment is still with this worker (handed
    out, or fetched and not yet handed out) leaves the settling to that one, which ends
    after it: of 32 jobs of one experiment ending together, one asks the database whether
    the experiment is done, not 32."""

    def __init__(self, connector: Any, state: WorkerState | None = None,
                 slots: int = 1) -> None:
        super().__init__(connector)
        self.state = state
        self.slots = slots
        self._taken: deque[Job] = deque()  # fetched, not yet handed out
        self._held: Counter[str] = Counter()  # handed out, not yet ended, by experiment
        self._worker_id: int | None = None

    async def _take(self, queues: Iterable[str] | None, worker_id: int) -> None:
        count = max(1, self.slots - sum(self._held.values()))
        if count == 1:
            job = await super().fetch_job(queues, worker_id)
            self._taken.extend([job] if job is not None else [])
            return
        rows = await self.connector.execute_query_all_async(
            query=FETCH_MANY, queues=None if queues is None else list(queues),
            worker_id=worker_id, count=count)
        self._taken.extend(Job.from_row(row) for row in rows)

    async def fetch_job(self, queues: Iterable[str] | None, worker_id: int) -> Job | None:
        """The next job to run, as procrastinate's."""
        if worker_id != self._worker_id:  # a new procrastinate worker: nothing is out
            self._worker_id = worker_id
            self._held.clear()
            self._taken.clear()  # the one before stopped: they are its stalled jobs
        if not self._taken:
            await self._take(queues, worker_id)
        if not self._taken:
            return None
        job = self._taken.popleft()
        self._held[_experiment_of(job)] += 1
        return job

    async def give_back(self) -> None:
        """Queue again the jobs fetched and not handed out (the worker stopped). With the
        database away they are left to the stalled jobs' check, logged here."""
        try:
            while self._taken:
                job = self._taken.popleft()
                assert job.id is not None
                await self.retry_job_by_id_async(job.id, retry_at=now())
        except Exception as exc:  # noqa: BLE001 - stalled jobs then: retried all the same
            log.warning("could not queue fetched jobs again (%s: %s)", type(exc).__name__,
                        pool_store.brief(str(exc), 200))

    async def retry_job(self, job: Job, retry_at: Any = None, priority: int | None = None,
                        queue: str | None = None, lock: str | None = None) -> None:
        """Queue a job handed out again, as procrastinate's."""
        self._held -= Counter((_experiment_of(job),))  # no longer with this worker
        await super().retry_job(job, retry_at=retry_at, priority=priority, queue=queue,
                                lock=lock)

    async def finish_job(self, job: Job, status: Status, delete_job: bool) -> None:
        """Store the job's end, as procrastinate's; then, for a cell job that ran to its end,
        settle its experiment if it was the last job (a failure there is logged:
        housekeeping settles it within a heartbeat)."""
        await super().finish_job(job, status, delete_job)
        self._held -= Counter((_experiment_of(job),))  # once its end is stored: see above
        if self.state is None or job.task_name != pool_store.TASK \
                or status != Status.SUCCEEDED:  # a refused job: housekeeping settles
            return
        experiment = _experiment_of(job)
        if self._held[experiment] or any(_experiment_of(j) == experiment for j in self._taken):
            return  # a job of its experiment ends after it here, and settles
        try:
            await off_loop(settle_after, self.state, job)
        except Exception as exc:  # noqa: BLE001 - the job's end is stored; housekeeping settles
            log.warning("settling after job %s failed (%s: %s); housekeeping will", job.id,
                        type(exc).__name__, pool_store.brief(str(exc), 200))


def app_for(store: Store, state: WorkerState | None = None, slots: int = 1
            ) -> procrastinate.App:
    """The procrastinate app over the store's database, with the `run_cell` task; a worker
    passes its `state` (its jobs settle their experiments) and its concurrency as `slots`
    (the jobs one fetch may take)."""
    pool_store.require_postgres(store)
    # Payloads are decoded without raising, each as a mapping (`job_args`): a job Python
    # cannot read must not stop fetching, nor be left `doing` by procrastinate's logging.
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(
        conninfo=conninfo(store.url), json_loads=pool_store.job_args))
    app.job_manager = Gatekeeper(app.connector, state, slots)  # before the task is bound to it
    # A job that loses the database is tried again (the cell guard makes that safe).
    retry = procrastinate.RetryStrategy(max_attempts=6, exponential_wait=2,
                                        retry_exceptions=pool_store.DATABASE_ERRORS)
    app.task(name=pool_store.TASK, pass_context=True, retry=retry)(run_cell)
    return app


def ensure_schema(store: Store) -> bool:
    """Create procrastinate's tables in the store's database unless they exist (idempotent,
    safe when several workers start at once). Returns True when this call made them."""
    return pool_store.apply_queue_schema(store, SchemaManager.get_schema())


def settle(store: Store, experiment_id: str, mine: int | None = None,
           plan: Plan | None = None) -> str | None:
    """Set a pool experiment's final status when no job of it is left that can run (besides
    `mine`, the job calling): `completed` when every cell has a completed run, else
    `incomplete`; its error also counts the jobs naming it that were refused (`PoisonJob`).
    Whoever ends last sets it (a job once its end is stored: `settle_after`); two at once
    are kept apart by the experiment's lock, and a worker's periodic check settles what is
    left open (a refused job, a settle that failed). `plan` is
    the experiment's (read when None). Returns the status set, or None."""
    shape = (plan or plan_of(row(store, experiment_id)["spec"])).shape

    def others() -> bool:
        return pool_store.has_open_jobs(store, experiment_id, besides=mine, shape=shape)
    if others():  # the usual case, read without the lock: not the end yet
        return None
    with pool_store.settle_lock(store, experiment_id):
        found = row(store, experiment_id)
        if found["status"] != "running" or found["host"] != pool_store.POOL_HOST:
            return None
        if others():
            return None
        left = len(pending_cells(store, experiment_id))
        refused = pool_store.refused_jobs(store, experiment_id, shape)
        notes = [f"{left} run(s) did not complete; resume to retry them"] if left else []
        if refused:  # every cell may have run; still, something asked for more, and was told no
            notes.append(f"{refused} job(s) naming it were refused (a malformed cell, or one "
                         "outside its plan; the workers' log names each)")
        status = "incomplete" if left else "completed"
        set_values(store, experiment_id, status=status, error="; ".join(notes),
                   finished_at=now(), heartbeat_at=now())
    notify_ended(store, experiment_id)  # the environment's PARLEY_NOTIFY_URL, if any
    return status


def submit(store: Store, experiment_id: str, app: procrastinate.App | None = None,
           started_by: str = "") -> int:
    """Queue the experiment's pending cells (those with no completed run and no job queued
    or running) as jobs for the pool and mark the experiment running there, started by
    `started_by` (its runs record it, whichever worker runs them); returns how many were
    queued. `ConfigError` on SQLite, or when a process runs the experiment in process."""
    pool_store.require_postgres(store)
    ensure_schema(store)
    app = app or app_for(store)
    set_unchanged(store, experiment_id)
    experiment: Plan = plan_of(get(store, experiment_id)["spec"])
    # Under the experiment's lock, so that no worker settles it between the claim and the
    # jobs' arrival (it would find it running with nothing queued).
    with pool_store.settle_lock(store, experiment_id):
        claim(store, experiment_id, started_by, pool=True)
        queued = {j["cell"] for j in pool_store.open_jobs(store, experiment_id)}
        by_queue: dict[str, list[dict[str, Any]]] = {}
        for cell in pending_cells(store, experiment_id):
            if cell.tag not in queued:
                by_queue.setdefault(queue_of(experiment.configs[cell.c]), []).append(
                    {"experiment_id": experiment_id, "cell": cell.tag})
        with app.open():
            for queue, jobs in by_queue.items():
                app.configure_task(pool_store.TASK, queue=queue).batch_defer(*jobs)
    count = sum(len(jobs) for jobs in by_queue.values())
    if not count:  # nothing pending, or only jobs that can never run: the end already
        settle(store, experiment_id, plan=experiment)
    return count


async def astop(app: procrastinate.App, store: Store, experiment_id: str, *,
                status: str = "stopped", error: str = STOPPED,
                finish_running: bool = False) -> int:
    """Stop a pool experiment (`app` open): mark it `status` (so no job runs a cell of it
    again), stop its running cells (their runs end `interrupted`, their jobs are aborted)
    and cancel its queued jobs. Returns how many jobs were cancelled or aborted.
    `finish_running` (a spent budget) lets the running cells finish: only queued jobs go."""
    set_values(store, experiment_id, status=status, error=error[:2000], finished_at=now(),
               heartbeat_at=now())
    jobs = pool_store.open_jobs(store, experiment_id)
    if finish_running:
        jobs = [j for j in jobs if j["status"] != "doing"]
    running = {j["cell"] for j in jobs if j["status"] == "doing"}  # none when finishing
    for run in pool_store.running_runs(store, experiment_id):
        if run["cell"] in running:
            store.stop_run(run["id"], error)
    count = 0
    for job in jobs:  # a job a worker took meanwhile skips the stopped experiment itself
        count += await app.job_manager.cancel_job_by_id_async(
            job["id"], abort=job["status"] == "doing")
    await asyncio.to_thread(notify_ended, store, experiment_id)
    return count


def stop(store: Store, experiment_id: str) -> int:
    """Stop a pool experiment from outside the pool (the CLI, the Experiments page)."""
    app = app_for(store)

    async def go() -> int:
        async with app.open_async():
            return await astop(app, store, experiment_id)
    return asyncio.run(go())
