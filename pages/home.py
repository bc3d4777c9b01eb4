"""Home: what Parley does, which model providers are set up, and one-click demo runs."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.services.demo import demo_plan, demo_run_ids, remove_demo
from engine.services.tasks import DEMO
from pages import _shared

store = _shared.store()
settings = _shared.settings()

st.title("Parley")
_shared.read_only_banner(_shared.store())
st.markdown(
    "Parley puts several LLM agents around one question — as a debate, a persona panel with a "
    "critic and a vote, a peer review, a roundtable or a duel — and records every prompt, "
    "reply, vote and change of mind. Compare what the agents concluded across many stored "
    "runs: how the votes fell, how confident the outcome was, and whether that confidence "
    "deserved trust.")

st.subheader("Model providers")
providers = pd.DataFrame(settings["providers"]).rename(columns={
    "provider": "Provider", "package": "Package", "installed": "Installed",
    "key": "API key", "base_url": "Base URL"})
st.dataframe(providers, hide_index=True)
st.caption("Keys are read from the environment or `.streamlit/secrets.toml`; only whether a "
           "key is present is shown, never its value. Every page works offline with the "
           "`simulated` model.")

st.subheader("Registered endpoints")
if settings["endpoint_error"]:
    st.error(_shared.md(f"The endpoint settings could not be read: "
                        f"{settings['endpoint_error']}"))
if settings["endpoint_rows"]:
    st.dataframe(pd.DataFrame(settings["endpoint_rows"]).rename(columns={
        "name": "Name", "provider": "Provider", "base_url": "Base URL",
        "registered by": "Registered by", "key": "Key (where it lives)"}), hide_index=True)
st.caption(_shared.md(_shared.endpoint_hints()) + "  \n" + _shared.md(
    "A server-side key goes only to its provider's own API or to a registered endpoint. "
    "Register one with PARLEY_ENDPOINTS in the environment or [endpoints.NAME] in "
    ".streamlit/secrets.toml (see the README)."))
st.caption(f"Database: {_shared.md(store.url_safe)}")

st.subheader("Demo runs")
tasks = _shared.tasks()
demo_ids = demo_run_ids(store)
plan = demo_plan()
st.markdown(f"Make {len(plan)} runs on the simulated model — each bundled demo question "
            "through every protocol — tagged `demo`, so Runs and Insights have something to "
            f"show. **{len(demo_ids)}** demo runs are stored now.")
demo = tasks.task(DEMO)
going = demo is not None and demo.alive
left, right, _rest = st.columns([1, 1, 2])
if left.button(f"Run {len(plan)} demo runs", icon=":material/play_arrow:", type="primary",
               key="demo_run", disabled=going):
    tasks.start_demo()
    st.session_state["demo_started"] = True
    going = True


@st.fragment(run_every=1.0)
def demo_progress() -> None:
    """Polls the demo every second while it goes (in the background: leaving the page does
    not stop it); a full rerun once it is over."""
    state = tasks.progress(DEMO)
    if state["status"] != "running":
        st.rerun()
    st.progress(state["fraction"], text=f"{state['done']} of {state['total']} demo runs")


if going:
    demo_progress()
elif demo is not None and st.session_state.pop("demo_started", False):
    state = tasks.progress(DEMO)  # what this session's demo made, said once
    st.success(f"Stored {len(state['run_ids'])} demo runs (simulated).")
    for error in state["errors"]:
        st.warning(_shared.md(error))
if right.button("Remove all demo runs", icon=":material/delete:", key="demo_remove",
                disabled=not demo_ids or going):
    removed = remove_demo(store)
    st.success(f"Removed {removed} demo runs.")
    demo_ids = []

links = (("pages/runs.py", "Open Runs"), ("pages/insights.py", "Open Insights"),
         ("pages/run.py", "Start a run"))
for column, (path, title) in zip(st.columns(len(links)), links):
    column.page_link(path, label=title)
