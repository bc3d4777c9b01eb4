"""What every page shares: settings, the store and task runner, and text-safe rendering.

Settings (environment, then `st.secrets` when a secrets file exists) are read again on every
page run and every action, and built again only when the secrets' content changed (the roles
above all: a role taken away reaches open tabs at their next click). They are passed down:
the endpoint registry built from them goes with every run, experiment and re-run this session
starts. Nothing is written into `os.environ`, and a settings error is redacted before it is
shown (a key pasted into the wrong field never reaches a page). The store and the task
runner are created once per process and database URL with `st.cache_resource`, so sessions
share them (a run started in one session can be watched and stopped from any other) and tests
with different databases never do.
Everything that comes from a user or a model is rendered as text: `st.text`, data frames, or
(for labels and captions, which parse markdown) text whose every punctuation character is
escaped.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitSecretNotFoundError
from streamlit.string_util import is_emoji

from engine import ConfigError, Store
from engine.access import LOCAL, NEEDS, Actor, Roles, sign_in_problem
from engine.llm.endpoints import EndpointRegistry, free_urls_allowed
from engine.llm.notify import notify_url
from engine.llm.providers import providers_status
from engine.redaction import redact, redact_log_records, secret_values
from engine.services.stores import served_store
from engine.services.tasks import TaskRunner
from engine.store import DEFAULT_URL, RunFilters


def _secrets() -> dict[str, Any]:
    """`st.secrets` as a plain mapping; empty when there is no secrets file."""
    try:
        return dict(st.secrets.to_dict())
    except (FileNotFoundError, StreamlitSecretNotFoundError):
        return {}


def load_settings(secrets: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Read settings: the environment first, then Streamlit secrets for what it lacks.

    The endpoint registry is built here (`PARLEY_ENDPOINTS`, `[endpoints.NAME]`,
    `OPENAI_BASE_URL` ...); base URLs that are not registered are allowed only when the
    operator sets `PARLEY_ALLOW_BASE_URLS=1`, and never receive a key. The registry holds
    the secrets mapping to find keys; no page shows a key's value, and an error about the
    settings passes `redact` (with every value the secrets hold under a secret's name) first.
    """
    secrets = _secrets() if secrets is None else dict(secrets)
    keys = secret_values(secrets)
    redact_log_records(keys)  # no key of the secrets reaches a log line
    allow = free_urls_allowed(os.environ, secrets)
    error = ""
    try:
        endpoints = EndpointRegistry.from_settings(os.environ, secrets, allow_free_urls=allow)
    except ConfigError as exc:  # a broken endpoint table: no endpoints, and say why
        error = redact(str(exc), keys)
        endpoints = EndpointRegistry(allow_free_urls=False, environ=os.environ,
                                     secrets=secrets)
    db_url = os.environ.get("PARLEY_DB_URL") or str(secrets.get("PARLEY_DB_URL") or "")
    try:  # where an experiment's end is announced (`engine.llm.notify`)
        notify = notify_url(os.environ, secrets)
    except ConfigError as exc:
        notify, error = None, error or str(exc)
    return {**_auth_settings(secrets, keys), "db_url": db_url or DEFAULT_URL,
            "providers": providers_status(endpoints),
            "endpoints": endpoints,
            "endpoint_rows": endpoints.describe(),
            "endpoint_error": error,
            "free_urls": allow,
            "notify_url": notify,
            "secrets_file": bool(secrets)}


def _auth_settings(secrets: Mapping[str, Any], keys: list[str]) -> dict[str, Any]:
    """Sign-in: on when the secrets hold Streamlit's `[auth]` table; the roles of
    `[parley.roles]` (`engine.access.Roles`), or why they cannot be read (then nobody gets
    in: `signed_in`); and `refused`, why no page may be served at all (a sign-in setting
    without `[auth]`: `engine.access.sign_in_problem`)."""
    parley = secrets.get("parley")
    auth = "auth" in secrets
    refused = redact(sign_in_problem(secrets), keys)
    try:
        roles = Roles.parse(parley.get("roles") if isinstance(parley, Mapping) else None)
    except ConfigError as exc:
        return {"auth": auth, "roles": Roles({}, {}), "roles_error": redact(str(exc), keys),
                "refused": refused}
    return {"auth": auth, "roles": roles, "roles_error": "", "refused": refused}


