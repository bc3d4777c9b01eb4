"""The store's contract on every backend: SQLite always, PostgreSQL when a server is given.

`.ci/run` starts PostgreSQL on loopback and sets PARLEY_TEST_PG_URL (and PARLEY_REQUIRE_PG=1,
so CI fails rather than skips when the server is missing).
"""
from __future__ import annotations

import threading

from conftest import applied_migrations

from engine import Store, run_debate, run_peer_review


def _debate(store, **kw):
    return run_debate("Should we adopt the plan?", proponent="simulated", opponent="simulated",
                      judge="simulated", max_rounds=2, store=store, **kw)


def test_lifecycle_turns_and_totals(backend):
    result = _debate(backend, label="base", tags=["x", "y"])
    row = backend.get(result.run_id)
    assert row["status"] == "completed" and row["label"] == "base"
    assert row["tags"] == ["x", "y"] and row["simulated"] is True
    assert [t["idx"] for t in row["turns"]] == list(range(5))
    assert row["calls"] == 5 and row["tokens_in"] == sum(t.tokens_in for t in result.turns)
    assert row["result"]["verdict"] == result.verdict
    assert applied_migrations(backend) == ["0001_runs_and_turns", "0002_library"] or \
        applied_migrations(backend)[:2] == ["0001_runs_and_turns", "0002_library"]


def test_filters_are_bound_not_spliced(backend):
    a = _debate(backend, label="alpha", tags=["demo"])
    run_peer_review("Write notes", producer="simulated", reviewer="simulated", store=backend)
    assert list(backend.runs(protocol="debate")["id"]) == [a.run_id]
    assert list(backend.runs(tag="demo")["id"]) == [a.run_id]
    assert list(backend.runs(label="alpha")["id"]) == [a.run_id]
    assert backend.runs(search="'; DROP TABLE runs; --").empty
    assert backend.runs(label="x' OR '1'='1").empty
    assert len(backend.runs()) == 2


def test_a_tag_outside_ascii_filters_its_runs(backend):
    """Tags are stored as written, so the filter looks for them as written (it looked for
    the escaped spelling and found no run tagged 'café'); a row written escaped still matches."""
    a = _debate(backend, label="alpha", tags=["café", "日本"])
    assert list(backend.runs(tag="café")["id"]) == [a.run_id]
    assert list(backend.runs(tag="日本")["id"]) == [a.run_id]
    assert backend.runs(tag="cafe").empty
    with backend.engine.begin() as connection:
        connection.exec_driver_sql("UPDATE runs SET tags = '[\"caf\\u00e9\"]'")
    assert list(backend.runs(tag="café")["id"]) == [a.run_id]


def test_export_import_round_trip(backend, tmp_path):
    a = _debate(backend)
    b = run_peer_review("Write notes", producer="simulated", reviewer="simulated",
                        store=backend)
    dump = backend.export_jsonl([a.run_id, b.run_id])
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    assert sorted(other.import_runs(dump)) == sorted([a.run_id, b.run_id])
    assert other.import_runs(dump) == []  # duplicates are skipped
    assert [t["reply"] for t in other.get(a.run_id)["turns"]] == \
        [t["reply"] for t in backend.get(a.run_id)["turns"]]
    backend.delete([a.run_id])
    assert backend.import_runs(other.export_run(a.run_id)) == [a.run_id]


def test_library_crud(backend):
    pid = backend.put_library("persona", "Cautious", {"persona": "Be careful.", "icon": "🛡️"})
    assert backend.library("persona")[0]["persona"] == "Be careful."
    backend.put_library("persona", "Cautious", {"persona": "Be very careful."}, item_id=pid)
    assert backend.library("persona")[0]["persona"] == "Be very careful."
    backend.delete_library(pid)
    assert backend.library("persona") == []


def test_concurrent_writers_in_threads(backend):
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(3):
                run_peer_review(f"Task {n}-{i}", producer="simulated", reviewer="simulated",
                                store=backend)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    runs = backend.runs()
    assert len(runs) == 12 and set(runs["status"]) == {"completed"}
