"""Parley's lexical agreement floor (seed 003): how far agents' final turns share their words.

This is arithmetic on text, never verification: read `overlap_agreement`'s docstring for what it
gets wrong before relying on it.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field

LEVELS = ("none", "weak", "moderate", "strong")
Level = Literal["none", "weak", "moderate", "strong"]
THRESHOLD = 0.35

# Common English function words, contraction stems ("don't" tokenises to "don") and `stance`,
# the label every roundtable turn is asked to end with: shared by every turn, it says nothing.
# Negations ("not", "never", "no") are stop words too, which is one reason opposing stances
# can read as agreement (see `overlap_agreement`).
STOP_WORDS = frozenset("""
a about above after again against all also am an and any are aren as at be because been before
being below between both but by can cannot could couldn did didn do does doesn doing don down
during each even ever few for from further had hadn has hasn have haven having he her here hers
herself him himself his how however i if in into is isn it its itself just let lets ll may me
might more most much must mustn my myself neither never no nor not now of off on once only or
other others ought our ours ourselves out over own per perhaps quite rather really same say says
shall shan she should shouldn since so some such than that the their theirs them themselves then
there these they this those though through thus to too under until up upon us very was wasn we
were weren what whatever when where whether which while who whom whose why will with within
without won would wouldn yet you your yours yourself yourselves ve re
stance
""".split())

_WORD = re.compile(r"[a-z]+")


def tokens(text: str) -> frozenset[str]:
    """Lowercase runs of letters, at least 3 long, minus `STOP_WORDS`."""
    return frozenset(w for w in _WORD.findall((text or "").lower())
                     if len(w) >= 3 and w not in STOP_WORDS)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a & b| / |a | b|; two empty sets share nothing, so 0.0 (never agreement)."""
    union = a | b
    return len(a & b) / len(union) if union else 0.0


class PairSimilarity(BaseModel):
    """One pair of voters: their token sets' Jaccard similarity, and whether they agree."""

    a: str
    b: str
    similarity: float
    agree: bool


class Agreement(BaseModel):
    """The lexical floor's reading: a level, the largest agreeing group and who is outside it.

    `overlap_fraction` is the share of voters in the dominant group (a share of agents, not a
    confidence); `dominant` is empty when no two voters agree, and then every voter is in
    `dissent`. `dissent_texts` keeps what each dissenter said.
    """

    level: Level
    overlap_fraction: float
    dominant: list[str] = Field(default_factory=list)
    dissent: list[str] = Field(default_factory=list)
    dissent_texts: dict[str, str] = Field(default_factory=dict)
    voters: int
    ignored_turns: int = 0
    groups: list[list[str]] = Field(default_factory=list)
    pairs: list[PairSimilarity] = Field(default_factory=list)
    threshold: float = THRESHOLD
    caveat: str = ""  # LEXICAL_ONLY when nothing but shared words backs the level

    def level_text(self) -> str:
        """The level as a sentence may show it: with its caveat when it has one."""
        return f"{self.level} ({self.caveat})" if self.caveat else self.level


LEXICAL_ONLY = "lexical floor only"


def unbacked(agreement: Agreement, judged: bool, stances: int) -> Agreement:
    """The floor's reading marked `LEXICAL_ONLY` when neither a judge's reading nor any stance
    stands beside it: the level then rests on shared words alone (which read opposing turns on
    one topic as agreement)."""
    if judged or stances:
        return agreement
    return agreement.model_copy(update={"caveat": LEXICAL_ONLY})


def level_of(agreeing: int, voters: int) -> Level:
    """The level of `agreeing` voters of `voters` in one group: `strong` when all of them
    (2+), `moderate` when at least 2/3, `weak` when at least two, `none` otherwise."""
    if agreeing < 2:
        return "none"
    if agreeing == voters:
        return "strong"
    return "moderate" if 3 * agreeing >= 2 * voters else "weak"


def overlap_agreement(texts: Mapping[str, str | None]) -> Agreement:
    """Read how far agents agree from the words of each one's last usable turn.

    `texts` maps agent name to that turn's text, one vote per agent, in speaking order. An empty
    (or `None`, or whitespace) text is not a vote: it counts in `ignored_turns`.

    The arithmetic (seed 003, DESIGN 2.5):
    - a text's tokens are its lowercase runs of 3+ letters minus `STOP_WORDS`;
    - two voters agree when the Jaccard similarity of their token sets is >= 0.35
      (`THRESHOLD`; exactly 0.35 agrees); a text with no tokens agrees with nobody;
    - groups are the connected components of "agree" (single linkage: A~B and B~C put A, B
      and C in one group even when A and C do not agree);
    - the dominant group is the largest group of two or more; on a tie in size, the group
      holding the earliest voter in `texts` order wins;
    - level: `strong` when every voter is in the dominant group (and there are 2+ voters),
      `moderate` when at least 2/3 of voters are, `weak` when at least two voters agree,
      `none` otherwise (including 0 or 1 voter).

    What it gets wrong, by construction (and pinned by tests):
    - paraphrase is missed: "cut costs now" and "reduce spending immediately" share no token,
      so two agents who mean the same thing read as no agreement;
    - opposing stances that share topic words read as agreement: "adopt the migration plan"
      and "do not adopt the migration plan" have the same token set (`not` is a stop word),
      and two turns arguing opposite sides of one topic reuse its nouns;
    - the 0.35 cut-off and the 2/3 level boundary were never calibrated (seed 003 reports the
      original floor right on only 4 of 13 labelled development cases).
    Treat it as a floor to read beside a judge or a person, never as a verdict.
    """
    names: list[str] = []
    token_sets: dict[str, frozenset[str]] = {}
    ignored = 0
    for name, text in texts.items():
        if text is None or not str(text).strip():
            ignored += 1
            continue
        names.append(name)
        token_sets[name] = tokens(str(text))

    parent = {name: name for name in names}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    pairs: list[PairSimilarity] = []
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            similarity = jaccard(token_sets[first], token_sets[second])
            agree = similarity >= THRESHOLD
            pairs.append(PairSimilarity(a=first, b=second, similarity=round(similarity, 4),
                                        agree=agree))
            if agree:
                low, high = sorted((root(first), root(second)), key=names.index)
                parent[high] = low

    groups: dict[str, list[str]] = {}
    for name in names:  # groups come out ordered by their earliest voter
        groups.setdefault(root(name), []).append(name)
    ordered = list(groups.values())
    largest = max(ordered, key=len) if ordered else []  # max keeps the first (earliest) on ties
    dominant = largest if len(largest) >= 2 else []
    voters = len(names)
    dissent = [name for name in names if name not in dominant]
    return Agreement(level=level_of(len(dominant), voters),
                     overlap_fraction=len(dominant) / voters if voters else 0.0,
                     dominant=list(dominant), dissent=dissent,
                     dissent_texts={name: str(texts[name]) for name in dissent},
                     voters=voters, ignored_turns=ignored, groups=ordered, pairs=pairs)
