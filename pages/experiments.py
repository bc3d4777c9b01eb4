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
from engine.questions import catalogue
from engine.questions import files as qsets
from pages import _experiment_results, _shared

store = _shared.store()
md = _shared.md
SELECTED = "experiments_page_selected"
RESULTS_EVERY = 10.0  # seconds between refreshes of the results while an experiment runs

st.title("Experiments")
_shared.read_only_banner(_shared.store())
st.caption("A question set × saved configurations × repeats. Runs are stored as they finish; "
           "a stopped or crashed experiment resumes where it left off.")


# ------------------------------------------------------------------ new experiment
def question_source() -> tuple[dict | None, str]:
    """The spec's question part: a bundled set, or an uploaded CSV / JSONL file."""
    kind = st.radio("Questions", ["Bundled set", "Upload a file"], horizontal=True,
                    key="exp-source")
    if kind == "Bundled set":
        sets = {info.name: info for info in catalogue()}
        name = st.selectbox("Question set", list(sets), key="exp-set",
                            format_func=lambda n: f"{n} ({sets[n].size:,} questions)")
        st.caption(md(f"Source: {sets[name].source}. Licence: {sets[name].licence}."))
        return {"questions": name}, ""
    upload = st.file_uploader("CSV or JSONL with a `question` column and an optional "
                              "`expected` one", type=["csv", "jsonl"], key="exp-upload")
    if upload is None:
        return None, "Upload a question file to continue."
    try:
        items = qsets.parse_questions(upload.getvalue(), upload.name)
    except ConfigError as exc:
        return None, str(exc)
    return {"questions": [i.as_dict() for i in items], "source": f"file:{upload.name}"}, ""


FORM_KEYS = ("exp-configs", "exp-name", "exp-equal-compute", "exp-confirm")


def new_experiment() -> None:
    if st.session_state.pop("exp-clear-form", False):  # a started experiment empties the form
        for key in FORM_KEYS:
            st.session_state.pop(key, None)
    questions, problem = question_source()
    model = st.text_input("Model for the default configurations", "simulated", key="exp-model",
                          help="saved configurations keep their own models")
    choices = ex.config_choices(store, model)
    chosen = st.multiselect("Configurations (saved ones, or a protocol's defaults)",
                            list(choices), key="exp-configs")
    left, middle, right = st.columns(3)
    repeats = left.number_input("Repeats", 1, ex.MAX_REPEATS, 1, key="exp-repeats")
    concurrency = middle.number_input("Runs at a time", 1, ex.MAX_CONCURRENCY,
                                      ex.DEFAULT_CONCURRENCY, key="exp-concurrency")
    name = right.text_input("Name (optional)", key="exp-name")
    equal = st.checkbox("Add an equal-compute vote beside each configuration",
                        key="exp-equal-compute",
                        help="a vote of as many samples as the configuration makes calls, on "
                             "the same models, so the comparison is at equal compute")
    if problem:
        st.error(md(problem))
        return
    if not chosen:
        st.info("Choose one or more configurations to see the preflight.")
        return
    try:  # confirmed=True for the preview: the numbers are shown, the box below confirms
        plan = ex.plan({**(questions or {}), "configs": [choices[c] for c in chosen],
                        "repeats": int(repeats), "concurrency": int(concurrency),
                        "name": name, "baseline": ex.EQUAL_COMPUTE if equal else None},
                       store, endpoints=_shared.endpoints(), confirmed=True)
    except ConfigError as exc:
        st.error(md(exc))
        return
    cols = st.columns(3)
    cols[0].metric("Runs", f"{plan.runs:,}")
    cols[1].metric("Calls", f"{plan.calls:,}")
    cols[2].metric("Tokens (estimate)", f"~{plan.tokens:,}")
    st.dataframe(plan.per_config, hide_index=True)
    confirmed = True
    if plan.needs_confirmation:
        st.warning(f"This experiment plans {plan.calls:,} model calls, more than "
                   f"{ex.MAX_CALLS:,}.")
        confirmed = st.checkbox(f"I confirm {plan.calls:,} model calls", key="exp-confirm")
    if st.button("Start experiment", type="primary", key="exp-start", disabled=not confirmed):
        experiment_id = ex.create(store, plan)
        _shared.tasks().start_experiment(experiment_id, endpoints=_shared.endpoints())
        st.session_state[SELECTED] = experiment_id
        st.session_state["exp-pick"] = experiment_id  # the picker shows the new one
        st.session_state["exp-clear-form"] = True  # no second, paid Start one click away
        st.session_state["exp-flash"] = f"Started {plan.name!r} ({experiment_id})."
        st.query_params["experiment"] = experiment_id
        st.rerun()


flash = st.session_state.pop("exp-flash", None)
if flash:
    st.toast(md(flash), icon=":material/science:")
    st.success(md(flash) + " Its progress and results are below.")
experiments = ex.list_experiments(store)
with st.expander("New experiment", expanded=experiments.empty):
    new_experiment()

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


experiment_id = st.selectbox("Experiment", ids, format_func=labels.get, key="exp-pick",
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
    if _shared.tasks().task(experiment_id) is not None and st.button("Stop", key="exp-stop"):
        _shared.tasks().stop(experiment_id)
        st.toast("Stopping: runs in flight end after their current call.")
else:
    show_progress(state)
    verb = "Start" if state.status == "planned" else "Resume"
    if state.status != "completed" and st.button(verb, type="primary", key="exp-resume",
                                                 help="runs the cells without a completed run"):
        try:
            _shared.tasks().start_experiment(experiment_id, endpoints=_shared.endpoints())
        except ConfigError as exc:
            st.error(md(exc))
        else:
            st.rerun()


# ------------------------------------------------------------------ results
_experiment_results.show(store, experiment_id, state)
