"""The simulated model plays the persona panel: lures, persuasion, splits, honest-ish claims."""
import json
from collections import Counter

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from engine.protocols import metrics_of
from engine import run_panel, run_vote
from engine.protocols.personas import CAUTIOUS, CREATIVE, panel_seats
from engine.protocols.panel import TEMPLATES
from engine.questions import DEFINITE, DEMO, OPEN, QUESTION_SETS, lookup
from engine.simulated.ballots import json_reply
from engine.simulated import SimulatedChatModel, read_prompt
from engine.analysis.stances import normalize_stance

BAT = DEFINITE[0]
VC = OPEN[0]


def ask(system, user, seed=0):
    return json_reply(read_prompt([SystemMessage(content=system), HumanMessage(content=user)]),
                      seed)


def comparable(result):
    """A result without its timings, for reproducibility checks."""
    dump = result.model_dump(mode="json", exclude={"turns", "duration"})
    replies = [(t.index, t.phase, t.seat, t.reply) for t in result.turns]
    return dump, sorted(replies)


# --------------------------------------------------------------------------- the question bank
def test_question_bank_sizes_and_lookup():
    assert len(DEFINITE) >= 30 and len(OPEN) >= 20
    assert BAT.expected == "$0.05" and BAT.lures == ("$0.10",)
    assert "bootstrap" in VC.options and "venture capital" in VC.options
    assert set(QUESTION_SETS) >= {"definite", "open", "demo"} and DEMO[0] is BAT
    for q in DEFINITE + OPEN:
        assert lookup(q.text) is q
        assert lookup(q.text.upper() + "  ") is q
    for q in DEFINITE:
        assert q.lures and normalize_stance(q.expected)
        assert all(normalize_stance(lure) != normalize_stance(q.expected) for lure in q.lures)
    for q in OPEN:
        assert len({normalize_stance(o) for o in q.options}) == len(q.options) >= 2


# --------------------------------------------------------------------------- single replies
def test_phases_are_read_from_the_requested_keys():
    propose = TEMPLATES["propose"].text.replace("{question}", BAT.text)
    reply = ask(CAUTIOUS.prompt, propose)
    assert set(reply) == {"stance", "answer", "reasoning"} and reply["stance"]
    other = ask("", f"Question: {VC.text}\nReply in JSON: "
                    '{"flavour": "...", "dissenting_views": [...]}')
    assert set(other) == {"flavour", "dissenting_views"}
    judge = ask("", f"Question: {VC.text}\nReply in JSON: "
                    '{"agreement_level": "...", "dissenting_views": [...]}')
    assert judge["agreement_level"] in {"none", "weak", "moderate", "strong"}


def test_the_critic_flags_exactly_the_wrong_stances_on_a_definite_question():
    user = (TEMPLATES["critique"].text.replace("{question}", BAT.text)
            .replace("{proposals}", "[a] stance: $0.10\n[b] stance: 0.05\n[c] stance: .05"))
    reply = ask("You are the CRITIC.", user)
    assert [(a["persona"], a["verdict"]) for a in reply["assessments"]] == [
        ("a", "flawed"), ("b", "sound"), ("c", "sound")]
    assert reply["overall"]


def rebut(stance, verdict, seed, persona=CREATIVE.prompt, question=BAT.text, others=None):
    values = {"question": question, "debater": "x", "own_stance": stance,
              "own_answer": stance, "own_reasoning": "r", "verdict": verdict, "flaw": "f",
              "overall": "o", "others": others or "[y] stance: $0.05\n[z] stance: 0.05"}
    text = TEMPLATES["rebuttal"].text
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return ask(persona, text, seed)


def test_a_flawed_lure_is_usually_persuaded_and_a_sound_answer_usually_holds():
    persuaded = sum(normalize_stance(rebut("$0.10", "flawed", s)["stance"]) == "0.05"
                    for s in range(40))
    held = sum(normalize_stance(rebut("$0.05", "sound", s)["stance"]) == "0.05"
               for s in range(40))
    assert persuaded >= 30 and held >= 38


def test_claims_usually_but_not_always_match_the_measured_change():
    agree = disagree = 0
    for seed in range(60):
        reply = rebut("$0.10", "flawed", seed)
        moved = normalize_stance(reply["stance"]) != "0.1"
        agree += reply["changed_mind"] == moved
        disagree += reply["changed_mind"] != moved
    assert agree > disagree > 0


# --------------------------------------------------------------------------- whole panels
def test_bat_and_ball_converges_on_the_default_seed():
    result = run_panel(BAT.text, **panel_seats(), expected=BAT.expected)
    assert result.tally.winner == "0.05" and result.confidence.level == "high"
    assert result.correct is True and result.answer == "$0.05"
    assert result.warnings == [] and len(result.turns) == 8
    assert all(t.simulated for t in result.turns)


def test_bat_and_ball_typically_converges_across_seeds():
    winners = Counter(run_panel(BAT.text, **panel_seats(f"simulated?seed={s}")).tally.winner
                      for s in range(12))
    assert winners["0.05"] >= 10


def test_the_panel_is_reproducible_for_a_seed():
    for seed in (0, 5):
        a = run_panel(VC.text, **panel_seats(f"simulated?seed={seed}"))
        b = run_panel(VC.text, **panel_seats(SimulatedChatModel(seed=seed)))
        assert comparable(a) == comparable(b)


def test_seeds_change_the_open_panel():
    outcomes = {json.dumps(run_panel(VC.text, **panel_seats(f"simulated?seed={s}"))
                           .tally.model_dump(), sort_keys=True) for s in range(8)}
    assert len(outcomes) > 1


def test_open_questions_split_and_some_minds_change():
    results = [run_panel(q.text, **panel_seats()) for q in OPEN]
    assert all(r.warnings == [] for r in results)
    assert sum(len(r.mind_changes) for r in results) >= 5
    levels = Counter(r.confidence.level for r in results)
    assert levels["low"] >= 1 and levels["medium"] >= 1
    first_splits = sum(len(r.first_round.counts) > 1 for r in results)
    assert first_splits >= len(OPEN) // 2
    assert any(metrics_of(r)["changed_outcome"] for r in results)


def test_definite_questions_panel_beats_its_first_round_and_claims_sometimes_mislead():
    results = [run_panel(q.text, **panel_seats(), expected=q.expected) for q in DEFINITE]
    votes = [run_vote(q.text, voters=panel_seats()["debaters"], expected=q.expected)
             for q in DEFINITE]
    panel_right = sum(bool(r.correct) for r in results)
    vote_right = sum(bool(v.correct) for v in votes)
    assert panel_right > vote_right and panel_right >= 0.8 * len(DEFINITE)
    kinds = Counter(k for r in results for k in r.change_kinds.values())
    assert kinds["persuaded"] >= 5 and kinds["held"] > kinds["persuaded"]
    mismatches = sum(len(r.claim_mismatches()) for r in results)
    assert 0 < mismatches < sum(len(r.rebuttals) for r in results) * 0.25


@pytest.mark.parametrize("question", DEMO, ids=lambda q: q.text[:30])
def test_demo_questions_behave(question):
    result = run_panel(question.text, **panel_seats(), expected=question.expected)
    assert result.warnings == [] and result.answer
    if question.definite:
        assert result.correct is True
    else:
        assert result.tally.winner in {normalize_stance(o) for o in question.options}
