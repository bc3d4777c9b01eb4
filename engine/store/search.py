"""Full-text search over stored runs: questions, turn replies and final answers.

User text is hostile, so it never reaches the query syntax: `terms` cuts it to `MAX_QUERY`
characters and `MAX_TERMS` terms (each a word, or a "quoted phrase"), drops control
characters and terms with no letter or digit, and each term is then matched as a phrase: on
SQLite as a double-quoted FTS5 string (so `*`, `-`, `NEAR(`, `AND` are plain text), on
PostgreSQL through `phraseto_tsquery` with the term as a bound parameter. Terms combine with
AND; text with no term means no filter. Reads only (a read-only database searches too); the
index itself is kept by triggers (`engine.store.search_index`).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, String, bindparam, select, text
from sqlalchemy.sql.selectable import TextualSelect

from engine.store.schema import TurnRow
from engine.text import clean_text

MAX_QUERY = 200  # characters of the search text read; the rest is ignored
MAX_TERMS = 12
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_TERM = re.compile(r'"([^"]*)"|(\S+)')
# ts_headline's options: one fragment of a few words around the first match.
_HEADLINE = ("StartSel=«, StopSel=», MaxWords=16, MinWords=6, ShortWord=0, MaxFragments=1, "
             "FragmentDelimiter=\" … \"")


def terms(query: Any) -> list[str]:
    """The search terms in `query`: its words and "quoted phrases", at most `MAX_TERMS` from
    its first `MAX_QUERY` characters, each holding a letter or digit (quotes and control
    characters become spaces). Anything that is not text has none."""
    if not isinstance(query, str):
        return []
    cleaned = _CONTROL.sub(" ", clean_text(query[:MAX_QUERY]))
    found = []
    for phrase, word in _TERM.findall(cleaned):
        term = " ".join((phrase or word).replace('"', " ").split())
        if any(ch.isalnum() for ch in term):
            found.append(term)
    return found[:MAX_TERMS]


@dataclass(frozen=True)
class Match:
    """Full-text SQL for one list of terms on one backend: what to put in a statement and
    the parameters it binds."""

    sqlite: bool
    params: dict[str, str]

    @classmethod
    def of(cls, dialect: str, found: Sequence[str]) -> Match:
        """The match for `found` terms on the backend named `dialect` (SQLAlchemy's name)."""
        if dialect == "sqlite":
            quoted = " ".join('"' + t.replace('"', '""') + '"' for t in found)
            return cls(True, {"q": quoted})
        return cls(False, {f"t{i}": t for i, t in enumerate(found)})

    def docs(self, columns: str) -> str:
        """SELECT `columns` from the matching documents (`d`; on SQLite also `search_fts`,
        on PostgreSQL `q.q` is the query: every term as a phrase, all required), ending in
        its WHERE clause (a caller may add `AND ...`)."""
        if self.sqlite:
            return (f"SELECT {columns} FROM search_fts JOIN search_docs AS d"
                    " ON d.id = search_fts.rowid WHERE search_fts MATCH :q")
        tsquery = " && ".join(f"phraseto_tsquery('simple', :{name})" for name in self.params)
        return (f"SELECT {columns} FROM search_docs AS d CROSS JOIN (SELECT {tsquery} AS q)"
                " AS q WHERE d.tsv @@ q.q")

    def run_ids(self) -> TextualSelect:
        """The ids of the runs with a matching document (for `runs.id IN (...)`)."""
        return text(self.docs("d.run_id")).bindparams(**self.params).columns(
            run_id=String(32))


def snippets(connection: Connection, match: Match, ids: Sequence[str]
             ) -> dict[str, dict[str, str]]:
    """The best matching document of each run in `ids`: {run id: {match (where it sits in
    its run, in words: `question`, `answer`, or the turn's seat, phase and round), snippet
    (one line of plain text)}}."""
    if not ids:
        return {}
    snippet, order = (("snippet(search_fts, 0, '«', '»', '…', 14)", "search_fts.rank")
                      if match.sqlite else ("ts_headline('simple', d.body, q.q, :opts)",
                                            "ts_rank(d.tsv, q.q) DESC"))
    sql = text(match.docs(f"d.run_id, d.kind, d.turn_id, {snippet} AS snippet") +
               f" AND d.run_id IN :ids ORDER BY {order}").bindparams(
        bindparam("ids", list(ids), expanding=True),
        **({} if match.sqlite else {"opts": _HEADLINE}), **match.params)
    best: dict[str, Any] = {}  # each run's best matching document: the first, best first
    for row in connection.execute(sql).mappings():
        best.setdefault(row["run_id"], row)
    turn_ids = [row["turn_id"] for row in best.values() if row["turn_id"] is not None]
    turns = {}
    if turn_ids:
        turns = {row.id: row for row in connection.execute(select(
            TurnRow.id, TurnRow.seat, TurnRow.phase, TurnRow.round).where(
            TurnRow.id.in_(turn_ids)))}
    out = {}
    for run_id, row in best.items():
        where, turn = row["kind"], turns.get(row["turn_id"])
        if where == "turn" and turn is not None:
            where = f"{turn.seat}, {turn.phase}" + (f", round {turn.round}" if turn.round else "")
        out[run_id] = {"match": where, "snippet": " ".join(str(row["snippet"] or "").split())}
    return out
