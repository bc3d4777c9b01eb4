"""Seed 000's debate, rule by rule, checked on what the fake models actually received."""
from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from protocol_contract import ProtocolContract

from engine import ConfigError, Seat, arun_debate, prompt_templates, run_debate
from engine.protocols.adversary import TEMPLATES as ADVERSARY_TEMPLATES

ARGUMENT_ERROR = "Error: Unable to generate argument."
COUNTER_ERROR = "Error: Unable to generate counter-argument."
JUDGE_REPLY = ("1. VERDICT: The proponent wins\n2. REASONING: Stronger evidence\n"
               "3. PRO SUMMARY: It is cheaper\n4. CON SUMMARY: It is riskier\n"
               "5. CONFIDENCE: 0.8\nANSWER: yes")
TOPIC = "Should this service move to microservices?"


def pro_replies(n=3):
    return [f"pro-argument-round-{i}" for i in range(1, n + 1)]


def con_replies(n=3):
    return [f"con-argument-round-{i}" for i in range(1, n + 1)]


@pytest.fixture
def seats(recording_model):
    """Fresh proponent, opponent and judge fakes with distinct, searchable replies."""
    return {"proponent": recording_model(pro_replies()),
            "opponent": recording_model(con_replies()),
            "judge": recording_model([JUDGE_REPLY])}


def debate(seats, topic=TOPIC, **kw):
    kw.setdefault("retries", 0)
    return run_debate(topic, **seats, **kw)


def prompt(model, call):
    """The last (user) message content of the model's `call`-th call."""
    kind, content = model.received[call][-1]
    assert kind == "human"
    return content


# --------------------------------------------------------------------------- round 1
def test_round_one_proponent_opens_with_the_topic(seats):
    debate(seats, max_rounds=1)
    assert len(seats["proponent"].received) == 1
    assert seats["proponent"].received[0] == [("human", prompt(seats["proponent"], 0))]
    opening = prompt(seats["proponent"], 0)
    assert TOPIC in opening
    assert "con-argument" not in opening


def test_round_one_opponent_answers_the_opening(seats):
    debate(seats, max_rounds=1)
    answer = prompt(seats["opponent"], 0)
    assert TOPIC in answer
    assert "pro-argument-round-1" in answer


def test_round_one_result_holds_both_arguments(seats):
    result = debate(seats, max_rounds=1)
    assert [(r.round_number, r.proponent_argument, r.opponent_argument)
            for r in result.rounds] == [(1, "pro-argument-round-1", "con-argument-round-1")]


# --------------------------------------------------------------------------- later rounds
def test_later_rounds_proponent_sees_the_opponents_last_argument(seats):
    debate(seats, max_rounds=3)
    second, third = prompt(seats["proponent"], 1), prompt(seats["proponent"], 2)
    assert "con-argument-round-1" in second
    assert "con-argument-round-2" in third and "con-argument-round-1" not in third
    assert TOPIC in second and TOPIC in third


def test_later_rounds_opponent_sees_newest_argument_and_its_own_previous_one(seats):
    debate(seats, max_rounds=3)
    second, third = prompt(seats["opponent"], 1), prompt(seats["opponent"], 2)
    assert "pro-argument-round-2" in second and "con-argument-round-1" in second
    assert "pro-argument-round-1" not in second
    assert "pro-argument-round-3" in third and "con-argument-round-2" in third
    for old in ("pro-argument-round-1", "pro-argument-round-2", "con-argument-round-1"):
        assert old not in third


def test_each_call_is_a_fresh_single_message(seats):
    """Sides are LLMClient.chat(prompt) calls: no hidden conversation history."""
    debate(seats, max_rounds=3)
    for model in seats.values():
        assert all(len(call) == 1 and call[0][0] == "human" for call in model.received)


def test_rounds_are_numbered_in_order(seats):
    result = debate(seats, max_rounds=3)
    assert [r.round_number for r in result.rounds] == [1, 2, 3]
    assert [r.opponent_argument for r in result.rounds] == con_replies()


