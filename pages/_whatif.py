"""The Insights page's "What if" view: stop rules replayed on the matching stored
runs with no model call (`engine.reports.whatif`), as a chart and a table per group."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from engine import Store
from engine.reports import whatif
from engine.store import RunFilters
from pages import _shared

SHOWN = ["rule", "runs", "stopped early", "accuracy as run", "accuracy with rule",
         "accuracy lost", "broken", "fixed", "tokens saved", "tokens saved %", "dollars saved"]
CAPTION = (
    "Each stored run's rounds replayed under a stop rule, with no model call. A run stopped "
    "after round r answers with round r's plurality (ties to the smallest answer; a round "
    "everyone abstained in scores wrong) and saves its turns' tokens and dollars of the later "
    "rounds; a run the rule lets finish keeps its own answer. Stop when agreement ≥ t: the "
    "first round whose plurality holds a share t of at least two answers. Debate only when "
    "round one splits: stop after a unanimous round one. Stop when the leader cannot be "
    "caught: after round r of N, with K the most agents that changed between two rounds so "
    "far (at least 1), stop when the leader's lead over the runner-up exceeds 2·K·(N − r), "
    "since K changes a round, each from the leader to the runner-up, could not tie it. "
    "Accuracy lost is as run minus with the rule on the same scored runs (Newcombe's paired "
    "95% interval); broken: right as run, wrong when stopped; fixed: the reverse. Dollars "
    "are unknown, never 0, when a saved turn had no price. Completed runs only.")


@st.cache_data(max_entries=16, show_spinner="Replaying the stored runs…")
def table(_store: Store, url: str, stamp: tuple, args: tuple, kind: str,
          experiment_id: str | None = None) -> pd.DataFrame:
    """The replay of the matching runs, made again only when the stored runs changed."""
    return whatif.what_if_from_store(_store, RunFilters(**dict(args)), kind,
                                     experiment_id=experiment_id)


def render(store: Store, args: tuple, kind: str, key: str = "whatif",
           experiment_id: str | None = None) -> None:
    """The view over the runs matching the filters `args` of `kind` (real, simulated, both),
    of one experiment with `experiment_id`."""
    rows = table(store, store.url_safe, store.fingerprint(), args, kind, experiment_id)
    if rows.empty:
        st.info(f"No completed {kind} runs with rounds of answers match these filters "
                "(society, single, panel and roundtable runs have them).")
        return
    st.caption(_shared.md(CAPTION))
    groups = list(dict.fromkeys(rows["group"]))
    group = st.selectbox("Group", groups, key=f"{key}-group",
                         help="All labels of a kind pooled, or one configuration label.") \
        if len(groups) > 1 else groups[0]
    shown = rows[rows["group"] == group]
    first = shown.iloc[0]
    _shared.metrics_row([("Runs", f"{int(first['runs']):,}"),
                         ("Scored", f"{int(first['scored']):,}"),
                         ("Accuracy as run", first["accuracy as run"])])
    st.vega_lite_chart(spec=whatif.chart(rows, str(group), f"What if: {group}"),
                       key=f"{key}-chart")
    st.caption(_shared.md("Each point a rule: the share of the runs' tokens it saves against "
                          "the accuracy with it (95% Wilson interval, n scored runs in the "
                          "tooltip); dashed: the accuracy as run."))
    st.dataframe(shown[SHOWN], hide_index=True, key=f"{key}-table")

