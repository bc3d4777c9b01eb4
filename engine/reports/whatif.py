"""What if the runs had stopped early: the stop rules of `engine.analysis.replay`
replayed on the stored runs that match the Insights filters, with no model call.

The rounds come from the runs' stored results (`engine.protocols.stored_rounds`, every protocol
with rounds of answers), read with one query per 5,000 runs; the tokens and dollars of each
round from the runs' turns, added up in SQL with one grouped query per 5,000 runs
(`Store.round_spend`). Only completed runs count. Simulated and real runs are never pooled:
`kind` picks one, or both side by side with every simulated group suffixed " (simulated)".
Each configuration label is a group, and "(all labels)" pools the labels of one kind.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from engine.analysis.replay import Outcome, Rule, StoredRun, replay
from engine.protocols import stored_rounds
from engine.reports.consensus import rounds_protocols
from engine.reports.vega import _base, _number, interval_tooltip, labelled_points
from engine.store import RunFilters
from engine.views.aggregate import KINDS, SIMULATED_SUFFIX
from engine.views.blocks import NO_LABEL

if TYPE_CHECKING:
    from engine.store import Store

ALL = "(all labels)"
COLUMNS = ["group", "rule", "kind", "threshold", "runs", "stopped early", "scored",
           "accuracy as run", "accuracy with rule", "accuracy lost", "broken", "fixed",
           "tokens saved", "tokens saved %", "dollars saved", "rate", "low", "high",
           "lost", "lost low", "lost high", "as run", "as run low", "as run high", "saved"]


def round_runs(store: Store, filters: RunFilters | None = None, kind: str = "real",
               with_config: bool = False, experiment_id: str | None = None) -> pd.DataFrame:
    """The completed runs matching `filters` whose protocol has rounds of answers, one row
    each: `id`, `protocol`, `label`, `simulated`, `group` (the label, suffixed when simulated
    runs are shown beside real ones), `expected`, `correct` (as stored), `rounds` (answers
    by round) and, with `with_config`, the stored `config`. Runs whose rounds cannot be read
    are left out. `experiment_id` keeps only that experiment's runs."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    columns = ["id", "protocol", "label", "simulated", "group", "expected", "correct",
               "rounds", *(["config"] if with_config else [])]
    args = (filters or RunFilters()).store_args()
    if args.get("status", "completed") != "completed":
        return pd.DataFrame(columns=columns)
    args["status"] = "completed"
    if experiment_id:
        args["experiment_id"] = experiment_id
    if kind != "both":
        args["simulated"] = kind == "simulated"
    runs = store.run_values(["id", "protocol", "label", "simulated", "correct"], **args)
    runs = runs[runs["protocol"].isin(rounds_protocols())]
    if runs.empty:
        return pd.DataFrame(columns=columns)
    stored = store.run_results(list(runs["id"]), with_config=with_config).set_index("id")
    out = []
    for run_id, protocol, given, simulated, correct in runs.itertuples(index=False, name=None):
        if run_id not in stored.index:
            continue
        kept = stored.loc[run_id]
        rounds = stored_rounds({"protocol": protocol, "result": kept["result"]})
        if not rounds:
            continue
        label = given if isinstance(given, str) and given else NO_LABEL
        simulated = bool(simulated)
        expected = kept["expected"] if isinstance(kept["expected"], str) else None
        out.append({"id": run_id, "protocol": protocol, "label": label,
                    "simulated": simulated,
                    "group": label + (SIMULATED_SUFFIX if simulated and kind == "both" else ""),
                    "expected": expected,
                    "correct": None if correct is None or correct != correct
                    else bool(correct), "rounds": rounds,
                    **({"config": kept["config"]} if with_config else {})})
    return pd.DataFrame(out, columns=columns)