def test_persona_goes_first_as_a_system_message(recording_model):
    pro = recording_model(["p"])
    con, judge = recording_model(["c"]), recording_model([JUDGE_REPLY])
    run_debate(TOPIC, proponent=Seat("pro", pro, persona="You are a bold architect."),
               opponent=con, judge=judge, max_rounds=1, retries=0)
    assert pro.received[0][0] == ("system", "You are a bold architect.")
    assert pro.received[0][1][0] == "human"
    assert con.received[0][0][0] == "human"


# --------------------------------------------------------------------------- side failures
def test_proponent_failure_gives_argument_error_and_the_debate_goes_on(recording_model):
    pro = recording_model([RuntimeError("pro down"), "pro-argument-round-2"])
    con = recording_model(con_replies())
    judge = recording_model([JUDGE_REPLY])
    result = run_debate(TOPIC, proponent=pro, opponent=con, judge=judge, max_rounds=2,
                        retries=0)
    assert result.rounds[0].proponent_argument == ARGUMENT_ERROR
    assert result.rounds[1].proponent_argument == "pro-argument-round-2"
    assert ARGUMENT_ERROR in prompt(con, 0)  # the opponent answers what the round holds
    assert len(con.received) == 2 and len(judge.received) == 1
    failed = result.turns[0]
    assert failed.status == "degraded" and "pro down" in failed.error and failed.reply == ""


def test_opponent_failure_gives_counter_argument_error_and_the_debate_goes_on(recording_model):
    pro = recording_model(pro_replies())
    con = recording_model([RuntimeError("con down"), "con-argument-round-2"])
    judge = recording_model([JUDGE_REPLY])
    result = run_debate(TOPIC, proponent=pro, opponent=con, judge=judge, max_rounds=2,
                        retries=0)
    assert result.rounds[0].opponent_argument == COUNTER_ERROR
    assert result.rounds[1].opponent_argument == "con-argument-round-2"
    assert COUNTER_ERROR in prompt(pro, 1)       # proponent sees the opponent's last argument
    assert COUNTER_ERROR in prompt(con, 1)       # ... and so does the opponent, as its own
    assert result.turns[1].status == "degraded" and "con down" in result.turns[1].error
    assert result.verdict == "The proponent wins"


def test_both_sides_failing_every_round_still_reaches_the_judge(recording_model):
    pro, con = recording_model([ValueError("x")]), recording_model([ValueError("y")])
    judge = recording_model([JUDGE_REPLY])
    result = run_debate(TOPIC, proponent=pro, opponent=con, judge=judge, max_rounds=2,
                        retries=0)
    assert [(r.proponent_argument, r.opponent_argument) for r in result.rounds] == \
        [(ARGUMENT_ERROR, COUNTER_ERROR)] * 2
    assert ARGUMENT_ERROR in prompt(judge, 0) and COUNTER_ERROR in prompt(judge, 0)
    assert result.confidence == pytest.approx(0.8)


def test_empty_reply_counts_as_a_failed_side(recording_model):
    pro, con = recording_model(["   "]), recording_model(["c"])
    judge = recording_model([JUDGE_REPLY])
    result = run_debate(TOPIC, proponent=pro, opponent=con, judge=judge, max_rounds=1,
                        retries=0)
    assert result.rounds[0].proponent_argument == ARGUMENT_ERROR
    assert result.turns[0].error == "empty reply"


# --------------------------------------------------------------------------- timeout
def test_timeout_zero_starts_no_round_but_the_judge_runs(seats):
    result = debate(seats, max_rounds=3, timeout=0)
    assert result.rounds == []
    assert seats["proponent"].received == [] and seats["opponent"].received == []
    assert len(seats["judge"].received) == 1
    assert result.verdict == "The proponent wins"
    assert [t.phase for t in result.turns] == ["judge"]


def test_timeout_accepts_a_timedelta(seats):
    result = debate(seats, max_rounds=3, timeout=timedelta(0))
    assert result.rounds == [] and len(seats["judge"].received) == 1


