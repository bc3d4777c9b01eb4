"""Roundtable (seed 003): limits, the worked example, prompts, the floor, the judge, the store."""
import json
from collections import Counter

import pytest
from protocol_contract import ProtocolContract

from engine import (
    ConfigError,
    Exchange,
    RoundtableResult,
    Seat,
    arun_roundtable,
    prompt_templates,
    run_roundtable,
)
from engine.analysis import normalize_stance
from engine.protocols import REGISTRY, arun_config, estimate, run_sync
from engine.protocols.adversary import TEMPLATES as ADVERSARY_TEMPLATES
from engine.protocols.roundtable import parse_stance, role_description, role_name
from engine.reports.runs import result_blocks

QUESTION = "Should we adopt the migration plan?"
SEED_REPLIES = {"Ada": "Adopt the migration plan: the migration plan reduces downtime.",
                "Bo": "The migration plan reduces downtime, so adopt the migration plan."}
JUDGE_OK = {"agreement_level": "strong", "dominant_position": "adopt the plan",
            "dissenting_views": [], "rationale": "Both back the plan."}


def system_of(convo):
    return next(content for kind, content in convo if kind == "system")


def user_of(convo):
    return convo[-1][1]


def by_system(replies):
    """A reply function choosing the reply by whose system prompt it is (the seed's as_agent)."""
    def answer(convo):
        system = system_of(convo)
        return next(text for name, text in replies.items()
                    if system.startswith(f"You are {name},"))
    return answer


def agents_on(model, *pairs):
    return [Seat(name, model, role=role) for name, role in pairs]


# ----------------------------------------------------------------- the seed's worked example
def test_seed_worked_example(recording_model):
    llm = recording_model(fn=by_system(SEED_REPLIES))
    judge = recording_model([json.dumps(JUDGE_OK)])
    agents = agents_on(llm, ("Ada", "proposer"), ("Bo", "critic"))
    result = run_roundtable(QUESTION, agents=agents, rounds=2, judge=Seat("judge", judge))
    assert isinstance(result, RoundtableResult)
    assert len(llm.received) == 4 and len(result.exchanges) == 4
    assert all(isinstance(e, Exchange) and e.usable and not e.degraded for e in result.exchanges)
    assert [(e.agent, e.round) for e in result.exchanges] == [("Ada", 1), ("Bo", 1),
                                                              ("Ada", 2), ("Bo", 2)]
    assert result.agreement.voters == 2 and result.agreement.level == "strong"
    assert result.completion_state == "qualified-draft"
    assert result.judge_status == "applied" and len(judge.received) == 1
    assert result.judge.agreement_level == "strong" and not result.diverged_from_floor
    assert result.judge.dominant_position == "adopt the plan"
    assert "model-agreement" in result.warning_codes
    assert "lexical-only" not in result.warning_codes
    # The seed's replies give no STANCE line: a warning and abstentions, nothing invented.
    assert result.stance_tally.winner is None and result.stance_tally.abstentions == ["Ada", "Bo"]
    assert "missing-stance" in result.warning_codes
    assert all(e.stance is None for e in result.exchanges)
    assert REGISTRY[result.protocol].metrics(result)["agreement_level"] == "strong"
    assert REGISTRY[result.protocol].metrics(result)["judge_status"] == "applied"


def test_a_model_that_returns_nothing_blocks_and_the_judge_is_not_asked(recording_model):
    llm = recording_model(fn=lambda convo: "")
    judge = recording_model([json.dumps(JUDGE_OK)])
    agents = agents_on(llm, ("Ada", "proposer"), ("Bo", "critic"))
    result = run_roundtable(QUESTION, agents=agents, rounds=1, judge=judge)
    assert all(e.degraded and not e.usable and e.response == "" and e.error == "empty reply"
               for e in result.exchanges)
    assert result.completion_state == "blocked-escalated"
    assert judge.received == [] and result.judge_status == "not_run" and result.judge is None
    assert result.agreement.voters == 0 and result.agreement.ignored_turns == 2
    assert result.agreement.level == "none"
    assert "no-content" in result.warning_codes and "degraded-turn" in result.warning_codes
    assert REGISTRY[result.protocol].metrics(result)["completion_state"] == "blocked-escalated"


