"""The simulated model's world: its parameters, its truth, and the answers its agents hold.

A world is the spec's parameters (`World`) plus what one run gives it: the run's `expected`
answer, which is the only truth the world has, and the run's variant (an experiment's question
and repeat). Nothing else is read: not the question, not the prompt's wording, not any answer
key. Wrong answers are distractors derived from `expected` alone: for a number, nearby values
of the kind a slip produces (double, ten times, plus one, a tenth); for text, the negation and
neutral alternatives. Without `expected` the world has no truth, and agents draw among a few
neutral positions (`option A`, `option B`, `option C`), or between yes and no when the
question is a yes/no question: its form (`answers_of`) is the one thing of a question read.

Every draw comes from `rng(...)`, keyed on the spec's seed, `expected`, the variant, the seat's
name, the task's kind and round and the structure the protocol gives (the answers a seat was
shown), so a run is reproducible and rewording a template or the question changes nothing.
"""
from __future__ import annotations

import hashlib
import random
import re
from dataclasses import asdict, dataclass, fields
from typing import Any

from engine.analysis.stances import normalize_stance, tally
from engine.models import Task

NEUTRAL = ("option A", "option B", "option C")
YES_NO = ("yes", "no")
# A yes/no question: its last sentence opens with an auxiliary verb and offers no "or".
_ASKS = re.compile(r"^(?:is|are|am|was|were|do|does|did|should|shall|can|could|will|would|"
                   r"has|have|had|must|may|might|isn't|aren't|doesn't|don't|won't|"
                   r"shouldn't|can't)\b", re.I)
_NUMBER = re.compile(r"^(?P<pre>[^\d\-.]*)(?P<num>-?(?:\d[\d,]*)?(?:\.\d+)?)(?P<post>\D*)$")
_YES_NO = {"yes": "no", "no": "yes", "true": "false", "false": "true"}


def stable_int(*parts: Any) -> int:
    """A reproducible 64-bit hash of the parts (Python's `hash` changes between processes)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass(frozen=True)
class World:
    """The dynamics of the simulated agents; each rate is a probability in 0..1.

    skill: the chance an agent's own answer is the truth (the run's `expected`);
    conformity: the chance an agent that sees others' answers moves to their majority;
    persuasion: the chance an agent told its answer is wrong (by a critic, an opponent or a
    reviewer) moves to the alternative offered;
    position_bias: the chance a judge of sides rules for the side presented to it first,
    whatever was argued (a known position effect to measure; 0, the default, has none);
    imitation: the chance an agent that sees others' answers adopts the answer of one of them
    drawn at random, right or wrong alike (the voter model: a symmetric world, where the
    expected share of right answers stays the same from round to round; 0, the default, has
    none). It never reads which answer is right;
    stubbornness: the chance an agent keeps its answer whatever it is shown or told, drawn
    before any of the moves above (0, the default, has none): a persona's declared trait;
    push: the chance an agent shown the answer a planted adversary argues for adopts it,
    drawn after stubbornness and before the other moves (0, the default: a planted seat
    states its answer and moves nobody beyond what its vote does).
    """

    skill: float = 0.7
    conformity: float = 0.3
    persuasion: float = 0.4
    position_bias: float = 0.0
    imitation: float = 0.0
    stubbornness: float = 0.0
    push: float = 0.0
    seed: int = 0

    def params(self) -> dict[str, Any]:
        """The parameters, as every reply's metadata shows them (`position_bias`,
        `imitation`, `stubbornness` and `push` only when set: a world without them is the
        world it always was)."""
        return {key: value for key, value in asdict(self).items() if value or key not in OPTIONAL}


PARAMETERS = tuple(rate.name for rate in fields(World) if rate.name != "seed")
OPTIONAL = ("position_bias", "imitation", "stubbornness", "push")
# What a per-persona measure over simulated runs is: said beside it before anyone reads it.
PERSONA_CAVEAT = (
    "Over simulated runs these per-persona rates are not the personas' doing: the simulated "
    "model reads no persona's words, only the traits a persona declares (stubbornness, "
    "accuracy, conformity), so between personas without declared traits the differences "
    "here are its world's seeded draws. Read them on real runs.")
# The traits a persona or a role may declare for the simulated model, and the parameter of
# the world each one sets for the seats that play it (a real model never reads them).
TRAITS = {"stubbornness": "stubbornness", "accuracy": "skill", "conformity": "conformity"}


def same(a: str | None, b: str | None) -> bool:
    """Two answers are the same when they normalise alike ($0.05, 0.05 and .05 do)."""
    return bool(a) and bool(b) and normalize_stance(a or "") == normalize_stance(b or "")


def _number(text: str) -> tuple[str, float, str, int] | None:
    found = _NUMBER.match(text.strip())
    if not found or not re.search(r"\d", found.group("num")):
        return None
    digits = found.group("num").replace(",", "")
    decimals = len(digits.split(".", 1)[1]) if "." in digits else 0
    return found.group("pre"), float(digits), found.group("post"), decimals


def _spell(pre: str, value: float, post: str, decimals: int) -> str:
    text = f"{value:.{decimals}f}"
    if abs(float(text) - value) > 1e-12:
        text = f"{value:.12g}"
    return f"{pre}{text}{post}"


def distractors(expected: str) -> list[str]:
    """Three wrong answers derived from `expected` alone, in a fixed order."""
    number = _number(expected)
    if number is not None:
        pre, value, post, decimals = number
        if decimals == 0:
            values = [value + 1, value * 2, value - 1, value * 10, value + 10]
        else:
            values = [value * 2, value * 10, value + 1, value / 10, value - 10 ** -decimals]
        candidates = [_spell(pre, v, post, decimals) for v in values]
    else:
        base = expected.strip()
        opposite = _YES_NO.get(base.lower())
        candidates = ([opposite] if opposite else []) + [
            f"not {base}", "it depends", "none of these"]
    out: list[str] = []
    for candidate in candidates:
        if not same(candidate, expected) and not any(same(candidate, o) for o in out):
            out.append(candidate)
    return out[:3]


def answers_of(question: str) -> tuple[str, ...]:
    """The answers a question's form allows, where it allows only some: `("yes", "no")` for
    a yes/no question (its last sentence ends in "?", opens with an auxiliary verb and offers
    no "or"); () for any other. Nothing else of the question is read."""
    text = " ".join(str(question or "").split())
    if not text.endswith("?"):
        return ()
    last = re.split(r"(?<=[.!?:;])\s+", text[:-1])[-1].strip(" \"'(")
    if _ASKS.match(last) and not re.search(r"\bor\b", last, re.I):
        return YES_NO
    return ()


def positions(expected: str | None, answers: tuple[str, ...] = ()) -> list[str]:
    """Every answer an agent of this world may hold: the truth first, then its distractors;
    without a truth, the answers the question allows (`answers_of`), else the neutral
    positions."""
    return [expected, *distractors(expected)] if expected else list(answers or NEUTRAL)


def rng(world: World, task: Task, *parts: Any) -> random.Random:
    """A generator keyed on the world, the run's expected answer and variant, and `parts`."""
    return random.Random(stable_int(world.seed, task.expected or "", task.variant, *parts))


