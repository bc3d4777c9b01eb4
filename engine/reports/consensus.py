"""Is the consensus earned? (DESIGN 2.12) Per configuration, over stored runs whose
protocol gives rounds of answers, simulated and real never pooled:

- agreement inflation: the mean, over runs with two rounds or more, of the last round's
  agreement (the plurality's share of the answers given) minus round one's, with its 95%
  interval, against accuracy;
- "consensus earned?": three confidence sources on the SAME runs, each against correctness:
  round one's vote share of the final answer (what the agents said before they talked), the
  final round's vote share of it, and the judge's own confidence or the protocol's stored
  consensus (`judge_confidence`, else `consensus`; left out where it is the final vote share
  on every run, as a society's and a panel's are), each with its ECE and Brier score, and
  selective accuracy against coverage with its area (AUARC);
- manufactured consensus: agreement rose (the inflation's interval lies above 0) and accuracy
  did not (final accuracy minus round one's plurality accuracy over the same runs, its
  interval reaching 0 or below);
- the fix/break odds ratio of the majority: runs whose round-one plurality was wrong and final
  answer right, per run right then wrong (`consensus_stats.odds_ratio`).

Every number comes from the runs' stored metrics (`round_votes`, the answer and the
confidences a protocol's `signals` wrote), never from transcripts; a run stored before its
metrics kept `round_votes` has them worked out once from its stored result (`fill_votes`).
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import pandas as pd

from engine.analysis import stats
from engine.analysis.answers import answers_match
from engine.analysis.consensus_stats import auarc, mean_interval, odds_ratio, selective_curve
from engine.analysis.rounds_dynamics import votes
from engine.protocols import REGISTRY, stored_rounds
from engine.reports.experiments import calibration_of
from engine.text import html_text
from engine.views.aggregate import SIMULATED_SUFFIX, flatten, pct
from engine.views.round_frames import flag

if TYPE_CHECKING:
    from engine.store import RunFilters, Store

# the three confidence sources, key -> what a chart or table calls it
SOURCES = {"first_share": "round-one vote share", "final_share": "final vote share",
           "stated": "judge or consensus confidence"}
MEASURE_COLUMNS = ["id", "group", "protocol", "simulated", "rounds", "agreement_first",
                   "agreement_final", "inflation", "first_share", "final_share", "stated",
                   "correct", "first_right"]
TABLE_COLUMNS = [
    "configuration", "simulated", "runs", "multi_round", "inflation", "inflation_low",
    "inflation_high", "scored", "accuracy", "accuracy_low", "accuracy_high", "first_accuracy",
    "gain", "gain_low", "gain_high", "paired", "manufactured", "accuracy_fell", "too_few",
    "fixes", "breaks",
    "fix_break_or", "or_low", "or_high",
    *(f"{key}_{what}" for key in SOURCES for what in ("n", "ece", "brier", "auarc"))]


def rounds_protocols() -> list[str]:
    """The protocols that give rounds of answers (DESIGN 2.12)."""
    return [name for name, spec in REGISTRY.items() if spec.answers_by_round is not None]


# --------------------------------------------------------------------------- per run
def clean_votes(value: Any) -> list[dict[str, int]] | None:
    """A run's stored `round_votes` as counts per round, or None when it is missing or is not
    a list of {answer: count} (a hostile or damaged row is treated as missing, never trusted)."""
    if not isinstance(value, list) or not value:
        return None
    out = []
    for counts in value:
        if not isinstance(counts, Mapping):
            return None
        if not all(isinstance(k, str) and type(v) is int and v >= 0 for k, v in counts.items()):
            return None
        out.append({k: v for k, v in counts.items() if v > 0 and k})
    return out


@lru_cache(maxsize=65_536)
def _match(answer: str, other: str) -> bool:
    return bool(answers_match(answer, other))


def agreement(counts: Mapping[str, int]) -> float:
    """The plurality's share of the answers given in a round (0.0 when nobody answered), as
    `engine.analysis.dynamics` measures it."""
    total = sum(counts.values())
    return max(counts.values()) / total if total else 0.0


def share_of(counts: Mapping[str, int], answer: str | None) -> float | None:
    """The share of a round's answers that give `answer` (`answers_match`); None when nobody
    answered or there is no answer to look for."""
    total = sum(counts.values())
    if not total or not answer or not str(answer).strip():
        return None
    return sum(n for given, n in counts.items() if _match(given, str(answer))) / total


def _number(value: Any) -> float | None:
    if type(value) in (int, float) and value == value and 0.0 <= float(value) <= 1.0:
        return float(value)
    return None


def run_measures(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per run (`MEASURE_COLUMNS`) from a frame with `id`, `group`, `protocol`,
    `simulated`, `correct`, `expected`, `answer`, `judge`, `consensus` and `round_votes`;
    runs without readable round votes are left out. `first_right` scores round one's
    plurality (the tally's winner: most votes, then the smallest normalised form)."""
    rows = []
    for run in frame.to_dict("records"):
        counts = clean_votes(run.get("round_votes"))
        if counts is None:
            continue
        first, last = counts[0], counts[-1]
        expected = run.get("expected")
        expected = expected if isinstance(expected, str) and expected.strip() else None
        plurality = next(iter(first), None)
        answer = run.get("answer") if isinstance(run.get("answer"), str) else None
        stated = _number(run.get("judge"))
        if stated is None:
            stated = _number(run.get("consensus"))
        many = len(counts) > 1
        rows.append({
            "id": run.get("id"), "group": run.get("group"), "protocol": run.get("protocol"),
            "simulated": bool(run.get("simulated")), "rounds": len(counts),
            "agreement_first": agreement(first), "agreement_final": agreement(last),
            "inflation": agreement(last) - agreement(first) if many else None,
            "first_share": share_of(first, answer), "final_share": share_of(last, answer),
            "stated": stated, "correct": flag(run.get("correct")),
            "first_right": (_match(plurality, expected) if plurality and expected else
                            (False if expected and not plurality else None))})
    return pd.DataFrame(rows, columns=MEASURE_COLUMNS)