def test_timeout_is_checked_before_each_round_and_a_started_round_finishes(recording_model):
    calls = []

    def slow_first(convo):
        # The first call overruns the run's timeout: the round it is in must still finish.
        calls.append(convo)
        if len(calls) == 1:
            time.sleep(1.0)
        return "pro-argument"

    pro = recording_model(fn=slow_first)
    con = recording_model(["con-argument"])
    judge = recording_model([JUDGE_REPLY])
    result = run_debate(TOPIC, proponent=pro, opponent=con, judge=judge, max_rounds=3,
                        timeout=0.5, retries=0)
    assert len(result.rounds) == 1  # round 1 began at once; round 2 was due after 0.5 s
    assert result.rounds[0].opponent_argument == "con-argument"
    assert len(pro.received) == 1 and len(con.received) == 1
    assert len(judge.received) == 1 and result.verdict == "The proponent wins"


def test_no_timeout_runs_every_round(seats):
    result = debate(seats, max_rounds=3, timeout=None)
    assert len(result.rounds) == 3


# --------------------------------------------------------------------------- the judge
def test_judge_sees_the_whole_transcript(seats):
    debate(seats, max_rounds=3)
    assert len(seats["judge"].received) == 1
    judged = prompt(seats["judge"], 0)
    assert TOPIC in judged
    for text in pro_replies() + con_replies():
        assert text in judged
    # in speaking order
    positions = [judged.index(t) for t in
                 ["pro-argument-round-1", "con-argument-round-1", "pro-argument-round-2",
                  "con-argument-round-2", "pro-argument-round-3", "con-argument-round-3"]]
    assert positions == sorted(positions)
    for section in ("VERDICT", "REASONING", "PRO SUMMARY", "CON SUMMARY", "CONFIDENCE"):
        assert section in judged


def test_judge_sections_fill_the_result(seats):
    result = debate(seats, max_rounds=1)
    assert result.verdict == "The proponent wins"
    assert result.reasoning == "Stronger evidence"
    assert result.pro_summary == "It is cheaper"
    assert result.con_summary == "It is riskier"
    assert result.confidence == pytest.approx(0.8)
    assert result.is_high_confidence is True
    assert result.answer == "yes"
    assert result.warnings == []
    assert result.turns[-1].parsed == {"verdict": "The proponent wins", "confidence": 0.8,
                                       "answer": "yes"}


def test_judge_failure(recording_model):
    pro, con = recording_model(["p"]), recording_model(["c"])
    judge = recording_model([RuntimeError("judge exploded")])
    result = run_debate(TOPIC, proponent=pro, opponent=con, judge=judge, max_rounds=2,
                        retries=0)
    assert result.verdict.startswith("Unable to reach verdict due to error:")
    assert "judge exploded" in result.verdict
    assert result.confidence == 0
    assert result.is_high_confidence is False
    assert result.pro_summary == "" and result.con_summary == ""
    assert len(result.rounds) == 2  # the rounds are kept
    assert result.turns[-1].status == "degraded"


@pytest.mark.parametrize("reply, verdict, confidence, answer", [
    ("**VERDICT:** Con\n**REASONING:** r\n**PRO SUMMARY:** p\n**CON SUMMARY:** c\n"
     "**CONFIDENCE:** 85%\n**ANSWER:** no", "Con", 0.85, "no"),
    ("1) Verdict: Pro\n2) reasoning: r\n3) Pro Summary: p\n4) con summary: c\n"
     "5) Confidence: high\n6) Answer: `$0.05`", "Pro", 0.8, "$0.05"),
    ("VERDICT: Pro, narrowly.\nIt was close.\nREASONING: r\nPRO SUMMARY: p\n"
     "CON SUMMARY: c\nCONFIDENCE: 7/10\nANSWER:\nmove to microservices",
     "Pro, narrowly.\nIt was close.", 0.7, "move to microservices"),
])
def test_judge_sections_parse_in_several_styles(recording_model, reply, verdict, confidence,
                                                answer):
    result = run_debate(TOPIC, proponent=recording_model(["p"]),
                        opponent=recording_model(["c"]), judge=recording_model([reply]),
                        max_rounds=1, retries=0)
    assert result.verdict == verdict
    assert (result.reasoning, result.pro_summary, result.con_summary) == ("r", "p", "c")
    assert result.confidence == pytest.approx(confidence)
    assert result.answer == answer
    assert result.warnings == []


