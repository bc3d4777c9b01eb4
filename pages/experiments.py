"""Experiments: a question set x configurations x repeats, run in the background, compared.

The page gathers the inputs, shows the preflight (runs, calls, tokens), starts the experiment
in a background thread and reads its progress and results back from the store, so it keeps
going when the page is left or refreshed. Every number comes from `engine.experiments`.
"""
from __future__ import annotations

import time

import streamlit as st

from engine import ConfigError
from engine import experiments as ex
from pages import (
    _baselines,
    _experiment_form,
    _experiment_results,
    _over_time,
    _shared,
    _workers,
)

store = _shared.store()
md = _shared.md
SELECTED = _experiment_form.SELECTED
NEW_FORM = _experiment_form.NEW_FORM  # the new-experiment expander's key: True while open
RESULTS_EVERY = 10.0  # seconds between refreshes of the results while an experiment runs

st.title("Experiments")
_shared.read_only_banner(_shared.store())
st.caption("A question set × saved configurations × repeats. Runs are stored as they finish; "
           "a stopped or crashed experiment resumes where it left off.")


flash = st.session_state.pop("exp-flash", None)
if flash:
    st.toast(md(flash), icon=":material/science:")
    st.success(md(flash) + " Its progress and results are below.")
experiments = ex.list_experiments(store)
# Drawn only while open (a click on the expander reruns the page): closed, its twenty-odd
# inputs were a tenth of a second of the browser's time on every visit to an experiment.
# What was typed in it survives closing it; a started experiment closes it.
if st.session_state.pop("exp-clear-form", False):
    _experiment_form.clear()
_shared.keep_form_state(_experiment_form.KEPT)
new_form = st.expander("New experiment", expanded=experiments.empty, key=NEW_FORM,
                       on_change="rerun")
if new_form.open:
    with new_form:
        _experiment_form.new_experiment(store)

if experiments.empty:
    st.info("No experiments yet.")
    st.stop()


# ------------------------------------------------------------------ choose one
ids = list(experiments["id"])
wanted = st.query_params.get("experiment") or st.session_state.get(SELECTED)
if wanted in ids and st.session_state.get("exp-pick") != wanted:
    st.session_state["exp-pick"] = wanted  # the address (a link, a new experiment) wins
# The label holds nothing that changes while the page is open (status and progress are in
# the progress bar below): a picker label does not refresh, so it would go stale.
labels = {row.id: f"{row.name} · {row.runs} runs · {row.created:%Y-%m-%d %H:%M} · {row.id}"
          for row in experiments.itertuples()}


def picked() -> None:
    st.query_params["experiment"] = st.session_state["exp-pick"]


experiment_id = st.selectbox("Experiment", ids, format_func=labels.__getitem__, key="exp-pick",
                             on_change=picked)
st.session_state[SELECTED] = experiment_id


# ------------------------------------------------------------------ progress
def show_progress(state: ex.Progress) -> None:
    text = f"{state.done}/{state.total} runs · {state.status}"
    st.progress(min(1.0, state.fraction), text=md(text))
    cols = st.columns(4)
    cols[0].metric("Runs done", f"{state.done}/{state.total}")
    cols[1].metric("Failed or interrupted", state.failed + state.interrupted,
                   help=f"{state.failed} failed, {state.interrupted} interrupted")
    cols[2].metric("Elapsed", ex.duration_text(state.elapsed))
    cols[3].metric("Remaining (estimate)",
                   "?" if state.remaining is None else ex.duration_text(state.remaining))
    if state.error:
        st.warning(md(state.error))


state = ex.progress(store, experiment_id)
if state.status == "running":
    st.session_state["exp-results-at"] = time.monotonic()

    @st.fragment(run_every=1.0)
    def watch() -> None:
        now = ex.progress(store, experiment_id)
        show_progress(now)
        stale = time.monotonic() - st.session_state.get("exp-results-at", 0) > RESULTS_EVERY
        if now.status != "running" or (stale and now.done > state.done):
            st.rerun()  # the whole page: results and buttons follow the runs

    watch()
    if _shared.tasks().task(experiment_id) is not None and st.button(
            "Stop", key="exp-stop", disabled=not _shared.can("run experiments")):
        _shared.tasks().stop(experiment_id, actor=_shared.actor())
        st.toast("Stopping: runs in flight end after their current call.")
else:
    show_progress(state)
    verb = "Start" if state.status == "planned" else "Resume"
    if state.status != "completed" and st.button(verb, type="primary", key="exp-resume",
                                                 disabled=not _shared.can("run experiments"),
                                                 help="runs the cells without a completed run"):
        try:
            _shared.tasks().start_experiment(experiment_id, endpoints=_shared.endpoints(),
                                             actor=_shared.actor(),
                                             notify_url=_shared.settings()["notify_url"])
        except ConfigError as exc:
            st.error(md(exc))
        else:
            st.rerun()
_workers.section(store, experiment_id)
_baselines.section(store, experiment_id, state)
_over_time.section(store, experiment_id)


# ------------------------------------------------------------------ results
_experiment_results.show(store, experiment_id, state)
