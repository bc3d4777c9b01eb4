"""The gate: does a candidate experiment regress against an approved baseline?

Per configuration label (simulated runs labelled apart, so a simulated configuration is never
compared with a real one), on the questions both experiments ran (matched by their text):

- accuracy: the paired difference candidate − baseline over the shared questions (each
  question's share of right runs over its repeats), with Newcombe's paired interval when every
  question has one scored run a side (`stats.paired_difference_interval`), else the mean of the
  per-question differences with its interval (`consensus_stats.mean_interval`). A regression
  when it is lower by more than `max_drop` and its interval lies below zero.
- deliberation health, where the runs measure it: majority adoption (agents off the previous
  round's plurality who moved to it, `engine.analysis.conformity`; Wilson intervals), agreement
  inflation (the last round's agreement minus round one's, `engine.reports.consensus`; mean
  intervals) and `hijack_rate` (a planted answer's share of final answers). Higher is worse; the
  difference's interval is the square-and-add of the two
  (`stats.independent_difference_interval`). A regression when it is worse by more than
  `max_drop` and its interval lies above zero: an A/A pair (the same configuration, other
  seeds) passes, a configuration that conforms far more fails.
- every interval is widened for the number of comparisons the gate makes (Bonferroni: each
  at 1 − 0.05/m, m = the measures times the configurations compared), so that a candidate no
  different from its baseline raises a false alarm on any of them at most 5% of the time
  (2.5% on the worse side), not 5% per measure.
- and, whatever the numbers: a question or configuration of the baseline missing from the
  candidate, a candidate's failed or unfinished cells, and a different `set_version`.

Each regression is one line naming it; `markdown` writes the summary a pull request carries.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pandas as pd

from engine.analysis import stats
from engine.analysis.consensus_stats import mean_interval
from engine.models import ConfigError
from engine.reports import consensus
from engine.reports.experiments import Report, counted, report
from engine.views.aggregate import SIMULATED_SUFFIX, pct
from engine.views.round_frames import conformity_rates

if TYPE_CHECKING:
    from engine.store import Store

DEFAULT_MAX_DROP = 0.05
ADOPTION = "adopted the previous round's majority"  # `views.round_frames.CONFORMITY`'s measure
NAN = float("nan")


@dataclass
class GateResult:
    """What the gate found: the two experiments (id, name, set_version), one row per
    configuration and measure, each regression as one line, notes (what was
    not measured, and why), and per configuration the candidate's runs on the questions
    whose accuracy fell (for the links back)."""

    candidate: dict[str, Any]
    baseline: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    moved: dict[str, list[str]] = field(default_factory=dict)
    max_drop: float = DEFAULT_MAX_DROP
    level: float = 0.95  # each interval's confidence (Bonferroni over the comparisons)

    @property
    def passed(self) -> bool:
        return not self.regressions

    @property
    def exit_status(self) -> int:
        """0 when nothing regressed, 1 when something did."""
        return 0 if self.passed else 1

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON takes it (NaN as None)."""
        def clean(value: Any) -> Any:
            return None if isinstance(value, float) and value != value else value
        return {"passed": self.passed, "candidate": self.candidate, "baseline": self.baseline,
                "max_drop": self.max_drop, "interval_level": self.level,
                "regressions": self.regressions,
                "notes": self.notes,
                "rows": [{k: clean(v) for k, v in row.items()} for row in self.rows],
                "moved": self.moved}


def _about(result: Report) -> dict[str, Any]:
    experiment = result.experiment
    return {"id": experiment["id"], "name": experiment["name"],
            "set_version": experiment.get("set_version") or "",
            "status": result.progress.status}


def _question_scores(done: pd.DataFrame) -> dict[str, list[float]]:
    """Per question text, the correctness (0/1) of each scored run."""
    scored = done[done["correct"].notna()] if not done.empty else done
    out: dict[str, list[float]] = {}
    for question, right in zip(scored["question"], scored["correct"], strict=True):
        out.setdefault(str(question), []).append(float(bool(right)))
    return out


