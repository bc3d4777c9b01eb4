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

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import and_, case, func, select
from sqlalchemy.exc import OperationalError

from engine.store import readback
from engine.store.database import Database
from engine.store.liveness import GONE
from engine.store.schema import RunRow
from engine.store.simulated import simulation

# The columns `experiment_runs` returns, beside `setup` (which distinct configuration).
EXPERIMENT_RUN_COLUMNS = ["id", "protocol", "question", "expected", "status", "cell_q",
                          "cell_c", "cell_r", "superseded",
                          "metrics", "correct", "calls", "degraded", "degraded_run", "lost",
                          "tokens_in", "tokens_out", "cost_usd", "duration", "simulated",
                          "simulation",
                          "created_at", "finished_at", "error"]
_SETUP = (RunRow.config, RunRow.models, RunRow.simulated)
CHUNK = 1000  # metrics decoded this many runs at a time (`readback.columns`)
_SHAPES = {"metrics": readback.RUN_JSON["metrics"]}


class ExperimentReading(Database):
    """The store's reads of an experiment's runs for its results (a part of `Store`)."""

    def experiment_runs(self, experiment_id: str, keys: Sequence[str] | None = None
                        ) -> pd.DataFrame:
        """Every run of an experiment, oldest first (creation, then id): its typed columns,
        `metrics` parsed (a value that cannot be read takes its empty default, as in
        `Store.runs`), its cell as its tags name it (`cell_q`, `cell_c`, `cell_r`: -1 when
        they name none) and whether it is `superseded` (`readback.tag_cells`), and
        `simulation`: "all", "mixed: <seats>" or "" as the offline
        simulated model played its seats (`engine.store.simulated.simulation`), read from
        its configuration, which the database sends once per distinct one.

        With `keys`, instead of `metrics` a column `metrics.KEY` per key holds each run's
        value of that key of its metrics (None when they have none or cannot be read), on
        SQLite picked out in the database (`_picked`): 20,000 runs' whole metrics were 20 MB
        of JSON to send and decode for a dozen values each."""
        picked = _picked(self.engine.dialect.name, list(keys)) if keys else None
        if picked is not None:
            try:
                return self._experiment_runs(experiment_id, keys, picked)
            except OperationalError:  # a SQLite without its JSON functions: decode them here
                pass
        return self._experiment_runs(experiment_id, keys, None)

    def _experiment_runs(self, experiment_id: str, keys: Sequence[str] | None,
                         picked: Picked | None) -> pd.DataFrame:
        """`experiment_runs`, the chosen keys of the metrics `picked` in SQL or not."""
        setups = select(*_SETUP, func.min(RunRow.id).label("setup")).where(
            RunRow.experiment_id == experiment_id).group_by(*_SETUP).cte("setups")
        running = RunRow.status == "running"  # only they need their owner's signs of life
        metrics = [RunRow.metrics] if picked is None else [picked.values.label("picked"),
                                                           picked.unread.label("metrics")]
        query = select(
            RunRow.id, RunRow.protocol, RunRow.question, RunRow.expected, RunRow.status,
            RunRow.tags, *metrics, RunRow.correct, RunRow.calls, RunRow.degraded,
            RunRow.degraded_run, RunRow.lost, RunRow.tokens_in, RunRow.tokens_out,
            RunRow.cost_usd, RunRow.duration, RunRow.simulated, RunRow.models, RunRow.created_at,
            RunRow.finished_at, RunRow.error,
            case((running, RunRow.host), else_=None).label("host"),
            case((running, RunRow.pid), else_=None).label("pid"),
            case((running, RunRow.heartbeat_at), else_=None).label("heartbeat_at"),
            setups.c.setup,
            case((RunRow.id == setups.c.setup, RunRow.config), else_=None).label("config"),
        ).join_from(RunRow, setups, and_(  # NOT NULL columns: equality, which PostgreSQL
            # hashes (IS NOT DISTINCT FROM it cannot: it compared every run with every
            # configuration and, costing that high, compiled the query first: 0.4 s a read)
            setups.c.config == RunRow.config, setups.c.models == RunRow.models,
            setups.c.simulated == RunRow.simulated))
        # in no order: sorted here (`_oldest_first`), PostgreSQL sorted 20,000 wide rows on disk
        query = query.where(RunRow.experiment_id == experiment_id)
        with self.engine.connect() as connection:
            columns: dict[str, Any] = readback.columns(connection.execute(query))
        count = len(columns["id"])
        signs = ("id", "status", "host", "pid", "heartbeat_at")
        gone = {i for i, status in enumerate(columns["status"]) if status == "running"
                and self.owner_gone({name: columns[name][i] for name in signs})}
        # each distinct configuration once (its first run carries it), from the rows as read
        # (a data frame would hold a missing text as NaN)
        kinds = {setup: simulation(simulated, readback.clean_stored(models),
                                   readback.decode(config, dict, {})[0])[0]
                 for run_id, setup, simulated, models, config in zip(
                     columns["id"], columns["setup"], columns["simulated"], columns["models"],
                     columns["config"], strict=True) if run_id == setup}
        columns["simulation"] = [kinds.get(key, "") for key in columns["setup"]]
        for name in ("config", "models", "host", "pid", "heartbeat_at"):  # read, not returned
            del columns[name]
        # JSON decoded from the rows as read: in a data frame the text would be copied into
        # an Arrow string column and back out again only to be decoded
        (columns["cell_q"], columns["cell_c"], columns["cell_r"],
         columns["superseded"]) = readback.tag_cells(columns.pop("tags"))
        if keys:
            given = columns.pop("picked") if "picked" in columns else [None] * count
            columns.update(_metrics_columns(list(keys), given, columns.pop("metrics")))
        else:
            columns["metrics"] = [readback.decode(v, *_SHAPES["metrics"])[0]
                                  for v in columns["metrics"]]
        frame = pd.DataFrame(columns, columns=list(columns))
        frame = readback.tolerant_frame(frame, {}, required_times=("created_at",))
        if gone:  # as the reaper will store them
            dead = pd.Series([i in gone for i in range(count)], index=frame.index)
            frame.loc[dead, "status"] = "interrupted"
            frame.loc[dead & (frame["error"].fillna("") == ""), "error"] = GONE
        chosen = [f"metrics.{key}" for key in keys] if keys else ["metrics"]
        return _oldest_first(frame[[*(c for c in EXPERIMENT_RUN_COLUMNS if c != "metrics"),
                                    *chosen, "setup"]])


