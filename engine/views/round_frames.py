"""Per-run frames of the rounds protocols, shared by their Insights sections and the
experiment reports: accuracy counts by round, mind changes between rounds, and the conformity
rates.

Accuracy at round k counts the scored runs that have a round k, each scored with
`answers_match` (the one scoring rule) on that round's plurality (`round_answers`); a run
without rounds counts once, at its configuration's final round, from its `correct`.

The conformity rates (`engine.analysis.conformity`) are counts over their chances, summed over
runs: right-to-wrong over answers right the round before (DebateLLM's "bullied"),
wrong-to-right over answers wrong before ("relied on other"), adoption of the previous
round's plurality over agents off it, and runs whose final plurality discarded a correct
answer some agent gave ("Cost of Consensus", 2026) over runs where one did.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from engine.analysis.answers import Answers
from engine.views.aggregate import FEW, as_flag, interval, rate_text

ROUND_COLUMNS = ["configuration", "round", "right", "n", "accuracy", "low", "high",
                 "accuracy [95% CI] n", "few"]
# (measure, its count column, its chances column): the conformity fields of `Signals`
CONFORMITY = (("right to wrong (bullied)", "right_to_wrong", "right_before"),
              ("wrong to right (relied on other)", "wrong_to_right", "wrong_before"),
              ("adopted the previous round's majority", "adopted_majority", "off_majority"),
              ("final plurality discarded a correct answer", "discarded_correct",
               "had_correct"))
CONFORMITY_FIELDS = tuple(f for _, count, chances in CONFORMITY for f in (chances, count))
CONFORMITY_COLUMNS = ["configuration", "measure", "count", "n", "rate", "low", "high",
                      "rate [95% CI] n", "few"]


def flag(value: Any) -> bool | None:
    """A stored flag as a bool; None when missing (None or NaN)."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    return bool(value)


def round_counts(runs: pd.DataFrame, by: str, last: Mapping[str, int] | None = None
                 ) -> dict[str, dict[int, list[int]]]:
    """Per group and round: [right, n] over the scored runs (`correct` known) of `runs`
    (columns `by`, `correct`, `expected`, `round_answers`). A run with `round_answers` and
    its expected answer counts at each of its rounds; one without rounds counts its `correct`
    at `last[group]` (default 1), one without the expected answer at its last round."""
    out: dict[str, dict[int, list[int]]] = {}
    match = Answers().match  # each distinct answer read once (`answers_match`)
    for group, correct, expected, answers in zip(
            runs[by].tolist(), runs["correct"].tolist(), runs["expected"].tolist(),
            runs["round_answers"].tolist(), strict=True):
        right = flag(correct)
        if right is None:
            continue
        rounds = out.setdefault(str(group), {})
        listed = list(answers) if isinstance(answers, (list, tuple)) else []
        if listed and isinstance(expected, str):
            scored = [(k, bool(match(a, expected))) for k, a in enumerate(listed, 1)]
        else:  # no rounds, or no expected answer at hand to score them: the final one only
            scored = [(len(listed) or (last or {}).get(str(group), 1), right)]
        for number, ok in scored:
            cell = rounds.setdefault(number, [0, 0])
            cell[0] += ok
            cell[1] += 1
    return out


def round_point(group: str, number: int, right: int, n: int, by: str) -> dict[str, Any]:
    low, high = interval(right, n)
    return {by: group, "round": number, "right": right, "n": n, "accuracy": right / n,
            "low": low, "high": high, "accuracy [95% CI] n": rate_text(right, n),
            "few": n < FEW}


def conformity_rates(runs: pd.DataFrame, by: str, groups: Iterable[str] | None = None,
                     name: str = "configuration") -> pd.DataFrame:
    """Per group (in `groups`' order, else sorted) and conformity measure, summed over the
    runs that carry it: `count` of `n` chances, `rate`, its 95% Wilson interval, the text
    "12% [5–25%] n=40" and `few`. A group none of whose runs carries the measure (a
    protocol without rounds) has no row."""
    present = [f for f in CONFORMITY_FIELDS if f in runs]
    if runs.empty or len(present) < len(CONFORMITY_FIELDS):
        return pd.DataFrame(columns=CONFORMITY_COLUMNS).rename(columns={"configuration": name})
    keys = runs[by].astype(str)
    order = list(groups) if groups is not None else sorted(set(keys))
    numbers = {field: as_flag(runs[field]) for field in CONFORMITY_FIELDS}  # once, not per group
    rows = []
    for group in order:
        mine = (keys == group).to_numpy(dtype=bool)
        for measure, count_column, chances_column in CONFORMITY:
            chances = numbers[chances_column][mine]
            if chances.notna().sum() == 0:
                continue
            n = int(chances.sum())
            count = int(numbers[count_column][mine][chances.notna()].fillna(0).sum())
            low, high = interval(count, n)
            rows.append({name: group, "measure": measure, "count": count, "n": n,
                         "rate": count / n if n else float("nan"), "low": low, "high": high,
                         "rate [95% CI] n": rate_text(count, n), "few": n < FEW})
    return pd.DataFrame(rows, columns=[name, *CONFORMITY_COLUMNS[1:]])