def accuracy_difference(baseline: Mapping[str, Sequence[float]],
                        candidate: Mapping[str, Sequence[float]], shared: Sequence[str],
                        z: float = stats.Z95) -> tuple[float, float, float, float, float]:
    """Baseline accuracy, candidate accuracy, their paired difference (candidate − baseline)
    and its interval (95% by default, `z`) over the `shared` questions (see the module's
    docstring)."""
    if not shared:
        return NAN, NAN, NAN, NAN, NAN
    base = [sum(baseline[q]) / len(baseline[q]) for q in shared]
    cand = [sum(candidate[q]) / len(candidate[q]) for q in shared]
    a, b = sum(cand) / len(cand), sum(base) / len(base)
    if all(len(baseline[q]) == 1 and len(candidate[q]) == 1 for q in shared):
        both = sum(1 for x, y in zip(cand, base, strict=True) if x and y)
        only_cand = sum(1 for x, y in zip(cand, base, strict=True) if x and not y)
        only_base = sum(1 for x, y in zip(cand, base, strict=True) if y and not x)
        low, high = stats.paired_difference_interval(
            both, only_cand, only_base, len(shared) - both - only_cand - only_base, z)
        return b, a, a - b, low, high
    estimate = mean_interval([x - y for x, y in zip(cand, base, strict=True)], z)
    return b, a, estimate.value, estimate.low, estimate.high


def _adoption(done: pd.DataFrame, label: str, z: float
              ) -> tuple[float, float, float, int] | None:
    """Majority adoption: the conformity counts summed (`views.round_frames.conformity_rates`),
    with their Wilson interval at `z`."""
    rates = conformity_rates(done, "label", [label])
    mine = rates[rates["measure"] == ADOPTION] if not rates.empty else rates
    if mine.empty or not int(mine["n"].iloc[0]):
        return None
    count, n = int(mine["count"].iloc[0]), int(mine["n"].iloc[0])
    low, high = stats.wilson_interval(count, n, z)
    return count / n, low, high, n


def _inflation(done: pd.DataFrame, label: str, z: float
               ) -> tuple[float, float, float, int] | None:
    """Agreement inflation: the mean of the runs' (`consensus.run_measures`), at `z`."""
    return _mean(consensus.from_experiment(done, [label]).measures["inflation"], z)


def _hijack(done: pd.DataFrame, label: str, z: float
            ) -> tuple[float, float, float, int] | None:
    """The hijack rate, where the runs carry one (`hijack_rate`): its mean, at `z`."""
    return _mean(done["hijack_rate"], z) if "hijack_rate" in done else None


def _mean(column: Any, z: float) -> tuple[float, float, float, int] | None:
    """The mean of a column's measured values (None and NaN left out) with its interval at
    `z`; None when it has none."""
    values = [float(v) for v in column if v is not None and v == v]
    if not values:
        return None
    estimate = mean_interval(values, z)
    return estimate.value, estimate.low, estimate.high, estimate.n


MEASURES = {"majority adoption": _adoption, "agreement inflation": _inflation,
            "hijack rate": _hijack}


def _kind_note(label: str, candidate_labels: Sequence[str]) -> str:
    """Why a baseline configuration has no counterpart: the candidate has it only as the
    other kind (simulated against real), or not at all."""
    plain = label.removesuffix(SIMULATED_SUFFIX)
    other = plain if label.endswith(SIMULATED_SUFFIX) else plain + SIMULATED_SUFFIX
    if other in candidate_labels:
        return (f"configuration {plain!r} is {'simulated' if label != plain else 'real'} in "
                f"the baseline and {'real' if label != plain else 'simulated'} in the "
                "candidate: simulated and real runs are never compared")
    return f"configuration {label!r} of the baseline is missing from the candidate"


