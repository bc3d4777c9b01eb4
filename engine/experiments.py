"""Experiments: a question set x saved configurations x repeats, run, resumed and compared.

An experiment is stored once (the `experiments` table holds its spec: questions,
configurations, repeats, concurrency) and each planned cell (question x configuration x
repeat) is a run carrying the experiment's id and a `cell:Q:C:R` tag. Completion is derived
from the runs, never kept twice: resuming runs exactly the cells with no `completed` run, and
the stale (interrupted or failed) runs of a cell that is redone are kept, tagged `superseded`.
All runs of an experiment share one event loop; a semaphore-like pool of `concurrency` workers
bounds how many runs are in flight, and each run still makes its independent calls at once.

Results are per configuration label: accuracy with a Wilson interval, confidence levels,
calibration of each confidence signal, mind changes, the final answer against the round-one
vote, tokens, latency and calls; and a paired comparison of two configurations by sign test.
The arithmetic lives in `engine.stats`.
"""
from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import pandas as pd
from sqlalchemy import select, update

from . import qsets, stats
from .calls import RunStopped
from .models import ConfigError, now
from .store import STALE_AFTER, ExperimentRow, RunRow, _aware, _pid_alive, strip_secrets

DEFAULT_CONCURRENCY = 4
MAX_CONCURRENCY = 64
MAX_REPEATS = 100
MAX_RUNS = 20_000
SUPERSEDED = "superseded"
SIGNALS = {"consensus": "consensus ratio (share of the final vote for the winner)",
           "judge": "judge confidence (the judge's own CONFIDENCE)"}
RUNS_PAGE = "runs"  # the Runs page's URL path; `?run=ID` opens one run


# --------------------------------------------------------------------------- cells and plans
@dataclass(frozen=True, order=True)
class Cell:
    """One planned run: question index `q`, configuration index `c`, repeat `r` (from 0)."""

    q: int
    c: int
    r: int

    @property
    def tag(self) -> str:
        return f"cell:{self.q}:{self.c}:{self.r}"

    @classmethod
    def from_tags(cls, tags: Sequence[str]) -> "Cell | None":
        for tag in tags or ():
            parts = str(tag).split(":")
            if len(parts) == 4 and parts[0] == "cell" and all(p.isdigit() for p in parts[1:]):
                return cls(int(parts[1]), int(parts[2]), int(parts[3]))
        return None


@dataclass(frozen=True)
class Plan:
    """A checked experiment spec and its preflight: runs, calls and tokens before it starts."""

    name: str
    source: str
    questions: list[dict[str, str | None]]
    configs: list[dict[str, Any]]
    repeats: int
    concurrency: int
    per_config: list[dict[str, Any]]

    @property
    def runs(self) -> int:
        return len(self.questions) * len(self.configs) * self.repeats

    @property
    def calls(self) -> int:
        return sum(p["calls"] for p in self.per_config)

    @property
    def tokens(self) -> int:
        return sum(p["tokens"] for p in self.per_config)

    @property
    def labels(self) -> list[str]:
        return [c["label"] for c in self.configs]

    def spec(self) -> dict[str, Any]:
        """What the experiments table stores (and `plan` reads back unchanged)."""
        return {"name": self.name, "source": self.source, "questions": self.questions,
                "configs": self.configs, "repeats": self.repeats,
                "concurrency": self.concurrency}

    def cells(self) -> Iterator[Cell]:
        """Every cell, repeat-major: the first repeat of every question comes first, so a
        stopped experiment has covered the questions evenly."""
        for r in range(self.repeats):
            for q in range(len(self.questions)):
                for c in range(len(self.configs)):
                    yield Cell(q, c, r)

    def preflight(self) -> dict[str, Any]:
        return {"runs": self.runs, "calls": self.calls, "tokens": self.tokens,
                "per_config": self.per_config}


