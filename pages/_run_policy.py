"""The Run page's call policy and preflight: the "Advanced: calls" fields (per-call timeout,
retries, calls at once), the preflight line with its time estimate, and a run's call policy
line. The numbers come from `engine.services` (runform, timing); this module only shows
them."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import streamlit as st

from engine import ConfigError
from engine.reports import blind, timing
from engine.services import library, runform
from pages import _shared

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry
    from engine.store import Store

md = _shared.md
LABELS = {"timeout_per_call": "Per-call timeout (s)", "retries": "Retries",
          "concurrency": "Calls at once"}
HELP = {"timeout_per_call": "seconds one model call may take before it is abandoned",
        "retries": "retries after a transient failure (rate limit, timeout, connection)",
        "concurrency": "model calls this run keeps in flight at once"}


def area(built: Mapping[str, Any] | None, given: Mapping[str, Any], endpoints: EndpointRegistry,
         key: Callable[[str], str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The "Advanced: calls" fields; returns (the values shown, the defaults they start
    from). A field starts at the loaded configuration's value, else at what the seats'
    endpoints set (or the default); when the seats change endpoint, a field not loaded from
    the configuration follows the new default."""
    defaults: dict[str, Any] = timing.policy_defaults(built, endpoints) if built else {
        **timing.DEFAULTS, "from": {name: [] for name in runform.POLICY}}
    values: dict[str, Any] = {}
    with st.expander("Advanced: calls"):
        sources = sorted({n for names in defaults["from"].values() for n in names})
        st.caption(md("Defaults: " + (f"what endpoint {', '.join(sources)} sets, else "
                                      if sources else "")
                      + "Parley's (60 s, 2 retries, 8 calls at once). A value changed here "
                        "is kept with the run, and Re-run repeats it."))
        for column, name in zip(st.columns(3), runform.POLICY):
            low, high = runform.POLICY_LIMITS[name]
            start = given[name] if given.get(name) is not None else defaults[name]
            whole = name != "timeout_per_call"
            k = key(f"policy-{name}-{defaults[name]}")
            st.session_state.setdefault(k, int(start) if whole else float(start))
            values[name] = column.number_input(
                LABELS[name], int(low) if whole else float(low),
                int(high) if whole else float(high), key=k, help=HELP[name],
                step=1 if whole else 10.0)
    return values, defaults


SEED_MAX = 2**53 - 1  # the largest whole number a browser's number field holds exactly


def order_seed(given: Mapping[str, Any], key: Callable[[str], str]) -> int | None:
    """The "Order seed" field (DESIGN 2.10): blank keeps the configured order; a number
    draws the order the seats are presented to one another in, the same for the same seed."""
    k = key("order-seed")
    start = given.get("order_seed")
    st.session_state.setdefault(k, start if isinstance(start, int) and 0 <= start <= SEED_MAX
                                else None)
    value = st.number_input("Order seed", min_value=0, max_value=SEED_MAX, step=1, key=k,
                            placeholder="blank: the configured order",
                            help="present the seats to one another (the others' answers in a "
                                 "prompt, the critic's list, a roundtable's speaking order, a "
                                 "duel's opener, a debate's sides to the judge) in an order "
                                 "drawn from this number; blank keeps the configured order")
    return None if value is None else int(value)


def checked(build: Callable[[], dict[str, Any]], given: Mapping[str, Any],
            endpoints: EndpointRegistry, key: Callable[[str], str]
            ) -> tuple[dict[str, Any] | None, Any, str]:
    """Build the form's configuration, show its call policy fields, and check both as a run
    would: (the configuration, its cost preflight, "" or what to fix). The seats are checked
    first, since the fields' defaults come from the seats' endpoints."""
    try:
        built = build()
        library.validate_config(built, endpoints)
    except ConfigError as exc:
        area(None, given, endpoints, key)
        return None, None, str(exc)
    policy, defaults = area(built, given, endpoints, key)
    try:
        built = runform.with_call_policy(built, policy, defaults)
        return built, library.validate_config(built, endpoints), ""
    except ConfigError as exc:
        return built, None, str(exc)


def adversary_line(adversary: Mapping[str, Any]) -> str:
    """What a saved configuration's planted adversary does, in words."""
    answer = str(adversary.get("answer") or "")
    what = ("a wrong answer drawn per question in an experiment (a single run needs the "
            "answer's text)" if answer.lower() == "planted" else f"the answer {answer}")
    if adversary.get("placebo"):
        return (f"Planted adversary's control, kept as saved: {adversary.get('seat')} gets the "
                "placebo persona, a line of the brief's length that pushes nothing.")
    return (f"Planted adversary, kept as saved: {adversary.get('seat')} is briefed to win the "
            f"others over to {what}.")


def preflight(built: Mapping[str, Any], cost: Mapping[str, int], store: Store,
              endpoints: EndpointRegistry, simulated: bool) -> None:
    """The preflight: calls and tokens, the time they take at the measured (or declared)
    pace, and a warning per endpoint that serves fewer calls at once than the run asks."""
    timed = timing.time_estimate([built], store=store, endpoints=endpoints)
    note = " · simulated model: offline, no cost" if simulated else ""
    st.info(md(f"Preflight: {cost['calls']} model calls when nothing fails, about "
               f"{cost['tokens']:,} tokens{note}; {timed['text']}."))
    for line in timed["notes"]:
        st.warning(md(line))
    if simulated:
        unread = blind.unread_note(built)
        if unread:
            st.caption(md(unread))
        for world in blind.config_worlds([{**built, "label": "this run"}]):
            st.caption(md(f"simulated world of {world}"))


def policy_caption(config: Mapping[str, Any], endpoints: EndpointRegistry) -> None:
    """The run view's call policy line (from the run's stored configuration)."""
    if config.get("protocol"):
        st.caption(md(runform.policy_line(config, endpoints)))
