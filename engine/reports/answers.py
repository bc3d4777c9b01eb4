"""The three answers Insights opens on, per configuration label (and protocol), over the
completed runs that match the filters, simulated and real never pooled:

- who changed their mind: the share of agents whose answer changed (measured from their
  answers, not claimed), and of the agents of runs with an expected answer, how many were
  persuaded (wrong, then right) and how many misled (right, then wrong);
- how the votes fell: the winner's mean share of the ballots, how often the vote was
  unanimous and how often tied, and how often the winner was right;
- confidence against accuracy: per confidence level (a tally's, or a judge's stated
  confidence in three bands), the accuracy, with round one's agreement (the plurality's share
  of round one's answers, before the agents saw each other) beside it.

Every figure carries its n and a 95% interval (Wilson for a share; mean ± 1.96 standard
errors for a mean share). Everything is added up in the store from typed columns
(`Store.answer_summary`), so a hundred thousand runs cost one grouped query. Nothing here
draws or imports streamlit; a row's `label` and `protocol` are what the Runs list's filters
take (`drill.row_params`).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import pandas as pd

from engine.analysis.stats import Z95
from engine.reports.runs import protocol_titles
from engine.store.aggregates import ANSWER_KEYS, ANSWER_SUMS
from engine.views.aggregate import FEW, interval, keep_apart, rate_text, with_groups
from engine.views.blocks import Section

if TYPE_CHECKING:
    from engine.store import RunFilters, Store

KEYS = ("minds", "votes", "confidence")
TITLES = {"minds": "Who changed their mind", "votes": "How the votes fell",
          "confidence": "Confidence against accuracy"}
LEVELS = ("high", "medium", "low")  # a tally's confidence (DESIGN 2.3), best first
JUDGE_BANDS = {"high": "judge ≥ 0.7", "medium": "judge 0.4–0.7", "low": "judge < 0.4"}


def load(store: Store, filters: RunFilters) -> pd.DataFrame:
    """The matching completed runs added up in the store (`Store.answer_summary`), with each
    group's `group` (its label, or "(no label)")."""
    return with_groups(store.answer_summary(**filters.store_args()))


def mean_text(total: float, squares: float, n: int, with_n: bool = True) -> str:
    """A mean share as a table shows it: "78% [74–82%] n=120" (mean ± 1.96 standard errors,
    clipped to 0..100%; without " n=120" when its row gives n already); "– n=0" for none,
    no interval for one value."""
    if not n:
        return "– n=0"
    mean = total / n
    count = f" n={n}" if with_n else ""
    if n < 2:
        return f"{mean:.0%}{count}"
    variance = max((squares - n * mean * mean) / (n - 1), 0.0)
    half = Z95 * math.sqrt(variance / n)
    return f"{mean:.0%} [{max(mean - half, 0.0):.0%}–{min(mean + half, 1.0):.0%}]{count}"


def rate_cell(right: int, n: int) -> str:
    """A rate whose n its row gives already: "11% [2%–43%]" (95% Wilson interval)."""
    return rate_text(right, n).rsplit(" n=", 1)[0] if n else "–"


def share_words(right: int, n: int) -> str:
    """A share in a sentence: "12% (95% interval 9–15%)"."""
    low, high = interval(right, n)
    return f"{right / n:.0%} (95% interval {low:.0%}–{high:.0%})" if n else "none"


def _rates(counts: pd.Series, ns: pd.Series, cell: Callable[[int, int], str] = rate_text,
           none: str = "no expected answer") -> list[str]:
    """`cell(count, n)` per row, `none` where n is 0."""
    return [cell(int(k), int(n)) if n else none for k, n in zip(counts, ns, strict=True)]


def _by(frame: pd.DataFrame, keys: list[str], counted: str = "n") -> pd.DataFrame:
    """`frame`'s sums per `keys`, protocols by their titles, only the groups whose `counted`
    is above zero."""
    if frame.empty:
        return frame
    sums = frame.groupby(keys, sort=True)[list(ANSWER_SUMS)].sum().reset_index()
    return sums[sums[counted] > 0].assign(protocol=lambda f: protocol_titles(f["protocol"]))


def minds(summary: pd.DataFrame) -> Section:
    """Who changed their mind, per label and protocol (runs whose agents answer more than
    once); the interval treats each agent as one draw."""
    rows = _by(summary, ["group", "protocol"], "m_seats")
    if rows.empty:
        return Section("minds", TITLES["minds"], note="No completed runs whose agents answer "
                       "more than once (and so can change their mind) match these filters.")
    table = pd.DataFrame({
        "label": rows["group"], "protocol": rows["protocol"], "runs": rows["m_runs"],
        "agents": rows["m_seats"],
        "changed their mind": _rates(rows["m_changes"], rows["m_seats"], rate_cell, "–"),
        # of the agents whose run had an expected answer: wrong then right, right then wrong
        "persuaded": _rates(rows["persuaded"], rows["j_seats"]),
        "misled": _rates(rows["misled"], rows["j_seats"]),
        "few": rows["m_runs"] < FEW})
    seats, changes = int(rows["m_seats"].sum()), int(rows["m_changes"].sum())
    judged = int(rows["j_seats"].sum())
    caption = (f"Of {seats:,} agents in {int(rows['m_runs'].sum()):,} runs, "
               f"{share_words(changes, seats)} changed their answer between their first and "
               "their last (measured from the answers, not what the agents claimed).")
    if judged:
        caption += (f" Where the expected answer was known ({judged:,} agents), "
                    f"{int(rows['persuaded'].sum()):,} were persuaded to it (wrong, then right) "
                    f"and {int(rows['misled'].sum()):,} misled away from it (right, then "
                    "wrong).")
    return Section("minds", TITLES["minds"], caption=caption, table=table.reset_index(drop=True))


