"""The experiments table: storing, claiming, reading and listing experiments, their runs by
cell, and their progress. Reads never write: a `running` experiment (or run) whose process is
gone reads as `interrupted` by the store's one liveness rule (`engine.store.liveness`)."""
from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

import pandas as pd
from sqlalchemy import func, select, update

from engine.cells import SUPERSEDED, Cell
from engine.models import ConfigError, now
from engine.store.database import signs_of_life
from engine.store.readback import aware, columns, decode, tag_cells
from engine.store.records import error_text, experiment_item, starter
from engine.store.runs import add_tags
from engine.store.schema import ExperimentRow, RunRow, TurnRow
from engine.store.statements import EXPERIMENTS
from engine.store.store import Store
from engine.store.versions import set_changes, set_version

POOL_HOST = "parley-workers"  # the host of an experiment the pool runs (no one process)


def add_experiment(store: Store, name: str, spec: Mapping[str, Any], total: int) -> str:
    """Store a checked experiment (its name, its spec and its planned runs) as `planned`,
    with the version of its question set (`set_version`); returns its id.
    `engine.experiments.create` plans a spec first."""
    item = experiment_item(name, spec)  # the store's one schema
    experiment_id = uuid4().hex[:12]
    with store.writing() as connection:
        connection.execute(EXPERIMENTS.insert().values(
            id=experiment_id, name=item.name, status="planned",
            spec=json.dumps(item.spec, ensure_ascii=False), total=total,
            set_version=set_version(item.spec.get("questions") or []), created_at=now()))
    return experiment_id


def row(store: Store, experiment_id: str) -> dict[str, Any]:
    """One experiment's row as stored, with the spec parsed (`unreadable` says why not);
    `ConfigError` when there is no such experiment."""
    with store.engine.connect() as connection:
        found = connection.execute(select(ExperimentRow.__table__).where(
            ExperimentRow.id == experiment_id)).mappings().first()
    if found is None:
        raise ConfigError(f"no experiment {experiment_id!r}; list them with "
                          "python -m engine experiment list", "input")
    out = dict(found)
    out["spec"], out["unreadable"] = decode(out["spec"], dict, {})
    return out


def live_status(store: Store, stored: Mapping[str, Any]) -> str:
    """The stored status, except that a `running` experiment whose process is gone reads as
    `interrupted` (`Store.owner_gone`)."""
    return "interrupted" if store.owner_gone(stored) else str(stored["status"])


def get(store: Store, experiment_id: str) -> dict[str, Any]:
    """One experiment: its row with the spec parsed and the live status."""
    out = row(store, experiment_id)
    out["status"] = live_status(store, out)
    return out


def claim(store: Store, experiment_id: str, started_by: str = "", pool: bool = False
          ) -> dict[str, Any]:
    """Mark the experiment `running` in this process, or on the pool (`pool`: host
    `POOL_HOST`, no process; the workers give its runs the name), started by `started_by`
    (who, as a run's `started_by`; its runs record it), unless a live runner holds it, in
    another process or in this one (`ConfigError`; the pool may claim what it runs again,
    keeping its start); returns its row as it was. In a process the update is conditional
    on the row being unchanged, so two runners claiming at once, in one process or two,
    cannot both win."""
    who = starter(started_by)
    found = row(store, experiment_id)
    host, pid = (POOL_HOST, 0) if pool else (store.host, os.getpid())
    again = found["host"] == POOL_HOST and found["status"] == "running"
    if live_status(store, found) == "running" and not (pool and again):
        if (found["host"], found["pid"]) == (host, pid):
            raise ConfigError(f"experiment {experiment_id} is already running here", "input")
        raise ConfigError(f"experiment {experiment_id} is running in process {found['pid']} "
                          f"on {found['host']}; stop it there first", "input")
    unchanged = () if pool else (ExperimentRow.status == found["status"],
                                 ExperimentRow.pid == found["pid"])
    with store.writing() as connection:
        changed = connection.execute(
            update(ExperimentRow).where(ExperimentRow.id == experiment_id, *unchanged)
            .values(status="running", host=host, pid=pid, error="", started_by=who,
                    started_at=found["started_at"] if pool and again else now(),
                    heartbeat_at=now(), finished_at=None)).rowcount
    if changed != 1:
        raise ConfigError(f"experiment {experiment_id} was started elsewhere just now", "input")
    return found


def set_values(store: Store, experiment_id: str, **values: Any) -> None:
    """Write columns of an experiment's row (status, error, heartbeat_at, finished_at)."""
    if "error" in values:
        values["error"] = error_text(values["error"])
    with store.writing() as connection:
        connection.execute(update(ExperimentRow).where(ExperimentRow.id == experiment_id)
                           .values(**values))