# --------------------------------------------------------------------------- per configuration
def _source(mine: pd.DataFrame, key: str) -> tuple[list[float], list[bool]]:
    """The source's confidences and the correctness of the runs of one configuration that
    have both."""
    rows = mine[mine["correct"].notna() & mine[key].notna()]
    return [float(v) for v in rows[key]], [bool(v) for v in rows["correct"]]


def _duplicate(mine: pd.DataFrame) -> bool:
    """Whether the stated confidence is the final vote share on every run that has both."""
    both = mine[mine["stated"].notna() & mine["final_share"].notna()]
    return bool(len(both)) and bool(
        ((both["stated"].astype(float) - both["final_share"].astype(float)).abs() < 1e-3).all())


def sources_of(mine: pd.DataFrame) -> list[str]:
    """The confidence sources a configuration's runs have (the stated one left out where it
    repeats the final vote share)."""
    keys = [k for k in SOURCES if _source(mine, k)[0]]
    return [k for k in keys if not (k == "stated" and _duplicate(mine))]


def _label(group: str, simulated: bool) -> str:
    return group if not simulated or group.endswith(SIMULATED_SUFFIX) else \
        group + SIMULATED_SUFFIX


def configurations(measures: pd.DataFrame, order: Iterable[str] = ()) -> pd.DataFrame:
    """Per configuration (group; simulated runs apart, labelled so) the table of
    `TABLE_COLUMNS`: inflation (mean, 95% interval, `multi_round` runs), final accuracy
    (Wilson), round one's plurality accuracy and the `gain` (final minus round one over the
    `paired` runs scored both ways, 95% interval), the `manufactured` flag, fixes, breaks and
    their odds ratio, and per confidence source its n, ECE, Brier and AUARC."""
    if measures.empty:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    keys = list(dict.fromkeys(zip(measures["group"].astype(str), measures["simulated"])))
    rank = {name: i for i, name in enumerate(order)}
    keys.sort(key=lambda k: (rank.get(k[0], len(rank)), k[1]))
    rows = []
    for group, simulated in keys:
        mine = measures[(measures["group"].astype(str) == group)
                        & (measures["simulated"] == simulated)]
        rows.append(_row(_label(group, simulated), simulated, mine))
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def _row(label: str, simulated: bool, mine: pd.DataFrame) -> dict[str, Any]:
    inflation = mean_interval(mine["inflation"].dropna().astype(float).tolist())
    scored = mine[mine["correct"].notna()]
    right = int(scored["correct"].astype(bool).sum())
    low, high = stats.wilson_interval(right, len(scored)) if len(scored) else (None, None)
    paired = scored[scored["first_right"].notna()]
    final = paired["correct"].astype(bool)
    first = paired["first_right"].astype(bool)
    gain = mean_interval([float(a) - float(b) for a, b in zip(final, first, strict=True)])
    fixes, breaks = int((final & ~first).sum()), int((first & ~final).sum())
    ratio = odds_ratio(fixes, breaks)
    # A verdict needs enough runs and a real interval: an interval of zero width over two
    # runs is no evidence of anything (`VERDICT_MIN`); six runs with the same rise have a
    # width of rounding error (1e-17), no wider.
    enough = inflation.n >= VERDICT_MIN and gain.n >= VERDICT_MIN and \
        inflation.high == inflation.high and inflation.high - inflation.low > ZERO_WIDTH
    manufactured = bool(enough and inflation.low == inflation.low and inflation.low > 0
                        and gain.low == gain.low and gain.low <= 0)
    fell = bool(gain.n >= VERDICT_MIN and gain.high == gain.high and gain.high < 0)
    row: dict[str, Any] = {
        "configuration": label, "simulated": simulated, "runs": len(mine),
        "multi_round": inflation.n, "inflation": inflation.value,
        "inflation_low": inflation.low, "inflation_high": inflation.high,
        "scored": len(scored), "accuracy": right / len(scored) if len(scored) else None,
        "accuracy_low": low, "accuracy_high": high,
        "first_accuracy": float(first.mean()) if len(first) else None,
        "gain": gain.value, "gain_low": gain.low, "gain_high": gain.high, "paired": gain.n,
        "manufactured": manufactured, "accuracy_fell": fell,
        "too_few": not enough and not fell, "fixes": fixes, "breaks": breaks,
        "fix_break_or": ratio.value, "or_low": ratio.low, "or_high": ratio.high}
    shown = sources_of(mine)
    for key in SOURCES:
        conf, right_ = _source(mine, key) if key in shown else ([], [])
        row[f"{key}_n"] = len(conf)
        row[f"{key}_ece"] = stats.ece(conf, right_)
        row[f"{key}_brier"] = stats.brier(conf, right_)
        row[f"{key}_auarc"] = auarc(conf, right_)
    return row


