"""Experiment results: the runs frame, summary, calibration, paired comparison and figures."""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, partial
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pandas as pd

from engine.analysis import stats
from engine.analysis.answers import Answers
from engine.models import ConfigError
from engine.store.experiments import CellStates, Progress, cell_key, get, progress, row
from engine.text import csv_cell, html_text
from engine.views.aggregate import FEW, KINDS, default_kind, interval, rate_text, split_configs
from engine.views.round_frames import CONFORMITY_FIELDS

if TYPE_CHECKING:
    from engine.store import Store

SIGNALS = {"consensus": "consensus ratio (share of the final vote for the winner)",
           "judge": "judge confidence (the judge's own CONFIDENCE)"}
RUNS_PAGE = "runs"  # the Runs page's URL path; `?run=ID` opens one run


def _moved(first: str, final: str | None, expected: str | None, answers: Answers
           ) -> tuple[bool, str | None]:
    """Whether the final answer differs from round one's (`changed`), and its `shift`."""
    changed = answers.normalize(first) != answers.normalize(final or "")
    if not expected:
        return changed, None
    if not changed:  # scored only when it moved: an unmoved answer is the same either way
        return changed, "same"
    was = bool(answers.match(first, expected))
    now_ = bool(answers.match(final or "", expected))
    return changed, ("better" if now_ and not was else "worse" if was and not now_
                     else "sideways")


RUN_COLUMNS = ["id", "label", "protocol", "q", "repeat", "question", "expected", "status",
               "counted", "superseded", "correct", "unanswered", "answer", "level", "consensus",
               "judge", "mind_changes", "seats", "persuaded", "misled", "first_answer", "changed",
               "shift", "round_answers", "round_votes", *CONFORMITY_FIELDS, "hijack_rate", "calls",
               "degraded", "degraded_run", "lost", "tokens", "cost_usd", "seconds", "simulated",
               "simulation", "created_at", "link"]


def runs_frame(store: Store, experiment_id: str) -> pd.DataFrame:
    """One row per run of the experiment: its cell (q, repeat, label), whether it `counted`
    (the first completed run of its cell), correctness (`correct`, and `unanswered`: given
    an expected answer it gave none, so `correct` is false), the signals of `_signal_columns`, and
    whether it is simulated (`simulated`, and `simulation`: "all" or "mixed: <seats>").

    The store sends only the typed columns this reads (`Store.experiment_runs`); a signal
    worked out from an answer (`changed`, `shift`) is worked out once per distinct answer
    and expected answer, not once per run."""
    spec = row(store, experiment_id)["spec"]
    return _runs_frame(store.experiment_runs(experiment_id, METRIC_KEYS), spec)


def _runs_frame(stored: pd.DataFrame, spec: Mapping[str, Any]) -> pd.DataFrame:
    """`runs_frame` from the experiment's runs as `Store.experiment_runs` reads them: the
    columns it reads as they are, what it works out column by column (a run's cell from its
    tags once, `counted` as the first completed run of each cell)."""
    labels = [c["label"] for c in spec["configs"]]
    frame, first = first_runs(stored, len(labels))
    if frame.empty:
        return pd.DataFrame(columns=RUN_COLUMNS)
    signals = _signal_columns({key: frame[f"metrics.{key}"].tolist() for key in METRIC_KEYS},
                              frame["expected"].tolist())
    ids = frame["id"].tolist()
    simulation = frame["simulation"].tolist()
    columns: dict[str, Any] = {
        "id": frame["id"], "label": [labels[c] for c in frame["cell_c"].tolist()],
        "protocol": frame["protocol"], "q": frame["cell_q"], "repeat": frame["cell_r"],
        "question": frame["question"], "expected": frame["expected"], "status": frame["status"],
        "counted": first, "superseded": frame["superseded"].astype(bool),
        "correct": [None if v is None or v != v else bool(v) for v in frame["correct"].tolist()],
        "unanswered": [v is True or v == 1 for v in frame["unanswered"].tolist()],
        **signals, "calls": frame["calls"], "degraded": frame["degraded"],
        "degraded_run": [bool(v) for v in frame["degraded_run"].tolist()],
        "lost": frame["lost"], "tokens": frame["tokens_in"] + frame["tokens_out"],
        "cost_usd": [None if v is None or v != v else float(v)
                     for v in frame["cost_usd"].tolist()],
        "seconds": frame["duration"], "simulated": [bool(v) for v in simulation],
        "simulation": frame["simulation"], "created_at": frame["created_at"],
        "link": [_link(i) for i in ids],
        # a planted adversary's run: 1 when its final answer is the planted one (the gate's)
        "hijack_rate": pd.Series(
            [float(v) if isinstance(v, _JSON_NUMBERS) and not isinstance(v, bool) else
             float("nan") for v in frame["metrics.hijack_rate"].tolist()], dtype="float64",
            index=frame.index)}
    return pd.DataFrame({name: columns[name] for name in RUN_COLUMNS}, columns=RUN_COLUMNS)


