"""Run: configure a protocol, start it in the background, watch it live, see the result.

The run id lives in the address (`?run=ID`) and in the session, so navigating away or
refreshing loses nothing: the page reads the run's live state back from the store.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import streamlit as st

from engine import (
    REGISTRY,
    ConfigError,
    ParleyError,
    Resolved,
    RunConfig,
    get_protocol,
    prompt_templates,
)
from engine.llm.providers import SPEC_HELP
from engine.questions import QUESTION_SETS
from engine.reports import runs as runs_report
from engine.services import library, runform
from engine.services.runform import PACED_MODEL
from engine.text import words
from engine.views.blocks import Block, simulated_text, worlds
from pages import _run_policy, _shared

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry

store, tasks = _shared.store(), _shared.tasks()
endpoints = _shared.endpoints()  # every check and start below resolves models under it
md = _shared.md
NONE = ""
ROLE_HELP = ("The role's description (Personas & roles) reaches the model: this seat's system "
             "prompt gains the line \"Your role: …\". None: the protocol's own prompts only.")
ROLE_HELP_SAID = ("The role's description (Personas & roles) is what this protocol's system "
                  "prompt says this seat's role is.")


# ------------------------------------------------------------------ state
def open_run(run_id: str) -> None:
    st.session_state["run_page_run"] = run_id
    st.query_params["run"] = run_id
    st.rerun()


def close_run() -> None:
    st.session_state.pop("run_page_run", None)
    if "run" in st.query_params:
        del st.query_params["run"]
    st.rerun()


def load(values: dict) -> None:
    """Make `values` (config, question, expected) the form's starting point."""
    st.session_state["run_base"] = values
    st.session_state["run_gen"] = st.session_state.get("run_gen", 0) + 1


def key(name: str) -> str:
    """A widget key that a loaded configuration resets (a new generation of widgets)."""
    return f"run-{st.session_state.get('run_gen', 0)}-{name}"


def field(name: str, default) -> str:
    """A widget key whose first value comes from the base configuration."""
    k = key(name)
    st.session_state.setdefault(k, default)
    return k


# ------------------------------------------------------------------ watching a run
def transcript(turns: list[dict], icons: dict[str, str]) -> None:
    for turn in turns:
        _shared.render_turn(turn, icons.get(str(turn["seat"]), ""))


@st.fragment(run_every=1.0)
def live(run_id: str, protocol: str, icons: dict[str, str]) -> None:
    """Polls the run every second while it goes, reading only its state and the turns
    written since the last poll; a full rerun once it is over."""
    progress = tasks.progress(run_id, protocol)
    if progress["status"] != "running":
        st.rerun()
    phases = progress["phases"]
    phase = (f"phase {progress['phase_number']} of {len(phases)}: {progress['phase']}"
             if progress["phase_number"] else progress["phase"] or "starting")
    calls = (f"{progress['calls_done']} of ~{progress['estimated_calls']} calls"
             if progress["estimated_calls"] else f"{progress['calls_done']} calls")
    st.progress(progress["fraction"], text=md(f"Running — {phase} · {calls}"))
    if progress["stopping"]:
        st.info("Stopping after the call in flight…")
    elif st.button("Stop", icon=":material/stop_circle:", key="run-stop",
                   disabled=not _shared.can("stop runs")):
        tasks.stop(run_id, actor=_shared.actor())
        st.info("Stopping after the call in flight…")
    transcript(progress["turns"], icons)