def _whole(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number, got {value!r}", "input")
    if not low <= value <= high:
        raise ConfigError(f"{name} must be {low}..{high}, got {value}", "limit")
    return value


def resolve_configs(items: Any, store: Any = None) -> list[dict[str, Any]]:
    """Configurations from a spec: inline dicts (each with a `label`, or one is made from the
    protocol) or labels of configurations saved in the library."""
    from . import library
    if not isinstance(items, list) or not items:
        raise ConfigError("an experiment needs a list of configurations (inline mappings or "
                          "labels of saved configurations)", "input")
    out: list[dict[str, Any]] = []
    for number, item in enumerate(items, 1):
        if isinstance(item, str):
            if store is None:
                raise ConfigError(f"configuration {number} names the saved configuration "
                                  f"{item!r}, but no store was given", "input")
            config = library.load_config(store, item)
        elif isinstance(item, Mapping):
            # a plain, private copy without keys: they come from the environment, never
            # from the experiments table (as for runs)
            config = strip_secrets(json.loads(json.dumps(dict(item))))
            config["label"] = str(config.get("label") or
                                  f"{config.get('protocol', 'config')}-{number}").strip()
        else:
            raise ConfigError(f"configuration {number} must be a mapping or a saved label, "
                              f"got {type(item).__name__}", "input")
        out.append(config)
    labels = [c["label"] for c in out]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise ConfigError(f"two configurations are labelled {twice[0]!r}; labels must be unique "
                          "(results are compared by label)", "input")
    return out


def config_choices(store: Any, model: str = "simulated") -> dict[str, dict[str, Any]]:
    """What an experiment can compare: the saved configurations by label, then every
    protocol's defaults (labelled `PROTOCOL · defaults`, on `model`)."""
    from .library import configs
    from .protocols import REGISTRY
    out = {c["label"]: dict(c["config"]) for c in configs(store)}
    for name in REGISTRY:
        label = f"{name} · defaults"
        out.setdefault(label, {"protocol": name, "label": label,
                               "model": (model or "").strip() or "simulated"})
    return out


def _check_models(config: Mapping[str, Any]) -> None:
    """Resolve every seat's model now, so a missing key or package fails before any run."""
    from .protocols import get_protocol, seats_from_config
    from .providers import resolve_model
    spec = get_protocol(str(config.get("protocol", "")))
    kwargs = seats_from_config(spec, dict(config))
    for slot in spec.slots:
        seats = kwargs.get(slot.name)
        for seat in seats if isinstance(seats, list) else [seats]:
            if seat is not None:
                resolve_model(seat.model, seat.temperature)


def plan(spec: Mapping[str, Any], store: Any = None, base_dir: str | Path | None = None) -> Plan:
    """Check an experiment spec and count what it will cost, before anything runs.

    `spec` keys: `questions` (a bundled set's name, or a list of strings / `{question,
    expected}` mappings) or `questions_file` (a CSV / JSONL path, relative to `base_dir`);
    `configs` (inline configurations or saved labels); `repeats` (default 1); `concurrency`
    (runs in flight, default 4); `name`. Raises `ConfigError` naming what to change.
    """
    if not isinstance(spec, Mapping):
        raise ConfigError("an experiment spec must be a mapping", "input")
    known = {"name", "questions", "questions_file", "configs", "repeats", "concurrency",
             "source"}
    unknown = sorted(str(k) for k in spec if k not in known)
    if unknown:
        raise ConfigError(f"an experiment spec has no key {unknown[0]!r}; keys are "
                          f"{', '.join(sorted(known - {'source'}))}", "input")
    given, path = spec.get("questions"), spec.get("questions_file")
    if (given is None) == (path is None):
        raise ConfigError("give exactly one of questions (a bundled set's name, or a list) "
                          "and questions_file (a CSV or JSONL file)", "input")
    if path is not None:
        full = Path(base_dir or ".") / str(path)
        items = qsets.load_file(full)
        source = f"file:{Path(str(path)).name}"
    elif isinstance(given, str):
        items = qsets.load_bundled(given)
        source = f"bundled:{given.strip().lower()}"
    else:
        items = qsets.from_records(given, "questions")
        source = str(spec.get("source") or "inline")
    repeats = _whole(spec.get("repeats", 1), "repeats", 1, MAX_REPEATS)
    concurrency = _whole(spec.get("concurrency", DEFAULT_CONCURRENCY), "concurrency", 1,
                         MAX_CONCURRENCY)
    configs = resolve_configs(spec.get("configs"), store)
    per_config = _costs(configs, len(items) * repeats, check=True)
    name = str(spec.get("name") or "").strip() or \
        f"{source.split(':')[-1]} x {len(configs)} configuration{'s' * (len(configs) > 1)}"
    result = Plan(name[:200], source, [i.as_dict() for i in items], configs, repeats,
                  concurrency, per_config)
    if result.runs > MAX_RUNS:
        raise ConfigError(f"this experiment plans {result.runs} runs; the limit is {MAX_RUNS} "
                          "(use fewer questions, configurations or repeats)", "limit")
    return result


def _costs(configs: Sequence[Mapping[str, Any]], runs: int,
           check: bool = False) -> list[dict[str, Any]]:
    """Per configuration: its `runs`, calls per run (`protocols.estimate`, what it makes when
    nothing fails), calls and tokens in all. `check` also validates prompt overrides and
    resolves every seat's model, for a spec that was never run."""
    from .library import validate_config
    from .protocols import estimate
    out = []
    for config in configs:
        try:
            cost = validate_config(config) if check else estimate(dict(config))
            if check:
                _check_models(config)
        except ConfigError as exc:
            raise ConfigError(f"configuration {config['label']!r}: {exc}", exc.code) from None
        out.append({"label": config["label"], "protocol": config["protocol"], "runs": runs,
                    "calls_per_run": cost["calls"], "calls": runs * cost["calls"],
                    "tokens": runs * cost["tokens"]})
    return out


def _plan_of(spec: Mapping[str, Any]) -> Plan:
    """A stored spec back as a `Plan` (its configs were checked when it was created)."""
    return Plan(spec["name"], spec["source"], spec["questions"], spec["configs"],
                spec["repeats"], spec["concurrency"],
                _costs(spec["configs"], len(spec["questions"]) * spec["repeats"]))


# --------------------------------------------------------------------------- the table
def create(store: Any, experiment: Plan | Mapping[str, Any]) -> str:
    """Store an experiment (a `Plan`, or a spec to plan first) as `planned`; returns its id."""
    from sqlalchemy.orm import Session
    checked = experiment if isinstance(experiment, Plan) else plan(experiment, store)
    experiment_id = uuid4().hex[:12]
    with Session(store.engine) as session, session.begin():
        session.add(ExperimentRow(id=experiment_id, name=checked.name, status="planned",
                                  spec=json.dumps(checked.spec(), ensure_ascii=False),
                                  total=checked.runs, created_at=now()))
    return experiment_id


def _row(store: Any, experiment_id: str) -> dict[str, Any]:
    with store.engine.connect() as connection:
        row = connection.execute(select(ExperimentRow.__table__).where(
            ExperimentRow.id == experiment_id)).mappings().first()
    if row is None:
        raise ConfigError(f"no experiment {experiment_id!r}; list them with "
                          "python -m engine experiment list", "input")
    out = dict(row)
    out["spec"] = json.loads(out["spec"] or "{}")
    return out


def _live_status(row: Mapping[str, Any], host: str) -> str:
    """The stored status, except that a `running` experiment whose process is gone (or whose
    heartbeat stopped, on another host) reads as `interrupted`."""
    if row["status"] != "running":
        return row["status"]
    if row["host"] == host:
        return "running" if _pid_alive(row["pid"]) else "interrupted"
    beat = _aware(row["heartbeat_at"])
    return "running" if beat is not None and beat > now() - STALE_AFTER else "interrupted"


def get(store: Any, experiment_id: str) -> dict[str, Any]:
    """One experiment: its row with the spec parsed and the live status."""
    row = _row(store, experiment_id)
    row["status"] = _live_status(row, store.host)
    return row


def list_experiments(store: Any) -> pd.DataFrame:
    """All experiments, newest first: id, name, status, runs done / planned, created."""
    with store.engine.connect() as connection:
        rows = connection.execute(select(
            ExperimentRow.id, ExperimentRow.name, ExperimentRow.status, ExperimentRow.total,
            ExperimentRow.host, ExperimentRow.pid, ExperimentRow.heartbeat_at,
            ExperimentRow.created_at).order_by(ExperimentRow.created_at.desc())).mappings().all()
        counts: dict[str, set[str]] = {}
        for experiment_id, tags in connection.execute(
                select(RunRow.experiment_id, RunRow.tags).where(
                    RunRow.experiment_id.in_([r["id"] for r in rows]),
                    RunRow.status == "completed")):
            cell = Cell.from_tags(json.loads(tags or "[]"))
            if cell is not None:
                counts.setdefault(experiment_id, set()).add(cell.tag)
    return pd.DataFrame([{"id": r["id"], "name": r["name"],
                          "status": _live_status(r, store.host),
                          "done": len(counts.get(r["id"], ())), "runs": r["total"],
                          "created": _aware(r["created_at"])} for r in rows],
                        columns=["id", "name", "status", "done", "runs", "created"])


def _set(store: Any, experiment_id: str, **values: Any) -> None:
    with store.engine.begin() as connection:
        connection.execute(update(ExperimentRow).where(ExperimentRow.id == experiment_id)
                           .values(**values))


# --------------------------------------------------------------------------- progress
@dataclass
class Progress:
    """How far an experiment is: cells done of `total`, failures, time spent and to go."""

    experiment_id: str
    status: str
    total: int
    done: int = 0
    failed: int = 0
    interrupted: int = 0
    running: int = 0
    elapsed: float = 0.0
    remaining: float | None = None
    error: str = ""

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0

    def line(self) -> str:
        """One line for a terminal: bar, counts, elapsed and estimated time left."""
        width = 24
        filled = int(round(self.fraction * width))
        left = "?" if self.remaining is None else duration_text(self.remaining)
        return (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} runs, "
                f"{self.failed} failed, {duration_text(self.elapsed)} elapsed, ~{left} left")


