"""Search inside transcripts (issue 14, bullet 4): full text over questions, replies and
answers, on SQLite (FTS5) and PostgreSQL (tsvector) alike.

Every test runs on both backends (PostgreSQL when PARLEY_TEST_PG_URL names a server). What a
user types is hostile: quotes, FTS5 operators, 10 kB, NUL and fuzzed text never raise.
"""
from __future__ import annotations

import os
from pathlib import Path

from conftest import applied_migrations
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plugins.search_runs import fixture_runs, stored
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from engine import Store
from engine.protocols.debate import run_debate
from engine.store.search import MAX_TERMS, terms

RUNS_PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "runs.py")
EXAMPLES = int(os.environ.get("PARLEY_FUZZ_EXAMPLES", "100"))


# --------------------------------------------------------------------------- finding
def test_a_word_only_in_a_reply_is_found_with_its_turn(backend):  # noqa: F811
    runs = fixture_runs(backend)
    hits = backend.runs(transcript="durability")
    assert hits["id"].tolist() == [runs["reply"]]
    hit = hits.iloc[0]
    assert hit["match"] == "Ada, opening, round 1"
    assert "«durability»" in hit["snippet"]


def test_questions_and_answers_are_searched(backend):  # noqa: F811
    runs = fixture_runs(backend)
    assert set(backend.runs(transcript="quokka")["id"]) == {runs["reply"], runs["question"]}
    answer = backend.runs(transcript="kumquat")
    assert answer["id"].tolist() == [runs["answer"]] and answer.iloc[0]["match"] == "answer"
    question = backend.runs(transcript="happiest")
    assert question.iloc[0]["match"] == "question"
    assert "«happiest»" in question.iloc[0]["snippet"]


def test_terms_combine_and_a_phrase_is_matched_in_order(backend):  # noqa: F811
    runs = fixture_runs(backend)
    assert backend.runs(transcript="quokka benchmark")["id"].tolist() == [runs["reply"]]
    assert backend.runs(transcript='"quokka benchmark"')["id"].tolist() == [runs["reply"]]
    assert backend.runs(transcript='"benchmark quokka"').empty
    assert backend.runs(transcript="quokka nowhere").empty
    assert backend.runs(transcript="QUOKKA BENCHMARK")["id"].tolist() == [runs["reply"]]


def test_unicode_words_are_found(backend):  # noqa: F811
    runs = fixture_runs(backend)
    for word in ("Zürich", "λόγος", "naïve", "café", "東京"):
        assert backend.runs(transcript=word)["id"].tolist() == [runs["unicode"]], word


def test_limit_bounds_the_runs(backend):  # noqa: F811
    for i in range(5):
        stored(backend, f"Question {i} about otters?", [("Ada", "vote", 0, "otters")])
    assert len(backend.runs(transcript="otters", limit=3)) == 3
    assert len(backend.runs(transcript="otters")) == 5


def test_the_runs_filter_narrows_and_says_where(backend):  # noqa: F811
    runs = fixture_runs(backend)
    found = backend.runs(transcript="durability")
    assert found["id"].tolist() == [runs["reply"]]
    assert found.iloc[0]["match"] == "Ada, opening, round 1"
    assert "«durability»" in found.iloc[0]["snippet"]
    both = backend.runs(transcript="quokka", search="happiest")
    assert both["id"].tolist() == [runs["question"]]
    everything = backend.runs(transcript="  ")
    assert len(everything) == 4 and "snippet" not in everything


# --------------------------------------------------------------------------- hostile text
HOSTILE = ['"', '""', "*", "NEAR(", "NEAR(a b", "-", "- -", "a -b", "AND", "OR NOT", "^",
           "body:x", "(", ")", "{", "'", "';--", "\\", "%", "_", "!", "&", "|", ":*",
           "x" * 10_000, "a\x00b", "\x00", "\ud800", "ab\x1bc", "café*", "a" * 5000 + " b"]


def test_hostile_queries_never_raise(backend):  # noqa: F811
    fixture_runs(backend)
    for query in HOSTILE:
        backend.runs(transcript=query)


def test_punctuation_only_text_is_no_filter(backend):  # noqa: F811
    fixture_runs(backend)
    for query in ('"', "*", "-", "()", "  ", "", "\x00"):
        assert terms(query) == []
        assert len(backend.runs(transcript=query)) == 4


def test_terms_are_bounded_and_quote_free():
    assert terms('say "hello world" NEAR( -x') == ["say", "hello world", "NEAR(", "-x"]
    assert terms('un"closed') == ["un closed"]
    assert len(terms("w " * 1000)) == MAX_TERMS
    assert terms("x" * 10_000) == ["x" * 200]
    assert terms(None) == [] and terms(42) == []
    assert all('"' not in t and "\x00" not in t for t in terms('a\x00b "c" d"e'))


def test_fuzzed_queries_never_raise(backend):  # noqa: F811
    fixture_runs(backend)

    @settings(max_examples=EXAMPLES, deadline=5000, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(st.sampled_from([*'"*-^():{}\'\\%_ ab', "NEAR", "AND", "OR", "NOT",
                                     "\x00", "\ud800", "é", "東", "quokka"]) | st.text(),
                    max_size=20).map("".join))
    def check(query: str) -> None:
        hits = backend.runs(transcript=query)
        assert set(hits["id"]) <= set(backend.runs()["id"])
        assert "match" not in hits or all(hits["match"])

    check()