def test_missing_verdict_makes_the_whole_reply_the_verdict_with_a_warning(recording_model):
    reply = "I think the opponent argued better overall.\nCONFIDENCE: 0.6"
    result = run_debate(TOPIC, proponent=recording_model(["p"]),
                        opponent=recording_model(["c"]), judge=recording_model([reply]),
                        max_rounds=1, retries=0)
    assert result.verdict == reply
    assert any("VERDICT" in w for w in result.warnings)
    assert result.confidence == pytest.approx(0.6)
    assert result.turns[-1].warnings == result.warnings


def test_missing_sections_leave_fields_empty_with_warnings(recording_model):
    result = run_debate(TOPIC, proponent=recording_model(["p"]),
                        opponent=recording_model(["c"]),
                        judge=recording_model(["VERDICT: Pro"]), max_rounds=1, retries=0)
    assert result.verdict == "Pro"
    assert result.reasoning == result.pro_summary == result.con_summary == ""
    assert result.confidence == 0.0
    assert any("CONFIDENCE" in w for w in result.warnings)
    assert any("REASONING" in w for w in result.warnings)


def test_unreadable_confidence_is_zero_with_a_warning(recording_model):
    result = run_debate(TOPIC, proponent=recording_model(["p"]),
                        opponent=recording_model(["c"]),
                        judge=recording_model(["VERDICT: Pro\nCONFIDENCE: quite sure"]),
                        max_rounds=1, retries=0)
    assert result.confidence == 0.0
    assert any("quite sure" in w for w in result.warnings)


@pytest.mark.parametrize("confidence, high", [("0.7", True), ("0.69", False), ("0.71", True),
                                              ("70%", True), ("1.0", True), ("0.0", False)])
def test_is_high_confidence_threshold(recording_model, confidence, high):
    result = run_debate(TOPIC, proponent=recording_model(["p"]),
                        opponent=recording_model(["c"]),
                        judge=recording_model([f"VERDICT: Pro\nCONFIDENCE: {confidence}"]),
                        max_rounds=1, retries=0)
    assert result.is_high_confidence is high
    assert result.model_dump()["is_high_confidence"] is high


# --------------------------------------------------------------------------- rounds and calls
@pytest.mark.parametrize("rounds", [1, 2, 4])
def test_max_rounds_gives_two_calls_per_round_plus_the_judge(recording_model, rounds):
    pro, con = recording_model(["p"]), recording_model(["c"])
    judge = recording_model([JUDGE_REPLY])
    result = run_debate(TOPIC, proponent=pro, opponent=con, judge=judge, max_rounds=rounds,
                        retries=0)
    assert len(result.turns) == 2 * rounds + 1
    assert (len(pro.received), len(con.received), len(judge.received)) == (rounds, rounds, 1)
    assert len(result.rounds) == rounds


def test_default_is_three_rounds(seats):
    result = run_debate(TOPIC, **seats, retries=0)
    assert len(result.rounds) == 3 and len(result.turns) == 7


# --------------------------------------------------------------------------- prompt overrides
def test_prompt_override_changes_what_is_sent(seats):
    prompts = {"proponent_opening": "OPEN FOR: {topic}",
               "judge": "RULE ON {topic}\n{transcript}\nVERDICT: ...\nCONFIDENCE: ..."}
    debate(seats, max_rounds=1, prompts=prompts)
    assert prompt(seats["proponent"], 0) == f"OPEN FOR: {TOPIC}"
    judged = prompt(seats["judge"], 0)
    assert judged.startswith(f"RULE ON {TOPIC}\n")
    assert "pro-argument-round-1" in judged and "con-argument-round-1" in judged
    # templates not overridden keep their defaults
    assert "pro-argument-round-1" in prompt(seats["opponent"], 0)
    assert prompt(seats["opponent"], 0).startswith("You are arguing AGAINST")