def finished(run: dict, icons: dict[str, str]) -> None:
    status = run["status"]
    if status == "completed" and run.get("degraded_run"):
        st.warning(md(f"Completed in {run['duration']:.1f} s, but degraded: it lost "
                      f"{run.get('lost') or 'a decisive call'}. Its outcome rests on what "
                      "is left."))
    elif status == "completed":
        st.success(f"Completed in {run['duration']:.1f} s.")
    elif status == "interrupted":
        st.warning(md(f"Interrupted ({run.get('error') or 'stopped'}); the turns made before "
                      "the stop are kept."))
    else:
        st.error(md(f"Failed: {run.get('error') or 'unknown error'}"))
    _shared.render_blocks([Block("metrics", items=[
        ("Calls", run["calls"]), ("Degraded", run["degraded"]),
        ("Tokens in", run["tokens_in"]), ("Tokens out", run["tokens_out"]),
        ("Cost", runs_report.run_cost_text(run, run.get("turns") or []))])])
    if run.get("expected"):
        verdict = {True: "correct", False: "wrong", None: "not judged"}[run.get("correct")]
        st.caption(md(f"Expected answer: {run['expected']} — {verdict}"))
    blocks = runs_report.result_blocks(run)
    if blocks:
        st.subheader("Result")
        _shared.render_blocks(blocks)
    left, right = st.columns(2)
    left.page_link("pages/runs.py", label="Open this run on the Runs page",
                   icon=":material/history:", query_params={"run": run["id"]})
    right.download_button("Export as JSON", store.export_run(run["id"]),
                          file_name=f"parley-{run['id']}.json", mime="application/json",
                          icon=":material/download:", key="run-export")
    st.subheader(f"Transcript — {len(run['turns'])} turns")  # open, as while the run went
    transcript(run["turns"], icons)


def watch(run_id: str) -> None:
    run = store.get(run_id)
    spec = get_protocol(run["protocol"])
    title, button = st.columns([5, 1])
    title.subheader(md(f"{spec.title} · run {run_id}"))
    if button.button("New run", icon=":material/add:", key="run-new"):
        close_run()
    st.text(run["question"])
    if run.get("label"):
        st.caption(md(f"label: {run['label']}"))
    _run_policy.policy_caption(run.get("config") or {}, endpoints)
    _shared.simulated_note(bool(run.get("simulated")) or bool(simulated_text(
        run.get("simulated"), run.get("models"), run.get("config"))),
        worlds(run.get("models"), run.get("config")))
    icons = _shared.seat_icons(run)
    if run["status"] == "running":
        live(run_id, run["protocol"], icons)
    else:
        finished(run, icons)


# ------------------------------------------------------------------ configuring a run
def pick_bundled() -> None:
    """Copy a bundled question (and its expected answer) into the form."""
    chosen = st.session_state.get(key("bundled"))
    if chosen:
        question = BUNDLED[chosen]
        st.session_state[key("question")] = question.text
        st.session_state[key("expected")] = question.expected or ""


BUNDLED = {f"{name}: {q.text}": q for name, qs in QUESTION_SETS.items() if name != "demo"
           for q in qs}


