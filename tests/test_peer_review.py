"""Seed 000's peer review, rule by rule, checked on what the fake models actually received."""
from __future__ import annotations

import asyncio

import pytest
from protocol_contract import ProtocolContract

from engine.protocols.adversary import TEMPLATES as ADVERSARY_TEMPLATES
from engine import ConfigError, arun_peer_review, prompt_templates, run_peer_review
from engine.analysis import is_approved

TASK = "Write release notes for version 2.0 of TASK-MARKER-42"
REJECT = "APPROVED: no\nFEEDBACK: Add the migration steps.\nSTRENGTHS: Clear headings."
ACCEPT = "APPROVED: yes\nFEEDBACK: None needed.\nSTRENGTHS: Complete and accurate."


def drafts(n=3):
    return [f"draft-number-{i}" for i in range(1, n + 1)]


def review(producer, reviewer, task=TASK, **kw):
    kw.setdefault("retries", 0)
    return run_peer_review(task, producer=producer, reviewer=reviewer, **kw)


def prompt(model, call):
    kind, content = model.received[call][-1]
    assert kind == "human"
    return content


# --------------------------------------------------------------------------- the approval rule
@pytest.mark.parametrize("reply, approved", [
    ("APPROVED: yes", True),
    ("APPROVED: YES", True),
    ("approved:yes", True),
    ("Approved: Yes", True),
    ("Approved: yes, ship it", True),
    ("I approved: yes", True),                       # "contains", as the seed says
    ("FEEDBACK: fine\nAPPROVED: yes\nSTRENGTHS: x", True),
    ("APPROVED:YES.", True),
    ("Approved: **yes**", False),                    # the seed's own rejection example
    ("**Approved:** yes", False),
    ("APPROVED: no", False),
    ("Approved - yes", False),
    ("approved: y", False),
    ("Approved yes", False),
    ("APPROVED:  yes", False),                       # two spaces
    ("APPROVED:\nyes", False),
    ("Approved: true", False),
    ("yes", False),
    ("", False),
])
def test_is_approved(reply, approved):
    assert is_approved(reply) is approved


@pytest.mark.parametrize("verdict, approved", [
    ("APPROVED: YES", True), ("approved:yes", True), ("Approved: yes, ship it", True),
    ("I approved: yes", True), ("Approved: **yes**", False), ("APPROVED: no", False),
    ("Approved - yes", False), ("approved: y", False),
])
def test_approval_rule_through_a_run(recording_model, verdict, approved):
    producer = recording_model(drafts())
    reviewer = recording_model([f"{verdict}\nFEEDBACK: notes\nSTRENGTHS: good"])
    result = review(producer, reviewer, max_iterations=2)
    assert result.iterations[0].approved is approved
    assert result.approved is approved
    assert result.iterations_used == (1 if approved else 2)
    assert result.turns[1].parsed == {"approved": approved}


# --------------------------------------------------------------------------- what each side sees
def test_producer_gets_the_task_in_the_first_iteration(recording_model):
    producer, reviewer = recording_model(drafts()), recording_model([ACCEPT])
    review(producer, reviewer)
    assert producer.received[0] == [("human", prompt(producer, 0))]
    assert "TASK-MARKER-42" in prompt(producer, 0)


def test_producer_does_not_see_the_task_after_the_first_iteration(recording_model):
    producer = recording_model(drafts())
    reviewer = recording_model(["APPROVED: no\nFEEDBACK: feedback-one\nSTRENGTHS: s",
                                "APPROVED: no\nFEEDBACK: feedback-two\nSTRENGTHS: s",
                                ACCEPT])
    review(producer, reviewer, max_iterations=3)
    assert len(producer.received) == 3
    for call in (1, 2):
        sent = " ".join(content for _kind, content in producer.received[call])
        assert "TASK-MARKER-42" not in sent
        assert "release notes" not in sent
    assert "draft-number-1" in prompt(producer, 1) and "feedback-one" in prompt(producer, 1)
    assert "draft-number-2" in prompt(producer, 2) and "feedback-two" in prompt(producer, 2)
    assert "draft-number-1" not in prompt(producer, 2) and "feedback-one" not in \
        prompt(producer, 2)


