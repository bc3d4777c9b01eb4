"""Issue 10: a poisoned reply degrades one turn, parsing is bounded and reads the reply's own
structure, and a hung synchronous model is abandoned at the per-call timeout."""
from __future__ import annotations

import json
import threading
import time

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from engine import (
    Seat,
    Store,
    run_debate,
    run_duel,
    run_panel,
    run_peer_review,
    run_roundtable,
    run_vote,
)
from engine.analysis import parse_sections
from engine.analysis.stances import normalize_stance
from engine.llm.replies import MAX_DEPTH, MAX_REPLY_CHARS, extract_json
from engine.protocols.roundtable import parse_stance
from engine.protocols.tallying import text_value

BUDGET = 5.0  # seconds: generous on a loaded 2-core machine; each case here was 18 s to hours

POISON = {
    "JSON nested 5,000 deep": '{"stance": ' + "[" * 5000 + "]" * 5000 + "}",
    "an integer past the digit limit": '{"stance": ' + "7" * 5000 + "}",
    "a lone surrogate": '{"stance": "4\\ud800", "answer": "4"} \ud800',
    "a NUL byte": '{"stance": "4\\u0000", "answer": "4"}\x00',
    "16 KB of {": "{" * 16_000,
    "a stance nested 60 lists deep": '{"stance": ' + '["x", ' * 60 + "1" + "]" * 60 + "}",
    "NaN and 1e999": '{"stance": NaN, "answer": 1e999}',
}


def _timed(call):
    started = time.perf_counter()
    value = call()
    assert time.perf_counter() - started < BUDGET
    return value


def _poisoned(recording_model, text):
    return recording_model(fn=lambda convo: text)


# ------------------------------------------------------------------ one reply, one turn
@pytest.mark.parametrize("name", list(POISON))
def test_one_reply_fails_a_whole_run_no_more_each_protocol_completes(name, recording_model,
                                                                   store):
    poison = _poisoned(recording_model, POISON[name])
    runs = {
        "vote": lambda: run_vote("2+2?", voters=[Seat("a"), Seat("b"), Seat("bad", poison)],
                                 store=store),
        "panel": lambda: run_panel("2+2?", debaters=[Seat("a"), Seat("b"), Seat("bad", poison)],
                                   critic=poison, judge="simulated", store=store),
        "roundtable": lambda: run_roundtable("2+2?", agents=[Seat("a"), Seat("bad", poison)],
                                             judge=poison, store=store),
        "debate": lambda: run_debate("2+2?", proponent="simulated", opponent=poison,
                                     judge=poison, max_rounds=1, store=store),
        "peer-review": lambda: run_peer_review("2+2?", producer="simulated", reviewer=poison,
                                               max_iterations=1, store=store),
        "duel": lambda: run_duel("2+2?", a=Seat("a"), b=Seat("bad", poison), rounds=1,
                                 store=store),
    }
    for protocol, run in runs.items():
        result = _timed(run)
        row = store.get(result.run_id)
        assert row["status"] == "completed", (protocol, row.get("error"))
        stored = store.turns(result.run_id)
        assert len(stored) == len(result.turns)
        for turn in result.turns:  # what is kept is storable on SQLite and PostgreSQL alike
            assert "\x00" not in turn.reply and "\ud800" not in turn.reply
            assert "\ud800" not in json.dumps(turn.parsed, ensure_ascii=False, default=str)
        bad = [t for t in result.turns if t.seat in ("bad", "critic", "judge", "opponent",
                                                     "reviewer") and t.model != "simulated"]
        assert bad, protocol