def test_one_usable_agent_is_still_blocked(recording_model):
    llm = recording_model(fn=lambda convo: "Adopt it.\nSTANCE: adopt"
                          if system_of(convo).startswith("You are Ada,") else "")
    judge = recording_model([json.dumps(JUDGE_OK)])
    result = run_roundtable(QUESTION, agents=agents_on(llm, ("Ada", "proposer"),
                                                       ("Bo", "critic")), judge=judge)
    assert result.completion_state == "blocked-escalated" and judge.received == []
    assert result.agreement.voters == 1 and result.stance_tally.winner == "adopt"


# ----------------------------------------------------------------- limits, before any call
def _check_raises(recording_model, code, field, **kw):
    llm, judge = recording_model(["x"]), recording_model(["{}"])
    kw.setdefault("agents", agents_on(llm, ("Ada", "proposer"), ("Bo", "critic")))
    with pytest.raises(ConfigError) as info:
        run_roundtable(kw.pop("question", QUESTION), judge=Seat("judge", judge), **kw)
    assert info.value.code == code and field in str(info.value)
    assert llm.received == [] and judge.received == []
    return str(info.value)


@pytest.mark.parametrize("rounds", [0, 4])
def test_rounds_outside_1_to_3_raise(recording_model, rounds):
    message = _check_raises(recording_model, "limit", "rounds", rounds=rounds)
    assert message == f"rounds must be 1..3 for a roundtable, got {rounds}"


@pytest.mark.parametrize("rounds", [1, 3])
def test_rounds_at_the_limits_run(recording_model, rounds):
    llm = recording_model(fn=lambda convo: "fine\nSTANCE: yes")
    result = run_roundtable(QUESTION, agents=agents_on(llm, ("Ada", "proposer"),
                                                       ("Bo", "critic")), rounds=rounds)
    assert len(llm.received) == 2 * rounds and len(result.exchanges) == 2 * rounds


@pytest.mark.parametrize("count", [0, 6])
def test_agent_counts_outside_1_to_5_raise(recording_model, count):
    llm = recording_model(["x"])
    agents = [Seat(f"a{i}", llm, role="critic") for i in range(count)]
    message = _check_raises(recording_model, "limit", "agents", agents=agents)
    assert message == f"agents must be 1..5 seats for a roundtable, got {count}"
    assert llm.received == []


@pytest.mark.parametrize("count", [1, 5])
def test_agent_counts_at_the_limits_run(recording_model, count):
    llm = recording_model(fn=lambda convo: "fine\nSTANCE: yes")
    agents = [Seat(f"a{i}", llm, role="critic") for i in range(count)]
    result = run_roundtable(QUESTION, agents=agents)
    assert len(llm.received) == count
    assert result.completion_state == ("qualified-draft" if count >= 2 else "blocked-escalated")


def test_duplicate_names_raise(recording_model):
    llm = recording_model(["x"])
    message = _check_raises(recording_model, "input", "'Ada'",
                            agents=agents_on(llm, ("Ada", "proposer"), ("Ada", "critic")))
    assert "unique" in message and llm.received == []


@pytest.mark.parametrize("seat", [Seat("Bo", None, role="critic"), Seat("Bo", "", role="critic"),
                                  None])
def test_an_agent_without_a_model_raises(recording_model, seat):
    llm = recording_model(["x"])
    _check_raises(recording_model, "no_model", "agents[2]",
                  agents=[Seat("Ada", llm, role="proposer"), seat])
    assert llm.received == []


