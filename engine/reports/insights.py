"""The Insights page's numbers: aggregations across stored runs, grouped by configuration label.

Plain pandas on the store's DataFrames. Insights read each run's `metrics` (the protocol's
`outcome()`), never the full results, except the panels' ballots for the stance flows and the
per-persona mind changes. Every filter goes to `Store.runs` as a bound parameter. Nothing here
draws (that is `charts`) or imports streamlit.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from engine.reports.runs import (ABSTAINED, NO_LABEL, Filters, is_simulated, protocol_title,
                      protocol_titles)


# --------------------------------------------------------------------------- across runs
@dataclass
class Chart:
    """One figure to draw: `kind` names a builder in `engine.reports.charts`, `spec` its options."""

    kind: str
    data: pd.DataFrame
    title: str
    caption: str
    spec: dict[str, Any] = field(default_factory=dict)


@dataclass
class Section:
    """A part of the Insights page; `note` stands in for the charts when there are none."""

    key: str
    title: str
    charts: list[Chart] = field(default_factory=list)
    metrics: list[tuple[str, str]] = field(default_factory=list)
    note: str = ""


RUN_COLUMNS = ["id", "protocol", "label", "status", "created_at", "simulated", "correct",
               "calls", "degraded", "tokens_in", "tokens_out", "latency", "duration"]


def flatten(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per run: the run's columns, `group` (its label), `tokens`, and every metric
    of its `metrics` as a column prefixed `m_` (missing ones are NaN)."""
    if frame.empty:
        return pd.DataFrame(columns=RUN_COLUMNS + ["group", "tokens"])
    out = frame[RUN_COLUMNS].copy()
    out["label"] = out["label"].fillna(NO_LABEL).replace("", NO_LABEL)
    out["group"] = out["label"]
    out["tokens"] = out["tokens_in"] + out["tokens_out"]
    out["simulated"] = [is_simulated(s, m) for s, m in zip(frame["simulated"].tolist(),
                                                          frame["models"].tolist())]
    metrics = pd.DataFrame.from_records(list(frame["metrics"]), index=frame.index)
    metrics.columns = [f"m_{c}" for c in metrics.columns]
    return pd.concat([out, metrics], axis=1)


def load_runs(store: Any, filters: Filters) -> pd.DataFrame:
    """The runs matching `filters`, flattened for the aggregations (metrics, not results)."""
    return flatten(store.runs(**filters.store_args(), with_config=False))


def completed(runs: pd.DataFrame, *protocols: str) -> pd.DataFrame:
    """The completed runs of the given protocols."""
    if runs.empty:
        return runs
    return runs[runs["protocol"].isin(protocols) & (runs["status"] == "completed")]


def _flag(values: pd.Series) -> pd.Series:
    """Booleans (or 0/1) as floats, anything else (missing) as NaN."""
    return values.map(lambda v: float(v) if isinstance(v, (bool, int, float)) and v == v
                      else float("nan")).astype(float)


def rate_by(runs: pd.DataFrame, column: str, by: str | list[str] = "group",
            name: str = "rate") -> pd.DataFrame:
    """Per group (one column or several): `n` runs with a value in `column` and the share of
    them that are true."""
    keys = [by] if isinstance(by, str) else list(by)
    if runs.empty or column not in runs:
        return pd.DataFrame(columns=[*keys, "n", name])
    values = runs[keys].assign(_v=_flag(runs[column])).dropna(subset=["_v"])
    out = values.groupby(keys, sort=True)["_v"].agg(["size", "mean"]).reset_index()
    return out.rename(columns={"size": "n", "mean": name})


def counts_by(runs: pd.DataFrame, column: str, by: str = "group") -> pd.DataFrame:
    """Per group and value of `column`: how many runs (missing values are left out)."""
    if runs.empty or column not in runs:
        return pd.DataFrame(columns=[by, "value", "count"])
    present = runs[[by, column]].dropna()
    out = present.groupby([by, column], sort=True).size().reset_index(name="count")
    return out.rename(columns={column: "value"}).astype({"value": str})


