"""Insights: what stored runs add up to, grouped by configuration label, as charts (Vega-Lite
bars, `engine.reports.vega`; plotly for the rest)."""
from __future__ import annotations

from typing import Any

import streamlit as st

from engine.reports import drill, insights, rounds, vega
from engine.reports import runs as history
from engine.views import aggregate
from pages import _consensus, _hijack, _human, _shared
from pages import _insights_data as data

store = _shared.store()
md = _shared.md


st.title("📊 Insights")
_shared.read_only_banner(_shared.store())
if history.newest(store) is None:
    st.info("No runs stored yet, so there is nothing to compare. Make demo runs on Home or "
            "start a run on the Run page, then come back.")
    st.stop()


def drill_down(section: str, chart: insights.Chart, key: str, figure: Any) -> None:
    """Draw `chart` (as `figure`: a Vega-Lite spec or a plotly figure); a click on one of its
    bars, boxes or points of a line by round opens the runs behind it on the Runs page
    (`engine.reports.drill`)."""
    if isinstance(figure, dict):  # a Vega-Lite spec (`vega.spec`)
        if not vega.clickable(figure):
            st.vega_lite_chart(spec=figure, key=key)
            return
        event = st.vega_lite_chart(spec=figure, key=key, on_select="rerun",
                                   selection_mode=vega.PICK)
        bar = vega.picked(event)
        if bar is not None:
            group, series = bar
            st.switch_page("pages/runs.py", query_params=drill.params(
                section, chart, series, {"x": group}))
        return
    if chart.kind != "round_lines":
        st.plotly_chart(figure, key=key)  # a Sankey: its bands are agents, not runs
        return
    picked = st.plotly_chart(figure, key=key, on_select="rerun", selection_mode="points")
    line = rounds.picked_line(figure, chart.data, picked)
    if line is not None:  # a point of a line by round: that group's runs
        st.switch_page("pages/runs.py", query_params=drill.params(
            section, chart, "", {"x": line}))


def draw(section: insights.Section, simulated: bool = False) -> None:
    """A section: its title, caption, headline numbers, charts two by two and its table; a
    click on a chart's bar or a table's row opens the runs behind it on the Runs page
    (`simulated`: only the simulated ones, the kind shown)."""
    st.subheader(section.title)
    if section.caption:
        st.caption(md(section.caption))
    if section.note:
        st.caption(md(section.note))
        return
    if section.metrics:
        _shared.metrics_row(section.metrics)
    for first in range(0, len(section.charts), 2):
        for column, number in zip(st.columns(2), range(first, first + 2)):
            if number < len(section.charts):
                chart = section.charts[number]
                with column:
                    key = f"{section.key}_{number}"
                    drill_down(section.key, chart, key, drawn[key])
                    st.caption(md(chart.caption))
    if section.table is not None and not section.table.empty:
        picked = st.dataframe(
            aggregate.grey_few(section.table), hide_index=True, key=f"{section.key}_table",
            on_select="rerun", selection_mode="single-row", placeholder="—",
            column_config={"rate": st.column_config.NumberColumn(format="percent"),
                           "low": st.column_config.NumberColumn(format="percent"),
                           "high": st.column_config.NumberColumn(format="percent"),
                           "few": None})
        rows = picked.selection.rows if picked is not None else []
        if rows:  # a row opens the runs behind it
            st.switch_page("pages/runs.py", query_params=drill.row_params(
                section.key, section.table.iloc[rows[0]].to_dict(), simulated=simulated))


with st.expander("Filters", expanded=False):
    filters = _shared.filter_widgets(history.choices(store), "insights", bind=True)
args = tuple(sorted((k, v) for k, v in vars(filters).items() if v not in (None, "")))
stamp = store.fingerprint()
summary = data.load_summary(store, store.url_safe, stamp, args)
if summary.empty:
    st.info("No runs match these filters.")
    st.stop()
