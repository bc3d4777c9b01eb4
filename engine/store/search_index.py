"""The full-text index over runs: migration `0006_search` makes it and fills it from the rows
already stored; triggers keep it in step with every later write.

`search_docs` holds one row per searchable text of a run: its question, each turn's reply, and
its final answer (the `answer` its metrics hold). Triggers on `runs` and `turns` write and
delete those rows, so every path that stores a run (a live run, `save`, an import, the
benchmark's bulk insert, a migration rewriting metrics) and every delete keeps the index in
step without a hook of its own. On SQLite an external-content FTS5 table (`search_fts`, the
unicode61 tokenizer without diacritics) indexes `search_docs.body`; on PostgreSQL a stored
`tsvector` column (the `simple` configuration: no stemming, as FTS5) with a GIN index.

Each document holds at most `MAX_INDEXED` characters of its text, on both backends alike:
PostgreSQL refuses a tsvector past 1 MB ("string is too long for tsvector"), and 20,000
characters make at most about 110 KB of one whatever the script, while a capped reply's copy
stays small beside it. A match past a text's first 20,000 characters is not found.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

from engine.store.schema import SearchDocRow

MAX_INDEXED = 20_000  # characters of a question, reply or answer the index holds


def _bounded(value: str) -> str:
    """SQL for the first `MAX_INDEXED` characters of `value` (substr counts characters on
    both backends)."""
    return f"substr({value}, 1, {MAX_INDEXED})"


# The answer a run's metrics hold, as text; None when the metrics are not readable JSON.
_SQLITE_ANSWER = ("CASE WHEN json_valid({m}) THEN CASE WHEN json_type({m}, '$.answer') IN "
                  "('text', 'integer', 'real') THEN CAST(json_extract({m}, '$.answer') AS TEXT)"
                  " END END")


def _sqlite_docs_of_run(new: str) -> str:
    answer = _SQLITE_ANSWER.format(m=f"{new}.metrics")
    return (f"INSERT INTO search_docs (run_id, kind, body) SELECT {new}.id, 'question', "
            f"{_bounded(new + '.question')} WHERE coalesce({new}.question, '') <> '';\n"
            f"INSERT INTO search_docs (run_id, kind, body) SELECT {new}.id, 'answer', "
            f"{_bounded('a')} "
            f"FROM (SELECT {answer} AS a) WHERE coalesce(a, '') <> '';")


_SQLITE = [
    "CREATE VIRTUAL TABLE search_fts USING fts5(body, content='search_docs', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER search_docs_ai AFTER INSERT ON search_docs BEGIN "
    "INSERT INTO search_fts (rowid, body) VALUES (new.id, new.body); END",
    "CREATE TRIGGER search_docs_ad AFTER DELETE ON search_docs BEGIN "
    "INSERT INTO search_fts (search_fts, rowid, body) VALUES ('delete', old.id, old.body); END",
    f"CREATE TRIGGER search_runs_ai AFTER INSERT ON runs BEGIN {_sqlite_docs_of_run('new')} "
    "END",
    "CREATE TRIGGER search_runs_au AFTER UPDATE OF question, metrics ON runs BEGIN "
    "DELETE FROM search_docs WHERE run_id = old.id AND kind IN ('question', 'answer');\n"
    f"{_sqlite_docs_of_run('new')} END",
    "CREATE TRIGGER search_runs_ad AFTER DELETE ON runs BEGIN "
    "DELETE FROM search_docs WHERE run_id = old.id; END",
    "CREATE TRIGGER search_turns_ai AFTER INSERT ON turns WHEN coalesce(new.reply, '') <> '' "
    "BEGIN INSERT INTO search_docs (run_id, turn_id, kind, body) "
    f"VALUES (new.run_id, new.id, 'turn', {_bounded('new.reply')}); END",
    "CREATE TRIGGER search_turns_au AFTER UPDATE OF reply ON turns BEGIN "
    "DELETE FROM search_docs WHERE turn_id = old.id;\n"
    "INSERT INTO search_docs (run_id, turn_id, kind, body) SELECT new.run_id, new.id, 'turn', "
    f"{_bounded('new.reply')} WHERE coalesce(new.reply, '') <> ''; END",
    "CREATE TRIGGER search_turns_ad AFTER DELETE ON turns BEGIN "
    "DELETE FROM search_docs WHERE turn_id = old.id; END",
]

# CREATE OR REPLACE: migration 0010 runs them again over a database that has them.
_POSTGRES_FUNCTIONS = [
    # The answer in a run's metrics; NULL for metrics that are not readable JSON.
    """CREATE OR REPLACE FUNCTION parley_answer(metrics text) RETURNS text
       LANGUAGE plpgsql IMMUTABLE AS $$
       BEGIN
         RETURN NULLIF(metrics::jsonb ->> 'answer', '');
       EXCEPTION WHEN others THEN
         RETURN NULL;
       END $$""",
    f"""CREATE OR REPLACE FUNCTION parley_search_run() RETURNS trigger
       LANGUAGE plpgsql AS $$
       BEGIN
         IF TG_OP = 'DELETE' THEN
           DELETE FROM search_docs WHERE run_id = OLD.id;
           RETURN NULL;
         END IF;
         IF TG_OP = 'UPDATE' THEN
           DELETE FROM search_docs WHERE run_id = OLD.id AND kind IN ('question', 'answer');
         END IF;
         IF coalesce(NEW.question, '') <> '' THEN
           INSERT INTO search_docs (run_id, kind, body)
             VALUES (NEW.id, 'question', {_bounded('NEW.question')});
         END IF;
         IF parley_answer(NEW.metrics) IS NOT NULL THEN
           INSERT INTO search_docs (run_id, kind, body)
             VALUES (NEW.id, 'answer', {_bounded('parley_answer(NEW.metrics)')});
         END IF;
         RETURN NULL;
       END $$""",
    f"""CREATE OR REPLACE FUNCTION parley_search_turn() RETURNS trigger
       LANGUAGE plpgsql AS $$
       BEGIN
         IF TG_OP IN ('UPDATE', 'DELETE') THEN
           DELETE FROM search_docs WHERE turn_id = OLD.id;
         END IF;
         IF TG_OP IN ('INSERT', 'UPDATE') AND coalesce(NEW.reply, '') <> '' THEN
           INSERT INTO search_docs (run_id, turn_id, kind, body)
             VALUES (NEW.run_id, NEW.id, 'turn', {_bounded('NEW.reply')});
         END IF;
         RETURN NULL;
       END $$""",
]

_POSTGRES = [
    "ALTER TABLE search_docs ADD COLUMN tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED",
    "CREATE INDEX ix_search_docs_tsv ON search_docs USING GIN (tsv)",
    *_POSTGRES_FUNCTIONS,
    "CREATE TRIGGER search_runs_iu AFTER INSERT OR UPDATE OF question, metrics ON runs "
    "FOR EACH ROW EXECUTE FUNCTION parley_search_run()",
    "CREATE TRIGGER search_runs_d AFTER DELETE ON runs FOR EACH ROW "
    "EXECUTE FUNCTION parley_search_run()",
    "CREATE TRIGGER search_turns_iud AFTER INSERT OR UPDATE OF reply OR DELETE ON turns "
    "FOR EACH ROW EXECUTE FUNCTION parley_search_turn()",
]


def _backfill(connection: Connection, answer: str) -> None:
    """Index the runs and turns already stored (the triggers index later writes)."""
    connection.execute(text(
        "INSERT INTO search_docs (run_id, kind, body) SELECT id, 'question', "
        f"{_bounded('question')} "
        "FROM runs WHERE coalesce(question, '') <> ''"))
    connection.execute(text(
        "INSERT INTO search_docs (run_id, turn_id, kind, body) SELECT run_id, id, 'turn', "
        f"{_bounded('reply')} FROM turns WHERE coalesce(reply, '') <> '' ORDER BY id"))
    connection.execute(text(
        f"INSERT INTO search_docs (run_id, kind, body) SELECT id, 'answer', {_bounded('a')} FROM "
        f"(SELECT id, {answer} AS a FROM runs) AS answers WHERE coalesce(a, '') <> ''"))


def create_index(connection: Connection) -> None:
    """Migration 0006: the search table, its full-text index and triggers, filled from the
    runs and turns already stored."""
    table: Any = SearchDocRow.__table__
    table.create(connection, checkfirst=True)
    if connection.dialect.name == "sqlite":
        _backfill(connection, _SQLITE_ANSWER.format(m="metrics"))
        for statement in _SQLITE:
            connection.execute(text(statement))
        connection.execute(text("INSERT INTO search_fts (search_fts) VALUES ('rebuild')"))
        return
    for statement in _POSTGRES:
        connection.execute(text(statement))
    _backfill(connection, "parley_answer(metrics)")


# The SQLite triggers that write documents (the rest only delete them).
_SQLITE_WRITERS = ("search_runs_ai", "search_runs_au", "search_turns_ai", "search_turns_au")


def bound_index(connection: Connection) -> None:
    """Migration 0010: the triggers write at most `MAX_INDEXED` characters a document, and
    the documents stored before are cut to them (SQLite's full-text index is then rebuilt
    from the cut text)."""
    cut = (f"UPDATE search_docs SET body = {_bounded('body')} "
           f"WHERE length(body) > {MAX_INDEXED}")
    if connection.dialect.name != "sqlite":
        for statement in _POSTGRES_FUNCTIONS:
            connection.execute(text(statement))
        connection.execute(text(cut))
        return
    for name in _SQLITE_WRITERS:
        connection.execute(text(f"DROP TRIGGER IF EXISTS {name}"))
    for statement in _SQLITE:
        if any(f"TRIGGER {name} " in statement for name in _SQLITE_WRITERS):
            connection.execute(text(statement))
    if connection.execute(text(cut)).rowcount:
        connection.execute(text("INSERT INTO search_fts (search_fts) VALUES ('rebuild')"))