@pytest.mark.parametrize("kw, code, field", [
    ({"rounds": "2"}, "input", "rounds"),
    ({"context": 5}, "input", "context"),
    ({"agents": "Ada"}, "input", "agents"),
    ({"question": " "}, "input", "question"),
    ({"prompts": {"nope": "x"}}, "input", "nope"),
    ({"prompts": {"turn": "{question} {verdict}"}}, "input", "verdict"),
    ({"moderator": "x"}, "input", "moderator"),
])
def test_other_bad_input_raises(recording_model, kw, code, field):
    _check_raises(recording_model, code, field, **kw)


def test_a_judge_without_a_model_raises(recording_model):
    llm = recording_model(["x"])
    with pytest.raises(ConfigError) as info:
        run_roundtable(QUESTION, agents=agents_on(llm, ("Ada", "proposer")),
                       judge=Seat("judge", None))
    assert info.value.code == "no_model" and llm.received == []


# ----------------------------------------------------------------- prompts
def test_prompts_hold_question_context_and_earlier_usable_turns(recording_model):
    def answer(convo):
        system = system_of(convo)
        speaker = system.split(",")[0].removeprefix("You are ")
        calls[speaker] = calls.get(speaker, 0) + 1
        if speaker == "Bo" and calls[speaker] == 1:
            return RuntimeError("provider down")
        return f"{speaker} turn {calls[speaker]}\nSTANCE: {speaker.lower()}"
    calls = {}
    llm = recording_model(fn=answer)
    agents = [Seat("Ada", llm, role="proposer", persona="Speak plainly."),
              Seat("Bo", llm, role="devil's advocate"),
              Seat("Cy", llm, role="a cautious CFO")]
    result = run_roundtable(QUESTION, agents=agents, rounds=2, context="Budget is fixed.",
                            retries=0)
    first, second, third, fourth = llm.received[:4]
    assert system_of(first).startswith("You are Ada, the proposer:")
    assert system_of(first).endswith("\n\nSpeak plainly.")
    assert system_of(second).startswith("You are Bo, the devil's advocate:")
    assert system_of(third).startswith("You are Cy, a cautious CFO.")
    for convo in llm.received:
        assert f"Question: {QUESTION}" in user_of(convo)
        assert "Context: Budget is fixed." in user_of(convo)
        assert "STANCE:" in user_of(convo)
    assert "(none yet" in user_of(first)
    assert "Ada turn 1" in user_of(second)
    assert "Ada turn 1" in user_of(third) and "provider down" not in user_of(third)
    assert "[round 1] Bo" not in user_of(fourth)  # the degraded turn is left out
    assert "[round 1] Cy (a cautious CFO):\nCy turn 1" in user_of(fourth)
    bo = result.exchanges[1]
    assert (bo.degraded, bo.usable, bo.response, bo.role) == (True, False, "", "devil_advocate")
    assert "provider down" in bo.error
    assert [e.stance for e in result.exchanges] == ["ada", None, "cy", "ada", "bo", "cy"]
    assert result.agreement.voters == 3  # Bo's round-2 turn is its last usable one


def test_templates_can_be_overridden_and_are_listed(recording_model):
    llm = recording_model(fn=lambda convo: "ok\nSTANCE: yes")
    run_roundtable(QUESTION, agents=agents_on(llm, ("Ada", "verifier")),
                   prompts={"turn": "Q={question} R={round}/{rounds} as {role} T={transcript}",
                            "system": "You are {agent}, {role}!"})
    assert llm.received[0] == [("system", "You are Ada, " + role_description("verifier") + "!"),
                               ("human", f"Q={QUESTION} R=1/1 as "
                                         + role_description("verifier")
                                         + " T=(none yet: you speak first)")]
    listed = prompt_templates("roundtable")
    assert set(listed) - set(ADVERSARY_TEMPLATES) == {"system", "turn", "judge"}
    assert "question" in listed["judge"]["placeholders"]


def test_role_names_and_descriptions():
    assert role_name("Devil's Advocate") == "devil_advocate"
    assert role_name("synthesizer") == "synthesiser"
    assert role_name("a cautious CFO") == "a cautious CFO"
    assert role_description("") .startswith("a participant")
    assert role_description("verifier").startswith("the verifier:")


