"""The simulated model: a declared world (skill, conformity, persuasion, seed) whose only truth
is a run's `expected` answer, read from the structure of each task, never from wording.

Tests of its agent dynamics are named `test_dynamics_*` and state the parameters they use.
"""
import ast
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

import engine.questions
import engine.questions.bundled
from engine import (
    ConfigError,
    Seat,
    get_model,
    run_debate,
    run_duel,
    run_panel,
    run_peer_review,
    run_roundtable,
    run_vote,
)
from engine.analysis.stances import normalize_stance
from engine.models import Task
from engine.protocols import REGISTRY
from engine.protocols.personas import panel_seats
from engine.questions import DEFINITE, OPEN
from engine.simulated import SimulatedChatModel, World
from engine.simulated.model import UNTASKED
from engine.simulated.world import NEUTRAL, distractors

ROOT = Path(__file__).resolve().parent.parent
BAT = DEFINITE[0]
VC = OPEN[0]
EXPECTED = ("$0.05", "42", "Paris", "yes", "3.5%", "1,200")


def sim(**params):
    """A simulated model spec with these parameters."""
    return "simulated?" + "&".join(f"{k}={v}" for k, v in sorted(params.items()))


def replies(result):
    """(phase, seat, reply) of every turn, in the order the turns were numbered."""
    return [(t.phase, t.seat, t.reply) for t in sorted(result.turns, key=lambda t: t.index)]


def voters(model, n=5):
    return [Seat(f"voter {i}", model) for i in range(1, n + 1)]


# --------------------------------------------------------------------------- the declared world
def test_parameters_have_documented_defaults_and_come_from_the_spec():
    assert SimulatedChatModel().world == World(skill=0.7, conformity=0.3, persuasion=0.4,
                                                seed=0)
    model = get_model("simulated?skill=0.6&conformity=0.3&persuasion=0.5&seed=3")
    assert model.world == World(skill=0.6, conformity=0.3, persuasion=0.5, seed=3)
    doc = (ROOT / "engine/simulated/model.py").read_text()
    for name, default in (("skill", 0.7), ("conformity", 0.3), ("persuasion", 0.4)):
        assert f"`{name}` (default {default})" in doc


@pytest.mark.parametrize("spec, name", [
    ("simulated?skill=1.5", "skill"), ("simulated?conformity=-0.1", "conformity"),
    ("simulated?persuasion=lots", "persuasion"), ("simulated?fail=2", "fail"),
    ("simulated?wisdom=1", "wisdom")])
def test_a_bad_parameter_is_a_config_error_naming_it(spec, name):
    with pytest.raises(ConfigError) as caught:
        get_model(spec)
    assert name in str(caught.value)


def test_every_reply_carries_its_world_and_an_untasked_call_says_it_is_simulated():
    model = get_model("simulated?skill=0.2&seed=4")
    task = Task(kind="answer", keys=("stance",), seat="x", expected="7")
    reply = model.invoke([HumanMessage(content="anything")],
                         config={"metadata": {"parley_task": task.model_dump()}})
    assert reply.response_metadata["simulated"] is True
    assert reply.response_metadata["world"] == {"skill": 0.2, "conformity": 0.3,
                                                "persuasion": 0.4, "seed": 4}
    assert set(__import__("json").loads(reply.content)) == {"stance"}
    bare = model.invoke([HumanMessage(content='Reply in JSON: {"stance": "..."}')])
    assert bare.content == UNTASKED and "simulated" in bare.content
    assert bare.response_metadata["simulated"] is True


def test_distractors_come_from_the_expected_answer_alone():
    assert distractors("$0.05") == ["$0.10", "$0.50", "$1.05"]
    assert distractors("42") == ["43", "84", "41"]
    assert distractors("yes")[0] == "no"
    for expected in EXPECTED:
        wrong = distractors(expected)
        assert len(wrong) == 3
        assert all(normalize_stance(w) != normalize_stance(expected) for w in wrong)


def test_without_expected_agents_draw_among_neutral_positions():
    result = run_vote(BAT.text, voters=voters("simulated", 8))
    assert {p.stance for p in result.proposals} <= set(NEUTRAL)


def test_the_simulator_never_imports_the_answer_key_or_names_a_protocol():
    for path in (ROOT / "engine/simulated").glob("*.py"):
        assert len(path.read_text().splitlines()) <= 400, path
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("engine.questions"), path
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("engine.questions") for a in node.names)
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value not in REGISTRY, (path, node.value)


