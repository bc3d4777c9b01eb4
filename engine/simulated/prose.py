"""The simulated model's prose replies: sides' arguments and the judge of sides, drafts and
reviews, a side's statements, and turns that end in a `STANCE:` line.

- argue: each side argues an answer and ends with an `ANSWER:` line. With a truth, the side
  `for` holds its belief and the side `against` its own belief, or, when the two would agree,
  another answer; without one they argue `in favour` and `against`. Sides are assigned, so
  they do not move.
- judge with `sides`: the judge reads each side's answer from the `ANSWER:` line of its last
  argument (shown in `others`; a side without one is taken to argue what this model's own
  sides would) and backs the side whose answer matches its own belief (at random when neither
  does); its ANSWER is the winning side's answer, its confidence higher when it believed it.
  With `position_bias`, it first rules, with that probability, for the side presented to it
  first (the first seat in `others`), whatever either side argued.
- draft: with a truth, a draft ends with an `ANSWER:` line. A first draft holds the producer's
  belief; a revision after a rejection moves, with probability `persuasion`, to the answer the
  feedback offers ("the answer should be X") unless stubbornness holds it, else keeps the
  previous draft's.
- review: with a truth, the reviewer approves exactly the drafts whose answer matches its own
  belief (a draft with no answer line, with probability `skill`); without one, it approves a
  first draft half the time and a revision three times in four.
- statement: a side states its case; answering the other side (told it is wrong) it concedes
  with probability `persuasion` (unless stubbornness holds it), saying AGREED.
- turn: a devil's advocate takes an answer other than the others' majority, a synthesiser the
  majority, anyone else its own answer, or the others' majority with probability
  `conformity`; a stubborn seat holds with probability `stubbornness` and a planted seat
  always does, and a seat shown the planted seat's answer takes it with probability `push`,
  before any other move. Every holder of one answer gives the same grounds for it, so a
  reading by words sees agreement where there is agreement.

- rank: a council member ranks the labelled answers, its own answer's equals first, ending in
  a `FINAL RANKING:` block; chair: the chairman states the best-ranked answer.

Any section label a task lists is answered (ANSWER included); a label these do not know gets a
placeholder value.
"""
from __future__ import annotations

import re

from engine.analysis.sections import parse_answer
from engine.analysis.stances import normalize_stance
from engine.models import Task
from engine.simulated.world import (
    World,
    belief,
    held,
    holds,
    majority,
    others_key,
    positions,
    pushed,
    rng,
    same,
    stable_int,
)

_OFFERED = re.compile(r"answer should be (.+?), not ")
_GROUNDS = (
    ("it keeps the decision reversible and limits the downside",
     "the measured costs are lower and the benefits arrive sooner"),
    ("evidence from comparable cases points clearly this way",
     "it protects users first and leaves room to adjust later"),
    ("the team already knows how to deliver it with current tooling",
     "it answers exactly what was asked without extra assumptions"),
    ("waiting for better information costs little here",
     "a staged trial would settle the disagreement cheaply"),
)
_CONTRARY = ("The majority leans on assumptions nobody has tested, and unwinding them later "
             "would be expensive.")


def _labelled(task: Task, values: dict[str, str]) -> str:
    """One `LABEL: value` line per section the task lists."""
    return "\n".join(f"{label}: {values.get(label.upper(), 'simulated')}"
                     for label in task.sections)


def grounds(answer: str) -> str:
    """The grounds every holder of `answer` gives (by the answer, never the question)."""
    first, second = _GROUNDS[stable_int("grounds", normalize_stance(answer)) % len(_GROUNDS)]
    return f"{first}, and {second}"


def answer_in(text: str | None) -> str | None:
    """The answer a draft or argument states on its last `ANSWER:` line, read as every reply's
    is (`parse_answer`); None without one."""
    return parse_answer(text or "") or None


# --------------------------------------------------------------------------- sides and judges
def side_answers(world: World, task: Task) -> dict[str, str]:
    """The answer each side argues (see the module docstring)."""
    pro_seat, con_seat = task.sides.get("for", "for"), task.sides.get("against", "against")
    if not task.expected:
        return {"for": "in favour", "against": "against"}
    pro = belief(world, task, pro_seat)
    con = belief(world, task, con_seat)
    if same(pro, con):
        con = next(p for p in positions(task.expected, task.answers) if not same(p, pro))
    return {"for": pro, "against": con}