def seat_rows(slot, choices: list[dict], protocol: str, personas: list[str],
              roles: list[str], included: bool) -> list[dict]:
    """The pickers for one slot; returns the chosen seats."""
    st.markdown(f"**{md(slot.name)}** — {md(slot.help)}" if slot.help else f"**{md(slot.name)}**")
    base = f"{protocol}-{slot.name}"
    if slot.many:
        count = st.number_input(f"How many {slot.name}", slot.minimum, slot.maximum,
                                key=field(f"{base}-count", max(slot.minimum, min(
                                    slot.maximum, len(choices) or slot.minimum))))
    elif slot.optional:
        count = int(st.checkbox(f"Include a {slot.name}", key=field(f"{base}-on", included)))
    else:
        count = 1
    chosen = []
    for number in range(int(count)):
        start = choices[number] if number < len(choices) else {
            "name": "", "default_name": f"{slot.name} {number + 1}", "persona": NONE,
            "role": NONE, "model": "", "persona_text": ""}
        persona_options = [NONE, *personas] + (
            [start["persona"]] if start["persona"] and start["persona"] not in personas else [])
        role_options = [NONE, *roles] + (
            [start["role"]] if start["role"] and start["role"] not in roles else [])
        name_col, persona_col, role_col, model_col = st.columns([2, 2, 3, 2])
        row = f"{base}-{number}"
        # one header row per slot
        labels: Literal["visible", "collapsed"] = "visible" if number == 0 else "collapsed"
        name = name_col.text_input(
            "Seat name", key=field(f"{row}-name", start["name"]), label_visibility=labels,
            placeholder=f"the persona's, else {start.get('default_name') or slot.name}",
            help="Empty: the seat is named after its persona (tallies and Insights name it so).")
        persona = persona_col.selectbox(
            "Persona", persona_options, format_func=lambda p: p or "(none)",
            key=field(f"{row}-persona", start["persona"]), label_visibility=labels)
        role = role_col.selectbox("Role", role_options, format_func=lambda r: words(r) or "(none)",
                                  key=field(f"{row}-role", start["role"]),
                                  label_visibility=labels, help=ROLE_HELP_SAID
                                  if slot.role_in_template else ROLE_HELP)
        model = model_col.text_input("Model", placeholder="default model", help=SPEC_HELP,
                                     key=field(f"{row}-model", start["model"]),
                                     label_visibility=labels)
        chosen.append({"name": name, "default_name": start.get("default_name", ""),
                       "persona": persona, "role": role, "model": model,
                       "persona_text": start.get("persona_text", ""),
                       "temperature": start.get("temperature")})
        if start.get("temperature") is not None:
            st.caption(md(f"{name}: temperature {start['temperature']} (as saved)"))
    return chosen