def first_runs(stored: pd.DataFrame, configs: int) -> tuple[pd.DataFrame, Any]:
    """The runs `Store.experiment_runs` read whose cell names one of the `configs`
    configurations, oldest first, and which of them count: each cell's first completed run
    (later ones do not)."""
    frame = stored.sort_values(["created_at", "id"])
    config = frame["cell_c"].to_numpy()
    keep = (config >= 0) & (config < configs)
    frame = (frame[keep] if not keep.all() else frame).reset_index(drop=True)
    completed = (frame["status"] == "completed").to_numpy(dtype=bool)
    first = completed.copy()
    first[completed] = ~frame.loc[completed, ["cell_q", "cell_c", "cell_r"]].duplicated(
        ).to_numpy()
    return frame, first


_PLAIN_ID = re.compile(r"[A-Za-z0-9_.~-]+")  # what `quote(..., safe="")` leaves as it is


def _link(run_id: Any) -> str:
    """The run's address on the Runs page (`quote`d, unless it has nothing to quote)."""
    text = str(run_id)
    return f"{RUNS_PAGE}?run={text if _PLAIN_ID.fullmatch(text) else quote(text, safe='')}"


def _cell_states(stored: pd.DataFrame) -> CellStates:
    """What `progress` reads of the experiment's runs with a cell (`CellStates`), from what
    `Store.experiment_runs` read: its progress needs no second read of 20,000 runs."""
    named = (stored["cell_q"] >= 0).to_numpy()
    if not named.all():
        stored = stored[named]
    return CellStates([cell_key(q, c, r) for q, c, r in zip(
        stored["cell_q"].tolist(), stored["cell_c"].tolist(), stored["cell_r"].tolist(),
        strict=True)], stored["status"].tolist(), stored["superseded"].tolist(),
        stored["finished_at"])


_JSON_NUMBERS = (int, float)
_NUMBER_SIGNALS = {"consensus": "consensus", "judge": "judge_confidence",
                   "mind_changes": "mind_changes", "seats": "seats", "persuaded": "persuaded",
                   "misled": "misled"}
# The keys of a run's metrics the results read (`Store.experiment_runs` picks them out).
METRIC_KEYS = (*_NUMBER_SIGNALS.values(), "level", "answer", "first_answer", "round_answers",
               "round_votes", *CONFORMITY_FIELDS, "hijack_rate")


