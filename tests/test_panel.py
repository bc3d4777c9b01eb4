"""Persona panel (seed 002) with scripted fakes: phases, prompts, failures, tallies, store."""
import json
import re

import pytest
from protocol_contract import ProtocolContract

from engine import ConfigError, PanelResult, Seat, arun_panel, run_panel
from engine.protocols import REGISTRY, estimate, prompt_templates, seats_from_config
from engine.protocols.adversary import TEMPLATES as ADVERSARY_TEMPLATES
from engine.protocols.panel import SPEC, TEMPLATES
from engine.protocols.personas import CAUTIOUS, CREATIVE, CRITIC, JUDGE, LITERAL, panel_seats
from engine.reports.runs import result_blocks
from engine.views.blocks import Block

Q = "A bat and a ball cost $1.10 in total. The bat costs $1.00 more than the ball. " \
    "How much does the ball cost?"


# --------------------------------------------------------------------------- fakes
def first_user(convo):
    return next(content for role, content in convo if role == "human")


def proposal(stance, why=None):
    return json.dumps({"stance": stance, "answer": f"answer {stance}",
                       "reasoning": why or f"reasoning for {stance}"})


def rebuttal(stance, changed):
    return json.dumps({"stance": stance, "answer": f"final {stance}",
                       "reasoning": f"rebuttal for {stance}", "changed_mind": changed})


def debater_fn(stance, final=None, changed=None):
    """Answers a proposal with `stance` and a rebuttal with `final` (default: hold)."""
    def fn(convo):
        if "changed_mind" in first_user(convo):
            end = stance if final is None else final
            claim = (end != stance) if changed is None else changed
            return rebuttal(end, claim)
        return proposal(stance)
    return fn


def critic_fn(verdicts=None, overall="OVERALL: two of three hold up"):
    def fn(convo):
        names = re.findall(r"^\[(.+?)\] stance:", first_user(convo), re.M)
        return json.dumps({"assessments": [
            {"persona": n, "verdict": (verdicts or {}).get(n, "sound"), "flaw": f"FLAW-{n}"}
            for n in names], "overall": overall})
    return fn


def judge_fn(answer="$0.05", **extra):
    return lambda convo: json.dumps({"answer": answer, "rationale": "because the vote",
                                     "key_points": ["k1", "k2"], **extra})


def make(recording_model, specs, critic=None, judge=None):
    """Seats with recording fakes; `specs` maps a name to a fn or a list of replies."""
    models = {}
    debaters = []
    for name, spec in specs.items():
        models[name] = (recording_model(fn=spec) if callable(spec)
                        else recording_model(list(spec)))
        debaters.append(Seat(name, models[name], persona=f"You are {name}."))
    models["critic"] = critic if critic is not None else recording_model(fn=critic_fn())
    models["judge"] = judge if judge is not None else recording_model(fn=judge_fn())
    seats = {"debaters": debaters, "critic": Seat("critic", models["critic"]),
             "judge": Seat("judge", models["judge"])}
    return seats, models


def standard(recording_model, n=3):
    names = ["cautious", "creative", "literal", "skeptic"][:n]
    specs = {name: debater_fn("$0.05") for name in names}
    specs["creative"] = debater_fn("$0.10", final="0.05")
    return make(recording_model, specs,
                critic=recording_model(fn=critic_fn({"creative": "flawed"})))


# --------------------------------------------------------------------------- calls and flow
@pytest.mark.parametrize("n", [3, 4])
def test_a_panel_makes_exactly_2n_plus_2_calls(recording_model, n):
    seats, models = standard(recording_model, n)
    result = run_panel(Q, **seats)
    assert len(result.turns) == 2 * n + 2
    assert sum(len(m.received) for m in models.values()) == 2 * n + 2
    phases = [t.phase for t in sorted(result.turns, key=lambda t: t.index)]
    assert phases == ["propose"] * n + ["critique"] + ["rebuttal"] * n + ["synthesis"]
    assert all(t.ok for t in result.turns) and result.warnings == []
    assert SPEC.estimate_calls({}, {"debaters": n}) == 2 * n + 2


