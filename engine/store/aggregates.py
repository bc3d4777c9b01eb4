"""Runs added up where they are stored: grouped counts and sums in SQL, each over an index
that holds every column it reads, and typed values read without their JSON, so that Insights
over a million runs brings back only what its figures draw. Every read presents the runs as
`RunReading.runs` does: a `running` row whose process is gone counts as `interrupted`, as
the reaper will store it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
from sqlalchemy import case, false, func, select, true

from engine.store import readback
from engine.store.reading import RunFilters, RunReading, matching
from engine.store.schema import RunRow, TurnRow

# What `run_summary` groups by, and what it adds up within each group.
SUMMARY_KEYS = ("protocol", "label", "status", "degraded_run", "simulated")
SUMMARY_SUMS = ("n", "scored", "correct", "unanswered", "tokens", "duration", "cost",
                "unpriced")
# What `answer_summary` groups by, and what it adds up within each group.
ANSWER_KEYS = ("protocol", "label", "simulated", "confidence_level", "band")
ANSWER_SUMS = ("n", "scored", "correct", "m_runs", "m_seats", "m_changes", "j_seats",
               "persuaded", "misled", "t_runs", "t_sum", "t_sq", "unanimous", "tied",
               "t_scored", "t_right", "f_runs", "f_sum", "f_sq")
# The typed run columns `run_values` may read (no JSON, no free text beyond the label).
VALUE_COLUMNS = ("id", "protocol", "label", "status", "created_at", "simulated", "correct",
                 "unanswered", "calls", "degraded", "degraded_run", "tokens_in", "tokens_out",
                 "latency", "duration")


def _flag(column: Any) -> Any:
    """A boolean column as true or false (NULL read as false), labelled with its name."""
    return case((column == true(), true()), else_=false()).label(column.key)


def _count_of(column: Any) -> Any:
    """1 where a boolean column is true, else 0: what a sum counts."""
    return case((column == true(), 1), else_=0)


def _total(value: Any, empty: Any = 0) -> Any:
    """The sum of `value` over a group, `empty` when it has none."""
    return func.coalesce(func.sum(value), empty)


class RunAggregates(RunReading):
    """The store's grouped reads of runs (a part of `Store`)."""

    def _status_clause(self, given: RunFilters) -> Any:
        """A run's status as `runs` presents it: the matching runs whose process is gone (few:
        the reaper ends them) as `interrupted`."""
        gone = self._stale(lambda query: matching(query, self.engine.dialect.name, given)[0])
        if not gone:
            return RunRow.status
        return case((RunRow.id.in_(gone), "interrupted"), else_=RunRow.status)

    def run_summary(self, **filters: Any) -> pd.DataFrame:
        """The matching runs (filters as `runs` takes them) grouped by `SUMMARY_KEYS`: per
        group `n` runs, `scored` (with an expected answer: `correct` is true or false),
        `correct` (how many of those were right), `unanswered` (how many of those gave no
        answer: wrong, DESIGN 4), `tokens` (in plus out, summed),
        `duration` (seconds, summed), `cost` (the known costs in US dollars, summed) and
        `unpriced` (the runs whose cost is unknown). `label` is as stored (None or text);
        `degraded_run` and `simulated` are booleans."""
        given = RunFilters(**filters)
        frame = self._grouped(given, [
            RunRow.protocol, RunRow.label, self._status_clause(given).label("status"),
            _flag(RunRow.degraded_run), _flag(RunRow.simulated)], [
            func.count().label("n"), func.count(RunRow.correct).label("scored"),
            _total(_count_of(RunRow.correct)).label("correct"),
            _total(_count_of(RunRow.unanswered)).label("unanswered"),
            _total(RunRow.tokens_in + RunRow.tokens_out).label("tokens"),
            _total(RunRow.duration, 0.0).label("duration"),
            _total(RunRow.cost_usd, 0.0).label("cost"),
            func.count().filter(RunRow.cost_usd.is_(None)).label("unpriced")],
            [*SUMMARY_KEYS, *SUMMARY_SUMS])
        return frame.astype({"degraded_run": bool, "simulated": bool, **{
            name: float if name in ("duration", "cost") else "int64" for name in SUMMARY_SUMS}})

    def answer_summary(self, **filters: Any) -> pd.DataFrame:
        """The matching completed runs (filters as `runs` takes them) grouped by `ANSWER_KEYS`
        (`band` is the judge's stated confidence as high, 0.7 and over, medium, 0.4 to 0.7,
        or low, where it stated one), from the typed signal columns and nothing else (one
        covering index, `ix_runs_answers`): per group `n` runs, `scored` and `correct` as
        `run_summary` counts them, and the sums Insights' three answers are made of
        (`ANSWER_SUMS`): mind changes over the seats that could change (`m_runs`, `m_seats`,
        `m_changes`), persuaded and misled over the seats of runs that had an expected
        answer (`j_seats`, `persuaded`, `misled`), the winner's share of the ballots
        (`t_runs`, `t_sum`, `t_sq`, `unanimous`, `tied`, `t_scored`, `t_right`) and round
        one's agreement (`f_runs`, `f_sum`, `f_sq`)."""
        judge = RunRow.judge_confidence
        band = case((judge >= 0.7, "high"), (judge >= 0.4, "medium"), (judge.is_not(None), "low"),
                    else_=None).label("band")
        changed = RunRow.mind_changes.is_not(None)
        judged = RunRow.persuaded.is_not(None)
        tallied = RunRow.consensus.is_not(None)
        frame = self._grouped(RunFilters(**filters), [
            RunRow.protocol, RunRow.label, _flag(RunRow.simulated), RunRow.confidence_level,
            band], [
            func.count().label("n"), func.count(RunRow.correct).label("scored"),
            _total(_count_of(RunRow.correct)).label("correct"),
            func.count(RunRow.mind_changes).label("m_runs"),
            _total(case((changed, RunRow.seats), else_=0)).label("m_seats"),
            _total(RunRow.mind_changes).label("m_changes"),
            _total(case((judged, RunRow.seats), else_=0)).label("j_seats"),
            _total(RunRow.persuaded).label("persuaded"), _total(RunRow.misled).label("misled"),
            func.count(RunRow.consensus).label("t_runs"),
            _total(RunRow.consensus).label("t_sum"),
            _total(RunRow.consensus * RunRow.consensus).label("t_sq"),
            _total(case((RunRow.consensus >= 1.0, 1), else_=0)).label("unanimous"),
            _total(_count_of(RunRow.tied)).label("tied"),
            _total(case((tallied & RunRow.correct.is_not(None), 1), else_=0)).label("t_scored"),
            _total(case((tallied & (RunRow.correct == true()), 1), else_=0)).label("t_right"),
            func.count(RunRow.first_share).label("f_runs"),
            _total(RunRow.first_share).label("f_sum"),
            _total(RunRow.first_share * RunRow.first_share).label("f_sq"),
        ], [*ANSWER_KEYS, *ANSWER_SUMS], RunRow.status == "completed")
        floats = {"t_sum", "t_sq", "f_sum", "f_sq"}
        return frame.astype({"simulated": bool, **{name: float if name in floats else "int64"
                                                    for name in ANSWER_SUMS}})

    def _grouped(self, given: RunFilters, keys: list[Any], sums: list[Any],
                  names: list[str], *where: Any) -> pd.DataFrame:
        """The runs matching `given` (and `where`) grouped by `keys`, with `sums` over each
        group: a frame of the columns `names`."""
        query, _ = matching(select(*keys, *sums).where(*where), self.engine.dialect.name, given)
        with self.engine.connect() as connection:
            rows = connection.execute(query.group_by(*keys)).all()
        return pd.DataFrame(rows, columns=names)

    def run_results(self, ids: Sequence[str], *, with_config: bool = False) -> pd.DataFrame:
        """`id`, `label`, `expected` and the parsed `result` of the runs `ids` (a result that
        cannot be read is {}), read 5,000 at a time: what a protocol's Insights section reads
        of its runs' results, without their metrics, tags or configuration (the parsed
        `config` too with `with_config`: who sat where, for who moved whom)."""
        columns = ["id", "label", "expected", "result", *(["config"] if with_config else [])]
        rows = self._by_chunks(ids, lambda chunk: select(
            *(getattr(RunRow, name) for name in columns)).where(RunRow.id.in_(chunk)))
        frame = pd.DataFrame(rows, columns=columns)
        for name in columns[3:]:
            frame[name] = [readback.decode(raw, dict, {})[0] for raw in frame[name]]
        return frame

    def round_spend(self, ids: Sequence[str]) -> pd.DataFrame:
        """Per run of `ids` and round number: `tokens` (in plus out), `cost` (the known costs
        in US dollars) and `unpriced` (turns without a cost) of its turns, added up in SQL
        (one grouped query per 5,000 runs; round 0 holds the turns outside the rounds): what
        the what-if replay saves when it stops a run after a round."""
        columns = ["run_id", "round", "tokens", "cost", "unpriced"]
        rows = self._by_chunks(ids, lambda chunk: select(
            TurnRow.run_id, TurnRow.round, _total(TurnRow.tokens_in + TurnRow.tokens_out),
            _total(TurnRow.cost_usd, 0.0), func.count().filter(TurnRow.cost_usd.is_(None)))
            .where(TurnRow.run_id.in_(chunk)).group_by(TurnRow.run_id, TurnRow.round))
        frame = pd.DataFrame(rows, columns=columns)
        frame["round"] = frame["round"].fillna(0)  # a NULL round: outside the rounds
        return frame.groupby(["run_id", "round"], as_index=False).sum().astype(
            {"round": "int64", "tokens": "int64", "cost": float, "unpriced": "int64"})

    def _by_chunks(self, ids: Sequence[str], query: Callable[[list[str]], Any]) -> list[Any]:
        """The rows of `query` over the runs `ids`, asked 5,000 ids at a time."""
        rows: list[Any] = []
        with self.engine.connect() as connection:
            for start in range(0, len(ids), 5_000):
                rows += connection.execute(query(list(ids[start:start + 5_000]))).all()
        return rows

    def count_runs(self, **filters: Any) -> int:
        """How many runs match (filters as `runs` takes them): one count in SQL."""
        query, _ = matching(select(func.count()).select_from(RunRow),
                            self.engine.dialect.name, RunFilters(**filters))
        with self.engine.connect() as connection:
            return int(connection.execute(query).scalar() or 0)

    def run_values(self, columns: Sequence[str], *, every: int = 1,
                   **filters: Any) -> pd.DataFrame:
        """Typed `columns` (of `VALUE_COLUMNS`) of the matching runs; with `every` > 1 only
        every `every`-th of them in time order (a systematic sample that spans the whole
        period and every label alike)."""
        unknown = sorted(set(columns) - set(VALUE_COLUMNS))
        if unknown:
            raise ValueError(f"run_values reads {', '.join(VALUE_COLUMNS)}, not "
                             f"{', '.join(unknown)}")
        given = RunFilters(**filters)
        chosen = [self._status_clause(given).label("status") if name == "status"
                  else getattr(RunRow, name) for name in columns]
        query, _ = self.selecting(chosen, given, every)
        with self.engine.connect() as connection:
            rows = connection.execute(query).all()
        return pd.DataFrame(rows, columns=list(columns))