def mean_by(runs: pd.DataFrame, column: str, by: str = "group",
            name: str = "mean") -> pd.DataFrame:
    """Per group: `n` runs with a number in `column` and its mean."""
    if runs.empty or column not in runs:
        return pd.DataFrame(columns=[by, "n", name])
    values = runs[[by]].assign(_v=pd.to_numeric(runs[column], errors="coerce")).dropna()
    out = values.groupby(by, sort=True)["_v"].agg(["size", "mean"]).reset_index()
    return out.rename(columns={"size": "n", "mean": name})


def spread_by(runs: pd.DataFrame, column: str, by: str | list[str] = "group"
              ) -> pd.DataFrame:
    """Per group (one column or several): `n`, `min`, `q1`, `median`, `q3`, `max` and `mean`
    of a number, for box plots."""
    keys = [by] if isinstance(by, str) else list(by)
    names = [*keys, "n", "min", "q1", "median", "q3", "max", "mean"]
    if runs.empty or column not in runs:
        return pd.DataFrame(columns=names)
    values = runs[keys].assign(_v=pd.to_numeric(runs[column], errors="coerce")).dropna()
    grouped = values.groupby(keys, sort=True)["_v"]
    out = grouped.agg(n="size", min="min", median="median", max="max", mean="mean")
    out["q1"] = grouped.quantile(0.25)
    out["q3"] = grouped.quantile(0.75)
    return out.reset_index()[names]


