"""Human judgement (DESIGN section 4): a person's preference between two runs' final answers
and a person's 1-5 rating of a run or of one of its turns, each with a comment.

Every label is checked (`PreferenceRecord`, `RatingRecord`) and its runs (and turn) must be
stored. A rater's second label of the same unordered pair, run or turn replaces the first
(the unique indexes `schema.ONE_PREFERENCE` and `schema.ONE_RATING` hold it on both backends).
Labels travel with their runs: an export holds every label naming the run; an import writes
only the labels of the runs that file adds (`import_labels`: a file may not vote on runs
judged here), each marked with who imported it and when, its rater being the file's claim.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast
from uuid import uuid4

import pandas as pd
from sqlalchemy import Connection, Table, and_, delete, or_, select
from sqlalchemy.exc import IntegrityError

from engine.access import LOCAL, Actor, require
from engine.models import ConfigError, now
from engine.store import readback
from engine.store.database import Database
from engine.store.records import PreferenceRecord, RatingRecord, RunRecord, latest, validate
from engine.store.schema import PreferenceRow, RatingRow, RunRow, TurnRow
from engine.store.statements import present
from engine.text import clean_text

PREFERENCES = cast(Table, PreferenceRow.__table__)
RATINGS = cast(Table, RatingRow.__table__)
CLOCK_SKEW = timedelta(minutes=5)  # how far ahead of this clock an imported label may be dated
WRITE_TRIES = 20  # tries of a label that several tabs replace at once (`Labels._replace`)


@dataclass(frozen=True)
class LabelCounts:
    """How many labels an import wrote."""

    preferences: int = 0
    ratings: int = 0


def _pair(run_a: str, run_b: str) -> Any:
    """The preferences of the unordered pair {run_a, run_b}."""
    return or_(and_(PREFERENCES.c.run_a == run_a, PREFERENCES.c.run_b == run_b),
               and_(PREFERENCES.c.run_a == run_b, PREFERENCES.c.run_b == run_a))


def _turn_missing(connection: Connection, run_id: str, turn: int) -> bool:
    return connection.execute(select(TurnRow.idx).where(
        TurnRow.run_id == run_id, TurnRow.idx == turn).limit(1)).first() is None


def _text(value: Any) -> Any:
    """Text cleaned before it is checked (a lone surrogate becomes U+FFFD, as in every
    record); anything else is left for the check to refuse."""
    return clean_text(value) if isinstance(value, str) else value


def _dumped(record: PreferenceRecord | RatingRecord) -> dict[str, Any]:
    values = record.model_dump()
    values["created_at"] = values["created_at"] or now()
    return values


class Labels(Database):
    """The store's human labels (a part of `Store`)."""

    def add_preference(self, run_a: str, run_b: str, *, rater: str, choice: str,
                       comment: str = "", shown_left: str | None = None,
                       actor: Actor = LOCAL) -> str:
        """Record that `rater` finds run `a`'s final answer better, run `b`'s, or neither
        (`choice` a | b | tie), and which of the two was shown on the left (`shown_left`
        a | b, None when not side by side); returns the label's id. It replaces the rater's
        earlier preference of the same two runs, in either order. `ConfigError` when a
        value is not valid or a run is not stored; `NotAllowed` when `actor` may not label."""
        require(actor, "label runs")
        record = validate(PreferenceRecord, {
            "id": uuid4().hex[:16], "run_a": run_a, "run_b": run_b, "shown_left": shown_left,
            "rater": _text(rater), "choice": choice, "comment": _text(comment)}, "preference")
        if record.run_a == record.run_b:
            raise ConfigError("preference: a preference compares two different runs "
                              f"(both are {record.run_a!r})", "input")

        def check(connection: Connection) -> None:
            missing = {record.run_a, record.run_b} - present(
                connection, RunRow.id, (record.run_a, record.run_b))
            if missing:
                raise ConfigError(f"preference: no run {sorted(missing)[0]!r} is stored",
                                  "input")
        self._replace(PREFERENCES, _dumped(record), check, PREFERENCES.c.rater == record.rater,
                      _pair(record.run_a, record.run_b))
        return record.id

    def add_rating(self, run_id: str, *, rater: str, score: int, comment: str = "",
                   turn: int | None = None, actor: Actor = LOCAL) -> str:
        """Record `rater`'s score (1..5) of run `run_id`, or of its turn `turn` (by index);
        returns the label's id. It replaces the rater's earlier rating of the same run (or
        turn). `ConfigError` when a value is not valid or the run (or the
        turn) is not stored; `NotAllowed` when `actor` may not label."""
        require(actor, "label runs")
        record = validate(RatingRecord, {"id": uuid4().hex[:16], "run_id": run_id, "turn": turn,
                                         "rater": _text(rater), "score": score,
                                         "comment": _text(comment)}, "rating")
        same_turn = RATINGS.c.turn.is_(None) if record.turn is None else \
            RATINGS.c.turn == record.turn

        def check(connection: Connection) -> None:
            if not present(connection, RunRow.id, [record.run_id]):
                raise ConfigError(f"rating: no run {record.run_id!r} is stored", "input")
            if record.turn is not None and _turn_missing(connection, record.run_id,
                                                         record.turn):
                raise ConfigError(f"rating: run {record.run_id!r} has no turn {record.turn}",
                                  "input")
        self._replace(RATINGS, _dumped(record), check, RATINGS.c.rater == record.rater,
                      RATINGS.c.run_id == record.run_id, same_turn)
        return record.id

    def _replace(self, table: Table, values: dict[str, Any],
                 check: Callable[[Connection], None], *same: Any) -> None:
        """Write a label in place of the rater's earlier ones (the rows matching `same`),
        once `check` passes in the same transaction. When another tab writes the same label
        meanwhile, the unique index refuses one of the two: the loser tries again after a
        few random milliseconds (so that racers do not race again in step), and one more
        wins each round."""
        for attempt in range(WRITE_TRIES):
            try:
                with self.writing() as connection:
                    check(connection)
                    connection.execute(delete(table).where(*same))
                    connection.execute(table.insert().values(**values))
                return
            except IntegrityError:
                if attempt == WRITE_TRIES - 1:
                    raise
                time.sleep(random.uniform(0.002, 0.02))

    def preferences(self, run_ids: Sequence[str] | None = None,
                    rater: str | None = None) -> pd.DataFrame:
        """Preferences as a DataFrame (oldest first): id, run_a, run_b, shown_left, rater,
        choice, comment, created_at, imported_by and imported_at ("" and None: judged here);
        only those naming one of `run_ids` when given."""
        frame = self._frame("preferences", run_ids, rater)
        frame["shown_left"] = pd.Series([v if isinstance(v, str) else None
                                         for v in frame["shown_left"]],
                                        index=frame.index, dtype=object)
        return frame

    def ratings(self, run_ids: Sequence[str] | None = None,
                rater: str | None = None) -> pd.DataFrame:
        """Ratings as a DataFrame (oldest first): id, run_id, turn (None: the whole run),
        rater, score, comment, created_at, imported_by and imported_at."""
        frame = self._frame("ratings", run_ids, rater)
        frame["turn"] = frame["turn"].astype("Int64")
        return frame

    def _frame(self, name: str, run_ids: Sequence[str] | None,
               rater: str | None) -> pd.DataFrame:
        """The labels `name` (`_labels`) as a DataFrame, "" where not imported."""
        with self.engine.connect() as connection:
            rows = _labels(connection, name, run_ids, rater)
        frame = pd.DataFrame(rows, columns=[c.name for c in _NAMING[name][0].columns])
        frame["imported_by"] = frame["imported_by"].fillna("")
        return frame