def configure() -> None:  # noqa: C901, PLR0912, PLR0915
    live_ids = tasks.live()
    if live_ids:
        st.info(f"{len(live_ids)} run(s) going on now in this app.")
        for run_id in live_ids:
            if st.button(md(f"Watch run {run_id}"), icon=":material/visibility:",
                         key=f"watch-{run_id}"):
                open_run(run_id)

    saved = {c["label"]: c["config"] for c in store.saved_configs()}
    wanted = st.query_params.get("config")  # from "Use on the Run page" in the library
    if wanted:
        del st.query_params["config"]
        if wanted in saved:
            load({"config": saved[wanted]})
            st.rerun()
        st.warning(md(f"There is no saved configuration named {wanted}."))
    if saved:
        pick_col, load_col = st.columns([4, 1])
        pick = pick_col.selectbox("Start from a saved configuration", [NONE, *saved],
                                  format_func=lambda c: c or "(a new configuration)",
                                  key="run-saved-pick")
        load_col.write("")
        if load_col.button("Load", key="run-load", disabled=not pick):
            load({"config": saved[pick]})
            st.rerun()

    base = st.session_state.get("run_base", {})
    config = base.get("config") or {}
    names = list(REGISTRY)
    protocol = st.selectbox(
        "Protocol", names, format_func=lambda n: REGISTRY[n].title,
        key=field("protocol", config.get("protocol") if config.get("protocol") in names
                  else names[0]))
    spec = get_protocol(protocol)
    same = config.get("protocol") == protocol
    question = st.text_area(spec.question_name.capitalize(), height=100,
                            key=field("question", base.get("question", "")))
    ask, expect = st.columns([3, 2])
    ask.selectbox("…or take a bundled question", [NONE, *BUNDLED],
                  format_func=lambda q: q or "(choose one)", key=key("bundled"),
                  on_change=pick_bundled)
    expected = expect.text_input("Expected answer (optional)",
                                 key=field("expected", base.get("expected", "")))
    model = st.text_input("Default model for every seat", help=SPEC_HELP,
                          key=field("model", config.get("model", PACED_MODEL) if same
                                    else PACED_MODEL))
    st.caption(md(f"Pace: {PACED_MODEL} is the offline simulated model at about a second a "
                  "call, so a run can be watched; write simulated for instant runs. "
                  + _shared.endpoint_hints()))

    st.subheader("Seats")
    personas = [p["name"] for p in library.entries(store, "persona")]
    roles = [r["name"] for r in library.entries(store, "role")]
    starts = runform.slot_choices(store, protocol, config if same else None)
    choices = {slot.name: seat_rows(slot, starts[slot.name], protocol, personas, roles,
                                    runform.slot_included(slot, config if same else None))
               for slot in spec.slots}

    options, unshowable = {}, []
    if spec.options:
        st.subheader("Options")
        given = config.get("options") if same else {}
        given = given if isinstance(given, dict) else {}
        for column, option in zip(st.columns(max(3, len(spec.options))), spec.options):
            kind = runform.option_kind(option)
            problem = (runform.option_problem(protocol, option, given[option.name])
                       if option.name in given else "")
            if problem:  # shown as saved and refused: never silently replaced
                column.text_input(words(option.name), str(given[option.name]), disabled=True,
                                  key=key(f"{protocol}-option-{option.name}-saved"))
                options[option.name] = given[option.name]
                unshowable.append((option, problem))
                continue
            k = field(f"{protocol}-option-{option.name}", given.get(option.name, option.default)
                      if kind != "text" or option.choices
                      else str(given.get(option.name, option.default) or ""))
            with column:
                if option.choices:  # only its listed values (and, where it takes one, a seat)
                    seats = [runform.seat_name(slot_name, name=s["name"],
                                               persona=s["persona"],
                                               default_name=s["default_name"])
                             for slot_name, chosen in choices.items() for s in chosen
                             if option.or_seat]
                    value = st.selectbox(words(option.name), list(dict.fromkeys(
                        [*option.choices, *seats, st.session_state[k]])), key=k,
                        format_func=lambda c: "(default)" if c is None else str(c),
                        help=option.help or None)
                elif kind == "bool":
                    value = st.checkbox(words(option.name), help=option.help or None, key=k)
                elif kind in ("int", "float"):
                    value = st.number_input(words(option.name), option.minimum, option.maximum,
                                            help=option.help or None, key=k)
                else:
                    value = st.text_input(words(option.name), help=option.help or None, key=k)
            options[option.name] = runform.option_value(option, value)

    for option, problem in unshowable:
        st.error(md(f"The saved value of {option.name} cannot be used: {problem}."))
        if st.button(f"Use the default {option.name} ({option.default})",
                     key=key(f"{protocol}-option-{option.name}-reset")):
            st.session_state["run_base"]["config"]["options"][option.name] = option.default
            st.rerun()

    templates = prompt_templates(protocol)
    given_prompts = config.get("prompts") if same else {}
    given_prompts = given_prompts if isinstance(given_prompts, dict) else {}
    edited = {}
    with st.expander(f"Prompt templates — {len(templates)} prompts this protocol sends"):
        st.caption("Edit a prompt to override it for this configuration. A template may use "
                   "only its listed placeholders; they are checked before the run starts.")
        for name, template in templates.items():
            st.markdown(f"**{md(words(name))}** — {md(template['help'])}")
            st.caption("Placeholders: " + (md(", ".join("{" + p + "}"
                                                        for p in template["placeholders"]))
                                           or "none"))
            edited[name] = st.text_area(words(name), height=140, label_visibility="collapsed",
                                        key=field(f"{protocol}-prompt-{name}", given_prompts.get(
                                            name, template["template"])))

    label = st.text_input("Label (names a saved configuration; groups runs on Insights)",
                          key=field("label", config.get("label", "") if same else ""))
    seed = _run_policy.order_seed(config if same else {}, key)

    # A saved configuration's planted adversary (DESIGN 2.13) has no field: it is kept as saved.
    planted = {"adversary": config["adversary"]} if same and config.get("adversary") else {}
    if planted:
        st.caption(md(_run_policy.adversary_line(planted["adversary"])))
    built, cost, error = _run_policy.checked(lambda: runform.build_config(
        store, protocol, choices, model=model, options=options,
        prompts=runform.prompt_overrides(protocol, edited), label=label, order_seed=seed,
        **planted), config if same else {}, endpoints, key)
    base_problem = ""
    # the form rebuilt a loaded configuration: did it drop what it cannot show? Checked as a
    # run would only when it differs from what the form rebuilt
    if config and same and built is not None and not error:
        try:
            rebuilt = RunConfig.parse(config).stored() == built.given.stored()
        except ConfigError:
            rebuilt = False
        try:
            if not rebuilt:
                library.check_config(config, endpoints)
        except ConfigError as exc:
            base_problem = str(exc)
    if base_problem:
        error = base_problem
        st.error(md(f"The loaded configuration cannot be used as saved: {base_problem}. "
                    "The form shows what it could read of it."))
        if st.button("Use the configuration as the form shows it", key=key("use-form")) \
                and built is not None:
            st.session_state["run_base"] = {**base, "config": built.given.stored()}
            st.rerun()
    elif error:
        st.error(md(error))
    elif built is not None and cost is not None:
        _run_policy.preflight(built, cost, store, endpoints)

    if not question.strip():
        st.caption(md(f"Enter a {spec.question_name} to start."))
    start_col, save_col, _rest = st.columns([1, 2, 3])  # "Save configuration" whole
    may_run, may_save = _shared.can("start runs"), _shared.can("edit the library")
    if start_col.button("Start", icon=":material/play_arrow:", type="primary",
                        key="run-start", disabled=bool(error) or not question.strip()
                        or not may_run) and built is not None:
        try:
            run_id = tasks.start_run(built, question, expected=expected.strip() or None,
                                     tags=("app",), actor=_shared.actor())
        except ParleyError as exc:
            st.error(md(exc))
        else:
            load({"config": built.given.stored(), "question": question, "expected": expected})
            open_run(run_id)
    if save_col.button("Save configuration", icon=":material/save:", key="run-save",
                       disabled=bool(error) or not may_save) and built is not None:
        save(built, label, endpoints, replace=False)
    for action, allowed in (("start runs", may_run), ("edit the library", may_save)):
        if not allowed:
            st.caption(_shared.refusal(action))
    taken = st.session_state.get("run-save-taken")
    if taken and taken == label.strip():
        st.warning(md(f"A configuration is already saved as {taken}. Replacing it makes the "
                      "runs stored under that label mix two configurations."))
        replace_col, keep_col, _rest = st.columns([1, 1, 3])
        if replace_col.button(f"Replace {taken}", key="run-save-replace") and built is not None:
            save(built, label, endpoints, replace=True)
        if keep_col.button("Keep both (choose another label)", key="run-save-keep"):
            st.session_state.pop("run-save-taken", None)
            st.rerun()


def save(built: Resolved, label: str, endpoints: EndpointRegistry, replace: bool) -> None:
    """Save the configuration; a label already saved is kept until the user says replace."""
    try:
        library.save_config(store, built.given, label, endpoints=endpoints, replace=replace,
                            actor=_shared.actor())
    except library.LabelTaken as exc:
        st.session_state["run-save-taken"] = exc.label
        st.rerun()
    except ParleyError as exc:
        st.error(md(exc))
    else:
        st.session_state.pop("run-save-taken", None)
        st.success(md(f"{'Replaced' if replace else 'Saved'} the configuration {label}."))


st.title("Run")
_shared.read_only_banner(_shared.store())
current = st.query_params.get("run") or st.session_state.get("run_page_run")
if current and not store.exists(current):
    st.warning(md(f"There is no run {current} in this database."))
    current = None
    st.session_state.pop("run_page_run", None)
if current:
    st.session_state["run_page_run"] = current
    if st.query_params.get("run") != current:
        st.query_params["run"] = current
    watch(current)
else:
    configure()
