"""An experiment's order and sides (DESIGN 2.10): `order: shuffled` and `sides: both`.

- `order`: `configured` (the default: seats are presented as configured) or `shuffled`: each
  cell gets an order seed derived from the experiment's `seed`, its question's text and its
  repeat (`cell_order_seed`, a SHA-256 of the three, so the same in every process), so the
  configurations compared on one question and repeat meet the same draw, and repeats differ.
- `sides`: `one` (the default) or `both`: every configuration whose protocol has sides (an
  option `swap_sides`) gets a twin right after the configurations, with its sides swapped and
  its label suffixed `SWAPPED`. A twin is an ordinary configuration, so its cells are keyed
  like any other (`cell:Q:C:R`) and a resumed experiment neither repeats nor misses one; a
  stored spec planned again finds its twins and pairs them instead of adding them twice.
"""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from engine.checks import ORDER_SEED_MAX
from engine.models import ConfigError
from engine.reports.positions import SWAPPED, swapped_label
from engine.simulated.world import stable_int

ORDERS = ("configured", "shuffled")
SIDES = ("one", "both")


def _choice(value: Any, name: str, allowed: tuple[str, ...]) -> str:
    text = value.strip().lower() if isinstance(value, str) else value
    if text is None or text == "":
        return allowed[0]
    if text not in allowed:
        raise ConfigError(f"{name} must be {' or '.join(allowed)}, got {value!r}", "input")
    return str(text)


def order_kind(value: Any) -> str:
    """A spec's `order`: configured (default) or shuffled."""
    return _choice(value, "order", ORDERS)


def sides_kind(value: Any) -> str:
    """A spec's `sides`: one (default) or both."""
    return _choice(value, "sides", SIDES)


def spec_seed(value: Any) -> int:
    """A spec's `seed` (default 0), from which `order: shuffled` derives each cell's."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= ORDER_SEED_MAX:
        raise ConfigError(f"seed must be a whole number in 0..{ORDER_SEED_MAX}, got {value!r}",
                          "input")
    return value


def cell_order_seed(seed: int, question: str, repeat: int) -> int:
    """The order seed of a cell: SHA-256 of the experiment's seed, the question's text and
    the repeat, as a whole number in 0..2**63-1 (never Python's `hash`, which differs
    between processes)."""
    return stable_int(seed, question, repeat) & ORDER_SEED_MAX


def derangement(n: int, seed: int) -> list[int]:
    """A seeded derangement of `n` question indexes (n >= 2): index i's donor is the i-th
    value, never i itself. Sattolo's algorithm draws a single cycle through all of them, so
    every question both gives and receives once; the same seed gives the same donors."""
    if n < 2:
        raise ValueError("a derangement needs two or more items")
    order = list(range(n))
    draw = random.Random(f"placebo:{seed}")
    for i in range(n - 1, 0, -1):
        j = draw.randrange(i)  # j < i: no element stays where it was
        order[i], order[j] = order[j], order[i]
    return order


def has_sides(config: Mapping[str, Any]) -> bool:
    """Whether a configuration's protocol has sides to swap (an option `swap_sides`)."""
    from engine.protocols import get_protocol
    try:
        spec = get_protocol(str(config.get("protocol", "")))
    except ConfigError:
        return False
    return any(option.name == "swap_sides" for option in spec.options)


def with_swapped(configs: Sequence[Mapping[str, Any]]
                 ) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The configurations, then each one that has sides again with its sides swapped (the
    twin of one already swapped swaps back), and the pairs `{"label", "swapped"}`. A twin
    already among the configurations (a stored spec) is paired, not added twice."""
    out = [dict(config) for config in configs]
    labels = {str(config["label"]) for config in out}
    pairs: list[dict[str, str]] = []
    for config in list(out):
        label = str(config["label"])
        if label.endswith(SWAPPED) or not has_sides(config):
            continue
        twin_label = swapped_label(label)
        pairs.append({"label": label, "swapped": twin_label})
        if twin_label in labels:
            continue
        options = dict(config.get("options") or {})
        options["swap_sides"] = not bool(options.get("swap_sides", False))
        out.append({**config, "label": twin_label, "options": options})
        labels.add(twin_label)
    if not pairs:
        raise ConfigError("sides: both needs a configuration whose protocol has sides to swap "
                          "(a debate); none of these has", "input")
    return out, pairs


def twins(configs: Sequence[Mapping[str, Any]]) -> set[str]:
    """The labels of the sides-swapped twins among stored configurations."""
    labels = {str(c["label"]) for c in configs}
    return {label for label in labels if label.endswith(SWAPPED)
            and any(swapped_label(other) == label for other in labels if other != label)}

