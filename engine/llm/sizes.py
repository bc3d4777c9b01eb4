"""How much of a reply Parley reads and keeps, and the record of a reply it cut.

A reply is stored up to `REPLY_CAP` bytes of UTF-8 (256 KB; a registered endpoint's
`max_reply_bytes` sets its own), cut at a character boundary; the parsers read the kept part
only. The turn keeps the size of what the model sent (`Turn.reply_bytes`) and a warning that
says where the reply was cut ("reply cut at 256 KB of 30 MB ...").

An HTTP response is read up to `body_cap` of the stored cap (twice it, plus 64 KB: JSON
escapes such as `\\n` or `\\u00e9` can double a reply's size on the wire), decompressed
included (`engine.llm.transport`); what is past it is never read. The transport hands the
chat completion it read so far on, its text cut honestly there, and says so in the
response's `CUT_HEADER`, which this module reads off the reply: what was read, and the
response's size when the server declared one (Content-Length of an uncompressed body), else
only that it was larger.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KB = 1024
REPLY_CAP = 256 * KB  # bytes of UTF-8 a stored reply keeps, unless its endpoint sets its own
MAX_REPLY_CAP = 64 * KB * KB  # the most an endpoint's `max_reply_bytes` may set (64 MB)
BODY_MARGIN = 64 * KB  # room for a chat completion's own fields around the reply
CUT_HEADER = "x-parley-cut"  # set by the transport on a response it stopped reading
_SLICE = 1 << 20  # characters encoded at a time when measuring a long reply


def body_cap(reply_cap: int) -> int:
    """The bytes of an HTTP response body read for a reply capped at `reply_cap`."""
    return 2 * reply_cap + BODY_MARGIN


def size_text(size: int) -> str:
    """A size in bytes as a person reads it: `900 bytes`, `256 KB`, `1.5 MB`, `30 MB`."""
    for unit, scale in (("GB", KB ** 3), ("MB", KB ** 2), ("KB", KB)):
        if size >= scale:
            return f"{size / scale:,.1f}".removesuffix(".0") + f" {unit}"
    return f"{size:,} bytes"


def utf8_size(text: str) -> int:
    """The size of `text` in bytes of UTF-8, measured a slice at a time (a 30 MB reply is not
    copied whole to be measured)."""
    if text.isascii():
        return len(text)
    return sum(len(text[i:i + _SLICE].encode("utf-8", "surrogatepass"))
               for i in range(0, len(text), _SLICE))


def cut_text(text: str, cap: int) -> str:
    """The longest start of `text` that fits in `cap` bytes of UTF-8 (whole characters)."""
    if len(text) <= cap // 4:  # four bytes a character at most: it fits, unmeasured
        return text
    head = text[:cap].encode("utf-8", "surrogatepass")[:cap]
    return head.decode("utf-8", "ignore")


@dataclass(frozen=True)
class ReplyCut:
    """Where a reply was cut: `kept` bytes stored of `size`. `response` when the transport
    stopped reading the server's response (`size` is then the response's declared size, or,
    `more`, the bytes read of a response that did not declare it: a lower bound)."""

    kept: int
    size: int
    response: bool = False
    more: bool = False

    @property
    def warning(self) -> str:
        """The turn's warning: what was kept, of how much, and why."""
        kept = f"reply cut at {size_text(self.kept)}"
        if not self.response:
            return (f"{kept} of {size_text(self.size)}: a stored reply keeps its first "
                    f"{size_text(self.kept)} (max_reply_bytes); the parsers read that part")
        if self.more:
            return (f"{kept}: the server's response passed {size_text(self.size)} (its whole "
                    "size unknown: compressed, or not declared) and Parley read no further")
        return (f"{kept} of a {size_text(self.size)} response: Parley read its start only and "
                "stopped; the parsers read the part kept")


def reply_cap(model: Any) -> int:
    """The stored cap of a model's replies: its endpoint's `max_reply_bytes` (recorded by
    `get_model` in the model's call policy), else `REPLY_CAP`."""
    call = getattr(model, "parley_call", None)
    value = call.get("max_reply_bytes") if isinstance(call, Mapping) else None
    return value if isinstance(value, int) and value > 0 else REPLY_CAP


def transport_cut(message: Any) -> tuple[int, int | None] | None:
    """(bytes read, declared size or None) when the transport stopped reading the response
    `message` came from (`CUT_HEADER`, which it sets and a server cannot: any it sends is
    dropped); None when the response was read whole."""
    metadata = getattr(message, "response_metadata", None)
    headers = metadata.get("headers") if isinstance(metadata, Mapping) else None
    if not isinstance(headers, Mapping):
        return None
    raw = next((v for k, v in headers.items() if str(k).lower() == CUT_HEADER), None)
    if not isinstance(raw, str):
        return None
    fields = dict(part.strip().partition("=")[::2] for part in raw.split(";"))
    try:
        read = int(fields.get("read", ""))
    except ValueError:
        return None
    size = fields.get("size", "")
    return read, int(size) if size.isdigit() else None


def capped_reply(text: str, message: Any, model: Any) -> tuple[str, ReplyCut | None]:
    """A reply as stored and parsed: `text` cut to its model's cap (`reply_cap`), and where
    it was cut (None: kept whole, and the response read whole)."""
    cap = reply_cap(model)
    kept = cut_text(text, cap)
    cut = transport_cut(message)
    if cut is not None:
        read, size = cut
        return kept, ReplyCut(utf8_size(kept), size if size is not None else read,
                              response=True, more=size is None)
    if kept is text:
        return text, None
    size = utf8_size(text)
    if size <= cap:
        return text, None
    return kept, ReplyCut(utf8_size(kept), size)
