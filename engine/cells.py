"""An experiment's cell: one planned run, named on its run by a `cell:Q:C:R` tag.

A value shared by experiment planning, the store (which counts an experiment's cells from
its runs' tags), the reports and the pool of workers, so it lives below all of them.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SUPERSEDED = "superseded"  # the tag of a cell's earlier try, kept but no longer counted
_INDEX = "(0|[1-9][0-9]{0,8})"  # a cell index as `Cell.tag` writes it: fits any int32
# A cell tag, unanchored: `Cell.from_tags` matches it in full, and the store matches it in SQL
# (PostgreSQL's regular expressions read it the same way).
CELL_PATTERN = f"cell:{_INDEX}:{_INDEX}:{_INDEX}"
_CELL = re.compile(CELL_PATTERN)


@dataclass(frozen=True, order=True)
class Cell:
    """One planned run: question index `q`, configuration index `c`, repeat `r` (from 0)."""

    q: int
    c: int
    r: int

    @property
    def tag(self) -> str:
        return f"cell:{self.q}:{self.c}:{self.r}"

    @classmethod
    def from_tags(cls, tags: Sequence[str]) -> Cell | None:
        """The cell named by the first tag written as `Cell.tag` writes it (ASCII digits, no
        leading zeros, at most 9 of them), or None; never raises, whatever `tags` holds."""
        if isinstance(tags, (str, bytes)) or not isinstance(tags, Iterable):
            return None  # one text is not a list of tags
        for tag in tags:
            # `str.isdigit` is True for "²" and "٣", which `int` refuses: match the exact form
            found = _CELL.fullmatch(tag) if isinstance(tag, str) and len(tag) <= 40 else None
            if found:
                return cls(int(found[1]), int(found[2]), int(found[3]))
        return None