# --------------------------------------------------------------------------- in step
def test_deleting_a_run_removes_it_from_the_index(backend):  # noqa: F811
    runs = fixture_runs(backend)
    backend.delete([runs["reply"]])
    assert backend.runs(transcript="durability").empty
    assert backend.runs(transcript="quokka")["id"].tolist() == [runs["question"]]
    with backend.engine.connect() as connection:
        left = connection.execute(text("SELECT count(*) FROM search_docs WHERE run_id = :r"),
                                  {"r": runs["reply"]}).scalar()
    assert left == 0


def test_imported_runs_are_indexed(backend, tmp_path):  # noqa: F811
    result = run_debate("Should the walrus lead the herd?", proponent="simulated",
                        opponent="simulated", judge="simulated", max_rounds=1, store=backend)
    run_id = str(result.run_id)
    reply = max(result.turns[-1].reply.split(), key=len).strip(".,:;!?*()[]\"'")
    assert run_id in set(backend.runs(transcript=reply)["id"])
    exported = backend.export_jsonl([run_id])
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    other.import_runs(exported)
    assert other.runs(transcript="walrus")["id"].tolist() == [run_id]
    assert other.runs(transcript=reply)["id"].tolist() == [run_id]
    assert other.runs(transcript=reply).iloc[0]["match"] != "question"
    backend.delete([run_id])
    assert backend.runs(transcript="walrus").empty
    backend.import_runs(exported)
    assert backend.runs(transcript="walrus")["id"].tolist() == [run_id]


def test_a_saved_result_is_indexed_by_its_answer(backend):  # noqa: F811
    run_id = stored(backend, "Pick one.", [("Ada", "vote", 0, "blue")], answer="turquoise")
    assert backend.get(run_id)["metrics"]["answer"] == "turquoise"
    assert backend.runs(transcript="turquoise")["id"].tolist() == [run_id]


def _back_to_0005(store: Store) -> None:
    """Make `store`'s database as migration 0005 left it: no search table, no triggers."""
    with store.engine.begin() as connection:
        if connection.dialect.name == "sqlite":
            connection.execute(text("DROP TABLE search_fts"))
            for name in ("runs_ai", "runs_au", "runs_ad", "turns_ai", "turns_au", "turns_ad"):
                connection.execute(text(f"DROP TRIGGER search_{name}"))
        else:
            for name, table in (("runs_iu", "runs"), ("runs_d", "runs"),
                                ("turns_iud", "turns")):
                connection.execute(text(f"DROP TRIGGER search_{name} ON {table}"))
        connection.execute(text("DROP TABLE search_docs"))
        connection.execute(text("DELETE FROM schema_migrations WHERE name = '0006_search'"))
    store.engine.dispose()


def test_migration_0006_fills_the_index_of_an_older_database(backend):  # noqa: F811
    runs = fixture_runs(backend)
    with backend.engine.begin() as connection:  # unreadable metrics stay unindexed
        connection.execute(text("UPDATE runs SET metrics = :m WHERE id = :i"),
                           {"m": "{not json", "i": runs["answer"]})
    _back_to_0005(backend)
    reopened = Store(backend.url)
    assert "0006_search" in applied_migrations(reopened)
    assert reopened.runs(transcript="durability")["id"].tolist() == [runs["reply"]]
    assert reopened.runs(transcript="happiest")["id"].tolist() == [runs["question"]]
    assert reopened.runs(transcript="Zürich")["id"].tolist() == [runs["unicode"]]
    assert reopened.runs(transcript="kumquat").empty
    assert reopened.runs(transcript="PostgreSQL").iloc[0]["match"] != "question"
    later = stored(reopened, "A later question about walruses?", [])
    assert reopened.runs(transcript="walruses")["id"].tolist() == [later]
    assert reopened.migrate() == []


def test_a_read_only_database_still_searches(tmp_path):
    writable = Store(f"sqlite:///{tmp_path / 'ro.db'}")
    runs = fixture_runs(writable)
    writable.close()
    store = Store(f"sqlite:///file:{tmp_path / 'ro.db'}?mode=ro&uri=true")
    assert store.read_only
    assert store.runs(transcript="durability")["id"].tolist() == [runs["reply"]]
    assert store.runs(transcript="quokka")["id"].tolist() == [runs["question"], runs["reply"]]



# --------------------------------------------------------------------------- the Runs page
def test_the_runs_page_search_box_narrows_the_table_and_shows_the_snippet(tmp_path,
                                                                           monkeypatch):
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)  # the page's store is cached per URL
    runs = fixture_runs(Store(url))
    at = AppTest.from_file(RUNS_PAGE, default_timeout=60).run()
    assert not at.exception, at.exception
    assert len(at.dataframe[0].value) == 4
    at.text_input(key="runs_transcript").input("durability").run()
    table = at.dataframe[0].value
    assert table["id"].tolist() == [runs["reply"]]
    assert table["match"].tolist() == ["Ada, opening, round 1"]
    assert "«durability»" in table["snippet"].iloc[0]
    at.text_input(key="runs_transcript").input('"quokka benchmark" NEAR( *').run()
    assert not at.exception, at.exception
    assert "No runs match" in at.info[0].value
    at.text_input(key="runs_transcript").input('"quokka benchmark"').run()
    assert at.dataframe[0].value["id"].tolist() == [runs["reply"]]
    at.text_input(key="runs_transcript").input('<b>x</b> " * -').run()
    assert not at.exception, at.exception
    at.text_input(key="runs_transcript").input("").run()
    assert len(at.dataframe[0].value) == 4 and "snippet" not in at.dataframe[0].value
