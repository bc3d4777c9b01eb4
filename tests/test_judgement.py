"""One person's judgement counts once, and a file's judgement is a claim (DESIGN section 4), on
SQLite and PostgreSQL: a second preference of a pair or rating of a run replaces the first
(two tabs at once included, held by unique indexes; migration 0018 keeps the latest of older
duplicates); an import writes labels only onto the runs it adds, marks them imported,
refuses future dates and a file naming a run twice, and keeps who imported a run apart from
the `started_by` its file claims; a turn disagreeing with its seat is refused and a simulated
seat's turn costs 0 (issue 39's import checks)."""
from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from conftest import applied_migrations
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from engine import Store, run_debate
from engine.models import ConfigError

ALICE, BOB = "alice@example.com", "bob@example.com"


def _debate(store, question="Should we adopt the plan?", **kw):
    return run_debate(question, proponent="simulated", opponent="simulated",
                      judge="simulated", max_rounds=1, store=store, **kw).run_id


@pytest.fixture
def pair(backend):
    return backend, _debate(backend, label="one"), _debate(backend, label="two")


# --------------------------------------------------------------------------- one judgement
def test_two_tabs_give_one_preference_the_latest(pair):
    """One analyst, two tabs, one pair: both preferences used to count in win rates."""
    store, a, b = pair
    store.add_preference(a, b, rater=ALICE, choice="a", shown_left="a")
    latest = store.add_preference(b, a, rater=ALICE, choice="tie", shown_left="b")
    store.add_preference(a, b, rater=BOB, choice="b")
    prefs = store.preferences()
    assert len(prefs) == 2
    mine = prefs[prefs["rater"] == ALICE].iloc[0]
    assert (mine["id"], mine["run_a"], mine["choice"]) == (latest, b, "tie")


def test_six_saves_give_one_rating_per_run_and_per_turn(pair):
    """Six saves of 5/5 read as n=6 in the calibration, with a Wilson interval to match."""
    store, a, _ = pair
    for score in (5, 5, 5, 5, 5, 2):
        store.add_rating(a, rater=ALICE, score=score)
    store.add_rating(a, rater=ALICE, score=4, turn=0)
    store.add_rating(a, rater=ALICE, score=1, turn=0)
    store.add_rating(a, rater=BOB, score=5)
    ratings = store.ratings()
    assert len(ratings) == 3
    mine = ratings[ratings["rater"] == ALICE]
    assert sorted(zip(mine["turn"].fillna(-1).astype(int), mine["score"])) == [(-1, 2), (0, 1)]


def test_many_tabs_at_once_leave_one_preference(pair):
    store, a, b = pair
    errors: list[BaseException] = []

    def judge(choice: str) -> None:
        try:
            store.add_preference(a, b, rater=ALICE, choice=choice)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=judge, args=(c,)) for c in "ab" * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert len(store.preferences()) == 1


def test_the_database_refuses_a_second_label_written_around_the_store(pair):
    store, a, b = pair
    store.add_preference(a, b, rater=ALICE, choice="a")
    store.add_rating(a, rater=ALICE, score=3)
    with pytest.raises(IntegrityError), store.engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO preferences (id, run_a, run_b, rater, choice, comment, created_at, "
            "imported_by) VALUES ('x1', :b, :a, :r, 'b', '', :t, '')"),
            {"a": a, "b": b, "r": ALICE, "t": datetime.now(UTC)})
    with pytest.raises(IntegrityError), store.engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO ratings (id, run_id, turn, rater, score, comment, created_at, "
            "imported_by) VALUES ('x2', :a, NULL, :r, 1, '', :t, '')"),
            {"a": a, "r": ALICE, "t": datetime.now(UTC)})