def gate(store: Store, candidate_id: str, baseline_id: str,
         max_drop: float = DEFAULT_MAX_DROP) -> GateResult:
    """Compare the candidate experiment with the baseline (see the module's docstring).
    `ConfigError` when either is not stored, they are the same experiment, or `max_drop` is
    not within 0..1."""
    if not isinstance(max_drop, (int, float)) or not 0 <= max_drop <= 1 or max_drop != max_drop:
        raise ConfigError(f"max-drop must be a number from 0 to 1, got {max_drop!r}", "input")
    if candidate_id == baseline_id:
        raise ConfigError(f"experiment {candidate_id} is its own baseline: give another one "
                          "(--baseline) or approve another experiment of its name", "input")
    base, cand = report(store, baseline_id, "both"), report(store, candidate_id, "both")
    out = GateResult(_about(cand), _about(base), max_drop=float(max_drop))
    if out.candidate["set_version"] != out.baseline["set_version"]:
        out.regressions.append(
            f"question set version {out.candidate['set_version'] or 'unknown'} differs from "
            f"the baseline's {out.baseline['set_version'] or 'unknown'}: the two asked "
            "different questions")
    state = cand.progress
    if state.failed or state.interrupted:
        out.regressions.append(f"{state.failed + state.interrupted} failed cell(s) in the "
                               f"candidate (python -m engine experiment resume "
                               f"{candidate_id})")
    if state.done < state.total and state.status != "running":
        out.regressions.append(f"the candidate completed {state.done} of its {state.total} "
                               "cells")
    candidate_labels = [c["label"] for c in cand.experiment["spec"]["configs"]]
    compared = [c for c in base.experiment["spec"]["configs"]
                if not counted(base.runs, c["label"]).empty]
    # Bonferroni over the m comparisons: each interval at 1 − 0.05/m, two-sided (its normal
    # quantile: m = 1 gives 1.96, m = 3 gives 2.39)
    comparisons = max(1, (1 + len(MEASURES)) * len(compared))
    out.level = 1 - 0.05 / comparisons
    z = NormalDist().inv_cdf(1 - 0.05 / (2 * comparisons))
    for config in compared:
        label = config["label"]
        mine = counted(base.runs, label)
        theirs = counted(cand.runs, label)
        if label not in candidate_labels or theirs.empty:
            out.regressions.append(_kind_note(label, [
                c for c in candidate_labels if not counted(cand.runs, c).empty]))
            continue
        _compare(out, label, mine, theirs, max_drop, z)
    return out


def _compare(out: GateResult, label: str, mine: pd.DataFrame, theirs: pd.DataFrame,
             max_drop: float, z: float) -> None:
    """One configuration's rows and regressions: missing questions, accuracy, health."""
    asked = list(dict.fromkeys(str(q) for q in theirs["question"]))
    missing = [q for q in dict.fromkeys(str(q) for q in mine["question"]) if q not in asked]
    for question in missing:
        out.regressions.append(f"{label}: question {_short(question)!r} of the baseline is "
                               "missing from the candidate")
    base_scores, cand_scores = _question_scores(mine), _question_scores(theirs)
    shared = [q for q in base_scores if q in cand_scores]
    b, a, change, low, high = accuracy_difference(base_scores, cand_scores, shared, z)
    regressed = bool(change == change and -change > max_drop and high < 0)
    out.rows.append({"configuration": label, "measure": "accuracy", "baseline": b,
                     "candidate": a, "change": change, "low": low, "high": high,
                     "n": len(shared), "regression": regressed})
    if not shared:
        out.notes.append(f"{label}: no question scored in both, so accuracy is not compared")
    if regressed:
        out.regressions.append(f"{label}: accuracy {pct(a)} against the baseline's {pct(b)} "
                               f"({_signed(change)}, CI {_signed(low)} to {_signed(high)}, "
                               f"n={len(shared)} questions)")
        out.moved[label] = [str(run_id) for run_id, question, right in zip(
            theirs["id"], theirs["question"], theirs["correct"], strict=True)
            if str(question) in shared and right is not None and right == right
            and not bool(right) and sum(base_scores[str(question)]) > 0][:20]
    base_on = mine[mine["question"].astype(str).isin(shared)]
    cand_on = theirs[theirs["question"].astype(str).isin(shared)]
    for measure, read in MEASURES.items():
        was, now = read(base_on, label, z), read(cand_on, label, z)
        if was is None or now is None:
            if was is not None or now is not None:
                out.notes.append(f"{label}: {measure} is measured in only one of the two")
            continue
        low, high = stats.independent_difference_interval(now[0], now[1], now[2],
                                                          was[0], was[1], was[2])
        change = now[0] - was[0]
        worse = bool(change > max_drop and low == low and low > 0)
        out.rows.append({"configuration": label, "measure": measure, "baseline": was[0],
                         "candidate": now[0], "change": change, "low": low, "high": high,
                         "n": min(was[3], now[3]), "regression": worse})
        if worse:
            out.regressions.append(
                f"{label}: {measure} {pct(now[0])} against the baseline's {pct(was[0])} "
                f"({_signed(change)}, CI {_signed(low)} to {_signed(high)}, "
                f"n={was[3]} and {now[3]})")


