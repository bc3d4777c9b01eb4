"""The Insights page's "Who moved whom" view: a persona x persona or model x model
matrix of who moved whom over the matching stored runs (`engine.reports.influence`), with the
runs behind a cell a click away."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from engine import Store
from engine.reports import influence, vega
from engine.store import RunFilters
from pages import _shared

CAPTION = (
    "Mover (rows) and moved (columns): how often an agent changed its answer to the one an "
    "agent of the row's persona (model) held in the round before, over the chances it had "
    "(both answered, their answers differed, and the moved one answered again in the next "
    "round). A flip to an answer several agents held is credited to each. Each cell: flips / "
    "opportunities, the rate's 95% Wilson interval in the tooltip and the table; a cell over "
    "fewer than 5 chances is faded. Completed runs of the protocols with rounds of answers "
    "(society, single, panel, roundtable). Click a cell, or pick it below, for its runs.")
SHOWN_LINKS = 20  # run links listed under a picked cell


@st.cache_data(max_entries=16, show_spinner="Counting who moved whom…")
def table(_store: Store, url: str, stamp: tuple, args: tuple, kind: str) -> pd.DataFrame:
    """The matrices over the matching runs, made again only when the stored runs changed."""
    return influence.from_store(_store, RunFilters(**dict(args)), kind)


def _runs_of(cells: pd.DataFrame, mover: str, moved: str) -> None:
    ids = influence.cell_runs(cells, mover, moved)
    st.markdown(_shared.md(f"{len(ids)} run(s) behind {mover} → {moved}:"))
    for run_id in ids[:SHOWN_LINKS]:
        st.page_link("pages/runs.py", label=f"Open run {run_id}", icon=":material/history:",
                     query_params={"run": run_id})
    if len(ids) > SHOWN_LINKS:
        st.caption(f"and {len(ids) - SHOWN_LINKS} more (the first {SHOWN_LINKS} listed).")


def render(store: Store, args: tuple, kind: str) -> None:
    """The view over the runs matching the filters `args` of `kind` (real, simulated, both)."""
    cells = table(store, store.url_safe, store.fingerprint(), args, kind)
    if cells.empty:
        st.info(f"No completed {kind} runs with two rounds or more of answers, and two agents "
                "or more, match these filters: nobody could move anybody.")
        return
    st.caption(_shared.md(CAPTION))
    by = st.segmented_control("Matrix", list(influence.BY), default="persona",
                              format_func=lambda b: f"{b} × {b}", key="influence-by") or "persona"
    kinds = [k for k in ("real", "simulated") if (cells["kind"] == k).any()]
    for shown_kind in kinds:
        mine = influence.block(cells, shown_kind, by)
        st.subheader(influence.title(shown_kind, by, len(kinds) > 1))
        if shown_kind == "simulated" and by == "persona":
            st.warning(influence.SIMULATED_PERSONAS, icon=":material/science:")
        spec = vega.heatmap(influence.heat(mine), x_title=f"moved ({by})",
                            y_title=f"mover ({by})")
        event = st.vega_lite_chart(spec=spec, key=f"influence-{shown_kind}-{by}",
                                   on_select="rerun", selection_mode=vega.PICK)
        st.dataframe(influence.shown(mine), hide_index=True)
        picked = vega.picked(event)
        options = [f"{m} → {d}" for m, d in zip(mine["mover"], mine["moved"], strict=True)]
        chosen = st.selectbox("Runs behind a cell", options, index=None,
                              placeholder="pick a cell", key=f"influence-cell-{shown_kind}-{by}")
        if picked is not None:
            _runs_of(mine, *picked)
        elif chosen is not None:
            _runs_of(mine, *options_pair(mine, options.index(chosen)))


def options_pair(cells: pd.DataFrame, index: int) -> tuple[str, str]:
    row = cells.iloc[index]
    return str(row["mover"]), str(row["moved"])