KIND_NAMES = {"real": "Real", "simulated": "Simulated", "both": "Both, side by side"}
simulated = int(summary.loc[summary["simulated"].astype(bool), "n"].sum())
counted = {"real": int(summary["n"].sum()) - simulated, "simulated": simulated,
           "both": int(summary["n"].sum())}
# The kind the user last looked at holds (a few real runs arriving never hides the simulated
# ones they were reading); on a first visit, the real runs when there are any.
chosen = st.session_state.get("insights-kind-chosen")
kind = st.segmented_control(
    "Runs", list(aggregate.KINDS), default=chosen if chosen in aggregate.KINDS
    else aggregate.default_kind(summary),
    format_func=lambda k: f"{KIND_NAMES[k]} ({counted[k]:,})", key="insights-kind",
    bind="query-params",
    help="Simulated runs (any seat played by the offline simulated model) and real runs are "
         "never pooled: both side by side labels every simulated group \"(simulated)\".",
) or aggregate.default_kind(summary)
st.session_state["insights-kind-chosen"] = kind
hidden = {"real": simulated, "simulated": int(summary["n"].sum()) - simulated, "both": 0}[kind]
if hidden:
    other = "simulated" if kind == "real" else "real"
    st.caption(f"{hidden:,} {other} run(s) are not shown; choose *{KIND_NAMES[other]}* or "
               f"*{KIND_NAMES['both']}* to see them.")
VIEWS = {"sections": "The three answers, then sections", "moved": "Who moved whom",
         "whatif": "What if"}
view = st.segmented_control("View", list(VIEWS), default="sections", format_func=VIEWS.__getitem__,
                            key="insights-view", bind="query-params") or "sections"
if view != "sections":
    from pages import _influence, _whatif
    {"moved": _influence.render, "whatif": _whatif.render}[view](store, args, kind)
    st.stop()
# The product's three answers first (who changed their mind, how the votes fell, confidence
# against accuracy), each row opening its runs; the protocols' own sections follow.
drawn: dict[str, Any] = {}
for answer in data.answers(store, store.url_safe, stamp, args, kind):
    draw(answer, simulated=kind == "simulated")
st.divider()
titles = insights.section_titles()
chosen = st.pills(
    "Sections", list(titles), default=insights.default_sections(summary),
    selection_mode="multi", format_func=titles.__getitem__, key="insights-sections",
    bind="query-params",
    help="Each section draws its own figures; open the ones you need (every protocol with "
         "runs has one).") or []
only = tuple(key for key in titles if key in chosen)
if 0 < len(only) < len(titles):
    st.caption("More sections, such as accuracy and tokens and latency, are a click away "
               "above: each one picked is drawn below.")
sections = data.build(store, store.url_safe, stamp, args, kind, only)
drawn = data.figures(store, store.url_safe, stamp, args, kind, only)
if not chosen:
    st.info("Choose a section above.")
    st.stop()
if not sections and "consensus" not in only:
    st.info(f"No {kind} runs match these filters.")
    st.stop()
st.caption("Grouped by configuration label. Rates, means and calibration count completed "
           "runs only: failed and interrupted runs are counted in the overview and nowhere "
           "else. Degraded runs (completed, but a decisive call or most turns failed) are "
           "among the completed; a value a failure took from them, such as a failed judge's "
           "confidence, is left out, never counted as 0. Each rate carries its n and 95% "
           "Wilson interval, and one over fewer than 5 runs is greyed. Click a bar, a box or a "
           "point of a line by round to open the runs behind it on the Runs page.")

for section in sections:
    draw(section)

if "consensus" in only:  # its own view (pages/_consensus.py)
    _consensus.show(_consensus.insights_report(store, store.url_safe, stamp, args, kind),
                    "insights-consensus")

_hijack.insights(store, stamp, kind)  # a planted adversary, where runs had one
_human.show(store)  # people's labels: win rates, kappa, calibration (pages/_human.py)
