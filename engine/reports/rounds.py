"""Accuracy by round and the conformity measures, for experiment results and Insights.

Accuracy at round k counts the scored runs that have a round k, each scored with
`answers_match` (the one scoring rule) on that round's plurality (`round_answers`); a run
without rounds counts once, at its configuration's final round, from its `correct`. Round one's
plurality of a multi-agent run is the majority vote of independent answers, so each
configuration's round-1 accuracy is drawn as a dashed line: the bar debate has to clear
("Debate or Vote", arXiv 2508.17536). Published points (`references`) are drawn beside.

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

from engine.analysis.answers import answers_match
from engine.reports.aggregate import FEW, interval, rate_text
from engine.reports.references import Reference, references
from engine.text import html_text

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
LINE_COLORS = ("#3558c9", "#e65100", "#2e7d32", "#6a1b9a", "#00838f", "#c62828", "#5d4037",
               "#455a64")


def final_round(config: Mapping[str, Any]) -> int:
    """The round a configuration's final answer comes from: its protocol's rounds option (the
    configured value, else the option's default), or 1 for a protocol without rounds."""
    from engine.protocols import REGISTRY  # read when called: the registry imports reports
    spec = REGISTRY.get(str(config.get("protocol", "")))
    if spec is None or spec.rounds_option is None:
        return 1
    default = next((o.default for o in spec.options if o.name == spec.rounds_option), 1)
    value = (config.get("options") or {}).get(spec.rounds_option, default)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _flag(value: Any) -> bool | None:
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
    for group, correct, expected, answers in zip(runs[by], runs["correct"], runs["expected"],
                                                  runs["round_answers"], strict=True):
        right = _flag(correct)
        if right is None:
            continue
        rounds = out.setdefault(str(group), {})
        listed = list(answers) if isinstance(answers, (list, tuple)) else []
        if listed and isinstance(expected, str):
            scored = [(k, bool(answers_match(a, expected))) for k, a in enumerate(listed, 1)]
        else:  # no rounds, or no expected answer at hand to score them: the final one only
            scored = [(len(listed) or (last or {}).get(str(group), 1), right)]
        for number, ok in scored:
            cell = rounds.setdefault(number, [0, 0])
            cell[0] += ok
            cell[1] += 1
    return out


def _point(group: str, number: int, right: int, n: int, by: str) -> dict[str, Any]:
    low, high = interval(right, n)
    return {by: group, "round": number, "right": right, "n": n, "accuracy": right / n,
            "low": low, "high": high, "accuracy [95% CI] n": rate_text(right, n),
            "few": n < FEW}


def accuracy_by_round(frame: pd.DataFrame, configs: Sequence[Mapping[str, Any]]
                      ) -> pd.DataFrame:
    """An experiment's accuracy per configuration (in the spec's order) and round, over its
    counted, scored runs (`runs_frame`): `right`, `n`, `accuracy`, its 95% Wilson interval
    (`low`, `high`), the text "74% [57–85%] n=34" and `few` (n under `FEW`)."""
    if frame.empty:
        return pd.DataFrame(columns=ROUND_COLUMNS)
    done = frame[frame["counted"].astype(bool)]
    counts = round_counts(done, "label", {c["label"]: final_round(c) for c in configs})
    rows = [_point(c["label"], number, right, n, "configuration")
            for c in configs for number, (right, n) in sorted(counts.get(c["label"], {}).items())]
    return pd.DataFrame(rows, columns=ROUND_COLUMNS)


def round_table(points: pd.DataFrame) -> pd.DataFrame:
    """Accuracy by round as a terminal or a page prints it: one row per configuration, one
    column per round ("74% [57–85%] n=34", "" where it has no such round)."""
    if points.empty:
        return pd.DataFrame(columns=["configuration"])
    wide = points.pivot(index="configuration", columns="round", values="accuracy [95% CI] n")
    order = list(dict.fromkeys(points["configuration"]))
    wide = wide.reindex(order).fillna("")
    wide.columns = [f"round {k}" for k in wide.columns]
    return wide.reset_index()


def conformity_rates(runs: pd.DataFrame, by: str, groups: Iterable[str] | None = None,
                     name: str = "configuration") -> pd.DataFrame:
    """Per group (in `groups`' order, else sorted) and conformity measure, summed over the
    runs that carry it: `count` of `n` chances, `rate`, its 95% Wilson interval, the text
    "12% [5–25%] n=40" and `few`. A group none of whose runs carries the measure (a
    protocol without rounds) has no row."""
    present = [f for f in CONFORMITY_FIELDS if f in runs]
    if runs.empty or len(present) < len(CONFORMITY_FIELDS):
        return pd.DataFrame(columns=CONFORMITY_COLUMNS).rename(columns={"configuration": name})
    order = list(groups) if groups is not None else sorted(set(runs[by].astype(str)))
    rows = []
    for group in order:
        mine = runs[runs[by].astype(str) == group]
        for measure, count_column, chances_column in CONFORMITY:
            chances = _numbers(mine[chances_column])
            if chances.notna().sum() == 0:
                continue
            n = int(chances.sum())
            count = int(_numbers(mine[count_column])[chances.notna()].fillna(0).sum())
            low, high = interval(count, n)
            rows.append({name: group, "measure": measure, "count": count, "n": n,
                         "rate": count / n if n else float("nan"), "low": low, "high": high,
                         "rate [95% CI] n": rate_text(count, n), "few": n < FEW})
    return pd.DataFrame(rows, columns=[name, *CONFORMITY_COLUMNS[1:]])


def _numbers(values: pd.Series) -> pd.Series:
    """Stored counts or flags as floats (a flag as 0/1), missing ones as NaN."""
    return values.map(lambda v: float("nan") if _flag(v) is None else float(v)).astype(float)


def conformity_by_config(frame: pd.DataFrame, configs: Sequence[Mapping[str, Any]]
                         ) -> pd.DataFrame:
    """The conformity rates of an experiment's configurations over their counted runs."""
    done = frame[frame["counted"].astype(bool)] if not frame.empty else frame
    return conformity_rates(done, "label", [c["label"] for c in configs])


# --------------------------------------------------------------------------- the figure
def accuracy_by_round_figure(points: pd.DataFrame, refs: Sequence[Reference] = (),
                             title: str = "") -> Any:
    """Accuracy by round: one line per configuration with its 95% Wilson interval as error
    bars and n in the hover, each configuration's round-1 accuracy (the majority vote of its
    agents' independent answers) as a dashed line of its colour (no hover of its own: round
    1's point says the same, and a click there reaches that point), and the published points
    as labelled markers with their citation in the hover. Labels are text (HTML-escaped)."""
    import plotly.graph_objects as go
    traces: list[dict[str, Any]] = []
    rounds = [int(r) for r in points["round"]] if not points.empty else []
    last = max([*rounds, *(r.round for r in refs), 2])
    order = list(dict.fromkeys(points["configuration"])) if not points.empty else []
    for i, label in enumerate(order):
        mine = points[points["configuration"] == label].sort_values("round")
        color = LINE_COLORS[i % len(LINE_COLORS)]
        name = html_text(label)
        shift = (i - (len(order) - 1) / 2) * 0.03  # side by side, so error bars never hide
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": name,
            "x": [r + shift for r in mine["round"]], "y": mine["accuracy"].tolist(),
            "line": {"color": color}, "marker": {"color": color, "size": 8},
            "meta": {LINE: i},  # which configuration a clicked point is (`picked_line`)
            "error_y": {"type": "data", "symmetric": False, "color": color,
                        "array": (mine["high"] - mine["accuracy"]).tolist(),
                        "arrayminus": (mine["accuracy"] - mine["low"]).tolist()},
            "customdata": [[r, n, lo, hi, k] for r, n, lo, hi, k in zip(
                mine["right"], mine["n"], mine["low"], mine["high"], mine["round"],
                strict=True)],
            "hovertemplate": f"{name}<br>round %{{customdata[4]}}: %{{y:.0%}} "
                             "(%{customdata[0]}/%{customdata[1]}, n=%{customdata[1]}; 95% CI "
                             "%{customdata[2]:.0%}–%{customdata[3]:.0%})<extra></extra>"})
        first = mine[mine["round"] == 1]
        if not first.empty:
            value = float(first["accuracy"].iloc[0])
            traces.append({
                "type": "scatter", "mode": "lines", "name": f"{name}: round-1 majority vote",
                "x": [1, last], "y": [value, value],
                "line": {"color": color, "dash": "dash", "width": 1.5},
                "meta": {LINE: i},  # the same configuration's runs
                # round 1's point says the same; left out of hover and clicks, a click where
                # the two meet reaches the point (and its runs) instead of the dashed line
                # (plotly.js ignores "skip" beside a hovertemplate)
                "hoverinfo": "skip"})
    symbols = {"single agent": "diamond-open", "majority vote (3 agents)": "square-open"}
    places = {"single agent": "bottom left", "majority vote (3 agents)": "top left"}
    for ref in refs:
        traces.append({
            "type": "scatter", "mode": "markers+text", "name": html_text(ref.label),
            "x": [ref.round], "y": [ref.accuracy], "text": [html_text(ref.short)],
            "textposition": places.get(ref.setting, "middle left"), "cliponaxis": False,
            "marker": {"color": "#212121", "size": 12,
                       "symbol": symbols.get(ref.setting, "star")},
            "hovertemplate": html_text(f"{ref.label}, {ref.model}; {ref.citation}")
            + "<extra></extra>"})
    layout = {"template": "plotly_white", "height": 420,
              "margin": {"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
              "legend": {"orientation": "h", "y": -0.25},
              "xaxis": {"title": "round", "dtick": 1, "range": [0.5, last + 0.4]},
              "yaxis": {"title": "accuracy (95% Wilson interval)", "range": [0, 1.05],
                        "tickformat": ".0%"}}
    if title:
        layout["title"] = {"text": html_text(title)}
    return go.Figure(data=traces, layout=layout)


LINE = "line"  # a line trace's meta key: the index of its configuration in the points


def picked_line(figure: Any, points: pd.DataFrame, event: Any) -> str | None:
    """The configuration (or group) whose point was clicked on `figure`, an
    `accuracy_by_round_figure` of `points`, from a plotly selection `event`
    (`st.plotly_chart`'s): a point of its line (or of its dashed round-1 line, which stands
    for the same runs; the page never sees one, as it takes no hover); None for no click, or
    a click on a published marker (no runs of this experiment behind it)."""
    try:
        chosen = event["selection"]["points"]
    except (KeyError, TypeError):
        return None
    order = list(dict.fromkeys(points["configuration"])) if not points.empty else []
    for point in chosen or []:
        curve = point.get("curve_number")
        if not isinstance(curve, int) or not 0 <= curve < len(figure.data):
            continue
        meta = figure.data[curve].meta
        index = meta.get(LINE) if isinstance(meta, dict) else None
        if isinstance(index, int) and 0 <= index < len(order):
            return str(order[index])
    return None


def rounds_text(frame: pd.DataFrame, spec: Mapping[str, Any]) -> str:
    """Accuracy by round and the conformity rates as a terminal prints them, with the
    published points for the experiment's question set; "" when there is nothing to show."""
    configs = spec["configs"]
    points = accuracy_by_round(frame, configs)
    conforming = conformity_by_config(frame, configs)
    lines = []
    if not points.empty:
        lines += ["accuracy by round (each round's plurality; round 1 = the majority vote of "
                  "independent answers):", round_table(points).to_string(index=False)]
        published = references(spec.get("source"))
        if published:
            lines.append(f"published ({published[0].citation}, {published[0].model}): "
                         + "; ".join(f"{r.setting} {r.accuracy * 100:.1f}% (round {r.round})"
                                     for r in published))
    if not conforming.empty:
        wide = conforming.pivot(index="configuration", columns="measure",
                                values="rate [95% CI] n")
        wide = wide.reindex(list(dict.fromkeys(conforming["configuration"])))
        wide = wide[[m for m, _, _ in CONFORMITY if m in wide.columns]].fillna("")
        lines += ["conformity between rounds (count over chances):",
                  wide.reset_index().to_string(index=False)]
    return "\n".join(lines)


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
    """Per-group, per-round [count, n] as `charts.rate_bar` takes them: one row per group,
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
    points = pd.DataFrame([_point(group, number, right, n, "configuration")
                           for group, rounds in by_round.items()
                           for number, (right, n) in sorted(rounds.items())],
                          columns=ROUND_COLUMNS)
    return {"accuracy": wide_rates(by_round), "points": points,
            "changes": wide_rates(changes), "conformity": table,
            "conformity_wide": (wide, {"y": measures, "n": [f"{m} n" for m in measures],
                                       "names": measures}),
            "all": conformity_rates(plain.assign(group="all runs"), "group", name="group")}
