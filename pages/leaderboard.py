"""The Leaderboard: Bradley-Terry ratings per model and per persona from the stored runs'
pairwise outcomes (debate verdicts, council rankings), each with its interval and n, the win
rate on the right and the wrong side, simulated and real runs on separate boards, and the
runs behind a rating (`engine.reports.leaderboard`). Everything is drawn as text."""
from __future__ import annotations

import streamlit as st

from engine import Store
from engine.reports import leaderboard as lb
from pages import _shared

md = _shared.md
store = _shared.store()
SHOWN_LINKS = 20  # run links under a picked rating; the table lists every run


@st.cache_data(max_entries=8, show_spinner="Rating the stored runs…")
def read(_store: Store, url: str, stamp: tuple) -> lb.Outcomes:
    """The stored runs' outcomes, read again only when the runs changed (`stamp`)."""
    return lb.read(_store)


@st.cache_data(max_entries=16, show_spinner=False)
def rate(_found: lb.Outcomes, url: str, stamp: tuple, kind: str, by: str):  # noqa: ANN201
    return lb.board(_found, kind, by)


st.title("Leaderboard")
st.caption("Bradley-Terry ratings from the runs' pairwise outcomes: a debate's verdict (the "
           "seat that argued the side the judge ruled for beats the other arguing seat; with "
           "sides: both, the two runs of a swapped pair count once each) and a council's "
           "rankings (each ranker's ordering: every member ranked above another beats it). "
           "Duels have no judge and no score, so they give no outcome. On the Elo scale: "
           "1000 is a reference player (each player has one virtual win and one virtual loss "
           "against it), 400 points are 10 to 1 odds. The interval is the 95% bootstrap over "
           "runs (200 refits, seeded); games and runs are the n behind each rating.")
stamp = (store.url_safe, *store.fingerprint())
found = read(store, store.url_safe, stamp)
left, right = st.columns(2)
by = left.radio("Rate each", lb.BY, horizontal=True, key="board-by",
                format_func=lambda b: {"model": "model", "persona": "persona"}[b])
kinds = [k for k in lb.KINDS if found.games[k]] or ["real"]
kind = right.radio("Runs", kinds, horizontal=True, key="board-kind",
                   format_func=lambda k: {"real": "real models",
                                          "simulated": "simulated model"}[k])
if not any(found.games.values()):
    st.info("No pairwise outcome stored yet: run a debate whose judge names a side, or a "
            "council, and its outcomes are rated here.")
    st.stop()
if kind == "simulated":
    st.caption(":material/science: **simulated** — these runs were made by the offline "
               "simulated model (any seat), not a real LLM; they are rated apart from real "
               "runs, never pooled.")
elif len(lb.KINDS) > len(kinds):
    st.caption("Only real runs are stored with outcomes; simulated runs would be rated on "
               "their own board.")
table = rate(found, store.url_safe, stamp, kind, by)
rated_runs = {run for ids in table["run_ids"] for run in ids}
st.caption(f"{len(table)} {by}s rated from {len(rated_runs)} runs (a pair of one {by} on "
           "both seats says nothing about it and is left out). Right side / wrong side: how often "
           "the player won a debate in which exactly one side's last argument gave the "
           "expected answer, on that side (95% Wilson interval, n).")
picked = st.dataframe(table[lb.COLUMNS], hide_index=True, key=f"board-{kind}-{by}",
                      on_select="rerun", selection_mode="single-row",
                      # best first; the rating once, with its interval (not again bare)
                      column_order=["player", "rating [95% CI]", *[
                          c for c in lb.COLUMNS if c not in (
                              "player", "rating [95% CI]", "rating", "low", "high")]],
                      column_config={"player": st.column_config.TextColumn(width="medium")})
rows = picked.selection.rows if picked is not None else []
choice = st.selectbox("Runs behind the rating of", table["player"].tolist(),
                      index=rows[0] if rows else None, key=f"board-player-{kind}-{by}",
                      placeholder="pick a player (or a row above)")
if choice is not None:
    runs = lb.behind(found, kind, by, choice)
    st.subheader("Runs behind this rating")
    st.text(f"{choice}: {int(runs['wins'].sum())} wins, {int(runs['losses'].sum())} losses "
            f"in {len(runs)} runs")
    st.dataframe(runs, hide_index=True, key="board-runs",
                 column_config={"question": st.column_config.TextColumn(width="large")})
    for column, run_id in zip(st.columns(4) * (SHOWN_LINKS // 4),
                              runs["run"].head(SHOWN_LINKS), strict=False):
        column.page_link("pages/runs.py", label=f"Open run {run_id}",
                         icon=":material/history:", query_params={"run": str(run_id)})