def test_prompt_templates_lists_every_debate_prompt():
    templates = prompt_templates("debate")
    assert set(templates) - set(ADVERSARY_TEMPLATES) == {"proponent_opening", "opponent_opening", "proponent_rebuttal",
                              "opponent_rebuttal", "judge", "consultant"}
    assert "transcript" in templates["judge"]["placeholders"]
    assert templates["proponent_opening"]["placeholders"] == ["topic"]


@pytest.mark.parametrize("prompts, fragment", [
    ({"closing_statement": "x {topic}"}, "closing_statement"),
    ({"proponent_opening": "Argue {topic} against {transcript}"}, "transcript"),
    ({"judge": "   "}, "judge"),
])
def test_bad_prompt_override_raises_before_any_call(seats, prompts, fragment):
    with pytest.raises(ConfigError) as info:
        debate(seats, prompts=prompts)
    assert info.value.code == "input"
    assert fragment in str(info.value)
    assert all(model.received == [] for model in seats.values())


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize("change, code", [
    ({"topic": ""}, "input"),
    ({"topic": "   "}, "input"),
    ({"max_rounds": 0}, "limit"),
    ({"max_rounds": -1}, "limit"),
    ({"max_rounds": 2.5}, "input"),
    ({"judge": None}, "no_model"),
    ({"opponent": None}, "no_model"),
    ({"judge": "nosuchvendor:some-model"}, "no_model"),
    ({"proponent": Seat("pro", "")}, "no_model"),
    ({"timeout": -1}, "input"),
    ({"no_such_option": 1}, "input"),
])
def test_validation_errors_raise_before_any_model_call(seats, change, code):
    kwargs = {"topic": TOPIC, **seats, "max_rounds": 2, **change}
    spies = [m for m in seats.values()]
    with pytest.raises(ConfigError) as info:
        run_debate(kwargs.pop("topic"), **kwargs)
    assert info.value.code == code
    assert str(info.value)  # says what to change
    assert all(model.received == [] for model in spies)


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


# --------------------------------------------------------------------------- events and asyncio
def test_on_event_receives_each_turn_in_order(seats):
    events = []
    result = debate(seats, max_rounds=2, on_event=events.append)
    assert [(t.index, t.phase, t.round, t.seat) for t in events] == [
        (0, "argument", 1, "proponent"), (1, "counter-argument", 1, "opponent"),
        (2, "argument", 2, "proponent"), (3, "counter-argument", 2, "opponent"),
        (4, "judge", 3, "judge")]
    assert [t.reply for t in events] == ["pro-argument-round-1", "con-argument-round-1",
                                         "pro-argument-round-2", "con-argument-round-2",
                                         JUDGE_REPLY]
    assert events == result.turns


def test_on_event_sees_each_turn_before_the_next_call(recording_model):
    log = []
    pro = recording_model(fn=lambda convo: log.append("pro call") or "p")
    con = recording_model(fn=lambda convo: log.append("con call") or "c")
    judge = recording_model(fn=lambda convo: log.append("judge call") or JUDGE_REPLY)
    run_debate(TOPIC, proponent=pro, opponent=con, judge=judge, max_rounds=1, retries=0,
               on_event=lambda turn: log.append(f"event {turn.seat}"))
    assert log == ["pro call", "event proponent", "con call", "event opponent",
                   "judge call", "event judge"]


def test_arun_debate_works_under_asyncio(seats):
    async def main():
        return await arun_debate(TOPIC, **seats, max_rounds=2, retries=0)

    result = asyncio.run(main())
    assert len(result.rounds) == 2 and result.verdict == "The proponent wins"
    assert len(seats["judge"].received) == 1