def test_result_fields_first_round_and_final_tally(recording_model):
    seats, _ = standard(recording_model)
    result = run_panel(Q, **seats)
    assert isinstance(result, PanelResult)
    assert [p.stance for p in result.proposals] == ["$0.05", "$0.10", "$0.05"]
    assert result.first_round.counts == {"0.05": 2, "0.1": 1}
    assert result.first_round_confidence.level == "medium"
    assert result.tally.counts == {"0.05": 3} and result.tally.winner == "0.05"
    assert result.confidence.level == "high" and result.confidence.reason == "unanimous"
    assert result.mind_changes == ["creative"]            # $0.05 held is no change
    assert result.claimed_changes == ["creative"]
    assert [(a.persona, a.verdict) for a in result.critique.assessments] == [
        ("cautious", "sound"), ("creative", "flawed"), ("literal", "sound")]
    assert result.critique.overall.startswith("OVERALL")
    assert (result.answer, result.key_points) == ("$0.05", ["k1", "k2"])
    outcome = REGISTRY[result.protocol].metrics(result)
    assert outcome["winner"] == "0.05" and outcome["confidence_level"] == "high"
    assert outcome["first_round_winner"] == "0.05" and outcome["changed_outcome"] is False
    assert outcome["mind_changes"] == 1 and outcome["critic_flawed"] == 1
    assert result.final_answer() == "0.05"
    json.dumps(result.model_dump(mode="json"))


def test_prompts_carry_question_json_and_the_rebuttal_context(recording_model):
    specs = {"cautious": debater_fn("STANCE-A"), "creative": debater_fn("STANCE-B"),
             "literal": debater_fn("STANCE-C")}
    seats, models = make(recording_model, specs, critic=recording_model(
        fn=critic_fn({"creative": "flawed"}, overall="OVERALL-READ")))
    run_panel(Q, **seats)
    own = {"cautious": "STANCE-A", "creative": "STANCE-B", "literal": "STANCE-C"}
    for name, stance in own.items():
        propose, rebut = (first_user(c) for c in models[name].received)
        assert f"Question: {Q}" in propose and "JSON" in propose and '"stance":' in propose
        # proposals are independent: nobody sees another's proposal in round one
        assert not any(other in propose for other in own.values())
        assert models[name].received[0][0] == ("system", f"You are {name}.")
        assert f"Question: {Q}" in rebut and '"changed_mind":' in rebut
        assert f"Your proposal's stance: {stance}" in rebut
        assert f"Critic's note on your proposal: FLAW-{name}" in rebut
        verdict = "flawed" if name == "creative" else "sound"
        assert f"Critic's verdict on your proposal: {verdict}" in rebut
        assert "Critic's overall read: OVERALL-READ" in rebut
        others = rebut.split("The other debaters' proposals:")[1]
        for other, other_stance in own.items():
            assert (f"[{other}] stance: {other_stance}" in others) == (other != name)
    critique = first_user(models["critic"].received[0])
    assert all(f"[{n}] stance: {s}" in critique for n, s in own.items())
    synthesis = first_user(models["judge"].received[0])
    assert "Leading stance:" in synthesis and f"Question: {Q}" in synthesis
    assert '"confidence"' not in synthesis and '"key_points":' in synthesis


# --------------------------------------------------------------------------- tolerant JSON
@pytest.mark.parametrize("wrap", [
    lambda s: f"```json\n{s}\n```",
    lambda s: f"Here is my answer:\n{s}\nHope that helps.",
    lambda s: f"[{s}]",
])
def test_replies_are_read_tolerantly(recording_model, wrap):
    specs = {n: (lambda convo, n=n: wrap(debater_fn("$0.05")(convo)))
             for n in ("a", "b", "c")}
    seats, models = make(recording_model, specs)
    result = run_panel(Q, **seats)
    assert result.tally.counts == {"0.05": 3} and len(result.turns) == 8
    assert result.warnings == []


def test_garbage_then_a_good_reask_is_used(recording_model):
    specs = {"a": ["I think five cents?", proposal("$0.05"), rebuttal("0.05", False)],
             "b": debater_fn("$0.05"), "c": debater_fn("$0.05")}
    seats, models = make(recording_model, specs)
    result = run_panel(Q, **seats)
    assert len(result.turns) == 9 and len(models["a"].received) == 3
    reask = models["a"].received[1]
    assert reask[-2] == ("ai", "I think five cents?") and "JSON" in reask[-1][1]
    first = [t for t in result.turns if t.seat == "a" and t.phase == "propose"]
    assert first[0].warnings and first[0].status == "ok" and first[1].parsed["stance"] == "$0.05"
    assert result.proposals[0].usable and result.mind_changes == []
    assert result.tally.counts == {"0.05": 3}