def duration_text(seconds: float) -> str:
    """Seconds as `42s`, `3m07s` or `2h05m`."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _cell_runs(store: Any, experiment_id: str) -> list[dict[str, Any]]:
    """Every run of the experiment with its cell, oldest first (a light query: no results)."""
    with store.engine.connect() as connection:
        rows = connection.execute(select(
            RunRow.id, RunRow.status, RunRow.tags, RunRow.created_at, RunRow.finished_at)
            .where(RunRow.experiment_id == experiment_id)
            .order_by(RunRow.created_at, RunRow.id)).mappings().all()
    out = []
    for row in rows:
        tags = json.loads(row["tags"] or "[]")
        cell = Cell.from_tags(tags)
        if cell is not None:
            out.append({**row, "tags": tags, "cell": cell,
                        "superseded": SUPERSEDED in tags})
    return out


def progress(store: Any, experiment_id: str) -> Progress:
    """An experiment's progress read from the store (any process may be running it).

    done = cells with a completed run; failed / interrupted = runs that ended so and have not
    been superseded by a redo; elapsed = since the current (or last) start; remaining =
    cells left x elapsed / cells finished since that start.
    """
    store.reap()
    row = get(store, experiment_id)
    runs = _cell_runs(store, experiment_id)
    done = {r["cell"] for r in runs if r["status"] == "completed"}
    live = [r for r in runs if not r["superseded"] and r["cell"] not in done]
    out = Progress(experiment_id, row["status"], row["total"], len(done),
                   failed=sum(r["status"] == "failed" for r in live),
                   interrupted=sum(r["status"] == "interrupted" for r in live),
                   running=sum(r["status"] == "running" for r in runs), error=row["error"])
    started = _aware(row["started_at"])
    if started is not None:
        if row["status"] == "running":
            end = now()
        else:  # a crashed runner never wrote finished_at: its last sign of life counts
            end = max([_aware(t) for t in (row["finished_at"], row["heartbeat_at"],
                                            *(r["finished_at"] for r in runs)) if t] or
                      [started])
        out.elapsed = max(0.0, (end - started).total_seconds())
        recent = sum(1 for r in runs if r["status"] == "completed" and r["finished_at"]
                     and _aware(r["finished_at"]) >= started)
        if recent and row["status"] == "running":
            out.remaining = (out.total - out.done) * out.elapsed / recent
        elif out.done >= out.total:
            out.remaining = 0.0
    return out


# --------------------------------------------------------------------------- running
# Built once: statements with bound parameters compile once and are then cached.
class BatchedStore:
    """The store as an experiment's runs see it: turns are buffered and written together, one
    transaction every `window` seconds (and always before a run is finished or ended), instead
    of a transaction per turn. With dozens of runs in flight, per-turn commits made SQLite the
    bottleneck of the event loop (see `engine.bench_experiments`). A crash loses at most the
    turns of the last window; everything else passes through to the store."""

    def __init__(self, store: Any, window: float = 0.02):
        self.store, self.window = store, window
        self._pending: dict[tuple[str, int], tuple[str, Any]] = {}
        self._handle: asyncio.TimerHandle | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def recorder(self, run_id: str) -> Any:
        from .store import Recorder
        return Recorder(self, run_id)  # type: ignore[arg-type]

    def add_turn(self, run_id: str, turn: Any) -> None:
        self._pending[(run_id, turn.index)] = (run_id, turn)
        if self._handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._handle = loop.call_later(self.window, self.flush)

    def update_turn(self, run_id: str, turn: Any) -> None:
        if (run_id, turn.index) not in self._pending:  # a buffered turn is written as it is
            self.store.update_turn(run_id, turn)  # at flush time, with the update in it

    def flush(self) -> None:
        """Write every buffered turn, and the heartbeat of the runs they belong to."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if not self._pending:
            return
        batch = list(self._pending.values())
        self._pending.clear()
        self.store.add_turns(batch)

    def finish_run(self, run_id: str, result: Any) -> None:
        self.flush()
        self.store.finish_run(run_id, result)

    def end_run(self, run_id: str, status: str, error: str = "") -> None:
        self.flush()
        self.store.end_run(run_id, status, error)


HEARTBEAT_EVERY = 5.0  # seconds between heartbeats of a running experiment's row

_LIVE: dict[str, "ExperimentJob"] = {}  # background jobs started by `start`
_RUNNING: set[str] = set()  # experiments a runner of this process holds (any thread)
_LOCK = threading.Lock()


def _claim(store: Any, experiment_id: str) -> dict[str, Any]:
    """Mark the experiment `running` in this process, unless another live one holds it."""
    row = _row(store, experiment_id)
    status = _live_status(row, store.host)
    mine = row["host"] == store.host and row["pid"] == os.getpid()
    if status == "running" and not mine:
        raise ConfigError(f"experiment {experiment_id} is running in process {row['pid']} on "
                          f"{row['host']}; stop it there first", "input")
    with _LOCK:
        if experiment_id in _RUNNING:
            raise ConfigError(f"experiment {experiment_id} is already running here", "input")
    with store.engine.begin() as connection:
        changed = connection.execute(
            update(ExperimentRow).where(ExperimentRow.id == experiment_id,
                                        ExperimentRow.status == row["status"],
                                        ExperimentRow.pid == row["pid"])
            .values(status="running", host=store.host, pid=os.getpid(), error="",
                    started_at=now(), heartbeat_at=now(), finished_at=None)).rowcount
    if changed != 1:
        raise ConfigError(f"experiment {experiment_id} was started elsewhere just now", "input")
    with _LOCK:
        if experiment_id in _RUNNING:
            raise ConfigError(f"experiment {experiment_id} is already running here", "input")
        _RUNNING.add(experiment_id)
    return row


