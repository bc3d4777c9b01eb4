"""Parley: the Streamlit entry. Settings are read once here and handed to the pages.

Run it with `streamlit run app.py`. A page is listed only when its file exists, so the app
works while pages are still being written.
"""
from __future__ import annotations

import threading

import streamlit as st

from pages import _shared

st.set_page_config(page_title="Parley", page_icon=":material/forum:", layout="wide")


@st.cache_resource(show_spinner=False)
def _warming() -> threading.Thread:
    """Warm the process once (`_shared.warm_up`) in a background thread, started after the
    first page has been drawn so that page is not slowed by it: the next pages a user opens
    then skip their imports and plotly's first-figure cost."""
    thread = threading.Thread(target=_shared.warm_up, name="parley-warm-up", daemon=True)
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
