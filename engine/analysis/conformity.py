"""Conformity measures from the multi-agent debate literature, over the answers each agent
gave in each round: DebateLLM's "bullied" (right in one round, wrong in the next) and
"relied on other" (wrong, then right); adoption of the previous round's majority by agents who
were not in it; and whether the final plurality discarded a correct answer that some agent had
given ("Cost of Consensus", 2026).

Every count comes with the number of chances it had (its n), so a rate and its interval can be
shown; an abstention is neither right nor wrong and gives no chance.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from engine.analysis.answers import answers_match
from engine.analysis.stances import tally


class Conformity(BaseModel):
    """Counts over consecutive rounds (k-1 -> k, for every agent that answered in both).

    - `right_before` / `right_to_wrong`: answers right in round k-1, and of them, wrong in k.
    - `wrong_before` / `wrong_to_right`: answers wrong in round k-1, and of them, right in k.
    - `off_majority` / `adopted_majority`: agents whose round k-1 answer was not that round's
      plurality (with one), and of them, those answering the plurality in round k.
    - `had_correct`: some agent gave the expected answer in some round; `discarded_correct`:
      it did and the final plurality is not the expected answer (None without one).
    Right/wrong counts and the two flags are None when there is no expected answer.
    """

    right_before: int | None = None
    right_to_wrong: int | None = None
    wrong_before: int | None = None
    wrong_to_right: int | None = None
    off_majority: int = 0
    adopted_majority: int = 0
    had_correct: bool | None = None
    discarded_correct: bool | None = None


def conformity(rounds: Sequence[Mapping[str, str | None]], expected: str | None,
               final: str | None) -> Conformity:
    """The measures for one run: `rounds[i]` maps each agent to its normalised answer in
    round i + 1 (None or "" abstains); `final` is the run's final answer."""
    scored = expected is not None and bool(str(expected).strip())
    out = Conformity()
    if scored:
        out.right_before = out.right_to_wrong = out.wrong_before = out.wrong_to_right = 0
        given = [a for answers in rounds for a in answers.values() if a]
        out.had_correct = any(answers_match(a, expected) for a in given)
        out.discarded_correct = bool(out.had_correct and not answers_match(final, expected))
    for before, after in zip(rounds, rounds[1:], strict=False):
        majority = tally({k: v or None for k, v in before.items()}).winner if before else None
        for agent, old in before.items():
            new = after.get(agent)
            if not old or not new:
                continue
            if majority is not None and old != majority:
                out.off_majority += 1
                out.adopted_majority += new == majority
            if scored:
                was, now = bool(answers_match(old, expected)), bool(answers_match(new, expected))
                if was:
                    out.right_before = (out.right_before or 0) + 1
                    out.right_to_wrong = (out.right_to_wrong or 0) + (not now)
                else:
                    out.wrong_before = (out.wrong_before or 0) + 1
                    out.wrong_to_right = (out.wrong_to_right or 0) + now
    return out
