"""A planted adversary's hijack rate, by seat position, beside its placebo persona: one table
for the experiment page and Insights (`engine.reports.hijack`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from engine.reports import hijack
from pages import _shared

if TYPE_CHECKING:
    from engine.store import Store

HEADERS = {"label": "Configuration", "arm": "Arm", "seat": "Planted seat",
           "position": "Position", "runs": "Runs", "hijacked": "Hijacked",
           "rate": "Hijack rate", "interval": "95% interval"}


def shown(table: pd.DataFrame) -> pd.DataFrame:
    """The table as a page shows it: words for headers, the interval as text."""
    out = table.assign(interval=[f"{low:.0%} – {high:.0%}" for low, high in
                                 zip(table["low"], table["high"], strict=True)])
    kinds = set(out["kind"])
    if len(kinds) > 1:  # simulated and real side by side: each row says which
        out["label"] = [label if str(label).endswith(f"({kind})") else f"{label} ({kind})"
                        for label, kind in zip(out["label"], out["kind"], strict=True)]
    return out[list(HEADERS)].rename(columns=HEADERS)


def show(table: pd.DataFrame, key: str) -> None:
    """The hijack table under its heading, when any run had a planted adversary."""
    if table.empty:
        return
    with st.container(key=f"{key}-view"):
        st.subheader("Planted adversary: hijack rate")
        st.caption(_shared.md(hijack.ABOUT))
        st.dataframe(shown(table), hide_index=True, key=key, column_config={
            "Hijack rate": st.column_config.ProgressColumn(format="percent", min_value=0,
                                                           max_value=1)})


@st.cache_data(show_spinner=False, max_entries=8)
def _stored(_store: Store, url: str, stamp: Any, kind: str) -> pd.DataFrame:
    return hijack.stored(_store, kind)


def insights(store: Store, stamp: Any, kind: str) -> None:
    """Insights' hijack view over every stored run with an adversary, of the kind shown."""
    show(_stored(store, store.url_safe, stamp, kind), "insights-hijack")
