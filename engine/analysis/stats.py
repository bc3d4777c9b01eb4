"""Statistics for experiments, as plain functions on plain numbers.

Each docstring states the arithmetic, so a reader can check a figure by hand. Nothing here
knows about runs or the store; `engine.experiments` turns runs into the counts these take.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

Z95 = 1.959963984540054  # the standard normal quantile for a two-sided 95% interval


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for a proportion `successes / n` (95% by default).

    With p = k/n:  centre = (p + z²/2n) / (1 + z²/n),
                   half   = z·√(p(1−p)/n + z²/4n²) / (1 + z²/n),
    and the interval is (centre − half, centre + half), clipped to [0, 1].
    8 of 10 gives (0.4902, 0.9433). With n = 0 nothing is known: (0.0, 1.0).
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    # at k = 0 (k = n) the bound is exactly 0 (1); say so rather than 1e-17 (0.99999...)
    return (0.0 if successes == 0 else low), (1.0 if successes == n else high)


def _pairs(confidences: Sequence[float], outcomes: Sequence[Any]) -> list[tuple[float, float]]:
    if len(confidences) != len(outcomes):
        raise ValueError(f"{len(confidences)} confidences but {len(outcomes)} outcomes")
    pairs = []
    for c, o in zip(confidences, outcomes):
        c = float(c)
        if not 0.0 <= c <= 1.0:
            raise ValueError(f"a confidence must lie in [0, 1], got {c}")
        pairs.append((c, 1.0 if o else 0.0))
    return pairs


def bin_index(confidence: float, bins: int = 10) -> int:
    """The reliability bin of `confidence` in [0, 1]: [i/bins, (i+1)/bins), the last bin
    also holding 1.0; the small epsilon keeps 0.3 (= 2.9999... in binary) out of the bin
    below."""
    return min(int(math.floor(confidence * bins + 1e-9)), bins - 1)


def reliability_bins(confidences: Sequence[float], outcomes: Sequence[Any],
                     bins: int = 10) -> list[dict[str, float]]:
    """The reliability diagram's points: equal-width confidence bins and their accuracy.

    Bin i covers [i/bins, (i+1)/bins); the last bin also holds 1.0. For each non-empty bin:
    `count`, `confidence` = mean confidence in the bin, `accuracy` = share of outcomes that are
    true, `gap` = |accuracy − confidence|, and the bin's `low` and `high` edges.
    A perfectly calibrated signal puts every point on the diagonal.
    """
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got {bins}")
    groups: dict[int, list[tuple[float, float]]] = {}
    for c, o in _pairs(confidences, outcomes):
        groups.setdefault(bin_index(c, bins), []).append((c, o))
    out = []
    for index in sorted(groups):
        members = groups[index]
        mean_c = sum(c for c, _ in members) / len(members)
        accuracy = sum(o for _, o in members) / len(members)
        out.append({"bin": index, "low": index / bins, "high": (index + 1) / bins,
                    "count": len(members), "confidence": mean_c, "accuracy": accuracy,
                    "gap": abs(accuracy - mean_c)})
    return out


def ece(confidences: Sequence[float], outcomes: Sequence[Any], bins: int = 10) -> float:
    """Expected calibration error: Σ over non-empty bins of (n_b / N)·|accuracy_b − confidence_b|.

    Bins as in `reliability_bins`. Confidences (0.9, 0.9, 0.6, 0.6, 0.2) with outcomes
    (1, 0, 1, 1, 0): bin 0.9 has gap |0.5 − 0.9| = 0.4, bin 0.6 |1.0 − 0.6| = 0.4, bin 0.2
    |0 − 0.2| = 0.2, so ECE = (2·0.4 + 2·0.4 + 1·0.2) / 5 = 0.36. No data: NaN.
    """
    return ece_of_bins(reliability_bins(confidences, outcomes, bins))


def ece_of_bins(points: Sequence[Mapping[str, float]]) -> float:
    """`ece` from the bins `reliability_bins` made already (no second pass over the data)."""
    total = sum(p["count"] for p in points)
    if not total:
        return float("nan")
    return sum(p["count"] / total * p["gap"] for p in points)


def brier(confidences: Sequence[float], outcomes: Sequence[Any]) -> float:
    """Brier score: the mean of (confidence − outcome)², outcome 1 if correct else 0.

    0 is perfect; always saying 0.5 scores 0.25. The ECE example above scores
    (0.01 + 0.81 + 0.16 + 0.16 + 0.04) / 5 = 0.236. No data: NaN.
    """
    pairs = _pairs(confidences, outcomes)
    if not pairs:
        return float("nan")
    return sum((c - o) ** 2 for c, o in pairs) / len(pairs)


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign test: the p-value that wins and losses split this unevenly by chance.

    Ties are left out before calling. With n = wins + losses and k = min(wins, losses),
    under the null hypothesis each untied pair is a fair coin, so
    p = min(1, 2 · Σ_{i=0..k} C(n, i) / 2ⁿ).
    9 wins and 1 loss: 2 · (C(10,0) + C(10,1)) / 1024 = 2 · 11 / 1024 = 0.021484375.
    No untied pairs: p = 1.
    """
    if wins < 0 or losses < 0:
        raise ValueError(f"counts must be >= 0, got {wins} and {losses}")
    n = wins + losses  # the tail in exact fractions, capped at 1
    tail = Fraction(sum(math.comb(n, i) for i in range(min(wins, losses) + 1)), 2 ** n)
    return float(min(Fraction(1), 2 * tail))


