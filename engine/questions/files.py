"""Question sets for experiments: the bundled ones by name, or an uploaded CSV / JSONL file.

A file has a `question` (required) and an `expected` answer (optional) per row. A file with
any bad row is rejected as a whole, with a `ConfigError` naming every bad row by its line in
the file (a CSV header is line 1), so the analyst can fix them all at once.
"""
from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.models import ConfigError
from engine.text import clean_text, has_visible

MAX_QUESTIONS = 5000
MAX_CHARS = 20_000  # as for any question a protocol takes
MAX_FILE_BYTES = 20_000_000  # as the app's upload limit (.streamlit/config.toml maxUploadSize)
SHOWN_PROBLEMS = 8
FORMATS = ("csv", "jsonl", "ndjson")


@dataclass(frozen=True)
class Item:
    """One question of a set, with its expected answer when it has a definite one, and the
    set's provenance (`source`, `licence`) when it comes from a named set."""

    question: str
    expected: str | None = None
    source: str | None = None
    licence: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        """The question and expected answer, as a plan stores them (the set's provenance
        travels once, as the plan's source)."""
        return {"question": self.question, "expected": self.expected}


def load_file(path: str | Path) -> list[Item]:
    """Read a CSV or JSONL question file from disk."""
    path = Path(path)
    try:
        _check_size(path.stat().st_size, path.name)
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read question file {str(path)!r}: {exc.strerror}",
                          "input") from None
    return parse_questions(data, path.name)


def read_note(items: list[Item], filename: str) -> str:
    """What a question file gave, in one line for the page that read it."""
    scored = sum(1 for item in items if item.expected)
    return (f"{len(items):,} question{'s' * (len(items) != 1)} read from {filename}, "
            f"{scored:,} with an expected answer" + (
                " (only those are scored)" if 0 < scored < len(items) else "") + ".")


def parse_questions(data: bytes | str, filename: str) -> list[Item]:
    """Parse an uploaded question file; its extension (.csv, .jsonl) picks the format."""
    kind = Path(filename).suffix.lower().lstrip(".")
    if kind not in FORMATS:
        raise ConfigError(f"{filename}: a question file must be .csv or .jsonl", "input")
    _check_size(len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "replace")),
                filename)
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{filename} is not UTF-8 text (byte {exc.start + 1})",
                              "input") from None
    else:
        text = data.removeprefix("\ufeff")
    rows = _csv_rows(text, filename) if kind == "csv" else _jsonl_rows(text)
    return _checked(rows, filename)


def _check_size(size: int, filename: str) -> None:
    if size > MAX_FILE_BYTES:
        raise ConfigError(f"{filename} has {size:,} bytes; a question file may have at most "
                          f"{MAX_FILE_BYTES:,} ({MAX_FILE_BYTES // 1_000_000} MB)", "limit")


def from_records(records: Any, source: str = "questions") -> list[Item]:
    """Questions given inline (a spec's list): each a string or a mapping with `question` and
    an optional `expected`; bad items are named by their number (from 1)."""
    if not isinstance(records, list):
        raise ConfigError(f"{source} must be a list of questions", "input")
    rows: list[_Row] = []
    for number, record in enumerate(records, 1):
        if isinstance(record, str):
            rows.append((number, record, None))
        elif isinstance(record, dict):
            unknown = sorted(set(map(str, record)) - {"question", "expected"})
            if unknown:
                rows.append((number, f"!unknown key {unknown[0]!r} (use question, expected)",
                             None))
            else:
                rows.append((number, record.get("question"), record.get("expected")))
        else:
            rows.append((number, f"!is a {_kind(record)}, not a question", None))
    return _checked(rows, source, unit="item")


# A row as read: (line number, question or a problem, expected); problems are strings
# prefixed "!" so that one pass can collect every bad row before anything is rejected.
_Row = tuple[int, Any, Any]


