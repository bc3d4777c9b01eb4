"""Duel (seed 004): alternation, own histories and prompts, convergence, replies, failure."""
import pytest
from protocol_contract import ProtocolContract

from engine import ConfigError, DuelResult, Seat, arun_duel, run_duel
from engine.protocols import REGISTRY, estimate
from engine.protocols.duel import TEMPLATES, agreed
from engine.reports.runs import result_blocks

TOPIC = "Should this API be synchronous?"
OPENING = f"Make your opening statement about: {TOPIC}. 2-3 sentences."


def reply_prompt(text: str) -> str:
    return f'Your opponent just said: "{text}"\n\nRespond briefly, staying in your role.'


def system_prompt(role: str) -> str:
    return (f'You are debating the topic: "{TOPIC}".\n\nYour role: {role}.\n\n'
            "Keep each response to 2-3 sentences. Be direct and specific.\n"
            "Stay in character. Do not summarize the opponent's point --\n"
            "just rebut or extend the argument.")


def numbered(prefix: str):
    """A fake side's reply function: prefix plus how many times it has spoken."""
    return lambda convo: f"{prefix}{sum(1 for kind, _ in convo if kind == 'human')}"


@pytest.fixture
def sides(recording_model):
    return (recording_model(fn=numbered("A")), recording_model(fn=numbered("B")))


def duel(a_model, b_model, **kw):
    kw.setdefault("retries", 0)
    return run_duel(TOPIC, a=Seat("for", a_model), b=Seat("against", b_model), **kw)


# ----------------------------------------------------------------- turns and order
def test_one_round_gives_one_turn_each(sides):
    a, b = sides
    result = duel(a, b, rounds=1)
    assert isinstance(result, DuelResult)
    assert result.transcript == [("for", "A1"), ("against", "B1")]
    assert result.status == "finished" and len(a.received) == len(b.received) == 1
    assert REGISTRY["duel"].metrics(result).items() >= {
        "status": "finished", "turns": 2, "converged": False, "failed_agent": None,
        "outcome": "finished, 2 turns"}.items()


def test_three_rounds_alternate_a_b(sides):
    a, b = sides
    result = duel(a, b)
    assert [name for name, _ in result.transcript] == ["for", "against"] * 3
    assert [text for _, text in result.transcript] == ["A1", "B1", "A2", "B2", "A3", "B3"]
    assert len(a.received) == len(b.received) == 3
    assert [t.phase for t in result.turns] == ["opening"] + ["rebuttal"] * 5
    assert [t.round for t in result.turns] == [1, 1, 2, 2, 3, 3]


@pytest.mark.parametrize("first", ["b", "against", "B"])
def test_first_swaps_the_opener(sides, first):
    a, b = sides
    result = duel(a, b, rounds=2, first=first)
    assert result.transcript == [("against", "B1"), ("for", "A1"), ("against", "B2"),
                                 ("for", "A2")]
    assert b.received[0][-1] == ("human", OPENING)
    assert a.received[0][-1] == ("human", reply_prompt("B1"))


def test_first_by_the_a_seat_name_is_the_default_order(sides):
    a, b = sides
    assert [n for n, _ in duel(a, b, rounds=1, first="for").transcript] == ["for", "against"]


# ----------------------------------------------------------------- what each side sees
def test_each_side_keeps_its_own_system_prompt_and_history(sides):
    a, b = sides
    duel(a, b, rounds=2)
    sys_a, sys_b = system_prompt("optimist arguing in favor"), system_prompt(
        "skeptic arguing against")
    assert a.received[0] == [("system", sys_a), ("human", OPENING)]
    assert b.received[0] == [("system", sys_b), ("human", reply_prompt("A1"))]
    assert a.received[1] == [("system", sys_a), ("human", OPENING), ("ai", "A1"),
                             ("human", reply_prompt("B1"))]
    assert b.received[1] == [("system", sys_b), ("human", reply_prompt("A1")), ("ai", "B1"),
                             ("human", reply_prompt("A2"))]
    # Neither side ever sees the other's system prompt or the other's prompts.
    assert all(sys_b not in content for convo in a.received for _, content in convo)
    assert all(OPENING not in content for convo in b.received for _, content in convo)


