"""The Experiments page's new-experiment form: the questions, the configurations, repeats,
runs at a time and the call policy (per-call timeout, retries) written into the spec, the
preflight (runs, calls, tokens, and the time at the measured pace) and Start."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import streamlit as st

from engine import ConfigError
from engine import experiments as ex
from engine.llm import policy as calls
from engine.questions import catalogue
from engine.questions import files as qsets
from engine.reports import timing
from engine.reports.blind import config_worlds
from pages import _shared, _workers

if TYPE_CHECKING:
    from engine.store import Store

md = _shared.md
SELECTED = "experiments_page_selected"  # the experiment the page shows
NEW_FORM = "exp-new"  # the new-experiment expander: True while it is open


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
    st.success(md(qsets.read_note(items, upload.name)))
    return {"questions": [i.as_dict() for i in items], "source": f"file:{upload.name}"}, ""


FORM_KEYS = ("exp-configs", "exp-name", "exp-equal-compute", "exp-equal-tokens",
             "exp-budget", "exp-confirm", "exp-shuffled", "exp-both-sides")
# The inputs whose values are kept while the form is closed (not the upload, which Streamlit
# cannot set, nor the confirmation of a large plan, which is asked again).
KEPT = (r"exp-(source|set|model|configs|repeats|concurrency|name|equal-compute|equal-tokens|"
        r"budget|timeout-|retries-|on-workers|shuffled|both-sides)")


def clear() -> None:
    """After a Start: the form closed and emptied, so no second, paid Start is one click
    away. Called before the form's expander is drawn."""
    st.session_state[NEW_FORM] = False
    for key in FORM_KEYS:
        st.session_state.pop(key, None)


def new_experiment(store: Store) -> None:
    """The new-experiment form: questions, configurations, repeats, runs at a time, call
    policy; the preflight (runs, calls, tokens, time); Start."""
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
    policy = call_policy([choices[c] for c in chosen])
    equal = st.checkbox("Add an equal-compute vote beside each configuration",
                        key="exp-equal-compute",
                        help="a vote of as many samples as the configuration makes calls, on "
                             "the same models, so the comparison is at equal compute")
    tokens = st.checkbox("Add an equal-tokens vote beside each configuration",
                         key="exp-equal-tokens",
                         help="a vote whose tokens per run come closest to the "
                              "configuration's mean over its stored runs (the estimate "
                              "until it has some); its label states the ratio achieved")
    shuffled = st.checkbox("Shuffle the seats' order for each question and repeat",
                           key="exp-shuffled",
                           help="order: shuffled. Each question and repeat presents the seats "
                                "in its own order, drawn reproducibly; the Positions tab "
                                "shows the outcome by position")
    both_sides = st.checkbox("Run each debate both ways, sides swapped", key="exp-both-sides",
                             help="sides: both. Beside each debate configuration, its twin with "
                                  "the proponent seat against and the opponent seat for; the "
                                  "Positions tab shows the judge's consistency over the pairs")
    budget = st.number_input("Budget (US$, optional)", min_value=0.0, value=None,
                             step=1.0, format="%.2f", key="exp-budget",
                             help="no new run starts once the experiment has spent this much; "
                                  "the runs in flight finish and it ends stopped (budget)")
    if problem:
        st.error(md(problem))
        return
    if not chosen:
        st.info("Choose one or more configurations to see the preflight.")
        return
    try:  # confirmed=True for the preview: the numbers are shown, the box below confirms
        plan = ex.plan({**(questions or {}), "configs": [choices[c] for c in chosen],
                        "repeats": int(repeats), "concurrency": int(concurrency),
                        "name": name, "baseline": [ex.EQUAL_COMPUTE] * bool(equal)
                        + [ex.EQUAL_TOKENS] * bool(tokens),
                        **({"order": "shuffled"} if shuffled else {}),
                        **({"sides": "both"} if both_sides else {}),
                        **({"budget_usd": budget} if budget else {}), **policy},
                       store, endpoints=_shared.endpoints(), confirmed=True)
    except ConfigError as exc:
        st.error(md(exc))
        return
    cols = st.columns(4)
    cols[0].metric("Runs", f"{plan.runs:,}")
    cols[1].metric("Calls", f"{plan.calls:,}")
    cols[2].metric("Tokens (estimate)", f"~{plan.tokens:,}")
    cols[3].metric("Cost (estimate)", "unknown" if plan.cost_usd is None
                   else f"~${plan.cost_usd:,.4f}",
                   help="unknown: a model has no price (PARLEY_PRICES, or [prices] in "
                        "secrets.toml); the simulated model costs $0")
    st.dataframe(plan.per_config, hide_index=True)
    for note in plan.preflight()["notes"]:  # the simulator's blind spots, a budget too low
        st.warning(md(note))
    for world in config_worlds(plan.configs):  # what the simulated numbers will show
        st.caption(md(f"simulated world of {world}"))
    timed = ex.time_preflight(plan, store, _shared.endpoints())
    st.info(md(f"Time: {timed['text']}."))
    for line in timed["notes"]:
        st.warning(md(line))
    confirmed = True
    if plan.needs_confirmation:
        st.warning(f"This experiment plans {plan.calls:,} model calls, more than "
                   f"{ex.MAX_CALLS:,}.")
        confirmed = st.checkbox(f"I confirm {plan.calls:,} model calls", key="exp-confirm")
    on_workers = _workers.choose(store)
    may_run = _shared.can("run experiments")
    if not may_run:
        st.caption(_shared.refusal("run experiments"))
    if st.button("Start experiment", type="primary", key="exp-start",
                 disabled=not confirmed or not may_run):
        experiment_id = ex.create(store, plan, actor=_shared.actor())
        if on_workers:
            _workers.start(store, experiment_id)
        else:
            _shared.tasks().start_experiment(experiment_id, endpoints=_shared.endpoints(),
                                             actor=_shared.actor(),
                                             notify_url=_shared.settings()["notify_url"])
        st.session_state[SELECTED] = experiment_id
        st.session_state["exp-pick"] = experiment_id  # the picker shows the new one
        st.session_state["exp-clear-form"] = True  # no second, paid Start one click away
        st.session_state["exp-flash"] = f"Started {plan.name!r} ({experiment_id})."
        st.query_params["experiment"] = experiment_id
        st.rerun()


def call_policy(configs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-call timeout and retries for every configuration that sets none of its own,
    starting at what the seats' endpoints set (or the defaults); only a value changed from
    that goes into the spec, so the stored experiment and its resume keep it."""
    defaults = calls.DEFAULTS.model_dump()
    try:
        for name in calls.SPEC_FIELDS:
            defaults[name] = max([getattr(timing.policy_defaults(c, _shared.endpoints())[0],
                                          name) for c in configs] or [defaults[name]])
    except ConfigError:  # the plan below says what is wrong with the configuration
        pass
    given = {}
    for column, name in zip(st.columns(3), calls.SPEC_FIELDS):
        info = calls.field_info(name)
        kind = int if info["whole"] else float
        given[name] = kind(column.number_input(
            info["title"], kind(info["low"]), kind(info["high"]), kind(defaults[name]),
            step=1 if info["whole"] else 10.0, key=f"exp-{name}-{defaults[name]}",
            help=info["help"]))
    return {name: value for name, value in given.items() if value != defaults[name]}
