"""The experiments table: storing, reading and listing experiments, and their progress."""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

import pandas as pd
from sqlalchemy import select, update

from engine.models import ConfigError, now
from engine.store.readback import decode, decode_tags
from engine.store.records import experiment_item
from engine.store.runs import STALE_AFTER, ExperimentRow, RunRow, _aware, _pid_alive
from engine.experiments.planning import SUPERSEDED, Cell, Plan, plan


def create(store: Any, experiment: Plan | Mapping[str, Any]) -> str:
    """Store an experiment (a `Plan`, or a spec to plan first) as `planned`; returns its id."""
    checked = experiment if isinstance(experiment, Plan) else plan(experiment, store)
    item = experiment_item(checked.name, checked.spec())  # the store's one schema
    experiment_id = uuid4().hex[:12]
    with store.writing() as connection:
        connection.execute(ExperimentRow.__table__.insert().values(
            id=experiment_id, name=item.name, status="planned",
            spec=json.dumps(item.spec, ensure_ascii=False), total=checked.runs,
            created_at=now()))
    return experiment_id


def _row(store: Any, experiment_id: str) -> dict[str, Any]:
    with store.engine.connect() as connection:
        row = connection.execute(select(ExperimentRow.__table__).where(
            ExperimentRow.id == experiment_id)).mappings().first()
    if row is None:
        raise ConfigError(f"no experiment {experiment_id!r}; list them with "
                          "python -m engine experiment list", "input")
    out = dict(row)
    out["spec"], out["unreadable"] = decode(out["spec"], dict, {})
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
            cell = Cell.from_tags(decode_tags(tags))
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
        tags = decode_tags(row["tags"])
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