def belief(world: World, task: Task, seat: str | None = None) -> str:
    """A seat's own answer: the truth with probability `skill`, else a distractor (the nearer
    ones likelier); without a truth, one of the neutral positions."""
    who = task.seat if seat is None else seat
    if task.planted and who == task.adversary:
        return task.planted  # the planted seat argues its planted answer, whatever it knows
    draw = rng(world, task, "belief", who)
    if task.expected:
        if draw.random() < world.skill:
            return task.expected
        wrong = distractors(task.expected)
        return draw.choices(wrong, weights=[3, 2, 1][:len(wrong)])[0]
    return draw.choice(task.answers or NEUTRAL)


def held(world: World, task: Task) -> str:
    """The answer a seat holds coming in: its own earlier answer when that states one, else
    its belief."""
    return task.own if task.own and normalize_stance(task.own) else belief(world, task)


def alternative(world: World, task: Task, own: str, *parts: Any) -> str:
    """An answer other than `own`, as an agent re-thinking would reach it: the truth with
    probability `skill` when `own` is not the truth, else a distractor."""
    draw = rng(world, task, "alternative", task.seat, task.kind, task.round, own, *parts)
    others = [p for p in positions(task.expected, task.answers) if not same(p, own)]
    if task.expected and not same(own, task.expected) and draw.random() < world.skill:
        return task.expected
    wrong = [p for p in others if not same(p, task.expected)] or others
    return draw.choice(wrong)


def holds(world: World, task: Task, *parts: Any) -> bool:
    """Whether an agent keeps its answer at this move: always for a planted seat (it argues
    its planted answer to the end), else a stubborn agent with probability `stubbornness`
    (a draw of its own, so a world without stubbornness draws as before)."""
    if task.planted and task.seat == task.adversary:
        return True
    return bool(world.stubbornness) and rng(
        world, task, "stubborn", task.seat, task.kind, task.round, *parts
    ).random() < world.stubbornness


def pushed(world: World, task: Task, own: str, *parts: Any) -> str | None:
    """The planted answer, when the seat was shown the planted seat arguing it and the push
    moves it (probability `push`); None otherwise."""
    argued = task.others.get(task.adversary) if task.planted and task.adversary else None
    if not world.push or not argued or not same(argued, task.planted) or \
            same(own, task.planted) or task.seat == task.adversary:
        return None
    draw = rng(world, task, "push", task.seat, task.kind, task.round, *parts)
    return task.planted if draw.random() < world.push else None


def majority(answers: list[str]) -> str | None:
    """The tally's winner among the answers (on a tie the smallest normalised form), returned
    in its first spelling; None when none has a usable stance."""
    best = tally(answers).winner if answers else None
    return next((a for a in answers if best and normalize_stance(a) == best), None)


def others_key(task: Task) -> str:
    """What a seat was shown, normalised, for keying its draws on structure."""
    return "|".join(f"{name}={normalize_stance(answer)}"
                    for name, answer in sorted(task.others.items()))