def _supersede(store: Any, run_ids: Sequence[str]) -> None:
    """Tag stale runs `superseded` (kept, but no longer counted as the cell's failure)."""
    if not run_ids:
        return
    with store.engine.begin() as connection:
        for run_id, tags in connection.execute(select(RunRow.id, RunRow.tags).where(
                RunRow.id.in_(list(run_ids)))).all():
            marked = sorted(set(json.loads(tags or "[]")) | {SUPERSEDED})
            connection.execute(update(RunRow).where(RunRow.id == run_id)
                               .values(tags=json.dumps(marked)))


def pending_cells(store: Any, experiment_id: str) -> list[Cell]:
    """The cells with no completed run, in plan order: what a resume will run."""
    experiment = _plan_of(_row(store, experiment_id)["spec"])
    done = {r["cell"] for r in _cell_runs(store, experiment_id) if r["status"] == "completed"}
    return [cell for cell in experiment.cells() if cell not in done]


async def arun_experiment(store: Any, experiment_id: str, *,
                          stop_event: threading.Event | None = None,
                          on_progress: Callable[[Progress], Any] | None = None,
                          run_store: Any = None) -> Progress:
    """Run (or resume) an experiment: every cell without a completed run, `concurrency` runs
    at a time in this event loop. Ends `completed`, `stopped` (stop_event), `incomplete`
    (some runs failed; resume retries them) or `failed` (a configuration error).

    `run_store` is where runs are written: by default a `BatchedStore` over `store`.
    """
    stop_event = stop_event or threading.Event()
    store.reap()  # runs left `running` by a dead process become `interrupted`, so are redone
    row = _claim(store, experiment_id)
    experiment = _plan_of(row["spec"])
    state = Progress(experiment_id, "running", experiment.runs)
    clock = time.monotonic()
    finished_here = 0
    fatal: list[str] = []
    failures: list[str] = []
    cells: Iterator[Cell] = iter(())
    sink = run_store or BatchedStore(store)
    beat = [time.monotonic()]
    from .protocols import arun_config

    def report() -> None:
        state.elapsed = time.monotonic() - clock
        left = state.total - state.done
        state.remaining = left * state.elapsed / finished_here if finished_here else None
        if on_progress is not None:
            on_progress(state)

    async def one(cell: Cell) -> None:
        nonlocal finished_here
        item, config = experiment.questions[cell.q], experiment.configs[cell.c]
        state.running += 1
        try:
            await arun_config(config, item["question"], store=sink, label=config["label"],
                              tags=[cell.tag], expected=item.get("expected"),
                              stop_event=stop_event, experiment_id=experiment_id)
            state.done += 1
            finished_here += 1
        except RunStopped:
            state.interrupted += 1
        except ConfigError as exc:  # the same for every run of this configuration: stop all
            fatal.append(f"configuration {config['label']!r}: {exc}")
            stop_event.set()
        except Exception as exc:  # a bug in a run; the run is stored `failed` with its error
            state.failed += 1
            failures.append(f"{type(exc).__name__}: {exc}")
        finally:
            state.running -= 1
        if time.monotonic() - beat[0] > HEARTBEAT_EVERY:
            beat[0] = time.monotonic()
            _set(store, experiment_id, heartbeat_at=now())
        report()

    async def worker() -> None:
        for cell in cells:  # one shared iterator: each cell is taken exactly once
            if stop_event.is_set():
                return
            await one(cell)

    status, error = "failed", ""
    try:
        runs = _cell_runs(store, experiment_id)
        done = {r["cell"] for r in runs if r["status"] == "completed"}
        todo = [cell for cell in experiment.cells() if cell not in done]
        _supersede(store, [r["id"] for r in runs if r["cell"] not in done
                           and not r["superseded"] and r["status"] != "running"])
        state.done, cells = len(done), iter(todo)
        report()
        await asyncio.gather(*(worker() for _ in range(min(experiment.concurrency,
                                                           len(todo)) or 1)))
        if isinstance(sink, BatchedStore):
            sink.flush()
        left = len(pending_cells(store, experiment_id))
        if fatal:
            status, error = "failed", fatal[0]
        elif left == 0:
            status = "completed"
        elif stop_event.is_set():
            status = "stopped"
        else:
            last = f" (last error: {failures[-1]})" if failures else ""
            status, error = "incomplete", f"{left} run(s) did not complete{last}; resume " \
                "to retry them"
    except BaseException as exc:
        stopped = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))
        status, error = ("stopped" if stopped else "failed"), f"{type(exc).__name__}: {exc}"
        raise
    finally:
        with _LOCK:
            _RUNNING.discard(experiment_id)
        _set(store, experiment_id, status=status, error=error[:2000], finished_at=now(),
             heartbeat_at=now())
    state.status, state.error = status, error
    report()
    return state


def run_experiment(store: Any, experiment_id: str, **kw: Any) -> Progress:
    """Synchronous `arun_experiment`."""
    from .protocols import run_sync
    return run_sync(arun_experiment(store, experiment_id, **kw))


@dataclass
class ExperimentJob:
    """An experiment running in a background thread of this process."""

    experiment_id: str
    thread: threading.Thread
    stop_event: threading.Event
    done: threading.Event = field(default_factory=threading.Event)
    error: str = ""

    @property
    def alive(self) -> bool:
        return not self.done.is_set()