def votes(summary: pd.DataFrame) -> Section:
    """How the votes fell, per label and protocol (runs whose answer is a tally of votes)."""
    rows = _by(summary, ["group", "protocol"], "t_runs")
    if rows.empty:
        return Section("votes", TITLES["votes"], note="No completed runs that end in a vote "
                       "match these filters.")
    table = pd.DataFrame({
        "label": rows["group"], "protocol": rows["protocol"], "runs": rows["t_runs"],
        "winner's share": [mean_text(s, q, int(n), with_n=False) for s, q, n in
                           zip(rows["t_sum"], rows["t_sq"], rows["t_runs"])],
        "unanimous": _rates(rows["unanimous"], rows["t_runs"], rate_cell, "–"),
        "tied": _rates(rows["tied"], rows["t_runs"], rate_cell, "–"),
        "winner right": _rates(rows["t_right"], rows["t_scored"]),
        "few": rows["t_runs"] < FEW})
    runs = int(rows["t_runs"].sum())
    caption = (f"{runs:,} runs ended in a vote: {share_words(int(rows['unanimous'].sum()), runs)} "
               f"unanimous, {share_words(int(rows['tied'].sum()), runs)} tied.")
    scored = int(rows["t_scored"].sum())
    if scored:
        caption += (f" The winner was right in {share_words(int(rows['t_right'].sum()), scored)} "
                    f"of the {scored:,} with an expected answer.")
    return Section("votes", TITLES["votes"], caption=caption, table=table.reset_index(drop=True))


def confidence(summary: pd.DataFrame) -> Section:
    """Accuracy per confidence level, per label and protocol, with round one's agreement
    over the same runs: does the confidence a run ends with deserve trust, and did the
    agents agree before they talked?"""
    shown = summary[summary["confidence_level"].notna() | summary["band"].notna()]
    named = shown["confidence_level"].where(shown["confidence_level"].notna(),
                                            shown["band"].map(JUDGE_BANDS))
    rows = _by(shown.assign(level=named), ["group", "protocol", "level"])
    if rows.empty:
        return Section("confidence", TITLES["confidence"], note="No completed runs with a "
                       "confidence (a vote's level or a judge's stated confidence) match "
                       "these filters.")
    order = {name: number for number, name in enumerate([*LEVELS, *JUDGE_BANDS.values()])}
    rows = rows.assign(_at=rows["level"].map(order).fillna(len(order))).sort_values(
        ["group", "protocol", "_at", "level"], kind="stable")
    table = pd.DataFrame({
        "label": rows["group"], "protocol": rows["protocol"], "confidence": rows["level"],
        "runs": rows["n"],
        "accuracy": _rates(rows["correct"], rows["scored"]),
        "round-one agreement": [mean_text(s, q, int(n)) if n else "no round one"
                                for s, q, n in zip(rows["f_sum"], rows["f_sq"],
                                                   rows["f_runs"])],
        "few": rows["n"] < FEW})
    caption = ("Accuracy of the runs at each confidence level, beside round one's agreement "
               "(the plurality's share of the agents' first answers, before they saw each "
               "other's) on the same runs: where confidence deserves trust, accuracy falls "
               "as it falls. A judge's stated confidence is shown in three bands.")
    high = rows[rows["level"] == "high"]
    if not high.empty and int(high["scored"].sum()):
        caption += (f" Runs ending with high confidence were right in "
                    f"{share_words(int(high['correct'].sum()), int(high['scored'].sum()))} "
                    "of cases.")
    return Section("confidence", TITLES["confidence"], caption=caption,
                   table=table.reset_index(drop=True))


def answers(summary: pd.DataFrame, kind: str) -> list[Section]:
    """The three answers over `summary` (`load`'s frame), real or simulated runs only, or
    both side by side with every simulated group labelled " (simulated)"."""
    if summary.empty:
        summary = pd.DataFrame(columns=[*ANSWER_KEYS, *ANSWER_SUMS, "group"])
    shown = keep_apart(summary, kind)
    return [minds(shown), votes(shown), confidence(shown)]


def report(store: Store, filters: RunFilters, kind: str) -> list[Section]:
    """`answers` over the completed runs matching `filters`, added up in the store."""
    return answers(load(store, filters), kind)
