"""What people's labels add up to, from `store.preferences()`,
`store.ratings()` and `store.runs()` frames.

- **Win rate per configuration** (`engine.reports.review.configuration`): wins over decided
  comparisons, wins / (wins + losses), with a 95% Wilson interval and n. Ties are counted
  separately (their own column), never as half a win.
- **The machine's preference** between the two runs of a preference: the run with the higher
  machine score wins, equal scores tie. A run's machine score is its `correct` (1 or 0) when it
  was scored against an expected answer, else its judge's confidence (`judge_confidence`), else
  its panel's consensus (`consensus`). A pair where either run has no score has no machine
  preference and is left out (the n says how many were kept).
- **Agreement**: Cohen's kappa between people's choices (a | b | tie) and the machine's, with
  n and a 95% percentile bootstrap interval (2,000 resamples, seeded: the same labels give the
  same interval).
- **Calibration**: a judged run's confidence against people's verdict on it, by confidence
  bin: the share of the run's ratings at 4 or 5 (a Wilson interval each).
- **Human majority**: for a question, the final answer its people preferred most often (one
  vote per preference won; ties give none), when one answer has strictly the most votes.
  Accuracy tables may use it as the question's expected answer, labelled "human majority".
  An experiment's results use it only for its questions with no expected answer, in a table
  of its own (`experiment_majority`): never mixed into the accuracy against the file's
  expected answers.
"""
from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from engine.analysis.answers import answers_match
from engine.analysis.stats import wilson_interval
from engine.reports.compare import metrics_of
from engine.reports.review import configuration
from engine.views.aggregate import rate_text

HUMAN_MAJORITY = "human majority"
CATEGORIES = ("a", "b", "tie")
BOOTSTRAP = 2000


def machine_score(run: Mapping[Any, Any]) -> float | None:
    """A run's machine score: `correct` (1/0), else the judge's confidence, else the panel's
    consensus; None when it has none."""
    correct = run.get("correct")
    if isinstance(correct, bool):
        return 1.0 if correct else 0.0
    for key in ("judge_confidence", "consensus"):
        value = metrics_of(run).get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) \
                and math.isfinite(value):
            return float(value)
    return None


def machine_choice(run_a: Mapping[Any, Any], run_b: Mapping[Any, Any]) -> str | None:
    """The machine's preference between two runs (a | b | tie), None when either lacks a
    score."""
    a, b = machine_score(run_a), machine_score(run_b)
    if a is None or b is None:
        return None
    return "tie" if a == b else ("a" if a > b else "b")


def _share(count: int, n: int) -> dict[str, Any]:
    """A table row's `n`, share (`rate`: count / n, NaN for none) and its 95% Wilson
    interval (`low`, `high`)."""
    low, high = wilson_interval(count, n)
    return {"n": n, "rate": count / n if n else math.nan, "low": low, "high": high}


def _by_id(runs: pd.DataFrame) -> dict[str, dict[Any, Any]]:
    return {str(r["id"]): r for r in runs.to_dict("records")} if not runs.empty else {}


def _compared(preferences: pd.DataFrame, runs: pd.DataFrame
              ) -> Iterator[tuple[dict[Any, Any], dict[Any, Any] | None, dict[Any, Any] | None]]:
    """Each preference with its two runs, `run_a`'s and `run_b`'s rows of `runs` (None for a
    run `runs` does not hold)."""
    known = _by_id(runs)
    for pref in preferences.to_dict("records") if not preferences.empty else []:
        yield pref, known.get(pref["run_a"]), known.get(pref["run_b"])


