"""Answer extraction as the debate papers score it: one short answer out of a model's reply.

Du et al. 2023 and the work built on it read a numeric answer from `\\boxed{...}`, else take
the last number in the reply; Parley does the same and carries on to multiple-choice letters,
yes/no and, last, the normalised stance, so that open questions still yield a ballot. A reply
with no answer at all (blank, or "I don't know") gives `None`: an abstention, never a guess.
Expected answers go through the same function, so "$18", "18.00" and "18 dollars" all meet "18".
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

from engine.analysis.stances import normalize_stance

# A number: a sign only where it cannot be a subtraction (not right after a word or a bracket),
# an optional currency symbol, thousands separators or a decimal part, an optional "/d" for a
# fraction. Letters may follow (units such as "5km"); a word may not lead into it ("GPT4").
_NUMBER = re.compile(
    r"(?:(?<![\w)\]])(?P<sign>-)\s?)?[$€£]?\s?(?<![\w.])"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:\s?/\s?(?P<den>\d+)(?!\d|\.\d))?")
_BOXED = re.compile(r"\\boxed\s*\{")
_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*(-?[\d.,]+)\s*\}\s*\{\s*([\d.,]+)\s*\}")
_LATEX = re.compile(r"\\(?:text|mathrm|textbf|mbox)\s*\{([^{}]*)\}|\\[,;!:% ]|\\\$")
_MARKER = re.compile(r"\b(?:final\s+answer|answer|stance)\b(?:\s+is)?\s*[:=]?\s*"
                     r"(?P<rest>[^\n]+)", re.IGNORECASE)
_LEAD_LETTER = re.compile(r"^[(\[]?(?P<letter>[A-Ja-j])(?:[)\]]|[.:](?:\s|$)|$)")
_CUE_LETTER = re.compile(r"\b(?:option|choice)\s+[(\[]?(?P<letter>[A-J])\b|\((?P<paren>[A-J])\)",
                         re.IGNORECASE)
_YES_NO = re.compile(r"^(?P<word>yes|no)\b(?!\s+(?:one|doubt|idea|matter|longer|more|less|"
                     r"need|way)\b)", re.IGNORECASE)
_ABSTAIN = re.compile(r"\b(?:i\s+(?:do\s+not|don't|dont)\s+know|not\s+sure|unsure|no\s+idea|"
                      r"cannot\s+(?:be\s+)?(?:determine|answer|tell|say)|can't\s+(?:determine|"
                      r"answer|tell|say)|unable\s+to\s+(?:determine|answer)|no\s+answer|"
                      r"no\s+one\s+(?:knows|can)|unknown|n/a|insufficient\s+information)\b",
                      re.IGNORECASE)
_WRAPPERS = "*_`\"'“”‘’«» \t"
_SENTENCE_END = re.compile(r"[.;!?](?:\s|$)|,\s|\n")


def extract_answer(text: str | None) -> str | None:
    """The answer in a reply: the `\\boxed{}` one, else the first sentence after the last
    "answer is" / "Final answer:" marker, else the whole reply; each read as a leading
    multiple-choice letter ("B"), the last number (canonical: commas, currency, units and
    percent signs dropped, `-` kept, "0.50" -> "0.5"), a cued letter ("option C"), "yes" /
    "no", or the normalised stance. `None` when the reply is blank or declines to answer."""
    if text is None:
        return None
    text = unicodedata.normalize("NFKC", text).replace("\u2212", "-")
    if not text.strip():
        return None
    boxed = _last_boxed(text)
    if boxed is not None:  # the reply's declared answer: an empty box abstains
        return _read(_unlatex(boxed))
    markers = list(_MARKER.finditer(text))
    if markers:
        found = _read(_SENTENCE_END.split(markers[-1].group("rest"), maxsplit=1)[0])
        if found is not None:
            return found
    return _read(text)


def _read(text: str) -> str | None:
    """One piece of text as a number, a letter, yes/no or a stance (None when it abstains)."""
    body = text.strip().strip(_WRAPPERS)
    if not body:
        return None
    lead = _LEAD_LETTER.match(body)
    if lead:
        return lead.group("letter").upper()
    number = _last_number(body)
    if number is not None:
        return number
    cue = _CUE_LETTER.search(body)
    if cue:
        return (cue.group("letter") or cue.group("paren")).upper()
    yes_no = _YES_NO.match(body)
    if yes_no:
        return yes_no.group("word").lower()
    if _ABSTAIN.search(body):
        return None
    stance = normalize_stance(_SENTENCE_END.split(body, maxsplit=1)[0])
    return stance or None


def _last_number(text: str) -> str | None:
    matches = list(_NUMBER.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    value = normalize_stance(f"{last.group('sign') or ''}{last.group('num')}")
    if last.group("den"):
        return f"{value}/{normalize_stance(last.group('den'))}"
    return value


def _last_boxed(text: str) -> str | None:
    """The contents of the last `\\boxed{...}`, braces balanced (None without one)."""
    starts = list(_BOXED.finditer(text))
    if not starts:
        return None
    start = starts[-1].end()
    depth = 1
    for index in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[start:index]
    return text[start:]


def _unlatex(text: str) -> str:
    """Boxed LaTeX as plain text: `\\frac{a}{b}` -> a/b, `\\text{ dollars}` -> its words."""
    text = _FRAC.sub(r"\1/\2", text)
    return _LATEX.sub(lambda m: m.group(1) or " ", text).replace("{", "").replace("}", "")


def answers_match(answer: str | None, expected: str | None) -> bool | None:
    """Whether `answer` gives the `expected` answer, read the same way on both sides: equal
    once normalised (`normalize_stance`), or equal once extracted (`extract_answer`, so
    "25%" meets "25" and "The answer is $18." meets "18"). None when either side is missing
    or blank: nothing to score."""
    return _match(answer, expected, normalize_stance, extract_answer)


def _match(answer: str | None, expected: str | None, normalize: Callable[[Any], str],
           extract: Callable[[str], str | None]) -> bool | None:
    if answer is None or expected is None or not str(answer).strip() \
            or not str(expected).strip():
        return None
    if normalize(answer) == normalize(expected):
        return True
    found, truth = extract(str(answer)), extract(str(expected))
    return found is not None and found == truth


class Answers:
    """`normalize_stance`, `extract_answer` and `answers_match` for a report over many runs,
    each distinct text worked out once (20,000 runs meet the same answers and expected answers
    again and again); the same results as the functions, kept only as long as this object."""

    def __init__(self) -> None:
        self._normal: dict[str, str] = {}
        self._found: dict[str, str | None] = {}

    def normalize(self, text: Any) -> str:
        """`normalize_stance(text)`, once per distinct text."""
        if not isinstance(text, str):
            return normalize_stance(text)
        if text not in self._normal:
            self._normal[text] = normalize_stance(text)
        return self._normal[text]

    def extract(self, text: str) -> str | None:
        """`extract_answer(text)`, once per distinct text."""
        if text not in self._found:
            self._found[text] = extract_answer(text)
        return self._found[text]

    def match(self, answer: str | None, expected: str | None) -> bool | None:
        """`answers_match(answer, expected)`."""
        return _match(answer, expected, self.normalize, self.extract)