def supersede(store: Store, run_ids: Sequence[str]) -> None:
    """Tag stale runs `superseded` (kept, but no longer counted as the cell's failure)."""
    if run_ids:
        with store.writing() as connection:
            add_tags(connection, run_ids, [SUPERSEDED])


def list_experiments(store: Store) -> pd.DataFrame:
    """All experiments, newest first: id, name, status, runs done / planned, created, and
    who started it last ("" before it starts, or when nobody was named)."""
    with store.engine.connect() as connection:
        rows = connection.execute(select(
            ExperimentRow.id, ExperimentRow.name, ExperimentRow.status, ExperimentRow.total,
            ExperimentRow.host, ExperimentRow.pid, ExperimentRow.heartbeat_at,
            ExperimentRow.created_at, ExperimentRow.started_by).order_by(
                ExperimentRow.created_at.desc())).mappings().all()
        found = connection.execute(select(RunRow.experiment_id, RunRow.tags).where(
            RunRow.experiment_id.in_([r["id"] for r in rows]),
            RunRow.status == "completed")).all()
    # Each run's cell read off its tags text, as an experiment's results read it
    # (`tag_cells`), not a list decoded per run.
    qs, cs, rs, _old = tag_cells([tags for _, tags in found])
    counts: dict[str, set[tuple[int, int, int]]] = {}
    for (experiment_id, _), q, c, r in zip(found, qs, cs, rs, strict=True):
        if q >= 0:
            counts.setdefault(experiment_id, set()).add((q, c, r))
    return pd.DataFrame([{"id": r["id"], "name": r["name"],
                          "status": live_status(store, r),
                          "done": len(counts.get(r["id"], ())), "runs": r["total"],
                          "created": aware(r["created_at"]),
                          "started by": r["started_by"] or ""} for r in rows],
                        columns=["id", "name", "status", "done", "runs", "created",
                                 "started by"])


def asked_questions(store: Store, experiment_id: str) -> dict[int, dict[str, Any]]:
    """The question (and expected answer) each question index of the experiment was asked
    as, read off its runs (the first run of the index; a light query: no results)."""
    found, named, _ = _with_cells(store, experiment_id, RunRow.question, RunRow.expected,
                                  ordered=True)
    out: dict[int, dict[str, Any]] = {}
    for i in named:
        out.setdefault(found["q"][i], {"question": found["question"][i],
                                       "expected": found["expected"][i]})
    return out


def set_unchanged(store: Store, experiment_id: str) -> None:
    """Refuse (`ConfigError`) an experiment whose spec's questions no longer hash to the
    `set_version` it was stored with, naming each added, removed or edited question (read
    against what its runs were asked): a resume would otherwise mix the answers of two sets
    in one table. An experiment stored with no version (unreadable) is not checked."""
    found = row(store, experiment_id)
    questions = found["spec"].get("questions")
    questions = questions if isinstance(questions, list) else []
    stored, now_version = found.get("set_version") or "", set_version(questions)
    if not stored or stored == now_version:
        return
    asked = asked_questions(store, experiment_id)
    configs, repeats = found["spec"].get("configs"), found["spec"].get("repeats")
    count = (found["total"] // (len(configs) * repeats)
             if isinstance(configs, list) and configs and isinstance(repeats, int)
             and repeats > 0 else None)
    changes = set_changes(asked, questions, count)
    if not changes:
        unasked = [str(q + 1) for q in range(len(questions)) if q not in asked]
        changes = [f"one of the questions not yet run ({', '.join(unasked) or 'none'}) "
                   "changed"]
    raise ConfigError(f"experiment {experiment_id}'s question set changed since it was "
                      f"stored (version {stored}, now {now_version}): " + "; ".join(changes)
                      + "; start a new experiment for the new set", "input")


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


def _with_cells(store: Store, experiment_id: str, *chosen: Any, ordered: bool = False
                ) -> tuple[dict[str, list[Any]], list[int], list[str]]:
    """The experiment's runs as columns (a light query: `chosen`, status and tags, signs of
    life only of the running ones), their cells read off their tags (`q`, `c`, `r`, -1 for
    none, and `old`: superseded; `readback.tag_cells`), oldest first when `ordered`; the
    places of the runs that name a cell; and each run's status (a run whose process is gone
    reads as `interrupted`)."""
    query = select(RunRow.status, RunRow.tags, *chosen,
                   *signs_of_life("host", "pid", "heartbeat_at")).where(
        RunRow.experiment_id == experiment_id)
    with store.engine.connect() as connection:
        found = columns(connection.execute(
            query.order_by(RunRow.created_at, RunRow.id) if ordered else query))
    found["q"], found["c"], found["r"], found["old"] = tag_cells(found["tags"])
    gone = store.gone_rows(found)
    statuses = ["interrupted" if i in gone else status
                for i, status in enumerate(found["status"])]
    return found, [i for i, q in enumerate(found["q"]) if q >= 0], statuses


