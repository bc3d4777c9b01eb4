"""What a protocol's result looks like on a page, as plain blocks the pages render as text.

A protocol's `view(result)` takes its typed result and returns blocks; the pages loop over
them with no protocol-specific code, and everything from a user or a model stays text. Two
kinds carry data for a chart: `tally` (a vote's counts, drawn as bars) and `flow` (who held
what before and after, drawn as a Sankey).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["metrics", "text", "table", "warning", "caption", "tally", "flow"]


@dataclass(frozen=True)
class Block:
    """One piece of a result page.

    - metrics: `items` is a list of (label, value) pairs.
    - text: `body` is plain text (shown verbatim, never as HTML or markdown).
    - table: `rows` is a list of dicts with the same keys.
    - warning / caption: `body` is a one-line message.
    - tally: `counts` maps each stance to its votes, `winner` names the winner (or "").
    - flow: `rows` are `{"seat", "before", "after"}` stances (abstentions spelled out).
    """

    kind: Kind
    title: str = ""
    body: str = ""
    items: list[tuple[str, Any]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    winner: str = ""


def warnings_block(warnings: list[str]) -> list[Block]:
    """A warning block per run warning."""
    return [Block("warning", body=str(w)) for w in warnings]
