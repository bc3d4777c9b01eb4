"""Insights: what stored runs add up to, grouped by configuration label, as plotly charts."""
from __future__ import annotations

import streamlit as st

from engine import charts, history, insights
from pages import _shared

store = _shared.store()
md = _shared.md


def filter_widgets(choices: dict[str, list[str]], key: str) -> history.Filters:
    """The same filters as the Runs page; every value goes to `Store.runs` bound."""
    any_of = ["", *choices["protocol"]]
    top = st.columns(4)
    protocol = top[0].selectbox("Protocol", any_of, key=f"{key}_protocol",
                                format_func=lambda p: history.protocol_title(p) if p else "any")
    label = top[1].selectbox("Label", ["", *choices["label"]], key=f"{key}_label",
                             format_func=lambda v: v or "any")
    tag = top[2].selectbox("Tag", ["", *choices["tag"]], key=f"{key}_tag",
                           format_func=lambda v: v or "any")
    model = top[3].selectbox("Model", ["", *choices["model"]], key=f"{key}_model",
                             format_func=lambda v: v or "any")
    bottom = st.columns([1, 1.3, 2])
    status = bottom[0].selectbox("Status", ["", *choices["status"]], key=f"{key}_status",
                                 format_func=lambda v: v or "any")
    since, until = history.date_range(bottom[1].date_input(
        "Created between (UTC)", value=(), key=f"{key}_dates"))
    search = bottom[2].text_input("Search question, label or run id", key=f"{key}_search")
    return history.Filters(protocol or None, label or None, tag or None, model or None,
                            status or None, search or None, since, until)


st.title("📊 Insights")
if history.newest(store) is None:
    st.info("No runs stored yet, so there is nothing to compare. Make demo runs on Home or "
            "start a run on the Run page, then come back.")
    st.stop()

with st.expander("Filters", expanded=False):
    filters = filter_widgets(history.choices(store), "insights")
runs = insights.load_runs(store, filters)
if runs.empty:
    st.info("No runs match these filters.")
    st.stop()
sections = insights.report(runs, insights.load_ballots(store, filters))
st.caption("Grouped by configuration label; runs made by the offline model count as "
           "`simulated` in the overview. Rates count completed runs only.")

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