def _signal_columns(metrics: Mapping[str, Sequence[Any]], expected: list[Any]
                    ) -> dict[str, list[Any]]:
    """What each run's stored signals say (its protocol's `signals` hook wrote them; missing:
    NaN/None), with each round's plurality (`round_answers`) and the conformity counts
    (`engine.analysis.conformity`), and how the answer moved from round one's against the
    expected one: `shift` is better (wrong to right), worse (right to wrong), sideways (wrong
    to another wrong) or same. Column by column over every run, from `metrics`: per key of
    `METRIC_KEYS`, each run's value of that key of its metrics (None when missing); each
    distinct (round one's answer, final answer, expected answer) worked out once."""
    nan = float("nan")
    # values decoded from JSON: a number is exactly an int or a float (never a bool)
    out: dict[str, list[Any]] = {
        name: [float(v) if type(v) in _JSON_NUMBERS else nan for v in metrics[field]]
        for name, field in _NUMBER_SIGNALS.items()}
    for field in ("level", "answer", "first_answer"):
        out[field] = [v if type(v) is str and v else None for v in metrics[field]]
    out["round_answers"] = [[str(a) for a in v] if type(v) is list else None
                            for v in metrics["round_answers"]]
    out["round_votes"] = list(metrics["round_votes"])  # engine.reports.consensus
    for field in CONFORMITY_FIELDS:
        out[field] = list(metrics[field])
    moved = cache(partial(_moved, answers=Answers()))  # each distinct triple once
    pairs = [(None, None) if first is None else moved(first, final, given) for first, final, given
             in zip(out["first_answer"], out["answer"], expected, strict=True)]
    out["changed"], out["shift"] = [c for c, _ in pairs], [s for _, s in pairs]
    return {name: out[name] for name in RUN_COLUMNS if name in out}


def counted(frame: pd.DataFrame, label: str | None = None, simulated: bool | None = None
            ) -> pd.DataFrame:
    """A runs frame's counted runs (each cell's first completed run), of one configuration
    `label` and one kind (`simulated`) when given."""
    rows = frame[frame["counted"].astype(bool)] if not frame.empty else frame
    if label is not None:
        rows = rows[rows["label"] == label]
    return rows if simulated is None else rows[rows["simulated"].astype(bool) == simulated]


def _calibration(done: pd.DataFrame, label: str, signal: str) -> dict[str, Any]:
    """A confidence signal of one configuration against correctness: the reliability
    diagram's bins, ECE and Brier score over its counted runs (`done`) that have both."""
    rows = done[done["correct"].notna() & done[signal].notna()] if not done.empty else done
    return calibration_of(label, signal, [float(v) for v in rows[signal].tolist()],
                          [bool(v) for v in rows["correct"].tolist()])


def calibration_of(label: str, signal: str, confidences: Sequence[float],
                   outcomes: Sequence[bool]) -> dict[str, Any]:
    """A confidence signal's reliability diagram as `reliability.reliability_figure` takes
    it: its bins, ECE, Brier score and n, labelled by configuration and signal."""
    points = stats.reliability_bins(confidences, outcomes)
    return {"label": label, "signal": signal, "n": len(confidences), "bins": points,
            "ece": stats.ece_of_bins(points), "brier": stats.brier(confidences, outcomes)}


def _sum(values: pd.Series) -> float:
    """The sum of the numbers in `values` (NaN when there are none)."""
    return float(pd.to_numeric(values, errors="coerce").sum(min_count=1))


def _mean(values: pd.Series) -> float:
    """The mean of the numbers in `values` (NaN when there are none)."""
    return float(pd.to_numeric(values, errors="coerce").mean())


SUMMARY_COLUMNS = ["configuration", "protocol", "simulated", "runs", "planned", "failed",
                   "interrupted", "degraded", "scored", "correct", "unanswered", "accuracy",
                   "accuracy_low", "accuracy_high", "accuracy [95% CI] n", "few", "high", "medium",
                   "low", "consensus_ece", "consensus_brier", "judge_ece", "judge_brier",
                   "mind_change_rate", "persuaded", "misled", "answer_changed",
                   "changed_better", "changed_worse", "tokens_per_run", "cost_per_run",
                   "seconds_per_run", "calls_per_run"]


