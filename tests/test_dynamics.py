"""Dynamics over rounds (DESIGN 2.12, engine/analysis/rounds_dynamics.py) on scripted rounds
with every measure worked out by hand, Hypothesis properties over random rounds, and the
rounds of stored runs (the registry's `answers_by_round` hook)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from apptest_helpers import plain
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from engine import Seat, Store, run_roundtable, run_single, run_society, run_vote
from engine.analysis import Dynamics, Flip, dynamics, influence, normalize_stance
from engine.protocols import REGISTRY, stored_rounds
from engine.protocols.panel import run_panel
from engine.protocols.society import read_answer


def test_the_package_name_gives_the_function():
    assert callable(dynamics) and callable(influence)
    assert isinstance(dynamics([{"a": "1"}]), Dynamics)


def test_entropy_in_bits_is_exact():
    got = dynamics([{"a": "yes", "b": "no"},                       # 1 bit
                    {"a": "1", "b": "2", "c": "3", "d": "4"},      # 2 bits
                    {"a": "x", "b": "x"}])                         # 0 bits
    assert got.entropy == [1.0, 2.0, 0.0]
    assert math.copysign(1.0, got.entropy[2]) == 1.0  # never -0.0
    three = dynamics([{"a": "1", "b": "1", "c": "2"}]).entropy[0]
    assert three == pytest.approx(-(2 / 3) * math.log2(2 / 3) - (1 / 3) * math.log2(1 / 3))


def test_agreement_and_inflation():
    got = dynamics([{"a": "1", "b": "2", "c": "3", "d": "1"},
                    {"a": "1", "b": "1", "c": "3", "d": "1"},
                    {"a": "1", "b": "1", "c": "1", "d": "1"}])
    assert got.agreement == [0.5, 0.75, 1.0]
    assert got.inflation == 0.5
    assert got.answered == [4, 4, 4]


def test_flips_with_one_based_rounds_of_the_new_answer():
    got = dynamics([{"a": "1", "b": "2"}, {"a": "2", "b": "2"}, {"a": "2", "b": "1"}])
    assert got.flips == [Flip("a", 2, "1", "2"), Flip("b", 3, "2", "1")]
    assert got.flips[0] == ("a", 2, "1", "2")  # a plain tuple too
    assert got.fixes is None and got.breaks is None and got.collapsed_wrong is None


def test_fixes_and_breaks_against_expected():
    rounds = [{"a": "1", "b": "2", "c": "3"},
              {"a": "2", "b": "1", "c": "4"},    # a breaks, b fixes, c wrong->wrong
              {"a": "1", "b": "1", "c": "1"}]    # a fixes, c fixes
    got = dynamics(rounds, expected="1")
    assert got.fixes == [Flip("b", 2, "2", "1"), Flip("a", 3, "2", "1"),
                         Flip("c", 3, "4", "1")]
    assert got.breaks == [Flip("a", 2, "1", "2")]
    assert len(got.flips) == 5
    assert got.collapsed_wrong is False


def test_expected_is_scored_with_the_project_rule():
    # answers_match: "$18" meets "18", "The answer is 18." meets "18"
    got = dynamics([{"a": "17", "b": "$18"}, {"a": "The answer is 18.", "b": "17"}],
                   expected="18.00")
    assert [f.agent for f in got.fixes or []] == ["a"]
    assert [f.agent for f in got.breaks or []] == ["b"]


def test_silent_agreement_and_collapsed_wrong():
    both = dynamics([{"a": "no", "b": "No."}, {"a": "no", "b": "no"}], expected="yes")
    assert both.silent_agreement is True and both.collapsed_wrong is True
    right = dynamics([{"a": "yes", "b": "no"}, {"a": "yes", "b": "yes"}], expected="yes")
    assert right.silent_agreement is False and right.collapsed_wrong is False
    split = dynamics([{"a": "no", "b": "maybe"}], expected="yes")
    assert split.collapsed_wrong is False
    # a lone agent is never in agreement; an abstention rules unanimity out
    assert dynamics([{"a": "no"}], expected="yes").silent_agreement is False
    assert dynamics([{"a": "no"}], expected="yes").collapsed_wrong is False
    abstained = dynamics([{"a": "no", "b": "no", "c": None}], expected="yes")
    assert abstained.silent_agreement is False and abstained.collapsed_wrong is False
    # a blank expected answer scores nothing
    assert dynamics([{"a": "no", "b": "no"}], expected="  ").collapsed_wrong is None


def test_abstentions_are_left_out_and_never_flip():
    got = dynamics([{"a": "1", "b": None, "c": "2"},
                    {"a": None, "b": "2", "c": "  "},
                    {"a": "2", "b": "2", "c": "2"},
                    {"a": None, "b": None, "c": None}])
    assert got.answered == [2, 1, 3, 0]
    assert got.entropy == [1.0, 0.0, 0.0, 0.0]
    assert got.agreement == [0.5, 1.0, 1.0, 0.0]  # nobody answered: 0.0, as Tally.ratio
    assert got.flips == []  # answer -> abstain -> answer compares nothing
    assert got.inflation == -0.5


def test_answers_are_compared_after_normalisation():
    got = dynamics([{"a": "Yes.", "b": "$0.05"}, {"a": "yes", "b": ".05"}])
    assert got.flips == []
    assert got.entropy == [1.0, 1.0]
    assert dynamics([{"a": "Yes.", "b": "**yes**"}]).silent_agreement is True
    assert dynamics([{"a": "yes"}, {"a": "No!"}]).flips == [Flip("a", 2, "yes", "no")]


def test_no_rounds():
    got = dynamics([], expected="1")
    assert got == Dynamics(entropy=[], agreement=[], answered=[], inflation=0.0, flips=[],
                           fixes=[], breaks=[], silent_agreement=False, collapsed_wrong=False)
    assert influence([]) == {}


def test_influence_credits_every_mover():
    rounds = [{"a": "1", "b": "1", "c": "2", "d": "3"},
              {"a": "1", "b": "1", "c": "1", "d": "4"},   # c moves to a's and b's answer
              {"a": "1", "b": "1", "c": "1", "d": "1"}]   # d moves to a's, b's and c's
    assert influence(rounds) == {("a", "c"): 1, ("b", "c"): 1,
                                 ("a", "d"): 1, ("b", "d"): 1, ("c", "d"): 1}


def test_influence_reads_the_round_before_only_and_counts_repeats():
    rounds = [{"a": "1", "b": "2"}, {"a": "2", "b": "1"}, {"a": "1", "b": "2"}]
    # round 2: a -> 2 (b held 2), b -> 1 (a held 1); round 3 the same again
    assert influence(rounds) == {("b", "a"): 2, ("a", "b"): 2}
    # d moved to 4, which nobody held: no credit
    assert influence([{"a": "1", "d": "3"}, {"a": "1", "d": "4"}]) == {}


def test_model_dump_is_plain():
    dump = dynamics([{"a": "1", "b": "2"}, {"a": "2", "b": "2"}], expected="2").model_dump()
    assert dump["flips"] == [("a", 2, "1", "2")] and dump["fixes"] == [("a", 2, "1", "2")]
    assert dump["silent_agreement"] is False and dump["collapsed_wrong"] is False


# --------------------------------------------------------------------------- properties
_answer = st.one_of(st.none(), st.sampled_from(["1", "2", "3", "Yes", "yes.", "no", ""]))
_rounds = st.lists(st.dictionaries(st.sampled_from("abcde"), _answer, min_size=1),
                   min_size=1, max_size=5)


@settings(max_examples=200, deadline=None)
@given(_rounds, st.sampled_from([None, "1", "yes"]))
def test_properties(rounds, expected):
    got = dynamics(rounds, expected)
    for bits, share, n in zip(got.entropy, got.agreement, got.answered, strict=True):
        if n:
            assert 0.0 <= bits <= math.log2(n) + 1e-9
            assert 0.0 < share <= 1.0
        else:
            assert bits == 0.0 and share == 0.0
    if expected is not None:
        assert got.fixes is not None and got.breaks is not None
        assert len(got.fixes) + len(got.breaks) <= len(got.flips)
    for flip in got.flips:
        assert 2 <= flip.round <= len(rounds) and flip.before != flip.after


@settings(max_examples=200, deadline=None)
@given(_rounds)
def test_influence_covers_every_flip_to_a_held_answer(rounds):
    got = dynamics(rounds)
    credits = influence(rounds)
    moved_to_held = [f for f in got.flips if f.after in _held(rounds[f.round - 2], f.agent)]
    assert sum(credits.values()) >= len(moved_to_held)
    assert all(n > 0 and mover != moved for (mover, moved), n in credits.items())
    assert sum(credits.values()) <= len(got.flips) * max(len(r) for r in rounds)


def _held(answers, agent):
    """The normalised answers other agents gave in a round."""
    return {normalize_stance(v) for k, v in answers.items()
            if k != agent and v is not None and normalize_stance(v)}


# --------------------------------------------------------------------------- rounds of a run
@pytest.fixture
def db(tmp_path):
    return Store(f"sqlite:///{tmp_path / 'parley.db'}")


def test_a_stored_society_runs_rounds_match_its_turns(db):
    seats = ["simulated?seed=1", "simulated?skill=0.3&seed=2", "simulated?skill=0.2&seed=3"]
    result = run_society("What is 17 * 3?", agents=seats, rounds=3, store=db, expected="51")
    run = db.get(result.run_id)
    rounds = stored_rounds(run)
    assert rounds == REGISTRY[result.protocol].answers_by_round(result)
    assert rounds is not None and len(rounds) == 3
    for turn in run["turns"]:
        assert rounds[turn["round"] - 1][turn["seat"]] == (read_answer(turn["reply"]) or None)
    assert sorted(len(r) for r in rounds) == [3, 3, 3]
    # the mind changes the society reports are the flips dynamics finds
    got = dynamics(rounds, "51")
    assert [(f.agent, f.round, f.before, f.after) for f in got.flips] == [
        (m.agent, m.round, m.before, m.after) for m in result.mind_changes]


def test_every_protocol_with_rounds_of_answers_gives_them(db):
    single = run_single("What is 2+2?", agent="simulated", rounds=3, store=db)
    assert stored_rounds(db.get(single.run_id)) == [
        {"agent": r.answer or None} for r in single.replies]
    panel = run_panel("What is 2+2?", debaters=["simulated"] * 3, critic="simulated",
                      judge="simulated", store=db)
    rounds = stored_rounds(db.get(panel.run_id))
    assert rounds is not None and len(rounds) == 2
    assert rounds[0] == {p.persona: p.stance for p in panel.proposals}
    assert rounds[1] == {r.persona: r.stance for r in panel.rebuttals}
    table = run_roundtable("What is 2+2?", agents=["simulated"] * 2, rounds=2, store=db)
    rounds = stored_rounds(db.get(table.run_id))
    assert rounds is not None and len(rounds) == 2
    assert [e.stance for e in table.exchanges] == [s for r in rounds for s in r.values()]
    vote = run_vote("What is 2+2?", voters=["simulated"] * 3, store=db)
    assert stored_rounds(db.get(vote.run_id)) is None  # one round: nothing to follow
    assert REGISTRY["vote"].answers_by_round is None
    named = [name for name, spec in REGISTRY.items() if spec.answers_by_round is not None]
    assert sorted(named) == ["council", "duel", "panel", "roundtable", "single", "society"]


def test_a_duels_rounds_are_the_answers_its_turns_declare(db, recording_model):
    """A duel's turns are prose: only an ANSWER / STANCE line of its own or a \\boxed{} is read
    (round k: each side's k-th turn), and a duel that declares nothing has no rounds."""
    from engine.protocols.duel import declared_answer, run_duel
    assert declared_answer("I think the answer is complicated, and 51 people agree.") is None
    assert declared_answer("Rebuttal.\n**ANSWER:** 51") == "51"
    assert declared_answer("Fine.\nStance: No") == "no"
    assert declared_answer("so \\boxed{17}") == "17"
    optimist = recording_model(["Yes, clearly.\nANSWER: yes", "Still yes.\nANSWER: yes",
                                "You convinced me.\nANSWER: no"])
    skeptic = recording_model(["I doubt it, 42 times over.", "Not at all.\nANSWER: no",
                               "Settled.\nANSWER: no"])
    result = run_duel("Is it safe?", a=Seat("opt", optimist), b=Seat("sk", skeptic),
                      rounds=3, store=db)
    assert REGISTRY[result.protocol].answers_by_round(result) == [{"opt": "yes", "sk": None},
                                         {"opt": "yes", "sk": "no"},
                                         {"opt": "no", "sk": "no"}]
    run = db.get(result.run_id)
    assert stored_rounds(run) == REGISTRY[result.protocol].answers_by_round(result)
    assert run["metrics"]["round_votes"] == [{"yes": 1}, {"no": 1, "yes": 1}, {"no": 2}]
    got = dynamics(stored_rounds(run))
    assert [(f.agent, f.round, f.before, f.after) for f in got.flips] == [
        ("opt", 3, "yes", "no")]
    assert got.agreement == [1.0, 0.5, 1.0] and got.inflation == 0.0
    assert influence(stored_rounds(run)) == {("sk", "opt"): 1}
    prose = run_duel("Is it safe?", a=Seat("opt", recording_model(["The answer is yes."])),
                     b=Seat("sk", recording_model(["No."])), rounds=2, store=db)
    assert REGISTRY["duel"].answers_by_round(prose) == [] and db.get(prose.run_id)["metrics"][
        "round_votes"] == []


def test_a_stored_run_without_a_readable_result_has_no_rounds():
    assert stored_rounds({"protocol": "society", "result": None}) is None
    assert stored_rounds({"protocol": "society", "result": {"rounds": "garbage"}}) is None
    assert stored_rounds({"protocol": "nope"}) is None


# --------------------------------------------------------------------------- the run detail
PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "runs.py")
HOSTILE = "<b>bold</b> **x**"


