"""The society of minds (DESIGN 2.7, Du et al. 2023): who sees what in every round, the call
count, the per-round tallies, mind changes, `correct`, the limits and the summarise option."""
from __future__ import annotations

import asyncio

import pytest
from protocol_contract import ProtocolContract

from engine import ConfigError, Seat, SocietyResult, arun_society, run_society
from engine.protocols import REGISTRY, estimate
from engine.protocols.society import TEMPLATES, read_answer
from engine.reports.runs import result_blocks

Q = "What is the result of 3+4*5+6-7*2?"


def scripted(recording_model, replies):
    """An agent that gives `replies` in order, one per round."""
    return recording_model(list(replies))


def test_du_three_agents_two_rounds_is_six_calls_and_each_sees_the_others(recording_model):
    models = [scripted(recording_model, r) for r in (
        ["I get \\boxed{15}.", "Still \\boxed{15}."],
        ["It is 30.", "The others convinced me: \\boxed{15}"],
        ["So 15", "15 it is"])]
    seats = [Seat(f"a{i}", m) for i, m in enumerate(models)]
    result = run_society(Q, agents=seats, rounds=2, expected="15")
    assert isinstance(result, SocietyResult)
    assert len(result.turns) == 6 and [len(m.received) for m in models] == [2, 2, 2]
    assert [t.round for t in result.turns].count(1) == 3
    first_prompt = TEMPLATES["answer"].text.replace("{question}", Q)
    for i, model in enumerate(models):
        assert model.received[0] == [("human", first_prompt)]
        second = model.received[1]
        # its own history (question, its own reply), then the others' round-one replies
        assert second[:2] == [("human", first_prompt), ("ai", models[i].script[0])]
        shown = second[2][1]
        for j, other in enumerate(models):
            assert (other.script[0] in shown) == (j != i)
    assert [t.counts for t in result.tallies] == [{"15": 2, "30": 1}, {"15": 3}]
    assert result.first_round == result.tallies[0]
    assert result.answer == "15" and result.correct is True
    assert [(m.agent, m.round, m.before, m.after) for m in result.mind_changes] == [
        ("a1", 2, "30", "15")]
    assert result.confidence is not None and result.confidence.level == "high"
    metrics = REGISTRY[result.protocol].metrics(result)
    assert metrics["answer"] == "15" and metrics["first_answer"] == "15"
    assert metrics["mind_changes"] == 1 and metrics["persuaded"] == 1 and metrics["misled"] == 0


def test_a_round_starts_only_after_the_previous_one_ends(recording_model):
    log: list[tuple[str, int]] = []

    def agent(name):
        def fn(convo):
            log.append((name, len(convo)))
            return f"\\boxed{{{len(convo)}}}"
        return recording_model(fn=fn)

    seats = [Seat(n, agent(n)) for n in ("a", "b", "c", "d")]
    result = run_society(Q, agents=seats, rounds=3)
    assert len(result.turns) == 12
    rounds = [length for _, length in log]
    assert rounds == sorted(rounds) == [1] * 4 + [3] * 4 + [5] * 4


def test_agents_of_a_round_run_concurrently():
    from engine.simulated.model import SimulatedChatModel
    seats = [Seat(f"s{i}", SimulatedChatModel(parley_spec="simulated?latency=0.2",
                                              latency=0.2)) for i in range(4)]
    result = asyncio.run(arun_society(Q, agents=seats, rounds=2))
    assert len(result.turns) == 8 and result.duration < 1.2


def test_wrong_majority_misleads_and_correct_is_false(recording_model):
    models = [scripted(recording_model, r) for r in (
        ["\\boxed{15}", "\\boxed{16}"], ["\\boxed{16}", "\\boxed{16}"],
        ["\\boxed{16}", "\\boxed{16}"])]
    result = run_society(Q, agents=[Seat(f"a{i}", m) for i, m in enumerate(models)],
                         expected="15")
    assert result.answer == "16" and result.correct is False
    metrics = REGISTRY[result.protocol].metrics(result)
    assert metrics["misled"] == 1 and metrics["persuaded"] == 0


