"""Helpers shared by the page tests (AppTest)."""
from __future__ import annotations

import re

from waiting import GENEROUS, wait_for


def plain(text: str) -> str:
    """Markdown-escaped text (pages escape every punctuation mark and put a word joiner into
    what Streamlit would auto-link) read back as typed."""
    return re.sub(r"\\(.)", r"\1", text).replace("\u2060", "")


def poll(at, done, timeout: float = GENEROUS):
    """Rerun the page (as a fragment's timer would) until `done(at)`."""
    def shown() -> bool:
        assert not at.exception, at.exception
        if done(at):
            return True
        at.run()
        return False
    wait_for(shown, "the page to show the expected state", timeout, every=0.2)
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


def everything(at) -> str:
    """Every element the page drew, as its protobuf text (what the browser is sent)."""
    out: list[str] = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            out.append(str(proto))
        for child in (getattr(node, "children", None) or {}).values():
            walk(child)
    walk(at._tree)
    return "\n".join(out).replace("\\\\", "").replace("\\", "").replace("\u2060", "")
