"""Statistics for "is the consensus earned?", as plain functions on plain numbers:
a mean with its interval, selective accuracy against coverage and its area (AUARC), and the
fix/break odds ratio of a majority. Each docstring states the arithmetic and a worked example,
so a figure can be checked by hand; ECE, Brier and Wilson intervals are `engine.analysis.stats`.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from engine.analysis.stats import Z95, wilson_interval

NAN = float("nan")


class Estimate(NamedTuple):
    """A number with its 95% interval and the n it rests on (NaN where unknown)."""

    value: float
    low: float
    high: float
    n: int


def mean_interval(values: Sequence[float], z: float = Z95) -> Estimate:
    """The mean of `values` with its normal-approximation 95% interval:
    mean ± z·s/√n, s the sample standard deviation (n − 1 in the denominator).

    (0.5, 0.0, 0.25, 0.25): mean 0.25, s = √(0.125/3) = 0.2041, half-width 1.96·0.2041/2 =
    0.2000, so (0.05, 0.45). One value: its mean, interval unknown (NaN); none: all NaN.
    The paired difference of two right/wrong outcomes is this over per-pair differences in
    {−1, 0, 1}: b breaks and c fixes of n give (c − b)/n and s² = ((b + c) − (c − b)²/n)/(n − 1).
    """
    n = len(values)
    if not n:
        return Estimate(NAN, NAN, NAN, 0)
    mean = math.fsum(values) / n
    if n < 2:
        return Estimate(mean, NAN, NAN, n)
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = z * math.sqrt(variance / n)
    return Estimate(mean, mean - half, mean + half, n)


def odds_ratio(fixes: int, breaks: int, z: float = Z95) -> Estimate:
    """The fix/break odds ratio of a majority: over paired runs, how many times the round-one
    majority was wrong and the final answer right (`fixes`) per time it was right and the
    final wrong (`breaks`): the paired (McNemar) odds ratio fixes/breaks, with its 95%
    interval exp(log OR ± z·√(1/fixes + 1/breaks)). When either count is 0, 0.5 is added to
    both (Haldane-Anscombe) so the ratio and its interval stay finite. `n` is fixes + breaks
    (the runs whose correctness changed; the others carry no information on the ratio).

    6 fixes, 2 breaks: OR 3, SE √(1/6 + 1/2) = 0.8165, interval exp(1.0986 ± 1.6003) =
    (0.606, 14.86). 4 fixes, 0 breaks: (4.5/0.5) = 9, SE √(1/4.5 + 2) = 1.4907, interval
    (0.485, 167.2). No changes at all: all NaN.
    """
    if fixes < 0 or breaks < 0:
        raise ValueError(f"counts must be >= 0, got {fixes} and {breaks}")
    if fixes + breaks == 0:
        return Estimate(NAN, NAN, NAN, 0)
    f, b = (fixes + 0.5, breaks + 0.5) if 0 in (fixes, breaks) else (fixes, breaks)
    log = math.log(f / b)
    half = z * math.sqrt(1 / f + 1 / b)
    return Estimate(f / b, math.exp(log - half), math.exp(log + half), fixes + breaks)


def _blocks(confidences: Sequence[float], outcomes: Sequence[Any]
            ) -> list[tuple[float, int, int]]:
    """(confidence, count, right) per distinct confidence, most confident first."""
    if len(confidences) != len(outcomes):
        raise ValueError(f"{len(confidences)} confidences but {len(outcomes)} outcomes")
    groups: dict[float, list[int]] = {}
    for c, o in zip(confidences, outcomes, strict=True):
        cell = groups.setdefault(float(c), [0, 0])
        cell[0] += 1
        cell[1] += 1 if o else 0
    return [(c, n, right) for c, (n, right) in sorted(groups.items(), reverse=True)]


def selective_curve(confidences: Sequence[float], outcomes: Sequence[Any]
                    ) -> list[dict[str, float]]:
    """Selective accuracy against coverage: answering only the runs at or above each distinct
    confidence (most confident first), the share of runs answered (`coverage`), how many
    (`n`), how many right (`right`), the `accuracy` and its 95% Wilson interval (`low`,
    `high`), and the `threshold`. Runs of equal confidence are answered together.

    Confidences (0.9, 0.8, 0.8, 0.5) with outcomes (1, 1, 0, 0): coverage 0.25 accuracy 1.0,
    coverage 0.75 accuracy 2/3, coverage 1.0 accuracy 0.5."""
    blocks = _blocks(confidences, outcomes)
    total = sum(n for _, n, _ in blocks)
    out, n_seen, right_seen = [], 0, 0
    for threshold, n, right in blocks:
        n_seen, right_seen = n_seen + n, right_seen + right
        low, high = wilson_interval(right_seen, n_seen)
        out.append({"threshold": threshold, "coverage": n_seen / total, "n": n_seen,
                    "right": right_seen, "accuracy": right_seen / n_seen, "low": low,
                    "high": high})
    return out


def auarc(confidences: Sequence[float], outcomes: Sequence[Any]) -> float:
    """The area under the accuracy-rejection (selective accuracy against coverage) curve:
    the mean, over k = 1..N, of the accuracy of the k most confident runs. Runs of equal
    confidence enter in an order nobody can tell apart, so each counts at its tie's mean
    accuracy (the expected area over every order of the tie). 1 when every run is right;
    higher than the overall accuracy when confidence ranks right runs first.

    (0.9, 0.8, 0.7, 0.6) with (1, 0, 1, 0): (1 + 1/2 + 2/3 + 2/4) / 4 = 0.6667.
    (0.9, 0.9, 0.5) with (1, 0, 1): the tie counts at 0.5 each: (0.5 + 1/2 + 2/3) / 3 = 0.5556.
    No runs: NaN."""
    blocks = _blocks(confidences, outcomes)
    total = sum(n for _, n, _ in blocks)
    if not total:
        return NAN
    area, n_seen, right_seen = 0.0, 0, 0.0
    for _, n, right in blocks:
        share = right / n
        for _ in range(n):
            n_seen += 1
            right_seen += share
            area += right_seen / n_seen
    return area / total
