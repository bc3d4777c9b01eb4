"""Compare runs side by side at `?compare=ID,ID`: questions, configuration differences,
transcripts aligned by phase and round, final answers and a text diff of how each run ended."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.reports import compare, share
from pages import _shared

store = _shared.store()
md = _shared.md
DIFFERS = "#fff3b0"  # the background of a row whose values differ between the runs


def marked(frame: pd.DataFrame) -> object:
    """The frame with the rows whose values differ shaded (the `differs` column says so too,
    for anyone who cannot see the colour)."""
    return frame.style.apply(lambda row: [f"background-color: {DIFFERS}" if row["differs"]
                                          else "" for _ in row], axis=1)


def show_missing(found: compare.Comparison) -> None:
    for run_id, why in found.missing:
        st.warning(md(f"Run {run_id} could not be shown: {why}. The other runs are compared."))
    for run_id, why in found.partial:
        st.warning(md(f"Part of run {run_id} could not be read ({why}); what could be read is "
                      "compared."))
    if found.dropped:
        st.warning(f"Only the first {compare.MAX_RUNS} runs are compared; {found.dropped} "
                   "more were named.")


def show_heading(runs: list[dict]) -> None:
    names = compare.column_names(runs)
    table = compare.headline(runs)
    simulated = [f"{run} ({how})" for run, how in zip(table["run"], table["simulated"],
                                                     strict=True) if how]
    if simulated:
        st.caption(":material/science: **simulated** — " + md("; ".join(simulated)) +
                   ": made by the offline simulated model, not a real LLM")
    if compare.same_question(runs):
        st.markdown("**Question** (the same in every run)")
        st.text(str(runs[0].get("question") or ""))
    else:
        st.warning("The runs were asked different questions: each is in the table below.")
    st.dataframe(table, hide_index=True,
                 column_config={"question": st.column_config.TextColumn(width="medium")})
    for column, name, run in zip(st.columns(len(runs)), names, runs, strict=True):
        column.page_link("pages/runs.py", label=f"Open run {name.split(' · ')[0]}",
                         icon=":material/history:", query_params={"run": str(run["id"])})


def show_answers(runs: list[dict]) -> None:
    frame = compare.answers(runs)
    st.dataframe(marked(frame), hide_index=True, key="compare_answers")
    st.caption("Final answer, confidence and outcome of each run; shaded rows (differs ✔) "
               "are where the runs disagree.")
    stances = compare.seat_stances(runs)
    if not stances.empty:
        st.markdown("**Each seat's stances**")
        st.dataframe(stances, hide_index=True, key="compare_stances")
        st.caption("The stances each seat took, in order (a seat that kept its stance shows "
                   "it once); mind changes are counted in brackets.")
    for title, diff in compare.closing_diffs(runs):
        st.markdown(f"**How the runs ended: {md(title)}**")
        if diff:
            st.code(diff, language="diff")
        else:
            st.caption("Identical.")
    if len(runs) > 1:
        st.caption("A unified diff of each run's answer, confidence, outcome and closing "
                   "replies against the first run's: `-` lines are the first run's only, "
                   "`+` lines the other's.")


def show_config(runs: list[dict]) -> None:
    frame = compare.config_diff(runs)
    differing = int(frame["differs"].sum())
    only = st.toggle(f"Only the {differing} differing key(s)", value=differing > 0,
                     key="compare_only_diff")
    shown = frame[frame["differs"]] if only else frame
    st.dataframe(marked(shown), hide_index=True, key="compare_config")
    st.caption("The stored configurations, flattened (`seats.debaters[0].model` ...), with "
               "the run's label and expected answer; `—` where a run has no such key.")


def show_transcripts(runs: list[dict]) -> None:
    frame = compare.aligned_transcript(runs)
    if frame.empty:
        st.info("No turns were recorded in these runs.")
        return
    names = compare.column_names(runs)
    st.caption("One row per phase and round; `CHANGED MIND` marks a seat whose stance "
               "differs from the one it held before in the same run.")
    for _, row in frame.iterrows():
        changes = f" · {row['changes']} mind change(s)" if row["changes"] else ""
        st.markdown(f"**{md(row['phase'])} · round {int(row['round'])}{md(changes)}**")
        for column, name in zip(st.columns(len(names)), names, strict=True):
            with column.container(border=True):
                column_caption = name.split(" · ")[0]
                st.caption(md(f"run {column_caption}"))
                st.text(row[name])


def main() -> None:
    st.title("⚖️ Compare runs")
    ids = compare.parse_ids(st.query_params.get_all("compare"))
    if not ids:
        st.info("Pick two or more runs on the Runs page and press Compare, or open "
                "`?compare=ID,ID`.")
        st.page_link("pages/runs.py", label="Runs", icon=":material/history:")
        return
    found = compare.load(store, ids)
    show_missing(found)
    if not found.runs:
        st.info("None of the named runs could be shown.")
        return
    if len(found.runs) == 1:
        st.info("Only one of the named runs could be shown; a comparison needs two.")
    show_heading(found.runs)
    st.download_button(
        "Download this comparison as HTML", key="compare_html", icon=":material/download:",
        data=lambda: share.comparison_html(found.runs), mime="text/html",
        file_name=f"parley-compare-{'-'.join(str(r['id']) for r in found.runs)[:120]}.html",
        help="One file, charts and text included, that opens from disk without Parley.")
    answers, config, transcript = st.tabs(["Answers", "Configuration", "Transcripts"])
    with answers:
        show_answers(found.runs)
    with config:
        show_config(found.runs)
    with transcript:
        show_transcripts(found.runs)


main()