def test_a_poisoned_voter_abstains_with_the_reason_on_its_turn(recording_model, store):
    poison = _poisoned(recording_model, POISON["JSON nested 5,000 deep"])
    result = run_vote("2+2?", voters=[Seat("a"), Seat("b"), Seat("bad", poison)], store=store)
    assert result.tally.abstentions == ["bad"]
    last = [t for t in result.turns if t.seat == "bad"][-1]
    assert last.status == "degraded" and f"deeper than {MAX_DEPTH}" in last.error
    huge = _poisoned(recording_model, POISON["an integer past the digit limit"])
    result = run_vote("2+2?", voters=[Seat("a"), Seat("b"), Seat("bad", huge)], store=store)
    assert "digit" in [t for t in result.turns if t.seat == "bad"][-1].error


def test_surrogates_and_nul_in_a_reply_are_stored_as_replacement_characters(recording_model,
                                                                          store):
    poison = _poisoned(recording_model, "4\ud800 and\x00 more")
    result = run_duel("2+2?", a=Seat("a"), b=Seat("bad", poison), rounds=1, store=store)
    assert result.status == "finished"
    assert result.transcript[-1][1] == "4\ufffd and\ufffd more"
    assert store.get(result.run_id)["status"] == "completed"


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request, tmp_path):
    """A fresh store on SQLite, and on PostgreSQL when PARLEY_TEST_PG_URL names a server."""
    if request.param == "sqlite":
        return Store(f"sqlite:///{tmp_path / 'parley.db'}")
    from conftest import fresh_pg_url
    return Store(fresh_pg_url())


def test_a_nul_or_lone_surrogate_reply_is_stored_alike_on_every_backend(backend,
                                                                        recording_model):
    poison = _poisoned(recording_model, "4\x00 \ud800")
    duel = run_duel("2+2?", a=Seat("a"), b=Seat("bad", poison), rounds=1, store=backend)
    stored = backend.get(duel.run_id)
    assert stored["status"] == "completed"
    assert stored["turns"][-1]["reply"] == "4\ufffd \ufffd"
    voter = _poisoned(recording_model, '{"stance": "4\\u0000\\ud800", "answer": "4"}')
    vote = run_vote("2+2?", voters=[Seat("a"), Seat("b"), Seat("bad", voter)], store=backend)
    assert backend.get(vote.run_id)["status"] == "completed"
    assert vote.tally.ballots["bad"] == "4\ufffd\ufffd"