def test_two_debates_run_concurrently_under_gather(recording_model):
    def make():
        return dict(proponent=recording_model(["p"]), opponent=recording_model(["c"]),
                    judge=recording_model([JUDGE_REPLY]))

    async def main():
        return await asyncio.gather(arun_debate("A?", **make(), max_rounds=1, retries=0),
                                    arun_debate("B?", **make(), max_rounds=1, retries=0))

    first, second = asyncio.run(main())
    assert (first.topic, second.topic) == ("A?", "B?")
    assert len(first.turns) == len(second.turns) == 3


def test_run_debate_works_inside_a_running_event_loop(seats):
    async def main():
        return run_debate(TOPIC, **seats, max_rounds=1, retries=0)

    result = asyncio.run(main())
    assert result.verdict == "The proponent wins"


def test_result_fields_and_duration(seats):
    result = debate(seats, max_rounds=1)
    data = result.model_dump()
    for field in ("topic", "rounds", "verdict", "reasoning", "pro_summary", "con_summary",
                  "confidence", "is_high_confidence", "duration", "turns"):
        assert field in data
    assert result.topic == TOPIC and result.protocol == "debate"
    assert result.duration >= 0
    assert result.run_id is None  # nothing stored without a store


# --------------------------------------------------------------------------- scoring (ANSWER)
def judge_saying(answer_lines="ANSWER: $0.05", confidence="0.8"):
    """A judge reply with the seed's five sections, then `answer_lines`."""
    return ("1. VERDICT: The proponent wins\n2. REASONING: r\n3. PRO SUMMARY: p\n"
            f"4. CON SUMMARY: c\n5. CONFIDENCE: {confidence}\n{answer_lines}").strip()


def test_judge_prompt_asks_for_the_answer_line_after_the_five_sections(seats):
    debate(seats, max_rounds=1)
    judged = prompt(seats["judge"], 0)
    sections = [judged.index(f"{i}. {label}:") for i, label in enumerate(
        ("VERDICT", "REASONING", "PRO SUMMARY", "CON SUMMARY", "CONFIDENCE"), 1)]
    assert sections == sorted(sections)
    assert "\nANSWER: <the short answer the winning case supports" in judged
    assert judged.index("\nANSWER:") > sections[-1]


@pytest.mark.parametrize("line, expected, correct", [
    ("ANSWER: $0.05", "0.05", True),        # the panel's and vote's matching rule
    ("**ANSWER:** .05", "0.05", True),
    ("ANSWER: 0.10", "0.05", False),
    ("ANSWER: Yes.", "yes", True),
])
def test_a_debate_given_expected_is_scored_from_the_answer_line(recording_model, store, line,
                                                                expected, correct):
    result = run_debate(TOPIC, proponent=recording_model(["p"]), opponent=recording_model(["c"]),
                        judge=recording_model([judge_saying(line)]), max_rounds=1, retries=0,
                        expected=expected, store=store)
    assert result.answer == line.split(":", 1)[1].strip(" *")
    assert result.correct is correct and result.warnings == []
    assert result.turns[-1].parsed["answer"] == result.answer
    row = store.runs().iloc[0]
    assert bool(row["correct"]) is correct  # on the run row, like the panel's and the vote's
    assert row["metrics"]["answer"] == result.answer
    assert row["metrics"]["judge_confidence"] == pytest.approx(0.8)


def test_a_debate_without_expected_keeps_its_answer_unscored(recording_model):
    result = run_debate(TOPIC, proponent=recording_model(["p"]), opponent=recording_model(["c"]),
                        judge=recording_model([judge_saying()]), max_rounds=1, retries=0)
    assert result.answer == "$0.05" and result.correct is None and result.expected is None


