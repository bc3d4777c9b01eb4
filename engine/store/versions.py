"""A question set's version: which questions an experiment asked, as 12 hex digits.

`set_version` hashes each question and its expected answer, in order, as canonical JSON, so
two experiments with the same version asked the same questions and scored them against the
same answers; `set_changes` says, question by question, how two sets differ.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from engine.store.records import fit

VERSION_DIGITS = 12


def _pair(item: Any) -> tuple[str, str | None]:
    """A question and its expected answer (None when it has none), from a stored item (a
    `{question, expected}` mapping) or a bare question's text."""
    if isinstance(item, Mapping):
        expected = item.get("expected")
        return str(item.get("question") or ""), None if expected is None else str(expected)
    return str(item), None


def set_version(questions: Sequence[Any]) -> str:
    """The first 12 hex digits of the sha256 of `[[question, expected], ...]` as canonical
    JSON (sorted keys, no spaces, UTF-8): a change of a question's text, of its expected
    answer or of the order gives another version."""
    canonical = json.dumps([list(_pair(item)) for item in questions], ensure_ascii=False,
                           separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:VERSION_DIGITS]


def _short(text: str) -> str:
    return fit(" ".join(text.split()), 60)


def set_changes(before: Mapping[int, Any], after: Sequence[Any], count: int | None = None
                ) -> list[str]:
    """What changed from the questions `before` (by their index; those known, with `count`
    the set's size when known) to `after`, one line per question: `question 3 edited: ...`,
    `question 4 removed: ...`, `question 5 added: ...`. Empty when no known question
    differs."""
    now = [_pair(item) for item in after]
    out: list[str] = []
    for index in sorted(before):
        old = _pair(before[index])
        if index >= len(now):
            out.append(f"question {index + 1} removed: {_short(old[0])!r}")
        elif now[index][0] != old[0]:
            out.append(f"question {index + 1} edited: {_short(old[0])!r} is now "
                       f"{_short(now[index][0])!r}")
        elif now[index][1] != old[1]:
            out.append(f"question {index + 1} edited: its expected answer {old[1]!r} is now "
                       f"{now[index][1]!r}")
    if count is not None:
        out += [f"question {index + 1} removed" for index in range(len(now), count)
                if index not in before]
        out += [f"question {index + 1} added: {_short(now[index][0])!r}"
                for index in range(count, len(now))]
    return out