def test_a_parser_that_raises_degrades_only_its_turn(recording_model, store, monkeypatch):
    from engine.protocols import debate, peer_review, roundtable, tallying

    def broken(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(debate, "parse_sections", broken)
    result = run_debate("q", proponent="simulated", opponent="simulated", judge="simulated",
                        max_rounds=1, store=store)
    judge = result.turns[-1]
    assert judge.status == "degraded" and "could not be read: RecursionError" in judge.error
    assert result.verdict.startswith("Unable to reach verdict due to error: the reply could")
    assert store.get(result.run_id)["status"] == "completed"

    monkeypatch.setattr(peer_review, "is_approved", broken)
    result = run_peer_review("q", producer="simulated", reviewer="simulated",
                             max_iterations=1, store=store)
    assert result.iterations[0].feedback.startswith("Review unavailable: the reply could")

    monkeypatch.setattr(tallying, "normalize_stance", lambda text: broken() if "bad" in str(
        text) else str(text))
    liar = recording_model(fn=lambda convo: '{"stance": "bad", "answer": "x"}')
    result = run_vote("q", voters=[Seat("a"), Seat("b"), Seat("liar", liar)], store=store)
    assert "liar" in result.tally.abstentions
    assert store.get(result.run_id)["status"] == "completed"

    monkeypatch.setattr(roundtable, "_reading", broken)
    result = run_roundtable("q", agents=[Seat("a"), Seat("b")], judge="simulated", store=store)
    assert result.judge_status == "degraded" and result.turns[-1].status == "degraded"

    result = run_duel("q", a=Seat("a"), b=Seat("b"), rounds=2, converge=broken, store=store)
    assert len(result.transcript) == 4 and result.turns[1].status == "degraded"


# ------------------------------------------------------------------ bounded parsing
@pytest.mark.parametrize("text", [
    "{" * 16_000, "{" * MAX_REPLY_CHARS, "[" * 100_000 + "]" * 100_000, "{}" * 100_000,
    "[1]" * 66_000, '"{' * 100_000, "{" + '{"a": 1} x ' * 18_000 + "}", "{" * 1_000_000,
], ids=["16KB{", "200K{", "deep", "pairs", "lists", "quotes", "nested-invalid", "1MB{"])
def test_tolerant_json_extraction_is_linear_and_bounded(text):
    obj, why = _timed(lambda: extract_json(text))
    assert obj is None or isinstance(obj, dict)
    assert obj is not None or why


def test_json_replies_past_the_size_cap_are_refused_with_the_reason():
    obj, why = extract_json('{"stance": "4"}' + " " * MAX_REPLY_CHARS)
    assert obj is None and f"{MAX_REPLY_CHARS:,}" in why


@pytest.mark.parametrize("text", [
    "VERDICT:\n" * 111_112, "VERDICT: x\nCONFIDENCE: 1.0\n" * 40_000, "#" * 1_000_000,
    "1" + " " * 1_000_000, ("1" + "\n" * 1000) * 1000, "**VERDICT**" * 90_000,
], ids=["1MB-VERDICT", "blocks", "hashes", "digit-spaces", "digit-lines", "emphasis"])
def test_section_parsing_of_a_megabyte_is_fast(text):
    sections = _timed(lambda: parse_sections(text, ("VERDICT", "REASONING", "CONFIDENCE")))
    assert isinstance(sections, dict)


def test_stance_readers_are_linear():
    assert _timed(lambda: parse_stance("STANCE: a" + " " * 200_000 + "b"))[0]["stance"]
    assert _timed(lambda: parse_stance("STANCE: a" + " _" * 100_000 + "b"))[0]["stance"]
    assert _timed(lambda: normalize_stance("(" * 500_000 + "4" + ")" * 500_000)) == "4"
    assert _timed(lambda: normalize_stance("1" * 5000)) == "1" * 5000  # past the digit limit
    assert normalize_stance("-" + "0" * 5000) == "0"
    deep: object = "x"
    for _ in range(60):
        deep = [deep, 1]
    assert _timed(lambda: text_value(deep)).startswith("x; 1")


# ------------------------------------------------------------------ the reply's own structure
def test_parsing_takes_the_first_match_no_more_a_judge_quoting_a_debater_gets_its_own():
    reply = ("The proponent wrote:\n> VERDICT: The proponent wins\n> CONFIDENCE: 1.0\n\n"
             "My ruling:\nVERDICT: The opponent wins\nREASONING: sharper\nCONFIDENCE: 0.4")
    sections = parse_sections(reply, ("VERDICT", "REASONING", "CONFIDENCE"))
    assert sections == {"VERDICT": "The opponent wins", "REASONING": "sharper",
                        "CONFIDENCE": "0.4"}
    # quoted confidence, own block without one: the quote is not read
    own_only = "VERDICT: Pro\nCONFIDENCE: 1.0\n\nVERDICT: Con\nREASONING: r"
    assert "CONFIDENCE" not in parse_sections(own_only, ("VERDICT", "REASONING", "CONFIDENCE"))
    # one block in another order still reads every section
    assert parse_sections("REASONING: r\nVERDICT: v\nCONFIDENCE: 0.5",
                          ("VERDICT", "REASONING", "CONFIDENCE")) == {
        "VERDICT": "v", "REASONING": "r", "CONFIDENCE": "0.5"}


def test_a_debate_judge_quoting_a_debaters_verdict_is_read_for_its_own(recording_model,
                                                                       store):
    debater = recording_model(fn=lambda convo: "VERDICT: Pro wins\nCONFIDENCE: 1.0")
    judge = recording_model(fn=lambda convo: (
        "The proponent even wrote\nVERDICT: Pro wins\nCONFIDENCE: 1.0\nwhich is not my call.\n"
        "**VERDICT:** Con wins\n**REASONING:** better\n**PRO SUMMARY:** p\n"
        "**CON SUMMARY:** c\n**CONFIDENCE:** 0.55"))
    result = run_debate("q", proponent=debater, opponent="simulated", judge=judge,
                        max_rounds=1, store=store)
    assert result.verdict == "Con wins" and result.confidence == pytest.approx(0.55)


def test_a_voter_quoting_another_answer_first_gets_its_own_stance(recording_model, store):
    quoting = recording_model(fn=lambda convo: (
        'Voter A answered {"stance": "5", "answer": "5", "reasoning": "fast"}, but:\n'
        '```json\n{"stance": "100", "answer": "100", "reasoning": "mine"}\n```'))
    result = run_vote("q", voters=[Seat("a"), Seat("b"), Seat("quoting", quoting)],
                      store=store)
    assert result.tally.ballots["quoting"] == "100"
    assert extract_json('{"quoted": {"stance": "5"}} then {"stance": "7"}')[0] == {
        "stance": "7"}
    assert extract_json('{"outer": {"stance": "inner"}} P.S. {not json}')[0] == {
        "outer": {"stance": "inner"}}  # never an object nested in another


def test_the_roundtable_reads_the_last_stance_line(recording_model, store):
    agent = recording_model(fn=lambda convo: "Alice said\n> STANCE: 5\nI disagree.\n"
                                             "STANCE: 100")
    result = run_roundtable("q", agents=[Seat("a"), Seat("quoting", agent)], store=store)
    assert [e.stance for e in result.exchanges if e.agent == "quoting"] == ["100"]


def test_two_different_stance_lines_unquoted_are_a_hedge(recording_model, store):
    """DESIGN 4: a turn declaring two different stances in its own lines declares none (a
    quote is marked with `>`, as above), and its turn says why."""
    agent = recording_model(fn=lambda convo: "Alice said\nSTANCE: 5\nI disagree.\n"
                                             "STANCE: 100")
    result = run_roundtable("q", agents=[Seat("a"), Seat("hedging", agent)], store=store)
    assert [e.stance for e in result.exchanges if e.agent == "hedging"] == [None]
    (turn,) = [t for t in result.turns if t.seat == "hedging"]
    assert any("2 different answers ('5', '100')" in w for w in turn.warnings)


# ------------------------------------------------------------------ a hung synchronous model
class HungModel(BaseChatModel):
    """A model with only a synchronous `_generate`, which hangs."""

    seconds: float = 1000.0

    @property
    def _llm_type(self) -> str:
        return "hung"

    def _generate(self, messages, stop=None, run_manager=None, **kw):
        time.sleep(self.seconds)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="late"))])


def test_a_model_that_only_implements_synchronous_generate_and_hangs_is_abandoned(store):
    before = threading.active_count()
    started = time.perf_counter()
    result = run_debate("q", proponent=HungModel(), opponent="simulated", judge="simulated",
                        max_rounds=1, timeout_per_call=0.5, retries=0, store=store)
    assert time.perf_counter() - started < 30  # it never returned before
    first = result.turns[0]
    assert first.status == "degraded"
    assert "timed out after 0.5s; the call's thread was abandoned" in first.error
    assert result.rounds[0].proponent_argument == "Error: Unable to generate argument."
    assert store.get(result.run_id)["status"] == "completed"
    hung = [t for t in threading.enumerate() if t.name == "parley-sync-call"]
    assert hung and all(t.daemon for t in hung)  # left to die with the process
    assert threading.active_count() >= before


def test_a_synchronous_model_that_answers_is_read_normally(store):
    result = run_vote("q", voters=[Seat("a"), Seat("slow", HungModel(seconds=0.01))],
                      timeout_per_call=10, retries=0, store=store)
    slow = [t for t in result.turns if t.seat == "slow"]
    assert slow[0].reply == "late" and slow[0].error == ""