@pytest.mark.parametrize("reply", [
    # the judge quotes a debater's ANSWER line before its own block
    "The proponent closed with:\nANSWER: 0.10\n\n" + judge_saying("ANSWER: 0.05"),
    # ... or in a quoted line of its own verdict
    judge_saying("ANSWER: 0.05").replace(
        "The proponent wins", "The proponent wins; its last words were\n> ANSWER: 0.10"),
    # ... or the debater's whole labelled block, CONFIDENCE 1.0 included
    "Proponent wrote:\nVERDICT: mine\nCONFIDENCE: 1.0\nANSWER: 0.10\n\n"
    + judge_saying("ANSWER: 0.05"),
])
def test_the_judges_last_answer_line_wins(recording_model, reply):
    result = run_debate(TOPIC, proponent=recording_model(["p"]), opponent=recording_model(["c"]),
                        judge=recording_model([reply]), max_rounds=1, retries=0,
                        expected="0.05")
    assert result.answer == "0.05" and result.correct is True
    assert result.confidence == pytest.approx(0.8)
    assert result.con_summary == "c"  # CON SUMMARY ends where CONFIDENCE starts


def test_a_judge_declaring_two_answers_in_its_own_block_declares_none(recording_model):
    """DESIGN 4: two different ANSWER lines in the judge's own block (not quoted with `>`,
    not before its block) are a hedge: no answer, wrong and unanswered, with a warning."""
    reply = judge_saying("ANSWER: 0.05").replace(
        "The proponent wins", "The proponent wins; its last words were\nANSWER: 0.10")
    result = run_debate(TOPIC, proponent=recording_model(["p"]), opponent=recording_model(["c"]),
                        judge=recording_model([reply]), max_rounds=1, retries=0,
                        expected="0.05")
    assert result.answer == "" and result.correct is False and result.unanswered
    assert any("2 different answers ('0.10', '0.05')" in w for w in result.turns[-1].warnings)


def test_no_answer_line_leaves_the_debate_unanswered_with_a_warning(recording_model, store):
    result = run_debate(TOPIC, proponent=recording_model(["p"]), opponent=recording_model(["c"]),
                        judge=recording_model([judge_saying("")]), max_rounds=1, retries=0,
                        expected="0.05", store=store)
    assert result.answer == ""  # never guessed from the verdict
    assert result.correct is False and result.unanswered  # DESIGN 4: wrong, unanswered
    assert any("no ANSWER line" in w and "no short answer" in w for w in result.warnings)
    assert "answer" not in result.turns[-1].parsed
    row = store.runs().iloc[0]
    assert bool(row["correct"]) is False and bool(row["unanswered"]) is True
    assert row["metrics"]["answer"] is None


def test_a_failed_judge_gives_no_answer_and_counts_as_unanswered(recording_model):
    result = run_debate(TOPIC, proponent=recording_model(["p"]), opponent=recording_model(["c"]),
                        judge=recording_model([RuntimeError("judge down")]), max_rounds=1,
                        retries=0, expected="0.05")
    assert result.answer == "" and result.correct is False and result.unanswered


def test_scored_debates_count_in_insights_accuracy(recording_model, store):
    from engine.reports.insights import report_from_store
    from engine.store import RunFilters
    for answer in ("0.05", "0.10", ""):
        run_debate(TOPIC, proponent=recording_model(["p"]), opponent=recording_model(["c"]),
                   judge=recording_model([judge_saying(f"ANSWER: {answer}" if answer else "")]),
                   max_rounds=1, retries=0, expected="0.05", store=store)
    sections = {s.key: s for s in report_from_store(store, RunFilters())}
    accuracy = dict(sections["accuracy"].metrics)
    # rate, Wilson, n; the judge that gave no answer is wrong (DESIGN 4), counted apart too
    assert accuracy == {"Scored runs": "3", "Correct": "33% [6%–79%] n=3", "Unanswered": "1"}
    debate_section = sections["debate"]
    assert dict(debate_section.metrics)["Judge's answer right"] == "33% [6%–79%] n=3"


