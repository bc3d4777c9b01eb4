"""Helpers shared by the page tests (AppTest)."""
from __future__ import annotations

import re
import time

GENEROUS = 120.0  # seconds; polling stops as soon as the page shows what it waits for


def plain(text: str) -> str:
    """Markdown-escaped text (pages escape every punctuation mark and put a word joiner into
    what Streamlit would auto-link) read back as typed."""
    return re.sub(r"\\(.)", r"\1", text).replace("\u2060", "")


def poll(at, done, timeout: float = GENEROUS):
    """Rerun the page (as a fragment's timer would) until `done(at)`."""
    deadline = time.monotonic() + timeout
    while not done(at):
        assert not at.exception, at.exception
        if time.monotonic() > deadline:
            raise AssertionError("the page never showed the expected state")
        time.sleep(0.2)
        at.run()
    return at


def charts(at) -> list:
    """Every chart a page drew: its plotly figures and its Vega-Lite charts (the bar charts
    of Insights and an experiment's accuracy, `engine.reports.vega`)."""
    return [*at.get("plotly_chart"), *at.get("vega_lite_chart")]


def chart_specs(at) -> list[str]:
    """The JSON of every chart a page drew (plotly's figure, Vega-Lite's spec)."""
    return [str(c.proto.spec) for c in charts(at)]


def open_new_experiment(at) -> None:
    """Open the Experiments page's "New experiment" expander (drawn only while open; it
    opens by itself only while no experiment is stored), as a click on it does."""
    if "exp-new" not in at.session_state or not at.session_state["exp-new"]:
        at.session_state["exp-new"] = True
        at.run()