def notice(result: GateResult) -> dict[str, Any]:
    """What a notification says of a gate (`engine.llm.notify`): the two experiments, the
    verdict, how many regressions and which measures moved, never a question's text (a
    missing question is counted, not quoted)."""
    moved = [f"{row['configuration']} {row['measure']}" for row in result.rows
             if row["regression"]]
    missing = sum("missing from the candidate" in line for line in result.regressions)
    other = len(result.regressions) - len(moved) - missing
    parts = [*moved, *([f"{missing} missing question(s) or configuration(s)"] if missing
                       else []), *([f"{other} other regression(s)"] if other else [])]
    return {"event": "gate", "status": "passed" if result.passed else "failed",
            "experiment_id": result.candidate["id"], "name": result.candidate["name"],
            "baseline_id": result.baseline["id"],
            "counts": {"regressions": len(result.regressions), "measures": len(result.rows)},
            "summary": f"gate of experiment {result.candidate['name']!r} "
                       + ("passed" if result.passed else "failed: " + "; ".join(parts))}


def _short(text: str, width: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def _signed(value: float) -> str:
    """A change in percentage points: +3.0 pp, -12.5 pp."""
    return "-" if value != value or math.isinf(value) else f"{value * 100:+.1f} pp"


def summary_text(result: GateResult) -> str:
    """The gate's verdict for a terminal: one line, then each regression on a line."""
    head = (f"gate: candidate {result.candidate['id']} against baseline "
            f"{result.baseline['id']} ({result.baseline['name']}): "
            + ("pass" if result.passed else f"{len(result.regressions)} regression(s)"))
    return "\n".join([head, *(f"regression: {line}" for line in result.regressions),
                      *(f"note: {line}" for line in result.notes)])


def _cell(text: str) -> str:
    """Text in a Markdown table cell: pipes escaped, no line breaks, no HTML."""
    return (" ".join(str(text).split()).replace("\\", "\\\\").replace("|", "\\|")
            .replace("<", "&lt;").replace(">", "&gt;"))


def markdown(result: GateResult, app_url: str = "") -> str:
    """The gate's summary as a pull request comment: the verdict, each regression, a table of
    every measure (baseline, candidate, change with its interval, n) and links back to the
    candidate's runs whose accuracy fell (`?run=` on the Runs page under `app_url`)."""
    base = app_url.rstrip("/") + "/" if app_url else ""
    lines = [f"### Parley gate: {'✅ pass' if result.passed else '❌ regression'}", "",
             f"Candidate `{_cell(result.candidate['id'])}` against the approved baseline "
             f"`{_cell(result.baseline['id'])}` of *{_cell(result.baseline['name'])}* "
             f"(question set `{_cell(result.candidate['set_version'] or 'unknown')}`; "
             f"a regression is a change for the worse of more than "
             f"{result.max_drop * 100:g} points whose interval excludes zero; each interval is "
             f"{result.level:.2%}, so that all of them together hold at 95%).", ""]
    lines += [f"- **{_cell(line)}**" for line in result.regressions]
    if result.regressions:
        lines.append("")
    lines += [f"| configuration | measure | baseline | candidate | change [{result.level:.2%} CI] "
              "| n | |",
              "|---|---|---|---|---|---|---|"]
    for row in result.rows:
        lines.append(f"| {_cell(row['configuration'])} | {row['measure']} | "
                     f"{pct(row['baseline'])} | {pct(row['candidate'])} | "
                     f"{_signed(row['change'])} [{_signed(row['low'])}, {_signed(row['high'])}]"
                     f" | {row['n']} | {'❌' if row['regression'] else ''} |")
    for line in result.notes:
        lines.append(f"\n_{_cell(line)}_")
    for label, ids in result.moved.items():
        if ids:
            lines += ["", f"Runs of {_cell(label)} now wrong where the baseline was right: "
                      + ", ".join(f"[{_cell(i)}]({base}runs?run={quote(i, safe='')})" for i in ids)]
    return "\n".join(lines) + "\n"
