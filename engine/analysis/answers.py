"""Answer extraction as the debate papers score it: one short answer out of a model's reply.

Du et al. 2023 and the work built on it read a numeric answer from `\\boxed{...}`, else take
the last number in the reply; Parley does the same and carries on to multiple-choice letters,
yes/no and, last, the normalised stance, so that open questions still yield a ballot. A reply
with no answer at all (blank, or "I don't know") gives `None`: an abstention, never a guess.
Expected answers go through the same function, so "$18", "18.00" and "18 dollars" all meet "18".

A reply that declares two or more different answers (DESIGN 4: `ANSWER:` lines, `\\boxed{}`,
`STANCE:` lines; `declared_answers`) declares none: it hedges, and reads as an abstention, so
that "ANSWER: 41 / ANSWER: 43 / ANSWER: 42" is never scored right because the right one came
last.
"""
from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from typing import Any

from engine.analysis.sections import parse_answer
from engine.analysis.stances import normalize_stance

# A number: a sign only where it cannot be a subtraction (not right after a word or a bracket),
# an optional currency symbol, thousands separators or a decimal part, an optional "/d" for a
# fraction. Letters may follow (units such as "5km"); a word may not lead into it ("GPT4").
_NUMBER = re.compile(
    r"(?:(?<![\w)\]])(?P<sign>-)\s?)?[$€£]?\s?(?<![\w.])"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:\s?/\s?(?P<den>\d+)(?!\d|\.\d))?")
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
# A line that declares an answer in the reply's own words: `ANSWER:`, `FINAL ANSWER:` or
# `STANCE:` at its start, numbering and markdown emphasis allowed (as `parse_sections` reads a
# label). The value is the rest of the line, or the next line when the label stands alone.
_DECLARATION = re.compile(
    r"^[ \t#]*(?:\d+[ \t]*[.)][ \t]*)?[*_]{0,3}(?:final[ \t]+)?(?:answer|stance)[*_]{0,3}[ \t]*:"
    r"[*_]{0,3}[ \t]*(?P<rest>[^\n]*)$", re.IGNORECASE | re.MULTILINE)
_NEXT_LINE = re.compile(r"\n[ \t]*(?P<line>\S[^\n]*)")
# A `\boxed{...}` holding text and at most one level of braces (`\boxed{\frac{1}{2}}`); a
# scan stops at the next brace, so many unclosed boxes are still read in linear time.
_BOXED_VALUE = re.compile(r"\\boxed\s*\{(?P<value>(?:[^{}]++|\{[^{}]*+\})*+)\}")
_QUOTED_LINE = re.compile(r"^[ \t]*>[^\n]*$", re.MULTILINE)  # someone else's words
DECLARED_MAX = 5  # different answers told apart before a reply is called a hedge and left
DECLARATIONS_READ = 100  # the last boxes, and the last labelled lines, a reply is read by
_SENTENCE_END = re.compile(r"[.;!?](?:\s|$)|,\s|\n")


def extract_answer(text: str | None) -> str | None:
    """The answer in a reply: the `\\boxed{}` one, else the first sentence after the last
    "answer is" / "Final answer:" marker, else the whole reply; each read as a leading
    multiple-choice letter ("B"), the last number (canonical: commas, currency, units and
    percent signs dropped, `-` kept, "0.50" -> "0.5"), a cued letter ("option C"), "yes" /
    "no", or the normalised stance. `None` when the reply is blank, declines to answer, or
    declares several different answers (`declared_answers`: a hedge is no answer)."""
    if text is None:
        return None
    text = unicodedata.normalize("NFKC", text).replace("\u2212", "-")
    if not text.strip() or len(declared_answers(text)) > 1:
        return None
    return _extract(text)


def _extract(text: str) -> str | None:
    """`extract_answer` of a normalised, non-blank text, whatever else it declares."""
    boxes = _BOXED_VALUE.findall(text)
    if boxes:  # the last is the reply's declared answer: an empty box abstains
        return _read(_unlatex(boxes[-1]))
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


def _unlatex(text: str) -> str:
    """Boxed LaTeX as plain text: `\\frac{a}{b}` -> a/b, `\\text{ dollars}` -> its words."""
    text = _FRAC.sub(r"\1/\2", text)
    return _LATEX.sub(lambda m: m.group(1) or " ", text).replace("{", "").replace("}", "")


def declared_answers(text: str | None) -> list[str]:
    """The different answers a reply declares in its own words, each as first written: every
    `\\boxed{...}` in order, then every `ANSWER:`, `FINAL ANSWER:` or `STANCE:` line (a label
    alone on its line takes the next line; the last `DECLARATIONS_READ` of each are read).
    Two declarations are one answer when they are equal once normalised or once read by
    `extract_answer`'s rules ("ANSWER: $42" and "\\boxed{42.00}" are one); a declaration that
    gives no answer ("ANSWER: not sure") is none. Lines quoted with `>` are someone else's
    and not read. Reading stops at `DECLARED_MAX` different answers; one or none is not a
    hedge."""
    if not text or not ("boxed" in text or ":" in text):
        return []
    text = unicodedata.normalize("NFKC", text).replace("\u2212", "-")
    own = _QUOTED_LINE.sub("", text) if ">" in text else text
    values = _BOXED_VALUE.findall(own)[-DECLARATIONS_READ:] if "boxed" in own else []
    for match in list(_DECLARATION.finditer(own))[-DECLARATIONS_READ:]:
        value = match.group("rest").strip()
        if not value:  # the label alone: its value is the next line, unless that is a label
            after = _NEXT_LINE.match(own, match.end())
            value = after.group("line") if after and not _DECLARATION.match(
                after.group("line")) else ""
        values.append(value)
    found: list[tuple[str, str, str | None]] = []  # (as written, normalised, extracted)
    seen: set[str] = set()
    for value in values:
        written = value.strip().strip(_WRAPPERS)
        if not written or written in seen:
            continue
        seen.add(written)
        extracted = _extract(_unlatex(written)) if "\\" in written else _extract(written)
        if extracted is None:
            continue
        normal = normalize_stance(written)
        if any(normal == n or extracted == e for _, n, e in found):
            continue
        found.append((written, normal, extracted))
        if len(found) >= DECLARED_MAX:
            break
    return [written for written, _, _ in found]


def hedge(text: str | None) -> str:
    """Why a reply declares no answer although it states several (`declared_answers`): a
    warning for its turn naming them; "" when it declares one or none."""
    found = declared_answers(text)
    if len(found) < 2:
        return ""
    named = ", ".join(repr(value[:40]) for value in found[:DECLARED_MAX - 1])
    more = " and more" if len(found) >= DECLARED_MAX else ""
    return (f"the reply declares {len(found)}{'+' if more else ''} different answers "
            f"({named}{more}); a hedge declares none, so it abstains")


def answer_line(text: str | None) -> str:
    """A reply's short answer from its last `ANSWER:` line (`parse_answer`); "" when it has
    none, or when it declares several different answers (`hedge`)."""
    if not text or len(declared_answers(text)) > 1:
        return ""
    return parse_answer(text)


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
        self._normal = functools.cache(normalize_stance)
        self.extract = functools.cache(extract_answer)  # once per distinct text

    def normalize(self, text: Any) -> str:
        """`normalize_stance(text)`, once per distinct text."""
        return self._normal(text) if isinstance(text, str) else normalize_stance(text)

    def match(self, answer: str | None, expected: str | None) -> bool | None:
        """`answers_match(answer, expected)`."""
        return _match(answer, expected, self.normalize, self.extract)
