"""Insights opens on the product's three answers (who changed their mind, how the votes fell,
confidence against accuracy), added up in the store from typed signal columns: hand counts,
the store against the runs' own metrics on SQLite and PostgreSQL, simulated and real kept
apart, the migration that fills the columns of older runs, and hostile metrics."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from engine import Store
from engine.protocols import arun_config, run_sync
from engine.questions import DEFINITE
from engine.reports import answers, drill
from engine.store import RunFilters
from engine.store.signal_columns import SIGNAL_COLUMNS, first_share, signal_values
from engine.views.aggregate import rate_text

REAL = "openai:gpt-4o-mini"


def stored(store: Store, run_id: str, protocol: str, metrics: dict, *, label: str | None = "a",
           correct: bool | None = None, simulated: bool = False,
           status: str = "completed") -> None:
    """A run imported with exactly these metrics (as a file would bring it)."""
    model = "simulated" if simulated else REAL
    doc = {"id": run_id, "protocol": protocol, "question": "What is 2+2?",
           "expected": "4" if correct is not None else None, "label": label,
           "status": status, "metrics": metrics, "correct": correct, "models": model,
           "simulated": simulated,
           "config": {"protocol": protocol, "model": model, "seats": {}}}
    assert store.import_runs(json.dumps(doc)) == [run_id]


def society(seats: int, changes: int, persuaded: int, misled: int, consensus: float,
            level: str, first: dict, tied: bool = False) -> dict:
    return {"seats": seats, "mind_changes": changes, "persuaded": persuaded, "misled": misled,
            "consensus": consensus, "level": level, "tied": tied,
            "round_votes": [first, {"4": seats}]}


def by_title(sections: list) -> dict:
    return {s.key: s for s in sections}


def test_the_three_answers_by_hand(store):
    stored(store, "s1", "society", society(3, 1, 1, 0, 1.0, "high", {"4": 2, "5": 1}),
           correct=True)
    stored(store, "s2", "society", society(3, 2, 0, 1, 2 / 3, "medium",
                                           {"4": 1, "5": 1, "6": 1}, tied=False), correct=False)
    stored(store, "d1", "debate", {"judge_confidence": 0.8}, correct=True)
    stored(store, "d2", "debate", {"judge_confidence": 0.2}, correct=False)
    stored(store, "x", "society", society(3, 3, 0, 3, 1.0, "high", {"4": 3}), correct=True,
           status="failed")  # a failed run counts nowhere here
    sections = by_title(answers.report(store, RunFilters(), "real"))

    minds = sections["minds"].table.iloc[0]
    assert (minds["label"], minds["protocol"], minds["runs"], minds["agents"]) == (
        "a", "Society of minds (Du et al.)", 2, 6)
    assert minds["changed their mind"] == rate_text(3, 6).removesuffix(" n=6")  # n: agents
    assert minds["persuaded"] == rate_text(1, 6)
    assert minds["misled"] == rate_text(1, 6)
    assert "Of 6 agents in 2 runs, 50%" in sections["minds"].caption

    votes = sections["votes"].table
    assert list(votes["protocol"]) == ["Society of minds (Du et al.)"]  # a debate has no vote
    row = votes.iloc[0]
    mean = (1 + 2 / 3) / 2
    half = 1.959964 * math.sqrt(((1 + 4 / 9) - 2 * mean * mean) / 1 / 2)
    assert row["winner's share"] == \
        f"{mean:.0%} [{max(mean - half, 0):.0%}–{min(mean + half, 1):.0%}]"  # n: runs
    assert (row["unanimous"], row["tied"], row["winner right"]) == (
        rate_text(1, 2).removesuffix(" n=2"), rate_text(0, 2).removesuffix(" n=2"),
        rate_text(1, 2))

    confidence = sections["confidence"].table
    rows = {(r["protocol"], r["confidence"]): r for r in confidence.to_dict("records")}
    assert list(confidence["confidence"]) == ["judge ≥ 0.7", "judge < 0.4",
                                              "high", "medium"]
    assert rows[("Debate", "judge ≥ 0.7")]["accuracy"] == rate_text(1, 1)
    assert rows[("Debate", "judge ≥ 0.7")]["round-one agreement"] == "no round one"
    high = rows[("Society of minds (Du et al.)", "high")]
    medium = rows[("Society of minds (Du et al.)", "medium")]
    assert (high["accuracy"], high["round-one agreement"]) == (rate_text(1, 1), "67% n=1")
    assert (medium["accuracy"], medium["round-one agreement"]) == (rate_text(0, 1), "33% n=1")


def test_simulated_and_real_runs_are_never_pooled(store):
    stored(store, "r", "society", society(3, 1, 0, 0, 1.0, "high", {"4": 3}))
    stored(store, "s", "society", society(3, 3, 0, 0, 1.0, "high", {"4": 3}), simulated=True)
    real = by_title(answers.report(store, RunFilters(), "real"))["minds"].table
    assert list(real["changed their mind"]) == [rate_text(1, 3).removesuffix(" n=3")]
    fake = by_title(answers.report(store, RunFilters(), "simulated"))["minds"].table
    assert list(fake["changed their mind"]) == [rate_text(3, 3).removesuffix(" n=3")]
    both = by_title(answers.report(store, RunFilters(), "both"))["minds"].table
    assert list(both["label"]) == ["a", "a (simulated)"]
    # a row of simulated runs opens the simulated runs only
    params = drill.row_params("minds", both.iloc[1].to_dict())
    assert params == {"protocol": "society", "label": "a", "status": "completed",
                      "model": "simulated"}
    assert "model" not in drill.row_params("minds", both.iloc[0].to_dict())
    assert drill.row_params("minds", fake.iloc[0].to_dict(), simulated=True)["model"] == \
        "simulated"


def test_nothing_to_say_is_said_in_words(store):
    stored(store, "p", "peer-review", {"approved": True}, correct=True)
    sections = answers.report(store, RunFilters(), "real")
    assert [s.key for s in sections] == ["minds", "votes", "confidence"]
    assert all(s.note and s.table is None for s in sections)
    assert "can change their mind" in sections[0].note
    assert answers.report(store, RunFilters(status="failed"), "real")[0].note  # none completed


def _expected_sums(store: Store, **filters) -> dict:
    """What the store should add up, worked out here from each completed run's own metrics
    (`store.runs`), one run at a time."""
    runs = store.runs(**filters, with_config=False)
    done = runs[runs["status"] == "completed"]
    out: dict = {"m_seats": 0, "m_changes": 0, "t_runs": 0, "t_sum": 0.0, "f_runs": 0,
                 "f_sum": 0.0, "persuaded": 0, "correct": 0, "scored": 0}
    for metrics, correct in zip(done["metrics"], done["correct"], strict=True):
        values = signal_values(metrics)
        if values["mind_changes"] is not None:
            out["m_seats"] += values["seats"] or 0
            out["m_changes"] += values["mind_changes"]
        out["persuaded"] += values["persuaded"] or 0
        if values["consensus"] is not None:
            out["t_runs"] += 1
            out["t_sum"] += values["consensus"]
        if values["first_share"] is not None:
            out["f_runs"] += 1
            out["f_sum"] += values["first_share"]
        if correct is not None and not pd.isna(correct):
            out["scored"] += 1
            out["correct"] += bool(correct)
    return out


def _engine_runs(store: Store) -> None:
    for protocol in ("panel", "society", "vote", "council", "debate", "single"):
        for seed, question in enumerate(DEFINITE[:2]):
            run_sync(arun_config({"protocol": protocol,
                                  "model": f"simulated?seed={seed}&fail=0.1"}, question.text,
                                 store=store, label=f"l{seed}", expected=question.expected))


def test_the_store_adds_up_what_each_runs_metrics_say(backend):
    _engine_runs(backend)
    for filters in ({}, {"protocol": "panel"}, {"label": "l1"}):
        summary = backend.answer_summary(**filters)
        want = _expected_sums(backend, **filters)
        got = {key: summary[key].sum() for key in want}
        assert got["m_changes"] > 0 or filters, got  # the runs did change their minds
        for key, value in want.items():
            assert got[key] == pytest.approx(value), (filters, key)


def test_the_migration_fills_the_columns_of_older_runs(backend_url):
    store = Store(backend_url)
    _engine_runs(store)
    before = store.runs(with_config=False)
    with store.engine.begin() as connection:
        connection.execute(text("DROP INDEX IF EXISTS ix_runs_answers"))
        for name in SIGNAL_COLUMNS:  # as an older Parley left the table
            connection.execute(text(f"ALTER TABLE runs DROP COLUMN {name}"))
        connection.execute(text("DELETE FROM schema_migrations "
                                "WHERE name = '0028_signal_columns'"))
    store.close()
    again = Store(backend_url)
    with again.engine.connect() as connection:
        rows = {r[0]: dict(zip(SIGNAL_COLUMNS, r[1:], strict=True)) for r in connection.execute(
            text(f"SELECT id, {', '.join(SIGNAL_COLUMNS)} FROM runs"))}
    for run_id, metrics in zip(before["id"], before["metrics"], strict=True):
        want = signal_values(metrics)
        for name in SIGNAL_COLUMNS:
            assert rows[run_id][name] == pytest.approx(want[name]) if isinstance(
                want[name], float) else rows[run_id][name] == want[name], (run_id, name)
    assert any(r["mind_changes"] for r in rows.values())


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats()
                       | st.text(max_size=30),
                       lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["seats", "mind_changes", "persuaded", "misled",
                                        "consensus", "tied", "level", "judge_confidence",
                                        "round_votes", "other"]), JSONISH) | JSONISH)
def test_hostile_metrics_give_typed_values_or_none(metrics):
    values = signal_values(metrics)
    assert set(values) == set(SIGNAL_COLUMNS)
    for name in ("seats", "mind_changes", "persuaded", "misled"):
        assert values[name] is None or (type(values[name]) is int and values[name] >= 0)
    for name in ("consensus", "judge_confidence", "first_share"):
        assert values[name] is None or (type(values[name]) is float
                                        and 0.0 <= values[name] <= 1.0)
    assert values["tied"] in (None, True, False)
    assert values["confidence_level"] is None or (
        isinstance(values["confidence_level"], str) and len(values["confidence_level"]) <= 16)


def test_round_one_agreement_needs_two_answers():
    assert first_share([{"4": 2, "5": 1}]) == pytest.approx(2 / 3)
    assert first_share([{"4": 1}]) is None  # one agent agrees with nobody
    assert first_share([{}, {"4": 3}]) is None
    assert first_share([{"4": -1, "5": 2}]) == 1.0  # a negative count is not a count
    assert first_share("nonsense") is None
