"""An experiment's answer: one table (a row per configuration) and a sentence per pair of
configurations compared, as `experiment show` prints them and the Experiments page opens on
them. Both read this one function, so the terminal and the page never disagree.

Every cell is text (a missing figure is "-", an unknown cost "unknown"), every header words.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from engine.experiments.planning import EQUAL_TOKENS, baselines_of
from engine.protocols.baselines import achieved_tokens
from engine.reports.experiments import Report, compare
from engine.views.aggregate import FEW, SIMULATED_SUFFIX

ACCURACY = "accuracy [95% CI] n"  # the summary's own column, its name kept everywhere
PER_RUN = "per run (mean)"  # calls, tokens, cost and seconds in one cell: the table fits 1280 px
FEW_NOTE = f"* fewer than {FEW} scored runs: read that rate with its interval"


@dataclass(frozen=True)
class Headline:
    """The answer to "which configuration is better, and how sure?" for one experiment."""

    table: pd.DataFrame  # one row per configuration, cells as text, headers in words
    how: pd.DataFrame  # how each reached its answers (confidence, calibration, mind changes)
    sentences: list[str]  # one per pair of configurations compared (`comparisons`)
    few: bool = False  # some accuracy is over fewer than `FEW` scored runs (marked *)
    baselines: list[str] = field(default_factory=list)  # what each unequal baseline matches

    def text(self) -> str:
        """The headline for a terminal: the table, its footnote, how the answers were
        reached, the sentences, the baselines."""
        lines = [self.table.to_string(index=False)]
        if self.few:
            lines.append(FEW_NOTE)
        lines.append(self.how.to_string(index=False))
        return "\n".join([*lines, *self.sentences, *self.baselines])


def _num(value: float, digits: int = 2) -> str:
    return "-" if value != value else f"{value:,.{digits}f}"


def headline(result: Report) -> Headline:
    """`result`'s summary as one table of text (runs with what failed, stopped or degraded;
    accuracy with its interval and n, * when under `FEW` scored runs; how many gave no
    answer; the mean calls, tokens, cost and seconds of a run), a second on how the answers
    were reached (confidence levels; calibration errors; mind changes; the final answer
    against round one's vote), the sign-test sentence of each pair of `comparisons`, and a
    line per baseline that is not an equal match. Each table fits a page at 1280 px."""
    table = result.summary
    view = pd.DataFrame({
        "configuration": table["configuration"],
        "simulated": table["simulated"],
        "runs": [f"{r}/{p}" + (f" ({f} failed)" if f else "") + (f" ({i} stopped)" if i else "")
                 + (f" ({d} degraded)" if d else "")
                 for r, p, f, i, d in zip(table["runs"], table["planned"], table["failed"],
                                          table["interrupted"], table["degraded"])],
        ACCURACY: [text + (" *" if few else "") for text, few in
                   zip(table[ACCURACY], table["few"])],
        "unanswered": [str(n) for n in table["unanswered"]],
        PER_RUN: [f"{_num(calls, 1)} calls · {_num(tokens, 0)} tokens · "
                  + ("cost unknown" if cost != cost else f"${cost:,.4f}")
                  + f" · {_num(seconds)} s"
                  for calls, tokens, cost, seconds in zip(
                      table["calls_per_run"], table["tokens_per_run"], table["cost_per_run"],
                      table["seconds_per_run"])]})
    how = pd.DataFrame({
        "configuration": table["configuration"],
        "confidence (high/medium/low)": [f"{h}/{m}/{lo}" for h, m, lo in
                                         zip(table["high"], table["medium"], table["low"])],
        "calibration error, consensus | judge": [
            f"{_num(c)} | {_num(j)}" for c, j in zip(table["consensus_ece"],
                                                    table["judge_ece"])],
        "mind changes (persuaded/misled)": [
            "-" if r != r else f"{r:.0%} ({_num(p, 0)}/{_num(m, 0)})"
            for r, p, m in zip(table["mind_change_rate"], table["persuaded"], table["misled"])],
        "changed from round one's vote (better/worse)": [
            f"{c} ({b}/{w})" for c, b, w in zip(table["answer_changed"],
                                                table["changed_better"],
                                                table["changed_worse"])]})
    sentences = [compare(result.runs, a, b)["sentence"] for a, b in comparisons(result)]
    per_run = dict(zip(table["configuration"], table["tokens_per_run"], strict=True))
    lines = []
    for pair in baselines_of(result.experiment["spec"]):
        if not pair.get("equal", True):
            lines.append(f"{pair['label']}: {pair['note']}.")
        if pair.get("kind") == EQUAL_TOKENS:
            lines.append(achieved_tokens(pair, *(label_tokens(per_run, pair[k])
                                                 for k in ("label", "of"))))
    return Headline(view, how, sentences, bool(table["few"].any()), lines)


def label_tokens(per_run: dict[str, float], label: str) -> float:
    """A configuration's tokens per run in the summary: its real runs', else its simulated
    group's (NaN when it has neither)."""
    return per_run.get(label, per_run.get(label + SIMULATED_SUFFIX, float("nan")))


def comparisons(result: Report) -> list[tuple[str, str]]:
    """The pairs of configuration labels the headline compares: each configuration with its
    own equal-compute baseline first (when the experiment has them), then every pair of the
    other configurations, save a configuration against its own runs of the other kind (its
    real runs against its simulated ones measure the simulator's world against a model, not
    one configuration against another)."""
    shown = set(result.labels)
    # The report lists simulated groups under a suffixed label: pair on the stored labels,
    # then show each pair as real and as simulated, wherever both sides have runs.
    spec: dict[str, Any] = result.experiment["spec"]
    stored = list({c["label"].removesuffix(SIMULATED_SUFFIX): {
        **c, "label": c["label"].removesuffix(SIMULATED_SUFFIX)} for c in spec["configs"]}
        .values())
    pairs = baselines_of({**spec, "configs": stored})
    own = [(p["of"] + suffix, p["label"] + suffix) for p in pairs
           for suffix in ("", SIMULATED_SUFFIX)
           if p["of"] + suffix in shown and p["label"] + suffix in shown]
    added = {b for _, b in own}
    labels = [label for label in result.labels if label not in added]
    return own + [(a, b) for i, a in enumerate(labels) for b in labels[i + 1:]
                  if a.removesuffix(SIMULATED_SUFFIX) != b.removesuffix(SIMULATED_SUFFIX)]