def calibrations(measures: pd.DataFrame, configuration: str) -> list[dict[str, Any]]:
    """One configuration's three curves on the same runs, as `reliability.reliability_figure`
    takes them: per source its bins, ECE, Brier and n."""
    mine = _of(measures, configuration)
    return [calibration_of(configuration, SOURCES[key], *_source(mine, key))
            for key in sources_of(mine)]


def selective(measures: pd.DataFrame, configuration: str) -> pd.DataFrame:
    """One configuration's selective accuracy against coverage, per source (`source`, and
    `consensus_stats.selective_curve`'s columns)."""
    mine = _of(measures, configuration)
    rows = []
    for key in sources_of(mine):
        rows += [{"source": SOURCES[key], **point}
                 for point in selective_curve(*_source(mine, key))]
    return pd.DataFrame(rows, columns=["source", "threshold", "coverage", "n", "right",
                                       "accuracy", "low", "high"])


def _of(measures: pd.DataFrame, configuration: str) -> pd.DataFrame:
    if measures.empty:
        return measures
    labels = [_label(str(g), bool(s)) for g, s in zip(measures["group"], measures["simulated"],
                                                       strict=True)]
    return measures[[label == configuration for label in labels]]


# --------------------------------------------------------------------------- reading
@dataclass
class ConsensusReport:
    """What the page shows: the per-run `measures`, the per-configuration `table`, whether
    the runs are simulated (`simulated`: "all", "some" or ""), and `note` (a sample, or why
    nothing is shown)."""

    measures: pd.DataFrame
    table: pd.DataFrame
    simulated: str = ""
    note: str = ""
    configurations: list[str] = field(default_factory=list)