def stored_runs(store: Store, runs: pd.DataFrame) -> list[StoredRun]:
    """`round_runs`' rows with the tokens and dollars of each of their rounds."""
    if runs.empty:
        return []
    spend = store.round_spend(list(runs["id"]))
    tokens: dict[str, dict[int, int]] = {}
    cost: dict[str, dict[int, float | None]] = {}
    totals: dict[str, int] = {}
    for run_id, number, used, unpriced, spent in zip(
            spend["run_id"], spend["round"], spend["tokens"], spend["unpriced"], spend["cost"]):
        totals[run_id] = totals.get(run_id, 0) + int(used)
        if number > 0:
            tokens.setdefault(run_id, {})[int(number)] = int(used)
            cost.setdefault(run_id, {})[int(number)] = None if unpriced else float(spent)
    return [StoredRun(run_id=str(row["id"]), rounds=row["rounds"], expected=row["expected"],
                      correct=row["correct"], tokens=tokens.get(str(row["id"]), {}),
                      cost=cost.get(str(row["id"]), {}),
                      total_tokens=totals.get(str(row["id"]), 0))
            for row in runs.to_dict("records")]


def _percent(rate: float | None, low: float | None, high: float | None, n: int,
             change: bool = False) -> str:
    """A share with its interval and n, "74% [60–85%] n=34"; a `change` signed, "+5% [-2%
    to +11%] n=34"."""
    if rate is None or low is None or high is None:
        return "– n=0"
    shown = "+.0%" if change else ".0%"
    return f"{rate:{shown}} [{low:{shown}}{' to ' if change else '–'}{high:{shown}}] n={n}"


def dollars_text(o: Outcome) -> str:
    """Dollars saved as shown: "unknown" when a saved round had an unpriced turn."""
    if o.dollars_saved is None:
        return f"unknown ({o.unpriced} run(s) unpriced)"
    return f"${o.dollars_saved:,.4f}"


def outcome_row(group: str, o: Outcome) -> dict[str, Any]:
    """One rule over one group as a table row: the shown texts and the plain numbers."""
    share = o.saved_share
    return {"group": group, "rule": o.rule.label, "kind": o.rule.kind,
            "threshold": o.rule.threshold, "runs": o.runs, "stopped early": o.stopped,
            "scored": o.scored,
            "accuracy as run": _percent(o.accuracy_as_run, o.as_run_low, o.as_run_high,
                                        o.scored),
            "accuracy with rule": _percent(o.accuracy_with_rule, o.with_rule_low,
                                           o.with_rule_high, o.scored),
            "accuracy lost": _percent(o.lost, o.lost_low, o.lost_high, o.scored, change=True),
            "broken": o.broken, "fixed": o.fixed,
            "tokens saved": f"{o.tokens_saved:,} of {o.tokens:,}",
            "tokens saved %": f"{share:.0%}" if share is not None else "–",
            "dollars saved": dollars_text(o),
            "rate": o.accuracy_with_rule, "low": o.with_rule_low, "high": o.with_rule_high,
            "lost": o.lost, "lost low": o.lost_low, "lost high": o.lost_high,
            "as run": o.accuracy_as_run, "as run low": o.as_run_low,
            "as run high": o.as_run_high, "saved": share}


def what_if(runs: Mapping[str, Sequence[StoredRun]],
            chosen: Sequence[Rule] | None = None) -> pd.DataFrame:
    """Every rule over every group of `runs` (group -> its runs), one row each (`COLUMNS`)."""
    rows = [outcome_row(group, o) for group, members in runs.items() if members
            for o in replay(members, chosen)]
    return pd.DataFrame(rows, columns=COLUMNS)


def grouped(runs: pd.DataFrame, stored: Sequence[StoredRun]) -> dict[str, list[StoredRun]]:
    """`stored` by group: "(all labels)" of each kind first (with " (simulated)" for the
    simulated ones when both kinds are present), then each label's."""
    by_id = dict(zip(runs["id"], runs["group"], strict=True))
    simulated = dict(zip(runs["id"], runs["simulated"], strict=True))
    kinds = set(simulated.values())
    out: dict[str, list[StoredRun]] = {}
    for flag in sorted(kinds):
        everyone = ALL + (SIMULATED_SUFFIX if flag and len(kinds) > 1 else "")
        out[everyone] = [run for run in stored if simulated[run.run_id] == flag]
    labels = sorted(set(by_id.values()))
    if len(labels) > 1 or len(kinds) > 1:
        for label in labels:
            out[label] = [run for run in stored if by_id[run.run_id] == label]
    return out