def cell_runs(store: Store, experiment_id: str) -> list[dict[str, Any]]:
    """Every run of the experiment that names a cell, oldest first: its `id`, `status` (a
    run whose process is gone reads as `interrupted`), `cell` and whether it is
    `superseded`."""
    found, named, statuses = _with_cells(store, experiment_id, RunRow.id, ordered=True)
    return [{"id": found["id"][i], "status": statuses[i],
             "cell": Cell(found["q"][i], found["c"][i], found["r"][i]),
             "superseded": found["old"][i]} for i in named]


@dataclass(frozen=True)
class CellStates:
    """An experiment's runs that name a cell, as columns (what `progress` reads): each run's
    cell (any key, equal for the runs of one cell), its status, whether it is superseded, and
    when it finished (None or NaT when it has not; a naive time is UTC)."""

    cells: Sequence[Any]
    statuses: Sequence[str]
    superseded: Sequence[bool]
    finished: Sequence[Any] | pd.Series


def cell_states(store: Store, experiment_id: str) -> CellStates:
    """The experiment's runs with a cell as `progress` reads them (`_with_cells`: status,
    tags and end time)."""
    found, named, statuses = _with_cells(store, experiment_id, RunRow.finished_at,
                                         *signs_of_life("id"))
    return CellStates([cell_key(found["q"][i], found["c"][i], found["r"][i]) for i in named],
                      [statuses[i] for i in named], [found["old"][i] for i in named],
                      [found["finished_at"][i] for i in named])


def cell_key(q: int, c: int, r: int) -> int:
    """One number per cell (indexes have at most 9 digits: `engine.cells`), a key of
    `CellStates.cells`: an int is no object for the garbage collector, a tuple is."""
    return (q * 1_000_000_000 + c) * 1_000_000_000 + r


def progress(store: Store, experiment_id: str, runs: CellStates | None = None) -> Progress:
    """An experiment's progress read from the store (any process may be running it), over
    `runs` when the caller has read them already (`CellStates`), else `cell_states`.

    done = cells with a completed run; failed / interrupted = runs that ended so and have not
    been superseded by a redo; elapsed = since the current (or last) start; remaining =
    cells left x elapsed / cells finished since that start.
    """
    found = get(store, experiment_id)
    runs = cell_states(store, experiment_id) if runs is None else runs
    statuses = list(runs.statuses)
    done = {cell for cell, status in zip(runs.cells, statuses, strict=True)
            if status == "completed"}
    live = [status for cell, status, old in zip(runs.cells, statuses, runs.superseded,
                                                strict=True) if not old and cell not in done]
    out = Progress(experiment_id, found["status"], found["total"], len(done),
                   failed=live.count("failed"), interrupted=live.count("interrupted"),
                   running=statuses.count("running"), error=found["error"])
    started = aware(found["started_at"])
    if started is not None:
        # every run's end at once, in UTC (`aware` reads a naive time as UTC too)
        finished = pd.to_datetime(pd.Series(runs.finished), utc=True)
        if found["status"] == "running":
            end = now()
        else:  # a crashed runner never wrote finished_at: its last sign of life counts
            last = finished.max()
            signs = [aware(t) for t in (found["finished_at"], found["heartbeat_at"])]
            signs.append(None if pd.isna(last) else last.to_pydatetime())
            end = max([t for t in signs if t is not None] or [started])
        out.elapsed = max(0.0, (end - started).total_seconds())
        completed = [status == "completed" for status in statuses]
        recent = int((finished[completed] >= started).sum()) if completed else 0
        if recent and found["status"] == "running":
            out.remaining = (out.total - out.done) * out.elapsed / recent
        elif out.done >= out.total:
            out.remaining = 0.0
    return out


@dataclass(frozen=True)
class LabelCosts:
    """What the runs of one configuration (by label) of an experiment have cost, in US
    dollars: how many completed with a known cost, the `ranked` one of those costs (the
    (completed // every + 1)-th largest: `experiment_spend`), how many of its runs are stored
    running, and the most that one of those has spent so far."""

    completed: int = 0
    ranked: float | None = None
    running: int = 0
    running_most: float = 0.0


