"""Parley: the Streamlit entry. Settings are read once here and handed to the pages."""
from __future__ import annotations

import streamlit as st

st.set_page_config(page_title="Parley", page_icon="🗣️", layout="wide")

pages = [
    st.Page("pages/run.py", title="Run", icon="▶️", default=True),
]
st.navigation(pages).run()