def test_a_failing_or_silent_agent_abstains(recording_model):
    seats = [Seat("a", scripted(recording_model, ["\\boxed{7}"])),
             Seat("b", scripted(recording_model, ["\\boxed{7}"])),
             Seat("c", recording_model([RuntimeError("down")])),
             Seat("d", scripted(recording_model, [""]))]
    result = run_society(Q, agents=seats, rounds=1, retries=0)
    t = result.tallies[0]
    assert t.counts == {"7": 2} and t.total == 4 and set(t.abstentions) == {"c", "d"}
    assert any("agent c" in w and "abstains" in w for w in result.warnings)
    assert result.confidence is not None and result.confidence.level == "low"


def test_summarise_gives_the_others_answers_and_counts_not_their_text(recording_model):
    models = [scripted(recording_model, [f"long reasoning {i} ... \\boxed{{{a}}}", "\\boxed{4}"])
              for i, a in enumerate(("4", "4", "5"))]
    seats = [Seat(f"a{i}", m) for i, m in enumerate(models)]
    run_society(Q, agents=seats, rounds=2, summarise=True)
    shown = models[2].received[1][-1][1]
    assert "- 4: 2 agents" in shown and "long reasoning" not in shown
    shown = models[0].received[1][-1][1]
    assert "- 4: 1 agent\n" in shown and "- 5: 1 agent" in shown


@pytest.mark.parametrize("kw, code", [
    ({"agents": ["simulated"]}, "limit"), ({"agents": ["simulated"] * 9}, "limit"),
    ({"agents": ["simulated"] * 2, "rounds": 0}, "limit"),
    ({"agents": ["simulated"] * 2, "rounds": 11}, "limit"),
    ({"agents": ["simulated"] * 2, "summarise": "yes"}, "input")])
def test_limits_are_refused_before_any_call(kw, code):
    with pytest.raises(ConfigError) as err:
        run_society(Q, **kw)
    assert err.value.code in (code, "input", "limit")


def test_limits_at_the_edges_run():
    assert len(run_society(Q, agents=["simulated"] * 2, rounds=1).turns) == 2
    assert len(run_society(Q, agents=["simulated"] * 8, rounds=10).turns) == 80


def test_estimate_is_agents_times_rounds_in_rounds_waves():
    got = estimate({"protocol": "society", "options": {"rounds": 3}})
    assert got["calls"] == 9 and got["waves"] == 3
    assert REGISTRY["society"].rounds_option == "rounds"


def test_the_stored_view_has_a_tally_per_round_and_a_flow_between_rounds(store):
    result = run_society(Q, agents=["simulated"] * 3, rounds=3, expected="15", store=store)
    kinds = [b.kind for b in result_blocks(store.get(result.run_id))]
    assert kinds.count("tally") == 3 and kinds.count("flow") == 2


@pytest.mark.parametrize("reply, answer", [
    ("so \\boxed{1,234} and then 7", "1234"), ("The answer is 42.", "42"),
    ("-3 is it", "-3"), ('{"answer": "My answer is Paris."}', "paris"),
    ("Reasoning...\nFinal answer: Paris", "paris"), ("", "")])
def test_answers_are_read_boxed_first_then_the_last_number_then_the_stance(reply, answer):
    assert read_answer(reply) == answer


class TestSocietyContract(ProtocolContract):
    """The protocol contract (tests/protocol_contract.py), kept by the society of minds."""

    protocol = "society"
    run = staticmethod(run_society)
    arun = staticmethod(arun_society)
    question = Q
    unused_templates = frozenset({"synthesize"})  # synthesize: tests/test_governance.py

    def assert_failure_shown(self, result, seat, slot, failure):
        """A failed agent abstains in every round."""
        for t in result.tallies:
            assert t.ballots[seat.name] is None