def test_garbage_twice_degrades_and_abstains(recording_model):
    specs = {"a": [proposal("$0.05"), "no json here", "still none"],
             "b": debater_fn("$0.05"), "c": debater_fn("$0.05")}
    seats, _ = make(recording_model, specs)
    result = run_panel(Q, **seats)
    failed = [t for t in result.turns if t.seat == "a" and t.phase == "rebuttal"][-1]
    assert failed.status == "degraded" and "after one re-ask" in failed.error
    assert not result.rebuttals[0].usable
    # abstains: counted in total, never a position, and not replaced by its proposal
    assert result.tally.ballots["a"] is None and result.tally.abstentions == ["a"]
    assert result.tally.total == 3 and result.tally.counts == {"0.05": 2}
    assert result.confidence.level == "medium"
    assert any("a: rebuttal failed" in w and "abstains" in w for w in result.warnings)


def test_a_failing_debater_abstains_and_is_counted(recording_model):
    specs = {"a": [RuntimeError("model down")], "b": debater_fn("$0.05"),
             "c": debater_fn("$0.10")}
    seats, _ = make(recording_model, specs)
    result = run_panel(Q, **seats, retries=0)
    assert len(result.turns) == 8
    assert not result.proposals[0].usable and "model down" in result.proposals[0].error
    assert result.first_round.abstentions == ["a"] and result.first_round.total == 3
    assert result.tally.abstentions == ["a"] and result.tally.total == 3
    assert result.tally.tied and result.confidence.level == "low"
    rebut = [t for t in result.turns if t.seat == "b" and t.phase == "rebuttal"][0]
    assert "[a] no usable proposal" in rebut.messages[-1]["content"]
    assert any("a: proposal failed" in w for w in result.warnings)
    assert REGISTRY[result.protocol].metrics(result)["abstentions"] == 1


def test_a_failing_critic_leaves_the_run_complete(recording_model):
    seats, models = make(recording_model, {n: debater_fn("7") for n in "abc"},
                         critic=recording_model([RuntimeError("critic down")]))
    result = run_panel("What is 3 + 4?", **seats, retries=0)
    assert len(result.turns) == 8 and not result.critique.usable
    assert any(w.startswith("critic critic failed") and "critic down" in w
               for w in result.warnings)
    rebut = first_user(models["a"].received[1])
    assert "Critic's verdict on your proposal: unavailable" in rebut
    assert result.tally.winner == "7" and result.answer == "$0.05"


def test_a_critic_missing_a_verdict_or_naming_a_stranger_is_warned(recording_model):
    critic = recording_model(fn=lambda convo: json.dumps({"assessments": [
        {"persona": "A", "verdict": "Flawed.", "flaw": "f"},
        {"persona": "zed", "verdict": "sound", "flaw": ""}], "overall": "o"}))
    seats, models = make(recording_model, {n: debater_fn("x") for n in "abc"}, critic=critic)
    result = run_panel("Pick one?", **seats)
    assert [(a.persona, a.verdict) for a in result.critique.assessments] == [("a", "flawed")]
    assert any("'zed'" in w for w in result.warnings)
    assert any("no verdict on b" in w for w in result.warnings)
    assert "Critic's verdict on your proposal: not assessed" in first_user(
        models["b"].received[1])


def test_a_failing_judge_leaves_the_answer_empty(recording_model):
    seats, _ = make(recording_model, {n: debater_fn("$0.05") for n in "abc"},
                    judge=recording_model([ValueError("judge down")]))
    result = run_panel(Q, **seats, retries=0, expected="0.05")
    assert len(result.turns) == 8 and result.answer == "" and result.key_points == []
    assert any(w.startswith("judge judge failed") and "judge down" in w
               for w in result.warnings)
    assert result.tally.winner == "0.05" and result.correct is True   # the vote stands


def test_a_judge_stating_a_confidence_is_ignored(recording_model):
    seats, _ = make(recording_model, {n: debater_fn("x") for n in "abc"},
                    judge=recording_model(fn=judge_fn("x", confidence=0.99)))
    result = run_panel("Pick?", **seats)
    assert result.confidence.level == "high" and result.confidence.reason == "unanimous"
    assert any("'confidence'" in w and "ignored" in w for w in result.warnings)


def test_no_usable_stance_at_all_skips_the_judge(recording_model):
    seats, models = make(recording_model, {n: ["junk"] for n in "ab"})
    result = run_panel("Pick?", **seats)
    assert result.tally.winner is None and result.confidence.level == "low"
    assert models["judge"].received == [] and models["critic"].received == []
    assert any("judge was not asked" in w for w in result.warnings)