def test_seat_roles_and_personas_shape_the_system_prompts(recording_model):
    a, b = recording_model(fn=numbered("A")), recording_model(fn=numbered("B"))
    run_duel(TOPIC, a=Seat("rust", a, role="Rust advocate", persona="Cite benchmarks."),
             b=Seat("cpp", b, role="C++ veteran"), rounds=1)
    assert a.received[0][0] == ("system", system_prompt("Rust advocate") +
                                "\n\nCite benchmarks.")
    assert b.received[0][0] == ("system", system_prompt("C++ veteran"))


def test_one_model_for_both_sides_still_gives_separate_histories(recording_model):
    shared = recording_model(fn=lambda convo: f"said {len(convo)}")
    result = run_duel(TOPIC, a=Seat("x", shared), b=Seat("y", shared), rounds=2)
    assert [len(c) for c in shared.received] == [2, 2, 4, 4]
    assert result.transcript[-1] == ("y", "said 4")


def test_templates_can_be_overridden(sides):
    a, b = sides
    duel(a, b, rounds=1, prompts={"opening": "Open on {topic}.",
                                  "reply": "They said <<{text}>>",
                                  "system": "Role {role}; you are {speaker} vs {opponent}."})
    assert a.received[0] == [("system", "Role optimist arguing in favor; you are for vs "
                                        "against."), ("human", f"Open on {TOPIC}.")]
    assert b.received[0][-1] == ("human", "They said <<A1>>")
    assert set(TEMPLATES) == {"system", "opening", "reply"}


# ----------------------------------------------------------------- convergence and replies
def test_converge_is_checked_from_the_second_turn_only(sides):
    a, b = sides
    seen = []

    def rule(text):
        seen.append(text)
        return True
    result = duel(a, b, converge=rule)
    assert seen == ["B1"]  # never asked about the opening statement
    assert result.status == "converged" and result.transcript == [("for", "A1"),
                                                                   ("against", "B1")]
    assert REGISTRY[result.protocol].metrics(result)["converged"] is True


@pytest.mark.parametrize("value", [1, "yes", [1], "True", object()])
def test_converge_needs_exactly_true(sides, value):
    a, b = sides
    result = duel(a, b, rounds=2, converge=lambda text: value)
    assert result.status == "finished" and len(result.transcript) == 4


def test_converge_on_a_later_turn(sides):
    a, b = sides
    result = duel(a, b, converge=lambda text: text == "A2")
    assert result.status == "converged" and [t for _, t in result.transcript] == [
        "A1", "B1", "A2"]
    assert len(b.received) == 1


def test_agreed_rule(recording_model):
    a = recording_model(["Open.", "Fine, AGREED on that.", "never asked"])
    b = recording_model(["No.", "never asked"])
    result = run_duel(TOPIC, a=Seat("a", a), b=Seat("b", b), converge="agreed")
    assert result.status == "converged" and len(result.transcript) == 3
    assert len(a.received) == 2 and len(b.received) == 1


def test_agreed_on_the_opening_does_not_converge_and_the_word_must_be_whole(recording_model):
    a = recording_model(["AGREED already", "I disagreed before", "we agreed"])
    b = recording_model(["DISAGREED", "x", "y"])
    result = run_duel(TOPIC, a=Seat("a", a), b=Seat("b", b), converge="agreed")
    assert result.status == "finished" and len(result.transcript) == 6
    assert agreed("AGREED.") and agreed("ok, AGREED") and not agreed("agreed")
    assert not agreed("DISAGREED")