def _argue(world: World, task: Task) -> str:
    side = task.side if task.side in ("for", "against") else "for"
    mine = side_answers(world, task)[side]
    other = side_answers(world, task)["against" if side == "for" else "for"]
    if not task.expected:
        stand = "in favour of the motion" if side == "for" else "against the motion"
        return (f"Round {task.round}: I argue {stand}, because {grounds(mine)}. The other "
                f"side has not shown otherwise.\nANSWER: {mine}")
    return (f"Round {task.round}: the answer is {mine}, because {grounds(mine)}. "
            f"{other} does not survive a check against the question.\nANSWER: {mine}")


def _judge_sides(world: World, task: Task) -> str:
    answers = side_answers(world, task)
    for side, seat in task.sides.items():
        answers[side] = answer_in(task.others.get(seat)) or answers.get(side, side)
    view = belief(world, task)
    draw = rng(world, task, "judge", task.seat, task.round, answers["for"], answers["against"])
    backed = [side for side, answer in answers.items() if same(answer, view)]
    winner = backed[0] if backed else draw.choice(["for", "against"])
    first = _first_presented(world, task)
    if first is not None:
        winner, backed = first, [first] if first in backed else []
    confidence = draw.choice([0.7, 0.75, 0.8, 0.85, 0.9] if backed else [0.5, 0.55, 0.6, 0.65])
    name = {"for": "proponent", "against": "opponent"}[winner]
    return _labelled(task, {
        "VERDICT": f"The {name} argued better: {answers[winner]}.",
        "REASONING": f"The case for {answers[winner]} held up under the other side's attacks.",
        "PRO SUMMARY": f"The side in favour argued {answers['for']}.",
        "CON SUMMARY": f"The side against argued {answers['against']}.",
        "CONFIDENCE": f"{confidence:.2f}", "ANSWER": answers[winner]})


def _first_presented(world: World, task: Task) -> str | None:
    """The side a judge with a position bias rules for because it was presented first (with
    probability `position_bias`, from a draw of its own so a world without one is unchanged);
    None when it rules on the arguments."""
    if not world.position_bias or not task.others:
        return None
    shown_first = next(iter(task.others))
    side = next((s for s, seat in task.sides.items() if seat == shown_first), None)
    draw = rng(world, task, "position", task.seat, task.round, *task.others)
    return side if side is not None and draw.random() < world.position_bias else None


# --------------------------------------------------------------------------- drafts and reviews
def _draft(world: World, task: Task) -> str:
    number = max(task.round, 1)
    head = (f"(draft {number}) A revised response that addresses the feedback: the main change "
            "first, then concrete examples." if task.own is not None else
            f"(draft {number}) A first response: it covers the essentials in a clear order.")
    if not task.expected:
        return head
    answer = answer_in(task.own) or belief(world, task)
    found = _OFFERED.search(next(iter(task.others.values()), ""))
    if task.own is not None and found and task.verdict == "rejected":
        offered = found.group(1).strip()
        draw = rng(world, task, "draft", task.seat, number, normalize_stance(answer))
        if not same(offered, answer) and draw.random() < world.persuasion and \
                not holds(world, task, normalize_stance(answer)):
            answer = offered
    return f"{head}\nANSWER: {answer}"


def _review(world: World, task: Task) -> str:
    draft = next(iter(task.others.values()), "")
    stated = answer_in(draft)
    draw = rng(world, task, "review", task.seat, task.round, normalize_stance(stated or ""))
    if task.expected:
        view = belief(world, task)
        approved = same(stated, view) if stated else draw.random() < world.skill
        feedback = ("Looks complete; minor wording only." if approved else
                    f"The answer should be {view}, not {stated}." if stated else
                    "State the answer plainly on its own line.")
    else:
        approved = draw.random() < (0.5 if task.round <= 1 else 0.75)
        feedback = ("Looks complete; minor wording only." if approved else
                    "Tighten the structure and state the main change first.")
    return _labelled(task, {"APPROVED": "yes" if approved else "no", "FEEDBACK": feedback,
                            "STRENGTHS": "Clear and well organised."})