# --------------------------------------------------------------------------- expected answers
def test_expected_answer_sets_correct_and_change_kinds(recording_model):
    specs = {"a": debater_fn("$0.10", final="0.05"), "b": debater_fn("0.05", final="$0.10"),
             "c": debater_fn(".05"), "d": debater_fn("$0.10", final="0.20")}
    seats, _ = make(recording_model, specs)
    result = run_panel(Q, **seats, expected="$0.05")
    assert result.change_kinds == {"a": "persuaded", "b": "misled", "c": "held",
                                   "d": "switched"}
    assert result.tally.counts == {"0.05": 2, "0.1": 1, "0.2": 1}
    assert result.correct is True and result.expected == "$0.05"
    metrics = REGISTRY["panel"].metrics(result)
    assert metrics["persuaded"] == 1 and metrics["misled"] == 1
    wrong = run_panel(Q, **make(recording_model, {n: debater_fn("0.1") for n in "ab"})[0],
                      expected="$0.05")
    assert wrong.correct is False and wrong.change_kinds == {"a": "held", "b": "held"}
    assert run_panel(Q, **make(recording_model, {n: debater_fn("1") for n in "ab"})[0]
                     ).change_kinds == {}


def test_claimed_changes_are_kept_apart_from_measured_ones(recording_model):
    specs = {"a": debater_fn("x", final="x", changed=True),     # claims, did not move
             "b": debater_fn("y", final="x", changed=False),    # moved, denies it
             "c": debater_fn("x", final="X.", changed=False)}   # a rewrite, not a change
    seats, _ = make(recording_model, specs)
    result = run_panel("Pick?", **seats)
    assert result.mind_changes == ["b"] and result.claimed_changes == ["a"]
    assert result.claim_mismatches() == ["a", "b"]
    assert REGISTRY[result.protocol].metrics(result)["changed_outcome"] is False
    assert result.first_round.tied is False and result.first_round.winner == "x"


def test_changed_outcome_when_the_rebuttal_flips_the_vote(recording_model):
    specs = {"a": debater_fn("y"), "b": debater_fn("y", final="x"), "c": debater_fn("x")}
    result = run_panel("Pick?", **make(recording_model, specs)[0])
    assert result.first_round.winner == "y" and result.tally.winner == "x"
    assert REGISTRY[result.protocol].metrics(result)["changed_outcome"] is True


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize("change, code", [
    ({"debaters": ["simulated"]}, "limit"),
    ({"debaters": ["simulated"] * 9}, "limit"),
    ({"debaters": "simulated"}, "input"),
    ({"question": "   "}, "input"),
    ({"critic": None}, "no_model"),
    ({"debaters": [Seat("x", "simulated"), Seat("x", "simulated")]}, "input"),
    ({"critic": Seat("a", "simulated")}, "input"),
    ({"debaters": ["nonsense:model", "simulated"]}, "no_model"),
    ({"rounds": 2}, "input"),
    ({"prompts": {"nope": "x"}}, "input"),
    ({"prompts": {"propose": "Question: {question} {secret}"}}, "input"),
])
def test_bad_arguments_raise_before_any_call(recording_model, change, code):
    spy = recording_model(fn=debater_fn("x"))
    args = {"question": "Pick?", "debaters": [Seat("a", spy), Seat("b", spy)],
            "critic": Seat("critic", spy), "judge": Seat("judge", spy)}
    args.update(change)
    with pytest.raises(ConfigError) as err:
        run_panel(args.pop("question"), **args)
    assert err.value.code == code
    assert spy.received == []


def test_bare_models_become_named_debaters(recording_model):
    spy = recording_model(fn=debater_fn("x"))
    result = run_panel("Pick?", debaters=[spy, spy], critic=recording_model(fn=critic_fn()),
                       judge=recording_model(fn=judge_fn()))
    assert [p.persona for p in result.proposals] == ["debater 1", "debater 2"]
    assert {t.role for t in result.turns} == {"debater", "critic", "judge"}


# --------------------------------------------------------------------------- overrides, events
def test_prompt_overrides_and_events(recording_model):
    seats, models = standard(recording_model)
    seen = []
    custom = 'Question: {question}\nCUSTOM. Reply in JSON: {"stance": "...", "answer": "..."}'
    run_panel(Q, **seats, prompts={"propose": custom}, on_event=seen.append)
    assert first_user(models["cautious"].received[0]).startswith(f"Question: {Q}\nCUSTOM")
    assert len(seen) == 8 and [t.phase for t in seen][-1] == "synthesis"
    names = prompt_templates("panel")
    assert set(names) - set(ADVERSARY_TEMPLATES) == {"propose", "critique", "rebuttal", "synthesis"}
    assert "others" in names["rebuttal"]["placeholders"]
    for template in TEMPLATES.values():
        assert "Question: {question}" in template.text and "JSON" in template.text