def _leave_pages_directory_mode(first_run: bool) -> None:
    """Rerun through app.py's `st.navigation` when Streamlit ran a page file on its own.

    Until some session in this process has called `st.navigation`, Streamlit treats a
    `pages/` folder as the old file-per-page app: a first visit to `/run` on a fresh server
    would run pages/run.py without app.py (no navigation, no page config). Once the flag is
    off, a rerun goes through app.py, which picks the same page from the address. Only a
    session's first run is rerun, so no click is ever dropped (AppTest sets the flag again
    before every run and runs pages on their own, which works too).

    The flag is private: Streamlit has no supported switch, and its own advice (rename the
    folder) would break DESIGN's `pages/`. tests/test_pages_directory.py pins that the flag
    exists and that a fresh server's first visit to a deep link gets the whole app.
    """
    from streamlit.runtime.pages_manager import PagesManager
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        if first_run:
            st.rerun()


def _refuse(reason: str) -> None:
    """The one screen a page shows when the sign-in settings cannot be served."""
    st.title("Parley")
    st.error(md(f"This app serves no page: {reason}."), icon=":material/lock:")


def _fingerprint(secrets: Mapping[str, Any]) -> str:
    """What the settings are built from, as one digest: the secrets' content (never kept)."""
    text = json.dumps(secrets, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _session_settings() -> dict[str, Any]:
    """This session's settings, read again now: the secrets are read on every call (every
    page run and every action's callback) and the settings built again when their content
    changed, so an edited `[parley.roles]` takes effect at the next click in every tab."""
    secrets = _secrets()
    digest = _fingerprint(secrets)
    read = st.session_state.get("parley_settings")
    if not isinstance(read, dict) or read.get("fingerprint") != digest:
        read = {**load_settings(secrets), "fingerprint": digest}
        st.session_state["parley_settings"] = read
    return read


def settings() -> dict[str, Any]:
    """This session's settings (read afresh, `_session_settings`). Sign-in settings that
    cannot be served (roles without `[auth]`) stop every page on the reason; with sign-in on,
    a session that is not signed in with a role stops here, on the sign-in screen
    (`signed_in`): every page reads its settings first, so none draws anything for a
    stranger."""
    _leave_pages_directory_mode(first_run="parley_settings" not in st.session_state)
    read = _session_settings()
    if read["refused"]:
        _refuse(read["refused"])
        st.stop()
    if read["auth"] and actor().role is None:
        signed_in()  # the sign-in or "not authorised" screen, once
        st.stop()
    return read


# ------------------------------------------------------------------ who is signed in
# The identity every page and service uses (DESIGN section 5; `engine/access.py` holds the
# roles and the check):
#   current_user() -> str     the signed-in e-mail address, or "local" without [auth]
#   actor() -> Actor          that user with its role: pass it as `actor=` to every service
#                             that changes something (the service refuses with NotAllowed)
#   can(action) -> bool       whether the user may do an action of engine.access.NEEDS
#   refusal(action) -> str    the caption beside a hidden or disabled control
def current_user() -> str:
    """The signed-in user's e-mail address, or "local" when sign-in is off (the single local
    user). What a run's `started_by` and a label's rater record."""
    return actor().user


def actor() -> Actor:
    """Who this session is, with the role `[parley.roles]` gives them (`LOCAL`, an admin,
    when sign-in is off; a role of None when signed out or not listed)."""
    read = _session_settings()
    if read["refused"]:  # sign-in settings without [auth]: nobody may do anything
        return Actor(LOCAL.user, None)
    if not read["auth"]:
        return LOCAL
    user = st.user
    if not user.get("is_logged_in"):
        return Actor("", None)
    email = user.get("email")
    role = None if read["roles_error"] or read["refused"] else read["roles"].role_for(
        email, user.get("email_verified"), user.get("sub"))
    return Actor(str(email or user.get("sub") or "?")[:200], role)


def can(action: str) -> bool:
    """True when this session's user may do `action` (a key of `engine.access.NEEDS`)."""
    return actor().can(action)


def refusal(action: str) -> str:
    """Why a control is hidden or disabled for this user (markdown-safe)."""
    who = actor()
    return md(f"Signed in as {who.user} ({who.role_title}): to {action} needs the "
              f"{NEEDS[action].title} role.")


def user_badge() -> None:
    """In the sidebar, with sign-in on: who is signed in, their role, and "Sign out"."""
    who = actor()
    if _session_settings()["auth"] and who.role is not None:
        with st.sidebar:
            st.caption(md(f"Signed in as {who.user} · {who.role_title}"))
            if st.button("Sign out", icon=":material/logout:", key="auth-logout"):
                st.logout()


def signed_in() -> bool:
    """With sign-in on, True for a signed-in user with a role; otherwise draws the sign-in
    screen (a stranger), or "not authorised" (signed in, no role; or a broken
    `[parley.roles]`), and returns False: the caller draws nothing else. Always True without
    `[auth]`, unless a sign-in setting is there without it (then the refusal, and False)."""
    read = _session_settings()
    if read["refused"]:
        _refuse(read["refused"])
        return False
    if not read["auth"]:
        return True
    if not st.user.get("is_logged_in"):
        st.title("Parley")
        st.write("Sign in to continue.")
        if st.button("Sign in", type="primary", icon=":material/login:", key="auth-login"):
            st.login()
        return False
    who = actor()
    if who.role is not None:
        return True
    st.title("Not authorised")
    if read["roles_error"]:
        st.error(md(f"Sign-in is on, but the roles cannot be read: {read['roles_error']}"))
    else:
        st.write(md(f"You are signed in as {who.user}, which has no role here. Ask the "
                    "operator to add you to [parley.roles]."))
    if st.button("Sign out", icon=":material/logout:", key="auth-logout"):
        st.logout()
    return False


def keep_form_state(pattern: str = r"run-\d+-") -> None:
    """Keep a page's half-filled form while the user visits other pages.

    Streamlit forgets a widget's value at the end of any run that does not draw it; copying
    the value back into session state makes it the user's, which Streamlit keeps.
    """
    matcher = re.compile(pattern)
    for name in list(st.session_state):
        if isinstance(name, str) and matcher.match(name):
            st.session_state[name] = st.session_state[name]


@st.cache_resource(show_spinner=False)
def _store(url: str) -> Store:
    return served_store(url)


@st.cache_resource(show_spinner=False)
def _tasks(url: str) -> TaskRunner:
    return TaskRunner(_store(url))


# What the pages import beyond this module; `warm_up` imports them in the background.
WARM_MODULES = ("plotly.express", "plotly.graph_objects", "pandas.io.formats.style",
                "engine.experiments", "engine.reports.baseline", "engine.reports.charts",
                "engine.reports.compare", "engine.reports.drill", "engine.reports.insights",
                "engine.reports.rounds", "engine.reports.share", "engine.reports.vega",
                "engine.services.rerun",
                # a run's detail names the simulated model's world (langchain-core: 0.8 s),
                # the Experiments page its workers (procrastinate: 0.25 s)
                "engine.simulated", "engine.services.jobs", "pages._experiment_form",
                "pages._experiment_results", "pages._insights_data", "pages._run_policy",
                "pages._workers")


def warm_up() -> None:
    """Import what the other pages need and build one small figure of each kind the reports
    draw, so the first visit to Insights, a run or an experiment finds them ready. Plotly
    loads a property's validator the first time a figure sets it: in one process the first
    figure took 0.7 s and the next 0.05 s."""
    import importlib
    for name in WARM_MODULES:
        importlib.import_module(name)
    import plotly.express as px
    import plotly.graph_objects as go
    layout = {"template": "plotly_white", "height": 300, "title": {"text": "warm", "font": {}},
              "legend": {"orientation": "h"}, "margin": {"l": 1}, "barmode": "group",
              "xaxis": {"type": "category", "title": "x"}, "yaxis": {"range": [0, 1],
                                                                     "tickformat": ".0%"}}
    traces = [{"type": "bar", "x": ["a"], "y": [1], "error_y": {"type": "data", "array": [0]},
               "marker": {"color": ["#000"]}, "text": ["a"], "customdata": [[1]],
               "hovertemplate": "%{x}"},
              {"type": "scatter", "x": [0], "y": [1], "mode": "lines+markers",
               "line": {"dash": "dot"}, "error_y": {"type": "data", "array": [0]}},
              {"type": "box", "x": ["a"], "q1": [0], "median": [1], "q3": [2],
               "lowerfence": [0], "upperfence": [2]},
              {"type": "histogram", "x": [1]},
              {"type": "sankey", "node": {"label": ["a", "b"]},
               "link": {"source": [0], "target": [1], "value": [1]}}]
    for trace in traces:
        go.Figure(data=[trace], layout=layout).to_dict()
    frame = pd.DataFrame({"start": pd.to_datetime(["2026-01-01"]), "seat": ["a"],
                          "finish": pd.to_datetime(["2026-01-02"]), "phase": ["p"]})
    px.timeline(frame, x_start="start", x_end="finish", y="seat", color="phase").to_dict()
    # Streamlit's first element in a process checks whether it runs in a REPL by walking the
    # stack (`inspect.stack`), which maps every loaded module to its file once: 0.24 s of the
    # first page a fresh server drew. Walking it here builds that map before any page.
    import inspect
    inspect.stack()


def open_store(url: str) -> Store:
    """The process-wide store for `url`, opened (migrated and back-filled) on first use."""
    return _store(url)


def store() -> Store:
    """The process-wide store for this session's database URL. A database this Parley cannot
    open (written by a newer Parley, say) stops the page with its one-line reason."""
    try:
        return _store(settings()["db_url"])
    except ConfigError as exc:
        said = str(exc)
        st.error(md(said[:1].upper() + said[1:] if said.startswith("cannot open the database")
                    else f"Cannot open the database: {said}"))
        st.stop()
        raise  # st.stop() ends the script run; this line is never reached


def rater() -> str:
    """Who is labelling in this session, as a label records it: the same name a run this
    session starts records as `started_by` (the signed-in address, or "local" without
    sign-in), so one person has one name in the store."""
    return current_user()


def read_only_banner(opened: Store) -> None:
    """Say so when the database is read-only (runs can be listed and read, not started)."""
    if opened.read_only:
        st.info("This database is read-only: runs can be read, not started.",
                icon=":material/lock:")


def tasks() -> TaskRunner:
    """The process-wide task runner for this session's database URL: every run, re-run,
    experiment and demo the app starts runs on it."""
    return _tasks(settings()["db_url"])


def endpoints() -> EndpointRegistry:
    """This session's endpoint registry: every run, experiment and re-run takes it."""
    return settings()["endpoints"]


def endpoint_hints(provider: str = "openai") -> str:
    """A caption naming the registered endpoints as specs, and whether free URLs are on."""
    registry = endpoints()
    names = registry.names(provider)
    listed = ", ".join(f"{provider}:MODEL?endpoint={name}" for name in names)
    free = ("other base URLs may be typed (called without any server-side key)"
            if registry.allow_free_urls else
            "other base URLs are refused (the operator allows them with "
            "PARLEY_ALLOW_BASE_URLS=1)")
    return (f"Registered endpoints: {listed}; {free}." if names else
            f"No endpoints are registered; {free}.")


# ------------------------------------------------------------------ text-safe rendering
SHORT_METRIC = 10  # characters a metric value may have before it is shown as bold text
# Characters of the metric's big font that fit across the main column at 1280 px (with the
# sidebar open): a row of n tiles holds about ROW_CHARS / n per tile before one is cut off.
ROW_CHARS = 40
_MD_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character
WORD_JOINER = "\u2060"
_RATE = re.compile(r"(\S+) (\[[^\]]*\] n=[\d,]+)")  # engine.views.aggregate.rate_text
_AUTOLINK = re.compile(r"(?i)(?<![a-z0-9])(https?|ftp|mailto|xmpp|www)(?=[:.])"
                       r"|(?<=[a-z0-9._+-])(?=@[a-z0-9])")


def md(text: Any) -> str:
    """Text made inert for any markdown-rendering element: every ASCII punctuation character
    is backslash-escaped (no HTML, links, images, emphasis, directives or LaTeX), and line
    breaks are kept. Streamlit also turns bare URLs, `www.` names and e-mail addresses into
    live links, escaped or not: an invisible word joiner (U+2060) after the scheme or `www`
    and before `@` keeps them text (measured in Chromium: 0 links)."""
    unlinked = _AUTOLINK.sub(lambda m: (m.group(1) or "") + WORD_JOINER, str(text))
    escaped = _MD_PUNCTUATION.sub(r"\\\1", unlinked)
    return escaped.replace("\r\n", "\n").replace("\n", "  \n")


def simulated_note(simulated: bool, worlds: Iterable[str] = ()) -> None:
    """The visible label every simulated run carries, with the world it was made in: the
    simulator's parameters, and that its only truth is the run's expected answer."""
    if simulated:
        st.caption(":material/science: **simulated** — made by the offline simulated model, "
                   "not a real LLM: seeded agent dynamics whose only truth is the run's "
                   "expected answer")
        for world in worlds:
            st.caption(md(f"simulated world: {world}"))


def metrics_row(items: Iterable[tuple[str, Any]]) -> None:
    """Labelled values side by side as metrics. A rate with its interval and n ("33% [10%–70%]
    n=6") shows the rate big and the interval and n under it; the big metric font would cut
    off a value longer than a tile holds at 1280 px (`ROW_CHARS` over the row's tiles), so
    then the whole row is text."""
    items = list(items)
    rates = [_RATE.fullmatch(str(value)) for _, value in items]
    fits = max(3, min(SHORT_METRIC, ROW_CHARS // max(1, len(items))))
    long = any(len(str(rate.group(1) if rate else value)) > fits
               for (_, value), rate in zip(items, rates, strict=True))
    for column, (label, value), rate in zip(st.columns(max(1, len(items))), items, rates,
                                            strict=True):
        if rate and not long:
            column.metric(md(label), md(rate.group(1)), md(rate.group(2)), delta_color="off",
                          delta_arrow="off")
        elif long:
            column.caption(md(label))
            column.markdown(f"**{md(value)}**")
        else:
            column.metric(md(label), md(value))


def render_blocks(blocks: Iterable[Any]) -> None:
    """Render a protocol's view blocks generically; every value is shown as text."""
    for number, block in enumerate(blocks):
        if block.title and block.kind not in ("metrics", "tally", "flow"):
            st.markdown(f"**{md(block.title)}**")  # a chart prints its own title
        if block.kind == "metrics":
            metrics_row(block.items)
        elif block.kind == "text":
            st.text(block.body or "—")
        elif block.kind == "table":
            if block.rows:
                from engine.views.ballots import canonical_rows
                st.dataframe(pd.DataFrame(canonical_rows(block.rows)), hide_index=True)
            else:
                st.caption("(none)")
        elif block.kind == "tally":
            from engine.reports import vega
            st.vega_lite_chart(spec=vega.tally(block.counts, block.winner or None,
                                               title=block.title), key=f"block-{number}",
                               width="content")
        elif block.kind == "flow":
            from engine.reports import charts
            from engine.views.ballots import flow_links
            st.plotly_chart(charts.sankey(flow_links(pd.DataFrame(block.rows)),
                                          **({"title": block.title} if block.title else {})),
                            key=f"block-{number}")
        elif block.kind == "warning":
            st.warning(md(block.body))
        else:
            st.caption(md(block.body))


def seat_icons(run: Mapping[str, Any]) -> dict[str, str]:
    """Seat name -> icon from a stored run's configuration (any stored shape)."""
    seats = (run.get("config") or {}).get("seats") or []
    if isinstance(seats, Mapping):
        flat: list[Any] = []
        for value in seats.values():
            flat.extend(value if isinstance(value, list) else [value])
        seats = flat
    return {str(s.get("name")): str(s.get("icon") or "") for s in seats
            if isinstance(s, Mapping) and s.get("name")}


def avatar(icon: str | None, default: str = "🗣️") -> str:
    """An icon usable as an avatar: an emoji only (never a URL or a path to load)."""
    return icon if icon and is_emoji(icon) else default


def render_turn(turn: Mapping[str, Any], icon: str = "") -> None:
    """One turn as a chat bubble: who, which phase, and the reply as plain text; a JSON reply
    as its fields (stance, answer, reasoning ...), the raw JSON behind a toggle."""
    from engine.services.live import reply_fields
    with st.chat_message("assistant", avatar=avatar(icon)):
        status = "" if turn.get("status") == "ok" else " · degraded"
        round_text = f" · round {turn['round']}" if turn.get("round") else ""
        st.caption(md(f"{turn['seat']} · {turn['phase']}{round_text} · {turn.get('model', '')}"
                      f"{status}"))
        fields = reply_fields(turn)
        if fields:
            st.markdown("  \n".join(f"**{md(name)}**: {md(text)}" for name, text in fields))
            with st.expander("Raw reply (JSON)"):
                st.text(turn["reply"])
        elif turn.get("reply"):
            st.text(turn["reply"])
        if turn.get("error"):
            st.caption(md(f"error: {turn['error']}"))


LINK_FILTERS = ("protocol", "label", "tag", "model", "status")


def _follow_link(choices: dict[str, list[str]], key: str) -> list[str]:
    """Set the filters once from the address (`?protocol=…&label=…&status=…&q=…`: a chart
    clicked on Insights opens the runs behind it); returns the linked values no stored run
    has (their filters stay off)."""
    wanted = {name: str(st.query_params.get(name) or "")[:200]
              for name in (*LINK_FILTERS, "q")}
    wanted = {name: value for name, value in wanted.items() if value}
    unknown = [f"{name} {value!r}" for name, value in wanted.items()
               if name != "q" and value not in choices.get(name, [])]
    if wanted and st.session_state.get(f"{key}_linked") != wanted:
        st.session_state[f"{key}_linked"] = wanted
        for name in LINK_FILTERS:
            value = wanted.get(name, "")
            st.session_state[f"{key}_{name}"] = value if value in choices.get(name, []) else ""
        st.session_state[f"{key}_search"] = wanted.get("q", "")
    return unknown


def filter_widgets(choices: dict[str, list[str]], key: str, bind: bool = False) -> Any:
    """The Runs and Insights filters; every value goes to `Store.runs` as a bound parameter.
    The address can set them (`_follow_link`); with `bind`, each filter also stays in the
    address as `KEY_NAME=value`, so the page's address is a link to the view."""
    bound: Any = "query-params" if bind else None
    from engine.reports import runs as history
    for missing in _follow_link(choices, key):
        st.caption(md(f"No stored run has {missing}; that filter is off."))
    any_of = ["", *choices["protocol"]]
    top = st.columns(4)
    protocol = top[0].selectbox("Protocol", any_of, key=f"{key}_protocol", bind=bound,
                                format_func=lambda p: history.protocol_title(p) if p else "any")
    label = top[1].selectbox("Label", ["", *choices["label"]], key=f"{key}_label", bind=bound,
                             format_func=lambda v: v or "any")
    tag = top[2].selectbox("Tag", ["", *choices["tag"]], key=f"{key}_tag", bind=bound,
                           format_func=lambda v: v or "any")
    model = top[3].selectbox("Model", ["", *choices["model"]], key=f"{key}_model", bind=bound,
                             format_func=lambda v: v or "any")
    bottom = st.columns([1, 1.3, 2])
    status = bottom[0].selectbox("Status", ["", *choices["status"]], key=f"{key}_status",
                                 bind=bound, format_func=lambda v: v or "any")
    since, until = history.date_range(bottom[1].date_input(
        "Created between (UTC)", value=[], key=f"{key}_dates"))
    search = bottom[2].text_input("Search question, label or run id", key=f"{key}_search",
                                 bind=bound)
    return RunFilters(protocol=protocol or None, label=label or None, tag=tag or None,
                      model=model or None, status=status or None, search=search or None,
                      since=since, until=until)
