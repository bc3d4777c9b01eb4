"""Text that crosses a boundary: names, stored strings, CLI output, CSV cells, chart labels.

Small pure functions shared by the store, the parsers, the CLI and the pages, so that each
rule is written once:

- `clean_text`: what the store keeps of any string (lone surrogates and NUL become U+FFFD,
  so SQLite and PostgreSQL accept exactly the same values);
- `fold_name`: the key two names collide on (Unicode NFKC, case, whitespace);
- `has_visible`: a question or name must contain something a reader can see;
- `terminal_safe`: what the CLI may print of stored text (no escape or control sequences);
- `csv_cell`: a spreadsheet cannot run a cell taken from model text as a formula;
- `html_text`: a string plotly would read as HTML shown as the same text instead.
"""
from __future__ import annotations

import html
import json
import re
import unicodedata
from typing import Any

REPLACEMENT = "\ufffd"
NAME_MAX = 200  # seat, persona, role and label names; specs; the PostgreSQL column sizes

_SURROGATE_OR_NUL = re.compile("[\ud800-\udfff\x00]")
# ANSI/VT escape sequences (CSI, OSC, and two-character ESC forms), then any remaining C0/C1
# control character except tab and newline.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|"
                      r"\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_INVISIBLE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"}
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def clean_text(value: str) -> str:
    """`value` with lone surrogates and NUL bytes replaced by U+FFFD (storable everywhere)."""
    if not isinstance(value, str):
        value = str(value)
    return _SURROGATE_OR_NUL.sub(REPLACEMENT, value)


def clean_value(value: Any) -> Any:
    """`clean_text` applied to every string inside a JSON-like value (keys included)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_value(v) for v in value]
    return value


def has_visible(value: str) -> bool:
    """True when `value` holds at least one character a reader can see (not only spaces,
    zero-width or control characters)."""
    return any(unicodedata.category(ch) not in _INVISIBLE for ch in value or "")


def fold_name(value: str) -> str:
    """The comparison key of a name: NFKC, case-folded, invisible characters dropped and
    whitespace collapsed, so `Ana`, ` ana `, `ＡＮＡ` and `A\u200bna` are the same name."""
    text = unicodedata.normalize("NFKC", value or "").casefold()
    text = "".join(ch for ch in text if unicodedata.category(ch) not in _INVISIBLE - {"Zs"})
    return " ".join(text.split())


def terminal_safe(value: Any) -> str:
    """Text safe to print on a terminal: escape sequences removed, other control characters
    (but tab and newline) shown as `?`."""
    text = clean_text(value if isinstance(value, str) else str(value))
    return _CONTROLS.sub("?", _ESCAPES.sub("", text))


def say(*parts: Any, **kw: Any) -> None:
    """Print stored or model text (labels, names, answers) on a terminal, each part
    `terminal_safe`: no escape or control sequences reach it."""
    print(*(terminal_safe(part) for part in parts), **kw)


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: a structure (a mapping, a list) as JSON, which
    an analysis reads back (never Python's repr); a string starting with `=`, `+`, `-`, `@`,
    tab or carriage return gets a leading apostrophe (OWASP's advice); other values pass."""
    if isinstance(value, (dict, list, tuple)):
        value = json.dumps(value, ensure_ascii=False, default=str)
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def html_text(value: Any) -> str:
    """A string for a plotly label, hover text or title: `<`, `>` and `&` escaped, so the
    browser shows the characters instead of reading tags or entities."""
    return html.escape(str(value), quote=False)


# Column and option names as a person reads them (`words`): the identifiers whose plain
# spelling is not just their words with spaces.
_WORDS = {"ece": "ECE", "brier": "Brier", "usd": "US$", "id": "id", "ci": "CI"}
_PHRASES = {"mind_change_rate": "mind-change rate", "changed_better": "changed for the better",
            "changed_worse": "changed for the worse", "high": "high confidence",
            "medium": "medium confidence", "low": "low confidence",
            "devil_advocate": "devil's advocate", "accuracy_low": "accuracy (low)",
            "accuracy_high": "accuracy (high)", "few": "fewer than 5 scored"}


def words(name: Any) -> str:
    """An identifier as words for a page (`max_rounds` -> `max rounds`, `judge_ece` ->
    `judge ECE`); text that is not an identifier comes back as it is."""
    text = str(name)
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*", text):
        return text
    if text in _PHRASES:
        return _PHRASES[text]
    return " ".join(_WORDS.get(part.lower(), part) for part in text.split("_"))