@pytest.mark.parametrize("text, stance", [
    ("Adopt.\nSTANCE: adopt the plan", "adopt the plan"),
    ("**STANCE:** Adopt", "Adopt"),
    ("stance: second\nmore\nSTANCE: Second.", "Second."),  # one stance, said twice
    ("stance: first\nmore\nSTANCE: second", None),  # two different ones: a hedge
    ("No stance line here.", None),
    ("STANCE:   ", None),
])
def test_parse_stance(text, stance):
    fields, warnings = parse_stance(text)
    assert fields == {"stance": stance}
    assert bool(warnings) == (stance is None)


def test_stance_tally_and_confidence_beside_the_floor(recording_model):
    replies = {"Ada": "Adopt the plan now.\nSTANCE: yes", "Bo": "Agreed, adopt.\nSTANCE: Yes.",
               "Cy": "I am not sure at all.\nSTANCE: no"}
    llm = recording_model(fn=by_system(replies))
    result = run_roundtable(QUESTION, agents=agents_on(llm, ("Ada", "proposer"),
                                                       ("Bo", "critic"), ("Cy", "verifier")))
    assert result.stance_tally.counts == {"yes": 2, "no": 1}
    assert result.stance_tally.winner == "yes" and result.final_answer() == "yes"
    assert result.stance_confidence.level == "medium"
    assert REGISTRY[result.protocol].metrics(result)["stance_winner"] == "yes"
    assert REGISTRY[result.protocol].metrics(result)["stance_confidence"] == "medium"
    assert "lexical-only" in result.warning_codes and result.judge_status == "not_run"


def test_a_missing_stance_is_a_turn_warning_and_an_abstention(recording_model):
    llm = recording_model(fn=by_system({"Ada": "x\nSTANCE: yes", "Bo": "no line"}))
    result = run_roundtable(QUESTION, agents=agents_on(llm, ("Ada", "proposer"),
                                                       ("Bo", "critic")))
    assert result.turns[1].warnings and not result.turns[0].warnings
    assert result.stance_tally.abstentions == ["Bo"]
    assert any(w.startswith("missing-stance: Bo") for w in result.warnings)


# ----------------------------------------------------------------- the judge
def _judged(recording_model, judge_replies, replies=None):
    llm = recording_model(fn=by_system(replies or SEED_REPLIES))
    judge = recording_model(judge_replies)
    result = run_roundtable(QUESTION, agents=agents_on(llm, ("Ada", "proposer"),
                                                       ("Bo", "critic")),
                            judge=Seat("judge", judge), retries=0)
    return result, judge


def test_judge_sees_each_agents_final_turn(recording_model):
    result, judge = _judged(recording_model, [json.dumps(JUDGE_OK)])
    prompt = user_of(judge.received[0])
    assert SEED_REPLIES["Ada"] in prompt and SEED_REPLIES["Bo"] in prompt
    assert '"agreement_level"' in prompt and QUESTION in prompt
    assert result.turns[-1].phase == "judge"


def test_judge_malformed_twice_is_degraded_and_the_floor_stands(recording_model):
    result, judge = _judged(recording_model, ["I think they agree.", "Still no JSON."])
    assert len(judge.received) == 2  # one bounded re-ask
    assert result.judge_status == "degraded" and result.judge is None
    assert result.agreement.level == "strong" and not result.diverged_from_floor
    assert "judge-failed" in result.warning_codes
    assert result.completion_state == "qualified-draft"
    assert result.turns[-1].status == "degraded"


def test_judge_missing_agreement_level_is_asked_again(recording_model):
    first = json.dumps({k: v for k, v in JUDGE_OK.items() if k != "agreement_level"})
    result, judge = _judged(recording_model, [first, "```json\n" + json.dumps(
        {**JUDGE_OK, "agreement_level": "Moderate"}) + "\n```"])
    assert len(judge.received) == 2 and "agreement_level" in user_of(judge.received[1])
    assert result.judge_status == "applied" and result.judge.agreement_level == "moderate"
    assert result.diverged_from_floor and "judge-diverged" in result.warning_codes