# --------------------------------------------------------------------------- Insights
def mind_change_counts(results: pd.DataFrame, by: str = "group"
                       ) -> dict[str, dict[int, list[int]]]:
    """Per group and round k >= 2: [agents whose answer in k differs from their answer in
    k-1, agents answering in both] over the stored results (each a dict with `rounds`: lists
    of replies with `agent` and `answer`; an abstention is no answer)."""
    out: dict[str, dict[int, list[int]]] = {}
    for group, result in zip(results[by], results["result"], strict=True):
        replies = result.get("rounds") if isinstance(result, Mapping) else None
        rounds = out.setdefault(str(group), {})
        for number, (before, after) in enumerate(zip(replies or [], (replies or [])[1:]), 2):
            old = {r.get("agent"): r.get("answer") for r in before}
            pairs = [(old.get(r.get("agent")), r.get("answer")) for r in after]
            pairs = [(a, b) for a, b in pairs if a and b]
            cell = rounds.setdefault(number, [0, 0])
            cell[0] += sum(a != b for a, b in pairs)
            cell[1] += len(pairs)
    return out


def wide_rates(counts: Mapping[str, Mapping[int, Sequence[int]]], what: str = "round"
               ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Per-group, per-round [count, n] as `vega.rate_bar` takes them: one row per group,
    a rate and an n column per round; and the chart options naming them."""
    numbers = sorted({k for rounds in counts.values() for k in rounds})
    frame = pd.DataFrame({"group": list(counts)})
    for k in numbers:
        cells = [counts[g].get(k, (0, 0)) for g in counts]
        frame[f"{what} {k}"] = [c[0] / c[1] if c[1] else float("nan") for c in cells]
        frame[f"{what} {k} n"] = [int(c[1]) for c in cells]
    return frame, {"y": [f"{what} {k}" for k in numbers], "n": [f"{what} {k} n" for k in numbers],
                   "names": [f"{what} {k}" for k in numbers]}


def insights_frames(runs: pd.DataFrame, results: pd.DataFrame) -> dict[str, Any]:
    """What a rounds protocol's Insights section draws, from its completed runs (flattened:
    `group`, `correct`, `m_round_answers`, the `m_` conformity counts) and their stored
    results (`id`, `expected`, `result`): accuracy by round and mind-change rate by round
    (each `wide_rates`; accuracy also as `points`, one row per group and round, for the
    line chart), the conformity rates per group (`conformity`, and wide for a chart
    with its options, `conformity_wide`) and over all runs (`all`, group "all runs")."""
    expected = results[["id", "expected"]] if not results.empty else pd.DataFrame(
        columns=["id", "expected"])
    scored = runs.merge(expected, on="id", how="left")
    scored["round_answers"] = scored["m_round_answers"] if "m_round_answers" in scored \
        else None
    plain = runs.rename(columns={f"m_{f}": f for f in CONFORMITY_FIELDS})
    ids = set(runs["id"])
    mine = results[results["id"].isin(ids)] if not results.empty else results
    groups = runs.set_index("id")["group"]
    changes = mind_change_counts(mine.assign(group=mine["id"].map(groups))) \
        if not mine.empty else {}
    table = conformity_rates(plain, "group", name="group")
    counts: dict[str, dict[int, list[int]]] = {str(g): {} for g in dict.fromkeys(table["group"])}
    measures = [m for m, _, _ in CONFORMITY if m in set(table["measure"])]
    for group, measure, count, n in zip(table["group"], table["measure"], table["count"],
                                        table["n"], strict=True):
        counts[str(group)][measures.index(measure)] = [int(count), int(n)]
    wide, spec = wide_rates(counts, "measure")
    wide = wide.rename(columns={f"measure {i}{end}": f"{m}{end}" for i, m in
                                enumerate(measures) for end in ("", " n")})
    by_round = round_counts(scored, "group")
    points = pd.DataFrame([round_point(group, number, right, n, "configuration")
                           for group, rounds in by_round.items()
                           for number, (right, n) in sorted(rounds.items())],
                          columns=ROUND_COLUMNS)
    return {"accuracy": wide_rates(by_round), "points": points,
            "changes": wide_rates(changes), "conformity": table,
            "conformity_wide": (wide, {"y": measures, "n": [f"{m} n" for m in measures],
                                       "names": measures}),
            "all": conformity_rates(plain.assign(group="all runs"), "group", name="group")}
