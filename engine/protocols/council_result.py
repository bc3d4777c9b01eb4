"""The council's result and its arithmetic (DESIGN 2.9): reading a `FINAL RANKING:` block,
the anonymous labels, the Borda count and the confidence in its top answer. Plain functions on
plain values, so each rule is tested on its own."""
from __future__ import annotations

import random
import re
import string
from collections.abc import Iterable, Mapping, Sequence

from pydantic import Field

from engine.analysis.stances import Confidence
from engine.protocols.base import AnswerResult

RANKING_MAX = 100_000  # characters of a ranking reply read: the block is at its end
_HEAD = re.compile(r"final[ \t]+ranking[*_]{0,3}[ \t]*:", re.I)
_LABEL = re.compile(r"\bresponse[ \t]+([a-z])\b", re.I)


# What an answer must not hold when it is shown to a ranker or the chairman: a line that reads
# as another response's header ("Response B:"), a fence of its own, or a ranking block.
_FORGED_HEADER = re.compile(r"(?im)^([^\w\n]*)(response[^\S\n]+[a-z])(?![^\W_])")
_FORGED_RANKING = re.compile(r"final[^\S\n]+ranking", re.I)
_FORGED_FENCE = re.compile(r"<{3,}|>{3,}")


def fence(label: str, text: str) -> tuple[str, list[str]]:
    """An answer as a prompt shows it, between `<<<` and `>>>` lines under its label, and
    what was neutralised in it: a line that forges another response's header becomes
    `(quoted) response-X`, a `FINAL RANKING` becomes `final-ranking (quoted)`, and a fence
    of its own is broken, so nothing inside an answer can end it or speak as the prompt."""
    notes: list[str] = []
    body, headers = _FORGED_HEADER.subn(
        lambda m: f"{m.group(1)}(quoted) {m.group(2).split()[0].lower()}-"
                  f"{m.group(2).split()[-1].upper()}", text)
    if headers:
        notes.append(f"a line reading as another response's header ({headers}x)")
    body, rankings = _FORGED_RANKING.subn("final-ranking (quoted)", body)
    if rankings:
        notes.append(f"a FINAL RANKING header ({rankings}x)")
    body, fences = _FORGED_FENCE.subn(lambda m: " ".join(m.group(0)), body)
    if fences:
        notes.append(f"a fence of its own ({fences}x)")
    return f"{label}:\n<<<\n{body}\n>>>", notes


def label_of(index: int) -> str:
    """The anonymous label of the `index`-th answer shown (0-based): `Response A`, ..."""
    return f"Response {string.ascii_uppercase[index]}"


def draw_labels(others: Sequence[str], seed: int, ranker: int) -> dict[str, str]:
    """{label: seat} for the answers one ranker is shown: `others` (in the run's presentation
    order) shuffled by a generator keyed on the run's `seed` and the ranker's index among the
    members, so the same seed labels the same way in every process (a string seed is hashed
    with SHA-512 by `random.Random`, never with Python's salted `hash`)."""
    order = list(others)
    random.Random(f"council:{seed}:{ranker}").shuffle(order)
    return {label_of(i): seat for i, seat in enumerate(order)}


def read_ranking(text: str, shown: Sequence[str]) -> list[str] | None:
    """The labels a ranking reply lists, best first, read from its LAST `FINAL RANKING:`
    block (everything after that header); a label named twice counts once (its first place),
    a label not in `shown` is ignored. None when the reply has no such block or the block
    names no shown label: the ranking cannot be read and the ranker abstains."""
    text = (text or "")[-RANKING_MAX:]
    heads = list(_HEAD.finditer(text))
    if not heads:
        return None
    allowed = {label.upper(): label for label in shown}
    out: list[str] = []
    for match in _LABEL.finditer(text, heads[-1].end()):
        label = allowed.get(f"RESPONSE {match.group(1).upper()}")
        if label is not None and label not in out:
            out.append(label)
    return out or None


def borda(rankings: Mapping[str, Sequence[str]], members: Sequence[str],
          shown: Mapping[str, Iterable[str]] | None = None) -> dict[str, int]:
    """Each member's Borda total: ranked k-th (1-based) by a ranker who was shown n answers,
    it gets n - k points from that ranker; the answers a ranker was shown and did not list
    share the bottom place (0 points). So a ranker who lists only its favourite still gives
    it n - 1, the points a full ranking would. `shown` maps each ranker to the seats whose
    answers it was shown (without it, n is the length of the ranker's list). Every member is
    listed (0 when nobody ranked it)."""
    totals = dict.fromkeys(members, 0)
    for ranker, ranked in rankings.items():
        seen = set(shown[ranker]) if shown is not None and ranker in shown else set()
        n = max(len(ranked), len(seen | set(ranked)))
        for k, seat in enumerate(ranked, 1):
            if seat in totals:
                totals[seat] += n - k
    return totals


def mean_ranks(rankings: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """Each ranked member's mean place (1 = best) over the rankers that ranked it."""
    places: dict[str, list[int]] = {}
    for ranked in rankings.values():
        for k, seat in enumerate(ranked, 1):
            places.setdefault(seat, []).append(k)
    return {seat: sum(ks) / len(ks) for seat, ks in places.items()}


def aggregate(rankings: Mapping[str, Sequence[str]], members: Sequence[str],
              shown: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """The members that some ranker ranked, best first: the highest Borda total (`borda`,
    scored against the answers each ranker was shown), then the better (lower) mean rank,
    then the earlier seat in `members`. Empty when no ranking was read (there is then
    nothing to aggregate, and no `top`)."""
    totals, means = borda(rankings, members, shown), mean_ranks(rankings)
    ranked = [seat for seat in members if seat in means]
    return sorted(ranked, key=lambda seat: (-totals[seat], means[seat], members.index(seat)))


def top_confidence(rankings: Mapping[str, Sequence[str]], top: str | None) -> Confidence:
    """The share of rankers (those whose ranking was read) whose first choice is `top`, as a
    level by the panel's rules (`derive_confidence`): high when all of them, medium for a
    strict majority, low otherwise or when no ranking was read."""
    read = [ranked for ranked in rankings.values() if ranked]
    if not read or top is None:
        return Confidence(level="low", ratio=0.0,
                          reason="no ranking could be read; flagged")
    firsts = sum(1 for ranked in read if ranked[0] == top)
    ratio = firsts / len(read)
    if firsts == len(read):
        return Confidence(level="high", ratio=ratio, reason="every ranker put it first")
    if firsts * 2 > len(read):
        return Confidence(level="medium", ratio=ratio, reason="a majority put it first")
    return Confidence(level="low", ratio=ratio, reason="split — no majority; flagged")


class CouncilResult(AnswerResult):
    """Stage 1's answers, stage 2's rankings (de-anonymised, with the labels each ranker saw),
    the Borda count, and the chairman's final answer (`answer`: its last ANSWER line)."""

    question: str
    answers: dict[str, str] = Field(default_factory=dict)
    rankings: dict[str, list[str]] = Field(default_factory=dict)
    labels: dict[str, dict[str, str]] = Field(default_factory=dict)
    borda: dict[str, int] = Field(default_factory=dict)
    aggregate: list[str] = Field(default_factory=list)  # ranked members, best first
    top: str | None = None
    chairman: str = ""
    chair_labels: dict[str, str] = Field(default_factory=dict)  # what the chairman saw
    # DESIGN 2.9's `final_answer`, the chairman's whole reply: named `final_text` because
    # `final_answer()` is the method every result is scored by (here: `answer`)
    final_text: str = ""
    confidence: Confidence | None = None
    seed: int = 0

