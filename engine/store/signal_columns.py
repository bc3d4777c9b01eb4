"""A run's protocol-independent signals kept as typed columns beside its `metrics` JSON, so that
Insights' opening answers (mind changes, how the votes fell, confidence against accuracy) are
added up in SQL over a hundred thousand runs without parsing one JSON text per run.

`signal_values` reads them off a run's metrics (the names `engine.models.Signals` gives them)
whichever way the metrics arrived: the engine's, an imported file's, an old row's. A value of
the wrong type, negative or not finite is NULL, never a guess; a count is a whole number; a
share is clamped to [0, 1]. Round one's agreement (`first_share`) is the largest count of
round one's answers over all its answers, from `round_votes` (the answers counted per round):
NULL where the protocol gives no rounds or round one had fewer than two answers (one agent
agrees with nobody).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from engine.store.records import INT_MAX

# Each column and the metric it is read from (`first_share` is worked out from `round_votes`).
SIGNAL_COLUMNS = ("seats", "mind_changes", "persuaded", "misled", "consensus", "tied",
                  "confidence_level", "judge_confidence", "first_share")
LEVEL_MAX = 16  # runs.confidence_level is String(16)


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value < 0 or value != int(value):
        return None
    return min(int(value), INT_MAX)


def _share(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value):
        return None
    return min(max(float(value), 0.0), 1.0)


def _level(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip().lower()[:LEVEL_MAX]


def first_share(round_votes: Any) -> float | None:
    """Round one's plurality share of its answers (largest count / all counts), or None when
    round one had fewer than two answers."""
    if not isinstance(round_votes, list) or not round_votes:
        return None
    first = round_votes[0]
    if not isinstance(first, Mapping):
        return None
    counts = [c for c in (_count(v) for v in first.values()) if c is not None]
    total = sum(counts)
    return max(counts) / total if total >= 2 else None


def signal_values(metrics: Any) -> dict[str, Any]:
    """The typed signal columns of a run whose metrics are `metrics` (all None when it has
    none, such as a failed run's)."""
    m = metrics if isinstance(metrics, Mapping) else {}
    tied = m.get("tied")
    return {"seats": _count(m.get("seats")), "mind_changes": _count(m.get("mind_changes")),
            "persuaded": _count(m.get("persuaded")), "misled": _count(m.get("misled")),
            "consensus": _share(m.get("consensus")),
            "tied": tied if isinstance(tied, bool) else None,
            "confidence_level": _level(m.get("level")),
            "judge_confidence": _share(m.get("judge_confidence")),
            "first_share": first_share(m.get("round_votes"))}
