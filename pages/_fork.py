"""The run detail's "Fork at round" control: keep a stored run's turns before round
k, optionally drop an agent or edit one kept turn, run the rest in the background
(`engine.services.fork`), and open Compare with the original."""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import streamlit as st

from engine import ParleyError
from engine.services import fork
from pages import _shared

WAIT = 60.0  # seconds the page waits for the fork to end before it opens Compare anyway
NO_DROP = "(keep every agent)"


def _wait(run_id: str) -> None:
    store = _shared.store()
    ends = time.monotonic() + WAIT
    while time.monotonic() < ends and store.run_state(run_id)["status"] == "running":
        time.sleep(0.2)


def control(run: Mapping[str, Any], open_compare: Callable[[list[str]], None]) -> None:
    """The control under a run's detail (nothing for a run that cannot be forked), and a
    button back to the run a fork was forked from."""
    parent = fork.forked_from(run)
    if parent is not None and st.button(
            f"⚖️ Compare with the run it forked ({_shared.md(parent[0])}, round {parent[1]})",
            key="fork_compare_parent"):
        open_compare([parent[0], str(run["id"])])
    if run.get("protocol") not in fork.FORKABLE or run.get("status") == "running" \
            or _shared.store().read_only:
        return
    rounds = max((int(t.get("round") or 0) for t in run.get("turns") or []), default=0)
    if rounds < 1:
        return
    with st.expander("🍴 Fork at round"):
        st.caption("Keep the turns before round k (not called again), optionally drop an "
                   "agent or edit one kept reply, run the rest with the same configuration, "
                   "and compare the fork with this run.")
        number = int(st.number_input("Fork at round", 1, rounds, min(2, rounds),
                                     key="fork_round"))
        drop = st.selectbox("Drop an agent", [NO_DROP, *fork.droppable(run)], key="fork_drop")
        kept = [t for t in run.get("turns") or [] if 1 <= int(t.get("round") or 0) < number
                and t.get("seat") != drop]
        labels = {int(t["idx"]): f"turn {t['idx']}: round {t['round']}, {t['seat']}"
                  for t in kept}
        edit = st.selectbox("Edit a kept turn's reply", list(labels), index=None,
                            format_func=labels.__getitem__, placeholder="(no edit)",
                            key="fork_edit")
        edits: dict[int, str] = {}
        if edit is not None:
            reply = next(str(t.get("reply") or "") for t in kept if int(t["idx"]) == edit)
            edits[edit] = st.text_area("Its new reply", reply, max_chars=fork.MAX_EDIT,
                                       key=f"fork_text_{edit}")
        if run.get("imported_at"):
            st.warning(_shared.md(
                f"This run was imported (by {run.get('imported_by') or 'an unnamed import'}): "
                "the turns a fork keeps are what its file claims, not calls made here."))
        allowed = _shared.can("start runs")
        if not allowed:
            st.caption(_shared.refusal("start runs"))
        if st.button("Fork and compare", key="fork_go", type="primary", disabled=not allowed):
            try:
                # the run whole: the detail read each kept reply's start only
                whole = _shared.store().get(str(run["id"]))
                planned = fork.plan(whole, number, None if drop == NO_DROP else drop, edits)
                new_id = _shared.tasks().start_run(planned.config, planned.question,
                                                   endpoints=_shared.endpoints(),
                                                   actor=_shared.actor(), **planned.options)
            except ParleyError as exc:
                st.error(_shared.md(f"Cannot fork: {exc}"))
                return
            with st.spinner("Running the fork…"):
                _wait(new_id)
            open_compare([str(run["id"]), new_id])