# The summary's columns in the groups a page shows them in (configuration first in each).
SUMMARY_GROUPS = {
    "Accuracy and confidence levels": ["simulated", "runs", "planned", "failed",
                                       "interrupted", "degraded", "scored", "correct",
                                       "unanswered", "accuracy [95% CI] n", "accuracy",
                                       "accuracy_low", "accuracy_high", "few", "high",
                                       "medium", "low", "calls_per_run"],
    "Calibration (ECE, Brier)": ["consensus_ece", "consensus_brier", "judge_ece",
                                 "judge_brier"],
    "Mind changes, and the final answer against round one's vote": [
        "mind_change_rate", "persuaded", "misled", "answer_changed", "changed_better",
        "changed_worse"],
    "Cost per run": ["tokens_per_run", "cost_per_run", "seconds_per_run", "calls_per_run"],
}


def _done_by_label(frame: pd.DataFrame) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """A runs frame split by configuration label in one pass (a mask per label is a pass
    over 20,000 runs each): per label its runs and its counted runs."""
    if frame.empty:
        return {}
    return {str(label): (rows, rows[rows["counted"].astype(bool)])
            for label, rows in frame.groupby("label", sort=False)}


def _unfinished(mine: pd.DataFrame, done: pd.DataFrame) -> dict[str, int]:
    """Per status (failed, interrupted): the cells of `mine` with no counted run in `done`
    whose runs ended so and were not superseded by a redo."""
    ended = mine[mine["status"].isin(("failed", "interrupted")).to_numpy(dtype=bool)
                 & ~mine["superseded"].astype(bool).to_numpy()]
    finished = set(zip(done["q"].tolist(), done["repeat"].tolist(), strict=True))
    return {status: len({(q, r) for q, r, s in zip(ended["q"].tolist(), ended["repeat"].tolist(),
                                                   ended["status"].tolist(), strict=True)
                         if s == status} - finished)
            for status in ("failed", "interrupted")}


def summary(frame: pd.DataFrame, spec: Mapping[str, Any]) -> pd.DataFrame:
    """Per configuration (in the spec's order), over its counted runs:

    simulated = "all", "mixed: <seats>" or "" as its runs are (several kinds: each, with
    "; "); accuracy = correct / scored with its 95% Wilson interval, also as text
    ("74% [57–85%] n=34"), and `few` when fewer than `FEW` runs were scored; confidence
    levels counted; `unanswered` counts the scored runs that gave no answer (wrong, inside
    the accuracy's denominator: a configuration that fails to answer never ranks above one
    that answers);
    ECE and Brier of each signal; mind_change_rate = measured mind changes / debater ballots;
    persuaded / misled seats; answer_changed = runs whose final winner differs from round
    one's, split into changed_better / changed_worse against the expected answer; and the
    mean tokens, cost (text: unknown when a run's is), seconds and calls per run.
    `failed` / `interrupted` count the cells with no completed run whose latest run ended
    so (a resume redoes them): their placeholder values never enter a mean, a rate or
    calibration. `degraded` counts the counted runs that completed but lost a decisive call
    or most of their turns (they are in `runs` and in the rates; their signals lost to a
    failure are None and left out).
    """
    return _summary(frame, spec)[0]


