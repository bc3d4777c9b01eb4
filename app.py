"""Parley: the Streamlit entry. Settings are read once here and handed to the pages.

Run it with `streamlit run app.py`. A page is listed only when its file exists, so the app
works while pages are still being written.
"""
from __future__ import annotations

import threading
import time

import streamlit as st

from engine import Store
from pages import _shared

st.set_page_config(page_title="Parley", page_icon=":material/forum:", layout="wide")


# Seconds the warm-up waits after the first page's script run: the browser then still
# fetches that page's widget code from this server and draws it (1-2 s on a fresh
# server), and a warm-up holding the GIL meanwhile slowed those requests by seconds.
WARM_UP_AFTER = 3.0


def _warm_up(store: Store) -> None:
    """Import what the pages need and build plotly's first figure (`_shared.warm_up`), then
    fill the Insights caches for its first view (`_insights_data.warm`). Imported here, in
    the background, because it imports plotly, which the first page need not wait for."""
    time.sleep(WARM_UP_AFTER)
    from pages import _insights_data
    _shared.warm_up()
    _insights_data.warm(store)


@st.cache_resource(show_spinner=False)
def _warming() -> threading.Thread:
    """Warm the process once in a background thread, started after the first page has been
    drawn so that page is not slowed by it: the next pages a user opens then skip their
    imports, plotly's first-figure cost and (Insights) reading every stored run."""
    thread = threading.Thread(target=_warm_up, args=(_shared.store(),), name="parley-warm-up",
                              daemon=True)
    thread.start()
    return thread


# (file, title, icon): the navigation, in order; Home is the default page.
PAGES = (
    ("pages/home.py", "Home", ":material/home:"),
    ("pages/run.py", "Run", ":material/play_circle:"),
    ("pages/runs.py", "Runs", ":material/history:"),
    ("pages/insights.py", "Insights", ":material/insights:"),
    ("pages/personas.py", "Personas & roles", ":material/groups:"),
    ("pages/experiments.py", "Experiments", ":material/science:"),
    ("pages/compare.py", "Compare runs", ":material/compare_arrows:"),
)

# .streamlit/config.toml turns sidebar navigation off, so a fresh server's first load never
# draws Streamlit's file list of pages/ (before this script names the pages); this app's own
# navigation is then switched on (Streamlit lets a script set this option).
st.set_option("client.showSidebarNavigation", True)
page = st.navigation([st.Page(path, title=title, icon=icon, default=path == "pages/home.py")
                      for path, title, icon in PAGES])
_shared.settings()  # environment, then st.secrets; once per session
_shared.store()     # open (and migrate) the database before any page needs it
_shared.keep_form_state()  # a half-configured run survives a visit to another page
page.run()
_warming()  # after a page that ran to its end (st.stop and st.rerun skip this line)