def test_reply_transcript_last_and_callable(sides):
    a, b = sides
    assert duel(a, b, rounds=1).reply == "for:\nA1\n\nagainst:\nB1"
    a2, b2 = type(a)(fn=numbered("A")), type(b)(fn=numbered("B"))
    assert duel(a2, b2, rounds=2, reply="last").reply == "B2"
    got = []
    a3, b3 = type(a)(fn=numbered("A")), type(b)(fn=numbered("B"))
    result = duel(a3, b3, rounds=1, reply=lambda t: got.append(t) or f"{len(t)} turns")
    assert got == [[("for", "A1"), ("against", "B1")]] and result.reply == "2 turns"


def test_reply_callable_must_return_text(sides):
    a, b = sides
    with pytest.raises(TypeError, match="must return a string"):
        duel(a, b, rounds=1, reply=lambda t: 42)


# ----------------------------------------------------------------- failure halts both sides
@pytest.mark.parametrize("failing, at", [("a", 1), ("a", 2), ("b", 1), ("b", 3)])
def test_a_failed_turn_halts_both_sides(recording_model, failing, at):
    def side(prefix, fails):
        def reply(convo):
            spoke = sum(1 for kind, _ in convo if kind == "human")
            if fails and spoke == at:
                return RuntimeError("backend down")
            return f"{prefix}{spoke}"
        return recording_model(fn=reply)
    a, b = side("A", failing == "a"), side("B", failing == "b")
    result = duel(a, b, rounds=3)
    name = "for" if failing == "a" else "against"
    assert result.status == "failed" and result.failed_agent == name
    assert "backend down" in result.error
    position = 2 * (at - 1) + (0 if failing == "a" else 1)
    assert len(result.transcript) == position  # everything before the failure is kept
    assert len(a.received) + len(b.received) == position + 1  # nothing after it
    assert REGISTRY[result.protocol].metrics(result)["failed_agent"] == name and result.warnings


def test_an_empty_reply_is_a_failed_turn(recording_model):
    a = recording_model(["A1", "   "])
    b = recording_model(["B1", "B2"])
    result = run_duel(TOPIC, a=Seat("a", a), b=Seat("b", b), reply="last")
    assert (result.status, result.failed_agent, result.error) == ("failed", "a", "empty reply")
    assert result.transcript == [("a", "A1"), ("b", "B1")] and result.reply == "B1"
    assert len(b.received) == 1


# ----------------------------------------------------------------- validation, before any call
@pytest.mark.parametrize("kwargs, code, field", [
    ({"rounds": 0}, "limit", "rounds"),
    ({"rounds": 21}, "limit", "rounds"),
    ({"rounds": "3"}, "input", "rounds"),
    ({"first": "c"}, "input", "first"),
    ({"first": 1}, "input", "first"),
    ({"converge": "done"}, "input", "converge"),
    ({"converge": True}, "input", "converge"),
    ({"reply": "summary"}, "input", "reply"),
    ({"reply": None}, "input", "reply"),
    ({"nonsense": 1}, "input", "nonsense"),
])
def test_bad_options_raise_before_any_call(sides, kwargs, code, field):
    a, b = sides
    with pytest.raises(ConfigError) as info:
        duel(a, b, **kwargs)
    assert info.value.code == code and field in str(info.value)
    assert a.received == [] and b.received == []


def test_rounds_message_names_the_limit(sides):
    with pytest.raises(ConfigError, match=r"rounds must be 1\.\.20 for a duel, got 21"):
        duel(*sides, rounds=21)


def test_same_names_and_missing_models_raise_before_any_call(recording_model):
    a, b = recording_model(["x"]), recording_model(["y"])
    with pytest.raises(ConfigError) as same:
        run_duel(TOPIC, a=Seat("one", a), b=Seat("one", b))
    assert same.value.code == "input" and "'one'" in str(same.value)
    with pytest.raises(ConfigError) as missing:
        run_duel(TOPIC, a=Seat("one", a), b=None)
    assert missing.value.code == "no_model"
    with pytest.raises(ConfigError) as topic:
        run_duel("  ", a=Seat("one", a), b=Seat("two", b))
    assert topic.value.code == "input" and "topic" in str(topic.value)
    assert a.received == [] and b.received == []


