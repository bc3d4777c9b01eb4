"""Moving runs in and out of the store: export as JSON, import (every record checked first,
the same on both backends), and the raw row copy benchmark fixtures use.

An import is a claim, checked before anything is written: a file naming one run twice is
refused; a turn whose model or `simulated` flag disagrees with its seat in the run's own
configuration is refused (a simulated run cannot carry real, priced turns), and a simulated
seat's turn costs 0 whatever the file says. An imported run keeps who imported it and when
(`imported_by`, `imported_at`) apart from the `started_by` its file claims, and its labels
are written only onto the runs the file adds (`engine.store.labels.import_labels`)."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select

from engine.models import ConfigError, is_simulated, now, total_cost
from engine.store import facets, labels, records
from engine.store.database import READ_ONLY
from engine.store.reading import RunReading
from engine.store.records import (
    RunRecord,
    error_text,
    json_reason,
    strip_secrets,
    why_invalid,
)
from engine.store.schema import RunRow, TurnRow
from engine.store.signal_columns import signal_values
from engine.store.simulated import seat_models, simulation
from engine.store.statements import INSERT_TURN, RUNS, TURNS, present
from engine.text import NAME_MAX


def parse_import(data: str | bytes, results: Mapping[str, type[Any]]
                 ) -> list[tuple[str, RunRecord]]:
    """Every run of an export (one JSON document, or JSON lines split on `\\n` only), each
    validated with its place (`line N` or `record N`) against the protocols Parley runs
    (`results`: each one's result type, handed in by the protocols' side); `ConfigError` on
    the first bad one, or on a run the file names twice, so that nothing of a bad file is
    written."""
    docs = [(where, checked_record(where, doc, results)) for where, doc in _documents(data)]
    first: dict[str, str] = {}
    for where, record in docs:
        if record.id in first:
            raise ConfigError(f"import: {where} repeats run {record.id!r} (first at "
                              f"{first[record.id]}): which of the two is the run? Nothing was "
                              "imported", "input")
        first[record.id] = where
    return docs


def _documents(data: str | bytes) -> list[tuple[str, Any]]:
    """The JSON documents of an export, each with its place; `ConfigError` when the file is
    too big, not UTF-8 or not JSON."""
    if len(data) > records.MAX_IMPORT_BYTES:  # bytes, or characters (never more than bytes)
        raise ConfigError(_too_big(len(data)), "limit")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"import: not UTF-8 text (byte {exc.start})", "input") from None
    stripped = data.strip()
    if not stripped:
        return []
    single = _whole_document(stripped)
    if single is not None:
        return [("record 1", single)]
    docs: list[tuple[str, Any]] = []
    for number, line in enumerate(data.split("\n"), 1):
        if not line.strip():
            continue
        try:
            docs.append((f"line {number}", json.loads(line)))
        except (ValueError, RecursionError) as exc:
            raise ConfigError(f"import: line {number} is not JSON ({json_reason(exc)}); "
                              "nothing was imported", "input") from None
    return docs


def checked_record(where: str, doc: Any, results: Mapping[str, type[Any]]) -> RunRecord:
    """One exported run validated (`ConfigError` naming `where` and the field when it is not
    one Parley can store and read back: of a protocol `results` names, its result of that
    protocol's type)."""
    if not isinstance(doc, dict) or "id" not in doc or "protocol" not in doc:
        raise ConfigError(f"import: {where} is not a Parley run export (it needs an "
                          "id, a protocol and a question); nothing was imported", "input")

    def refused(problem: str) -> ConfigError:
        return ConfigError(f"import: {where} (run {str(doc['id'])[:40]!r}){problem}; nothing "
                           "was imported", "input")
    if doc.get("unreadable"):
        raise refused(f" was exported unreadable ({str(doc['unreadable'])[:200]!r})")
    try:
        record = RunRecord.model_validate(doc)
    except ValidationError as exc:
        raise refused(f": {why_invalid(exc)}") from None
    if record.protocol not in results:  # no page, chart or re-run could read it
        raise refused(f": protocol {record.protocol!r} is not one of Parley's "
                      f"({', '.join(results)})")
    problem = result_problem(record.protocol, record.result, results[record.protocol])
    if problem:
        raise refused(f": result {problem}")
    seen: set[int] = set()
    for turn in record.turns:
        if turn.idx in seen:
            raise refused(f": turn {turn.idx} appears twice")
        seen.add(turn.idx)
    labels.misfiled(where, record)
    seat_problem = turn_seat_problem(record)
    if seat_problem:
        raise refused(f": {seat_problem}")
    return record


def _model_name(spec: str) -> str:
    """A model spec without its query (`openai:gpt-4o?endpoint=lab` -> `openai:gpt-4o`)."""
    return spec.split("?", 1)[0].strip()


def turn_seat_problem(record: RunRecord) -> str:
    """Why a run's turns disagree with the seats of its own configuration ("" when they do
    not): a turn naming a seat the configuration does not seat, played by another model
    than its seat's, or whose `simulated` flag is not its model's. Without seats in the
    configuration (an old export), a turn's flag must still be its own model's."""
    seats = dict(seat_models(record.config))
    for turn in record.turns:
        model = turn.model.strip()
        if seats:
            if turn.seat not in seats:
                return (f"turn {turn.idx} is by seat {turn.seat[:60]!r}, which the run's "
                        "configuration does not seat")
            model = model or seats[turn.seat]
            if _model_name(model) != _model_name(seats[turn.seat]):
                return (f"turn {turn.idx} (seat {turn.seat[:60]!r}) was played by "
                        f"{_model_name(model)[:80]!r}, not by its seat's model "
                        f"{_model_name(seats[turn.seat])[:80]!r}")
        if model and turn.simulated is not is_simulated(model):
            return (f"turn {turn.idx} (seat {turn.seat[:60]!r}) says simulated="
                    f"{str(turn.simulated).lower()}, but its model is {_model_name(model)[:80]!r}")
    return ""


def result_problem(protocol: str, result: Mapping[str, Any], model: type[Any]) -> str:
    """Why a stored `result` is not what the protocol's own result (`model`) holds ("" when
    it is, or when it is empty: a run that did not complete has none). The pages, charts and
    Insights read these fields, so an import must not bring in a shape they cannot read."""
    if not result:
        return ""
    try:
        model.model_validate(dict(result))
    except ValidationError as exc:
        return f"is not a {protocol} result ({why_invalid(exc)})"
    return ""


def _too_big(size: int) -> str:
    limit = records.MAX_IMPORT_BYTES
    return (f"import: the file is {size:,} bytes; the limit is {limit:,} bytes "
            f"({limit / 1e6:.0f} MB; split it)")


def _whole_document(text: str) -> Any:
    """The one JSON document `text` holds, or None when it is JSON lines (or when its first
    line is broken, which the line-by-line reading reports with its number)."""
    if not text.startswith("{"):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, json.JSONDecodeError) and exc.msg == "Extra data":
            return None  # JSON lines: the first line was a whole document
        first = text.split("\n", 1)[0]
        if "\n" not in text or _parses(first):
            return None  # JSON lines with a later line broken
        where = f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise ConfigError(f"import: not JSON ({json_reason(exc)}{where}); nothing was imported",
                          "input") from None


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True


