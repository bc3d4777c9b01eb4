"""Ballots across runs: each seat's stance before and after, for the tallying protocols'
Insights sections (mind-change rates, stance flows against the vote, right and wrong before
and after). Plain pandas on stored runs: "before" is a panel's round-one tally, "after" its
final one.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

import pandas as pd

from engine.analysis.stances import normalize_stance
from engine.views.aggregate import counts_by, mean_by, numbers, rate_by
from engine.views.blocks import ABSTAINED, NO_LABEL, Chart

BALLOT_COLUMNS = ["id", "group", "seat", "before", "after", "changed", "kind", "first_winner",
                  "final_winner", "expected"]
NO_PERSONA = "(no persona)"


def persona_of(seat: Mapping[str, Any], known: Mapping[str, str] | None = None) -> str:
    """A stored seat's persona by name (DESIGN 2: per-persona reports group by persona, not
    by the seat's name): its `persona_name` when stored, the name of the persona whose
    prompt it is (`known`: prompt -> name), else the prompt's first 40 characters, else
    "(no persona)"."""
    named = str(seat.get("persona_name") or "").strip()
    if named:
        return named
    prompt = str(seat.get("persona") or "").strip()
    if not prompt:
        return NO_PERSONA
    if known and prompt in known:
        return known[prompt]
    line = " ".join(prompt.split())
    return line if len(line) <= 40 else line[:39] + "…"


def seat_personas(config: Any, known: Mapping[str, str] | None = None) -> dict[str, str]:
    """Seat name -> persona (`persona_of`) from a stored configuration of any shape (what
    cannot be read maps nobody)."""
    seats = config.get("seats") if isinstance(config, Mapping) else None
    if not isinstance(seats, Mapping):
        return {}
    out: dict[str, str] = {}
    for slot, entries in seats.items():
        for entry in entries if isinstance(entries, list) else [entries]:
            if isinstance(entry, Mapping):
                out.setdefault(str(entry.get("name") or slot), persona_of(entry, known))
    return out


def with_personas(ballots: pd.DataFrame, runs: pd.DataFrame,
                  known: Mapping[str, str] | None = None) -> pd.DataFrame:
    """`ballots` with each seat's `persona` read off its run's stored configuration (the
    `config` column of `runs`; a run without one names no persona: "(no persona)")."""
    if "config" not in runs or ballots.empty:
        return ballots.assign(persona=NO_PERSONA)
    maps = {run_id: seat_personas(config, known)
            for run_id, config in zip(runs["id"], runs["config"], strict=True)}
    return ballots.assign(persona=[maps.get(run_id, {}).get(seat, NO_PERSONA)
                                   for run_id, seat in zip(ballots["id"], ballots["seat"],
                                                           strict=True)])


def ballots_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per seat per run, from runs with their stored `result`: the ballots of a
    panel's round-one tally (`first_round`) and of its final one (`tally`), whether the
    stance changed (the result's measured `mind_changes`), the change kind where an expected
    answer gave one (`change_kinds`), and both winners."""
    rows = []
    if frame.empty or "result" not in frame:
        return pd.DataFrame(columns=BALLOT_COLUMNS)
    labels = frame["label"].fillna(NO_LABEL).replace("", NO_LABEL)
    for run_id, label, expected, result in zip(frame["id"].tolist(), labels.tolist(),
                                               frame["expected"].tolist(),
                                               frame["result"].tolist()):
        if not isinstance(result, Mapping):
            continue  # no stored result (a run that did not complete)
        first, final = result.get("first_round"), result.get("tally")
        if not (is_tally(first) and is_tally(final)):
            continue
        before, after = first.get("ballots") or {}, final.get("ballots") or {}
        if not (isinstance(before, Mapping) and isinstance(after, Mapping)):
            continue  # a stored result of another shape (hand-edited): left out
        measured = result.get("mind_changes")
        stored_kinds = result.get("change_kinds")
        kinds: Mapping[str, Any] = stored_kinds if isinstance(stored_kinds, Mapping) else {}
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


