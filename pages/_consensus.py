"""Is the consensus earned? The view Insights and an experiment's results share.
Agreement inflation against accuracy, the manufactured-consensus flags, the table with the
fix/break odds ratio, and for one configuration the three-curve reliability view and
selective accuracy against coverage (`engine.reports.consensus`). Labels are shown as text."""
from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from engine.reports import consensus
from engine.reports.reliability import reliability_figure
from engine.store import RunFilters
from pages import _shared

if TYPE_CHECKING:
    from engine.store import Store

md = _shared.md


@st.cache_data(max_entries=16, show_spinner="Reading the rounds…")
def insights_report(_store: Store, url: str, stamp: tuple, args: tuple, kind: str
                    ) -> consensus.ConsensusReport:
    """Insights' report over the matching runs, made again only when the runs changed."""
    return consensus.from_store(_store, RunFilters(**dict(args)), kind)


def show(report: consensus.ConsensusReport, key: str) -> None:
    """Draw `report` (widgets keyed under `key`)."""
    st.subheader("Consensus earned?")
    if report.table.empty:
        st.info(report.note or "No completed runs of a protocol with rounds of answers "
                "(society, single, panel, roundtable, council) to look at.")
        return
    if report.note:
        st.caption(md(report.note))
    sim = report.simulated
    word = " (simulated)" if sim == "all" else ""
    if sim:
        _shared.simulated_note(sim == "all")
        if sim == "some":
            st.caption("Simulated and real runs are kept apart: every simulated configuration "
                       "is labelled (simulated).")
    table = report.table
    for row in table.to_dict("records"):
        text = f"{row['configuration']}: {consensus.flag_text(row)}"
        (st.warning if row["manufactured"] or row.get("accuracy_fell") else st.caption)(md(text))
    st.plotly_chart(consensus.inflation_figure(table, "Agreement inflation against accuracy"
                                               + word), key=f"{key}-inflation")
    st.caption(md(
        "One point per configuration: x is the mean, over its runs with two rounds or more, "
        "of the last round's agreement (the plurality's share of the answers given) minus "
        "round one's; y its final accuracy. Bars are 95% intervals (normal for the mean, "
        "Wilson for accuracy); n is in the hover and the table. Red: manufactured consensus, "
        "agreement rose (interval above 0) while accuracy did not (final minus round-one "
        "plurality accuracy over the same runs, interval reaching 0 or below)." +
        (" Simulated runs: they show the simulated world's parameters, nothing about real "
         "models." if sim else "")))
    st.dataframe(consensus.table_view(table), hide_index=True, key=f"{key}-table")
    st.caption(md(
        "Fix/break odds ratio: runs whose round-one majority was wrong and final answer right, "
        "per run right then wrong (paired odds ratio, 95% interval on the log scale, 0.5 added "
        "to both counts when either is 0); above 1 deliberation fixed more than it broke. "
        "ECE: expected calibration error over 10 equal bins; AUARC: area under selective "
        "accuracy against coverage."))
    chosen = st.selectbox("Configuration", report.configurations, key=f"{key}-config",
                          help="The three curves and the selective accuracy of one "
                               "configuration, all on the same runs.")
    if chosen is None:
        return
    curves = consensus.calibrations(report.measures, chosen)
    n = max((c["n"] for c in curves), default=0)
    st.plotly_chart(reliability_figure(curves, f"Consensus earned? {chosen}"),
                    key=f"{key}-curves")
    st.caption(md(
        f"Three confidence sources on the same {n} scored run(s): round one's vote share of "
        "the final answer (before the agents saw one another), the final round's vote share "
        "of it, and the judge's own confidence or the protocol's consensus where it has one "
        "(left out where it is the final vote share). Each point is a bin of runs (its size "
        "by n) against the share of them that were right; the dotted diagonal is perfect "
        "calibration; ECE, Brier and n are in the legend." + (" Simulated." if sim else "")))
    points = consensus.selective(report.measures, chosen)
    st.plotly_chart(consensus.selective_figure(points, consensus.aucs_of(table, chosen),
                                               f"Selective accuracy against coverage: "
                                               f"{chosen}"), key=f"{key}-selective")
    st.caption(md(
        "Answering only the runs at or above a confidence: the share answered (coverage) "
        "against their accuracy, with its 95% Wilson interval and n in the hover; the area "
        "under each curve (AUARC) is in the legend, higher when a source ranks right runs "
        "first." + (" Simulated." if sim else "")))