def test_reviewer_gets_the_task_and_the_draft_every_iteration(recording_model):
    producer = recording_model(drafts())
    reviewer = recording_model([REJECT, REJECT, ACCEPT])
    review(producer, reviewer, max_iterations=3)
    assert len(reviewer.received) == 3
    for number in range(3):
        sent = prompt(reviewer, number)
        assert TASK in sent
        assert f"draft-number-{number + 1}" in sent
        for label in ("APPROVED", "FEEDBACK", "STRENGTHS"):
            assert label in sent


def test_feedback_and_strengths_are_parsed(recording_model):
    producer = recording_model(drafts())
    reviewer = recording_model([REJECT, ACCEPT])
    result = review(producer, reviewer, max_iterations=3)
    first = result.iterations[0]
    assert first.feedback == "Add the migration steps."
    assert first.strengths == "Clear headings."
    assert result.iterations[1].strengths == "Complete and accurate."
    assert "Add the migration steps." in prompt(producer, 1)


def test_reply_without_feedback_section_is_the_feedback(recording_model):
    producer = recording_model(drafts())
    reviewer = recording_model(["Needs more detail about the upgrade."])
    result = review(producer, reviewer, max_iterations=2)
    assert result.iterations[0].feedback == "Needs more detail about the upgrade."
    assert result.iterations[0].strengths == ""
    assert "Needs more detail about the upgrade." in prompt(producer, 1)


# --------------------------------------------------------------------------- failures
def test_reviewer_failure_gives_review_unavailable_and_no_approval(recording_model):
    producer = recording_model(drafts())
    reviewer = recording_model([RuntimeError("reviewer offline"), ACCEPT])
    result = review(producer, reviewer, max_iterations=3)
    first = result.iterations[0]
    assert first.approved is False
    assert first.feedback.startswith("Review unavailable: ")
    assert "reviewer offline" in first.feedback
    assert first.feedback in prompt(producer, 1)  # the next revision gets it as feedback
    assert result.approved is True and result.iterations_used == 2
    assert result.final_output == "draft-number-2"
    assert any("reviewer failed" in w for w in result.warnings)


def test_reviewer_failure_on_the_last_iteration_is_not_approved(recording_model):
    producer = recording_model(drafts())
    reviewer = recording_model([RuntimeError("down")])
    result = review(producer, reviewer, max_iterations=2)
    assert result.approved is False
    assert [i.approved for i in result.iterations] == [False, False]
    assert result.final_output == "draft-number-2"


def test_producer_failure_stops_the_loop(recording_model):
    producer = recording_model(["draft-number-1", RuntimeError("producer crashed"), "never"])
    reviewer = recording_model([REJECT])
    result = review(producer, reviewer, max_iterations=4)
    assert len(producer.received) == 2
    assert len(reviewer.received) == 1
    assert result.iterations_used == 1
    assert result.final_output == "draft-number-1"
    assert result.approved is False
    assert any("producer failed" in w for w in result.warnings)
    assert [t.status for t in result.turns] == ["ok", "ok", "degraded"]


def test_final_output_is_empty_when_the_producer_never_answered(recording_model):
    producer = recording_model([RuntimeError("no producer")])
    reviewer = recording_model([ACCEPT])
    result = review(producer, reviewer, max_iterations=3)
    assert result.final_output == ""
    assert result.approved is False
    assert result.iterations == [] and result.iterations_used == 0
    assert reviewer.received == []


def test_empty_draft_counts_as_a_producer_failure(recording_model):
    producer, reviewer = recording_model([""]), recording_model([ACCEPT])
    result = review(producer, reviewer)
    assert result.final_output == "" and result.iterations_used == 0
    assert result.turns[0].error == "empty reply"