def start(store: Any, experiment_id: str) -> ExperimentJob:
    """Run (or resume) an experiment in a daemon thread with its own event loop; returns at
    once. It keeps going when the page that started it goes away; progress is in the store."""
    with _LOCK:
        job = _LIVE.get(experiment_id)
        if job is not None and job.alive:
            return job
    row = get(store, experiment_id)
    if row["status"] == "running":
        raise ConfigError(f"experiment {experiment_id} is already running (process "
                          f"{row['pid']} on {row['host']}); stop it there first", "input")
    stop_event = threading.Event()
    claimed = threading.Event()

    failure: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(arun_experiment(store, experiment_id, stop_event=stop_event,
                                        on_progress=lambda _p: claimed.set()))
        except BaseException as exc:  # recorded on the experiment row; kept for the page
            job.error = f"{type(exc).__name__}: {exc}"
            failure.append(exc)
        finally:
            job.done.set()
            claimed.set()

    thread = threading.Thread(target=target, name=f"parley-experiment-{experiment_id}",
                              daemon=True)
    job = ExperimentJob(experiment_id, thread, stop_event)
    with _LOCK:
        _LIVE[experiment_id] = job
    thread.start()
    claimed.wait(30)  # until the row says `running` (or the start failed)
    if failure and not job.alive:
        raise failure[0]  # e.g. the ConfigError of an experiment running elsewhere
    return job


def stop(experiment_id: str) -> bool:
    """Ask a background experiment of this process to stop; its runs in flight end
    `interrupted` after their current call, and a resume redoes them."""
    with _LOCK:
        job = _LIVE.get(experiment_id)
    if job is None or not job.alive:
        return False
    job.stop_event.set()
    return True


def job(experiment_id: str) -> ExperimentJob | None:
    with _LOCK:
        return _LIVE.get(experiment_id)


# --------------------------------------------------------------------------- results
def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return float("nan")
    return float(value)


def _signals(metrics: Mapping[str, Any], expected: str | None) -> dict[str, Any]:
    """What a run's stored metrics say, in protocol-independent names (missing: NaN/None).

    consensus = the final vote's winner share (panel, vote); judge = the judge's own
    confidence (debate); level = the confidence level (panel, vote; roundtable's stance tally);
    first / final = round one's winner and the final winner (panel), and `shift` how the
    answer moved against the expected one: better (wrong to right), worse (right to wrong),
    sideways (wrong to another wrong), same.
    """
    from .analysis import normalize_stance
    m = metrics or {}
    out: dict[str, Any] = {
        "consensus": _number(m.get("ratio")), "judge": _number(m.get("judge_confidence")),
        "level": m.get("confidence_level") or m.get("stance_confidence") or None,
        "mind_changes": _number(m.get("mind_changes")), "seats": _number(m.get("debaters")),
        "persuaded": _number(m.get("persuaded")), "misled": _number(m.get("misled")),
        "answer": m.get("winner", m.get("stance_winner")) or None,
        "first_answer": None, "changed": None, "shift": None}
    if "first_round_winner" in m:
        first, final = m.get("first_round_winner") or "", m.get("winner") or ""
        out["first_answer"] = first or None
        out["changed"] = normalize_stance(first) != normalize_stance(final)
        if expected:
            target = normalize_stance(expected)
            was, now_ = normalize_stance(first) == target, normalize_stance(final) == target
            out["shift"] = ("same" if not out["changed"] else "better" if now_ and not was
                            else "worse" if was and not now_ else "sideways")
    return out


RUN_COLUMNS = ["id", "label", "protocol", "q", "repeat", "question", "expected", "status",
               "counted", "superseded", "correct", "answer", "level", "consensus", "judge",
               "mind_changes", "seats", "persuaded", "misled", "first_answer", "changed",
               "shift", "calls", "degraded", "tokens", "seconds", "simulated", "created_at",
               "link"]


def runs_frame(store: Any, experiment_id: str) -> pd.DataFrame:
    """One row per run of the experiment: its cell (q, repeat, label), whether it `counted`
    (the first completed run of its cell), correctness and the signals of `_signals`."""
    spec = _row(store, experiment_id)["spec"]
    labels = [c["label"] for c in spec["configs"]]
    frame = store.runs(experiment_id=experiment_id)
    records = []
    counted: set[Cell] = set()
    for run in frame.sort_values(["created_at", "id"]).to_dict("records"):
        cell = Cell.from_tags(run["tags"])
        if cell is None or cell.c >= len(labels):
            continue
        first = run["status"] == "completed" and cell not in counted
        if first:
            counted.add(cell)
        correct = run["correct"]
        records.append({
            "id": run["id"], "label": labels[cell.c], "protocol": run["protocol"], "q": cell.q,
            "repeat": cell.r, "question": run["question"], "expected": run["expected"],
            "status": run["status"], "counted": first, "superseded": SUPERSEDED in run["tags"],
            "correct": None if correct is None or correct != correct else bool(correct),
            **_signals(run["metrics"], run["expected"]), "calls": run["calls"],
            "degraded": run["degraded"], "tokens": run["tokens_in"] + run["tokens_out"],
            "seconds": run["duration"], "simulated": bool(run["simulated"]),
            "created_at": run["created_at"], "link": f"{RUNS_PAGE}?run={run['id']}"})
    return pd.DataFrame(records, columns=RUN_COLUMNS)


def _counted(frame: pd.DataFrame, label: str | None = None) -> pd.DataFrame:
    rows = frame[frame["counted"]] if not frame.empty else frame
    return rows[rows["label"] == label] if label is not None else rows


def calibration(frame: pd.DataFrame, label: str, signal: str, bins: int = 10) -> dict[str, Any]:
    """A confidence signal of one configuration against correctness: the reliability
    diagram's bins, ECE and Brier score over the counted runs that have both."""
    if signal not in SIGNALS:
        raise ConfigError(f"signal must be one of {', '.join(SIGNALS)}, got {signal!r}", "input")
    rows = _counted(frame, label)
    rows = rows[rows["correct"].notna() & rows[signal].notna()] if not rows.empty else rows
    confidences = [float(v) for v in rows[signal]] if not rows.empty else []
    outcomes = [bool(v) for v in rows["correct"]] if not rows.empty else []
    return {"label": label, "signal": signal, "n": len(confidences),
            "bins": stats.reliability_bins(confidences, outcomes, bins),
            "ece": stats.ece(confidences, outcomes, bins),
            "brier": stats.brier(confidences, outcomes)}


def _sum(values: pd.Series) -> float:
    present = pd.to_numeric(values, errors="coerce").dropna()
    return float(present.sum()) if len(present) else float("nan")


def _mean(values: pd.Series) -> float:
    present = pd.to_numeric(values, errors="coerce").dropna()
    return float(present.mean()) if len(present) else float("nan")


SUMMARY_COLUMNS = ["configuration", "protocol", "runs", "planned", "failed", "interrupted",
                   "scored",
                   "correct", "accuracy", "accuracy_low", "accuracy_high", "high", "medium",
                   "low", "consensus_ece", "consensus_brier", "judge_ece", "judge_brier",
                   "mind_change_rate", "persuaded", "misled", "answer_changed",
                   "changed_better", "changed_worse", "tokens_per_run", "seconds_per_run",
                   "calls_per_run"]


