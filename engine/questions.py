"""Bundled question sets: demo questions, definite ones with expected answers, and open ones.

`lures` are the tempting wrong answers (what a hasty reader says); `options` are the positions
an open question tends to split into. The simulated model reads both so that demos behave like
real panels; the protocols never see them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Question:
    """One bundled question."""

    text: str
    expected: str | None = None
    lures: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    tags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def definite(self) -> bool:
        return self.expected is not None


DEFINITE: list[Question] = [
    Question("A bat and a ball cost $1.10 in total. The bat costs $1.00 more than the ball. "
             "How much does the ball cost?", "$0.05", ("$0.10",)),
    Question("If it takes 5 machines 5 minutes to make 5 widgets, how many minutes would it "
             "take 100 machines to make 100 widgets?", "5", ("100",)),
    Question("In a lake there is a patch of lily pads. Every day the patch doubles in size. If "
             "it takes 48 days to cover the whole lake, how many days does it take to cover "
             "half of the lake?", "47", ("24",)),
]

OPEN: list[Question] = [
    Question("Should an early-stage software startup bootstrap or raise venture capital?",
             options=("bootstrap", "venture capital", "hybrid")),
    Question("Should this service move to microservices?",
             options=("stay monolith", "move to microservices", "modular monolith first")),
    Question("Is Rust a better systems language than C++ for new projects?",
             options=("rust", "c++", "depends on the team")),
]

DEMO: list[Question] = [DEFINITE[0], DEFINITE[1], OPEN[0], OPEN[1]]

QUESTION_SETS: dict[str, list[Question]] = {"definite": DEFINITE, "open": OPEN, "demo": DEMO}


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


_INDEX = {_key(q.text): q for qs in QUESTION_SETS.values() for q in qs}


def lookup(text: str) -> Question | None:
    """The bundled question whose text matches `text` (ignoring case and punctuation)."""
    key = _key(text)
    if key in _INDEX:
        return _INDEX[key]
    for known, question in _INDEX.items():
        if known and (known in key or (len(key) > 40 and key in known)):
            return question
    return None