def _oldest_first(frame: pd.DataFrame) -> pd.DataFrame:
    """The runs by creation, then id (a time that cannot be read last)."""
    order = frame[["created_at", "id"]].sort_values(["created_at", "id"]).index
    return frame if order.equals(frame.index) else frame.loc[order].reset_index(drop=True)


@dataclass(frozen=True)
class Picked:
    """Chosen keys of a run's metrics picked out in SQL: `values`, a JSON array of their
    values in the keys' order (NULL when the database could not read the metrics), and
    `unread`, the stored metrics where it could not (NULL where it could)."""

    values: Any
    unread: Any


def _picked(dialect: str, keys: list[str]) -> Picked | None:
    """The SQL that picks `keys` out of each run's metrics on SQLite, or None elsewhere.
    `json_extract` with a path per key returns their values as a JSON array, each as stored,
    over the metrics `json_valid` accepts (RFC 8259: the NaN and Infinity Python reads are
    left to Python), NULL for a key that is missing and for metrics that are not an object,
    as a Python `dict.get` on what `json.loads` reads gives None; a key written twice in one
    object reads its first value, where Python reads its last (Parley never writes one:
    `json.dumps` cannot). PostgreSQL's `json_to_record` was slower than sending the text and
    decoding it in Python (0.26 s of the server's time for 20,000 runs)."""
    if dialect != "sqlite":
        return None
    paths = [f'$."{key}"' for key in keys]
    valid = func.json_valid(RunRow.metrics) == 1
    # with one path json_extract returns the value itself, not an array of values
    values = func.json_extract(RunRow.metrics, *paths, *paths[:1] * (len(paths) == 1))
    return Picked(case((valid, values), else_=None), case((valid, None), else_=RunRow.metrics))


def _metrics_columns(keys: list[str], picked: list[Any], unread: list[Any]
                     ) -> dict[str, pd.Series]:
    """A column per key (`metrics.KEY`) from what `_picked` read: each run's values from its
    JSON array, or from its stored metrics decoded here where the database left them; held
    as they are (object columns: a missing value stays None, a count stays an int)."""
    width = len(keys)
    by_key: list[list[Any]] = [[] for _ in keys]
    for start in range(0, len(picked), CHUNK):
        rows = []
        for values, stored in zip(picked[start:start + CHUNK], unread[start:start + CHUNK],
                                  strict=True):
            if values is not None:
                listed = json.loads(values) if isinstance(values, str) else values
                rows.append(listed[:width])
            else:
                found = readback.decode(stored, *_SHAPES["metrics"])[0]
                rows.append([found.get(key) for key in keys])
        for column_, values in zip(by_key, zip(*rows, strict=True), strict=True):
            column_.extend(values)
    return {f"metrics.{key}": pd.Series(values, dtype=object)
            for key, values in zip(keys, by_key, strict=True)}