def report(measures: pd.DataFrame, order: Iterable[str] = (), note: str = ""
           ) -> ConsensusReport:
    table = configurations(measures, order)
    sims = table["simulated"].astype(bool) if not table.empty else pd.Series(dtype=bool)
    simulated = "all" if len(sims) and sims.all() else "some" if sims.any() else ""
    return ConsensusReport(measures, table, simulated, note, table["configuration"].tolist())


def fill_votes(store: Store, frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with `round_votes` worked out from the stored result of each run that has a
    protocol with rounds but no stored votes (a run saved before the metrics kept them): one
    batched read of just those results."""
    if frame.empty:
        return frame
    missing = pd.Series([clean_votes(v) is None for v in frame["round_votes"]],
                        index=frame.index)
    wanted = frame[missing & frame["protocol"].isin(rounds_protocols())]
    if wanted.empty:
        return frame
    results = store.run_results(wanted["id"].tolist())
    found = {}
    for run_id, result in zip(results["id"], results["result"], strict=True):
        protocol = wanted.loc[wanted["id"] == run_id, "protocol"].iloc[0]
        rounds = stored_rounds({"protocol": protocol, "result": result})
        if rounds:
            found[run_id] = votes(rounds)
    out = frame.copy()
    out["round_votes"] = [found.get(i, v) for i, v in zip(out["id"], out["round_votes"],
                                                           strict=True)]
    return out


def _inputs(runs: pd.DataFrame, group: str, answer: str, judge: str, consensus: str,
            round_votes: str) -> pd.DataFrame:
    """The columns `run_measures` reads, from `runs`' columns of those names (None where
    `runs` has no such column)."""
    named = {"id": "id", "group": group, "protocol": "protocol", "simulated": "simulated",
             "correct": "correct", "expected": "expected", "answer": answer, "judge": judge,
             "consensus": consensus, "round_votes": round_votes}
    return pd.DataFrame({key: runs[name].tolist() if name in runs else [None] * len(runs)
                         for key, name in named.items()})


def from_store(store: Store, filters: RunFilters, kind: str) -> ConsensusReport:
    """The report over the completed runs matching `filters` (`RunFilters`)
    of every protocol with rounds, `kind` real, simulated or both (kept apart). Past
    `insights.SAMPLE` runs of a protocol and kind, a systematic sample (each run's `group`
    is its label, "(no label)" without one: `aggregate.flatten`)."""
    from engine.reports.insights import every_for, sample_text, simulated_flags
    parts, read, of = [], 0, 0
    args = {**filters.store_args(), "status": "completed"}
    wanted = [p for p in rounds_protocols() if args.get("protocol") in (None, "", p)]
    steps = {1}
    for protocol in wanted:
        for simulated in simulated_flags(kind):
            narrowed = {**args, "protocol": protocol, "simulated": simulated}
            count = store.count_runs(**narrowed)
            if not count:
                continue
            every = every_for(count)
            steps.add(every)
            raw = store.runs(**narrowed, every=every, with_config=False)
            flat = flatten(raw).assign(expected=raw["expected"].tolist())  # `m_` metrics
            parts.append(_inputs(flat, "group", "m_answer", "m_judge_confidence",
                                 "m_consensus", "m_round_votes"))
            read, of = read + len(raw), of + count
    if not parts:
        return report(pd.DataFrame(columns=MEASURE_COLUMNS),
                      note="No completed runs of a protocol with rounds of answers (society, "
                           "single, panel, roundtable, council) match these filters.")
    frame = fill_votes(store, pd.concat(parts, ignore_index=True))
    return report(run_measures(frame), note=sample_text(read, of, max(steps)))


def from_experiment(runs: pd.DataFrame, labels: Iterable[str]) -> ConsensusReport:
    """The report over an experiment's counted runs (`experiments.runs_frame`, kept apart as
    its report keeps them), configurations in the spec's order."""
    done = runs[runs["counted"].astype(bool)] if not runs.empty else runs
    if done.empty:
        return report(pd.DataFrame(columns=MEASURE_COLUMNS))
    frame = _inputs(done, "label", "answer", "judge", "consensus", "round_votes")
    return report(run_measures(frame), labels)


