"""A run and a turn are described once, by the `runs` and `turns` tables
(`engine.store.schema`): the records an import checks, the values the engine's runs and turns
are written as and how a stored value is read back follow from their columns. What lives
outside the store, the engine's `Turn` and `RunResult`, is pinned to the tables here."""
from __future__ import annotations

import pytest

from engine import Store, run_debate
from engine.models import RunResult, Turn
from engine.store.records import RunRecord, TurnRecord
from engine.store.runs import FROM_RESULT
from engine.store.statements import RUNS, TURNS

JUDGE_REPLY = "1. VERDICT: Pro\n2. REASONING: r\n3. PRO SUMMARY: p\n4. CON SUMMARY: c\n" \
              "5. CONFIDENCE: 0.9\n6. ANSWER: Pro"


def _carried(table):
    """The columns of `table` a file carries (an import fills the others)."""
    return [c.name for c in table.columns if c.info.get("file", True)]


def test_a_turn_has_a_field_for_each_column_of_turns_and_no_other():
    """The engine's `Turn` is what `turn_values` writes a row from: a field without a column
    would be lost on the way in, a column without a field written empty."""
    fields = {"idx" if name == "index" else name for name in Turn.model_fields}
    assert fields == set(_carried(TURNS))


def test_the_records_carry_every_column_a_file_sets():
    assert list(TurnRecord.model_fields) == _carried(TURNS)
    assert list(RunRecord.model_fields)[:len(_carried(RUNS))] == _carried(RUNS)
    # the store's own marks and what it reads off the metrics are never a file's to set
    assert {"imported_by", "imported_at", "seats", "first_share"} <= \
        {c.name for c in RUNS.columns} - set(RunRecord.model_fields)


def test_a_run_ends_with_what_its_result_says_of_it(store, recording_model):
    """Each field of `RunResult` that is a column of `runs` is written at the run's end."""
    assert {"correct", "unanswered", "duration", "cost_usd"} <= set(FROM_RESULT)
    assert all(name in RunResult.model_fields or name in RunResult.model_computed_fields
               for name in FROM_RESULT)
    result = run_debate("Pro or con?", proponent=recording_model(["p"]),
                        opponent=recording_model(["c"]), judge=recording_model([JUDGE_REPLY]),
                        max_rounds=1, retries=0, store=store, expected="Pro")
    row = store.get(result.run_id)
    assert result.correct is True and row["correct"] is True
    for name in FROM_RESULT:
        assert row[name] == pytest.approx(getattr(result, name)), name


def test_an_export_imported_elsewhere_holds_every_column_a_file_carries(store, recording_model,
                                                                          tmp_path):
    """Export, then import into another database: every column a file carries, of the run
    and of each turn, reads back as it was (a column the export or the import missed would
    read back as its default)."""
    done = run_debate("Q?", proponent=recording_model(["p1", "p2"]),
                      opponent=recording_model(["c"]), judge=recording_model([JUDGE_REPLY]),
                      max_rounds=2, retries=0, store=store, expected="Con", label="alpha",
                      tags=["t1"])
    failed = store.start_run("debate", "Half done?", label="beta", expected="x")
    store.end_run(failed, "failed", "no call succeeded")
    fresh = Store(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert sorted(fresh.import_runs(store.export_jsonl())) == sorted([done.run_id, failed])
    for run_id in (done.run_id, failed):
        before, after = store.get(run_id), fresh.get(run_id)
        assert {name: after[name] for name in _carried(RUNS)} == \
            {name: before[name] for name in _carried(RUNS)}
        assert [{name: t[name] for name in _carried(TURNS)} for t in after["turns"]] == \
            [{name: t[name] for name in _carried(TURNS)} for t in before["turns"]]
    assert store.get(done.run_id)["correct"] is False  # a value other than the default
