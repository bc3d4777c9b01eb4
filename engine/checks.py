"""Checks run before any call: text, names, numbers and run options (a seat's model is
`engine.protocols.checks.require_seat`'s, since it resolves the model).

Each raises `ConfigError` with a message that names the field and what it may be.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.models import ConfigError, Seat
from engine.text import NAME_MAX, fold_name, has_visible

ROUNDS_MAX = 20  # debate rounds, peer-review iterations and duel rounds: 1..20
QUESTION_MAX = 20_000
ORDER_SEED_MAX = 2**63 - 1  # an order seed is stored as JSON and read back by every backend


def require_text(value: Any, what: str, limit: int = QUESTION_MAX) -> str:
    """A question/topic/task (or, with `limit=NAME_MAX`, a name) with something visible in
    it, at most `limit` characters and no NUL, or a `ConfigError` naming the field."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{what} must be non-empty text", "input")
    if "\x00" in value:
        raise ConfigError(f"{what} must not contain NUL bytes", "input")
    if len(value) > limit:
        raise ConfigError(f"{what} is {len(value)} characters; the limit is {limit:,}",
                          "limit")
    if not has_visible(value):
        raise ConfigError(f"{what} must contain visible characters (it holds only spaces, "
                          "zero-width or control characters)", "input")
    return value


def require_name(value: Any, what: str) -> str:
    """A name that every backend stores alike: `require_text` at `NAME_MAX` characters."""
    return require_text(value, what, NAME_MAX)


def require_temperature(value: Any, what: str = "temperature") -> float:
    """A sampling temperature: a number in 0..2 (text refused)."""
    return float(require_number(what, value, {what: (0.0, 2.0)}, text=False))


def require_int(value: Any, name: str, low: int, high: int | None, protocol: str = "") -> int:
    """A whole number in `low..high` (no upper bound when `high` is None); the message names
    the `protocol` whose option it is, if any."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number, got {value!r}", "input")
    if value < low or (high is not None and value > high):
        span = f"{low}..{high}" if high is not None else f"at least {low}"
        where = f" for a {protocol}" if protocol else ""
        raise ConfigError(f"{name} must be {span}{where}, got {value}", "limit")
    return value


def require_number(name: str, raw: Any, ranges: Mapping[str, tuple[float, float]],
                   where: str = "", *, text: bool = True) -> float | int:
    """A number in its `ranges` entry (a model parameter's, an endpoint's call policy's; every
    name checked has one): a whole number when both bounds are whole, else read as a float; a
    string is read as a number only with `text` (a spec's query holds strings, a settings
    table real numbers)."""
    low, high = ranges[name]
    whole = isinstance(low, int) and isinstance(high, int)
    value: Any = raw
    if text and isinstance(raw, str):
        try:
            value = int(raw.strip()) if whole else float(raw.strip())
        except ValueError:
            value = None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            whole and not isinstance(value, int)) or value != value or not low <= value <= high:
        expected = "a whole number" if whole else "a number"
        raise ConfigError(f"{where}{name} must be {expected} in {low:g}..{high:g}, got {raw!r}",
                          "input")
    return float(value) if not whole else value


def unique_names(seats: Sequence[Seat], what: str) -> None:
    """Seat names must differ after folding case, spacing and look-alike letters (NFKC)."""
    seen: dict[str, str] = {}
    for seat in seats:
        key = fold_name(seat.name)
        if key in seen:
            same = "appears twice" if seen[key] == seat.name else (
                f"and {seen[key]!r} are the same name (case, spacing and look-alike letters "
                "are ignored)")
            raise ConfigError(f"{what} names must be unique; {seat.name!r} {same}", "input")
        seen[key] = seat.name


def check_run_options(run: Mapping[str, Any]) -> None:
    """The common run options checked before any call besides the call policy
    (`engine.llm.policy.CallPolicy.parse`): label, order seed, who started the run and
    tags."""
    if run.get("label") not in (None, ""):
        require_name(run["label"], "label")
    if run.get("order_seed") is not None:
        require_order_seed(run["order_seed"])
    if not isinstance(run.get("started_by", ""), str):
        raise ConfigError("started_by must be text (who started the run)", "input")
    tags = run.get("tags")
    if tags is not None:
        if isinstance(tags, str) or not isinstance(tags, (list, tuple, set, frozenset)):
            raise ConfigError(f"tags must be a list of text, got {type(tags).__name__}",
                              "input")
        for tag in tags:
            require_name(tag, "a tag")




def require_order_seed(value: Any) -> int | None:
    """An order seed: None (the configured order) or a whole number in 0..2**63-1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= ORDER_SEED_MAX:
        raise ConfigError(f"order_seed must be empty (the configured order) or a whole number "
                          f"in 0..{ORDER_SEED_MAX}, got {value!r}", "input")
    return value