def what_if_from_store(store: Store, filters: RunFilters | None = None, kind: str = "real",
                       chosen: Sequence[Rule] | None = None,
                       experiment_id: str | None = None) -> pd.DataFrame:
    """`what_if` over the stored runs matching `filters` (see the module's docstring), of
    one experiment with `experiment_id`."""
    runs = round_runs(store, filters, kind, experiment_id=experiment_id)
    return what_if(grouped(runs, stored_runs(store, runs)), chosen)


def chart(table: pd.DataFrame, group: str, title: str = "") -> dict[str, Any]:
    """A Vega-Lite chart of one group's rows of `what_if`: each rule a point at the share of
    tokens it saves (x) and the accuracy with it (y, with its 95% Wilson interval), labelled;
    a dashed line at the accuracy as run. Labels are drawn as text."""
    rows = table[table["group"] == group]
    values = [{"rule": short_label(r["kind"], r["threshold"]), "name": r["rule"],
               "saved": _number(r["saved"]), "accuracy": _number(r["rate"]),
               "low": _number(r["low"]), "high": _number(r["high"]),
               "lost": r["accuracy lost"], "n": int(r["scored"]),
               "tokens": r["tokens saved"], "dollars": r["dollars saved"],
               "stopped": int(r["stopped early"]), "runs": int(r["runs"]), "family": r["kind"]}
              for r in rows.to_dict("records")]
    scored = _merged([v for v in values if v["accuracy"] is not None])
    as_run = _number(rows["as run"].iloc[0]) if not rows.empty else None
    x = {"field": "saved", "type": "quantitative", "title": "tokens saved (share of the runs')",
         "axis": {"format": ".0%"}, "scale": {"domain": [0, 1], "nice": False}}
    y = {"field": "accuracy", "type": "quantitative",
         "title": "accuracy with the rule (95% Wilson interval)",
         "scale": {"domain": [0, 1], "nice": False}, "axis": {"format": ".0%"}}
    color = {"field": "family", "type": "nominal", "title": None,
             "scale": {"domain": ["agreement", "split", "uncaught"],
                       "range": ["#3558c9", "#c62828", "#2e7d32"]},
             "legend": {"orient": "bottom", "labelExpr": (
                 "datum.label == 'agreement' ? 'stop when agreement ≥ t' : "
                 "datum.label == 'split' ? 'debate only when round one splits' : "
                 "'stop when the leader cannot be caught'"), "labelLimit": 260}}
    tooltip = [{"field": "name", "type": "nominal", "title": "rule"},
               *interval_tooltip("accuracy"),
               {"field": "n", "type": "quantitative", "title": "n (scored runs)"},
               {"field": "lost", "type": "nominal", "title": "accuracy lost"},
               {"field": "stopped", "type": "quantitative", "title": "runs stopped early"},
               {"field": "tokens", "type": "nominal", "title": "tokens saved"},
               {"field": "dollars", "type": "nominal", "title": "dollars saved"}]
    layers = labelled_points(x, y, color, tooltip, "rule")
    if as_run is not None:
        layers.append({"data": {"values": [{"as_run": as_run}]},
                       "mark": {"type": "rule", "strokeDash": [5, 4], "color": "#555"},
                       "encoding": {"y": {"field": "as_run", "type": "quantitative"},
                                    "tooltip": [{"field": "as_run", "type": "quantitative",
                                                 "format": ".1%",
                                                 "title": "accuracy as run"}]}})
    return {**_base(title, 340), "data": {"values": scored}, "layer": layers}


def _merged(values: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The agreement thresholds that land on one point (same saving, same accuracy) drawn
    as one point labelled with their range ("≥ 0.75…1.00"), not as labels over each other."""
    out: list[dict[str, Any]] = []
    for value in values:
        last = out[-1] if out else None
        if last is not None and value["family"] == last["family"] == "agreement" and all(
                value[k] == last[k] for k in ("saved", "accuracy", "low", "high")):
            first = last["rule"].split("…")[0]
            last.update(rule=f"{first}…{value['rule'].removeprefix('≥ ')}",
                        name=f"{last['name'].split(' to ')[0]} to {value['rule']}")
        else:
            out.append(dict(value))
    return out


def short_label(family: str, threshold: Any) -> str:
    """A rule's point label: "≥ 0.67", "split", "uncaught"."""
    if family == "agreement":
        return f"≥ {float(threshold):.2f}"
    return str(family)