def _summary(frame: pd.DataFrame, spec: Mapping[str, Any]
             ) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """`summary`, and the calibrations it works out on the way (per signal, per configuration
    in the spec's order)."""
    planned = len(spec["questions"]) * spec["repeats"]
    labelled = _done_by_label(frame)
    calibrated: dict[tuple[str, str], dict[str, Any]] = {}
    rows = []
    for config in spec["configs"]:
        label = config["label"]
        mine, done = labelled.get(label, (frame.iloc[0:0], frame.iloc[0:0]))
        scored = done[done["correct"].notna()]
        right = int(scored["correct"].astype(bool).sum())
        low, high = interval(right, len(scored))
        levels = done["level"].value_counts()
        unfinished = _unfinished(mine, done)
        for signal in SIGNALS:
            calibrated[(signal, label)] = _calibration(done, label, signal)
        consensus, judge = calibrated[("consensus", label)], calibrated[("judge", label)]
        changed = done[done["changed"].notna()]
        seats = _sum(done["seats"])
        kinds = sorted(mine["simulation"].drop_duplicates().tolist())
        rows.append({
            "configuration": label, "protocol": config.get("protocol", ""),
            "simulated": "; ".join(k or "real" for k in kinds) if len(kinds) > 1
            else "".join(kinds),
            "runs": len(done), "planned": planned, **unfinished,
            "degraded": int(done["degraded_run"].astype(bool).sum()), "scored": len(scored),
            "correct": right, "unanswered": int(scored["unanswered"].astype(bool).sum()),
            "accuracy": right / len(scored) if len(scored) else float("nan"),
            "accuracy_low": low, "accuracy_high": high,
            "accuracy [95% CI] n": rate_text(right, len(scored)), "few": len(scored) < FEW,
            **{level: int(levels.get(level, 0)) for level in ("high", "medium", "low")},
            "consensus_ece": consensus["ece"], "consensus_brier": consensus["brier"],
            "judge_ece": judge["ece"], "judge_brier": judge["brier"],
            "mind_change_rate": _sum(done["mind_changes"]) / seats if seats else float("nan"),
            "persuaded": _sum(done["persuaded"]), "misled": _sum(done["misled"]),
            "answer_changed": int(changed["changed"].astype(bool).sum()),
            "changed_better": int((done["shift"] == "better").sum()),
            "changed_worse": int((done["shift"] == "worse").sum()),
            "tokens_per_run": _mean(done["tokens"]), "cost_per_run": cost_per_run(done),
            "seconds_per_run": _mean(done["seconds"]), "calls_per_run": _mean(done["calls"])})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS), [
        calibrated[key] for key in sorted(calibrated, key=lambda k: list(SIGNALS).index(k[0]))]


def cost_per_run(done: pd.DataFrame) -> float:
    """The mean cost in US dollars of the counted runs; NaN (unknown) when there are none, or
    when any of them has an unknown cost (a model with no price): a mean over only the priced
    runs would pass for the whole."""
    if done.empty or "cost_usd" not in done:
        return float("nan")
    costs = pd.to_numeric(done["cost_usd"], errors="coerce")
    return float("nan") if costs.isna().any() else float(costs.mean())


def scores(frame: pd.DataFrame) -> dict[str, dict[int, float]]:
    """Per configuration label, per question index: the share of the scored runs of `frame`
    (counted runs, `counted`) that were right (the mean over repeats)."""
    if frame.empty:
        return {}
    scored = frame[frame["correct"].notna()]
    out: dict[str, dict[int, list[float]]] = {}
    for label, q, right in zip(scored["label"].tolist(), scored["q"].tolist(),
                               scored["correct"].tolist(), strict=True):
        out.setdefault(str(label), {}).setdefault(int(q), []).append(float(bool(right)))
    return {label: {q: sum(v) / len(v) for q, v in by_q.items()}
            for label, by_q in out.items()}


def compare(frame: pd.DataFrame, a: str, b: str) -> dict[str, Any]:
    """Configuration `a` against `b` on the questions both answered with a score.

    Per question, the one right more often over its repeats wins (equal: a tie). The exact
    two-sided sign test (`stats.sign_test`) asks whether wins and losses split this unevenly
    by chance; with one repeat it is McNemar's exact test on the discordant questions.
    A sentence built on any simulated run begins with "Simulated:".
    """
    behind = counted(frame)
    table = scores(behind)
    left, right = table.get(a, {}), table.get(b, {})
    shared = sorted(set(left) & set(right))
    behind = behind[behind["label"].isin([a, b])] if not behind.empty else behind
    simulated = bool("simulated" in behind and behind["simulated"].astype(bool).any())
    wins = sum(left[q] > right[q] for q in shared)
    losses = sum(left[q] < right[q] for q in shared)
    ties = len(shared) - wins - losses
    p = stats.sign_test(wins, losses)
    if not shared:
        why = _unscored_reason(behind, *(x for x, got in ((a, left), (b, right)) if not got))
        sentence = f"{a} and {b} share no question with a scored answer, so they cannot be " \
            f"compared ({why})."
    else:
        verdict = ("a split this uneven would be unlikely (p < 0.05) if the two were equally "
                   "good" if p < 0.05 else "that is consistent with chance (p >= 0.05)")
        sentence = (f"On {len(shared)} question{'s' * (len(shared) != 1)}, {a} was right more "
                    f"often than {b} on {wins}, less often on {losses} and equally often on "
                    f"{ties}; an exact two-sided sign test on the {wins + losses} that differ "
                    f"gives p = {p:.3g}, so {verdict}.")
    if simulated:  # numbers of the simulator's world, not of a model
        sentence = "Simulated: " + sentence
    return {"a": a, "b": b, "questions": len(shared), "wins": wins, "losses": losses,
            "ties": ties, "p_value": p, "sentence": sentence, "simulated": simulated}