# ----------------------------------------------------------------- store, registry, simulated
def test_a_duel_is_stored_with_its_turns(store, sides):
    a, b = sides
    result = duel(a, b, rounds=2, store=store, label="duel-test")
    run = store.get(result.run_id)
    assert run["status"] == "completed" and run["protocol"] == "duel"
    assert run["result"]["transcript"] == [["for", "A1"], ["against", "B1"], ["for", "A2"],
                                           ["against", "B2"]]
    assert run["metrics"]["status"] == "finished" and run["metrics"]["turns"] == 4
    assert len(run["turns"]) == 4
    blocks = result_blocks(run)
    assert [b.kind for b in blocks][:2] == ["metrics", "table"]
    assert blocks[1].rows[0] == {"turn": 1, "speaker": "for", "text": "A1"}


def test_a_failed_duel_is_stored_and_its_view_names_the_failure(store, recording_model):
    a, b = recording_model(["A1"]), recording_model([RuntimeError("down")])
    result = run_duel(TOPIC, a=Seat("a", a), b=Seat("b", b), store=store, retries=0)
    run = store.get(result.run_id)
    assert run["result"]["status"] == "failed" and run["result"]["failed_agent"] == "b"
    assert len(run["turns"]) == 2 and run["turns"][1]["status"] == "degraded"
    blocks = result_blocks(run)
    assert ("Failed agent", "b") in blocks[0].items
    assert any(b.kind == "text" and "down" in b.body for b in blocks)


def test_registry_entry_and_estimate():
    spec = REGISTRY["duel"]
    assert spec.options[0].name == "rounds" and spec.options[0].default == 3
    assert [s.name for s in spec.slots] == ["a", "b"]
    assert estimate({"protocol": "duel"})["calls"] == 6
    assert estimate({"protocol": "duel", "options": {"rounds": 4}})["calls"] == 8


def test_registry_defaults_run_on_the_simulated_model():
    from engine.protocols import arun_config, run_sync
    result = run_sync(arun_config({"protocol": "duel", "options": {"rounds": 1}}, TOPIC))
    assert [n for n, _ in result.transcript] == ["optimist", "skeptic"]
    assert all(t.simulated for t in result.turns)
    assert "optimist arguing in favor" in result.turns[0].messages[0]["content"]


def test_simulated_duel_converges_on_agreed_for_some_seed():
    outcomes = {}
    for seed in range(12):
        model = f"simulated?seed={seed}"
        result = run_duel(TOPIC, a=Seat("pro", model), b=Seat("con", model),
                          converge="agreed")
        outcomes[seed] = result.status
        if result.status == "converged":
            assert "AGREED" in result.transcript[-1][1]
            assert len(result.transcript) >= 2
    assert "converged" in outcomes.values() and "finished" in outcomes.values()
    again = run_duel(TOPIC, a=Seat("pro", "simulated?seed=0"), b=Seat("con", "simulated?seed=0"),
                     converge="agreed")
    assert again.status == outcomes[0]  # seeded: the same seed plays the same duel


class TestDuelContract(ProtocolContract):
    """The protocol contract (tests/protocol_contract.py), kept by the duel."""

    protocol = "duel"
    run = staticmethod(run_duel)
    arun = staticmethod(arun_duel)
    options = {"rounds": 2}

    def assert_failure_shown(self, result, seat, slot, failure):
        """A failed turn halts both sides and names the agent; its text is never invented."""
        assert result.status == "failed" and result.failed_agent == seat.name
        assert result.error and seat.name not in {name for name, _ in result.transcript}