# --------------------------------------------------------------------------- registry and store
def test_registry_defaults_are_the_seed_personas():
    assert REGISTRY["panel"] is SPEC
    slots = {s.name: s for s in SPEC.slots}
    assert [d["name"] for d in slots["debaters"].defaults] == ["cautious", "creative",
                                                               "literal"]
    assert [d["icon"] for d in slots["debaters"].defaults] == ["🛡️", "💡", "📏"]
    assert slots["debaters"].defaults[0]["persona"] == CAUTIOUS.prompt
    assert CAUTIOUS.prompt.startswith("You are the CAUTIOUS debater. Risk-averse")
    assert CREATIVE.prompt.endswith("on a question with a definite answer.")
    assert LITERAL.prompt.endswith("read nothing into the question that is not there.")
    assert slots["critic"].defaults[0]["persona"] == CRITIC.prompt
    assert slots["judge"].defaults[0]["persona"] == JUDGE.prompt
    assert (slots["debaters"].minimum, slots["debaters"].maximum) == (2, 8)
    kwargs = seats_from_config(SPEC, {"protocol": "panel", "model": "simulated?seed=3"})
    assert [s.model for s in kwargs["debaters"]] == ["simulated?seed=3"] * 3
    assert kwargs["critic"].name == "critic" and kwargs["judge"].persona == JUDGE.prompt
    assert estimate({"protocol": "panel"})["calls"] == 8
    assert estimate({"protocol": "panel"})["waves"] == 4  # two of the four phases run at once
    assert estimate({"protocol": "panel", "seats": {"debaters": [{"name": n} for n in
                                                                 "abcd"]}})["calls"] == 10


def test_a_panel_is_stored_with_its_metrics_and_turns(recording_model, store):
    seats, _ = standard(recording_model)
    result = run_panel(Q, **seats, store=store, label="unit", expected="$0.05")
    runs = store.runs()
    row = runs.iloc[0]
    assert row["id"] == result.run_id and row["protocol"] == "panel"
    assert row["status"] == "completed" and bool(row["correct"]) is True
    assert row["calls"] == 8 and row["label"] == "unit"
    metrics = row["metrics"]
    assert metrics["winner"] == "0.05" and metrics["confidence_level"] == "high"
    assert metrics["first_round_winner"] == "0.05" and metrics["mind_changes"] == 1
    assert metrics["ratio"] == 1.0 and metrics["tied"] is False
    turns = store.turns(result.run_id)
    assert list(turns["phase"]) == ["propose"] * 3 + ["critique"] + ["rebuttal"] * 3 + [
        "synthesis"]
    assert set(turns["status"]) == {"ok"}
    proposed = turns[turns["phase"] == "propose"].set_index("seat")["parsed"]
    assert proposed["creative"]["stance"] == "$0.10"
    stored = store.get(result.run_id)
    assert stored["result"]["tally"]["counts"] == {"0.05": 3}
    blocks = result_blocks(stored)
    assert all(isinstance(b, Block) for b in blocks)
    kinds = [b.kind for b in blocks]
    assert kinds[0] == "metrics" and kinds.count("table") == 3
    metrics_block = dict(blocks[0].items)
    assert metrics_block["Winner"] == "0.05" and metrics_block["Confidence"].startswith("HIGH")
    rebuttals = next(b for b in blocks if b.title.startswith("Rebuttals"))
    assert [r["changed (measured)"] for r in rebuttals.rows] == [False, True, False]
    assert "winner: 0.05" in SPEC.summary(result)


def test_default_panel_runs_on_the_simulated_model():
    result = run_panel(Q, **panel_seats())
    assert len(result.turns) == 8 and all(t.simulated for t in result.turns)
    assert [p.persona for p in result.proposals] == ["cautious", "creative", "literal"]
    assert [p.icon for p in result.proposals] == ["🛡️", "💡", "📏"]


class TestPanelContract(ProtocolContract):
    """The protocol contract (tests/protocol_contract.py), kept by the panel."""

    protocol = "panel"
    run = staticmethod(run_panel)
    arun = staticmethod(arun_panel)

    def assert_failure_shown(self, result, seat, slot, failure):
        """A failed debater abstains; a failed critic or judge leaves its part empty."""
        if slot == "debaters":
            assert result.tally.ballots[seat.name] is None
            assert not any(p.usable for p in result.proposals if p.persona == seat.name)
        elif slot == "critic":
            assert not result.critique.usable
        else:
            assert result.answer == "" and result.key_points == []
        assert any(seat.name in w for w in result.warnings)