def imported_rows(record: RunRecord, imported_by: str = "", imported_at: Any = None
                  ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The `runs` row of an imported record (a run left `running` imports `interrupted`),
    marked with who imported it and when, and its `turns` rows. A turn costs 0 when the
    simulated model made it or its seat is the simulated model's, whatever the file says;
    else what the file says (checked finite and non-negative; absent: unknown)."""
    simulated = {name for name, model in seat_models(record.config) if is_simulated(model)}
    turns = []
    for turn in record.turns:
        values = records.record_row(TURNS, turn.model_dump())
        values["started_at"] = values["started_at"] or now()
        values["finished_at"] = values["finished_at"] or values["started_at"]
        values["cost_usd"] = 0.0 if turn.simulated or turn.seat in simulated else turn.cost_usd
        turns.append({"run_id": record.id, **values})
    values = record.model_dump(exclude={"turns", "unreadable", "preferences", "ratings"})
    values["imported_by"], values["imported_at"] = imported_by, imported_at or now()
    values.update(signal_values(values["metrics"]))  # read off the (checked) metrics
    values["config"] = strip_secrets(values["config"])
    records.record_row(RUNS, values)
    values["created_at"] = values["created_at"] or now()
    # The file's total is never trusted: it is the sum of the (checked) turns' costs.
    values["cost_usd"] = records.money(total_cost(turns))
    # Simulated when any seat is, whatever the file says: never pooled with real runs.
    values["simulated"] = bool(simulation(record.simulated, record.models, record.config)[0])
    if values["status"] == "running":
        values["status"] = "interrupted"
    values["experiment_id"], values["tags"] = None, json.dumps(
        imported_tags(record.tags, record.experiment_id), ensure_ascii=False)
    return values, turns


def imported_tags(tags: Sequence[str], experiment_id: str | None) -> list[str]:
    """An imported run's tags: it never enters an experiment's accounting (Parley imports
    runs, not experiments, so an experiment id in a file could only forge or shadow a cell
    of an experiment stored here), so its `cell:Q:C:R` tag becomes
    `imported-cell:EXPERIMENT:Q:C:R`: where it came from stays readable, and no experiment
    counts it, reruns around it or skips the cell it names."""
    out = []
    for tag in tags:
        if tag.startswith("cell:"):
            tag = f"imported-cell:{experiment_id or '?'}:{tag[len('cell:'):]}"[:NAME_MAX]
        out.append(tag)
    return out


@dataclass(frozen=True)
class ImportReport:
    """What an import wrote: the runs it added, those it skipped (already stored: their
    labels in the file are not written either), and the labels written onto its runs."""

    runs: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    preferences: int = 0
    ratings: int = 0

    def summary(self) -> str:
        """One line for the CLI: `imported N run(s) ...`."""
        skipped = (f"; skipped {len(self.skipped)} already in this database, with the "
                   "labels they carry" if self.skipped else "")
        return (f"imported {len(self.runs)} run(s){skipped}; {self.preferences} "
                f"preference(s) and {self.ratings} rating(s) written")


class Transfer(RunReading):
    """The store's export and import of runs (a part of `Store`)."""

    def exported(self, run_id: str) -> dict[str, Any]:
        """One run as an export holds it: `get(run_id)` with `simulated` true when any seat
        is and `simulated_seats` naming the seats the simulated model played (an import
        ignores the list and keeps the flag)."""
        run = self.get(run_id)
        text, seats = simulation(run["simulated"], run["models"], run["config"])
        # A key a run stored before errors were redacted never leaves in an export.
        turns = [{**t, "error": error_text(t.get("error")),
                  "warnings": [error_text(w) for w in t.get("warnings") or ()]}
                 for t in run.get("turns") or ()]
        with self.engine.connect() as connection:
            carried = labels.exported_labels(connection, run_id)
        return {**run, "error": error_text(run.get("error")), "turns": turns,
                "simulated": bool(text), "simulated_seats": seats, **carried}

    def export_run(self, run_id: str) -> str:
        """One run as a JSON document (row, result and turns with prompts and replies)."""
        return json.dumps(self.exported(run_id), ensure_ascii=False, default=str, indent=2)

    def export_jsonl(self, run_ids: Iterable[str] | None = None) -> str:
        """Many runs as JSON lines (all runs when `run_ids` is None)."""
        if run_ids is None:
            with self.engine.connect() as connection:
                run_ids = list(connection.execute(select(RunRow.id).order_by(
                    RunRow.created_at.desc())).scalars())
        return "".join(json.dumps(self.exported(i), ensure_ascii=False, default=str) + "\n"
                       for i in run_ids)

    def import_runs(self, data: str | bytes, *, results: Mapping[str, type[Any]],
                    imported_by: str = "") -> list[str]:
        """Import runs exported by `export_run` / `export_jsonl`, with the labels they carry;
        returns the ids of the runs added (`import_file` says more)."""
        return self.import_file(data, results=results, imported_by=imported_by).runs

    def import_file(self, data: str | bytes, *, results: Mapping[str, type[Any]],
                    imported_by: str = "") -> ImportReport:
        """Import runs exported by `export_run` / `export_jsonl`, with the labels they carry
        (`engine.store.labels.import_labels`: onto the runs this import adds only); existing
        ids are skipped. `results` is each protocol's result type, handed in by the
        protocols' side (`engine.protocols.storing.Store.import_file`): the store knows no
        protocol. Every record is checked first (`parse_import`): a bad one is refused
        with its line number (`ConfigError`) and nothing of the file is written. Each run and
        label written records `imported_by` (who imports: the CLI's `cli:USER`, a signed-in
        address) and the time."""
        docs = parse_import(data, results)
        if not docs:
            return ImportReport()
        if self.read_only:
            raise ConfigError(READ_ONLY.format(url=self.url_safe), "input")
        who = records.validate(records.ExperimentRecord, {"started_by": imported_by},
                               "import").started_by
        when = now()
        imported: list[str] = []
        skipped: list[str] = []
        with self.writing() as connection:
            stored = present(connection, RUNS.c.id, [record.id for _, record in docs])
            for _, record in docs:
                if record.id in stored:
                    skipped.append(record.id)
                    continue
                columns, turns = imported_rows(record, who, when)
                connection.execute(RUNS.insert().values(**columns))
                facets.record(connection, [columns])
                if turns:
                    connection.execute(INSERT_TURN, turns)
                imported.append(record.id)
            counts = labels.import_labels(connection, docs, set(imported), who, when)
        return ImportReport(imported, skipped, counts.preferences, counts.ratings)

    def raw_rows(self) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
        """Every run row and every run's turn rows exactly as stored (unparsed), for a
        benchmark fixture that copies them (`insert_raw_chunks`)."""
        with self.engine.connect() as connection:
            runs = [dict(r) for r in connection.execute(select(RunRow.__table__)).mappings()]
            turns: dict[str, list[dict[str, Any]]] = {}
            for row in connection.execute(select(TurnRow.__table__)
                                          .order_by(TurnRow.run_id, TurnRow.idx)).mappings():
                turns.setdefault(row["run_id"], []).append(dict(row))
        return runs, turns

    def insert_raw_chunks(self, chunks: Iterable[tuple[Sequence[Mapping[str, Any]],
                                                       Sequence[Mapping[str, Any]]]],
                          *, durable: bool = True) -> int:
        """Bulk-insert rows shaped as `raw_rows` gives them, unchecked, from a stream of (runs,
        turns) chunks: for benchmark fixtures of thousands of runs, never for user input
        (`import_runs`). One transaction per chunk on one connection, so that a million rows
        never sit in memory at once; returns the runs written. A chunk is one executemany per
        table (on PostgreSQL psycopg's, which pipelines the statements; no bench fills
        PostgreSQL so far). `durable=False`: a benchmark's throwaway SQLite file, written
        without waiting for the disk (`Database.loading`)."""
        written = 0
        with self.loading(durable) as connection:
            for runs, turns in chunks:
                with connection.begin():
                    if runs:
                        connection.execute(RUNS.insert(), list(runs))
                        facets.record(connection, runs)
                    if turns:
                        connection.execute(INSERT_TURN, list(turns))
                written += len(runs)
        return written
