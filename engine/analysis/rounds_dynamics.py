"""Dynamics over rounds (DESIGN 2.12): how a run's answers spread and converged from round to
round, who changed their answer, whether the changes fixed or broke it, and who moved whom.

The module is named so that `from engine.analysis import dynamics` gives the function, not
this module. Every measure is arithmetic on the answers per round: one mapping per round from
agent to its raw answer, compared after `normalize_stance`; `None` or an answer that
normalises to "" is an abstention, which is never an answer (as in `tally`). Right and wrong
use `answers_match`, the one scoring rule the rest of Parley uses.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from engine.analysis.answers import answers_match
from engine.analysis.stances import normalize_stance


class Flip(NamedTuple):
    """An agent's answer changed: `round` is the 1-based round of the new answer; `before`
    and `after` are the normalised answers of that round and the round before."""

    agent: str
    round: int
    before: str
    after: str


class Dynamics(BaseModel):
    """The measures of DESIGN 2.12 for one run's rounds.

    - `entropy`: per round, the Shannon entropy in bits of the answers given (abstentions left
      out); between 0 (one answer) and log2(n) for n answers given. 0.0 for a round in which
      nobody answered (no answers, no spread; `answered` tells the two apart).
    - `agreement`: per round, the plurality's share of the answers given, in (0, 1]; 0.0 for a
      round in which nobody answered (as `Tally.ratio` when everyone abstains).
    - `answered`: per round, how many agents gave an answer.
    - `inflation`: the last round's agreement minus the first round's (0.0 without rounds).
    - `flips`: every agent whose answer changed from the round before, in round order and, in
      a round, in the order of that round's mapping. Only an agent that answered in both rounds
      can flip: abstaining, or answering after an abstention, is not a flip.
    - `fixes` / `breaks`: flips from wrong to right / from right to wrong (`answers_match`
      against `expected`); None without an expected answer.
    - `silent_agreement`: the first round is unanimous: at least two agents, every one of them
      answered, and all gave the same answer (one abstention rules it out, as for a
      unanimous tally). A lone agent is never "in agreement".
    - `collapsed_wrong`: the last round is unanimous (as above) on a wrong answer; None
      without an expected answer.
    """

    model_config = ConfigDict(frozen=True)

    entropy: list[float]
    agreement: list[float]
    answered: list[int]
    inflation: float
    flips: list[Flip]
    fixes: list[Flip] | None = None
    breaks: list[Flip] | None = None
    silent_agreement: bool = False
    collapsed_wrong: bool | None = None


def normal_rounds(rounds: Sequence[Mapping[str, str | None]]) -> list[dict[str, str | None]]:
    """Each round's answers normalised; an abstention (None, or "" once normalised) as None."""
    return [{str(agent): (normalize_stance(raw) or None) if raw is not None else None
             for agent, raw in answers.items()} for answers in rounds]


def _counted(normal: Sequence[Mapping[str, str | None]]) -> list[dict[str, int]]:
    """Each normalised round's answers counted (abstentions left out), most first, then the
    smallest form (the tally's order)."""
    return [dict(sorted(Counter(a for a in answers.values() if a is not None).items(),
                        key=lambda kv: (-kv[1], kv[0]))) for answers in normal]


def entropy(counts: Mapping[str, int]) -> float:
    """The Shannon entropy in bits of answers counted (answer -> count); 0.0 for none."""
    total = sum(counts.values())
    if not total:
        return 0.0
    bits = -sum(n / total * math.log2(n / total) for n in counts.values() if n)
    return bits if bits > 0 else 0.0  # a single answer would give -0.0


def _unanimous(answers: Mapping[str, str | None]) -> str | None:
    """The answer every agent gave, when at least two agents all gave the same one."""
    given = set(answers.values())
    if len(answers) < 2 or None in given or len(given) != 1:
        return None
    return next(iter(given))


def flips(normal: Sequence[Mapping[str, str | None]]) -> list[Flip]:
    """Every agent whose answer changed from the round before (`Dynamics.flips`), over
    rounds already normalised (an abstention: None)."""
    out = []
    for number in range(1, len(normal)):
        before, after = normal[number - 1], normal[number]
        for agent, new in after.items():
            old = before.get(agent)
            if old is not None and new is not None and old != new:
                out.append(Flip(agent, number + 1, old, new))
    return out


def dynamics(rounds: Sequence[Mapping[str, str | None]], expected: str | None = None
             ) -> Dynamics:
    """The run's dynamics (see `Dynamics` for each measure and its edge cases): `rounds[i]`
    maps each agent to its raw answer in round i + 1 (None abstains); `expected`, when given
    and not blank, scores fixes, breaks and a collapse onto a wrong answer."""
    normal = normal_rounds(rounds)
    counted = _counted(normal)
    answered = [sum(counts.values()) for counts in counted]
    agreement = [max(counts.values()) / total if total else 0.0
                 for counts, total in zip(counted, answered, strict=True)]
    flipped = flips(normal)
    scored = expected is not None and bool(normalize_stance(expected))
    fixes = breaks = None
    collapsed = None
    if scored:
        right = {a: bool(answers_match(a, expected)) for f in flipped for a in (f.before, f.after)}
        fixes = [f for f in flipped if not right[f.before] and right[f.after]]
        breaks = [f for f in flipped if right[f.before] and not right[f.after]]
        last = _unanimous(normal[-1]) if normal else None
        collapsed = last is not None and not answers_match(last, expected)
    return Dynamics(entropy=[entropy(counts) for counts in counted], agreement=agreement,
                    answered=answered,
                    inflation=agreement[-1] - agreement[0] if agreement else 0.0,
                    flips=flipped, fixes=fixes, breaks=breaks,
                    silent_agreement=bool(normal) and _unanimous(normal[0]) is not None,
                    collapsed_wrong=collapsed)


def influence(rounds: Sequence[Mapping[str, str | None]]) -> dict[tuple[str, str], int]:
    """(mover, moved) -> how many times `moved` flipped (see `Dynamics.flips`) to the answer
    `mover` held in the round before. Each flip is credited to every such mover; a flip to an
    answer nobody else held credits no one. Pairs with no credit are left out."""
    normal = normal_rounds(rounds)
    counts: Counter[tuple[str, str]] = Counter()
    for flip in flips(normal):
        before = normal[flip.round - 2]
        for mover, held in before.items():
            if mover != flip.agent and held == flip.after:
                counts[(mover, flip.agent)] += 1
    return dict(counts)


def votes(rounds: Sequence[Mapping[str, str | None]]) -> list[dict[str, int]]:
    """Each round's answers counted by normalised answer (abstentions left out), in the
    tally's order (most first, then the smallest form): what a run's metrics keep
    (`round_votes`) so that agreement and vote shares over thousands of stored runs need no
    stored result. `dynamics`' agreement of a round is its largest count over its total."""
    return _counted(normal_rounds(rounds))
