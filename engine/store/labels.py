"""Human judgement (DESIGN section 4): a person's preference between two runs' final answers
and a person's 1-5 rating of a run or of one of its turns, each with a comment.

Every label is checked (`engine.store.records`: `PreferenceRecord`, `RatingRecord`) and its
runs (and turn) must be stored, so a label never points at nothing. Labels travel with their
runs: an export holds every label that names the run, and an import brings them in after the
runs (`import_labels`), refusing the whole file when a label names a run that is neither in
it nor stored here. Deleting a run deletes its labels (`delete_labels`, and the tables'
`ON DELETE CASCADE`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast
from uuid import uuid4

import pandas as pd
from sqlalchemy import Connection, Table, delete, or_, select

from engine.access import LOCAL, Actor, require
from engine.models import ConfigError, now
from engine.store import readback
from engine.store.database import Database
from engine.store.records import PreferenceRecord, RatingRecord, RunRecord, validate
from engine.store.schema import PreferenceRow, RatingRow, RunRow, TurnRow
from engine.text import clean_text

PREFERENCES = cast(Table, PreferenceRow.__table__)
RATINGS = cast(Table, RatingRow.__table__)
PREFERENCE_COLUMNS = [c.name for c in PREFERENCES.columns]
RATING_COLUMNS = [c.name for c in RATINGS.columns]
CHOICES = ("a", "b", "tie")


def _present(connection: Connection, run_ids: Iterable[str]) -> set[str]:
    wanted = sorted(set(run_ids))
    found: set[str] = set()
    for start in range(0, len(wanted), 500):
        found |= set(connection.execute(select(RunRow.id).where(
            RunRow.id.in_(wanted[start:start + 500]))).scalars())
    return found


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


def preference_record(values: Mapping[str, Any], what: str = "preference") -> PreferenceRecord:
    """A checked preference (`ConfigError` naming the field); the two runs must differ."""
    record = validate(PreferenceRecord, values, what)
    if record.run_a == record.run_b:
        raise ConfigError(f"{what}: a preference compares two different runs "
                          f"(both are {record.run_a!r})", "input")
    return record


def rating_record(values: Mapping[str, Any], what: str = "rating") -> RatingRecord:
    """A checked rating (`ConfigError` naming the field)."""
    return validate(RatingRecord, values, what)


class Labels(Database):
    """The store's human labels (a part of `Store`)."""

    def add_preference(self, run_a: str, run_b: str, *, rater: str, choice: str,
                       comment: str = "", shown_left: str | None = None,
                       actor: Actor = LOCAL) -> str:
        """Record that `rater` finds run `a`'s final answer better, run `b`'s, or neither
        (`choice` a | b | tie), and which of the two was shown on the left (`shown_left`
        a | b, None when not side by side); returns the label's id. `ConfigError` when a
        value is not valid or a run is not stored; `NotAllowed` when `actor` may not label."""
        require(actor, "label runs")
        record = preference_record({"id": uuid4().hex[:16], "run_a": run_a, "run_b": run_b,
                                    "shown_left": shown_left, "rater": _text(rater),
                                    "choice": choice, "comment": _text(comment)})
        with self.writing() as connection:
            missing = {record.run_a, record.run_b} - _present(connection, (record.run_a,
                                                                           record.run_b))
            if missing:
                raise ConfigError(f"preference: no run {sorted(missing)[0]!r} is stored",
                                  "input")
            connection.execute(PREFERENCES.insert().values(**_dumped(record)))
        return record.id

    def add_rating(self, run_id: str, *, rater: str, score: int, comment: str = "",
                   turn: int | None = None, actor: Actor = LOCAL) -> str:
        """Record `rater`'s score (1..5) of run `run_id`, or of its turn `turn` (by index);
        returns the label's id. `ConfigError` when a value is not valid or the run (or the
        turn) is not stored; `NotAllowed` when `actor` may not label."""
        require(actor, "label runs")
        record = rating_record({"id": uuid4().hex[:16], "run_id": run_id, "turn": turn,
                                "rater": _text(rater), "score": score,
                                "comment": _text(comment)})
        with self.writing() as connection:
            if not _present(connection, [record.run_id]):
                raise ConfigError(f"rating: no run {record.run_id!r} is stored", "input")
            if record.turn is not None and _turn_missing(connection, record.run_id,
                                                         record.turn):
                raise ConfigError(f"rating: run {record.run_id!r} has no turn {record.turn}",
                                  "input")
            connection.execute(RATINGS.insert().values(**_dumped(record)))
        return record.id

    def preferences(self, run_ids: Sequence[str] | None = None,
                    rater: str | None = None) -> pd.DataFrame:
        """Preferences as a DataFrame (oldest first): id, run_a, run_b, shown_left, rater,
        choice, comment, created_at; only those naming one of `run_ids` when given."""
        query = select(PREFERENCES).order_by(PREFERENCES.c.created_at, PREFERENCES.c.id)
        if run_ids is not None:
            ids = list(run_ids)
            query = query.where(or_(PREFERENCES.c.run_a.in_(ids), PREFERENCES.c.run_b.in_(ids)))
        if rater is not None:
            query = query.where(PREFERENCES.c.rater == rater)
        frame = self._frame(query, PREFERENCE_COLUMNS)
        frame["shown_left"] = pd.Series([v if isinstance(v, str) else None
                                         for v in frame["shown_left"]],
                                        index=frame.index, dtype=object)
        return frame

    def ratings(self, run_ids: Sequence[str] | None = None,
                rater: str | None = None) -> pd.DataFrame:
        """Ratings as a DataFrame (oldest first): id, run_id, turn (None: the whole run),
        rater, score, comment, created_at."""
        query = select(RATINGS).order_by(RATINGS.c.created_at, RATINGS.c.id)
        if run_ids is not None:
            query = query.where(RATINGS.c.run_id.in_(list(run_ids)))
        if rater is not None:
            query = query.where(RATINGS.c.rater == rater)
        frame = self._frame(query, RATING_COLUMNS)
        frame["turn"] = frame["turn"].astype("Int64")
        return frame

    def _frame(self, query: Any, columns: list[str]) -> pd.DataFrame:
        with self.engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        frame = pd.DataFrame([dict(r) for r in rows], columns=columns)
        frame["created_at"] = [readback.iso(v) for v in frame["created_at"]]
        return frame


