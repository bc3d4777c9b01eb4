"""Runs: the history of stored runs with filters, and one run in detail at `?run=ID`."""
from __future__ import annotations

import dataclasses
from typing import Any
from urllib.parse import quote

import streamlit as st

from engine import ConfigError
from engine.reports import runs as history
from engine.services.rerun import original_of
from engine.views.ballots import flow_links
from engine.views.blocks import worlds
from pages import _labels, _shared

store = _shared.store()
md = _shared.md


def open_run(run_id: str) -> None:
    st.query_params["run"] = run_id
    st.rerun()


def back_to_history() -> None:
    st.query_params.pop("run", None)
    st.rerun()


def show_history() -> None:
    st.title("📚 Runs")
    _shared.read_only_banner(store)
    flash = st.session_state.pop("runs_flash", None)
    if flash:
        st.success(md(flash))
    filters = _shared.filter_widgets(history.choices(store), "runs")
    found = st.text_input("Search transcripts", key="runs_transcript", max_chars=200,
                          placeholder='words or "a phrase" from questions, replies, answers',
                          help="Full-text search; every word must appear somewhere in the "
                               "run. Each matching run shows where it matched.")
    filters = dataclasses.replace(filters, transcript=found or None)
    limit = st.segmented_control("Show the newest", history.HISTORY_LIMITS, default=200,
                                 key="runs_limit") or 200
    page = history.history(store, filters, limit=limit)
    if page.table.empty:
        if filters.active:
            st.info("No runs match these filters.")
        else:
            st.info("No runs stored yet. Start one on the Run page, or make demo runs on Home.")
        return
    more = (f" of {page.matching:,} matching; narrow the filters to see older ones"
            if page.more else "")
    st.caption(f"{len(page.table)} run(s){more}, newest first. Select a row to open it; "
               "`simulated` says `all` when the offline simulated model played every seat, "
               "`mixed: …` naming the seats it played when it played some.")
    table = page.table.assign(open="?run=" + page.table["id"])
    searched = ["match", "snippet"] if "snippet" in table else []
    picked = st.dataframe(
        table, hide_index=True, key="runs_table", on_select="rerun",
        selection_mode="single-row", placeholder="—",  # a missing value, not "None"
        # the answers an analyst reads first (outcome, confidence, mind changes, right or
        # wrong) in the first screenful at 1280 px, right after the run and its label (after
        # a transcript search, where each run matched comes first); the protocol and the
        # time after them, the question, wide, after those
        column_order=["open", *searched, "label", "outcome", "confidence", "mind changes",
                      "correct", "protocol", "created", "unanswered", "question",
                      "expected", "status", "simulated", "models", "calls", "degraded",
                      "tokens", "cost", "seconds"],
        height=min(38 + 35 * len(page.table), 560),
        column_config={"open": st.column_config.LinkColumn("run", display_text=r"\?run=(.*)"),
                       "question": st.column_config.TextColumn(
                           width="large", help="the whole question: widen the column or "
                           "hover a cell to read it all"),
                       "correct": st.column_config.CheckboxColumn(
                           help="the final answer against the expected one (empty: unscored)"),
                       "unanswered": st.column_config.CheckboxColumn(
                           help="given an expected answer, the run gave none: counted as "
                           "wrong"),
                       "snippet": st.column_config.TextColumn(
                           width="large", help="The matched words are between « and »"),
                       "outcome": st.column_config.TextColumn(width="medium"),
                       "confidence": st.column_config.TextColumn(
                           help="the run's confidence level (high, medium, low) or agreement "
                           "level, where its protocol has one"),
                       "mind changes": st.column_config.NumberColumn(
                           format="%d", help="agents whose answer changed (measured from "
                           "their answers, not claimed); empty where the protocol has none"),
                       "tokens": st.column_config.NumberColumn(format="%d"),
                       "cost": st.column_config.TextColumn(
                           help="US dollars at the configured prices; unknown when a model "
                           "has no price (never counted as $0)"),
                       "seconds": st.column_config.NumberColumn(format="%.2f")})
    rows = picked.selection.rows if picked is not None else []
    if rows:
        open_run(str(table.iloc[rows[0]]["id"]))
    compare_picker(page.table)
    show_unreadable(history.unreadable_runs(page.table))
    with st.form("open_by_id", border=False):
        left, right = st.columns([3, 1], vertical_alignment="bottom")
        wanted = left.text_input("Open a run by id", key="runs_open_id")
        if right.form_submit_button("Open") and wanted.strip():
            open_run(wanted.strip())