def win_rates(preferences: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and kind (simulated runs apart from real ones): wins, losses, ties,
    n (decided comparisons), the win rate and its 95% Wilson interval (`low`, `high`); runs
    missing from `runs` are left out."""
    counts: dict[tuple[str, bool], Counter[str]] = {}
    for pref, a, b in _compared(preferences, runs):
        if a is None or b is None:
            continue
        for side, run in (("a", a), ("b", b)):
            tally = counts.setdefault((configuration(run), bool(run.get("simulated"))), Counter())
            if pref["choice"] == "tie":
                tally["ties"] += 1
            else:
                tally["wins" if pref["choice"] == side else "losses"] += 1
    rows = [{"configuration": name, "simulated": simulated, "wins": tally["wins"],
             "losses": tally["losses"], "ties": tally["ties"],
             **_share(tally["wins"], tally["wins"] + tally["losses"])}
            for (name, simulated), tally in sorted(counts.items())]
    return pd.DataFrame(rows, columns=["configuration", "simulated", "wins", "losses", "ties",
                                       "n", "rate", "low", "high"])


def cohen_kappa(first: Sequence[str], second: Sequence[str]) -> float:
    """Cohen's kappa of two raters' labels of the same items: (po - pe) / (1 - pe). NaN with
    no items; 1.0 when both give one and the same category throughout (pe = 1, po = 1)."""
    n = len(first)
    if n == 0 or n != len(second):
        return math.nan
    observed = sum(x == y for x, y in zip(first, second, strict=True)) / n
    one, two = Counter(first), Counter(second)
    expected = sum(one[c] * two[c] for c in one) / (n * n)  # a category one never gives adds 0
    if expected >= 1.0:
        return 1.0 if observed >= 1.0 else math.nan
    return (observed - expected) / (1 - expected)


@dataclass(frozen=True)
class Agreement:
    kappa: float
    n: int
    low: float
    high: float
    skipped: int  # preferences with no machine preference
    pairs: list[tuple[str, str]]  # (human, machine) per kept preference

    @property
    def one_sided(self) -> str:
        """Who gave one and the same choice every time ("the machine", "people", both), or
        "": then kappa is 0 (or 1) by its arithmetic whatever the other chose, and every
        resample repeats it, so neither it nor its interval measures agreement."""
        if len(self.pairs) < 2:
            return ""
        who = [name for name, column in (("people", 0), ("the machine", 1))
               if len({pair[column] for pair in self.pairs}) == 1]
        return " and ".join(who)


def agreement(preferences: pd.DataFrame, runs: pd.DataFrame) -> Agreement:
    """Cohen's kappa between people's choices and the machine's, with n and a percentile
    bootstrap 95% interval over the preferences (`BOOTSTRAP` resamples, seeded: the same
    labels give the same interval)."""
    pairs: list[tuple[str, str]] = []
    skipped = 0
    for pref, a, b in _compared(preferences, runs):
        machine = machine_choice(a, b) if a is not None and b is not None else None
        if machine is None:
            skipped += 1
            continue
        pairs.append((str(pref["choice"]), machine))
    kappa = cohen_kappa([h for h, _ in pairs], [m for _, m in pairs])
    low = high = math.nan
    if len(pairs) >= 2:
        draw = random.Random(0)
        values = sorted(v for v in (cohen_kappa(*zip(*(draw.choice(pairs) for _ in pairs),
                                                     strict=True))
                                    for _ in range(BOOTSTRAP)) if not math.isnan(v))
        if values:
            low = values[int(0.025 * (len(values) - 1))]
            high = values[int(math.ceil(0.975 * (len(values) - 1)))]
    return Agreement(kappa, len(pairs), low, high, skipped, pairs)


def agreement_table(found: Agreement) -> pd.DataFrame:
    """The kappa table: people's choice by row, the machine's by column, and the counts."""
    counts = Counter(found.pairs)
    return pd.DataFrame([{"people chose": human,
                          **{f"machine: {m}": counts[(human, m)] for m in CATEGORIES}}
                         for human in CATEGORIES])


def calibration(ratings: pd.DataFrame, runs: pd.DataFrame,
                edges: Sequence[float] = (0.0, 0.5, 0.7, 0.9, 1.0001)) -> pd.DataFrame:
    """Per bin of the judge's confidence: the runs' ratings at 4 or 5 over all their ratings
    (`rate`, Wilson `low`/`high`, n ratings) — how often people approved what the judge was
    that sure of."""
    known = _by_id(runs)
    bins: dict[int, list[int]] = {}
    for rating in ratings.to_dict("records") if not ratings.empty else []:
        if not pd.isna(rating.get("turn")):
            continue  # a turn's rating says nothing of the run's verdict
        run = known.get(rating["run_id"])
        confidence = metrics_of(run).get("judge_confidence") if run is not None else None
        if not isinstance(confidence, (int, float)) or isinstance(confidence, bool):
            continue
        for number in range(len(edges) - 1):
            if edges[number] <= confidence < edges[number + 1]:
                bins.setdefault(number, []).append(int(rating["score"] >= 4))
    rows = [{"confidence": f"{edges[number]:.1f}–{min(edges[number + 1], 1.0):.1f}",
             "approved": sum(marks), **_share(sum(marks), len(marks))}
            for number, marks in sorted(bins.items())]
    return pd.DataFrame(rows, columns=["confidence", "approved", "n", "rate", "low", "high"])


def _answer(run: Mapping[Any, Any]) -> Any:
    """A run's final answer: its metrics' `answer` (a `store.runs()` row), else its own
    `answer` column (an experiment's runs frame, `engine.reports.experiments.runs_frame`)."""
    return metrics_of(run).get("answer", run.get("answer"))


def human_majority(preferences: pd.DataFrame, runs: pd.DataFrame) -> dict[str, str]:
    """Question text -> the final answer its people preferred most often (strictly the most
    votes; a question without one has no human majority)."""
    votes: dict[str, Counter[str]] = {}
    for pref, a, b in _compared(preferences, runs):
        if pref["choice"] not in ("a", "b"):
            continue
        winner = a if pref["choice"] == "a" else b
        if winner is None:
            continue
        answer = _answer(winner)
        if isinstance(answer, str) and answer.strip():
            votes.setdefault(str(winner["question"]), Counter())[answer] += 1
    out = {}
    for question, counter in votes.items():
        top = counter.most_common(2)
        if len(top) == 1 or top[0][1] > top[1][1]:
            out[question] = top[0][0]
    return out


def majority_accuracy(preferences: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per configuration against the human majority as the expected answer (only
    questions that have one, completed runs, one kind at a time by the `simulated` column):
    right, n, rate and its Wilson interval; `expected` says "human majority"."""
    majority = human_majority(preferences, runs)
    counts: dict[tuple[str, bool], list[int]] = {}
    for run in runs.to_dict("records") if not runs.empty else []:
        truth = majority.get(str(run["question"]))
        if truth is None or run.get("status") != "completed":
            continue
        right = answers_match(_answer(run), truth)
        if right is None:
            continue
        counts.setdefault((configuration(run), bool(run.get("simulated"))), []).append(
            int(right))
    rows = [{"configuration": name, "simulated": simulated, "expected": HUMAN_MAJORITY,
             "right": sum(marks), **_share(sum(marks), len(marks))}
            for (name, simulated), marks in sorted(counts.items())]
    return pd.DataFrame(rows, columns=["configuration", "simulated", "expected", "right", "n",
                                       "rate", "low", "high"])


MAJORITY_COLUMNS = ["configuration", "simulated", "expected", "questions", "right", "n", "rate",
                    "low", "high", "accuracy [95% CI] n"]


@dataclass(frozen=True)
class MajorityScores:
    """An experiment's accuracy against the human majority (`experiment_majority`): the table
    per configuration, how many of its questions have no expected answer, how many of those
    have a human majority, and from how many preferences it was drawn."""

    table: pd.DataFrame
    without_expected: int
    with_majority: int
    preferences: int

    def caption(self) -> str:
        """What the table is over, in one sentence."""
        return (f"{self.with_majority} of the {self.without_expected} question(s) without an "
                f"expected answer have a human majority (the answer people preferred most "
                f"often), from {self.preferences} preference(s) between this experiment's "
                f"runs; it is their expected answer here, and only here.")


def blank_questions(questions: Sequence[Mapping[str, Any]]) -> set[int]:
    """The indexes of an experiment's questions (its spec's) that have no expected answer."""
    return {q for q, item in enumerate(questions) if not str(item.get("expected") or "").strip()}


def experiment_majority(runs: pd.DataFrame, preferences: pd.DataFrame,
                        questions: Sequence[Mapping[str, Any]],
                        labels: Sequence[str] = ()) -> MajorityScores:
    """Accuracy per configuration against the human majority on an experiment's questions
    that have no expected answer (`questions`, the spec's; one with an expected answer keeps
    it and is left out here, never overridden).

    `runs` is the experiment's runs frame (`engine.reports.experiments.runs_frame`: id,
    label, q, question, answer, counted, simulated). Kinds are never pooled: the majority of
    simulated runs comes from the preferences between two simulated runs of the frame, that
    of real runs from those between two real ones, and each is scored on the counted runs
    (each cell's first completed run) of its kind. Per configuration (in `labels`' order,
    then any other): `questions` scored, right of n (runs whose answer can be compared with
    the majority, `answers_match`), the rate and its 95% Wilson interval (`low`, `high`),
    also as text; `expected` says "human majority"."""
    blank = blank_questions(questions)
    used = 0
    decided: set[int] = set()
    marks: dict[tuple[str, bool], list[tuple[int, int]]] = {}
    if blank and not runs.empty and not preferences.empty:
        for simulated in (False, True):
            cohort = runs[runs["simulated"].astype(bool) == simulated]
            ids = set(cohort["id"])
            prefs = preferences[preferences["run_a"].isin(ids) & preferences["run_b"].isin(ids)]
            used += len(prefs)
            if prefs.empty:
                continue
            majority = human_majority(prefs, cohort)
            decided |= {int(q) for q, text in zip(cohort["q"], cohort["question"], strict=True)
                        if q in blank and str(text) in majority}
            counted = cohort[cohort["counted"].astype(bool) & cohort["q"].isin(blank)]
            for run in counted.to_dict("records"):
                truth = majority.get(str(run["question"]))
                matched = None if truth is None else answers_match(run.get("answer"), truth)
                if matched is not None:
                    marks.setdefault((str(run["label"]), simulated), []).append(
                        (int(run["q"]), int(matched)))
    order = {label: number for number, label in enumerate(labels)}
    rows = []
    for (label, simulated), scored in sorted(marks.items(), key=lambda item: (
            order.get(item[0][0], len(order)), item[0])):
        right = sum(mark for _, mark in scored)
        rows.append({"configuration": label, "simulated": simulated,
                     "expected": HUMAN_MAJORITY, "questions": len({q for q, _ in scored}),
                     "right": right, **_share(right, len(scored)),
                     "accuracy [95% CI] n": rate_text(right, len(scored))})
    return MajorityScores(pd.DataFrame(rows, columns=MAJORITY_COLUMNS), len(blank),
                          len(decided), used)



HEADING = "Accuracy against the human majority"
SCOPE = f"expected answer: {HUMAN_MAJORITY}, on the questions that have none of their own"
NO_COMPARISONS = ("{blank} question(s) have no expected answer, and no one has compared two of "
                  "this experiment's runs yet, so none has a human majority to score against "
                  "(the Review page pairs runs to compare).")
APART = ("Never pooled with the accuracy against the expected answers; simulated runs are "
         "scored against simulated runs' majority, real against real. Intervals: 95% Wilson.")
SHOWN = ["configuration", "expected", "questions", "accuracy [95% CI] n"]  # as text


@dataclass(frozen=True)
class MajoritySection:
    """What the Experiments page, `experiment show` and the shared HTML show under an
    experiment's accuracy (`majority_section`): a note on what the table is over (or why
    there is none) and the table (`MAJORITY_COLUMNS`; empty when nothing was scored)."""

    note: str
    table: pd.DataFrame


def majority_section(runs: pd.DataFrame, preferences: pd.DataFrame,
                     questions: Sequence[Mapping[str, Any]],
                     labels: Sequence[str] = ()) -> MajoritySection | None:
    """`experiment_majority` with its note; None when every question has an expected
    answer (nothing to show). `preferences` may be all of them (`store.preferences()`): only
    those between two of `runs` of one kind count."""
    blank = blank_questions(questions)
    if not blank:
        return None
    scores = experiment_majority(runs, preferences, questions, labels)
    if not scores.preferences:
        return MajoritySection(NO_COMPARISONS.format(blank=len(blank)),
                               scores.table.iloc[0:0])
    return MajoritySection(f"{scores.caption()} {APART}", scores.table)


def majority_text(runs: pd.DataFrame, preferences: pd.DataFrame,
                  questions: Sequence[Mapping[str, Any]], labels: Sequence[str] = ()) -> str:
    """`majority_section` as plain text (the CLI's `experiment show`): a heading, the note
    and the table; "" when every question has an expected answer."""
    section = majority_section(runs, preferences, questions, labels)
    if section is None:
        return ""
    lines = [f"{HEADING} ({SCOPE}):", section.note]
    if not section.table.empty:
        lines.append(section.table[SHOWN].to_string(index=False))
    return "\n".join(lines)
