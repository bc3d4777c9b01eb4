"""A debate's sides: who argues what, and which seat a judge's verdict makes the winner.

The judge reads a transcript labelled by side, never by seat: `Proponent:` is the side in
favour and `Opponent:` the side against, whichever seat argued it (with `swap_sides` the
proponent seat argues against, so the transcript's `Proponent:` lines are the opponent
seat's). A verdict that names a side therefore names the side, not the seat of that name:
"the proponent argued better" is a win for the seat that argued in favour. A verdict that
names no side but names one of the two seats (a judge told the seats' names by a prompt
override) is a win for that seat.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

FOR, AGAINST = "for", "against"
# The words a verdict names a side by, as the transcript and the judge's prompt label them.
_SIDE_WORDS = {
    FOR: ("proponent", "pro side", "pro's", "pro", "in favor", "in favour", "affirmative",
          "side for", "for side", "supporting side"),
    AGAINST: ("opponent", "con side", "con's", "con", "against", "negative", "opposing side",
              "opposition"),
}
_PATTERNS = {side: re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b",
                              re.IGNORECASE)
             for side, words in _SIDE_WORDS.items()}


def seat_sides(proponent: str, opponent: str, swap: bool) -> dict[str, str]:
    """Seat name -> the side it argues (`for` / `against`); swapped, the proponent seat
    argues against and the opponent seat for."""
    if swap:
        return {proponent: AGAINST, opponent: FOR}
    return {proponent: FOR, opponent: AGAINST}


def side_seats(sides: Mapping[str, str]) -> dict[str, str]:
    """Side -> the seat that argues it (the inverse of `seat_sides`)."""
    return {side: seat for seat, side in sides.items()}


def verdict_side(verdict: str, sides: Mapping[str, str]) -> str | None:
    """The side a verdict rules for: the side named first (by the words the transcript labels
    sides with: proponent / pro / in favour, opponent / con / against); failing that, the side
    of the one seat it names; None when it names neither (or both seats and no side)."""
    text = verdict or ""
    found = [(m.start(), side) for side, pattern in _PATTERNS.items()
             if (m := pattern.search(text))]
    if found:
        return min(found)[1]
    named = [side for seat, side in sides.items()
             if seat.strip() and re.search(r"(?<!\w)" + re.escape(seat.strip()) + r"(?!\w)",
                                           text, re.IGNORECASE)]
    return named[0] if len(named) == 1 else None


def verdict_winner(verdict: str, sides: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(the side the verdict rules for, the seat that argued it); (None, None) when the
    verdict names neither a side nor one seat."""
    side = verdict_side(verdict, sides)
    return side, (side_seats(sides).get(side) if side else None)