# --------------------------------------------------------------------------- text and figures
VERDICT_MIN = 5  # runs (multi-round, and scored in both rounds) before a verdict is given
ZERO_WIDTH = 1e-9  # an interval no wider than this is a point: rounding, not spread


def _signed(value: Any) -> str:
    return "–" if value is None or value != value else f"{value:+.2f}"


def flag_text(row: Mapping[Hashable, Any]) -> str:
    """One configuration's verdict as a sentence, with its n and intervals."""
    infl = (f"agreement inflation {_signed(row['inflation'])} [{_signed(row['inflation_low'])}"
            f", {_signed(row['inflation_high'])}] over {row['multi_round']} run(s)"
            if row["multi_round"] else "one round only, so no agreement inflation")
    gain = (f"accuracy {pct(row['first_accuracy'])} in round one → {pct(row['accuracy'])} "
            f"final, a change of {_signed(row['gain'])} [{_signed(row['gain_low'])}, "
            f"{_signed(row['gain_high'])}] over {row['paired']} scored run(s)")
    if row["manufactured"]:
        return f"Manufactured consensus: {infl} while {gain}."
    if row.get("accuracy_fell"):
        return f"Accuracy fell: {gain}; {infl}."
    if row.get("too_few"):
        return (f"Too few runs for a verdict (a verdict needs {VERDICT_MIN} or more, with an "
                f"interval): {infl}; {gain}.")
    return f"Not flagged: {infl}; {gain}."


def table_view(table: pd.DataFrame) -> pd.DataFrame:
    """The table as a page shows it: rounded, intervals as text."""
    if table.empty:
        return pd.DataFrame(columns=["configuration"])

    def ci(key: str, fmt: str, bounds: str = "") -> list[str]:
        """Column `key` with its interval (`{bounds or key}_low`, `_high`) as text."""
        return ["–" if v is None or v != v else f"{v:{fmt}}" + (
            "" if low is None or low != low else f" [{low:{fmt}}, {high:{fmt}}]")
            for v, low, high in zip(table[key], table[f"{bounds or key}_low"],
                                    table[f"{bounds or key}_high"], strict=True)]
    return pd.DataFrame({
        "configuration": table["configuration"],
        "simulated": table["simulated"].map({True: "simulated", False: ""}),
        "runs": table["runs"],
        "agreement inflation [95% CI]": ci("inflation", "+.2f"),
        "accuracy [95% CI]": ci("accuracy", ".0%"),
        "round-one plurality accuracy": table["first_accuracy"].map(pct),
        "accuracy gain [95% CI]": ci("gain", "+.2f"),
        "manufactured consensus": ["yes" if made else "too few runs (under 5)" if few else "no"
                                   for made, few in zip(table["manufactured"],
                                                        table["too_few"], strict=True)],
        "accuracy fell": table["accuracy_fell"].map({True: "yes", False: ""}),
        "fixes / breaks": [f"{f} / {b}" for f, b in zip(table["fixes"], table["breaks"],
                                                        strict=True)],
        "fix/break odds ratio [95% CI]": ci("fix_break_or", ".2f", "or"),
        **{f"{name}: ECE · AUARC (n)": [
            "–" if not n else f"{e:.3f} · {a:.3f} (n={n})" for n, e, a in zip(
                table[f"{key}_n"], table[f"{key}_ece"], table[f"{key}_auarc"], strict=True)]
           for key, name in SOURCES.items()}})