def _csv_rows(text: str, filename: str) -> list[_Row]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise ConfigError(f"{filename} is empty; it needs a header row with a "
                          "`question` column", "input") from None
    except csv.Error as exc:
        raise ConfigError(f"{filename}: row 1 (the header) cannot be read: {exc}",
                          "input") from None
    names = [h.strip().lower() for h in header]
    duplicates = sorted({n for n in names if n and names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"{filename}: row 1 (the header) has the column "
                          f"{duplicates[0]!r} more than once", "input")
    if "question" not in names:
        shown = ", ".join(repr(h) for h in header[:6]) or "nothing"
        raise ConfigError(f"{filename}: row 1 (the header) needs a `question` column; it has "
                          f"{shown}", "input")
    q_col = names.index("question")
    e_col = names.index("expected") if "expected" in names else None
    rows: list[_Row] = []
    line = reader.line_num + 1
    while True:
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            rows.append((line, f"!cannot be read as CSV ({exc})", None))
            break  # the reader cannot resynchronise after a broken quote
        start, line = line, reader.line_num + 1
        if not record or all(not cell.strip() for cell in record):
            continue  # blank lines separate nothing and are not questions
        if len(record) > len(header):
            rows.append((start, f"!has {len(record)} fields, the header has {len(header)}",
                         None))
            continue
        question = record[q_col] if q_col < len(record) else None
        expected = record[e_col] if e_col is not None and e_col < len(record) else None
        rows.append((start, question, expected))
    return rows


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice")
        seen[key] = value
    return seen


def _jsonl_rows(text: str) -> list[_Row]:
    rows: list[_Row] = []
    # Lines end at "\n" only: str.splitlines would also split inside a JSON string holding
    # U+2028, U+0085 or a form feed, which JSON allows unescaped.
    for number, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw, object_pairs_hook=_no_duplicate_keys)
        except json.JSONDecodeError as exc:
            obj = f"!invalid JSON ({exc.msg} at column {exc.colno})"
        except ValueError as exc:  # a duplicate key, or an integer past Python's digit limit
            obj = f"!{str(exc).splitlines()[0]}"
        except RecursionError:
            obj = "!JSON nested too deeply"
        else:
            if not isinstance(obj, dict):
                obj = f"!is a JSON {type(obj).__name__}, not an object with a question"
        rows.append((number, obj, None) if isinstance(obj, str) else
                    (number, obj.get("question"), obj.get("expected")))
    return rows


def _problem(question: Any, expected: Any) -> str:
    if isinstance(question, str) and question.startswith("!"):
        return question[1:]
    if question is None:
        return "missing question"
    if not isinstance(question, str):
        return f"question is a {_kind(question)}, not text"
    if not question.strip():
        return "empty question"
    if not has_visible(question):
        return "the question has no visible characters"
    if "\x00" in question:
        return "NUL byte in the question"
    if len(question) > MAX_CHARS:
        return f"question has {len(question)} characters; the limit is {MAX_CHARS:,}"
    if expected is not None:
        if isinstance(expected, bool) or not isinstance(expected, (str, int, float)):
            return f"expected is a {_kind(expected)}, not text or a number"
        if "\x00" in str(expected):
            return "NUL byte in the expected answer"
    return ""


def _kind(value: Any) -> str:
    return {bool: "true/false", int: "number", float: "number", list: "list",
            dict: "object"}.get(type(value), type(value).__name__)


def _checked(rows: Iterable[_Row], filename: str, unit: str = "row") -> list[Item]:
    items: list[Item] = []
    bad: list[tuple[int, str]] = []
    for line, question, expected in rows:
        problem = _problem(question, expected)
        if problem:
            bad.append((line, problem))
            continue
        answer = None if expected is None else clean_text(str(expected)).strip() or None
        items.append(Item(clean_text(question.strip()), answer))
    if bad:
        numbers = ", ".join(str(line) for line, _ in bad[:30]) + (", ..." if len(bad) > 30
                                                                   else "")
        details = "; ".join(f"{unit} {line}: {why}" for line, why in bad[:SHOWN_PROBLEMS])
        more = f"; and {len(bad) - SHOWN_PROBLEMS} more" if len(bad) > SHOWN_PROBLEMS else ""
        where = "numbered as lines of the file" if unit == "row" else "numbered from 1"
        raise ConfigError(f"{filename}: {len(bad)} bad {unit}{'s' if len(bad) > 1 else ''} "
                          f"({unit}s {numbers}, {where}); {details}{more}", "input")
    if not items:
        raise ConfigError(f"{filename} has no questions", "input")
    if len(items) > MAX_QUESTIONS:
        raise ConfigError(f"{filename} has {len(items)} questions; the limit is "
                          f"{MAX_QUESTIONS}", "limit")
    return items
