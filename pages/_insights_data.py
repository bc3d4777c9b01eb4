"""The Insights page's data: the matching runs, the chosen sections and their figures, each
made once per change of the stored runs (`Store.fingerprint`) and kept in Streamlit's caches.

A module of its own (not the page script) so that the server's warm-up (app.py's `warm`, before
it answers) can fill the caches for the page's first view (`warm`). The runs are added up in
the store (`insights.report_from_store`): the page never holds one row per run.
"""
from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from engine import Store
from engine.reports import answers as opening
from engine.reports import charts, insights, vega
from engine.store import RunFilters


@st.cache_data(max_entries=16, show_spinner=False)
def load_summary(_store: Store, url: str, stamp: tuple, args: tuple) -> pd.DataFrame:
    """The matching runs added up in the store (a few hundred rows however many runs
    match), read again only when the stored runs changed (`stamp`)."""
    return insights.load_summary(_store, RunFilters(**dict(args)))


@st.cache_data(max_entries=16, show_spinner=False)
def answers(_store: Store, url: str, stamp: tuple, args: tuple, kind: str) -> list:
    """The three answers the page opens on (`engine.reports.answers`: one grouped query in
    the store), made again only when the runs changed."""
    return opening.report(_store, RunFilters(**dict(args)), kind)


@st.cache_data(max_entries=32, show_spinner="Adding up the runs…")
def build(_store: Store, url: str, stamp: tuple, args: tuple, kind: str, only: tuple) -> list:
    """The chosen sections over the matching runs, made again only when the runs changed."""
    filters = RunFilters(**dict(args))
    return insights.report_from_store(_store, filters, kind, only,
                                      load_summary(_store, url, stamp, args))


@st.cache_resource(max_entries=32, show_spinner=False)
def figures(_store: Store, url: str, stamp: tuple, args: tuple, kind: str,
            only: tuple) -> dict[str, Any]:
    """The sections' figures by chart key, made once per change of the runs: a Vega-Lite
    spec for the bar charts (`vega.spec`: the browser draws them without plotly's 4.7 MB
    chunk), a plotly figure for the rest (plotly checks every property as a figure is built,
    a tenth of a second a figure). Kept as objects, not copies (`st.plotly_chart` and
    `st.vega_lite_chart` only read them), and shared by the sessions."""
    return {f"{section.key}_{number}": vega.spec(chart) or charts.figure(chart)
            for section in build(_store, url, stamp, args, kind, only)
            for number, chart in enumerate(section.charts)}


def warm(store: Store) -> None:
    """Fill the caches for the page's first view (no filters, the default kind and
    sections), as a first visit would."""
    stamp, args = store.fingerprint(), ()
    summary = load_summary(store, store.url_safe, stamp, args)
    if summary.empty:
        return
    kind = insights.default_kind(summary)
    answers(store, store.url_safe, stamp, args, kind)
    titles = insights.section_titles()
    chosen = insights.default_sections(summary)
    figures(store, store.url_safe, stamp, args, kind,
            tuple(key for key in titles if key in chosen))