def compare_picker(table: Any) -> None:
    """Pick two or more runs of the table and open them side by side on the Compare page."""
    names = {str(i): f"{i} · {p} · {label or 'no label'} · {q[:60]}" for i, p, label, q in zip(
        table["id"], table["protocol"], table["label"], table["question"], strict=True)}
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    picked = left.multiselect("Compare runs side by side", list(names), key="runs_compare",
                              format_func=names.__getitem__, placeholder="Pick two or more runs")
    if right.button(f"⚖️ Compare {len(picked)} runs", key="runs_compare_go",
                    disabled=len(picked) < 2):
        open_compare(picked)


def open_compare(run_ids: list[str]) -> None:
    st.switch_page("pages/compare.py", query_params={"compare": ",".join(run_ids)})


def show_unreadable(broken: list[tuple[str, str]]) -> None:
    """Rows that could not be read in full: named by id, with why, and deletable."""
    if not broken:
        return
    with st.expander(f"⚠️ {len(broken)} run(s) could not be read in full", expanded=True):
        for run_id, why in broken:
            st.warning(md(f"Run {run_id}: {why}"))
            if not store.read_only:
                confirm_delete(run_id, f"runs_unreadable_{run_id}")


def confirm_delete(run_id: str, key: str, turns: int | None = None, place: Any = None) -> None:
    """A Delete button (in `place`), then Yes / Cancel. A running run is stopped first (its
    process, here or elsewhere, stops at its next turn)."""
    if not _shared.can("delete runs"):
        (place or st).caption(_shared.refusal("delete runs"))
        return
    if st.session_state.get("runs_delete") != run_id:
        if (place or st).button("🗑️ Delete run", key=f"{key}_ask", disabled=store.read_only,
                     help="Deletes the run and its turns; a running run is stopped first"):
            st.session_state["runs_delete"] = run_id
            st.rerun()
        return
    what = f" and its {turns} turn(s)" if turns is not None else " and its turns"
    st.warning(f"Delete run {md(run_id)}{what}? This cannot be undone.")
    yes, no = st.columns(2)
    if yes.button("Yes, delete it", type="primary", key=f"{key}_yes"):
        _shared.tasks().delete([run_id], actor=_shared.actor())  # stops it first
        st.session_state.pop("runs_delete", None)
        st.session_state["runs_flash"] = f"Deleted run {run_id}."
        back_to_history()
    if no.button("Cancel", key=f"{key}_no"):
        st.session_state.pop("runs_delete", None)
        st.rerun()


def linked_turn() -> int | None:
    """The turn the address names (`?run=ID&turn=N`: a reviewer's link to one call), or
    None when it names none or not a whole number."""
    raw = str(st.query_params.get("turn") or "")
    return int(raw) if raw.isdigit() and len(raw) < 7 else None


def show_turn(run_id: str, entry: dict, linked: bool = False) -> None:
    """One turn: its reply as read for the page (the start of a long one, the rest a click
    away), its warnings, and its prompts, read when their expander is opened. The one the
    address links to is marked, and the page scrolls to it; each has its own link
    (`?run=ID&turn=N`)."""
    with st.container(border=True, key=f"turn-{entry['index']}" if "index" in entry else None):
        if linked:
            st.html('<div id="parley-linked-turn"></div><script>document.getElementById('
                    '"parley-linked-turn").scrollIntoView({block: "start"});</script>',
                    unsafe_allow_javascript=True)
            st.info(":material/link: The turn this link points to.")
        st.markdown(f"**{md(entry['heading'])}**")
        if run_id and "index" in entry:
            st.caption(f"[Link to this turn](runs?run={quote(run_id, safe='')}"
                       f"&turn={int(entry['index'])})")
        parts = (entry["model"], entry["tokens"], entry["cost"], f"{entry['latency']:.2f} s",
                 entry["output"])
        st.caption(md(" · ".join(part for part in parts if part)))
        if entry["degraded"]:
            st.error(md(f"degraded: {entry['error'] or 'no reason recorded'}"))
        reply, whole = entry["reply"], f"runs_whole_{entry['idx']}"
        if len(reply) < entry["length"] and st.session_state.get(whole):
            reply = history.turn_text(store, run_id, entry["idx"])["reply"]
        st.text(reply or "(no reply)")
        if len(reply) < entry["length"]:
            st.caption(f"The first {len(reply):,} of its {entry['length']:,} characters"
                       + ("; the run's JSON export holds it whole." if st.session_state.get(
                           whole) else "."))
            if not st.session_state.get(whole) and st.button(
                    "Show the whole reply", key=f"{whole}_ask"):
                st.session_state[whole] = True
                st.rerun()
        for warning in entry["warnings"]:
            st.warning(md(f"parse warning: {warning}"))
        messages = entry["messages"]
        count = f" ({len(messages)})" if messages is not None else ""
        with st.expander(f"Prompt messages sent{count}", key=f"runs_prompts_{entry['idx']}",
                         on_change="rerun") as prompts:
            if messages is None and prompts.open:
                messages = history.turn_text(store, run_id, entry["idx"], reply=False)[
                    "messages"]
            for message in messages or ():
                st.caption(md(str(message.get("role", ""))))
                st.text(str(message.get("content", "")))