def paired_difference_interval(both: int, only_a: int, only_b: int, neither: int,
                               z: float = Z95) -> tuple[float, float]:
    """Newcombe's hybrid score interval (1998, method 10) for p_A − p_B, two rates measured on
    the same n items: `both` right under A and B, `only_a` right under A only, `only_b` under
    B only, `neither`.

    With p_A = (both + only_a)/n, p_B = (both + only_b)/n, Wilson intervals (l_A, u_A) and
    (l_B, u_B), and φ = (both·neither − only_a·only_b) / √((both+only_a)(only_b+neither)
    (both+only_b)(only_a+neither)) (0 when a margin is empty):
        low  = (p_A − p_B) − √((p_A − l_A)² − 2φ(p_A − l_A)(u_B − p_B) + (u_B − p_B)²),
        high = (p_A − p_B) + √((u_A − p_A)² − 2φ(u_A − p_A)(p_B − l_B) + (p_B − l_B)²),
    clipped to [−1, 1]. 10 items, 6 right under both, 3 under A only, 1 under neither:
    0.3 within (0.0022, 0.5646). No items: (−1, 1).
    """
    counts = (both, only_a, only_b, neither)
    if min(counts) < 0:
        raise ValueError(f"counts must be >= 0, got {counts}")
    n = sum(counts)
    if n == 0:
        return -1.0, 1.0
    p_a, p_b = (both + only_a) / n, (both + only_b) / n
    low_a, high_a = wilson_interval(both + only_a, n, z)
    low_b, high_b = wilson_interval(both + only_b, n, z)
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = (both * neither - only_a * only_b) / math.sqrt(margins) if margins else 0.0
    down = (p_a - low_a) ** 2 - 2 * phi * (p_a - low_a) * (high_b - p_b) + (high_b - p_b) ** 2
    up = (high_a - p_a) ** 2 - 2 * phi * (high_a - p_a) * (p_b - low_b) + (p_b - low_b) ** 2
    diff = p_a - p_b
    return max(-1.0, diff - math.sqrt(max(down, 0.0))), min(1.0, diff + math.sqrt(max(up, 0.0)))


def independent_difference_interval(a: float, low_a: float, high_a: float, b: float,
                                    low_b: float, high_b: float) -> tuple[float, float]:
    """The 95% interval of a − b for two estimates made on independent samples, from each
    one's own interval (Newcombe's square-and-add, 1998 method 10 with no correlation;
    Zou and Donner's MOVER): with Wilson intervals it is Newcombe's hybrid score interval
    for two independent proportions, with normal intervals of two means Welch's.

        low  = (a − b) − √((a − low_a)² + (high_b − b)²),
        high = (a − b) + √((high_a − a)² + (b − low_b)²).

    a = 0.5 in (0.3, 0.7), b = 0.2 in (0.1, 0.35): 0.3 within (0.3 − √(0.04 + 0.0225),
    0.3 + √(0.04 + 0.01)) = (0.05, 0.5236). NaN in, NaN out.
    """
    diff = a - b
    return (diff - math.sqrt((a - low_a) ** 2 + (high_b - b) ** 2),
            diff + math.sqrt((high_a - a) ** 2 + (b - low_b) ** 2))