# Each label table by its name, and the columns that name its runs.
_NAMING = {"preferences": (PREFERENCES, (PREFERENCES.c.run_a, PREFERENCES.c.run_b)),
           "ratings": (RATINGS, (RATINGS.c.run_id,))}


def _labels(connection: Connection, name: str, run_ids: Sequence[str] | None = None,
            rater: str | None = None) -> list[dict[str, Any]]:
    """The labels `name` (of `_NAMING`; oldest first) naming one of `run_ids` (all when
    None), by `rater` when given, their times as ISO text."""
    table, naming = _NAMING[name]
    query = select(table).order_by(table.c.created_at, table.c.id)
    if run_ids is not None:
        query = query.where(or_(*(column.in_(list(run_ids)) for column in naming)))
    if rater is not None:
        query = query.where(table.c.rater == rater)
    return [{**row, **{t: readback.iso(row[t]) for t in ("created_at", "imported_at")}}
            for row in connection.execute(query).mappings()]


# --------------------------------------------------------------------------- with their runs
def exported_labels(connection: Connection, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """Every label naming `run_id`, as an export holds them beside the run."""
    return {name: _labels(connection, name, [run_id]) for name in _NAMING}


def misfiled(where: str, record: RunRecord) -> None:
    """Refuse (`ConfigError` naming `where`) an exported run carrying a label that does not
    name it, a preference of a run against itself, a rating of a turn the run lacks, or a
    label dated in the future (beyond `CLOCK_SKEW`)."""
    latest_allowed = now() + CLOCK_SKEW
    labels: list[PreferenceRecord | RatingRecord] = [*record.preferences, *record.ratings]
    for label in labels:
        if label.created_at is not None and label.created_at > latest_allowed:
            raise ConfigError(f"import: {where}: label {label.id!r} is dated "
                              f"{label.created_at.isoformat()}, in the future; nothing was "
                              "imported", "input")
    for pref in record.preferences:
        what = f"import: {where} (run {record.id!r}) preference {pref.id!r}"
        if pref.run_a == pref.run_b:
            raise ConfigError(f"{what} compares run {pref.run_a!r} with itself; nothing was "
                              "imported", "input")
        if record.id not in (pref.run_a, pref.run_b):
            raise ConfigError(f"{what} is of runs {pref.run_a!r} and {pref.run_b!r}, not the "
                              "run it is filed with; nothing was imported", "input")
    for rate in record.ratings:
        if rate.run_id != record.id:
            raise ConfigError(f"import: {where} (run {record.id!r}) rating {rate.id!r} is of "
                              f"run {rate.run_id!r}, not the run it is filed with; nothing "
                              "was imported", "input")
        if rate.turn is not None and not any(t.idx == rate.turn for t in record.turns):
            raise ConfigError(f"import: {where}: rating {rate.id!r} is of turn {rate.turn}, "
                              f"which run {rate.run_id!r} lacks; nothing was imported", "input")


def _when(record: PreferenceRecord | RatingRecord) -> tuple[str, str]:
    return (record.created_at.isoformat() if record.created_at else "", record.id)


def import_labels(connection: Connection, docs: Sequence[tuple[str, RunRecord]],
                  added: set[str], imported_by: str, imported_at: datetime) -> LabelCounts:
    """Write the labels an import's runs carry (after the runs, in the same transaction),
    and only onto the runs this import `added`: the labels of a run already stored (skipped
    by the import) are not written, nor a preference naming a run the file did not add. A
    preference that names a run neither in the file nor stored refuses the file
    (`ConfigError`, so nothing of it is written; `misfiled` refuses the rest). Of a
    claimed rater's labels of one pair, run or turn, the latest is written. Each is marked
    with `imported_by` and `imported_at`; returns how many were written."""
    prefs: dict[str, PreferenceRecord] = {}
    rates: dict[str, RatingRecord] = {}
    where: dict[str, str] = {}
    for place, record in docs:
        for pref in record.preferences:
            prefs.setdefault(pref.id, pref)
            where.setdefault(pref.id, place)
        for rate in record.ratings:
            rates.setdefault(rate.id, rate)
            where.setdefault(rate.id, place)
    if not prefs and not rates:
        return LabelCounts()
    # a preference's other run (a rating names the run it is filed with: `misfiled`)
    others = {run for p in prefs.values() for run in (p.run_a, p.run_b)} - {
        record.id for _, record in docs}
    missing = others - present(connection, RunRow.id, others)
    for pref in prefs.values():
        for run in (pref.run_a, pref.run_b):
            if run in missing:
                raise ConfigError(
                    f"import: {where[pref.id]}: label {pref.id!r} names run {run!r}, which "
                    "is neither in the file nor stored here (export both runs of a "
                    "preference together); nothing was imported", "input")
    mark = {"imported_by": imported_by, "imported_at": imported_at}
    new_p = [{**_dumped(p), **mark} for p in latest(
        (p for p in prefs.values() if p.run_a in added and p.run_b in added),
        lambda p: (p.rater, *sorted((p.run_a, p.run_b))), _when)]
    new_r = [{**_dumped(r), **mark} for r in latest(
        (r for r in rates.values() if r.run_id in added),
        lambda r: (r.rater, r.run_id, -1 if r.turn is None else r.turn), _when)]
    taken = present(connection, PREFERENCES.c.id, [v["id"] for v in new_p]) | present(
        connection, RATINGS.c.id, [v["id"] for v in new_r])
    for values in (*new_p, *new_r):  # an id this store already uses gets a fresh one
        if values["id"] in taken:
            values["id"] = uuid4().hex[:16]
    if new_p:
        connection.execute(PREFERENCES.insert(), new_p)
    if new_r:
        connection.execute(RATINGS.insert(), new_r)
    return LabelCounts(len(new_p), len(new_r))


def delete_labels(connection: Connection, run_ids: Sequence[str]) -> None:
    """Delete every label naming one of `run_ids` (with the runs, in their transaction)."""
    for start in range(0, len(run_ids), 500):
        chunk = list(run_ids[start:start + 500])
        connection.execute(delete(PREFERENCES).where(or_(PREFERENCES.c.run_a.in_(chunk),
                                                         PREFERENCES.c.run_b.in_(chunk))))
        connection.execute(delete(RATINGS).where(RATINGS.c.run_id.in_(chunk)))
