"""Ordered, named migrations, each run once per database and never changed once shipped:
tables created as they first shipped (`engine.store.shipped`), columns added (`_add`: older
rows hold the column's default, or NULL) and stored values rewritten once into the shape the
current code reads (each such migration's function says how).

The store knows no protocol, so the part of `0004`, `0005` and `0023` that reads old rows
with a protocol's code (its metrics, its assessment, whether it gives an answer) is not done
here: on a database that holds runs, the migration notes it in `backfills`, and the
protocols' side does it once the store is open (`Store.backfill`, handed the registry by
`engine.protocols.storing.Store` as it opens).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, false, func, or_, select, text, true, update
from sqlalchemy.schema import CreateIndex

from engine.models import ConfigError, Turn, now
from engine.store import facets, shipped, statements
from engine.store.records import error_text, latest
from engine.store.schema import (
    ANSWERS_INDEX,
    ONE_PREFERENCE,
    ONE_RATING,
    ExperimentRow,
    PreferenceRow,
    RatingRow,
    RunRow,
    TurnRow,
)
from engine.store.search_index import bound_index, create_index
from engine.store.signal_columns import SIGNAL_COLUMNS, signal_values
from engine.store.simulated import simulation
from engine.store.versions import set_version as version_of

_SEAT_KEYS = ("name", "model", "persona", "persona_name", "role", "temperature", "icon")


def regroup(config: Any) -> Any:
    """An old-shape configuration, its seats one flat list each naming its `slot`, as a
    `RunConfig` holds them (grouped by slot); a list without slots (a result saved without
    its configuration) keeps no seats, so its run says it cannot be re-run. Other values are
    returned as they are."""
    if not isinstance(config, Mapping):
        return config
    if isinstance(config.get("seats"), Mapping):  # by slot already: every slot a list
        seats_by_slot = config["seats"]
        if all(isinstance(v, list) for v in seats_by_slot.values()):
            return config
        return {**config, "seats": {k: v if isinstance(v, list) else [v]
                                    for k, v in seats_by_slot.items() if v is not None}}
    if not isinstance(config.get("seats"), list):
        return config
    seats = [s for s in config["seats"] if isinstance(s, Mapping)]
    grouped: dict[str, list[dict[str, Any]]] = {}
    if seats and all(isinstance(s.get("slot"), str) and s.get("slot") for s in seats):
        for seat in seats:
            grouped.setdefault(str(seat["slot"]), []).append(
                {k: seat[k] for k in _SEAT_KEYS if k in seat and seat[k] is not None})
    out = {k: v for k, v in config.items() if k != "seats"}
    out["seats"] = grouped
    return out


def _rewrite(connection: Connection, table: Any, column: Any, change: Callable[[Any], Any]
             ) -> None:
    rows = connection.execute(select(table.c.id, column)).all()
    for row_id, raw in rows:
        try:
            value = json.loads(raw) if raw else None
        except (TypeError, ValueError):
            continue  # an unreadable value stays as it is (reads show it as unreadable)
        new = change(value)
        if new is not value:
            connection.execute(update(table).where(table.c.id == row_id).values(
                {column.name: json.dumps(new, ensure_ascii=False)}))


def note_backfill(connection: Connection, name: str) -> None:
    """Leave migration `name`'s back-fill of old rows to the protocols' side, when the
    database holds any run (a new one has nothing to fill)."""
    if connection.execute(select(statements.RUNS.c.id).limit(1)).first() is None:
        return
    statements.BACKFILL_LOG.create(connection, checkfirst=True)  # a database older than 0026
    if connection.execute(select(statements.BACKFILL_LOG.c.name).where(
            statements.BACKFILL_LOG.c.name == name)).first() is None:
        connection.execute(statements.BACKFILL_LOG.insert().values(name=name,
                                                        noted_at=now()))


def _completed_results(connection: Connection, protocols: Mapping[str, Any]
                       ) -> Iterator[tuple[str, Any, Any, dict[str, Any]]]:
    """Each completed run whose stored result this version reads: its id, its protocol's
    registry entry (from `protocols`), the typed result (its `protocol` set) and the stored
    metrics. An unreadable run is skipped and stays as it is (reads show it as unreadable)."""
    runs = statements.RUNS
    rows = connection.execute(select(runs.c.id, runs.c.protocol, runs.c.result,
                                     runs.c.metrics).where(runs.c.status == "completed")).all()
    for run_id, protocol, result, metrics in rows:
        spec = protocols.get(protocol)
        try:
            stored = json.loads(metrics) if metrics else {}
            typed = spec.read_result(json.loads(result)) if spec is not None and result else None
        except (TypeError, ValueError):
            continue
        if spec is None or typed is None or not isinstance(stored, dict):
            continue
        typed.protocol = protocol
        yield run_id, spec, typed, stored


def configs_by_slot(connection: Connection) -> None:
    """Migration 0004: runs' and saved library configurations by slot (`regroup`); each
    run's outcome line in its metrics is left to the protocols' side (`outcome_metrics`)."""
    runs, library = statements.RUNS, statements.LIBRARY
    _rewrite(connection, runs, runs.c.config, regroup)
    _rewrite(connection, library, library.c.body, regroup)
    note_backfill(connection, "0004_configs_by_slot")


def outcome_metrics(connection: Connection, protocols: Mapping[str, Any]) -> None:
    """Back-fill of 0004: each completed run's metrics gain the outcome line its protocol
    writes now, read from its stored result."""
    runs = statements.RUNS
    for run_id, spec, typed, stored in _completed_results(connection, protocols):
        if "outcome" in stored:
            continue
        new = {**stored, **spec.metrics(typed)}  # the current signals win over old keys
        connection.execute(update(runs).where(runs.c.id == run_id).values(
            metrics=json.dumps(new, ensure_ascii=False, default=str)))


def _add(table: str, *columns: str) -> Callable[[Connection], None]:
    """A migration that adds `columns` (SQL column definitions, `{false}` standing for the
    dialect's literal false) to `table`."""
    def apply(connection: Connection) -> None:
        false_ = "false" if connection.dialect.name == "postgresql" else "0"
        for column in columns:
            connection.execute(text(f"ALTER TABLE {table} ADD COLUMN "
                                    + column.format(false=false_)))
    return apply


def degraded_runs(connection: Connection) -> None:
    """Migration 0005: the run-level `degraded_run` flag and `lost` text; the completed runs
    are assessed again on the protocols' side (`assess_again`)."""
    _add("runs", "degraded_run BOOLEAN NOT NULL DEFAULT {false}",
         "lost TEXT NOT NULL DEFAULT ''")(connection)
    note_backfill(connection, "0005_degraded_runs")


def assess_again(connection: Connection, protocols: Mapping[str, Any]) -> None:
    """Back-fill of 0005: completed runs are assessed as a run is now at its end: one in
    which no model call succeeded becomes `failed` with the error saying so, one that lost a
    decisive call or most of its turns is flagged with what it lost, and the metrics are
    written again by the current signals (a failed judge's 0.00 confidence becomes None)."""
    runs, turns = statements.RUNS, statements.TURNS
    for run_id, spec, typed, stored in _completed_results(connection, protocols):
        typed.turns = [Turn(index=t.idx, phase=t.phase, round=t.round, seat=t.seat,
                            status="ok" if t.status == "ok" else "degraded",
                            error=t.error or "")
                       for t in connection.execute(select(
                           turns.c.idx, turns.c.phase, turns.c.round, turns.c.seat,
                           turns.c.status, turns.c.error).where(turns.c.run_id == run_id)
                           .order_by(turns.c.idx))]
        error, lost = spec.assess(typed)
        connection.execute(update(runs).where(runs.c.id == run_id).values(
            status="failed" if error else "completed", error=error, degraded_run=bool(lost),
            lost="; ".join(lost), metrics=json.dumps({**stored, **spec.metrics(typed)},
                                                     ensure_ascii=False, default=str)))


def redacted_errors(connection: Connection) -> None:
    """Migration 0011: errors and warnings stored before they were redacted lose any key they
    hold (`engine.store.records.error_text`), in turns, runs and experiments."""
    for row_type in (TurnRow, RunRow, ExperimentRow):
        table: Any = row_type.__table__
        for row_id, error in connection.execute(select(table.c.id, table.c.error).where(
                table.c.error != "")).all():
            if error_text(error) != error:
                connection.execute(update(table).where(table.c.id == row_id)
                                   .values(error=error_text(error)))
    _rewrite(connection, statements.TURNS, statements.TURNS.c.warnings, _redacted)


def _redacted(warnings: Any) -> Any:
    """A stored list of warnings with every key redacted (the same list when none held
    one)."""
    if not isinstance(warnings, list):
        return warnings
    kept = [error_text(w) if isinstance(w, str) else w for w in warnings]
    return warnings if kept == warnings else kept


# Indexes that let Insights add runs up without reading their rows (`engine.store.aggregates`):
# every column the grouped summary reads, a protocol's runs of one kind in time order (its
# sample), and the two times the pages' cache key takes a maximum of (`schema.RunRow` holds
# them as they are now).
SUMMARY_INDEXES = {
    "ix_runs_summary": "runs (protocol, status, label, simulated, degraded_run, correct, "
                       "tokens_in, tokens_out, duration)",
    "ix_runs_sample": "runs (protocol, simulated, created_at, id)",
    "ix_runs_finished_at": "runs (finished_at)",
    "ix_runs_heartbeat_at": "runs (heartbeat_at)",
}


# From 0014 on, the summary index holds the runs' costs too.
SUMMARY_WITH_COST = SUMMARY_INDEXES["ix_runs_summary"].removesuffix(")") + ", cost_usd)"


def run_summary(connection: Connection) -> None:
    """Migration 0012: the `simulated` flag says alone whether the simulated model played a
    seat (older versions left it false on a run whose simulated calls all failed, and an
    import kept what its file said), and the indexes of the grouped summary."""
    runs = statements.RUNS
    rows = connection.execute(select(runs.c.id, runs.c.models, runs.c.config).where(
        runs.c.simulated == false())).all()
    for run_id, models, config in rows:
        try:
            seats = json.loads(config) if config else None
        except (TypeError, ValueError):
            seats = None
        if simulation(False, models, seats)[0]:
            connection.execute(update(runs).where(runs.c.id == run_id).values(simulated=True))
    for name, columns in SUMMARY_INDEXES.items():
        connection.execute(text(f"CREATE INDEX {name} ON {columns}"))


def run_facets(connection: Connection) -> None:
    """Migration 0013: the tags and model specs the filters offer, kept apart
    (`engine.store.facets`), filled from every stored run once."""
    shipped.RUN_FACETS.create(connection)
    runs = statements.RUNS
    seen = connection.execute(select(runs.c.tags, runs.c.models).distinct()).all()
    facets.record(connection, [{"tags": tags, "models": models} for tags, models in seen])


def costs(connection: Connection) -> None:
    """Migration 0014: `cost_usd` on runs and turns and `usage_estimated` on turns. Turns
    stored before prices were known have an unknown cost (NULL), except the simulated
    model's, which cost 0; a run costs 0 when none of its turns that succeeded or consumed
    tokens is of unknown cost (`engine.models.total_cost`), else its cost stays unknown."""
    _add("runs", "cost_usd FLOAT")(connection)
    _add("turns", "cost_usd FLOAT", "usage_estimated BOOLEAN NOT NULL DEFAULT {false}")(
        connection)
    runs, turns = statements.RUNS, statements.TURNS
    connection.execute(update(turns).where(turns.c.simulated == true(),
                                           turns.c.cost_usd.is_(None)).values(cost_usd=0.0))
    unknown = select(turns.c.id).where(
        turns.c.run_id == runs.c.id, turns.c.cost_usd.is_(None),
        or_(turns.c.status == "ok", turns.c.tokens_in + turns.c.tokens_out > 0))
    connection.execute(update(runs).where(runs.c.cost_usd.is_(None), ~unknown.exists())
                       .values(cost_usd=select(func.coalesce(func.sum(turns.c.cost_usd), 0.0))
                               .where(turns.c.run_id == runs.c.id).scalar_subquery()))
    # Insights adds costs up from the summary index too (`engine.store.aggregates`)
    connection.execute(text("DROP INDEX IF EXISTS ix_runs_summary"))
    connection.execute(text(f"CREATE INDEX ix_runs_summary ON {SUMMARY_WITH_COST}"))


# From 0023 on, the summary index holds whether a run went unanswered too.
SUMMARY_WITH_UNANSWERED = SUMMARY_WITH_COST.replace("correct,", "correct, unanswered,")


def unanswered(connection: Connection) -> None:
    """Migration 0023: runs gain `unanswered`, which the summary index holds (Insights
    counts it); the scoring of older runs is left to the protocols' side
    (`score_unanswered`)."""
    _add("runs", "unanswered BOOLEAN NOT NULL DEFAULT {false}")(connection)
    connection.execute(text("DROP INDEX IF EXISTS ix_runs_summary"))
    connection.execute(text(f"CREATE INDEX ix_runs_summary ON {SUMMARY_WITH_UNANSWERED}"))
    note_backfill(connection, "0023_unanswered")


def score_unanswered(connection: Connection, protocols: Mapping[str, Any]) -> None:
    """Back-fill of 0023: a run stored before it that was given an expected answer, ended
    (completed, or failed with no call that succeeded) and gave no answer, of a protocol that
    gives one, is scored as a run is now at its end (DESIGN 4): wrong and unanswered, where it
    used to be left out of every accuracy (`correct` NULL)."""
    answering = [name for name, spec in protocols.items()
                 if getattr(spec.result_type, "gives_answer", False)]
    runs = statements.RUNS
    connection.execute(update(runs).where(
        runs.c.correct.is_(None), runs.c.status.in_(("completed", "failed")),
        runs.c.protocol.in_(answering), runs.c.expected.is_not(None),
        func.trim(runs.c.expected) != "").values(correct=False, unanswered=True))


def signal_columns(connection: Connection) -> None:
    """Migration 0028: runs gain the typed signal columns, each run's read off its stored
    metrics (a run whose metrics cannot be read keeps NULLs, as a run without signals has),
    5,000 runs at a time; and `ix_runs_answers`, the covering index of Insights' opening
    answers (`RunAggregates.answer_summary`)."""
    kinds = {"tied": "BOOLEAN", "confidence_level": "VARCHAR(16)", "consensus": "FLOAT",
             "judge_confidence": "FLOAT", "first_share": "FLOAT"}
    _add("runs", *(f"{name} {kinds.get(name, 'INTEGER')}" for name in SIGNAL_COLUMNS))(
        connection)
    runs = statements.RUNS
    query = select(runs.c.id, runs.c.metrics).where(
        runs.c.metrics.is_not(None), runs.c.metrics != "{}").order_by(runs.c.id)
    change = update(runs).where(runs.c.id == bindparam("rid")).values(
        {name: bindparam(f"v_{name}") for name in SIGNAL_COLUMNS})
    last = ""
    while True:
        rows = connection.execute(query.where(runs.c.id > last).limit(5_000)).all()
        if not rows:
            break
        batch = []
        for run_id, raw in rows:
            try:
                metrics = json.loads(raw)
            except (TypeError, ValueError, RecursionError):
                continue
            values = signal_values(metrics)
            if any(v is not None for v in values.values()):
                batch.append({"rid": run_id, **{f"v_{k}": v for k, v in values.items()}})
        if batch:
            connection.execute(change, batch)
        last = rows[-1][0]
    connection.execute(text(f"CREATE INDEX IF NOT EXISTS ix_runs_answers ON runs "
                            f"({', '.join(ANSWERS_INDEX)})"))


def _latest_only(connection: Connection, table: Any, key: Callable[[Any], tuple[Any, ...]]
                 ) -> None:
    """Delete every row of `table` but the latest (by `created_at`, then id) of each `key`."""
    rows = connection.execute(select(table.c.id, table.c.created_at, *(
        c for c in table.c if c.name in ("rater", "run_a", "run_b", "run_id", "turn")))
    ).mappings().all()
    kept = {row["id"] for row in latest(rows, key, lambda row: (str(row["created_at"] or ""),
                                                              str(row["id"])))}
    gone = [row["id"] for row in rows if row["id"] not in kept]
    for start in range(0, len(gone), 500):
        connection.execute(table.delete().where(table.c.id.in_(gone[start:start + 500])))


def one_judgement(connection: Connection) -> None:
    """Migration 0018: `imported_by` and `imported_at` on runs and labels, and one label per
    rater and pair or run or turn: the latest of older duplicates kept, then the unique
    indexes."""
    moment = "TIMESTAMP WITH TIME ZONE" if connection.dialect.name == "postgresql" \
        else "DATETIME"
    for table in ("runs", "preferences", "ratings"):
        _add(table, "imported_by VARCHAR(200) NOT NULL DEFAULT ''",
             f"imported_at {moment}")(connection)
    _latest_only(connection, PreferenceRow.__table__,
                 lambda r: (r["rater"], *sorted((r["run_a"], r["run_b"]))))
    _latest_only(connection, RatingRow.__table__,
                 lambda r: (r["rater"], r["run_id"], -1 if r["turn"] is None else r["turn"]))
    for index in (ONE_PREFERENCE, ONE_RATING):  # expression indexes: never reflected
        connection.execute(CreateIndex(index))


def set_version(connection: Connection) -> None:
    """Migration 0022: the `approvals` table, and experiments gain `set_version`, computed
    for each stored experiment from the questions of its spec; one whose spec cannot be read
    keeps "" (not known)."""
    shipped.APPROVALS.create(connection)
    _add("experiments", "set_version VARCHAR(16) NOT NULL DEFAULT ''")(connection)
    table = statements.EXPERIMENTS
    for experiment_id, raw in connection.execute(select(table.c.id, table.c.spec).where(
            table.c.set_version == "")).all():
        try:
            spec = json.loads(raw) if raw else None
        except (TypeError, ValueError):
            continue  # an unreadable spec stays as it is (reads show it as unreadable)
        if isinstance(spec, dict) and isinstance(spec.get("questions"), list):
            connection.execute(update(table).where(table.c.id == experiment_id).values(
                set_version=version_of(spec["questions"])))


# --------------------------------------------------------------------------- the list
def _create(tables: Sequence[str]) -> Callable[[Connection], None]:
    """A migration that creates `tables` as they first shipped (`engine.store.shipped`)."""
    def apply(connection: Connection) -> None:
        shipped.SHIPPED.create_all(connection, tables=[shipped.SHIPPED.tables[t]
                                                       for t in tables])
    return apply


# Ordered, named migrations; append only. Each runs once per database, and none changes
# once shipped: a change to the tables is a new migration at the end.
MIGRATIONS: list[tuple[str, Callable[[Connection], None]]] = [
    ("0001_runs_and_turns", _create(["runs", "turns"])),
    ("0002_library", _create(["library"])),
    ("0003_experiments", _create(["experiments"])),
    ("0004_configs_by_slot", configs_by_slot),
    ("0005_degraded_runs", degraded_runs),
    ("0006_search", create_index),
    ("0007_turn_output", _add("turns", "output_mode VARCHAR(16)")),
    ("0008_workers", _create(["workers"])),
    ("0009_endpoint_limits", _create(["endpoint_limits", "endpoint_leases"])),
    ("0010_search_bounded", bound_index),
    ("0011_redacted_errors", redacted_errors),
    ("0012_run_summary", run_summary),
    ("0013_run_facets", run_facets),
    ("0014_costs", costs),
    ("0015_labels", _create(["preferences", "ratings"])),
    ("0016_started_by", _add("runs", "started_by VARCHAR(200) NOT NULL DEFAULT ''")),
    ("0017_experiment_started_by",
     _add("experiments", "started_by VARCHAR(200) NOT NULL DEFAULT ''")),
    ("0018_one_judgement", one_judgement),
    ("0019_reply_bytes", _add("turns", "reply_bytes INTEGER")),
    ("0020_search_bounded_tighter", bound_index),
    ("0021_endpoint_support", _create(["endpoint_support"])),
    ("0022_set_version", set_version),
    ("0023_unanswered", unanswered),
    ("0026_backfills", _create(["backfills"])),
    ("0028_signal_columns", signal_columns),
    ("0036_turn_failure", _add("turns", "failure VARCHAR(64) NOT NULL DEFAULT ''")),
]

# The back-fills a migration may leave to the protocols' side (`note_backfill`), by the
# migration's name; each is handed the protocol registry (`Store.backfill`).
BACKFILLS: dict[str, Callable[[Connection, Mapping[str, Any]], None]] = {
    "0004_configs_by_slot": outcome_metrics,
    "0005_degraded_runs": assess_again,
    "0023_unanswered": score_unanswered,
}


def refuse_newer(done: set[str]) -> None:
    """Refuse a database that holds a migration this Parley does not know."""
    unknown = sorted(done - {name for name, _ in MIGRATIONS})
    if unknown:
        raise ConfigError(f"this database was written by a newer Parley (migration "
                          f"{unknown[-1]}); upgrade Parley or use another database", "input")