STANCE_COLUMNS = ("stance", "before", "after")
AS_WRITTEN = " as written"


def canonical_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A result table with one spelling per answer: its stance columns (`stance`, `before`,
    `after`) as the tally counts them (`normalize_stance`: "0.10" and "$0.1" read "0.1"), so
    they match the tally beside them. Where a spelling changed, the agent's own follows in a
    "... as written" column. A table that already shows both ("counted as") is left alone."""
    if not rows or "counted as" in rows[0]:
        return rows
    columns = [c for c in STANCE_COLUMNS if c in rows[0]]
    changed = {c for c in columns for row in rows
               if isinstance(row.get(c), str) and row[c] != ABSTAINED
               and normalize_stance(row[c]) not in ("", row[c])}
    out = []
    for row in rows:
        new: dict[str, Any] = {}
        for name, value in row.items():
            if name in changed:
                spelled = isinstance(value, str) and value != ABSTAINED
                new[name] = (normalize_stance(value) or value) if spelled else value
                new[name + AS_WRITTEN] = value if spelled else ""
            else:
                new[name] = value
        out.append(new)
    return out


def is_tally(value: Any) -> TypeGuard[Mapping[str, Any]]:
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
    """Sankey links for one panel: stance before -> stance after, the seats on each band.

    Each node names the debaters who held its stance ("0.05 · cautious, literal"), so who
    moved where reads without hovering."""
    if flows is None or flows.empty:
        return pd.DataFrame(columns=["source", "target", "value", "label"])
    return _links(_named(flows["before"], flows["seat"]), _named(flows["after"], flows["seat"]),
                  flows["seat"])


def _named(stances: pd.Series, seats: pd.Series) -> pd.Series:
    """Each stance as `stance · the seats holding it` (seats in their order)."""
    holders: dict[str, list[str]] = {}
    for stance, seat in zip(stances.astype(str), seats.astype(str)):
        holders.setdefault(stance, []).append(seat)
    return pd.Series([f"{stance} · {', '.join(holders[stance])}"
                      for stance in stances.astype(str)])


def plurality_flow_links(ballots: pd.DataFrame) -> pd.DataFrame:
    """Across panels: each debater's first ballot against the round-one plurality, and its
    final ballot against the final answer (abstentions apart)."""
    if ballots.empty:
        return pd.DataFrame(columns=["source", "target", "value", "label"])
    before = [ABSTAINED if pd.isna(b) else "with the round-one plurality" if b == w
              else "against the round-one plurality"
              for b, w in zip(ballots["before"], ballots["first_winner"])]
    after = [ABSTAINED if pd.isna(a) else "with the final answer" if a == w
             else "against the final answer"
             for a, w in zip(ballots["after"], ballots["final_winner"])]
    return _links(pd.Series(before), pd.Series(after))


def correctness_flow_links(ballots: pd.DataFrame) -> pd.DataFrame:
    """Across panels with an expected answer: right / wrong / abstained before -> after."""
    known = ballots[ballots["expected"].notna()] if not ballots.empty else ballots
    if known.empty:
        return pd.DataFrame(columns=["source", "target", "value", "label"])
    expected = [normalize_stance(e) for e in known["expected"]]

    def state(values: pd.Series, suffix: str) -> pd.Series:
        return pd.Series([f"{ABSTAINED}{suffix}" if pd.isna(v) else
                          f"right{suffix}" if normalize_stance(v) == e else f"wrong{suffix}"
                          for v, e in zip(values, expected)])
    return _links(state(known["before"], " first"), state(known["after"], " finally"))


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
        claimed=numbers(panels, "m_claimed_changes"))
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


def tally_charts(runs: pd.DataFrame, what: str) -> list[Chart]:
    """Winner share, tie rate and confidence levels per label, for any tallying protocol's
    completed runs (stored signals `ratio`, `tied`, `confidence_level`)."""
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
