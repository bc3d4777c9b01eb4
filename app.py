"""Parley: the Streamlit entry. Settings are read once here and handed to the pages.

Run it with `streamlit run app.py`. A page is listed only when its file exists, so the app
works while pages are still being written.
"""
from __future__ import annotations

import streamlit as st

from pages import _shared

st.set_page_config(page_title="Parley", page_icon=":material/forum:", layout="wide")

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

page = st.navigation([st.Page(path, title=title, icon=icon, default=path == "pages/home.py")
                      for path, title, icon in PAGES])
_shared.settings()  # environment, then st.secrets; once per session
_shared.store()     # open (and migrate) the database before any page needs it
_shared.keep_form_state()  # a half-configured run survives a visit to another page
page.run()
