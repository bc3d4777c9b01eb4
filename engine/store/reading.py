"""Reading runs and turns: one run, lists as DataFrames, and the live view's small reads.

Reads never write. A `running` row whose process is gone (`engine.store.liveness`) is
presented as `interrupted`, as the reaper will store it, without writing; a value that cannot
be read takes its empty default and `unreadable` says which and why (`engine.store.readback`).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any, TypeVarTuple

import pandas as pd
from sqlalchemy import Select, false, func, or_, select, true

from engine.store import facets, readback, records
from engine.store import search as full_text
from engine.store.database import Database
from engine.store.liveness import GONE
from engine.store.schema import RunRow, TurnRow

_TURN_ORDER = (TurnRow.idx, TurnRow.id)


@dataclass(frozen=True)
class RunFilters:
    """What a read of runs filters by, from a page's filters or a caller's keywords; empty
    values mean "any" (see `RunReading.runs`)."""

    protocol: str | None = None
    label: str | None = None
    tag: str | None = None
    status: str | None = None
    model: str | None = None
    search: str | None = None
    since: date | None = None  # a date alone is a whole UTC day
    until: date | None = None
    experiment_id: str | None = None
    ids: Sequence[str] | None = None
    transcript: str | None = None  # full text of questions, replies and answers
    simulated: bool | None = None  # only the simulated runs (True) or only the real ones

    def store_args(self) -> dict[str, Any]:
        """The filters set, as keyword arguments for `Store.runs` and the other reads of
        runs: text stripped, empty values left out, a date alone its whole UTC day."""
        args: dict[str, Any] = {}
        for name, value in vars(self).items():
            if isinstance(value, str):
                value = value.strip() or None
            if value is not None:
                args[name] = value
        for name, moment in (("since", time.min), ("until", time.max)):
            if type(args.get(name)) is date:
                args[name] = datetime.combine(args[name], moment, tzinfo=UTC)
        return args

    @property
    def active(self) -> bool:
        return bool(self.store_args())


Selected = TypeVarTuple("Selected")


def matching(query: Select[*Selected], dialect: str, given: RunFilters
             ) -> tuple[Select[*Selected], full_text.Match | None]:
    """`query` over the runs table narrowed by `given` (every value bound, never spliced
    into SQL), and the full-text match when `transcript` holds a searchable term."""
    for name in ("protocol", "label", "status", "experiment_id"):
        if getattr(given, name):
            query = query.where(getattr(RunRow, name) == getattr(given, name))
    if given.ids is not None:
        query = query.where(RunRow.id.in_(list(given.ids)))
    if given.tag:
        # tags are stored as written (`ensure_ascii=False`); a row written escaped matches too
        spelled = {json.dumps(given.tag, ensure_ascii=False), json.dumps(given.tag)}
        query = query.where(or_(*(RunRow.tags.contains(s, autoescape=True) for s in spelled)))
    if given.model:
        query = query.where(RunRow.models.contains(given.model, autoescape=True))
    if given.search:
        query = query.where(or_(RunRow.question.contains(given.search, autoescape=True),
                                RunRow.label.contains(given.search, autoescape=True),
                                RunRow.id == given.search))
    found = full_text.terms(given.transcript)
    match = full_text.Match.of(dialect, found) if found else None
    if match is not None:
        query = query.where(RunRow.id.in_(match.run_ids()))
    if given.simulated is not None:
        query = query.where(RunRow.simulated == (true() if given.simulated else false()))
    if given.since:
        query = query.where(RunRow.created_at >= given.since)
    if given.until:
        query = query.where(RunRow.created_at <= given.until)
    return query, match


class RunReading(Database):
    """The store's reads of runs and turns (a part of `Store`)."""

    def get(self, run_id: str, *, reply_chars: int | None = None) -> dict[str, Any]:
        """One run as a dict: its row, `result` (the protocol's fields) and `turns`. A value
        that cannot be read takes its empty default, and `unreadable` says which and why.

        `reply_chars` reads a run for a page: each turn's `reply` is its first `reply_chars`
        characters with `reply_length` its whole length, and its `messages` (the prompts,
        which hold earlier replies) are not read (None); `turn_text` reads one turn's. No
        reply is then read whole, however long the run's replies are."""
        columns: list[Any] = list(TurnRow.__table__.columns)
        if reply_chars is not None:
            columns = [c for c in columns if c.name not in ("reply", "messages")] + [
                func.substr(TurnRow.reply, 1, max(int(reply_chars), 0)).label("reply"),
                func.length(TurnRow.reply).label("reply_length")]
        with self.engine.connect() as connection:
            row = connection.execute(select(RunRow.__table__).where(
                RunRow.id == run_id)).mappings().first()
            if row is None:
                raise KeyError(f"no run {run_id!r} in {self.url_safe}")
            turns = connection.execute(select(*columns).where(
                TurnRow.run_id == run_id).order_by(*_TURN_ORDER)).mappings().all()
        gone = self.owner_gone(row)
        out = readback.read_row(dict(row), "runs")
        out["turns"] = [readback.read_row(dict(t), "turns") for t in turns]
        if reply_chars is not None:
            for turn in out["turns"]:
                turn["messages"] = None
                turn["reply_length"] = readback.number(turn["reply_length"], int)[0]
        broken = [f"turn {t['idx']}: {t['unreadable']}" for t in out["turns"]
                  if t["unreadable"]]
        out["unreadable"] = "; ".join(filter(None, [out["unreadable"], *broken]))
        if gone:  # as the reaper will store it
            out.update(status="interrupted", error=out["error"] or GONE,
                       finished_at=out["heartbeat_at"] or out["created_at"],
                       **records.totals(out["turns"]))
        return out

    def turn_text(self, run_id: str, idx: int, limit: int) -> dict[str, Any]:
        """One turn's reply (its first `limit` characters), `reply_length` (its whole
        length) and prompt `messages`: what a page reads when a reader opens a turn that
        `get(reply_chars=...)` read in part. `KeyError` when there is no such turn."""
        with self.engine.connect() as connection:
            row = connection.execute(select(
                func.substr(TurnRow.reply, 1, max(int(limit), 0)).label("reply"),
                func.length(TurnRow.reply).label("reply_length"), TurnRow.messages).where(
                TurnRow.run_id == run_id, TurnRow.idx == int(idx)).order_by(TurnRow.id)
                .limit(1)).mappings().first()
        if row is None:
            raise KeyError(f"no turn {idx} in run {run_id!r}")
        messages, _ = readback.decode(row["messages"], "messages", [])
        return {"reply": readback.clean_stored(row["reply"]) or "",
                "reply_length": readback.number(row["reply_length"], int)[0],
                "messages": messages}

    def fingerprint(self) -> tuple[Any, ...]:
        """What changes whenever the stored runs do: their count, the newest creation, end and
        heartbeat. A page caches what it built from the runs under this key (one small read
        instead of 10,000 rows), and builds again after any run is added, ends, beats or is
        deleted. Four reads of an index each (one statement with all four would scan every
        row: SQLite reads a lone max from its index, not one beside a count)."""
        parts = (func.count(), func.max(RunRow.created_at), func.max(RunRow.finished_at),
                 func.max(RunRow.heartbeat_at))
        with self.engine.connect() as connection:
            row = connection.execute(select(*(select(part).select_from(RunRow)
                                               .scalar_subquery() for part in parts))).one()
        return tuple(str(value) for value in row)

    def run_state(self, run_id: str) -> dict[str, Any]:
        """What a live view polls: `status`, `error`, `turns` (how many are stored) and
        `updated_at` (the last heartbeat or the end, ISO text) of one run; one row, no turns.
        `KeyError` when there is no such run."""
        count = select(func.count()).where(TurnRow.run_id == run_id).scalar_subquery()
        with self.engine.connect() as connection:
            row = connection.execute(select(
                RunRow.id, RunRow.status, RunRow.error, RunRow.host, RunRow.pid,
                RunRow.heartbeat_at, RunRow.finished_at, count.label("turns"))
                .where(RunRow.id == run_id)).mappings().first()
        if row is None:
            raise KeyError(f"no run {run_id!r} in {self.url_safe}")
        status, error = readback.clean_stored(row["status"]), readback.clean_stored(row["error"])
        updated = readback.aware(row["finished_at"] or row["heartbeat_at"])
        if self.owner_gone(row):
            status, error = "interrupted", error or GONE
        return {"id": run_id, "status": status, "error": error or "",
                "turns": int(row["turns"] or 0),
                "updated_at": updated.isoformat() if isinstance(updated, datetime) else None}

    def turns_after(self, run_id: str, after: int) -> list[dict[str, Any]]:
        """The run's turns with an index above `after`, in speaking order, each as in
        `get(run_id)["turns"]`: a live view asks for the turns since its last poll."""
        with self.engine.connect() as connection:
            rows = connection.execute(select(TurnRow.__table__).where(
                TurnRow.run_id == run_id, TurnRow.idx > after)
                .order_by(*_TURN_ORDER)).mappings().all()
        return [readback.read_row(dict(row), "turns") for row in rows]

    def runs(self, *, limit: int | None = None, with_result: bool = False,
             with_config: bool = True, every: int = 1, **filters: Any) -> pd.DataFrame:
        """Runs as a DataFrame, newest first; `filters` (`RunFilters`' fields) combine with
        AND (all are bound, never spliced into SQL). `metrics` and `config` come back parsed;
        `result` on request, and `config` can be left out when a caller (Insights over 10,000
        runs) never reads it. `unreadable` is "" for a sound row, else which values could not
        be read and why. `search` looks for its text in the question or label, or an exact
        run id; `transcript` searches the full text of questions, replies and answers (its
        words and "quoted phrases", matched whole and case-blind: `engine.store.search`),
        and the frame then also says where each run matched (`match`) and shows it
        (`snippet`). Text with no searchable term filters nothing. `simulated` keeps only
        the simulated (True) or only the real runs; `every` > 1 keeps only every `every`-th
        matching run in time order (a systematic sample)."""
        skip = {"result"} - ({"result"} if with_result else set())
        if not with_config:
            skip.add("config")
        columns = [c for c in RunRow.__table__.columns if c.name not in skip]
        query, match = self.selecting(columns, RunFilters(**filters), every)
        query = query.order_by(RunRow.created_at.desc())
        if limit:
            query = query.limit(limit)
        with self.engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
            where = (full_text.snippets(connection, match, [row["id"] for row in rows])
                     if match is not None else None)
        gone = [self.owner_gone(row) for row in rows]
        frame = pd.DataFrame(rows, columns=[c.name for c in columns])
        if where is not None:
            frame["match"] = [where.get(i, {}).get("match", "") for i in frame["id"]]
            frame["snippet"] = [where.get(i, {}).get("snippet", "") for i in frame["id"]]
        frame = readback.tolerant_frame(frame, "runs")
        if any(gone):  # as the reaper will store them
            dead = pd.Series(gone, index=frame.index)
            frame.loc[dead, "status"] = "interrupted"
            frame.loc[dead & (frame["error"].fillna("") == ""), "error"] = GONE
            ended = pd.Series([row["heartbeat_at"] or row["created_at"]
                               for row, d in zip(rows, gone, strict=True) if d],
                              index=frame.index[dead.to_numpy()], dtype=object)
            frame["finished_at"] = frame["finished_at"].astype(object).where(~dead, ended)
        return frame

    def selecting(self, chosen: Sequence[Any], given: RunFilters, every: int = 1
                  ) -> tuple[Select[Any], full_text.Match | None]:
        """`chosen` of the runs matching `given` (`matching`), and with `every` > 1 only every
        `every`-th of them in time order (a systematic sample that spans the whole period and
        every label alike)."""
        query, match = matching(select(*chosen), self.engine.dialect.name, given)
        if every > 1:
            ranked, _ = matching(select(RunRow.id, func.row_number().over(
                order_by=(RunRow.created_at, RunRow.id)).label("rank")),
                self.engine.dialect.name, given)
            picked = ranked.subquery()
            query = query.where(RunRow.id.in_(
                select(picked.c.id).where(picked.c.rank % every == 0)))
        return query, match

    def turns(self, run_id: str | Sequence[str] | None = None, *,
              with_messages: bool = False) -> pd.DataFrame:
        """Turns as a DataFrame, in run then speaking order (`unreadable` as for `runs`)."""
        columns = [c for c in TurnRow.__table__.columns
                   if with_messages or c.name != "messages"]
        query = select(*columns).order_by(TurnRow.run_id, *_TURN_ORDER)
        if isinstance(run_id, str):
            query = query.where(TurnRow.run_id == run_id)
        elif run_id is not None:
            query = query.where(TurnRow.run_id.in_(list(run_id)))
        with self.engine.connect() as connection:
            frame = pd.DataFrame(connection.execute(query).mappings().all(),
                                 columns=[c.name for c in columns])
        return readback.tolerant_frame(frame, "turns")

    def run_choices(self) -> dict[str, list[Any]]:
        """The distinct stored protocols and labels (each read from its index), and the tags
        and model specs the stored runs have had (`engine.store.facets`, each in a list of
        its own): what the filters can offer, in milliseconds however many runs."""
        with self.engine.connect() as connection:
            seen: dict[str, list[Any]] = {
                name: list(connection.execute(select(getattr(RunRow, name)).distinct())
                           .scalars()) for name in ("protocol", "label")}
            kept = facets.read(connection)
        seen["tags"] = [[tag] for tag in kept["tag"]]
        seen["models"] = kept["model"]
        return seen
