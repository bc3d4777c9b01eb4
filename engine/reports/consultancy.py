"""Judge accuracy with debate against consultancy (Khan et al., ICML 2024, reported 76% against
48%): beside each debate configuration of an experiment with `baseline: consultancy`, the
share of its scored runs whose judge's answer was right, and the same over its consultancy
baseline, where the judge read one debater's case alone (each side in turn). A configuration
and its sides-swapped twin are one row (the swap is how both sides are argued), with the
consultancy of each side shown too. Rates with their 95% Wilson interval and n."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from engine.reports.positions import swapped_label
from engine.views.aggregate import SIMULATED_SUFFIX, rate_text

COLUMNS = ["configuration", "judge accuracy: debate", "judge accuracy: consultancy",
           "consultancy, side in favour", "consultancy, side against", "difference"]


def _counts(summary: pd.DataFrame, labels: Sequence[str]) -> tuple[int, int]:
    """(right, scored) over the summary rows of `labels` (as shown, simulated suffix or
    not)."""
    shown = set(labels) | {label + SIMULATED_SUFFIX for label in labels}
    rows = summary[summary["configuration"].isin(shown)]
    return int(rows["correct"].fillna(0).sum()), int(rows["scored"].fillna(0).sum())


def table(summary: pd.DataFrame, pairs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per consultancy pairing (`kind` consultancy, from `baselines_of`)."""
    rows = []
    for pair in pairs:
        if pair.get("kind") != "consultancy":
            continue
        of, label = str(pair["of"]), str(pair["label"])
        debate = _counts(summary, [of, swapped_label(of)])
        both = _counts(summary, [label, swapped_label(label)])
        diff = (f"{debate[0] / debate[1] - both[0] / both[1]:+.0%}"
                if debate[1] and both[1] else "–")
        rows.append({"configuration": of, "judge accuracy: debate": rate_text(*debate),
                     "judge accuracy: consultancy": rate_text(*both),
                     "consultancy, side in favour": rate_text(*_counts(summary, [label])),
                     "consultancy, side against": rate_text(*_counts(
                         summary, [swapped_label(label)])),
                     "difference": diff})
    return pd.DataFrame(rows, columns=COLUMNS)