# The summary's columns in the groups a page shows them in (configuration first in each).
SUMMARY_GROUPS = {
    "Accuracy and confidence levels": ["runs", "planned", "failed", "interrupted", "scored",
                                       "correct", "accuracy", "accuracy_low",
                                       "accuracy_high", "high", "medium", "low"],
    "Calibration (ECE, Brier)": ["consensus_ece", "consensus_brier", "judge_ece",
                                 "judge_brier"],
    "Mind changes, and the final answer against round one's vote": [
        "mind_change_rate", "persuaded", "misled", "answer_changed", "changed_better",
        "changed_worse"],
    "Cost per run": ["tokens_per_run", "seconds_per_run", "calls_per_run"],
}


def summary(frame: pd.DataFrame, spec: Mapping[str, Any]) -> pd.DataFrame:
    """Per configuration (in the spec's order), over its counted runs:

    accuracy = correct / scored with its 95% Wilson interval; confidence levels counted;
    ECE and Brier of each signal; mind_change_rate = measured mind changes / debater ballots;
    persuaded / misled seats; answer_changed = runs whose final winner differs from round
    one's, split into changed_better / changed_worse against the expected answer; and the
    mean tokens, seconds and calls per run. `failed` / `interrupted` count the cells with no
    completed run whose latest run ended so (a resume redoes them).
    """
    planned = len(spec["questions"]) * spec["repeats"]
    rows = []
    for config in spec["configs"]:
        label = config["label"]
        mine = frame[frame["label"] == label] if not frame.empty else frame
        done = _counted(frame, label)
        scored = done[done["correct"].notna()] if not done.empty else done
        right = int(scored["correct"].astype(bool).sum()) if not scored.empty else 0
        low, high = stats.wilson_interval(right, len(scored)) if len(scored) else (
            float("nan"), float("nan"))
        levels = done["level"].value_counts() if not done.empty else pd.Series(dtype=int)
        cells_done = set(zip(done["q"], done["repeat"])) if not done.empty else set()
        unfinished = {status: len({(q, r) for q, r, s, old in zip(
            mine["q"], mine["repeat"], mine["status"], mine["superseded"])
            if s == status and not old} - cells_done) if not mine.empty else 0
            for status in ("failed", "interrupted")}
        consensus = calibration(frame, label, "consensus")
        judge = calibration(frame, label, "judge")
        changed = done[done["changed"].notna()] if not done.empty else done
        seats = _sum(done["seats"]) if not done.empty else float("nan")
        rows.append({
            "configuration": label, "protocol": config.get("protocol", ""),
            "runs": len(done), "planned": planned, **unfinished, "scored": len(scored),
            "correct": right, "accuracy": right / len(scored) if len(scored) else float("nan"),
            "accuracy_low": low, "accuracy_high": high,
            **{level: int(levels.get(level, 0)) for level in ("high", "medium", "low")},
            "consensus_ece": consensus["ece"], "consensus_brier": consensus["brier"],
            "judge_ece": judge["ece"], "judge_brier": judge["brier"],
            "mind_change_rate": _sum(done["mind_changes"]) / seats if seats else float("nan"),
            "persuaded": _sum(done["persuaded"]) if not done.empty else float("nan"),
            "misled": _sum(done["misled"]) if not done.empty else float("nan"),
            "answer_changed": int(changed["changed"].astype(bool).sum())
            if not changed.empty else 0,
            "changed_better": int((done["shift"] == "better").sum()) if not done.empty else 0,
            "changed_worse": int((done["shift"] == "worse").sum()) if not done.empty else 0,
            "tokens_per_run": _mean(done["tokens"]) if not done.empty else float("nan"),
            "seconds_per_run": _mean(done["seconds"]) if not done.empty else float("nan"),
            "calls_per_run": _mean(done["calls"]) if not done.empty else float("nan")})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def question_scores(frame: pd.DataFrame, label: str) -> dict[int, float]:
    """Per question index: the share of this configuration's counted, scored runs that
    were right (the mean over repeats)."""
    done = _counted(frame, label)
    scored = done[done["correct"].notna()] if not done.empty else done
    if scored.empty:
        return {}
    return {int(q): float(v) for q, v in
            scored.assign(c=scored["correct"].astype(float)).groupby("q")["c"].mean().items()}


def compare(frame: pd.DataFrame, a: str, b: str) -> dict[str, Any]:
    """Configuration `a` against `b` on the questions both answered with a score.

    Per question, the one right more often over its repeats wins (equal: a tie). The exact
    two-sided sign test (`stats.sign_test`) asks whether wins and losses split this unevenly
    by chance; with one repeat it is McNemar's exact test on the discordant questions.
    """
    left, right = question_scores(frame, a), question_scores(frame, b)
    shared = sorted(set(left) & set(right))
    wins = sum(left[q] > right[q] for q in shared)
    losses = sum(left[q] < right[q] for q in shared)
    ties = len(shared) - wins - losses
    p = stats.sign_test(wins, losses)
    if not shared:
        sentence = (f"{a} and {b} share no question with a scored answer, so they cannot be "
                    "compared (scoring needs expected answers).")
    else:
        verdict = ("a split this uneven would be unlikely (p < 0.05) if the two were equally "
                   "good" if p < 0.05 else "that is consistent with chance (p >= 0.05)")
        sentence = (f"On {len(shared)} question{'s' * (len(shared) != 1)}, {a} was right more "
                    f"often than {b} on {wins}, less often on {losses} and equally often on "
                    f"{ties}; an exact two-sided sign test on the {wins + losses} that differ "
                    f"gives p = {p:.3g}, so {verdict}.")
    return {"a": a, "b": b, "questions": len(shared), "wins": wins, "losses": losses,
            "ties": ties, "p_value": p, "sentence": sentence}


def question_table(frame: pd.DataFrame, spec: Mapping[str, Any]) -> pd.DataFrame:
    """Questions x configurations: per cell "right/scored" (or runs done when unscored)."""
    out = pd.DataFrame({"q": range(len(spec["questions"])),
                        "question": [i["question"] for i in spec["questions"]],
                        "expected": [i.get("expected") or "" for i in spec["questions"]]})
    for config in spec["configs"]:
        done = _counted(frame, config["label"])
        cells = []
        for q in out["q"]:
            mine = done[done["q"] == q] if not done.empty else done
            scored = mine[mine["correct"].notna()] if not mine.empty else mine
            cells.append(f"{int(scored['correct'].astype(bool).sum())}/{len(scored)} right"
                         if len(scored) else f"{len(mine)} run{'s' * (len(mine) != 1)}")
        out[config["label"]] = cells
    return out


