"""The Experiments page's "Over time": every experiment of the chosen one's name, each
configuration's accuracy and deliberation health by date, with a ring where its
configuration, its prompts or the question set's version changed; a click on a point opens
that experiment. Every number comes from `engine.reports.trends`."""
from __future__ import annotations

import streamlit as st

from engine import experiments as ex
from engine.reports import trends
from engine.store import Store
from pages import _shared

OPEN = "exp-over-time"


def section(store: Store, experiment_id: str) -> None:
    """The expander; drawn only while open (it reads every experiment of the name)."""
    name = ex.get(store, experiment_id)["name"]
    box = st.expander(f"Over time: every experiment named {_shared.md(name)}", key=OPEN,
                      on_change="rerun")
    if not box.open:
        return
    with box:
        frame = trends.over_time(store, name)
        if frame.empty or frame["experiment"].nunique() < 2:
            st.info("Only one experiment has this name: its later runs under the same name "
                    "draw a line here.")
            return
        measure = st.segmented_control("Measure", list(trends.MEASURE_NAMES),
                                       default="accuracy", key="exp-over-time-measure",
                                       ) or "accuracy"
        if (frame["measure"] == measure).sum() == 0:
            st.info(f"No experiment of this name measures {measure}.")
            return
        st.caption("Bars: 95% intervals. A red ring marks a point whose configuration, "
                   "prompts or question set version changed since the experiment before "
                   "(its tooltip says which). Click a point to open its experiment.")
        event = st.vega_lite_chart(trends.trend_spec(frame, measure), key="exp-over-time-chart",
                                   on_select="rerun", selection_mode="pick")
        chosen = trends.picked_experiment(event)
        if chosen and chosen != experiment_id:
            st.query_params["experiment"] = chosen
            st.rerun()
        changed = frame[(frame["changed"] != "") & (frame["measure"] == measure)]
        for row in changed.itertuples():
            st.caption(_shared.md(f"{row.created:%Y-%m-%d %H:%M} · {row.configuration}: "
                                  f"{row.changed} changed (experiment {row.experiment})"))
