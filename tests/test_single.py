"""The single agent (Du et al. 2023's baseline, with and without self-reflection): the call
count, what each round's messages hold, the answer read from each round, the signals, the
limits, and the protocol contract."""
from __future__ import annotations

import pytest
from protocol_contract import ProtocolContract

from engine import ConfigError, Seat, SingleResult, arun_single, run_single
from engine.protocols import REGISTRY, estimate
from engine.protocols.single import TEMPLATES
from engine.protocols.society import TEMPLATES as SOCIETY
from engine.reports.runs import result_blocks

Q = "What is the result of 3+4*5+6-7*2?"
FIRST = SOCIETY["answer"].text.replace("{question}", Q)
REFLECT = TEMPLATES["reflect"].text


def test_one_round_is_one_call_with_the_societys_answer_prompt(recording_model):
    model = recording_model(["Working it out: \\boxed{15}"])
    result = run_single(Q, agent=Seat("solo", model), expected="15")
    assert isinstance(result, SingleResult)
    assert model.received == [[("human", FIRST)]]
    assert TEMPLATES["answer"] is SOCIETY["answer"]
    assert result.answer == "15" and result.correct is True
    assert [(r.round, r.answer) for r in result.replies] == [(1, "15")]
    metrics = REGISTRY[result.protocol].metrics(result)
    assert metrics["round_answers"] == ["15"] and metrics["first_answer"] == "15"
    assert metrics["mind_changes"] is None and metrics["seats"] is None


def test_reflection_asks_again_in_the_agents_own_conversation(recording_model):
    model = recording_model(["I get \\boxed{30}.", "Checking again, it is \\boxed{15}.",
                             "Yes: \\boxed{15}"])
    result = run_single(Q, agent=Seat("solo", model), rounds=3, expected="15")
    assert len(result.turns) == 3 and len(model.received) == 3
    assert REFLECT.startswith("Can you double check that your answer is correct. "
                              "Please reiterate your answer")
    assert "\\boxed{...}" in REFLECT
    assert model.received[0] == [("human", FIRST)]
    # round two: the first prompt, its own reply, then the reflection prompt; nothing else
    assert model.received[1] == [("human", FIRST), ("ai", "I get \\boxed{30}."),
                                 ("human", REFLECT)]
    assert model.received[2] == [*model.received[1], ("ai", "Checking again, it is \\boxed{15}."),
                                 ("human", REFLECT)]
    assert [t.phase for t in result.turns] == ["answer", "reflect", "reflect"]
    assert [r.answer for r in result.replies] == ["30", "15", "15"]
    assert result.answer == "15" and result.correct is True
    assert [(m.round, m.before, m.after) for m in result.mind_changes] == [(2, "30", "15")]
    metrics = REGISTRY[result.protocol].metrics(result)
    assert metrics["round_answers"] == ["30", "15", "15"]
    assert metrics["answer"] == "15" and metrics["first_answer"] == "30"
    assert metrics["seats"] == 1 and metrics["mind_changes"] == 1
    assert metrics["persuaded"] == 1 and metrics["misled"] == 0
    assert metrics["wrong_before"] == 1 and metrics["wrong_to_right"] == 1
    assert metrics["right_before"] == 1 and metrics["right_to_wrong"] == 0


def test_the_answer_is_the_last_rounds_even_when_reflection_makes_it_wrong(recording_model):
    model = recording_model(["\\boxed{15}", "On reflection \\boxed{16}"])
    result = run_single(Q, agent=Seat("solo", model), rounds=2, expected="15")
    assert result.answer == "16" and result.correct is False
    metrics = REGISTRY[result.protocol].metrics(result)
    assert metrics["misled"] == 1 and metrics["right_to_wrong"] == 1


def test_a_failed_round_abstains_and_the_agent_still_reflects(recording_model):
    model = recording_model([RuntimeError("down"), "\\boxed{15}"])
    result = run_single(Q, agent=Seat("solo", model), rounds=2, retries=0)
    assert [r.answer for r in result.replies] == ["", "15"]
    assert result.answer == "15" and any("round 1" in w for w in result.warnings)
    assert model.received[1][1][0] == "ai"  # the failed round stands in its conversation


def test_the_simulated_agent_reflects_without_others():
    result = run_single(Q, agent="simulated", rounds=2, expected="15")
    assert len(result.turns) == 2 and all(t.ok for t in result.turns)
    assert result.replies[1].answer == result.replies[0].answer


def test_estimate_is_one_call_per_round_one_after_another():
    got = estimate({"protocol": "single", "options": {"rounds": 2}})
    assert got["calls"] == 2 and got["waves"] == 2
    assert estimate({"protocol": "single"})["calls"] == 1
    assert REGISTRY["single"].rounds_option == "rounds"


def test_the_stored_view_lists_the_answer_of_every_round(store):
    result = run_single(Q, agent="simulated", rounds=2, expected="15", store=store)
    blocks = result_blocks(store.get(result.run_id))
    table = next(b for b in blocks if b.kind == "table")
    assert [row["round"] for row in table.rows] == [1, 2]


@pytest.mark.parametrize("kw", [{"rounds": 0}, {"rounds": 11}, {"rounds": "2"}])
def test_limits_are_refused_before_any_call(kw, recording_model):
    model = recording_model(["\\boxed{1}"])
    with pytest.raises(ConfigError):
        run_single(Q, agent=Seat("solo", model), **kw)
    assert model.received == []


class TestSingleContract(ProtocolContract):
    """The protocol contract (tests/protocol_contract.py), kept by the single agent."""

    protocol = "single"
    run = staticmethod(run_single)
    arun = staticmethod(arun_single)
    question = Q
    options = {"rounds": 2}
    unused_templates = frozenset({"judge_answers"})  # the answers-only judge's: test_rejudge

    def assert_failure_shown(self, result, seat, slot, failure):
        """A failed agent abstains in every round."""
        assert all(r.answer == "" and r.error for r in result.replies)
        assert result.answer == "" and result.final_answer() is None