@pytest.mark.parametrize("level", ["certain", "", None, 3])
def test_judge_level_outside_the_four_is_unusable(recording_model, level):
    bad = json.dumps({**JUDGE_OK, "agreement_level": level})
    result, _ = _judged(recording_model, [bad, bad])
    assert result.judge_status == "degraded"


def test_judge_call_failure_is_degraded(recording_model):
    result, judge = _judged(recording_model, [RuntimeError("judge down")])
    assert len(judge.received) == 1 and result.judge_status == "degraded"
    assert "judge down" in next(w for w in result.warnings if w.startswith("judge-failed"))


def test_judge_disagreeing_with_the_floor_is_flagged(recording_model):
    result, _ = _judged(recording_model, [json.dumps({**JUDGE_OK, "agreement_level": "none",
                                                       "dissenting_views": ["Bo: wait"]})])
    assert result.diverged_from_floor and REGISTRY["roundtable"].metrics(result)["diverged"]
    assert result.judge.dissenting_views == ["Bo: wait"]
    assert "judge-diverged" in result.warning_codes
    assert result.completion_state == "qualified-draft"


def test_judges_own_confidence_and_state_are_never_read(recording_model):
    result, _ = _judged(recording_model, [json.dumps(
        {**JUDGE_OK, "completion_state": "blocked-escalated", "confidence": 0.01})])
    assert result.completion_state == "qualified-draft"
    assert "confidence" not in result.judge.model_dump()


def test_judge_with_only_the_level_is_applied_with_warnings(recording_model):
    result, _ = _judged(recording_model, ['{"agreement_level": "strong"}'])
    assert result.judge_status == "applied" and result.judge.dominant_position == ""
    assert any("dominant_position" in w for w in result.turns[-1].warnings)


def test_one_model_note_when_agents_share_a_model(recording_model):
    result, _ = _judged(recording_model, [json.dumps(JUDGE_OK)])
    note = next(w for w in result.warnings if w.startswith("model-agreement"))
    assert "one model" in note
    llm_a = recording_model(fn=lambda c: SEED_REPLIES["Ada"])
    llm_b = recording_model(fn=lambda c: SEED_REPLIES["Bo"])
    apart = run_roundtable(QUESTION, agents=[Seat("Ada", llm_a), Seat("Bo", llm_b)],
                           judge=recording_model([json.dumps(JUDGE_OK)]))
    note = next(w for w in apart.warnings if w.startswith("model-agreement"))
    assert "All agents ran on one model" not in note


# ----------------------------------------------------------------- store, registry, events
def test_a_roundtable_is_stored_with_its_turns_and_view(store, recording_model):
    llm = recording_model(fn=by_system({"Ada": SEED_REPLIES["Ada"] + "\nSTANCE: adopt",
                                        "Bo": SEED_REPLIES["Bo"] + "\nSTANCE: adopt"}))
    judge = recording_model([json.dumps(JUDGE_OK)])
    events = []
    result = run_roundtable(QUESTION, agents=agents_on(llm, ("Ada", "proposer"),
                                                       ("Bo", "critic")),
                            rounds=2, judge=judge, store=store, label="rt",
                            on_event=lambda t: events.append((t.phase, t.seat, t.round)))
    assert events == [("turn", "Ada", 1), ("turn", "Bo", 1), ("turn", "Ada", 2),
                      ("turn", "Bo", 2), ("judge", "judge", 3)]
    run = store.get(result.run_id)
    assert run["status"] == "completed" and run["protocol"] == "roundtable"
    assert len(run["turns"]) == 5
    assert run["result"]["agreement"]["level"] == "strong"
    assert run["result"]["stance_tally"]["winner"] == "adopt"
    assert run["metrics"]["completion_state"] == "qualified-draft"
    assert run["metrics"]["judge_status"] == "applied"
    blocks = result_blocks(run)
    metrics = dict(blocks[0].items)
    assert metrics["Agreement (lexical floor)"] == "strong"
    assert metrics["Stance winner"] == "adopt" and metrics["State"] == "qualified-draft"
    table = next(b for b in blocks if b.title == "Exchanges")
    assert len(table.rows) == 4 and table.rows[0]["agent"] == "Ada"
    assert RoundtableResult.model_validate(run["result"]).agreement.level == "strong"