@dataclass(frozen=True)
class SpendFigures:
    """An experiment's spend as its budget reads it (`experiment_spend`)."""

    spent: float  # US dollars, every turn of every run of it (superseded too: that money is gone)
    unknown: int  # calls of runs made since its current start whose cost is unknown
    labels: Mapping[str, LabelCosts]  # by configuration label


def experiment_spend(store: Store, experiment_id: str, every: int) -> SpendFigures:
    """What an experiment has spent and what its configurations' runs cost (`spend_on`)."""
    with store.engine.connect() as connection:
        return spend_on(connection, experiment_id, every)


def _unknown_cost() -> Any:
    """A turn whose cost is unknown (`engine.models.total_cost`'s rule): no cost, and it
    succeeded or consumed tokens (a failed call that consumed nothing costs nothing)."""
    return TurnRow.cost_usd.is_(None) & ((TurnRow.status == "ok") | (TurnRow.tokens_in > 0)
                                         | (TurnRow.tokens_out > 0))


def spend_on(connection: Any, experiment_id: str, every: int) -> SpendFigures:
    """`experiment_spend` read on an open connection (in its transaction): the sum of its
    turns' `cost_usd`; how many turns of runs made since the experiment's current start have
    an unknown cost (turns of an earlier start, which a person resumed after, are left
    out); and per configuration label, its completed runs with a known cost, the
    (completed // `every` + 1)-th largest of those costs (so the largest, until `every` have
    completed), its runs stored running and the most one of them has spent so far."""
    mine = RunRow.experiment_id == experiment_id
    started = select(ExperimentRow.started_at).where(
        ExperimentRow.id == experiment_id).scalar_subquery()
    this_start = started.is_(None) | (RunRow.created_at >= started)
    spent, unknown = connection.execute(_spent(experiment_id, func.count().filter(
        _unknown_cost() & this_start))).one()
    ranked = select(
        RunRow.label.label("label"), RunRow.cost_usd.label("cost"),
        func.row_number().over(partition_by=RunRow.label,
                               order_by=RunRow.cost_usd.desc()).label("place"),
        func.count().over(partition_by=RunRow.label).label("n")).where(
        mine, RunRow.status == "completed", RunRow.cost_usd.is_not(None)).subquery()
    labels: dict[str, LabelCosts] = {}
    for label, cost, n in connection.execute(
            select(ranked.c.label, ranked.c.cost, ranked.c.n)
            .where(ranked.c.place == ranked.c.n // max(1, every) + 1)).all():
        labels[label or ""] = LabelCosts(int(n), float(cost))
    for label, so_far in connection.execute(
            select(RunRow.label, func.coalesce(func.sum(TurnRow.cost_usd), 0.0))
            .select_from(RunRow).outerjoin(TurnRow, TurnRow.run_id == RunRow.id)
            .where(mine, RunRow.status == "running").group_by(RunRow.id, RunRow.label)).all():
        found = labels.get(label or "", LabelCosts())
        labels[label or ""] = LabelCosts(found.completed, found.ranked, found.running + 1,
                                         max(found.running_most, float(so_far or 0.0)))
    return SpendFigures(float(spent or 0.0), int(unknown or 0), labels)


def experiment_spent(store: Store, experiment_id: str) -> float:
    """What an experiment has spent so far in US dollars: the sum of its turns' `cost_usd`
    (an unknown cost adds nothing): one sum, without the per-label figures of
    `experiment_spend`."""
    with store.reading() as connection:
        return float(connection.execute(_spent(experiment_id)).scalar_one())


def _spent(experiment_id: str, *more: Any) -> Any:
    """The sum of the experiment's turns' `cost_usd` (0 without any), and `more` over the
    same turns."""
    return select(func.coalesce(func.sum(TurnRow.cost_usd), 0.0), *more).select_from(
        TurnRow).join(RunRow, RunRow.id == TurnRow.run_id).where(
        RunRow.experiment_id == experiment_id)


def budget_column(store: Store) -> Any:
    """The SQL expression of an experiment row's `budget_usd`, read from its stored spec in
    the database (as text; `as_budget` reads it)."""
    spec = ExperimentRow.spec
    if store.engine.dialect.name == "postgresql":
        from sqlalchemy import JSON, cast
        return cast(spec, JSON)["budget_usd"].as_string()
    return func.json_extract(spec, "$.budget_usd")


def as_budget(found: Any) -> float | None:
    """A stored `budget_usd` as a number; None when there is none or it is unreadable."""
    try:
        return None if found is None else float(found)
    except (TypeError, ValueError):
        return None