def drill(frame: pd.DataFrame, label: str | None = None, q: int | None = None) -> pd.DataFrame:
    """The runs behind a cell of the results (a configuration, a question, or both), with a
    link to each on the Runs page."""
    rows = frame
    if label is not None and not rows.empty:
        rows = rows[rows["label"] == label]
    if q is not None and not rows.empty:
        rows = rows[rows["q"] == q]
    return rows[["link", "id", "label", "q", "repeat", "status", "counted", "superseded",
                 "correct", "answer", "level", "consensus", "judge", "calls", "tokens",
                 "seconds"]].reset_index(drop=True)


def to_csv(frame: pd.DataFrame) -> str:
    """The runs frame as CSV (one line per run, every signal a column)."""
    return frame.to_csv(index=False)


@dataclass
class Report:
    """Everything the Experiments page and `experiment show` print for one experiment."""

    experiment: dict[str, Any]
    progress: Progress
    runs: pd.DataFrame
    summary: pd.DataFrame
    questions: pd.DataFrame
    calibrations: list[dict[str, Any]]

    @property
    def labels(self) -> list[str]:
        return [c["label"] for c in self.experiment["spec"]["configs"]]


def report(store: Any, experiment_id: str) -> Report:
    """An experiment's results so far (any time: while it runs too)."""
    experiment = get(store, experiment_id)
    spec = experiment["spec"]
    frame = runs_frame(store, experiment_id)
    calibrations = [calibration(frame, c["label"], signal) for signal in SIGNALS
                    for c in spec["configs"]]
    return Report(experiment, progress(store, experiment_id), frame, summary(frame, spec),
                  question_table(frame, spec), [c for c in calibrations if c["n"]])


# --------------------------------------------------------------------------- figures
def reliability_figure(calibrations: Sequence[Mapping[str, Any]], title: str = "") -> Any:
    """The reliability diagram: per configuration and signal, accuracy against mean
    confidence per bin (marker size = runs in the bin), with the diagonal of perfect
    calibration; ECE and Brier in the legend."""
    import plotly.graph_objects as go
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfect calibration",
                             line={"dash": "dot", "color": "#999"}))
    for cal in calibrations:
        bins = cal["bins"]
        fig.add_trace(go.Scatter(
            x=[b["confidence"] for b in bins], y=[b["accuracy"] for b in bins],
            mode="lines+markers",
            marker={"size": [8 + 16 * (b["count"] / max(1, cal["n"])) ** 0.5 for b in bins]},
            name=f"{cal['label']} · {cal['signal']} (ECE {cal['ece']:.3f}, Brier "
                 f"{cal['brier']:.3f}, n={cal['n']})",
            customdata=[[b["count"], b["low"], b["high"]] for b in bins],
            hovertemplate="confidence %{x:.2f}<br>accuracy %{y:.2f}<br>%{customdata[0]} runs "
                          "in [%{customdata[1]:.1f}, %{customdata[2]:.1f})<extra></extra>"))
    fig.update_layout(title={"text": title} if title else None, template="plotly_white",
                      height=420, margin={"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
                      legend={"orientation": "h", "y": -0.25},
                      xaxis={"title": "confidence", "range": [0, 1.02]},
                      yaxis={"title": "share correct", "range": [0, 1.02]})
    return fig


def accuracy_figure(table: pd.DataFrame) -> Any:
    """Accuracy per configuration with its 95% Wilson interval as error bars."""
    import plotly.graph_objects as go
    scored = table[table["scored"] > 0]
    fig = go.Figure(go.Bar(
        x=list(scored["configuration"]), y=list(scored["accuracy"]),
        error_y={"type": "data", "symmetric": False,
                 "array": list(scored["accuracy_high"] - scored["accuracy"]),
                 "arrayminus": list(scored["accuracy"] - scored["accuracy_low"])},
        customdata=list(zip(scored["correct"], scored["scored"])),
        hovertemplate="%{x}: %{y:.0%} (%{customdata[0]}/%{customdata[1]})<extra></extra>"))
    fig.update_layout(template="plotly_white", height=320,
                      margin={"l": 10, "r": 10, "t": 10, "b": 10},
                      yaxis={"title": "accuracy (95% Wilson interval)", "range": [0, 1.05],
                             "tickformat": ".0%"})
    return fig


# --------------------------------------------------------------------------- terminal
def _pct(value: float) -> str:
    return "-" if value != value else f"{value:.0%}"


def _num(value: float, digits: int = 2) -> str:
    return "-" if value != value else f"{value:.{digits}f}"


def summary_text(result: Report) -> str:
    """The results table for a terminal, then one sentence per pair of configurations."""
    table = result.summary
    view = pd.DataFrame({
        "configuration": table["configuration"],
        "runs": [f"{r}/{p}" + (f" ({f} failed)" if f else "") + (f" ({i} stopped)" if i else "")
                 for r, p, f, i in zip(table["runs"], table["planned"], table["failed"],
                                       table["interrupted"])],
        "accuracy [95% CI]": [f"{_pct(a)} [{_pct(lo)}-{_pct(hi)}]" if n else "-"
                              for a, lo, hi, n in zip(table["accuracy"], table["accuracy_low"],
                                                      table["accuracy_high"], table["scored"])],
        "high/med/low": [f"{h}/{m}/{lo}" for h, m, lo in
                         zip(table["high"], table["medium"], table["low"])],
        "ECE cons|judge": [f"{_num(c)}|{_num(j)}" for c, j in
                           zip(table["consensus_ece"], table["judge_ece"])],
        "mind changes (pers/misled)": [
            "-" if r != r else f"{r:.0%} ({_num(p, 0)}/{_num(m, 0)})"
            for r, p, m in zip(table["mind_change_rate"], table["persuaded"], table["misled"])],
        "vs round one (+/-)": [f"{c} ({b}/{w})" for c, b, w in
                               zip(table["answer_changed"], table["changed_better"],
                                   table["changed_worse"])],
        "tokens/run": [_num(v, 0) for v in table["tokens_per_run"]],
        "s/run": [_num(v) for v in table["seconds_per_run"]],
        "calls/run": [_num(v, 1) for v in table["calls_per_run"]]})
    lines = [view.to_string(index=False)]
    labels = result.labels
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            lines.append(compare(result.runs, a, b)["sentence"])
    return "\n".join(lines)


def _load_spec(path: str) -> dict[str, Any]:
    import yaml
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", "input") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path} is not valid YAML{where}", "input") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping (questions, configs, repeats, "
                          "concurrency)", "input")
    return data