def test_the_run_detail_shows_the_dynamics_strip(tmp_path, monkeypatch, recording_model):
    url = f"sqlite:///{tmp_path / 'page.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)  # the page's store is cached per URL
    db = Store(url)
    agents = [recording_model(["\\boxed{15}", "\\boxed{15}"]),
              recording_model(["\\boxed{30}", "\\boxed{15}"]),
              recording_model(["\\boxed{15}", "Answer: " + HOSTILE])]
    result = run_society("What is 3+4*5+6-7*2?", agents=[
        Seat(f"a{i}", m) for i, m in enumerate(agents)], rounds=2, store=db, expected="15")
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.query_params["run"] = result.run_id
    at.run()
    assert not at.exception, at.exception
    assert "Dynamics" in [h.value for h in at.subheader]
    text = "\n".join(plain(str(e.value)) for e in at.markdown)
    assert "1 fix(es), 1 break(s)" in text and "2 flip(s)" in text
    assert "Agreement inflation (last round minus first): +0.00." in text
    flips = next(d.value for d in at.dataframe if "effect" in d.value.columns)
    assert list(flips["agent"]) == ["a1", "a2"] and list(flips["effect"]) == ["fix", "break"]
    assert list(flips["round"]) == [2, 2]
    assert any("<b>" in str(v) for v in flips["after"])  # model text kept as text, not HTML
    assert any("Entropy and agreement by round" in c.proto.spec
               for c in at.get("plotly_chart"))
    # a protocol without rounds of answers shows no strip
    vote = run_vote("What is 2+2?", voters=["simulated"] * 3, store=db)
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.query_params["run"] = vote.run_id
    at.run()
    assert not at.exception and "Dynamics" not in [h.value for h in at.subheader]