# --------------------------------------------------------------------------- the loop
def test_final_output_is_the_last_unapproved_draft_when_never_approved(recording_model):
    producer = recording_model(drafts())
    reviewer = recording_model([REJECT])
    result = review(producer, reviewer, max_iterations=3)
    assert result.approved is False
    assert result.final_output == "draft-number-3"
    assert result.iterations_used == 3
    assert [i.approved for i in result.iterations] == [False] * 3
    assert [i.output for i in result.iterations] == drafts()


def test_approval_ends_the_loop_early(recording_model):
    producer = recording_model(drafts(5))
    reviewer = recording_model([REJECT, ACCEPT, REJECT])
    result = review(producer, reviewer, max_iterations=5)
    assert result.approved is True
    assert result.iterations_used == 2
    assert len(producer.received) == 2 and len(reviewer.received) == 2
    assert result.final_output == "draft-number-2"
    assert [i.approved for i in result.iterations] == [False, True]


def test_approval_on_the_first_draft(recording_model):
    producer, reviewer = recording_model(drafts()), recording_model([ACCEPT])
    result = review(producer, reviewer)
    assert (result.approved, result.iterations_used, result.final_output) == \
        (True, 1, "draft-number-1")


def test_iterations_are_numbered_and_timed(recording_model):
    producer, reviewer = recording_model(drafts()), recording_model([REJECT])
    result = review(producer, reviewer, max_iterations=3)
    assert [i.iteration_number for i in result.iterations] == [1, 2, 3]
    assert all(i.duration >= 0 for i in result.iterations)
    assert result.duration >= 0
    assert [(t.phase, t.round) for t in result.turns] == [
        ("draft", 1), ("review", 1), ("draft", 2), ("review", 2), ("draft", 3), ("review", 3)]


def test_default_is_three_iterations(recording_model):
    producer, reviewer = recording_model(drafts()), recording_model([REJECT])
    assert review(producer, reviewer).iterations_used == 3


def test_on_event_receives_each_turn_in_order(recording_model):
    events = []
    producer, reviewer = recording_model(drafts()), recording_model([REJECT, ACCEPT])
    result = review(producer, reviewer, on_event=events.append)
    assert [(t.index, t.phase, t.seat) for t in events] == [
        (0, "draft", "producer"), (1, "review", "reviewer"),
        (2, "draft", "producer"), (3, "review", "reviewer")]
    assert events == result.turns


def test_prompt_override(recording_model):
    producer, reviewer = recording_model(drafts()), recording_model([ACCEPT])
    review(producer, reviewer, prompts={"producer_first": "DO THIS: {task}"})
    assert prompt(producer, 0) == f"DO THIS: {TASK}"
    assert set(prompt_templates("peer-review")) - set(ADVERSARY_TEMPLATES) == {"producer_first", "producer_revision",
                                                     "reviewer"}


def test_override_cannot_smuggle_the_task_into_revisions(recording_model):
    producer, reviewer = recording_model(drafts()), recording_model([ACCEPT])
    with pytest.raises(ConfigError) as info:
        review(producer, reviewer, prompts={"producer_revision": "{task}\n{draft}"})
    assert info.value.code == "input" and "task" in str(info.value)
    assert producer.received == [] and reviewer.received == []


@pytest.mark.parametrize("change, code", [
    ({"task": ""}, "input"),
    ({"max_iterations": 0}, "limit"),
    ({"reviewer": None}, "no_model"),
    ({"producer": "nosuchvendor:m"}, "no_model"),
])
def test_validation_errors_raise_before_any_model_call(recording_model, change, code):
    producer, reviewer = recording_model(drafts()), recording_model([ACCEPT])
    kwargs = {"task": TASK, "producer": producer, "reviewer": reviewer, **change}
    with pytest.raises(ConfigError) as info:
        run_peer_review(kwargs.pop("task"), **kwargs)
    assert info.value.code == code
    assert producer.received == [] and reviewer.received == []


def test_arun_peer_review_works_under_asyncio(recording_model):
    producer, reviewer = recording_model(drafts()), recording_model([REJECT, ACCEPT])
    result = asyncio.run(arun_peer_review(TASK, producer=producer, reviewer=reviewer,
                                          retries=0))
    assert result.approved is True and result.iterations_used == 2