def inflation_figure(table: pd.DataFrame, title: str = "") -> Any:
    """Agreement inflation (x, 95% interval) against final accuracy (y, 95% Wilson interval),
    one point per configuration; a manufactured consensus in red. Labels are text."""
    import plotly.graph_objects as go

    from engine.reports import charts
    fig = go.Figure()
    rows = table[table["inflation"].notna() & table["accuracy"].notna()]
    for flagged, color, name in ((False, "#3558c9", "not flagged"),
                                 (True, "#c62828", "manufactured consensus")):
        part = rows[rows["manufactured"] == flagged] if not rows.empty else rows
        if part.empty:
            continue
        x, y = part["inflation"].astype(float), part["accuracy"].astype(float)
        fig.add_trace(go.Scatter(
            x=x.tolist(), y=y.tolist(), mode="markers+text", name=name,
            text=[html_text(c) for c in part["configuration"]], textposition="top center",
            marker={"color": color, "size": 11},
            error_x=charts.interval(x, part["inflation_low"].astype(float).fillna(x),
                                    part["inflation_high"].astype(float).fillna(x)),
            error_y=charts.interval(y, part["accuracy_low"].astype(float),
                                    part["accuracy_high"].astype(float)),
            customdata=[[m, s] for m, s in zip(part["multi_round"], part["scored"],
                                               strict=True)],
            hovertemplate="%{text}<br>inflation %{x:+.2f} (n=%{customdata[0]})<br>accuracy "
                          "%{y:.0%} (n=%{customdata[1]})<extra></extra>"))
    fig.add_vline(x=0, line={"dash": "dot", "color": "#999"})
    return fig.update_layout(charts.results_layout(
        title, 380, xaxis={"title": "agreement inflation (last round minus round one)"},
        yaxis={"title": "final accuracy", "range": [0, 1.05], "tickformat": ".0%"}))


def selective_figure(points: pd.DataFrame, aucs: Mapping[str, float], title: str = "") -> Any:
    """Selective accuracy against coverage, one line per confidence source (AUARC in the
    legend), 95% Wilson intervals as error bars."""
    import plotly.graph_objects as go

    from engine.reports import charts
    fig = go.Figure()
    colors = ("#3558c9", "#e65100", "#2e7d32")
    for i, source in enumerate(dict.fromkeys(points["source"]) if not points.empty else []):
        part = points[points["source"] == source]
        fig.add_trace(go.Scatter(
            x=part["coverage"].tolist(), y=part["accuracy"].tolist(), mode="lines+markers",
            name=html_text(f"{source} (AUARC {aucs.get(source, float('nan')):.3f})"),
            line={"color": colors[i % 3]},
            error_y=charts.interval(part["accuracy"], part["low"], part["high"],
                                    color=colors[i % 3]),
            customdata=part[["n", "threshold"]].values.tolist(),
            hovertemplate="coverage %{x:.0%} (n=%{customdata[0]}, confidence ≥ "
                          "%{customdata[1]:.2f})<br>accuracy %{y:.0%}<extra></extra>"))
    return fig.update_layout(charts.results_layout(
        title, 380, xaxis={"title": "coverage (share of runs answered)", "range": [0, 1.02],
                           "tickformat": ".0%"},
        yaxis={"title": "accuracy of the runs answered", "range": [0, 1.05],
               "tickformat": ".0%"}))


def aucs_of(table: pd.DataFrame, configuration: str) -> dict[str, float]:
    """The AUARC per source name of one configuration's row."""
    row = table[table["configuration"] == configuration]
    if row.empty:
        return {}
    first = row.iloc[0]
    return {name: float(first[f"{key}_auarc"]) for key, name in SOURCES.items()}