def test_an_older_database_keeps_the_latest_of_its_duplicates(pair):
    store, a, b = pair
    with store.engine.begin() as connection:  # as 0017 left it
        for index in ("ux_preferences_one", "ux_ratings_one"):
            connection.execute(text(f"DROP INDEX {index}"))
        for table in ("runs", "preferences", "ratings"):
            for column in ("imported_by", "imported_at"):
                connection.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        connection.execute(text("DELETE FROM schema_migrations "
                                "WHERE name = '0018_one_judgement'"))
        old = datetime(2026, 1, 1, tzinfo=UTC)
        for number, (first, second, choice) in enumerate(
                [(a, b, "a"), (b, a, "b"), (a, b, "tie")]):
            connection.execute(text(
                "INSERT INTO preferences (id, run_a, run_b, rater, choice, comment, "
                "created_at) VALUES (:id, :x, :y, :r, :c, '', :t)"),
                {"id": f"p{number}", "x": first, "y": second, "r": ALICE, "c": choice,
                 "t": old + timedelta(hours=number)})
        for number, (turn, score) in enumerate([(None, 5)] * 6 + [(None, 2), (0, 4)]):
            connection.execute(text(
                "INSERT INTO ratings (id, run_id, turn, rater, score, comment, created_at) "
                "VALUES (:id, :run, :turn, :r, :s, '', :t)"),
                {"id": f"r{number}", "run": a, "turn": turn, "r": ALICE, "s": score,
                 "t": old + timedelta(hours=number)})
    store.engine.dispose()
    reopened = Store(store.url)
    assert "0018_one_judgement" in applied_migrations(reopened)
    prefs = reopened.preferences()
    assert list(prefs["id"]) == ["p2"] and list(prefs["choice"]) == ["tie"]
    ratings = reopened.ratings()
    assert sorted(ratings["id"]) == ["r6", "r7"]
    assert reopened.get(a)["imported_by"] == "" and reopened.get(a)["imported_at"] is None
    reopened.add_preference(b, a, rater=ALICE, choice="a")  # still one, now the index holds
    assert len(reopened.preferences()) == 1 and reopened.migrate() == []


# --------------------------------------------------------------------------- imports
def _forged(store, runs: list[str], *, days: int = 0) -> str:
    """The export of `runs` carrying 40 preferences by Alice and 5 ratings by Bob."""
    docs = [json.loads(store.export_run(run_id)) for run_id in runs]
    when = (datetime.now(UTC) + timedelta(days=days)).isoformat()
    docs[0]["preferences"] = [
        {"id": f"fp{n}", "run_a": runs[0], "run_b": runs[1], "rater": ALICE, "choice": "a",
         "created_at": when} for n in range(40)]
    docs[0]["ratings"] = [{"id": f"fr{n}", "run_id": runs[0], "rater": BOB, "score": 5,
                           "created_at": when} for n in range(5)]
    return "".join(json.dumps(d) + "\n" for d in docs)


def test_a_file_reusing_stored_ids_writes_no_label_onto_them(pair):
    """It used to import 0 runs and all 45 labels, unmarked: a 100% human win rate."""
    store, a, b = pair
    report = store.import_file(_forged(store, [a, b]), imported_by="cli:mallory")
    assert report.runs == [] and sorted(report.skipped) == sorted([a, b])
    assert (report.preferences, report.ratings) == (0, 0)
    assert store.preferences().empty and store.ratings().empty
    assert report.summary().startswith("imported 0 run(s); skipped 2 already in this "
                                       "database, with the labels they carry; 0 "
                                       "preference(s) and 0 rating(s) written")


def test_labels_of_the_runs_a_file_adds_are_written_once_each_and_marked(pair, tmp_path):
    store, a, b = pair
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    report = other.import_file(_forged(store, [a, b]), imported_by="cli:ops")
    assert sorted(report.runs) == sorted([a, b])
    assert (report.preferences, report.ratings) == (1, 1)  # one judgement per claimed rater
    for frame in (other.preferences(), other.ratings()):
        assert set(frame["imported_by"]) == {"cli:ops"}
        assert frame["imported_at"].notna().all()