def show_actions(detail: history.RunDetail) -> None:
    from engine.reports import share  # plotly: imported when a run is opened, not for the list
    run = detail.run
    left, middle, right = st.columns(3)
    # made when clicked: the export reads every reply and prompt whole, the page does not
    left.download_button("⬇️ Export JSON", lambda: store.export_run(run["id"]),
                         file_name=f"parley-run-{run['id']}.json", mime="application/json",
                         key="runs_export")
    left.download_button("⬇️ Share as HTML",
                         lambda: share.run_html(history.run_detail(store, run["id"])),
                         file_name=f"parley-run-{run['id']}.html", mime="text/html",
                         key="runs_share", help="One file with the charts, transcript and "
                         "configuration that opens from disk without Parley")
    if middle.button("🔁 Re-run this configuration", key="runs_rerun",
                     disabled=not detail.rerunnable or run["status"] == "running"
                     or store.read_only or not _shared.can("start runs"),
                     help="Same seats, models, options and prompts, on the same question"):
        try:
            with st.spinner("Starting the re-run…"):
                new_id = _shared.tasks().start_rerun(run, _shared.endpoints(),
                                                     actor=_shared.actor())
        except ConfigError as exc:
            st.error(md(f"Cannot re-run: {exc}"))
        else:
            st.session_state["runs_flash"] = f"Re-run of {run['id']} started as {new_id}."
            open_run(new_id)
    confirm_delete(run["id"], "runs_delete", len(detail.transcript), place=right)
    from pages import _fork  # fork at round k, then compare
    _fork.control(run, open_compare)
    original = original_of(run)
    if original:
        if left.button(f"⚖️ Compare with original ({md(original)})", key="runs_compare_original",
                       help="This run is a re-run: see it beside the run it re-ran"):
            open_compare([original, run["id"]])


def show_result(detail: history.RunDetail) -> None:
    from engine.reports import charts, vega  # figures: only a run's detail draws them
    if not detail.blocks and detail.run["status"] == "running":
        st.info("This run is still going: its result shows here when it ends; its turns so "
                "far are in the transcript.")
    elif not detail.blocks:
        st.info("This run has no result (it did not complete); its turns are in the "
                "transcript.")
    _shared.render_blocks(detail.blocks)
    if detail.tallies:
        st.subheader("Tally")
        for column, (title, counts, winner) in zip(st.columns(len(detail.tallies)),
                                                   detail.tallies):
            with column:
                st.vega_lite_chart(spec=vega.tally(counts, winner, title),
                                   key=f"tally_{title}", width="content")
        st.caption("Votes per normalised stance; the winner is the darker bar.")
    if detail.flows is not None:
        st.subheader("Mind changes")
        st.plotly_chart(charts.sankey(flow_links(detail.flows)), key="flows")
        st.caption("Each band is one debater: its stance before the critique (left) and after "
                   "its rebuttal (right).")
    if detail.dynamics is not None:
        show_dynamics(detail.dynamics)


def show_dynamics(strip: history.DynamicsStrip) -> None:
    from engine.reports import charts
    st.subheader("Dynamics")
    st.plotly_chart(charts.dynamics_lines(strip.per_round), key="dynamics")
    st.caption("Per round: the entropy in bits of the answers given (0: one answer) and the "
               "plurality's share of them; abstentions are left out.")
    for flag in strip.flags:
        st.markdown(md(flag))
    if not strip.flips.empty:
        st.markdown("**Flips** (an agent's answer changed from the round before)")
        st.dataframe(strip.flips, hide_index=True, key="dynamics_flips")
    if not strip.influence.empty:
        st.markdown("**Influence** (moved to the answer the mover held the round before)")
        st.dataframe(strip.influence, hide_index=True, key="dynamics_influence")