class _Bar:
    """Progress on standard error: one line rewritten in place on a terminal, else a line
    per tenth of the way (so logs stay short)."""

    def __init__(self, stream: Any, quiet: bool = False):
        self.stream, self.quiet = stream, quiet
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.last_tenth = -1
        self.width = 0

    def __call__(self, state: Progress) -> None:
        if self.quiet:
            return
        text = state.line()
        if self.tty:
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
        else:
            tenth = int(state.fraction * 10)
            if tenth == self.last_tenth:
                return
            self.last_tenth = tenth
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.width and not self.quiet:
            self.stream.write("\n")
            self.stream.flush()


def _run_cli(store: Any, experiment_id: str, quiet: bool) -> int:
    import signal
    import sys
    stop_event = threading.Event()
    bar = _Bar(sys.stderr, quiet)

    async def go() -> Progress:
        loop = asyncio.get_running_loop()
        try:  # Ctrl-C stops cleanly: runs in flight end `interrupted`, a resume redoes them
            loop.add_signal_handler(signal.SIGINT, stop_event.set)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
        return await arun_experiment(store, experiment_id, stop_event=stop_event,
                                     on_progress=bar)

    try:
        state = asyncio.run(go())
    finally:
        bar.close()
    print(summary_text(report(store, experiment_id)))
    if state.status == "completed":
        print(f"experiment {experiment_id} completed: {state.done} runs in "
              f"{duration_text(state.elapsed)}")
        return 0
    print(f"experiment {experiment_id} {state.status}: {state.done}/{state.total} runs done"
          + (f"; {state.error}" if state.error else "")
          + f"\nresume with: python -m engine experiment resume {experiment_id}",
          file=sys.stderr)
    return 130 if state.status == "stopped" else 1


def cmd_run(args: Any) -> int:
    """`experiment run SPEC.yaml`: plan, print the preflight, store and run."""
    from .store import Store
    spec = _load_spec(args.spec)
    for key in ("repeats", "concurrency"):
        if getattr(args, key) is not None:
            spec[key] = getattr(args, key)
    store = Store(args.db)
    checked = plan(spec, store, base_dir=Path(args.spec).parent)
    print(f"{checked.name}: {len(checked.questions)} questions x {len(checked.configs)} "
          f"configurations x {checked.repeats} repeats = {checked.runs} runs, "
          f"{checked.calls} calls, ~{checked.tokens:,} tokens (estimate); "
          f"{checked.concurrency} at a time")
    for item in checked.per_config:
        print(f"  {item['label']} ({item['protocol']}): {item['calls_per_run']} calls per run")
    if args.dry_run:
        return 0
    experiment_id = create(store, checked)
    print(f"experiment {experiment_id}")
    return _run_cli(store, experiment_id, args.quiet)


def cmd_resume(args: Any) -> int:
    from .store import Store
    store = Store(args.db)
    left = pending_cells(store, args.experiment_id)
    print(f"experiment {args.experiment_id}: {len(left)} run(s) left")
    return _run_cli(store, args.experiment_id, args.quiet)


def cmd_show(args: Any) -> int:
    from .store import Store
    store = Store(args.db)
    result = report(store, args.experiment_id)
    state, experiment = result.progress, result.experiment
    print(f"experiment {experiment['id']}: {experiment['name']} - {state.status}, "
          f"{state.done}/{state.total} runs" + (f", {state.failed} failed" if state.failed
                                                 else "")
          + (" (simulated)" if not result.runs.empty and result.runs["simulated"].all()
             else ""))
    if state.error:
        print(f"note: {state.error}")
    if args.compare:
        a, b = args.compare
        for label in (a, b):
            if label not in result.labels:
                raise ConfigError(f"no configuration {label!r} in this experiment; it has "
                                  f"{', '.join(result.labels)}", "input")
        print(compare(result.runs, a, b)["sentence"])
    else:
        print(summary_text(result))
    if args.csv:
        Path(args.csv).write_text(to_csv(result.runs), encoding="utf-8")
        print(f"wrote {len(result.runs)} runs to {args.csv}")
    return 0


def cmd_list(args: Any) -> int:
    from .store import Store
    frame = list_experiments(Store(args.db))
    if frame.empty:
        print("no experiments yet; start one with python -m engine experiment run SPEC.yaml")
        return 0
    frame["created"] = frame["created"].astype(str).str.slice(0, 19)
    print(frame.to_string(index=False))
    return 0


def add_cli(sub: Any) -> None:
    """Add `experiment run | resume | show | list` to the CLI's sub-commands."""
    parser = sub.add_parser("experiment", help="question set x configurations x repeats")
    inner = parser.add_subparsers(dest="experiment_command", required=True,
                                  parser_class=type(parser))
    run = inner.add_parser("run", help="plan, store and run an experiment from a YAML spec")
    run.add_argument("spec", help="YAML: questions (set name or list) or questions_file, "
                                  "configs (mappings or saved labels), repeats, concurrency")
    run.add_argument("--repeats", type=int, help="override the spec's repeats")
    run.add_argument("--concurrency", type=int, help="override the spec's concurrency")
    run.add_argument("--dry-run", action="store_true", help="print the preflight only")
    resume = inner.add_parser("resume", help="run the cells of an experiment not yet done")
    resume.add_argument("experiment_id")
    for command in (run, resume):
        command.add_argument("--quiet", action="store_true", help="no progress line")
    show = inner.add_parser("show", help="an experiment's results table")
    show.add_argument("experiment_id")
    show.add_argument("--compare", nargs=2, metavar=("A", "B"),
                      help="paired comparison of two configuration labels")
    show.add_argument("--csv", help="also write one line per run to this CSV file")
    listing = inner.add_parser("list", help="list experiments")
    for command, handler in ((run, cmd_run), (resume, cmd_resume), (show, cmd_show),
                             (listing, cmd_list)):
        command.add_argument("--db", help="database URL (default PARLEY_DB_URL or "
                                          "data/parley.db)")
        command.set_defaults(handler=handler)