# --------------------------------------------------------------------------- what it reads
def _every_protocol(question, model, expected, prompts=None):
    """One run of each protocol on `model`, with `expected` and optional prompt overrides."""
    extra = {"expected": expected}
    chosen = lambda name: {"prompts": prompts[name]} if prompts else {}  # noqa: E731
    seats = [Seat(n, model, role=r) for n, r in (("Ada", "proposer"), ("Bo", "critic"),
                                                  ("Cy", "devil_advocate"),
                                                  ("Di", "synthesiser"), ("Ed", "verifier"))]
    return {
        "panel": run_panel(question, **panel_seats(model), **extra, **chosen("panel")),
        "vote": run_vote(question, voters=voters(model), **extra, **chosen("vote")),
        "debate": run_debate(question, proponent=Seat("pro", model),
                             opponent=Seat("con", model), judge=Seat("judge", model),
                             max_rounds=2, **extra, **chosen("debate")),
        "peer-review": run_peer_review(question, producer=Seat("writer", model),
                                       reviewer=Seat("editor", model), **extra,
                                       **chosen("peer-review")),
        "duel": run_duel(question, a=Seat("a", model), b=Seat("b", model), rounds=3,
                         converge="agreed", **extra, **chosen("duel")),
        "roundtable": run_roundtable(question, agents=seats, rounds=2, judge=Seat("J", model),
                                     **extra, **chosen("roundtable")),
    }


def test_replies_ignore_the_answer_key(monkeypatch):
    before = _every_protocol(BAT.text, "simulated?seed=2", BAT.expected)
    monkeypatch.setattr(engine.questions, "DEFINITE", [])
    monkeypatch.setattr(engine.questions.bundled, "DEFINITE", [])
    after = _every_protocol(BAT.text, "simulated?seed=2", BAT.expected)
    for name in before:
        assert replies(after[name]) == replies(before[name]), name
    assert before["panel"].correct is not None and before["vote"].correct is not None


def _reworded(protocol):
    """Every template of a protocol, reworded but keeping its placeholders."""
    return {name: template.text.replace("the ", "a ").replace("Question", "Q") +
            "\n\n(Reworded for a test.)"
            for name, template in REGISTRY[protocol].templates.items()}


def test_rewording_the_question_or_a_template_changes_no_stance():
    plain = _every_protocol(BAT.text, "simulated?seed=5", BAT.expected)
    prompts = {name: _reworded(name) for name in plain}
    reworded = _every_protocol("A bat and a ball together cost one dollar ten; the bat costs "
                               "a dollar more than the ball. What does the ball cost?",
                               "simulated?seed=5", BAT.expected, prompts)
    for name in plain:
        assert replies(reworded[name]) == replies(plain[name]), name
        assert reworded[name].turns[0].messages != plain[name].turns[0].messages
    assert reworded["panel"].tally == plain["panel"].tally
    assert reworded["panel"].critique == plain["panel"].critique
    assert reworded["debate"].verdict == plain["debate"].verdict
    assert reworded["roundtable"].stance_tally == plain["roundtable"].stance_tally


# --------------------------------------------------------------------------- dynamics
@pytest.mark.parametrize("expected", EXPECTED)
def test_dynamics_skill_one_makes_every_independent_answer_right(expected):
    """skill=1: every cold answer is the truth."""
    result = run_vote("What is it?", voters=voters(sim(skill=1), 8), expected=expected)
    assert all(normalize_stance(p.stance) == normalize_stance(expected)
               for p in result.proposals)
    assert result.correct is True


@pytest.mark.parametrize("expected", EXPECTED)
def test_dynamics_skill_zero_makes_no_independent_answer_right(expected):
    """skill=0: no cold answer is the truth."""
    result = run_vote("What is it?", voters=voters(sim(skill=0), 8), expected=expected)
    assert not any(normalize_stance(p.stance) == normalize_stance(expected)
                   for p in result.proposals)
    assert result.correct is False


def _others_majority(proposals, name):
    counts = {}
    for p in proposals:
        if p.persona != name and p.usable:
            counts[p.normalized] = counts.get(p.normalized, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]


@pytest.mark.parametrize("seed", range(6))
def test_dynamics_conformity_one_makes_revisers_join_the_majority(seed):
    """skill=0.5, conformity=1, persuasion=0: each reviser takes the others' majority."""
    model = sim(skill=0.5, conformity=1, persuasion=0, seed=seed)
    debaters = [Seat(f"d{i}", model) for i in range(5)]
    result = run_panel("What is it?", debaters=debaters, critic=Seat("critic", model),
                       judge=Seat("judge", model), expected="42")
    for rebuttal in result.rebuttals:
        assert rebuttal.normalized == _others_majority(result.proposals, rebuttal.persona)


