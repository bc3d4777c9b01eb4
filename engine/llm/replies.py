"""Tolerant, bounded reading of JSON replies: code fences, prose around the object, a list
around it, and whatever a hostile model sends.

One linear pass pairs the brackets (honouring strings); the reply's answer is the LAST
top-level bracketed value that parses to an object (or a list holding one), so a model that
quotes another seat's JSON and then gives its own is read for its own, and an object nested
inside a quoted one is never taken. A bracketed span that is not valid JSON (prose such as
`{see below}` around an object) is looked into for the values inside it. Bounded: at most
`MAX_REPLY_CHARS` characters, `MAX_DEPTH` levels of nesting and `MAX_ATTEMPTS` parse attempts;
numbers must be finite and within Python's digit limit. Nothing here raises on any text.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

from engine.llm.sizes import REPLY_CAP
from engine.text import clean_value

# every reply the store keeps at its default cap is read: a JSON answer that a runaway model
# followed with a cut tail (JSON mode's endless whitespace) still counts
MAX_REPLY_CHARS = REPLY_CAP
MAX_DEPTH = 64
MAX_ATTEMPTS = 500


class _Span:
    """A matched pair of brackets: where it starts and ends, how deep it nests, what is inside."""

    __slots__ = ("start", "end", "depth", "children")

    def __init__(self, start: int, end: int, depth: int, children: list[_Span]):
        self.start, self.end, self.depth, self.children = start, end, depth, children


# Only these characters matter to the pairing; everything else is skipped by the regex engine.
_SPECIAL = re.compile(r'[{}\[\]"\\\n]')


def _top_spans(text: str) -> list[_Span]:
    """Every matched `{...}` / `[...]` pair not inside another matched pair, in one pass.

    Quotes count only inside brackets (prose has apostrophes and quotation marks); a string
    ends at a newline, which JSON strings cannot hold, so one stray quote spoils one line at
    most. A closer that does not match the innermost opener is ignored (prose), and an opener
    that never closes leaves the pairs inside it at the top level.
    """
    top: list[_Span] = []
    # open brackets: [closer, start, children, depth of the deepest child pair]
    stack: list[list[Any]] = []
    in_string = False
    skip = -1  # the position after a backslash inside a string
    for match in _SPECIAL.finditer(text):
        i = match.start()
        if i == skip:
            continue
        ch = text[i]
        if in_string:
            if ch == "\\":
                skip = i + 1
            elif ch == '"' or ch == "\n":
                in_string = False
        elif ch == '"':
            in_string = bool(stack)
        elif ch == "{" or ch == "[":
            stack.append(["}" if ch == "{" else "]", i, None, 0])
        elif stack and stack[-1][0] == ch:
            _, begin, children, inner = stack.pop()
            span = _Span(begin, i + 1, inner + 1, children or [])
            if stack:  # the innermost open bracket adopts it
                parent = stack[-1]
                if parent[2] is None:
                    parent[2] = []
                parent[2].append(span)
                parent[3] = max(parent[3], span.depth)
            else:
                top.append(span)
    for entry in stack:  # pairs inside brackets that never closed are top-level after all
        top.extend(entry[2] or ())
    top.sort(key=lambda s: s.start)
    return top


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]} is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _loads(raw: str) -> Any:
    return json.loads(raw, parse_float=_finite, parse_constant=_no_constant)


def extract_json(text: str) -> tuple[dict[str, Any] | None, str]:
    """The reply's final top-level JSON object, or (None, why not); never raises.

    Accepts an object in a code fence, an object with prose before and after it, and a list
    whose first object is taken. Never invents fields; strings in the object are made
    storable (`engine.text.clean_value`). A reply over `MAX_REPLY_CHARS` characters, JSON
    nested deeper than `MAX_DEPTH`, an integer past Python's digit limit or a non-finite
    number is not read, and the reason says so.
    """
    if not isinstance(text, str) or not text.strip():
        return None, "empty reply"
    if len(text) > MAX_REPLY_CHARS:
        return None, (f"the reply has {len(text):,} characters; a JSON reply is read up to "
                      f"{MAX_REPLY_CHARS:,}")
    pending = _top_spans(text)  # a stack: the last span is tried first
    why = "no JSON object found in the reply"
    attempts = 0
    while pending and attempts < MAX_ATTEMPTS:
        span = pending.pop()
        if span.depth > MAX_DEPTH:
            why = f"the JSON nests deeper than {MAX_DEPTH} levels"
            continue  # never read a value from inside it either
        attempts += 1
        try:
            value = _loads(text[span.start:span.end])
        except json.JSONDecodeError:
            pending.extend(span.children)  # not JSON itself: look inside, last first
            continue
        except (ValueError, RecursionError) as exc:  # digit limit, NaN, 1e999
            why = f"the JSON cannot be read: {str(exc).splitlines()[0][:120]}"
            continue
        if isinstance(value, list):
            value = next((v for v in value if isinstance(v, dict)), None)
        if isinstance(value, dict):
            return clean_value(value), ""
    if pending and attempts >= MAX_ATTEMPTS:
        why = f"no JSON object found in the reply's last {MAX_ATTEMPTS} bracketed values"
    return None, why


REASK = ("Your previous reply could not be read as JSON ({why}). Reply again with only the JSON "
         "object, with the keys {keys}, and nothing else.")
