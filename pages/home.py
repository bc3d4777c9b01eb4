"""Home: what Parley does, which model providers are set up, and one-click demo runs."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.services.demo import demo_missing, demo_plan, demo_run_ids, remove_demo
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
    ".streamlit/secrets.toml (see docs/models.md)."))
st.caption(f"Database: {_shared.md(store.url_safe)}")

st.subheader("Demo runs")
tasks = _shared.tasks()
plan = demo_plan()
count = st.empty()  # filled last, so it counts what this run stored or removed
demo = tasks.task(DEMO)
going = demo is not None and demo.alive
missing = demo_missing(store)
left, right, _rest = st.columns([3, 2, 2])  # the first holds its longest label
# the button says what a press does: make the demo, add what is missing of it, or nothing
# (every demo run is stored, and the page names the next step)
label = (f"Add the {len(missing)} missing demo run{'s' * (len(missing) != 1)}"
         if missing and len(missing) < len(plan)
         else f"Run {len(plan)} demo runs" if missing
         else f"All {len(plan)} demo runs are stored")
if not missing:
    st.caption("Next: the Runs page lists them, Insights adds them up, the Leaderboard "
               "rates the two models, Review asks which of two answers is better, and an "
               "experiment compares configurations on a question set.")
if left.button(label, icon=":material/play_arrow:",
               type="primary", key="demo_run", disabled=going or not _shared.can("start runs")):
    if missing:
        tasks.start_demo(actor=_shared.actor())
        st.session_state["demo_started"] = True
        going = True
    else:
        st.info(f"All {len(plan)} demo runs are already stored; nothing was added.")


@st.fragment(run_every=1.0)
def demo_progress() -> None:
    """Polls the demo every second while it goes (in the background: leaving the page does
    not stop it); a full rerun once it is over."""
    state = tasks.progress(DEMO)
    if state["status"] != "running":
        st.rerun()
    st.progress(state["fraction"], text=f"{state['done']} of {state['total']} demo runs")


def confirm_remove(stored: int) -> None:
    """Two-step removal: the first click asks, the second removes."""
    if not st.session_state.get("demo_remove_asked"):
        if right.button("Remove all demo runs", icon=":material/delete:", key="demo_remove",
                        disabled=not stored or going or not _shared.can("delete runs")):
            st.session_state["demo_remove_asked"] = True
            st.rerun()
        return
    st.warning(f"Remove all {stored} demo runs (with their turns)? This cannot be undone.")
    yes, no, _space = st.columns([1, 1, 2])
    if yes.button("Yes, remove them", key="demo_remove_yes", type="primary"):
        st.session_state.pop("demo_remove_asked", None)
        removed = remove_demo(store, actor=_shared.actor())
        st.session_state["demo_removed"] = f"Removed {removed} demo runs."
        st.rerun()  # the question and its buttons go; the message stays
    elif no.button("Cancel", key="demo_remove_no"):
        st.session_state.pop("demo_remove_asked", None)
        st.rerun()


if going:
    demo_progress()
elif demo is not None and st.session_state.pop("demo_started", False):
    state = tasks.progress(DEMO)  # what this session's demo made, said once
    st.success(f"Stored {len(state['run_ids'])} demo runs (simulated).")
    for error in state["errors"]:
        st.warning(_shared.md(error))
if "demo_removed" in st.session_state:
    st.success(st.session_state.pop("demo_removed"))
stored = len(demo_run_ids(store))  # read once, after anything this run stored or removed
confirm_remove(stored)
count.markdown(f"Make {len(plan)} runs on the simulated model, tagged `demo`: each bundled "
               "demo question through every protocol, so Runs and Insights have something to "
               "show, and a stronger and a weaker simulated model meeting on the same "
               "questions (in debates, in a council and alone), so the Leaderboard rates them "
               f"and Review has pairs of answers to judge. **{stored}** demo runs are stored "
               "now; the button makes only those missing.")

links = (("pages/runs.py", "Open Runs"), ("pages/insights.py", "Open Insights"),
         ("pages/leaderboard.py", "Open the Leaderboard"), ("pages/review.py", "Open Review"),
         ("pages/run.py", "Start a run"))
for column, (path, title) in zip(st.columns(len(links)), links):
    column.page_link(path, label=title)
