"""Vote baseline (DESIGN 2.4): one independent answer per voter with the panel's prompt."""
import json

import pytest
from protocol_contract import ProtocolContract

from engine import ConfigError, Seat, VoteResult, arun_vote, run_panel, run_vote
from engine.protocols import REGISTRY, estimate, seats_from_config
from engine.protocols import panel as panel_module
from engine.protocols.personas import panel_seats
from engine.protocols.vote import SPEC, TEMPLATES
from engine.reports.runs import result_blocks

Q = "If it takes 5 machines 5 minutes to make 5 widgets, how many minutes would it take " \
    "100 machines to make 100 widgets?"


def voter(recording_model, stance):
    return recording_model(fn=lambda convo: json.dumps(
        {"stance": stance, "answer": f"answer {stance}", "reasoning": "r"}))


def test_each_voter_answers_once_with_the_panels_proposal_prompt(recording_model):
    models = [voter(recording_model, s) for s in ("5", "five", "100", "5 ")]
    seats = [Seat(f"v{i}", m, persona=f"persona {i}") for i, m in enumerate(models)]
    result = run_vote(Q, voters=seats)
    assert isinstance(result, VoteResult)
    assert len(result.turns) == 4 and [len(m.received) for m in models] == [1, 1, 1, 1]
    assert {t.phase for t in result.turns} == {"propose"}
    expected_prompt = panel_module.TEMPLATES["propose"].text.replace("{question}", Q)
    for model in models:
        assert model.received[0][-1] == ("human", expected_prompt)
    assert TEMPLATES["propose"] is panel_module.TEMPLATES["propose"]
    assert result.tally.counts == {"5": 3, "100": 1}
    assert result.confidence.level == "medium" and result.answer == "5"
    metrics = SPEC.metrics(result)
    assert metrics["winner"] == "5" and metrics["voters"] == 4
    assert SPEC.estimate_calls({}, {"voters": 4}) == 4


def test_a_failing_voter_abstains(recording_model):
    seats = [Seat("a", voter(recording_model, "5")), Seat("b", voter(recording_model, "5")),
             Seat("c", recording_model([RuntimeError("down")]))]
    result = run_vote(Q, voters=seats, retries=0, expected="5")
    assert result.tally.abstentions == ["c"] and result.tally.total == 3
    assert result.confidence.level == "medium" and result.correct is True
    assert any("voter c" in w and "abstains" in w for w in result.warnings)


def test_tie_is_low_and_flagged(recording_model):
    seats = [Seat(n, voter(recording_model, s)) for n, s in
             (("a", "x"), ("b", "y"), ("c", "x"), ("d", "y"))]
    result = run_vote("Pick?", voters=seats, expected="y")
    assert result.tally.tied and result.tally.winner == "x"
    assert result.confidence.level == "low" and result.correct is False


@pytest.mark.parametrize("voters, code", [(["simulated"], "limit"), ("simulated", "input"),
                                           ([Seat("a"), Seat("a")], "input")])
def test_bad_voters_raise_before_any_call(voters, code):
    with pytest.raises(ConfigError) as err:
        run_vote("Pick?", voters=voters)
    assert err.value.code == code


def test_registry_and_defaults():
    assert REGISTRY["vote"] is SPEC and SPEC.phases == ("propose",)
    assert [d["name"] for d in SPEC.slots[0].defaults] == ["cautious", "creative", "literal"]
    kwargs = seats_from_config(SPEC, {"protocol": "vote"})
    assert [s.icon for s in kwargs["voters"]] == ["🛡️", "💡", "📏"]
    assert estimate({"protocol": "vote"})["calls"] == 3


def test_the_vote_is_the_panels_first_round_on_the_simulated_model():
    seats = panel_seats("simulated?seed=7")
    vote = run_vote(Q, voters=seats["debaters"])
    panel = run_panel(Q, **seats)
    assert vote.tally == panel.first_round
    assert vote.confidence == panel.first_round_confidence


def test_a_vote_is_stored(store):
    result = run_vote(Q, voters=panel_seats()["debaters"], store=store, expected="5")
    row = store.runs().iloc[0]
    assert row["protocol"] == "vote" and row["status"] == "completed" and row["calls"] == 3
    assert row["metrics"]["winner"] == result.tally.winner
    assert row["metrics"]["confidence_level"] == result.confidence.level
    assert bool(row["correct"]) == (result.tally.winner == "5")
    blocks = result_blocks(store.get(result.run_id))
    assert blocks[0].kind == "metrics" and any(b.title == "Ballots" for b in blocks)
    assert "winner:" in SPEC.summary(result)


class TestVoteContract(ProtocolContract):
    """The protocol contract (tests/protocol_contract.py), kept by the vote."""

    protocol = "vote"
    run = staticmethod(run_vote)
    arun = staticmethod(arun_vote)

    def assert_failure_shown(self, result, seat, slot, failure):
        """A failed voter abstains: counted in the total, never a position."""
        assert result.tally.ballots[seat.name] is None
        assert seat.name in result.tally.abstentions
        assert result.tally.total == len(result.proposals)
