"""Human labels in the store (DESIGN section 4): preferences and ratings on every backend,
validated like every record, exported and imported with their runs, deleted with them."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import applied_migrations
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from engine import Store, run_debate
from engine.models import ConfigError
from engine.store.records import COMMENT_MAX


def _debate(store, question="Should we adopt the plan?", **kw):
    return run_debate(question, proponent="simulated", opponent="simulated",
                      judge="simulated", max_rounds=1, store=store, **kw).run_id


@pytest.fixture
def pair(backend):
    return backend, _debate(backend, label="one"), _debate(backend, label="two")


def test_preferences_and_ratings_are_stored_and_read_back(pair):
    store, a, b = pair
    pid = store.add_preference(a, b, rater="ana", choice="b", comment="clearer <b>plan</b>",
                               shown_left="b")
    store.add_preference(b, a, rater="bo", choice="tie")
    rid = store.add_rating(a, rater="ana", score=4, comment="good")
    store.add_rating(a, rater="ana", score=2, turn=1)
    prefs = store.preferences()
    assert list(prefs.columns) == ["id", "run_a", "run_b", "shown_left", "rater", "choice",
                                   "comment", "created_at", "imported_by", "imported_at"]
    assert set(prefs["imported_by"]) == {""} and prefs["imported_at"].isna().all()
    first = prefs.iloc[0]
    assert (first["id"], first["run_a"], first["run_b"], first["shown_left"], first["choice"],
            first["comment"]) == (pid, a, b, "b", "b", "clearer <b>plan</b>")
    assert prefs.iloc[1]["shown_left"] is None and prefs.iloc[1]["choice"] == "tie"
    assert first["created_at"].startswith("20")  # an ISO time, timezone-aware
    assert "+00:00" in first["created_at"]
    ratings = store.ratings()
    assert list(ratings["id"])[0] == rid
    assert list(ratings["score"]) == [4, 2]
    assert ratings["turn"].isna().tolist() == [True, False] and ratings["turn"].iloc[1] == 1
    assert list(store.preferences(rater="bo")["choice"]) == ["tie"]
    assert len(store.ratings(run_ids=[b])) == 0 and len(store.ratings(run_ids=[a])) == 2
    assert "0015_labels" in applied_migrations(store)


@pytest.mark.parametrize("change, why", [
    ({"choice": "A"}, "choice"),
    ({"choice": "both"}, "choice"),
    ({"rater": ""}, "rater"),
    ({"rater": "   "}, "rater"),
    ({"rater": "x" * 201}, "rater"),
    ({"comment": "x" * (COMMENT_MAX + 1)}, "comment"),
    ({"comment": 5}, "comment"),
    ({"shown_left": "left"}, "shown_left"),
])
def test_a_bad_preference_is_refused(pair, change, why):
    store, a, b = pair
    values = {"rater": "ana", "choice": "a", **change}
    with pytest.raises(ConfigError, match=why):
        store.add_preference(a, b, **values)
    assert store.preferences().empty


def test_a_preference_needs_two_stored_runs(pair):
    store, a, _ = pair
    with pytest.raises(ConfigError, match="no run 'nope' is stored"):
        store.add_preference(a, "nope", rater="ana", choice="a")
    with pytest.raises(ConfigError, match="two different runs"):
        store.add_preference(a, a, rater="ana", choice="a")
    with pytest.raises(ConfigError, match="run_b"):
        store.add_preference(a, "'; DROP TABLE runs; --", rater="ana", choice="a")
    assert store.preferences().empty and len(store.runs()) == 2


@pytest.mark.parametrize("change, why", [
    ({"score": 0}, "score"), ({"score": 6}, "score"), ({"score": 3.5}, "score"),
    ({"score": "4"}, "score"), ({"score": True}, "score"), ({"turn": -1}, "turn"),
    ({"comment": "x" * (COMMENT_MAX + 1)}, "comment"), ({"rater": "\u200b\t"}, "rater"),
])
def test_a_bad_rating_is_refused(pair, change, why):
    store, a, _ = pair
    with pytest.raises(ConfigError, match=why):
        store.add_rating(a, **{"rater": "ana", "score": 3, **change})
    assert store.ratings().empty


def test_a_rating_needs_its_run_and_turn(pair):
    store, a, _ = pair
    turns = len(store.get(a)["turns"])
    with pytest.raises(ConfigError, match="no run 'gone' is stored"):
        store.add_rating("gone", rater="ana", score=3)
    with pytest.raises(ConfigError, match=f"has no turn {turns}"):
        store.add_rating(a, rater="ana", score=3, turn=turns)
    store.add_rating(a, rater="ana", score=3, turn=turns - 1)
    assert list(store.ratings()["turn"]) == [turns - 1]


def test_comments_are_kept_as_text(pair):
    store, a, b = pair
    hostile = "<script>alert(1)</script> **bold** \x00 \ud800 end"
    store.add_preference(a, b, rater="ana", choice="a", comment=hostile)
    store.add_rating(a, rater="ana", score=1, comment=hostile)
    kept = store.preferences()["comment"].iloc[0]
    assert kept.startswith("<script>alert(1)</script> **bold**") and "\x00" not in kept
    assert store.ratings()["comment"].iloc[0] == kept


def test_deleting_a_run_deletes_its_labels(pair):
    store, a, b = pair
    c = _debate(store, label="three")
    store.add_preference(a, b, rater="ana", choice="a")
    store.add_preference(b, c, rater="ana", choice="b")
    store.add_rating(a, rater="ana", score=5)
    store.add_rating(c, rater="ana", score=1, turn=0)
    store.delete([a])
    assert list(store.preferences()["run_a"]) == [b]  # b-c stays, a-b is gone
    assert list(store.ratings()["run_id"]) == [c]
    store.delete([c])
    assert store.preferences().empty and store.ratings().empty


def test_the_database_cascades_too(pair):
    """A run deleted by hand in SQL (not through `Store.delete`) takes its labels with it."""
    store, a, b = pair
    store.add_preference(a, b, rater="ana", choice="a")
    store.add_rating(b, rater="ana", score=5)
    with store.engine.begin() as connection:
        connection.execute(text("DELETE FROM turns"))
        connection.execute(text("DELETE FROM runs WHERE id = :id"), {"id": b})
    assert store.preferences().empty and store.ratings().empty


def test_labels_travel_with_their_runs(pair, tmp_path):
    store, a, b = pair
    store.add_preference(a, b, rater="ana", choice="b", comment="b is shorter",
                         shown_left="a")
    store.add_rating(a, rater="ana", score=2, turn=0, comment="weak opening")
    store.add_rating(b, rater="bo", score=5)
    exported = json.loads(store.export_run(a))
    assert [p["choice"] for p in exported["preferences"]] == ["b"]
    assert [r["score"] for r in exported["ratings"]] == [2]
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    dump = store.export_jsonl([a, b])
    assert sorted(other.import_runs(dump)) == sorted([a, b])
    marks = ["created_at", "imported_by", "imported_at"]
    for frame in ("preferences", "ratings"):
        theirs = getattr(other, frame)().drop(columns=marks)
        ours = getattr(store, frame)().drop(columns=marks)
        assert theirs.equals(ours), frame
        assert getattr(other, frame)()["imported_at"].notna().all()  # marked as imported
    assert list(other.preferences()["created_at"]) == list(store.preferences()["created_at"])
    # a second import adds nothing, and a label added since does not ride in on a run that
    # is already stored: an import writes labels onto the runs it adds only
    other.import_runs(dump)
    assert len(other.preferences()) == 1 and len(other.ratings()) == 2
    store.add_rating(b, rater="cy", score=3)
    other.import_runs(store.export_jsonl([b]))
    assert sorted(other.ratings()["rater"]) == ["ana", "bo"]


def test_a_label_for_a_run_not_in_the_import_is_refused(pair, tmp_path):
    store, a, b = pair
    store.add_preference(a, b, rater="ana", choice="a")
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    with pytest.raises(ConfigError, match=f"names run '{b}', which is neither in the file"):
        other.import_runs(store.export_run(a))
    assert other.runs().empty and other.preferences().empty  # nothing of the file
    bare_b = {**json.loads(store.export_run(b)), "preferences": []}
    other.import_runs(json.dumps(bare_b))  # once b is stored, a's export imports
    assert other.preferences().empty
    assert other.import_runs(store.export_run(a)) == [a]
    assert other.preferences().empty  # it names b, which this file did not add


@pytest.mark.parametrize("forge, why", [
    (lambda doc: doc["ratings"].append({**doc["ratings"][0], "id": "r2", "run_id": "zzz"}),
     "not the run it is filed with"),
    (lambda doc: doc["preferences"].append({**doc["preferences"][0], "id": "p2",
                                            "run_a": "x", "run_b": "y"}),
     "not the run it is filed with"),
    (lambda doc: doc["preferences"].append({**doc["preferences"][0], "id": "p3",
                                            "run_b": doc["id"]}), "with itself"),
    (lambda doc: doc["ratings"].__setitem__(0, {**doc["ratings"][0], "score": 9}),
     "ratings.0.score"),
    (lambda doc: doc["ratings"].__setitem__(0, {**doc["ratings"][0], "turn": 999}),
     "which run .* lacks"),
    (lambda doc: doc["preferences"].__setitem__(0, {**doc["preferences"][0],
                                                    "choice": "left"}), "choice"),
    (lambda doc: doc.__setitem__("ratings", "all good"), "ratings"),
])
def test_a_forged_label_refuses_the_whole_import(pair, tmp_path, forge, why):
    store, a, b = pair
    store.add_preference(a, b, rater="ana", choice="a")
    store.add_rating(a, rater="ana", score=3, turn=0)
    docs = [json.loads(store.export_run(b)), json.loads(store.export_run(a))]
    forge(docs[1])
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    with pytest.raises(ConfigError, match=why):
        other.import_runs("".join(json.dumps(d) + "\n" for d in docs))
    assert other.runs().empty and other.preferences().empty and other.ratings().empty


def test_a_database_before_labels_gains_them(backend):
    a, b = _debate(backend), _debate(backend)
    with backend.engine.begin() as connection:  # as 0014 left it (0018 adds to runs too)
        connection.execute(text("DROP TABLE preferences"))
        connection.execute(text("DROP TABLE ratings"))
        for column in ("imported_by", "imported_at"):
            connection.execute(text(f"ALTER TABLE runs DROP COLUMN {column}"))
        connection.execute(text("DELETE FROM schema_migrations WHERE name IN "
                                "('0015_labels', '0018_one_judgement')"))
    backend.engine.dispose()
    reopened = Store(backend.url)
    assert "0015_labels" in applied_migrations(reopened)
    reopened.add_preference(a, b, rater="ana", choice="tie")
    assert len(reopened.preferences()) == 1 and reopened.migrate() == []


_LABEL_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-10, 10),
                         st.floats(allow_nan=True), st.text(max_size=30),
                         st.lists(st.integers(), max_size=2),
                         st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))
_FIELDS = ["id", "run_a", "run_b", "run_id", "turn", "rater", "choice", "score", "comment",
           "shown_left", "created_at"]


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["preferences", "ratings"]),
       changes=st.dictionaries(st.sampled_from(_FIELDS), _LABEL_VALUE, max_size=4))
def test_fuzzed_imported_labels_are_refused_or_stored_sound(tmp_path_factory, kind, changes):
    """Any label record an import may carry is refused with a `ConfigError` (nothing
    written) or stored as one that reads back valid."""
    folder = tmp_path_factory.mktemp("fuzz")
    source = Store(f"sqlite:///{folder / 'a.db'}")
    a, b = _debate(source), _debate(source)
    source.add_preference(a, b, rater="ana", choice="a", shown_left="b")
    source.add_rating(a, rater="ana", score=3, turn=0)
    docs = [json.loads(source.export_run(b)), json.loads(source.export_run(a))]
    label = docs[1][kind][0]
    label.update(changes)
    target = Store(f"sqlite:///{folder / 'b.db'}")
    try:
        target.import_runs("".join(json.dumps(d) + "\n" for d in docs))
    except ConfigError as exc:
        assert "nothing was imported" in str(exc)
        assert target.runs().empty and target.preferences().empty and target.ratings().empty
        return
    prefs, ratings = target.preferences(), target.ratings()
    assert set(prefs["choice"]) <= {"a", "b", "tie"}
    assert set(prefs["shown_left"].dropna()) <= {"a", "b"}
    assert all(1 <= s <= 5 for s in ratings["score"])
    runs = set(target.runs()["id"])
    assert set(prefs["run_a"]) | set(prefs["run_b"]) | set(ratings["run_id"]) <= runs
    assert all(x != y for x, y in zip(prefs["run_a"], prefs["run_b"], strict=True))
    for turn, run in zip(ratings["turn"], ratings["run_id"], strict=True):
        if not pd.isna(turn):
            assert turn in {t["idx"] for t in target.get(run)["turns"]}


def test_only_an_analyst_or_above_labels_and_a_refusal_stores_nothing(store):
    from engine.access import Actor, NotAllowed, Role
    a, b = _debate(store), _debate(store)
    for who in (Actor("vera@example.com", Role.VIEWER), Actor("nemo@else.net", None)):
        with pytest.raises(NotAllowed):
            store.add_preference(a, b, rater=who.user, choice="a", actor=who)
        with pytest.raises(NotAllowed):
            store.add_rating(a, rater=who.user, score=4, actor=who)
    assert store.preferences().empty and store.ratings().empty
    analyst = Actor("ann@example.com", Role.ANALYST)
    store.add_preference(a, b, rater=analyst.user, choice="tie", actor=analyst)
    store.add_rating(b, rater=analyst.user, score=2, actor=analyst)
    assert list(store.preferences()["rater"]) == ["ann@example.com"]
    assert list(store.ratings()["score"]) == [2]