def test_result_fields(recording_model):
    producer, reviewer = recording_model(drafts()), recording_model([ACCEPT])
    data = review(producer, reviewer).model_dump()
    for field in ("task", "final_output", "approved", "iterations", "iterations_used",
                  "duration", "turns"):
        assert field in data
    assert set(data["iterations"][0]) >= {"iteration_number", "output", "feedback",
                                          "strengths", "approved", "duration"}


# --------------------------------------------------------------------------- scoring (ANSWER)
QUESTION = "A bat and a ball cost $1.10; the bat costs $1.00 more. What does the ball cost?"


def test_producer_templates_ask_for_an_answer_line_only_when_the_task_has_one(recording_model):
    producer = recording_model(["draft one\nANSWER: 0.10", "draft two\nANSWER: 0.05"])
    reviewer = recording_model([REJECT, ACCEPT])
    review(producer, reviewer, task=QUESTION, max_iterations=2)
    first, revision = prompt(producer, 0), prompt(producer, 1)
    assert "If the task asks for a specific answer" in first and "`ANSWER:" in first
    assert "ends with an `ANSWER:` line, end yours with one too" in revision
    assert QUESTION not in revision  # the seed's rule holds: revisions never see the task


@pytest.mark.parametrize("replies, expected, answer, correct", [
    # approved on the second draft: its ANSWER line is the answer
    ([REJECT, ACCEPT], "0.05", "$0.05", True),
    ([REJECT, ACCEPT], "0.10", "$0.05", False),
    # never approved: the last draft's
    ([REJECT, REJECT, REJECT], "0.05", "0.05", True),
])
def test_a_review_given_expected_is_scored_from_the_final_drafts_answer_line(
        recording_model, store, replies, expected, answer, correct):
    producer = recording_model(["draft one\nANSWER: 0.10", "draft two\n**ANSWER:** $0.05",
                                "draft three quotes ANSWER: 0.10 inline\nANSWER: 0.05"])
    result = review(producer, recording_model(replies), task=QUESTION, max_iterations=3,
                    expected=expected, store=store)
    assert result.answer == answer and result.correct is correct
    assert result.final_output.endswith(answer)  # the draft is kept whole
    assert result.warnings == []
    row = store.runs().iloc[0]
    assert bool(row["correct"]) is correct and row["metrics"]["answer"] == answer


def test_a_review_with_no_answer_line_is_unanswered_with_a_warning_when_expected(
        recording_model):
    result = review(recording_model(drafts()), recording_model([ACCEPT]), task=QUESTION,
                    expected="0.05")
    assert result.answer == ""  # never guessed from the prose
    assert result.correct is False and result.unanswered  # DESIGN 4: no answer is wrong
    assert any("no ANSWER line" in w and "no short answer" in w for w in result.warnings)


def test_a_review_without_expected_is_not_warned_about_its_answer(recording_model):
    result = review(recording_model(drafts()), recording_model([ACCEPT]))
    assert result.answer == "" and result.correct is None and result.warnings == []


def test_a_review_whose_producer_never_answered_is_unanswered(recording_model):
    result = review(recording_model([RuntimeError("down")]), recording_model([ACCEPT]),
                    task=QUESTION, expected="0.05")
    assert result.final_output == "" and result.answer == ""
    assert result.correct is False and result.unanswered


class TestPeerReviewContract(ProtocolContract):
    """The protocol contract (tests/protocol_contract.py), kept by the peer review."""

    protocol = "peer-review"
    run = staticmethod(run_peer_review)
    arun = staticmethod(arun_peer_review)
    options = {"max_iterations": 2}

    question = "Draft a two-sentence apology for a delayed order."  # rejected once: both templates

    def assert_failure_shown(self, result, seat, slot, failure):
        """A failed producer stops the loop with no draft; a failed reviewer approves nothing."""
        assert not result.approved
        if slot == "producer":
            assert result.iterations == [] and result.final_output == ""
            assert any("producer failed" in w for w in result.warnings)
        else:
            assert all(i.feedback.startswith("Review unavailable: ") for i in result.iterations)