def scripted_experiment(store, recording_model, judges):
    """An experiment of one debate configuration whose runs are made with scripted judges
    (one per question), written as the experiment runner writes them: tagged with their
    cell, under the experiment's id, with the question's expected answer."""
    from engine import experiments as ex
    questions = [{"question": f"Question {i}?", "expected": "0.05"} for i in range(len(judges))]
    experiment_id = ex.create(store, {"questions": questions, "repeats": 1, "configs": [
        {"protocol": "debate", "label": "debate", "options": {"max_rounds": 1}}]})
    for q, reply in enumerate(judges):
        run_debate(questions[q]["question"], proponent=recording_model(["p"]),
                   opponent=recording_model(["c"]), judge=recording_model([reply]),
                   max_rounds=1, retries=0, store=store, label="debate",
                   tags=[ex.Cell(q, 0, 0).tag], expected="0.05", experiment_id=experiment_id)
    return ex.report(store, experiment_id)


def test_judge_confidence_enters_an_experiments_calibration(recording_model, store):
    report = scripted_experiment(store, recording_model, [
        judge_saying("ANSWER: 0.05", "0.9"), judge_saying("ANSWER: 0.10", "0.8"),
        judge_saying("ANSWER: $0.05", "0.6"), judge_saying("", "0.3")])  # the last: unanswered
    row = report.summary.set_index("configuration").loc["debate"]
    assert (row["runs"], row["scored"], row["correct"], row["unanswered"]) == (4, 4, 2, 1)
    assert row["accuracy"] == pytest.approx(2 / 4)  # DESIGN 4: no answer is a wrong one
    brier = ((0.9 - 1) ** 2 + (0.8 - 0) ** 2 + (0.6 - 1) ** 2 + (0.3 - 0) ** 2) / 4
    assert row["judge_brier"] == pytest.approx(brier)
    judge = next(c for c in report.calibrations if c["signal"] == "judge")
    assert judge["label"] == "debate" and judge["n"] == 4
    assert [(b["count"], b["accuracy"]) for b in judge["bins"]] == [
        (1, 0.0), (1, 1.0), (1, 0.0), (1, 1.0)]  # 0.3 (unanswered), 0.6, 0.8, 0.9
    assert not any(c["signal"] == "consensus" for c in report.calibrations)


def test_simulated_debates_in_an_experiment_are_scored_and_calibrated(store):
    """The simulated judge writes an ANSWER line too, so an experiment's debates are scored
    (whatever the simulated answers are) and the judge's confidence is calibrated."""
    from engine import experiments as ex
    questions = [{"question": "What is 2+3?", "expected": "5"},
                 {"question": "What is 4*6?", "expected": "24"}]
    experiment_id = ex.create(store, {"questions": questions, "repeats": 1, "configs": [
        {"protocol": "debate", "label": "debate", "options": {"max_rounds": 1}}]})
    assert ex.run_experiment(store, experiment_id).status == "completed"
    report = ex.report(store, experiment_id)
    assert report.summary.set_index("configuration").loc["debate", "scored"] == 2
    assert report.runs["answer"].notna().all()
    assert [(c["label"], c["signal"], c["n"]) for c in report.calibrations] == [
        ("debate", "judge", 2)]


class TestDebateContract(ProtocolContract):
    """The protocol contract (tests/protocol_contract.py), kept by the debate."""

    protocol = "debate"
    run = staticmethod(run_debate)
    arun = staticmethod(arun_debate)
    options = {"max_rounds": 2}
    unused_templates = {"consultant"}  # a consultancy's alone: tests/test_consultancy.py

    def assert_failure_shown(self, result, seat, slot, failure):
        """A failed side's argument is the seed's error text; a failed judge gives no verdict."""
        if slot == "proponent":
            assert {r.proponent_argument for r in result.rounds} == {ARGUMENT_ERROR}
        elif slot == "opponent":
            assert {r.opponent_argument for r in result.rounds} == {COUNTER_ERROR}
        else:
            assert result.verdict.startswith("Unable to reach verdict due to error: ")
            assert result.confidence == 0.0 and result.pro_summary == ""