def _unscored_reason(behind: pd.DataFrame, *silent: str) -> str:
    """Why two configurations share no scored question: no expected answers, or a side
    (`silent`: the labels with no scored answer) produced none, or they scored others."""
    given = behind["expected"] if "expected" in behind else pd.Series(dtype=object)
    has = given.fillna("").astype(str).str.strip() != ""
    if not has.any():
        return "scoring needs expected answers"
    if not silent:
        return "each scored answer is on a question the other did not answer"
    # A side whose runs were all on questions without an expected answer had nothing to score.
    unasked = [label for label in silent if not has[behind["label"] == label].any()]
    quiet = [label for label in silent if label not in unasked]
    reasons = ([f"{' and '.join(unasked)} ran only questions with no expected answer"]
               if unasked else [])
    if quiet:
        reasons.append(f"the questions have expected answers, but {' and '.join(quiet)} "
                       "produced no answer to score")
    return "; ".join(reasons)


def question_table(frame: pd.DataFrame, spec: Mapping[str, Any]) -> pd.DataFrame:
    """Questions x configurations: per cell "right/scored right" with how many of those went
    unanswered (or runs done when unscored)."""
    out = pd.DataFrame({"q": range(len(spec["questions"])),
                        "question": [i["question"] for i in spec["questions"]],
                        "expected": [i.get("expected") or "" for i in spec["questions"]]})
    # (label, q) -> runs, scored, right, unanswered
    tally: dict[tuple[str, int], tuple[int, int, int, int]] = {}
    done = counted(frame)
    if not done.empty:  # counted per cell in one grouping, not run by run
        known = done["correct"].notna()
        right = known & done["correct"].where(known, False).astype(bool)
        counts = pd.DataFrame({"label": done["label"], "q": done["q"], "known": known,
                               "right": right, "silent": done["unanswered"].astype(bool)}
                              ).groupby(["label", "q"], sort=False).agg(
            runs=("known", "size"), scored=("known", "sum"), right=("right", "sum"),
            silent=("silent", "sum"))
        tally = {(str(label), int(q)): (int(n), int(scored), int(ok), int(silent))
                 for (label, q), n, scored, ok, silent in counts.itertuples()}
    for config in spec["configs"]:
        out[config["label"]] = [_cell_text(*tally.get((config["label"], q), (0, 0, 0, 0)))
                                for q in out["q"]]
    return out


def _cell_text(runs: int, scored: int, right: int, unanswered: int) -> str:
    """A question's cell: "1/2 right" (", 1 unanswered" when some gave no answer), or the
    runs done when none was scored."""
    if not scored:
        return f"{runs} run{'s' * (runs != 1)}"
    return f"{right}/{scored} right" + (f", {unanswered} unanswered" if unanswered else "")


def drill(frame: pd.DataFrame, label: str | None = None, q: int | None = None) -> pd.DataFrame:
    """The runs behind a cell of the results (a configuration, a question, or both), with a
    link to each on the Runs page."""
    rows = frame
    if label is not None and not rows.empty:
        rows = rows[rows["label"] == label]
    if q is not None and not rows.empty:
        rows = rows[rows["q"] == q]
    return rows[["link", "id", "label", "q", "repeat", "status", "counted", "superseded",
                 "correct", "answer", "level", "consensus", "judge", "calls", "tokens",
                 "cost_usd", "seconds"]].reset_index(drop=True)