# --------------------------------------------------------------------------- with their runs
def exported_labels(connection: Connection, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """Every label naming `run_id`, as an export holds them beside the run."""
    prefs = connection.execute(select(PREFERENCES).where(or_(
        PREFERENCES.c.run_a == run_id, PREFERENCES.c.run_b == run_id))
        .order_by(PREFERENCES.c.created_at, PREFERENCES.c.id)).mappings().all()
    rates = connection.execute(select(RATINGS).where(RATINGS.c.run_id == run_id)
                               .order_by(RATINGS.c.created_at, RATINGS.c.id)).mappings().all()
    return {"preferences": [{**r, "created_at": readback.iso(r["created_at"])} for r in prefs],
            "ratings": [{**r, "created_at": readback.iso(r["created_at"])} for r in rates]}


def misfiled(where: str, record: RunRecord) -> None:
    """Refuse (`ConfigError` naming `where`) an exported run carrying a label that does not
    name it, or a preference of a run against itself."""
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


def import_labels(connection: Connection, docs: Sequence[tuple[str, RunRecord]]) -> None:
    """Write the labels an import's runs carry (after the runs, in the same transaction):
    one already stored (by id) is skipped, one naming a run that is neither in the file
     nor stored is refused (`ConfigError`, so nothing of the file is written), and
    a rating of a turn its run lacks is refused."""
    prefs: dict[str, PreferenceRecord] = {}
    rates: dict[str, RatingRecord] = {}
    where: dict[str, str] = {}
    in_file = {record.id for _, record in docs}
    for place, record in docs:
        for pref in record.preferences:
            prefs.setdefault(pref.id, pref)
            where.setdefault(pref.id, place)
        for rate in record.ratings:
            rates.setdefault(rate.id, rate)
            where.setdefault(rate.id, place)
    if not prefs and not rates:
        return
    named = {r for p in prefs.values() for r in (p.run_a, p.run_b)} | {
        r.run_id for r in rates.values()}
    stored = _present(connection, named - in_file)
    naming = [(p.id, (p.run_a, p.run_b)) for p in prefs.values()] + [
        (r.id, (r.run_id,)) for r in rates.values()]
    for label_id, runs in naming:
        for run in runs:
            if run not in in_file and run not in stored:
                raise ConfigError(
                    f"import: {where[label_id]}: label {label_id!r} names run {run!r}, which "
                    "is neither in the file nor stored here (export both runs of a "
                    "preference together); nothing was imported", "input")
    known_p = set(connection.execute(select(PREFERENCES.c.id).where(
        PREFERENCES.c.id.in_(list(prefs)))).scalars()) if prefs else set()
    known_r = set(connection.execute(select(RATINGS.c.id).where(
        RATINGS.c.id.in_(list(rates)))).scalars()) if rates else set()
    for rate in rates.values():
        if rate.id not in known_r and rate.turn is not None and _turn_missing(
                connection, rate.run_id, rate.turn):
            raise ConfigError(f"import: {where[rate.id]}: rating {rate.id!r} is of turn "
                              f"{rate.turn}, which run {rate.run_id!r} lacks; nothing was "
                              "imported", "input")
    new_p = [_dumped(p) for p in prefs.values() if p.id not in known_p]
    new_r = [_dumped(r) for r in rates.values() if r.id not in known_r]
    if new_p:
        connection.execute(PREFERENCES.insert(), new_p)
    if new_r:
        connection.execute(RATINGS.insert(), new_r)


def delete_labels(connection: Connection, run_ids: Sequence[str]) -> None:
    """Delete every label naming one of `run_ids` (with the runs, in their transaction)."""
    for start in range(0, len(run_ids), 500):
        chunk = list(run_ids[start:start + 500])
        connection.execute(delete(PREFERENCES).where(or_(PREFERENCES.c.run_a.in_(chunk),
                                                         PREFERENCES.c.run_b.in_(chunk))))
        connection.execute(delete(RATINGS).where(RATINGS.c.run_id.in_(chunk)))