def test_a_label_dated_in_the_future_refuses_the_file(pair, tmp_path):
    store, a, b = pair
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    with pytest.raises(ConfigError, match="in the future; nothing was imported"):
        other.import_file(_forged(store, [a, b], days=1500))
    assert other.runs(with_config=False).empty and other.preferences().empty


def test_a_file_repeating_a_run_is_refused(pair, tmp_path):
    """It used to keep the first record without a word."""
    store, a, _ = pair
    line = json.dumps(json.loads(store.export_run(a)))
    changed = json.dumps({**json.loads(store.export_run(a)), "question": "Other?"})
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    with pytest.raises(ConfigError, match=rf"line 2 repeats run '{a}' \(first at line 1\)"):
        other.import_runs(line + "\n" + changed + "\n")
    assert other.runs(with_config=False).empty


def test_an_imported_run_keeps_who_imported_it_apart_from_who_it_claims(pair, tmp_path):
    store, a, _ = pair
    doc = {**json.loads(store.export_run(a)), "started_by": "ada@example.com"}
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    before = datetime.now(UTC)
    other.import_runs(json.dumps(doc), imported_by="cli:ops")
    run = other.get(a)
    assert run["started_by"] == "ada@example.com"  # the file's claim, kept as a claim
    assert run["imported_by"] == "cli:ops"
    assert datetime.fromisoformat(run["imported_at"]) >= before - timedelta(seconds=1)
    assert store.get(a)["imported_at"] is None  # made here
    frame = other.runs(with_config=False)
    assert list(frame["imported_by"]) == ["cli:ops"]


# --------------------------------------------------------------------------- issue 39
def _with_turn(doc: dict, **change) -> dict:
    turns = [dict(t) for t in doc["turns"]]
    turns[0].update(change)
    return {**doc, "turns": turns}


@pytest.mark.parametrize("change, why", [
    ({"model": "openai:gpt-4o", "simulated": False, "cost_usd": 5.0},
     "played by 'openai:gpt-4o', not by its seat's model 'simulated'"),
    ({"simulated": False, "cost_usd": 5.0}, "says simulated=false, but its model is"),
    ({"seat": "mallory", "model": "openai:gpt-4o", "simulated": False},
     "by seat 'mallory', which the run's configuration does not seat"),
], ids=["model", "flag", "seat"])
def test_a_turn_that_disagrees_with_its_seat_is_refused(pair, tmp_path, change, why):
    """An imported simulated run could carry real, priced turns ($15 for a simulated run)."""
    store, a, _ = pair
    doc = _with_turn(json.loads(store.export_run(a)), **change)
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    with pytest.raises(ConfigError, match=why):
        other.import_runs(json.dumps(doc))
    assert other.runs(with_config=False).empty


def test_a_simulated_seats_turn_costs_nothing_whatever_the_file_says(pair, tmp_path):
    store, a, _ = pair
    doc = json.loads(store.export_run(a))
    doc["turns"] = [{**t, "cost_usd": 5.0} for t in doc["turns"]]
    doc["cost_usd"] = 15.0
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    other.import_runs(json.dumps(doc))
    run = other.get(a)
    assert run["cost_usd"] == 0.0 and {t["cost_usd"] for t in run["turns"]} == {0.0}


def test_a_fork_of_an_imported_run_warns_and_its_kept_turns_say_so(tmp_path):
    from engine import run_society
    from engine.services import fork as forking
    here = Store(f"sqlite:///{tmp_path / 'here.db'}")
    run_id = run_society("What is 6 times 7?", agents=["simulated"] * 3, rounds=2,
                         store=here).run_id
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    other.import_runs(here.export_run(run_id), imported_by="cli:ops")
    heard: list[str] = []
    result = forking.fork(other, run_id, 2, warn=heard.append)
    assert len(heard) == 1 and "was imported (by cli:ops" in heard[0]
    kept = [t for t in result.turns if any("was imported" in w for w in t.warnings)]
    assert kept and all(t.round == 1 for t in kept)
    assert forking.plan(here.get(run_id), 2).warnings == ()  # a run made here: no warning