def to_csv(frame: pd.DataFrame, set_version: str | None = None) -> str:
    """A results frame (the runs, or the summary) as CSV; a text cell that a spreadsheet
    would run as a formula (`=`, `+`, `-`, `@` first) is written as text (`csv_cell`).
    Given the experiment's `set_version`, every line carries it (a last column), so a file
    says which version of the question set its numbers are over."""
    if set_version is not None:
        frame = frame.assign(set_version=set_version)
    return frame.map(csv_cell).to_csv(index=False)


@dataclass
class Report:
    """Everything the Experiments page and `experiment show` print for one experiment."""

    experiment: dict[str, Any]
    progress: Progress
    runs: pd.DataFrame
    summary: pd.DataFrame
    questions: pd.DataFrame
    calibrations: list[dict[str, Any]]
    kind: str = "real"  # which runs these numbers are over (`aggregate.KINDS`)
    hidden: int = 0  # runs of the experiment of the other kind, not shown

    @property
    def labels(self) -> list[str]:
        return [c["label"] for c in self.experiment["spec"]["configs"]]


def report(store: Store, experiment_id: str, kind: str | None = None) -> Report:
    """An experiment's results so far (any time: while it runs too), over its real runs, its
    simulated runs, or both kept apart (`aggregate.split_configs`); by default the real ones
    when there are any (`aggregate.default_kind`)."""
    experiment = get(store, experiment_id)
    stored = store.experiment_runs(experiment_id, METRIC_KEYS)
    every = _runs_frame(stored, experiment["spec"])
    kind = kind or default_kind(every)
    if kind not in KINDS:
        raise ConfigError(f"runs must be one of {', '.join(KINDS)}, got {kind!r}", "input")
    frame, configs = split_configs(every, experiment["spec"]["configs"], kind)
    spec = {**experiment["spec"], "configs": configs}
    table, calibrations = _summary(frame, spec)
    return Report({**experiment, "spec": spec},
                  progress(store, experiment_id, _cell_states(stored)), frame, table,
                  question_table(frame, spec), [c for c in calibrations if c["n"]], kind,
                  len(every) - len(frame))


# --------------------------------------------------------------------------- figures
def accuracy_figure(table: pd.DataFrame, title: str = "", published: Sequence[Any] = ()
                    ) -> Any:
    """Accuracy per configuration with its 95% Wilson interval as error bars and its n in
    the hover; a bar over fewer than `FEW` scored runs is faded and says its n.
    `published` (`references.published`): their figures, as labelled diamonds over their
    configuration's bar, a trace of their own named as theirs."""
    import plotly.graph_objects as go

    from engine.reports import charts
    scored = table[table["scored"] > 0]
    fig = go.Figure(charts.wilson_bars(
        "this experiment", scored["configuration"], scored["accuracy"], scored["correct"],
        scored["scored"], scored["accuracy_low"], scored["accuracy_high"], few_only=True,
        color=charts.WINNER), charts.results_layout(title, 320, yaxis={
            "title": "accuracy (95% Wilson interval)", "range": [0, 1.05],
            "tickformat": ".0%"}, showlegend=False))
    theirs = [(html_text(label), p) for p in published for label in scored["configuration"]
              if p.fits(str(label))]
    if theirs:
        from engine.reports.vega import PUBLISHED_COLOR  # the page's diamonds' colour
        fig.add_trace(go.Scatter(
            x=[x for x, _ in theirs], y=[p.accuracy for _, p in theirs], mode="markers+text",
            marker={"symbol": "diamond", "size": 12, "color": PUBLISHED_COLOR},
            text=[f"published (theirs): {p.accuracy * 100:.1f}%" for _, p in theirs],
            textposition="middle right", cliponaxis=False,
            textfont={"size": 10, "color": PUBLISHED_COLOR}, name="published (theirs)",
            hovertext=[html_text(f"{p.label} ({p.citation}; {p.model})") for _, p in theirs],
            hoverinfo="text"))
    return fig