def side_by_side(runs: pd.DataFrame, column: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """`rate_by` per label with one (rate, n) column pair per protocol, for a grouped bar
    chart that puts protocols side by side within each label (debate against vote); returns
    the frame and the chart options naming its columns."""
    rates = rate_by(runs.assign(title=protocol_titles(runs["protocol"])), column,
                    by=["group", "title"]) if not runs.empty else pd.DataFrame()
    if rates.empty:
        return pd.DataFrame(columns=["group"]), {"y": [], "n": [], "names": []}
    titles = sorted(rates["title"].unique())
    wide = rates.pivot(index="group", columns="title", values=["rate", "n"])
    frame = pd.DataFrame({"group": wide.index})
    for title in titles:
        frame[f"{title} rate"] = wide[("rate", title)].to_numpy()
        frame[f"{title} n"] = wide[("n", title)].fillna(0).astype(int).to_numpy()
    return frame, {"y": [f"{t} rate" for t in titles], "n": [f"{t} n" for t in titles],
                   "names": titles}


# --------------------------------------------------------------------------- panels' ballots
BALLOT_COLUMNS = ["id", "group", "seat", "before", "after", "changed", "kind", "first_winner",
                  "final_winner", "expected"]


def load_ballots(store: Any, filters: Filters) -> pd.DataFrame:
    """Each debater's round-one and final ballot in the completed panel runs matching
    `filters` (the only Insights query that reads results, and only the panels')."""
    args = filters.store_args()
    if args.get("protocol", "panel") != "panel" or args.get("status", "completed") != \
            "completed":
        return pd.DataFrame(columns=BALLOT_COLUMNS)
    args.update(protocol="panel", status="completed")
    return ballots_frame(store.runs(**args, with_result=True))


def ballots_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per debater per panel run, from runs with their `result`: the round-one
    (`first_round`) and final (`tally`) ballots, whether the stance changed (the measured
    `mind_changes`), the change kind where an expected answer gave one, and both winners."""
    rows = []
    if frame.empty or "result" not in frame:
        return pd.DataFrame(columns=BALLOT_COLUMNS)
    labels = frame["label"].fillna(NO_LABEL).replace("", NO_LABEL)
    for run_id, label, expected, result in zip(frame["id"].tolist(), labels.tolist(),
                                               frame["expected"].tolist(),
                                               frame["result"].tolist()):
        first, final = (result or {}).get("first_round"), (result or {}).get("tally")
        if not (is_tally(first) and is_tally(final)):
            continue
        before, after = first.get("ballots") or {}, final.get("ballots") or {}
        if not (isinstance(before, Mapping) and isinstance(after, Mapping)):
            continue  # a stored result of another shape (hand-edited): left out
        measured = result.get("mind_changes")
        kinds = result.get("change_kinds") if isinstance(result.get("change_kinds"),
                                                         Mapping) else {}
        for seat in dict.fromkeys([*before, *after]):
            changed = (seat in measured if isinstance(measured, (list, tuple))
                       else before.get(seat) != after.get(seat))
            rows.append((run_id, label, seat, _ballot(before.get(seat)),
                         _ballot(after.get(seat)), bool(changed),
                         _ballot(kinds.get(seat)), _ballot(first.get("winner")),
                         _ballot(final.get("winner")),
                         expected if isinstance(expected, str) and expected.strip() else None))
    return pd.DataFrame(rows, columns=BALLOT_COLUMNS)


def _ballot(value: Any) -> str | None:
    """A stored ballot: a stance, or None (an abstention, or a value of another type)."""
    return value if isinstance(value, str) else None


def is_tally(value: Any) -> bool:
    """A stored tally: a mapping with `counts`."""
    return isinstance(value, Mapping) and isinstance(value.get("counts"), Mapping)


def mind_change_rates(ballots: pd.DataFrame, by: str) -> pd.DataFrame:
    """Per `by` (`seat` or `group`): `n` debater-runs, `changes` and `rate` = changes / n."""
    if ballots.empty:
        return pd.DataFrame(columns=[by, "n", "changes", "rate"])
    out = ballots.groupby(by, sort=True)["changed"].agg(["size", "sum"]).reset_index()
    out = out.rename(columns={"size": "n", "sum": "changes"})
    out["changes"] = out["changes"].astype(int)
    out["rate"] = out["changes"] / out["n"]
    return out


def _absent(value: Any) -> bool:
    """An abstention as a frame holds it: None, or the NaN pandas may turn it into."""
    return value is None or (isinstance(value, float) and value != value)


def _links(source: pd.Series, target: pd.Series, label: pd.Series | None = None
           ) -> pd.DataFrame:
    data = pd.DataFrame({"source": source.values, "target": target.values})
    if label is None:
        out = data.groupby(["source", "target"], sort=False).size().reset_index(name="value")
        out["label"] = out["value"].map(lambda v: f"{v} debater-run(s)")
        return out
    data["who"] = label.values
    out = data.groupby(["source", "target"], sort=False).agg(
        value=("who", "size"), label=("who", lambda w: ", ".join(map(str, w)))).reset_index()
    return out


def flow_links(flows: pd.DataFrame) -> pd.DataFrame:
    """Sankey links for one panel: stance before -> stance after, the seats on each band."""
    if flows is None or flows.empty:
        return pd.DataFrame(columns=["source", "target", "value", "label"])
    return _links(flows["before"], flows["after"], flows["seat"])


def vote_flow_links(ballots: pd.DataFrame) -> pd.DataFrame:
    """Across panels: each debater's first ballot against the round-one plurality, and its
    final ballot against the final answer (abstentions apart)."""
    if ballots.empty:
        return pd.DataFrame(columns=["source", "target", "value", "label"])
    before = [ABSTAINED if _absent(b) else "with the round-one plurality" if b == w
              else "against the round-one plurality"
              for b, w in zip(ballots["before"], ballots["first_winner"])]
    after = [ABSTAINED if _absent(a) else "with the final answer" if a == w
             else "against the final answer"
             for a, w in zip(ballots["after"], ballots["final_winner"])]
    return _links(pd.Series(before), pd.Series(after))


def correctness_flow_links(ballots: pd.DataFrame) -> pd.DataFrame:
    """Across panels with an expected answer: right / wrong / abstained before -> after."""
    known = ballots[ballots["expected"].notna()] if not ballots.empty else ballots
    if known.empty:
        return pd.DataFrame(columns=["source", "target", "value", "label"])
    normalize = functools.lru_cache(maxsize=4096)(_normalizer())  # few distinct stances
    expected = [normalize(e) for e in known["expected"]]

    def state(values: pd.Series, suffix: str) -> pd.Series:
        return pd.Series([f"{ABSTAINED}{suffix}" if _absent(v) else
                          f"right{suffix}" if normalize(v) == e else f"wrong{suffix}"
                          for v, e in zip(values, expected)])
    return _links(state(known["before"], " first"), state(known["after"], " finally"))


def _normalizer():
    try:
        from engine.analysis.stances import normalize_stance
    except ImportError:  # the panel's stance rules are not installed: compare plainly
        return lambda text: " ".join(str(text).lower().split())
    return normalize_stance


def mind_change_by_label(panels: pd.DataFrame) -> pd.DataFrame:
    """Per label, from the panels' metrics: `n` debater-runs, the measured mind-change `rate`
    (sum of `mind_changes` / sum of `debaters`) and the `claimed` rate (the debaters' own
    `changed_mind` claims over the same debaters)."""
    names = ["group", "n", "changes", "rate", "claimed"]
    needed = {"m_mind_changes", "m_debaters"}
    if panels.empty or not needed <= set(panels.columns):
        return pd.DataFrame(columns=names)
    data = panels[["group"]].assign(
        debaters=pd.to_numeric(panels["m_debaters"], errors="coerce"),
        changes=pd.to_numeric(panels["m_mind_changes"], errors="coerce"),
        claimed=pd.to_numeric(panels.get("m_claimed_changes"), errors="coerce")
        if "m_claimed_changes" in panels else float("nan"))
    data = data.dropna(subset=["debaters", "changes"])
    data = data[data["debaters"] > 0]
    if data.empty:
        return pd.DataFrame(columns=names)
    out = data.groupby("group", sort=True).agg(n=("debaters", "sum"),
                                               changes=("changes", "sum"),
                                               claimed=("claimed", "sum")).reset_index()
    out["rate"] = out["changes"] / out["n"]
    out["claimed"] = out["claimed"] / out["n"]
    out[["n", "changes"]] = out[["n", "changes"]].astype(int)
    return out[names]


# --------------------------------------------------------------------------- the report
def _none(protocol: str) -> str:
    return f"No completed {protocol_title(protocol).lower()} runs match these filters."


def overview_section(runs: pd.DataFrame) -> Section:
    simulated = int(runs["simulated"].fillna(False).astype(bool).sum())
    done = int((runs["status"] == "completed").sum())
    by_status = runs.assign(group=protocol_titles(runs["protocol"]))
    return Section("overview", "Overview", metrics=[
        ("Runs", f"{len(runs):,}"), ("Completed", f"{done:,}"),
        ("Failed or interrupted", f"{int(runs['status'].isin(['failed', 'interrupted']).sum()):,}"),
        ("Simulated", f"{simulated:,}")], charts=[Chart(
            "stacked_counts", counts_by(by_status, "status"), "Runs per protocol",
            "How many runs each protocol has, split by how they ended.",
            {"order": ["completed", "running", "interrupted", "failed"]})])


def _tally_charts(runs: pd.DataFrame, what: str) -> list[Chart]:
    shares = mean_by(runs, "m_ratio", name="winner_share").merge(
        rate_by(runs, "m_tied", name="tie_rate")[["group", "tie_rate"]], on="group", how="left")
    return [
        Chart("rate_bar", shares, f"{what}: winner share and tie rate",
              "Winner share: the winner's votes over all ballots, averaged per label; tie rate: "
              "the share of runs whose top stances tied.",
              {"y": ["winner_share", "tie_rate"], "names": ["winner share", "tie rate"]}),
        Chart("stacked_counts", counts_by(runs, "m_confidence_level"),
              f"{what}: confidence levels",
              "Consensus confidence per label: high = unanimous, medium = a strict majority, "
              "low = split or tied.", {"order": ["high", "medium", "low"]})]


def panel_section(runs: pd.DataFrame, ballots: pd.DataFrame) -> Section:
    panels = completed(runs, "panel")
    section = Section("panel", "Persona panel")
    if panels.empty:
        section.note = _none("panel")
        return section
    by_label = mind_change_by_label(panels)
    section.metrics = [("Panels", f"{len(panels):,}")]
    if not by_label.empty:
        section.metrics.append(("Mind-change rate",
                                f"{by_label['changes'].sum() / by_label['n'].sum():.0%}"))
        section.charts.append(Chart(
            "rate_bar", by_label, "Mind-change rate per label",
            "Share of debaters whose stance changed between proposal and rebuttal: measured "
            "from the stances, beside what the debaters claimed.",
            {"y": ["rate", "claimed"], "names": ["measured", "claimed"],
             "y_title": "debaters"}))
    ballots = ballots[ballots["id"].isin(panels["id"])] if not ballots.empty else ballots
    if not ballots.empty:
        section.charts += [
            Chart("rate_bar", mind_change_rates(ballots, "seat").rename(
                columns={"seat": "group"}), "Mind-change rate per persona",
                "Share of each persona's panels in which its measured stance changed after "
                "the critique.", {"y_title": "panels it changed in"}),
            Chart("sankey", vote_flow_links(ballots), "Stance flows against the vote",
                  "Each band is debaters: left, their first answer against the round-one "
                  "plurality; right, their final answer against the panel's answer.", {})]
        right_wrong = correctness_flow_links(ballots)
        if not right_wrong.empty:
            section.charts.append(Chart(
                "sankey", right_wrong, "Right and wrong, before and after the debate",
                "Panels with an expected answer: each debater's first and final answer, right "
                "or wrong.", {}))
    section.charts += _tally_charts(panels, "Panel")
    section.charts.append(Chart(
        "rate_bar", rate_by(panels, "m_changed_outcome"), "Debate changed the answer",
        "Share of panels whose final winner differs from the round-one vote's winner, per "
        "label.", {"y_title": "panels"}))
    return section


def vote_section(runs: pd.DataFrame) -> Section:
    votes = completed(runs, "vote")
    if votes.empty:
        return Section("vote", "Vote baseline", note=_none("vote"))
    return Section("vote", "Vote baseline", metrics=[("Votes", f"{len(votes):,}")],
                   charts=_tally_charts(votes, "Vote"))


def debate_section(runs: pd.DataFrame) -> Section:
    debates = completed(runs, "debate")
    if debates.empty:
        return Section("debate", "Debate", note=_none("debate"))
    confidence = debates[["group"]].assign(
        confidence=pd.to_numeric(debates.get("m_judge_confidence"), errors="coerce")).dropna()
    return Section("debate", "Debate", metrics=[
        ("Debates", f"{len(debates):,}"),
        ("Mean judge confidence", f"{confidence['confidence'].mean():.2f}"
         if not confidence.empty else "—")], charts=[
        Chart("histogram", confidence, "Judge confidence",
              "How confident the judge said it was (0 to 1), per label; its own reading, not "
              "a measure of agreement.",
              {"x": "confidence", "x_title": "judge confidence", "x_range": [0, 1]}),
        Chart("rate_bar", rate_by(debates, "m_high_confidence"), "High-confidence verdicts",
              "Share of debates whose judge stated a confidence of 0.7 or more, per label.",
              {"y_title": "debates"})])


def review_section(runs: pd.DataFrame) -> Section:
    reviews = completed(runs, "peer-review")
    if reviews.empty:
        return Section("peer-review", "Peer review", note=_none("peer-review"))
    approved = _flag(reviews.get("m_approved", pd.Series(index=reviews.index, dtype=float)))
    iterations = pd.to_numeric(reviews.get("m_iterations_used"), errors="coerce")
    outcome = [f"approved after {int(i)}" if a == 1 and i == i else "not approved"
               for a, i in zip(approved, iterations)]
    order = sorted({o for o in outcome if o != "not approved"},
                   key=lambda o: int(o.rsplit(" ", 1)[1])) + ["not approved"]
    return Section("peer-review", "Peer review", metrics=[
        ("Reviews", f"{len(reviews):,}"),
        ("Approved", f"{approved.mean():.0%}" if approved.notna().any() else "—")], charts=[
        Chart("rate_bar", rate_by(reviews, "m_approved"), "Approval rate",
              "Share of peer reviews the reviewer approved within the iteration limit, per "
              "label.", {"y_title": "reviews"}),
        Chart("stacked_counts", counts_by(reviews.assign(outcome=outcome), "outcome"),
              "Iterations to approval",
              "How many drafts each review took to be approved, or that it never was.",
              {"order": order})])


def roundtable_section(runs: pd.DataFrame) -> Section:
    tables = completed(runs, "roundtable")
    if tables.empty:
        return Section("roundtable", "Roundtable", note=_none("roundtable"))
    charts_ = [
        Chart("stacked_counts", counts_by(tables, "m_agreement_level"), "Agreement levels",
              "The lexical floor's agreement level per label (shared words, not verified "
              "agreement).", {"order": ["strong", "moderate", "weak", "none"]}),
        Chart("stacked_counts", counts_by(tables, "m_completion_state"), "Completion states",
              "qualified-draft: two or more agents gave a usable turn; blocked-escalated: "
              "fewer did, and the question needs a person.",
              {"order": ["qualified-draft", "blocked-escalated"]})]
    judged = tables[tables.get("m_judge_status", pd.Series(dtype=str)) == "applied"] \
        if "m_judge_status" in tables else tables.iloc[0:0]
    if not judged.empty:
        charts_.append(Chart("rate_bar", rate_by(judged, "m_diverged"),
                             "Judge diverged from the floor",
                             "Among roundtables with a judge, the share whose judge read a "
                             "different agreement level than the lexical floor.",
                             {"y_title": "roundtables"}))
    return Section("roundtable", "Roundtable", metrics=[("Roundtables", f"{len(tables):,}")],
                   charts=charts_)


def duel_section(runs: pd.DataFrame) -> Section:
    duels = completed(runs, "duel")
    if duels.empty:
        return Section("duel", "Duel", note=_none("duel"))
    return Section("duel", "Duel", metrics=[("Duels", f"{len(duels):,}")], charts=[
        Chart("rate_bar", rate_by(duels, "m_converged"), "Convergence rate",
              "Share of duels that ended early because a side agreed (converged), per label.",
              {"y_title": "duels"}),
        Chart("stacked_counts", counts_by(duels, "m_status"), "How duels ended",
              "finished: every turn was spoken; converged: a side agreed; failed: a call "
              "failed and both sides halted.", {"order": ["converged", "finished", "failed"]})])


def accuracy_section(runs: pd.DataFrame) -> Section:
    scored = runs[runs["correct"].notna()] if not runs.empty else runs
    if scored.empty:
        return Section("accuracy", "Accuracy", note="No runs with an expected answer match "
                       "these filters.")
    frame, spec = side_by_side(scored, "correct")
    return Section("accuracy", "Accuracy", metrics=[
        ("Scored runs", f"{len(scored):,}"),
        ("Correct", f"{_flag(scored['correct']).mean():.0%}")], charts=[
        Chart("rate_bar", frame, "Accuracy by label and protocol",
              "Share of runs whose final answer matched the expected answer, protocols side by "
              "side (persona panel against vote is the debate-or-vote comparison).",
              {**spec, "y_title": "correct"})])


def cost_section(runs: pd.DataFrame) -> Section:
    done = runs[runs["status"] == "completed"] if not runs.empty else runs
    if done.empty:
        return Section("cost", "Tokens and latency", note="No completed runs match these "
                       "filters.")
    grouped = done.assign(protocol_title=protocol_titles(done["protocol"]))
    keys = ["protocol_title", "group"]
    return Section("cost", "Tokens and latency", metrics=[
        ("Tokens per run", f"{done['tokens'].mean():,.0f}"),
        ("Seconds per run", f"{done['duration'].mean():.2f}")], charts=[
        Chart("box", spread_by(grouped, "tokens", keys), "Tokens per run",
              "Tokens in plus out per run, by protocol, one box per label: the box spans the "
              "middle half, the line is the median, the dashes the mean.",
              {"x": "protocol_title", "color": "group", "y_title": "tokens"}),
        Chart("box", spread_by(grouped, "duration", keys), "Seconds per run",
              "Wall-clock seconds per run, by protocol, one box per label (box: middle half; "
              "line: median; dashes: mean).",
              {"x": "protocol_title", "color": "group", "y_title": "seconds"})])


def report(runs: pd.DataFrame, ballots: pd.DataFrame | None = None) -> list[Section]:
    """The Insights page, section by section; a protocol without runs gets only a note."""
    if runs.empty:
        return []
    ballots = ballots if ballots is not None else pd.DataFrame(columns=BALLOT_COLUMNS)
    return [overview_section(runs), panel_section(runs, ballots), vote_section(runs),
            debate_section(runs), review_section(runs), roundtable_section(runs),
            duel_section(runs), accuracy_section(runs), cost_section(runs)]
