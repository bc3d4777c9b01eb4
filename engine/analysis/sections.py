"""Reading a reply's labelled sections, its `ANSWER:` line, a confidence and an approval.

Nothing here calls a model; every function is parsing you can read and test.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

# --------------------------------------------------------------------------- sections (seed 000)
_LABEL_PREFIX = r"^[ \t>#]*(?:\d+\s*[.)]\s*)?[*_]{0,3}"


def parse_sections(text: str, labels: Iterable[str]) -> dict[str, str]:
    """Split `text` into labelled sections, reading the reply's own (last) block.

    Labels match case-insensitively at the start of a line, with optional numbering (`1.`,
    `1)`) and optional markdown emphasis (`**VERDICT:**`, `**VERDICT**:`); a section's text runs
    to the next label. Missing labels are absent from the result (not empty strings).

    A model may quote another's labelled block before giving its own (a judge quoting a
    debater's `VERDICT: ... CONFIDENCE: 1.0`), so the block that counts starts at the LAST
    occurrence of the first label (`labels[0]`), and each label is read at its first
    occurrence from there on. When the first label occurs once, a label found only before it
    is still read (its last occurrence: a model may order its sections differently); when the
    first label occurs more than once, what precedes the last one is taken as quoted and
    ignored. Without the first label, each label is read at its last occurrence.
    """
    labels = list(labels)
    if not text or not labels:
        return {}
    alternatives = "|".join(sorted((re.escape(lab).replace(r"\ ", r"[ \t]+") for lab in labels),
                                   key=len, reverse=True))
    pattern = re.compile(_LABEL_PREFIX + rf"({alternatives})[*_]{{0,3}}[ \t]*:[*_]{{0,3}}[ \t]*",
                         re.I | re.M)
    canonical = {re.sub(r"\s+", " ", lab).lower(): lab for lab in labels}
    matches = list(pattern.finditer(text))
    named = [canonical[re.sub(r"\s+", " ", m.group(1)).lower()] for m in matches]
    anchors = [i for i, label in enumerate(named) if label == labels[0]]
    start = anchors[-1] if anchors else len(matches)
    chosen: dict[str, int] = {}
    for i in range(start, len(matches)):  # the own block: first occurrence of each label
        chosen.setdefault(named[i], i)
    if len(anchors) <= 1:  # nothing quoted before it: labels given only earlier still count
        for i in range(start - 1, -1, -1):
            chosen.setdefault(named[i], i)
    found: dict[str, str] = {}
    for label in labels:
        if label in chosen:
            i = chosen[label]
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            found[label] = text[matches[i].end():end].strip().strip("*_ ").strip()
    return found


def own_block(text: str, first: str) -> str:
    """The reply's own labelled block as `parse_sections` starts it: from its last line
    labelled `first` on (what precedes may be quoted); the whole text without one."""
    label = re.compile(_LABEL_PREFIX + re.escape(first).replace(r"\ ", r"[ \t]+")
                       + r"[*_]{0,3}[ \t]*:", re.I | re.M)
    found = list(label.finditer(text or ""))
    return (text or "")[found[-1].start():] if found else (text or "")


_ANSWER_LINE = re.compile(_LABEL_PREFIX + r"ANSWER[*_]{0,3}[ \t]*:[*_]{0,3}[ \t]*(.*)$",
                          re.I | re.M)


def parse_answer(text: str) -> str:
    """The canonical short answer a reply ends with: its last `ANSWER:` line ("" if none).

    The label follows `parse_sections`' rules (start of a line, case-insensitive, optional
    numbering and markdown emphasis); the answer is the rest of that line, or the next
    non-blank line when the label stands alone. The LAST such line counts, so a reply that
    quotes another's `ANSWER:` before giving its own is read as its own.
    Surrounding emphasis and backticks are dropped; the answer is otherwise left as written
    (scoring compares it with `normalize_stance`).
    """
    matches = list(_ANSWER_LINE.finditer(text or ""))
    if not matches:
        return ""
    last = matches[-1]
    value = last.group(1).strip()
    if not value:
        rest = text[last.end():].lstrip("\r\n")
        value = next((line.strip() for line in rest.splitlines() if line.strip()), "")
    return value.strip("*_` ").strip()


_WORD_LEVELS = {"high": 0.8, "medium": 0.5, "moderate": 0.5, "low": 0.2}


def read_confidence(text: str) -> tuple[float, bool]:
    """(value in [0, 1], parsed?) for a confidence text; see `parse_confidence`."""
    raw = (text or "").strip().strip("*_ ").lower()
    if not raw:
        return 0.0, False
    out_of = re.match(r"^(-?\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)", raw)
    if out_of:
        denominator = float(out_of.group(2))
        value = float(out_of.group(1)) / denominator if denominator else 0.0
        return min(1.0, max(0.0, value)), bool(denominator)
    number = re.match(r"^(-?\d*\.?\d+)\s*(%?)", raw)
    if number:
        value = float(number.group(1))
        if number.group(2) or 1 < value <= 100:
            value /= 100
        return min(1.0, max(0.0, value)), True
    word = re.match(r"^(high|medium|moderate|low)\b", raw)
    if word:
        return _WORD_LEVELS[word.group(1)], True
    return 0.0, False


def parse_confidence(text: str) -> float:
    """Read a judge's confidence as a number in [0, 1].

    `0.85` -> 0.85; `85%` and `85` -> 0.85 (a bare number in (1, 100] is a percent);
    `8.5/10` -> 0.85; `high|medium|low` -> 0.8|0.5|0.2; anything else -> 0.0 (the caller
    records a parse warning). Always clamped to [0, 1]. As DESIGN 2.1 writes the rule, `1.7`
    lies in (1, 100] and so reads as 1.7 percent, 0.017; `150` clamps to 1.0.
    """
    return read_confidence(text)[0]


# The prompt's own format line echoed back (`APPROVED: yes or no`, `approved: yes/no`).
_ECHOED_FORMAT = re.compile(r"approved: ?yes\s*(?:or|/|\|)\s*no\b")


def is_approved(text: str) -> bool:
    """Seed 000's rule: the reply contains `approved: yes` or `approved:yes`, ignoring case.

    Any other wording (`Approved: **yes**`, `APPROVED - yes`, `approved: y`) is a rejection,
    and so is the prompt's format line echoed back (`APPROVED: yes or no`): it is removed
    before the rule is read.
    """
    lowered = _ECHOED_FORMAT.sub("", (text or "").lower())
    return "approved: yes" in lowered or "approved:yes" in lowered