def test_registry_defaults_and_estimate():
    spec = REGISTRY["roundtable"]
    assert spec.options[0].name == "rounds" and spec.options[0].default == 1
    assert estimate({"protocol": "roundtable"})["calls"] == 3
    assert estimate({"protocol": "roundtable", "options": {"rounds": 2},
                     "seats": {"judge": {"model": "simulated"}}})["calls"] == 7
    result = run_sync(arun_config({"protocol": "roundtable"}, QUESTION))
    assert [e.agent for e in result.exchanges] == ["Ada", "Bo", "Cy"]
    assert [e.role for e in result.exchanges] == ["proposer", "critic", "devil_advocate"]
    assert all(t.simulated for t in result.turns)


# ----------------------------------------------------------------- the simulated model
def _majority(stances):
    """The most common stance; a tie goes to the smallest, as the tally (and the simulated
    model) break it."""
    counts = Counter(s.lower() for s in stances)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if stances else None


@pytest.mark.parametrize("seed", range(4))
def test_simulated_devil_dissents_and_synthesiser_converges(seed):
    model = f"simulated?seed={seed}"
    agents = [Seat("Ada", model, role="proposer"), Seat("Bo", model, role="critic"),
              Seat("Cy", model, role="devil_advocate"), Seat("Di", model, role="synthesiser")]
    result = run_roundtable(QUESTION, agents=agents, rounds=2)
    assert all(e.usable and e.stance for e in result.exchanges)
    for index, exchange in enumerate(result.exchanges):
        latest = {}
        for earlier in result.exchanges[:index]:
            latest[earlier.agent] = earlier.stance
        latest.pop(exchange.agent, None)
        majority = _majority(list(latest.values()))
        if exchange.role == "devil_advocate" and majority:
            assert exchange.stance.lower() != majority
        if exchange.role == "synthesiser":
            assert exchange.stance.lower() == majority
    assert "Cy" in result.agreement.dissent and "Di" in result.agreement.dominant
    again = run_roundtable(QUESTION, agents=agents, rounds=2)
    assert [e.response for e in again.exchanges] == [e.response for e in result.exchanges]


def test_simulated_judge_reads_the_final_stances():
    """The simulated judge reads each agent's final stance from its task, not the prompt."""
    model = "simulated?seed=0"
    agents = [Seat(n, model, role=r) for n, r in (("Ada", "proposer"), ("Bo", "critic"),
                                                  ("Cy", "devil_advocate"),
                                                  ("Di", "synthesiser"), ("Ed", "verifier"))]
    result = run_roundtable(QUESTION, agents=agents, judge=model)
    reading = result.judge
    assert reading is not None and reading.agreement_level in ("none", "weak", "moderate",
                                                               "strong")
    assert normalize_stance(reading.dominant_position) == result.stance_tally.winner
    assert {normalize_stance(v) for v in reading.dissenting_views} == set(
        result.stance_tally.counts) - {result.stance_tally.winner}


class TestRoundtableContract(ProtocolContract):
    """The protocol contract (tests/protocol_contract.py), kept by the roundtable."""

    protocol = "roundtable"
    run = staticmethod(run_roundtable)
    arun = staticmethod(arun_roundtable)
    options = {"rounds": 2}

    def assert_failure_shown(self, result, seat, slot, failure):
        """A failed agent's turns are kept empty and degraded; a failed judge leaves the floor."""
        if slot == "agents":
            own = [e for e in result.exchanges if e.agent == seat.name]
            assert own and all(e.degraded and not e.usable and e.response == "" for e in own)
            assert seat.name not in {e.agent for e in result.exchanges if e.usable}
        else:
            assert result.judge is None and result.judge_status == "degraded"
