"""The Experiments page's approved baseline: which experiment of this name the gate
(`python -m engine gate`) compares later ones with, who approved it and when, the earlier
approvals, and "Approve as baseline" for an analyst. Every value comes from
`engine.store.approvals` (through `engine.experiments`)."""
from __future__ import annotations

import streamlit as st

from engine import ConfigError
from engine import experiments as ex
from engine.store import Store
from engine.store.approvals import approve, history
from pages import _shared


def section(store: Store, experiment_id: str, state: ex.Progress) -> None:
    """The baseline of the experiment's name, its history and the approve button."""
    name = ex.get(store, experiment_id)["name"]
    approvals = history(store, name)
    st.subheader("Approved baseline")
    if approvals.empty:
        st.caption("No experiment of this name is approved as a baseline yet: the gate "
                   "compares a later experiment with the one approved here.")
    else:
        current = approvals.iloc[0]
        who = current["approved by"] or "someone not recorded"
        when = f"{current['approved at']:%Y-%m-%d %H:%M} UTC"
        if current["experiment"] == experiment_id:
            st.success(_shared.md(f"This experiment is the approved baseline of its name, "
                                  f"approved by {who} on {when}."))
        else:
            st.caption(_shared.md(f"The approved baseline of this name is experiment "
                                  f"{current['experiment']}, approved by {who} on {when}."))
        if len(approvals) > 1:
            with st.expander(f"Earlier baselines ({len(approvals) - 1})"):
                st.dataframe(approvals.iloc[1:].drop(columns=["current", "name"]),
                             hide_index=True)
    allowed = _shared.can("run experiments")
    complete = state.status == "completed" and state.done >= state.total
    current_id = None if approvals.empty else approvals.iloc[0]["experiment"]
    if current_id != experiment_id and st.button(
            "Approve as baseline", key="exp-approve", disabled=not (allowed and complete),
            help=("the gate compares later experiments of this name with this one"
                  if complete else "only an experiment whose every run completed can be "
                  "approved") if allowed else _shared.refusal("run experiments")):
        actor = _shared.actor()
        try:
            approve(store, experiment_id, actor.user, actor=actor)
        except ConfigError as exc:
            st.error(_shared.md(exc))
        else:
            st.rerun()
