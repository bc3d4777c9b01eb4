"""The Experiments page's pool of workers: when the store is PostgreSQL, an
experiment can run on `python -m engine worker` processes instead of this app's process.

`choose` is the start form's checkbox, `start` queues an experiment's cells for the pool, and
`section` shows the pool under an experiment's progress: its workers, the queues per endpoint,
throughput and ETA, with "Run on workers" and the pool's Stop. On SQLite nothing shows and
nothing changes. Every number comes from `engine.store.workers`.
"""
from __future__ import annotations

import streamlit as st

from engine import ConfigError
from engine import experiments as ex
from engine.services.jobs import stop, submit
from engine.store import Store
from engine.store import workers as pool_store
from engine.store.limits import shared as on_postgresql
from pages import _shared

REFRESH_EVERY = 2.0  # seconds between reads of the pool while it runs the experiment


def available(store: Store) -> bool:
    """True when the pool can be used: a writable PostgreSQL store."""
    return on_postgresql(store) and not store.read_only


def choose(store: Store) -> bool:
    """The start form's "Run on workers" checkbox (False, and nothing shown, on SQLite)."""
    if not available(store):
        return False
    return st.checkbox("Run on workers", key="exp-on-workers",
                       help="queue the cells for the pool of workers (python -m engine "
                            "worker, on any machine that reaches this database) instead of "
                            "running them in this app's process")


def start(store: Store, experiment_id: str) -> None:
    """Queue the experiment's pending cells for the pool (the page's Start with the box
    ticked, and its "Run on workers")."""
    count = submit(store, experiment_id, actor=_shared.actor())
    st.toast(f"{count} cell(s) queued for the workers.")


def pool_view(store: Store) -> None:
    """The pool: live workers, queue depth per endpoint, throughput and ETA."""
    live = pool_store.workers(store)
    depth = pool_store.queue_depth(store)
    rate = pool_store.throughput(store)
    left = int(depth["queued"].sum() + depth["running"].sum()) if not depth.empty else 0
    cols = st.columns(4)
    cols[0].metric("Workers", len(live))
    cols[1].metric("Cells queued or running", left)
    cols[2].metric("Throughput", f"{rate:.1f} cells/min", help="over the last 5 minutes")
    eta = ex.duration_text(60 * left / rate) if rate and left else ("0s" if not left else "?")
    cols[3].metric("ETA", eta)
    if live.empty:
        st.info("No workers running: start one with `python -m engine worker` on a machine "
                "that reaches this database (PARLEY_DB_URL).")
    else:
        st.dataframe(live, hide_index=True,
                     column_config={"cells_done": st.column_config.NumberColumn(
                         "cells done", help="experiment runs this worker finished (completed "
                         "or failed), counted from the runs it stored"),
                         "heartbeat": "last heartbeat"})
    if not depth.empty:
        st.dataframe(depth, hide_index=True)


def section(store: Store, experiment_id: str) -> None:
    """Under an experiment's progress: the pool, and "Run on workers" or the pool's Stop."""
    if not available(store):
        return
    found = ex.get(store, experiment_id)
    on_pool = found["status"] == "running" and found["host"] == pool_store.POOL_HOST
    with st.expander("Workers", expanded=on_pool):
        if on_pool:
            st.fragment(run_every=REFRESH_EVERY)(pool_view)(store)
            if st.button("Stop on workers", key="exp-pool-stop",
                         disabled=not _shared.can("run experiments"),
                         help="cancels the queued cells and stops those running"):
                count = stop(store, experiment_id, actor=_shared.actor())
                st.toast(f"Stopped: {count} job(s) cancelled or aborted.")
                st.rerun()
            return
        pool_view(store)
        if found["status"] not in ("running", "completed") and st.button(
                "Run on workers", key="exp-pool-run",
                disabled=not _shared.can("run experiments"),
                help="queue the cells without a completed run for the pool"):
            try:
                start(store, experiment_id)
            except ConfigError as exc:
                st.error(_shared.md(exc))
            else:
                st.rerun()