@pytest.mark.parametrize("seed", range(4))
def test_dynamics_conformity_zero_and_persuasion_zero_hold_every_stance(seed):
    """conformity=0, persuasion=0: nobody moves, whatever the critic says."""
    model = sim(skill=0.5, conformity=0, persuasion=0, seed=seed)
    result = run_panel("What is it?", **panel_seats(model), expected="42")
    assert result.mind_changes == []


@pytest.mark.parametrize("persuasion, moved", [(1, True), (0, False)])
def test_dynamics_persuasion_moves_the_criticised(persuasion, moved):
    """Debaters skill=0 (all wrong), conformity=0; a critic with skill=1 flags every one:
    persuasion=1 moves all of them, persuasion=0 none."""
    debaters = [Seat(f"d{i}", sim(skill=0, conformity=0, persuasion=persuasion))
                for i in range(4)]
    result = run_panel("What is it?", debaters=debaters, critic=Seat("critic", sim(skill=1)),
                       judge=Seat("judge", "simulated"), expected="$0.05")
    assert {a.verdict for a in result.critique.assessments} == {"flawed"}
    assert (sorted(result.mind_changes) == sorted(d.name for d in debaters)) is moved
    assert (result.mind_changes == []) is not moved


def test_dynamics_a_sharp_critic_and_persuadable_debaters_lift_the_panel_over_the_vote():
    """Debaters skill=0.4, persuasion=1, conformity=0 and a critic with skill=1: the panel's
    critique corrects wrong answers, so it is right more often than the same seats' vote.
    (This is what the parameters say, not evidence about real models.)"""
    panel_right = vote_right = 0
    for seed in range(15):
        model = sim(skill=0.4, conformity=0, persuasion=1, seed=seed)
        debaters = [Seat(f"d{i}", model) for i in range(3)]
        for expected in ("$0.05", "42"):
            panel = run_panel("Q?", debaters=debaters, critic=Seat("critic", sim(skill=1)),
                              judge=Seat("judge", model), expected=expected)
            vote = run_vote("Q?", voters=debaters, expected=expected)
            panel_right += bool(panel.correct)
            vote_right += bool(vote.correct)
    assert panel_right > vote_right


def test_dynamics_the_debate_judge_answers_with_the_winning_side():
    """skill=1 everywhere: the proponent argues the truth, the opponent a distractor, and the
    judge backs the truth on its ANSWER line."""
    model = sim(skill=1)
    result = run_debate("Q?", proponent=Seat("pro", model), opponent=Seat("con", model),
                        judge=Seat("judge", model), expected="$0.05", max_rounds=1)
    judge = result.turns[-1].reply
    assert "ANSWER: $0.05" in judge and "CON SUMMARY: The side against argued $0.10" in judge
    assert result.confidence >= 0.7


def test_dynamics_a_reviewer_approves_the_answer_it_holds():
    """Producer skill=0, persuasion=1; reviewer skill=1: the first draft is rejected, the
    revision takes the reviewer's answer and is approved."""
    result = run_peer_review("Q?", producer=Seat("writer", sim(skill=0, persuasion=1)),
                             reviewer=Seat("editor", sim(skill=1)), expected="42")
    assert [i.approved for i in result.iterations] == [False, True]
    assert result.final_output.endswith("ANSWER: 42")


@pytest.mark.parametrize("persuasion, status", [(1, "converged"), (0, "finished")])
def test_dynamics_a_persuadable_side_concedes(persuasion, status):
    """persuasion=1: the side answering first concedes (AGREED); persuasion=0: nobody does."""
    model = sim(persuasion=persuasion)
    result = run_duel("Cats or dogs?", a=Seat("a", model), b=Seat("b", model), rounds=3,
                      converge="agreed")
    assert result.status == status
    assert len(result.transcript) == (2 if persuasion else 6)


def test_dynamics_seeds_are_reproducible_and_change_the_world():
    first = [replies(run_panel("Q?", **panel_seats(sim(seed=s)), expected="42"))
             for s in range(6)]
    again = [replies(run_panel("Q?", **panel_seats(SimulatedChatModel(world=World(seed=s))),
                               expected="42")) for s in range(6)]
    assert first == again
    assert len({str(r) for r in first}) > 1


def test_dynamics_experiment_repeats_differ_and_configurations_share_a_world():
    """The world is keyed on an experiment cell's question and repeat (`cell:Q:C:R`), so
    repeats differ, while two configurations on one question and repeat meet the same world."""
    seats = voters("simulated", 5)

    def stances(tag):
        result = run_vote("Q?", voters=seats, expected="42", tags=[tag])
        return [p.stance for p in result.proposals]
    repeats = {str(stances(f"cell:0:0:{r}")) for r in range(6)}
    assert len(repeats) > 1
    assert stances("cell:3:0:2") == stances("cell:3:1:2")
