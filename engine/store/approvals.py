"""Approved baselines: per experiment name, the experiment a person approved as the one its
later experiments are gated against (`python -m engine gate`), with who approved it and when.
One baseline at a time per name: an approval replaces the name's baseline, and the earlier
ones stay as its history."""
from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import select

from engine.access import LOCAL, Actor, require
from engine.models import ConfigError, now
from engine.store.experiments import get, progress
from engine.store.readback import aware
from engine.store.records import starter
from engine.store.schema import ApprovalRow
from engine.store.store import Store

APPROVALS: Any = ApprovalRow.__table__
HISTORY_COLUMNS = ["name", "experiment", "approved by", "approved at", "current"]


def approve(store: Store, experiment_id: str, approved_by: str = "",
            actor: Actor = LOCAL) -> dict[str, Any]:
    """Make the experiment the approved baseline of its name, approved by `approved_by`
    (who, as a run's `started_by`); returns the approval. `ConfigError` when it is not
    stored, is still running, or has failed or unfinished cells (a baseline with holes would
    pass a candidate with the same holes); `NotAllowed` when `actor` may not approve."""
    require(actor, "run experiments")  # who may run them may approve one (analysts)
    who = starter(approved_by)
    found = get(store, experiment_id)
    if found["status"] == "running":
        raise ConfigError(f"experiment {experiment_id} is still running; approve it once it "
                          "has ended", "input")
    state = progress(store, experiment_id)
    if state.failed or state.interrupted or state.done < state.total:
        raise ConfigError(f"experiment {experiment_id} has {state.failed} failed and "
                          f"{state.total - state.done} unfinished cell(s) of {state.total}; "
                          "only an experiment whose every cell completed can be approved "
                          f"(python -m engine experiment resume {experiment_id})", "input")
    approval = {"name": found["name"], "experiment_id": experiment_id, "approved_by": who,
                "approved_at": now()}
    with store.writing() as connection:
        connection.execute(APPROVALS.insert().values(**approval))
    return approval


def history(store: Store, name: str | None = None) -> pd.DataFrame:
    """Every approval (of one experiment name, or of all), newest first (`HISTORY_COLUMNS`):
    `current` marks each name's baseline, its newest approval."""
    query = select(APPROVALS.c.name, APPROVALS.c.experiment_id, APPROVALS.c.approved_by,
                   APPROVALS.c.approved_at, APPROVALS.c.id)
    if name is not None:
        query = query.where(APPROVALS.c.name == name)
    with store.engine.connect() as connection:
        rows = connection.execute(query.order_by(APPROVALS.c.approved_at.desc(),
                                                 APPROVALS.c.id.desc())).all()
    seen: set[str] = set()
    out = []
    for row_name, experiment_id, who, when, _ in rows:
        out.append({"name": row_name, "experiment": experiment_id, "approved by": who,
                    "approved at": aware(when), "current": row_name not in seen})
        seen.add(row_name)
    return pd.DataFrame(out, columns=HISTORY_COLUMNS)


def baseline_of(store: Store, name: str) -> dict[str, Any] | None:
    """The approved baseline of an experiment name (its newest approval: `experiment`,
    `approved by`, `approved at`), or None when none was approved."""
    found = history(store, name)
    return None if found.empty else {str(k): v for k, v in found.iloc[0].to_dict().items()}
