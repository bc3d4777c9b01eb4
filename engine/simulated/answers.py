"""The simulated model's JSON replies, chosen by the task's kind and filled in the keys it asks.

- answer: the seat's own answer (`belief`: the truth with probability `skill`).
- critique: a verdict on each answer in `others`. With a truth the critic judges by its own
  answer (a belief like any seat's): `sound` when an answer matches it, else `flawed`; without
  one its verdicts are drawn (sound, unsupported, flawed).
- revise: a stubborn seat holds with probability `stubbornness` (a planted seat always
  holds); a seat shown the planted seat arguing its planted answer takes it with probability
  `push`. Otherwise, with probability `imitation` (0 by default), a seat adopts the answer of
  one of the others drawn at random, right or wrong alike (a draw of its own, so a world
  without imitation draws as before); a seat told its answer is `flawed` or `unsupported`
  moves, with probability `persuasion`, to the alternative offered (the others' commonest
  differing answer, or a fresh one when nobody differs); a seat that did not move joins the
  others' majority with probability `conformity`; otherwise it holds. Its `changed_mind`
  says truthfully whether it moved.
- judge: `agreement_level` (how far the answers in `others` agree) or the answer the answers
  in `others` lead to, in the tally's order (most votes, then the smallest normalised form).

Any key the task lists and these do not fill gets a value chosen by the key's name.
"""
from __future__ import annotations

from typing import Any

from engine.analysis.agreement import level_of
from engine.analysis.stances import normalize_stance
from engine.models import Task
from engine.simulated.world import (
    World,
    alternative,
    belief,
    held,
    holds,
    majority,
    others_key,
    pushed,
    rng,
    same,
)

CRITICISED = ("flawed", "unsupported")


def revised(world: World, task: Task) -> tuple[str, str]:
    """(the seat's answer after a critique or after seeing others, how it got there: held,
    persuaded or conformed)."""
    own = held(world, task)
    shown = [a for a in task.others.values() if normalize_stance(a)]
    verdict = task.verdict.strip().lower()
    draw = rng(world, task, "revise", task.seat, task.kind, task.round,
               normalize_stance(own), verdict, others_key(task))
    persuaded, conformed = draw.random(), draw.random()
    if holds(world, task, normalize_stance(own), others_key(task)):
        return own, "held"
    planted = pushed(world, task, own, others_key(task))
    if planted is not None:
        return planted, "pushed"
    if world.imitation and shown:
        copy = rng(world, task, "imitate", task.seat, task.kind, task.round,
                   normalize_stance(own), others_key(task))
        if copy.random() < world.imitation:
            return copy.choice(shown), "imitated"
    if verdict in CRITICISED and persuaded < world.persuasion:
        offered = majority([a for a in shown if not same(a, own)])
        return offered or alternative(world, task, own), "persuaded"
    common = majority(shown)
    if common is not None and not same(common, own) and conformed < world.conformity:
        return common, "conformed"
    return own, "held"


# A revision's reasoning by how `revised` got there ({own}: the answer the seat held).
_WHY = {"persuaded": "The critique is right about {own}; working it through again gives {answer}.",
        "conformed": "Most of the others hold {answer}, and I have come round to it.",
        "pushed": "The case made for {answer} has won me over.",
        "imitated": "Another agent holds {answer}, and I take it up.",
        "held": "I hold {answer}: nothing said so far overturns it."}


def _fill(task: Task, values: dict[str, Any], stance: str) -> dict[str, Any]:
    """The keys the task asks for, from `values` first, then by the key's name."""
    keys = task.keys or tuple(values)
    out: dict[str, Any] = {}
    for key in keys:
        name = key.lower()
        if name in values:
            out[key] = values[name]
        elif name in ("stance", "answer", "position", "dominant_position"):
            out[key] = stance
        elif name in ("reasoning", "rationale", "overall", "flaw", "feedback"):
            out[key] = f"A simulated agent's reasoning for {stance}."
        elif name == "changed_mind":
            out[key] = False
        elif name in ("key_points", "dissenting_views", "assessments"):
            out[key] = []
        else:
            out[key] = "simulated"
    return out


def _answer(world: World, task: Task) -> dict[str, Any]:
    mine = belief(world, task)
    return _fill(task, {"stance": mine, "answer": f"My answer is {mine}.",
                        "reasoning": f"Working it through on my own, I get {mine}."}, mine)


def _revise(world: World, task: Task) -> dict[str, Any]:
    answer, how = revised(world, task)
    return _fill(task, {"stance": answer, "answer": f"My answer is {answer}.",
                        "reasoning": _WHY[how].format(answer=answer, own=held(world, task)),
                        "changed_mind": task.own is not None and not same(answer, task.own)},
                 answer)


def verdict_on(world: World, task: Task, answer: str) -> str:
    """The critic's verdict on one answer (see the module docstring)."""
    if task.expected:
        return "sound" if same(answer, belief(world, task)) else "flawed"
    draw = rng(world, task, "verdict", task.seat, normalize_stance(answer))
    return draw.choices(("sound", "unsupported", "flawed"), (0.4, 0.35, 0.25))[0]


def _critique(world: World, task: Task) -> dict[str, Any]:
    assessments = []
    for name, answer in task.others.items():
        verdict = verdict_on(world, task, answer)
        flaw = ("none material" if verdict == "sound" else
                f"{answer} does not follow from the question" if verdict == "flawed" else
                f"nothing shows that {answer} fits this case")
        assessments.append({"persona": name, "verdict": verdict, "flaw": flaw})
    good = sum(a["verdict"] == "sound" for a in assessments)
    overall = f"{good} of {len(assessments)} answers hold up."
    return _fill(task, {"assessments": assessments, "overall": overall}, "")


def agreement(task: Task) -> dict[str, Any]:
    """How far the answers in `others` agree: strong when all are one, moderate when at least
    two thirds are, weak when two are, none otherwise (by answer, not by wording)."""
    answers = [a for a in task.others.values() if normalize_stance(a)]
    common = majority(answers)
    count = sum(same(a, common) for a in answers)
    total = len(task.others)
    dissent = list(dict.fromkeys(a for a in answers if not same(a, common)))
    return {"agreement_level": level_of(count, total), "dominant_position": common or "",
            "dissenting_views": dissent,
            "rationale": (f"{count} of {total} final answers are {common!r}." if common
                          else "No final answer states a position.")}


def _judge(world: World, task: Task) -> dict[str, Any]:
    if "agreement_level" in {k.lower() for k in task.keys}:
        found = agreement(task)
        return _fill(task, found, found["dominant_position"])
    answers = [a for a in task.others.values() if normalize_stance(a)]
    leading = majority(answers) or belief(world, task)
    backers = [name for name, a in task.others.items() if same(a, leading)]
    dissent = [f"{name} ({a})" for name, a in task.others.items() if not same(a, leading)]
    points = [f"{len(backers)} of {len(task.others)} final answers back {leading}",
              f"dissent: {', '.join(dissent)}" if dissent else "no dissent"]
    return _fill(task, {"answer": leading, "key_points": points,
                        "rationale": f"The final answers favour {leading}."}, leading)


KINDS = {"answer": _answer, "revise": _revise, "critique": _critique, "judge": _judge}


def json_reply(world: World, task: Task) -> dict[str, Any]:
    """The JSON object a task with `keys` is answered with."""
    made = KINDS.get(task.kind)
    return made(world, task) if made is not None else _fill(task, {}, belief(world, task))