def show_detail(run_id: str) -> None:
    if st.button("← All runs", key="runs_back"):
        back_to_history()
    try:
        detail = history.run_detail(store, run_id, preview=history.PREVIEW_CHARS)
    except KeyError:
        st.error(md(f"There is no run {run_id!r} in this database; it may have been deleted."))
        return
    run = detail.run
    flash = st.session_state.pop("runs_flash", None)
    if flash:
        st.success(md(flash))
    st.title(md(f"{detail.title} · run {run['id']}"))
    _shared.read_only_banner(store)
    _shared.simulated_note(detail.simulation == "all",
                           worlds(run.get("models"), run.get("config")))
    if detail.simulation.startswith("mixed"):
        seats = detail.simulation.removeprefix("mixed: ")
        st.caption(f":material/science: **simulated seats** ({md(seats)}) — played by the "
                   "offline simulated model; the other seats are real models")
    st.text(run["question"])
    meta = [f"label: {run['label']}" if run.get("label") else "no label",
            f"tags: {', '.join(run['tags'])}" if run.get("tags") else "",
            f"models: {run['models']}" if run.get("models") else "",
            f"created {str(run.get('created_at', ''))[:19].replace('T', ' ')} UTC",
            f"started by {run['started_by']}" if run.get("started_by") else "",
            # an imported run's `started_by` is what its file claims
            f"imported by {run.get('imported_by') or 'an unnamed import'} on "
            f"{str(run['imported_at'])[:19].replace('T', ' ')} UTC (who started it is the "
            "file's claim)" if run.get("imported_at") else ""]
    st.caption(md(" · ".join(m for m in meta if m)))
    # The actions come before everything a run's end changes (its progress, outcome and
    # figures): a run that ends while the page is open reruns it, and a click on Delete or
    # Yes at that moment must not land on whatever moved into the button's place.
    show_actions(detail)
    if detail.outcome:
        st.markdown(f"**Outcome:** {md(detail.outcome)}")
    if run["status"] == "completed" and run.get("degraded_run"):
        st.warning(md(f"Completed, but degraded: it lost {run.get('lost') or 'a decisive call'}."))
    elif run["status"] == "failed":
        st.error(md(f"Failed: {run.get('error') or 'unknown error'}"))
    if run["status"] == "running":
        watch_running(run["id"], run["protocol"])
    _shared.metrics_row(detail.facts)
    if detail.problems:
        with st.expander(f"⚠️ Errors and parse warnings ({len(detail.problems)})",
                         expanded=True):
            for problem in detail.problems:
                st.warning(md(problem))
    _labels.show_labels(store, run)
    show_tabs(detail)


DETAIL_TABS = ("Result", "Transcript", "Timeline & usage", "Configuration")


def show_tabs(detail: history.RunDetail) -> None:
    """The run's result, transcript, timeline and configuration as tabs. Only the open tab is
    drawn (switching tabs reruns the page): a long transcript or the timeline figures cost the
    browser seconds that a reader of the result never needs."""
    turn = linked_turn()
    result, transcript, timing, config = st.tabs(
        list(DETAIL_TABS), key="runs_tab", on_change="rerun", bind="query-params",
        default="Transcript" if turn is not None else None)
    if result.open:
        with result:
            show_result(detail)
    if transcript.open:
        with transcript:
            if not detail.transcript:
                st.info("No turns were recorded.")
            for entry in detail.transcript:
                show_turn(str(detail.run["id"]), entry, entry.get("index") == turn)
    if timing.open:
        with timing:
            show_timing(detail)
    if config.open:
        with config:
            st.caption("The configuration as stored (never any keys).")
            st.json(detail.run.get("config") or {})


def show_timing(detail: history.RunDetail) -> None:
    from engine.reports import charts
    if detail.timeline.empty:
        st.info("No calls were recorded.")
        return
    st.plotly_chart(charts.timeline(detail.timeline), key="timeline")
    st.caption("Each bar is one model call from start to finish; bars that overlap in "
               "time ran concurrently. Hatched bars are degraded calls.")
    st.plotly_chart(charts.seat_usage(detail.usage), key="usage")
    st.caption("Tokens in and out, and total latency, per seat.")
    st.dataframe(detail.usage.rename(columns=history.USAGE_WORDS), hide_index=True)


def watch_running(run_id: str, protocol: str) -> None:
    """While a run is going, poll the store every two seconds and show its progress."""

    @st.fragment(run_every=2)
    def progress() -> None:
        state = _shared.tasks().progress(run_id, protocol)
        if state["status"] != "running":
            st.rerun()
        done, total = state["calls_done"], state["estimated_calls"]
        st.progress(state["fraction"], text=md(f"Running: {done} of {total or '?'} calls · "
                                               f"{state['phase']}"))

    progress()
    if not store.read_only and _shared.can("stop runs") and st.button(
            "⏹️ Stop this run", key="runs_stop",
                                         help="Marks it interrupted, whichever process runs "
                                              "it; it stops after its call in flight"):
        _shared.tasks().stop(run_id, actor=_shared.actor())
        st.session_state["runs_flash"] = f"Stopped run {run_id}."
        st.rerun()


run_param = st.query_params.get("run")
if run_param:
    show_detail(run_param)
else:
    show_history()
