"""Ratings and comments on a run, or on one of its turns, from the run's detail (DESIGN
section 5): a 1-5 score with a comment, recorded under the session's rater, and the run's
labels so far as a table (text, never HTML)."""
from __future__ import annotations

from typing import Any

import streamlit as st

from engine import ParleyError, Store
from pages import _shared

WHOLE_RUN = "the whole run"


def show_labels(store: Store, run: dict[str, Any]) -> None:
    """The run's ratings and preferences, and a form to rate it or one of its turns."""
    ratings = store.ratings(run_ids=[run["id"]])
    preferences = store.preferences(run_ids=[run["id"]])
    title = f"Ratings and comments ({len(ratings)} ratings, {len(preferences)} preferences)"
    with st.expander(title, expanded=False):
        if not ratings.empty:
            shown = ratings[["turn", "rater", "score", "comment", "created_at"]].copy()
            shown["turn"] = [WHOLE_RUN if t is None or str(t) == "<NA>" else f"turn {t}"
                             for t in shown["turn"]]
            # an imported label's rater is its file's claim, never someone who judged here
            shown["source"] = [f"imported by {who} (rater as the file claims)" if who
                               else "judged here" for who in ratings["imported_by"]]
            st.dataframe(shown, hide_index=True)
        if store.read_only:
            return
        if not _shared.can("label runs"):
            st.caption(_shared.refusal("label runs"))
            return
        targets = [WHOLE_RUN] + [f"turn {t['idx']} · {t['phase']}" for t in run["turns"]]
        with st.form(f"rate-{run['id']}", clear_on_submit=True):
            target = st.selectbox("Rate", range(len(targets)), format_func=targets.__getitem__,
                                  key=f"rate-target-{run['id']}")
            score = st.radio("Score", [1, 2, 3, 4, 5], index=2, horizontal=True,
                             key=f"rate-score-{run['id']}")
            comment = st.text_area("Comment (optional)", max_chars=10_000,
                                   key=f"rate-comment-{run['id']}")
            if st.form_submit_button("Save rating"):
                turn = None if not target else run["turns"][target - 1]["idx"]
                try:
                    store.add_rating(run["id"], rater=_shared.rater(), score=int(score),
                                     comment=comment or "", turn=turn,
                                     actor=_shared.actor())
                except ParleyError as exc:
                    st.error(_shared.md(f"Not saved: {exc}"))
                else:
                    st.rerun()
