"""Reading an experiment's runs for its results: one narrow query, typed columns only.

`Store.runs` hands back every column of a run with its configuration, tags and metrics
parsed; an experiment's results over 20,000 runs need a dozen typed columns and the run's
signals. Here the database sends only those: on SQLite only the keys of a run's metrics the
results read (`_picked`), a run's cell read off its tags text (`readback.tag_cells`), and a
run's configuration once per distinct configuration (`_by_label`, `_joined`), so whether a
run is simulated is worked out once per configuration, not once per run. Reads never write:
a `running` run whose process is gone reads as `interrupted`, as in `Store.runs`.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import and_, case, func, literal, null, select, union_all
from sqlalchemy.exc import OperationalError

from engine.store import readback
from engine.store.database import Database, signs_of_life
from engine.store.liveness import GONE
from engine.store.schema import RunRow
from engine.store.simulated import simulation

# The columns `experiment_runs` returns, beside `setup` (which distinct configuration).
EXPERIMENT_RUN_COLUMNS = ["id", "protocol", "question", "expected", "status", "cell_q",
                          "cell_c", "cell_r", "superseded",
                          "metrics", "correct", "unanswered", "calls", "degraded",
                          "degraded_run", "lost", "tokens_in", "tokens_out", "cost_usd",
                          "duration", "simulated", "simulation",
                          "created_at", "finished_at", "error"]
_SETUP = (RunRow.config, RunRow.models, RunRow.simulated)
CHUNK = 100  # metrics decoded this many runs at a time (`readback.columns`)


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
        metrics = [RunRow.metrics] if picked is None else [picked.values.label("picked"),
                                                           picked.unread.label("metrics")]
        chosen = [*(column for column in RunRow.__table__.columns
                    if column.name in EXPERIMENT_RUN_COLUMNS and column.name != "metrics"),
                  RunRow.tags, RunRow.models, *metrics,
                  *signs_of_life("host", "pid", "heartbeat_at")]
        with self.engine.connect() as connection:
            read = _by_label(connection, experiment_id, chosen) or _joined(
                connection, experiment_id, chosen)
        columns: dict[str, Any] = read[0]
        kinds = read[1]
        count = len(columns["id"])
        gone = self.gone_rows(columns)
        columns["simulation"] = [kinds.get(key, "") for key in columns["setup"]]
        for name in ("config", "label", "models", "host", "pid", "heartbeat_at"):
            columns.pop(name, None)  # read, not returned
        # JSON decoded from the rows as read: in a data frame the text would be copied into
        # an Arrow string column and back out again only to be decoded
        (columns["cell_q"], columns["cell_c"], columns["cell_r"],
         columns["superseded"]) = readback.tag_cells(columns.pop("tags"))
        if keys:
            given = columns.pop("picked") if "picked" in columns else [None] * count
            columns.update(_metrics_columns(list(keys), given, columns.pop("metrics")))
        else:
            columns["metrics"] = [readback.decode(v, *readback.METRICS)[0]
                                  for v in columns["metrics"]]
        frame = pd.DataFrame(columns, columns=list(columns))
        frame = readback.tolerant_frame(frame, "runs", decoded=True)
        if gone:  # as the reaper will store them
            dead = pd.Series([i in gone for i in range(count)], index=frame.index)
            frame.loc[dead, "status"] = "interrupted"
            frame.loc[dead & (frame["error"].fillna("") == ""), "error"] = GONE
        chosen = [f"metrics.{key}" for key in keys] if keys else ["metrics"]
        return _oldest_first(frame[[*(c for c in EXPERIMENT_RUN_COLUMNS if c != "metrics"),
                                    *chosen, "setup"]])


Read = tuple[dict[str, list[Any]], dict[Any, str]]  # the runs' columns; simulation by setup


def _simulation(simulated: Any, models: Any, config: Any) -> str:
    """`simulation` of one distinct configuration as the database sent it (a data frame
    would hold a missing text as NaN)."""
    return simulation(simulated, readback.clean_stored(models),
                      readback.decode(config, dict, {})[0])[0]


def _by_label(connection: Any, experiment_id: str, chosen: list[Any]) -> Read | None:
    """The experiment's runs (`chosen` columns and their label), and in the same statement
    after them each distinct label, models, simulated flag and configuration (`DISTINCT`: a
    few rows), so each run's configuration is its label's, sent once; a run's `setup` is
    its configuration's number. None when a label ran more than one configuration with the
    same models and flag (`_joined` reads those). Grouping 20,000 configurations of 1 KB
    (GROUP BY sorts them) and joining them back cost SQLite a third of the read."""
    mine = RunRow.experiment_id == experiment_id
    setups = select(RunRow.label, RunRow.models, RunRow.simulated, RunRow.config).where(
        mine).distinct().cte("setups")
    runs = select(literal(0).label("part"), *chosen, RunRow.label, null().label("config")
                  ).where(mine)
    names = list(runs.selected_columns.keys())
    given = {"part": literal(1), "models": setups.c.models, "simulated": setups.c.simulated,
             "label": setups.c.label, "config": setups.c.config}
    sent = select(*(given.get(name, null()) for name in names))
    found = readback.columns(connection.execute(union_all(runs, sent)))
    parts = found.pop("part")
    extra = [i for i, part in enumerate(parts) if part]
    rows = [(found["label"][i], found["models"][i], found["simulated"][i], found["config"][i])
            for i in extra]
    count = len(parts) - len(extra)
    last, skip = extra == list(range(count, len(parts))), set(extra)
    for name, values in found.items():  # the runs alone (the setups come last, or anywhere)
        found[name] = values[:count] if last else [v for i, v in enumerate(values)
                                                   if i not in skip]
    numbers: dict[tuple[Any, Any, Any], int] = {}  # a distinct configuration's number
    of_label: dict[tuple[Any, Any, Any], int] = {}
    for label, models, simulated, config in rows:
        if (label, models, simulated) in of_label:
            return None  # two configurations under one label: joined, run by run
        of_label[(label, models, simulated)] = numbers.setdefault(
            (config, models, simulated), len(numbers))
    setup = [of_label.get(key) for key in zip(found["label"], found["models"],
                                               found["simulated"], strict=True)]
    if None in setup:
        return None
    found["setup"] = setup
    return found, {number: _simulation(simulated, models, config)
                   for (config, models, simulated), number in numbers.items()}


def _joined(connection: Any, experiment_id: str, chosen: list[Any]) -> Read:
    """The experiment's runs (`chosen` columns) with their configuration grouped in SQL
    (configuration, models and simulated flag) and joined back to each run, its first run
    (`setup`, the lowest id) carrying it: the read when a label ran several configurations."""
    setups = select(*_SETUP, func.min(RunRow.id).label("setup")).where(
        RunRow.experiment_id == experiment_id).group_by(*_SETUP).cte("setups")
    query = select(
        *chosen, setups.c.setup,
        case((RunRow.id == setups.c.setup, RunRow.config), else_=None).label("config"),
    ).join_from(RunRow, setups, and_(  # NOT NULL columns: equality, which PostgreSQL hashes
        # (IS NOT DISTINCT FROM it cannot: it compared every run with every configuration
        # and, costing that high, compiled the query first: 0.4 s a read)
        setups.c.config == RunRow.config, setups.c.models == RunRow.models,
        setups.c.simulated == RunRow.simulated)).where(RunRow.experiment_id == experiment_id)
    # in no order: sorted after (`_oldest_first`), PostgreSQL sorted 20,000 wide rows on disk
    found = readback.columns(connection.execute(query))
    return found, {setup: _simulation(simulated, models, config)
                   for run_id, setup, simulated, models, config in zip(
                       found["id"], found["setup"], found["simulated"], found["models"],
                       found["config"], strict=True) if run_id == setup}


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
                found = readback.decode(stored, *readback.METRICS)[0]
                rows.append([found.get(key) for key in keys])
        for column_, values in zip(by_key, zip(*rows, strict=True), strict=True):
            column_.extend(values)
    return {f"metrics.{key}": pd.Series(values, dtype=object)
            for key, values in zip(keys, by_key, strict=True)}
