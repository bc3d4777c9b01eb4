"""Insights: what stored runs add up to, grouped by configuration label, as plotly charts."""
from __future__ import annotations

import streamlit as st

from engine.reports import charts, insights
from engine.reports import runs as history
from pages import _shared

store = _shared.store()
md = _shared.md


st.title("📊 Insights")
_shared.read_only_banner(_shared.store())
if history.newest(store) is None:
    st.info("No runs stored yet, so there is nothing to compare. Make demo runs on Home or "
            "start a run on the Run page, then come back.")
    st.stop()

with st.expander("Filters", expanded=False):
    filters = _shared.filter_widgets(history.choices(store), "insights")
runs = insights.load_runs(store, filters)
if runs.empty:
    st.info("No runs match these filters.")
    st.stop()
sections = insights.report(runs, insights.results_loader(store, filters))
st.caption("Grouped by configuration label; runs made by the offline model count as "
           "`simulated` in the overview. Rates, means and calibration count completed runs "
           "only: failed and interrupted runs are counted in the overview and nowhere else. "
           "Degraded runs (completed, but a decisive call or most turns failed) are among the "
           "completed; a value a failure took from them, such as a failed judge's confidence, "
           "is left out, never counted as 0.")

for section in sections:
    st.subheader(section.title)
    if section.note:
        st.caption(md(section.note))
        continue
    if section.metrics:
        for column, (label, value) in zip(st.columns(len(section.metrics)), section.metrics):
            column.metric(label, value)
    for first in range(0, len(section.charts), 2):
        for column, number in zip(st.columns(2), range(first, first + 2)):
            if number < len(section.charts):
                chart = section.charts[number]
                with column:
                    st.plotly_chart(charts.figure(chart), key=f"{section.key}_{number}")
                    st.caption(md(chart.caption))
