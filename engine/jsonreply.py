"""Tolerant reading of JSON replies: code fences, prose around the object, a list around it."""
from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


def _candidates(text: str) -> list[str]:
    found = [m.group(1) for m in _FENCE.finditer(text)]
    found.append(text)
    return found


def _balanced(text: str, start: int) -> str | None:
    """The bracketed value starting at `start`, honouring strings and escapes."""
    opener = text[start]
    closer = "}" if opener == "{" else "]"
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return text[start:i + 1] if ch == closer else None
    return None


def extract_json(text: str) -> tuple[dict[str, Any] | None, str]:
    """The first JSON object in a reply, or (None, why not).

    Accepts an object in a code fence, an object with prose before and after it, and a list
    whose first object is taken. Never invents fields.
    """
    if not text or not text.strip():
        return None, "empty reply"
    for chunk in _candidates(text):
        for match in re.finditer(r"[\[{]", chunk):
            raw = _balanced(chunk, match.start())
            if raw is None:
                continue
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if isinstance(value, list):
                value = next((v for v in value if isinstance(v, dict)), None)
            if isinstance(value, dict):
                return value, ""
    return None, "no JSON object found in the reply"


REASK = ("Your previous reply could not be read as JSON ({why}). Reply again with only the JSON "
         "object, with the keys {keys}, and nothing else.")
