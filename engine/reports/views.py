"""What a protocol's result looks like on a page, as plain blocks the pages render as text.

A protocol's `view(run)` takes a stored run (`Store.get`) and returns blocks; the pages loop
over them with no protocol-specific code, and everything from a user or a model stays text.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["metrics", "text", "table", "warning", "caption"]


@dataclass(frozen=True)
class Block:
    """One piece of a result page.

    - metrics: `items` is a list of (label, value) pairs.
    - text: `body` is plain text (shown verbatim, never as HTML or markdown).
    - table: `rows` is a list of dicts with the same keys.
    - warning / caption: `body` is a one-line message.
    """

    kind: Kind
    title: str = ""
    body: str = ""
    items: list[tuple[str, Any]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)


def warnings_block(result: dict[str, Any]) -> list[Block]:
    return [Block("warning", body=str(w)) for w in result.get("warnings", [])]
