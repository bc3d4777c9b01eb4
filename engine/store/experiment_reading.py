"""Reading an experiment's runs for its results: one narrow query, typed columns only.

`Store.runs` hands back every column of a run with its configuration, tags and metrics
parsed, for any filter; an experiment's results over 20,000 runs need a dozen typed columns
and the run's signals. Here the database does the selecting and the grouping: only the
columns the results read, in the order the results count the runs in, and a run's
configuration sent once per distinct configuration (the experiment's runs grouped by
configuration, models and simulated flag in SQL, the same GROUP BY on SQLite and
PostgreSQL, joined back to each run) instead of once per run, so whether a run is simulated
is worked out once per configuration an experiment ran, not 20,000 times. Reads never
write: a `running` run whose process is gone reads as `interrupted`, as in `Store.runs`.
"""
from __future__ import annotations

import pandas as pd
from sqlalchemy import and_, case, func, select

from engine.store import readback
from engine.store.database import Database
from engine.store.liveness import GONE
from engine.store.schema import RunRow
from engine.store.simulated import simulation

# The columns `experiment_runs` returns, beside `setup` (which distinct configuration).
EXPERIMENT_RUN_COLUMNS = ["id", "protocol", "question", "expected", "status", "tags",
                          "metrics", "correct", "calls", "degraded", "degraded_run", "lost",
                          "tokens_in", "tokens_out", "cost_usd", "duration", "simulated",
                          "simulation",
                          "created_at", "finished_at", "error"]
_SETUP = (RunRow.config, RunRow.models, RunRow.simulated)
_SHAPES = {"tags": readback.RUN_JSON["tags"], "metrics": readback.RUN_JSON["metrics"]}


class ExperimentReading(Database):
    """The store's reads of an experiment's runs for its results (a part of `Store`)."""

    def experiment_runs(self, experiment_id: str) -> pd.DataFrame:
        """Every run of an experiment, oldest first (creation, then id): its typed columns,
        `tags` and `metrics` parsed (a value that cannot be read takes its empty default, as
        in `Store.runs`), and `simulation`: "all", "mixed: <seats>" or "" as the offline
        simulated model played its seats (`engine.store.simulated.simulation`), read from
        its configuration, which the database sends once per distinct one."""
        setups = select(*_SETUP, func.min(RunRow.id).label("setup")).where(
            RunRow.experiment_id == experiment_id).group_by(*_SETUP).cte("setups")
        running = RunRow.status == "running"  # only they need their owner's signs of life
        query = select(
            RunRow.id, RunRow.protocol, RunRow.question, RunRow.expected, RunRow.status,
            RunRow.tags, RunRow.metrics, RunRow.correct, RunRow.calls, RunRow.degraded,
            RunRow.degraded_run, RunRow.lost, RunRow.tokens_in, RunRow.tokens_out,
            RunRow.cost_usd, RunRow.duration, RunRow.simulated, RunRow.models, RunRow.created_at,
            RunRow.finished_at, RunRow.error, RunRow.host, RunRow.pid,
            case((running, RunRow.heartbeat_at), else_=None).label("heartbeat_at"),
            setups.c.setup,
            case((RunRow.id == setups.c.setup, RunRow.config), else_=None).label("config"),
        ).join_from(RunRow, setups, and_(
            setups.c.config.is_not_distinct_from(RunRow.config),
            setups.c.models.is_not_distinct_from(RunRow.models),
            setups.c.simulated.is_not_distinct_from(RunRow.simulated))
        ).where(RunRow.experiment_id == experiment_id).order_by(RunRow.created_at, RunRow.id)
        with self.engine.connect() as connection:
            found = connection.execute(query)
            names, rows = list(found.keys()), found.all()
        statuses = [row.status for row in rows]
        gone = [self.owner_gone(row._mapping) for row in rows if row.status == "running"]
        # each distinct configuration once (its first run carries it), from the rows as read
        # (a data frame would hold a missing text as NaN)
        kinds = {row.setup: simulation(row.simulated, readback.clean_stored(row.models),
                                       readback.decode(row.config, dict, {})[0])[0]
                 for row in rows if row.id == row.setup}
        columns = dict(zip(names, map(list, zip(*rows, strict=True)), strict=True)) if rows \
            else {name: [] for name in names}
        columns["simulation"] = [kinds.get(key, "") for key in columns["setup"]]
        del columns["config"]
        frame = pd.DataFrame(columns, columns=list(columns))
        frame = readback.tolerant_frame(frame, _SHAPES, required_times=("created_at",))
        if any(gone):  # as the reaper will store them
            told = iter(gone)
            dead = pd.Series([status == "running" and next(told) for status in statuses],
                             index=frame.index)
            frame.loc[dead, "status"] = "interrupted"
            frame.loc[dead & (frame["error"].fillna("") == ""), "error"] = GONE
        return frame[[*EXPERIMENT_RUN_COLUMNS, "setup"]]
