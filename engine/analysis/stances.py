"""Stances, tallies and confidence (seed 002): the deterministic Python that turns ballots into
a verdict.

The model argues; everything here is arithmetic on plain values you can read and test:
`normalize_stance` makes `$0.05`, `0.05` and `.05` the same ballot, `tally` counts them,
`derive_confidence` reads the agreement as a level, and `detect_mind_changes` /
`classify_changes` measure who moved (from the stances, never from a model's self-report).
"""
from __future__ import annotations

import functools
import math
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.models import ConfigError

# --------------------------------------------------------------------------- normalisation
_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate(
    "twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_NUMBER_WORDS = sorted([*_UNITS, *_TENS, "hundred", *_SCALES], key=len, reverse=True)
_WORD = "|".join(_NUMBER_WORDS)
# A run of number words joined by spaces, hyphens or "and", not glued to other words
# ("one-time" and "someone" stay as they are).
_WORD_RUN = re.compile(rf"(?<![\w-])(?:{_WORD})(?:(?:\s+and\s+|[\s-]+)(?:{_WORD}))*(?![\w-])")
_NUMBER = re.compile(r"(?<![\w.,/])([-+]?)(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
                     r"(?![\w/]|\.\d|,\d)")
_PERCENT = re.compile(r"(\d)\s*(?:%|percent\b|per\s+cent\b|pct\b)")
_CURRENCY = re.compile(r"[$€£]")
_QUOTES = "\"'`“”‘’«»*_"
_PAIRS = {"(": ")", "[": "]", "{": "}", "<": ">"}
_TRAILING = ".,;:!?"
SIGNIFICANT_DIGITS = 12
# int(text) refuses more digits than this (Python's integer string conversion limit)
_INT_DIGITS = getattr(sys, "get_int_max_str_digits", lambda: 4300)() or 10 ** 9


def _words_to_int(run: str) -> int | None:
    """A run of English number words as an integer, or None when it is not a well-formed one.

    Simple grammar only: units, teens, tens with an optional unit ("twenty-five"), "N hundred"
    (optionally "and" more), and thousand/million/billion groups. "five five" is not a number.
    """
    tokens = [t for t in re.split(r"[\s-]+", run) if t and t != "and"]
    total, group, last, previous_scale = 0, 0, "", 0
    for token in tokens:
        if token in _UNITS:
            value = _UNITS[token]
            if last in ("unit", "teen") or (last == "tens" and (value == 0 or value >= 10)):
                return None
            if value == 0 and (last or len(tokens) > 1):
                return None
            group += value
            last = "teen" if value >= 10 else "unit"
        elif token in _TENS:
            if last in ("unit", "teen", "tens"):
                return None
            group += _TENS[token]
            last = "tens"
        elif token == "hundred":
            if last not in ("", "unit", "teen") or group >= 100:
                return None
            group = (group or 1) * 100
            last = "hundred"
        else:  # thousand, million, billion
            scale = _SCALES[token]  # groups must shrink: "two million three thousand"
            if last == "scale" or (previous_scale and scale >= previous_scale):
                return None
            total += (group or 1) * scale
            group, last, previous_scale = 0, "scale", scale
    return total + group


def _format_number(sign: str, digits: str) -> str:
    """A numeric token rewritten canonically: whole numbers exactly, others as %.12g.

    A whole number past Python's int-from-text digit limit has its leading zeros dropped
    instead; a decimal too large or too small for a float is kept as written (so that two
    different huge numbers never read alike as "inf" or "0").
    """
    plain = digits.replace(",", "")
    negative = sign == "-"
    if "." not in plain:
        if len(plain) > _INT_DIGITS:
            whole = plain.lstrip("0") or "0"
        else:
            whole = str(int(plain))
        return ("-" if negative and whole != "0" else "") + whole
    try:
        number = float(Decimal(plain))
    except (InvalidOperation, ValueError):  # pragma: no cover - the regex only passes numbers
        return sign.replace("+", "") + digits
    if not math.isfinite(number) or (number == 0 and plain.strip("0.")):
        return sign.replace("+", "") + plain
    text = format(number, f".{SIGNIFICANT_DIGITS}g")
    if text in ("0", "-0"):
        return "0"
    return ("-" if negative else "") + text


def _strip_wrappers(text: str) -> str:
    """Remove surrounding quotes, emphasis, matching brackets and trailing punctuation,
    moving two indices and slicing once: a million nested brackets cost a million steps."""
    lo, hi = 0, len(text)
    while True:
        before = (lo, hi)
        while lo < hi and text[lo].isspace():
            lo += 1
        while hi > lo and text[hi - 1].isspace():
            hi -= 1
        while lo < hi and text[lo] in _QUOTES:
            lo += 1
        while hi > lo and text[hi - 1] in _QUOTES:
            hi -= 1
        if hi - lo >= 2 and _PAIRS.get(text[lo]) == text[hi - 1]:
            lo, hi = lo + 1, hi - 1
        while hi > lo and text[hi - 1] in _TRAILING + " ":
            hi -= 1
        if (lo, hi) == before:
            return text[lo:hi]


def normalize_stance(text: Any) -> str:
    """The canonical form of a stance, so that agents who agree cast the identical ballot.

    Steps, in order: Unicode NFKC; lowercase; strip surrounding quotes, markdown emphasis,
    matching brackets and trailing `.,;:!?`; drop currency symbols (`$ € £`); number words to
    digits ("twenty-five" -> "25", "one hundred and five" -> "105"); percent spelled
    consistently ("5 %", "5 percent", "5.0%" -> "5%": a percent stays a percent and is never
    turned into a fraction, because "5%" and "0.05" may answer different questions); numbers
    rewritten canonically (thousands separators dropped, whole numbers kept exactly, others as
    `%.12g`, so "$0.05", "0.05", ".05" and "0.050" all read "0.05" and float noise such as
    "0.30000000000000004" reads "0.3"); whitespace collapsed. `None` and blank text give "".
    Only the stance label is normalised: "the answer is 0.05" stays a different ballot from
    "0.05", which is why prompts ask for a short canonical stance.
    """
    if text is None:
        return ""
    text = str(text)
    return _normalized(text) if len(text) <= MEMO_CHARS else _normalized.__wrapped__(text)


MEMO_CHARS = 200  # a stance is short: a run reads each several times (checks, tally, changes)


@functools.lru_cache(maxsize=4096)
def _normalized(text: str) -> str:
    """`normalize_stance` of a string (remembered for the last 4,096 short ones)."""
    text = unicodedata.normalize("NFKC", text).lower().replace("−", "-")
    text = _strip_wrappers(text)
    text = _CURRENCY.sub("", text)
    text = re.sub(r"(?<![\w-])an? (?=(?:hundred|thousand|million|billion)\b)", "one ", text)
    text = _WORD_RUN.sub(lambda m: str(n) if (n := _words_to_int(m.group(0))) is not None
                         else m.group(0), text)
    text = _PERCENT.sub(r"\1%", text)
    text = _NUMBER.sub(lambda m: _format_number(m.group(1), m.group(2)), text)
    text = re.sub(r"\s+", " ", text)
    return _strip_wrappers(text)


# --------------------------------------------------------------------------- tally
class Tally(BaseModel):
    """The counted vote.

    - `ballots`: seat name -> normalised stance, or `None` for an abstention (a failed call or
      a stance that normalises to "").
    - `counts`: stance -> votes, ordered by (-votes, stance); abstentions are not a position.
    - `winner`: the plurality stance, ties broken by the smallest stance
      (`sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]`); `None` when all abstain.
    - `winner_votes`: `counts[winner]` (0 when all abstain).
    - `total`: every ballot, abstentions included, so an abstention dilutes the consensus.
    - `tied`: another stance has `winner_votes` too.
    - `ratio`: `winner_votes / total` (0.0 when all abstain).
    - `abstentions`: names of the seats that abstained, in ballot order.
    """

    model_config = ConfigDict(frozen=True)

    ballots: dict[str, str | None]
    counts: dict[str, int]
    winner: str | None
    winner_votes: int
    total: int
    tied: bool
    ratio: float
    abstentions: list[str] = Field(default_factory=list)

    @property
    def positions(self) -> int:
        """How many seats cast a usable ballot (`total - len(abstentions)`)."""
        return self.total - len(self.abstentions)


def _as_mapping(ballots: Any) -> dict[str, Any]:
    if isinstance(ballots, Mapping):
        return {str(k): v for k, v in ballots.items()}
    if isinstance(ballots, (str, bytes)) or not isinstance(ballots, Iterable):
        raise ConfigError("tally takes a mapping of seat name to stance (None to abstain), "
                          f"got {type(ballots).__name__}", "input")
    items = list(ballots)
    if all(isinstance(i, tuple) and len(i) == 2 for i in items):
        return {str(k): v for k, v in items}
    return {str(i): v for i, v in enumerate(items, 1)}  # bare stances, named 1, 2, ...


def tally(ballots: Mapping[str, str | None] | Iterable[Any]) -> Tally:
    """Count ballots (seat name -> raw stance, `None` to abstain) by normalised stance.

    Plurality wins; a tie is broken by the smallest stance and flagged `tied`. An abstention
    (`None`, or a stance that normalises to "") counts in `total` but is never a position.
    If everyone abstains there is no winner: `winner=None`, `winner_votes=0`, `ratio=0.0`
    (and `derive_confidence` says low). A list of `(name, stance)` pairs or of bare stances
    (named "1", "2", ...) is accepted too. No ballots at all is a `ConfigError`.
    """
    named = _as_mapping(ballots)
    if not named:
        raise ConfigError("tally needs at least one ballot, got none", "input")
    normal: dict[str, str | None] = {}
    for name, raw in named.items():
        stance = normalize_stance(raw) if raw is not None else ""
        normal[name] = stance or None
    abstentions = [name for name, stance in normal.items() if stance is None]
    counted = Counter(s for s in normal.values() if s is not None)
    ordered = sorted(counted.items(), key=lambda kv: (-kv[1], kv[0]))
    total = len(normal)
    if not ordered:
        return Tally(ballots=normal, counts={}, winner=None, winner_votes=0, total=total,
                     tied=False, ratio=0.0, abstentions=abstentions)
    winner, votes = ordered[0]
    tied = sum(1 for _, n in ordered if n == votes) > 1
    return Tally(ballots=normal, counts=dict(ordered), winner=winner, winner_votes=votes,
                 total=total, tied=tied, ratio=votes / total, abstentions=abstentions)


# --------------------------------------------------------------------------- confidence
class Confidence(BaseModel):
    """How far the vote agreed, as a level: computed, never asserted by a model."""

    model_config = ConfigDict(frozen=True)

    level: Literal["high", "medium", "low"]
    ratio: float
    reason: str


LOW_REASON = "split — no majority; flagged"


def derive_confidence(t: Tally) -> Confidence:
    """The seed's rules on `r = winner_votes / total` (abstentions count in `total`):

    - high: `winner_votes == total` and not tied (unanimous; one abstention rules it out);
    - medium: `winner_votes > total / 2` and not tied (a strict majority);
    - low otherwise, reason "split — no majority; flagged"; when everyone abstained the
      reason says so and the ratio is 0.0.
    """
    if t.total <= 0:
        raise ConfigError("derive_confidence needs a tally with at least one ballot", "input")
    if t.winner is None:
        return Confidence(level="low", ratio=0.0,
                          reason="no usable ballots — everyone abstained; flagged")
    r = t.winner_votes / t.total
    if t.winner_votes == t.total and not t.tied:
        return Confidence(level="high", ratio=r, reason="unanimous")
    if t.winner_votes > t.total / 2 and not t.tied:
        return Confidence(level="medium", ratio=r, reason="a majority")
    return Confidence(level="low", ratio=r, reason=LOW_REASON)


# --------------------------------------------------------------------------- mind changes
def _comparable(before: Mapping[str, Any], after: Mapping[str, Any]
                ) -> list[tuple[str, str, str]]:
    """(name, before, after) normalised, in the order of `after`, where both sides are usable."""
    out = []
    for name, stance in after.items():
        if name not in before:
            continue
        old, new = normalize_stance(before[name]), normalize_stance(stance)
        if old and new:
            out.append((name, old, new))
    return out


def detect_mind_changes(before: Mapping[str, str | None], after: Mapping[str, str | None]
                        ) -> list[str]:
    """Seat names whose normalised stance differs between `before` and `after`, in the order
    of `after`.

    Measured from the stances, not from a model's self-report: a rewrite such as `$0.05` ->
    `0.05` is not a change. A seat missing or without a usable stance on either side (a failed
    call, an abstention) has nothing to compare and is never reported as a change.
    """
    return [name for name, old, new in _comparable(before, after) if old != new]


ChangeKind = Literal["persuaded", "misled", "switched", "held"]


def classify_changes(before: Mapping[str, str | None], after: Mapping[str, str | None],
                     expected: str) -> dict[str, ChangeKind]:
    """Each comparable seat's move against a known answer, in the order of `after`.

    With `e = normalize_stance(expected)`: held when the stance did not change; persuaded when
    it moved from not-`e` to `e`; misled when it moved from `e` to something else; switched
    when it moved between two answers that are both not `e`. Seats without a usable stance on
    either side are left out, as in `detect_mind_changes`.
    """
    target = normalize_stance(expected)
    if not target:
        raise ConfigError("classify_changes needs a non-empty expected answer", "input")
    kinds: dict[str, ChangeKind] = {}
    for name, old, new in _comparable(before, after):
        if old == new:
            kinds[name] = "held"
        elif new == target:
            kinds[name] = "persuaded"
        elif old == target:
            kinds[name] = "misled"
        else:
            kinds[name] = "switched"
    return kinds
