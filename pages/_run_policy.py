"""The Run page's call policy and preflight: the "Advanced: calls" fields (per-call timeout,
retries, calls at once), the preflight line with its time estimate, and a run's call policy
line. The numbers come from `engine.services` (runform, timing); this module only shows
them."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import streamlit as st

from engine import ConfigError, Resolved, RunConfig
from engine.llm import policy as call_policy
from engine.reports import blind, timing
from engine.services import library, runform
from pages import _shared

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry
    from engine.store import Store

md = _shared.md


def area(built: Resolved | None, given: Mapping[str, Any], endpoints: EndpointRegistry,
         key: Callable[[str], str]) -> tuple[dict[str, Any], call_policy.CallPolicy]:
    """The "Advanced: calls" fields; returns (the values shown, the defaults they start
    from). A field starts at the loaded configuration's value, else at what the seats'
    endpoints set (or the default); when the seats change endpoint, a field not loaded from
    the configuration follows the new default."""
    defaults, from_endpoints = timing.policy_defaults(built, endpoints) if built else (
        call_policy.DEFAULTS, {})
    values: dict[str, Any] = {}
    with st.expander("Advanced: calls"):
        sources = sorted({n for names in from_endpoints.values() for n in names})
        st.caption(md("Defaults: " + (f"what endpoint {', '.join(sources)} sets, else "
                                      if sources else "")
                      + "Parley's (60 s, 2 retries, 8 calls at once). A value changed here "
                        "is kept with the run, and Re-run repeats it."))
        for column, name in zip(st.columns(3), call_policy.FIELDS):
            info = call_policy.field_info(name)
            low, high, whole = info["low"], info["high"], info["whole"]
            default = getattr(defaults, name)
            start = next(v for v in (given.get(name), default, low) if v is not None)
            k = key(f"policy-{name}-{default}")
            st.session_state.setdefault(k, int(start) if whole else float(start))
            values[name] = column.number_input(
                info["title"], int(low) if whole else float(low),
                int(high) if whole else float(high), key=k, help=info["help"],
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


def checked(build: Callable[[], RunConfig], given: Mapping[str, Any],
            endpoints: EndpointRegistry,
            key: Callable[[str], str]) -> tuple[Resolved | None, Any, str]:
    """Build the form's configuration, show its call policy fields, and check both as a run
    would: (the configuration resolved once, its cost preflight, "" or what to fix). The
    seats are checked first, since the fields' defaults come from the seats' endpoints."""
    try:
        built = library.check_config(build(), endpoints)
    except ConfigError as exc:
        area(None, given, endpoints, key)
        return None, None, str(exc)
    policy, defaults = area(built, given, endpoints, key)
    try:
        built = runform.with_call_policy(built, policy, defaults)
        return built, built.estimate(), ""
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


def preflight(built: Resolved, cost: Mapping[str, int], store: Store,
              endpoints: EndpointRegistry) -> None:
    """The preflight: calls and tokens, the time they take at the measured (or declared)
    pace, and a warning per endpoint that serves fewer calls at once than the run asks."""
    simulated = built.simulated
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
        for world in blind.config_worlds([built], label="this run"):
            st.caption(md(f"simulated world of {world}"))


def policy_caption(config: Mapping[str, Any], endpoints: EndpointRegistry) -> None:
    """The run view's call policy line (from the run's stored configuration)."""
    if config.get("protocol"):
        st.caption(md(runform.policy_line(config, endpoints)))