# --------------------------------------------------------------------------- statements, turns
def _statement(world: World, task: Task) -> str:
    role = task.role.strip().rstrip(".") or "a debater"
    # With a truth a side argues its answer; without one, its side (each side its own grounds).
    mine = belief(world, task) if task.expected else f"side {task.side or task.seat}"
    case = (f"the answer is {mine}" if task.expected else
            "the balance of evidence is on my side")
    if not task.others:
        return f"Speaking as the {role}: {case}, because {grounds(mine)}."
    draw = rng(world, task, "statement", task.seat, task.round, task.side)
    if draw.random() < world.persuasion and not holds(world, task, task.side):
        return "You make a fair point, and I accept it: we have found common ground. AGREED"
    return f"I do not accept that: {case}, because {grounds(mine)}."


_PLANTED = "Everyone should come round to this"


def _turn(world: World, task: Task) -> str:
    role = task.role.lower()
    shown = [a for a in task.others.values() if normalize_stance(a)]
    common = majority(shown)
    own = held(world, task)
    draw = rng(world, task, "turn", task.seat, task.round, normalize_stance(own),
               others_key(task))
    if task.planted and task.seat == task.adversary:
        return f"{_PLANTED}: {own}, because {grounds(own)}.\nSTANCE: {own}"
    if "devil" in role:
        avoid = common or own
        choices = [p for p in positions(task.expected, task.answers) if not same(p, avoid)]
        stance = rng(world, task, "devil", task.seat, normalize_stance(avoid)).choice(choices)
        return f"Let me argue the other side: {stance}. {_CONTRARY}\nSTANCE: {stance}"
    planted = pushed(world, task, own, others_key(task))
    if holds(world, task, normalize_stance(own), others_key(task)):
        stance, body = own, "My position"
    elif planted is not None:
        stance, body = planted, "The case made for it has won me over"
    elif "synthes" in role and common is not None:
        stance, body = common, "Pulling the strongest points together"
    elif common is not None and not same(common, own) and draw.random() < world.conformity:
        stance, body = common, "I have come round to the majority"
    else:
        stance, body = own, "My position"
    return f"{body}: {stance}, because {grounds(stance)}.\nSTANCE: {stance}"


# --------------------------------------------------------------------------- a council
def _rank(world: World, task: Task) -> str:
    """A ranking of the labelled answers in `others` (label -> the answer it states): those
    that match the ranker's own answer first (its stage-1 answer, else its belief), the rest
    in an order drawn from the world; it ends in a `FINAL RANKING:` block."""
    view = held(world, task)
    labels = list(task.others)
    draw = rng(world, task, "rank", task.seat, normalize_stance(view), others_key(task))
    draw.shuffle(labels)
    labels.sort(key=lambda label: not same(task.others[label], view))
    notes = "\n".join(
        f"{label} {'reaches' if same(task.others[label], view) else 'does not reach'} "
        f"{view}." for label in task.others)
    ranking = "\n".join(f"{k}. {label}" for k, label in enumerate(labels, 1))
    return f"{notes}\n\nFINAL RANKING:\n{ranking}"


def _chair(world: World, task: Task) -> str:
    """The chairman's synthesis: the answer of the best-ranked labelled answer that states
    one (`others` comes best first), else its own belief; it ends with an `ANSWER:` line."""
    answer = next((a for a in task.others.values() if normalize_stance(a)), None)
    if answer is None:
        answer = belief(world, task)
    return (f"Weighing the council's answers and their ranking, the answer is {answer}, "
            f"because {grounds(answer)}.\nANSWER: {answer}")


KINDS = {"argue": _argue, "draft": _draft, "review": _review, "statement": _statement,
         "turn": _turn, "rank": _rank, "chair": _chair}


def text_reply(world: World, task: Task) -> str:
    """The prose a task without `keys` is answered with."""
    made = _judge_sides if task.kind == "judge" and task.sides else KINDS.get(task.kind)
    if made is not None:
        text = made(world, task)
    elif task.sections:
        mine = belief(world, task)
        text = _labelled(task, {"ANSWER": mine, "STANCE": mine})
    else:
        text = f"My answer is {belief(world, task)}."
    if task.stance_line and "STANCE:" not in text:
        text += f"\nSTANCE: {belief(world, task)}"
    return text
