"""Experiments: a question set x configurations x repeats, run in the background, compared.

The page gathers the inputs, shows the preflight (runs, calls, tokens), starts the experiment
in a background thread and reads its progress and results back from the store, so it keeps
going when the page is left or refreshed. Every number comes from `engine.experiments`.
"""
from __future__ import annotations

import html
import time
from typing import Any

import streamlit as st

from engine import ConfigError
from engine import experiments as ex
from engine.reports import aggregate, baseline, rounds, share
from engine.reports.references import references
from pages import _experiment_form, _shared

store = _shared.store()
md = _shared.md
SELECTED = _experiment_form.SELECTED
RESULTS_EVERY = 10.0  # seconds between refreshes of the results while an experiment runs

st.title("Experiments")
_shared.read_only_banner(_shared.store())
st.caption("A question set × saved configurations × repeats. Runs are stored as they finish; "
           "a stopped or crashed experiment resumes where it left off.")


flash = st.session_state.pop("exp-flash", None)
if flash:
    st.toast(md(flash), icon=":material/science:")
    st.success(md(flash) + " Its progress and results are below.")
experiments = ex.list_experiments(store)
with st.expander("New experiment", expanded=experiments.empty):
    _experiment_form.new_experiment(store)

if experiments.empty:
    st.info("No experiments yet.")
    st.stop()


# ------------------------------------------------------------------ choose one
ids = list(experiments["id"])
wanted = st.query_params.get("experiment") or st.session_state.get(SELECTED)
if wanted in ids and st.session_state.get("exp-pick") != wanted:
    st.session_state["exp-pick"] = wanted  # the address (a link, a new experiment) wins
# The label holds nothing that changes while the page is open (status and progress are in
# the progress bar below): a picker label does not refresh, so it would go stale.
labels = {row.id: f"{row.name} · {row.runs} runs · {row.created:%Y-%m-%d %H:%M} · {row.id}"
          for row in experiments.itertuples()}


def picked() -> None:
    st.query_params["experiment"] = st.session_state["exp-pick"]


experiment_id = st.selectbox("Experiment", ids, format_func=labels.get, key="exp-pick",
                             on_change=picked)
st.session_state[SELECTED] = experiment_id


# ------------------------------------------------------------------ progress
def show_progress(state: ex.Progress) -> None:
    text = f"{state.done}/{state.total} runs · {state.status}"
    st.progress(min(1.0, state.fraction), text=md(text))
    cols = st.columns(4)
    cols[0].metric("Runs done", f"{state.done}/{state.total}")
    cols[1].metric("Failed or interrupted", state.failed + state.interrupted,
                   help=f"{state.failed} failed, {state.interrupted} interrupted")
    cols[2].metric("Elapsed", ex.duration_text(state.elapsed))
    cols[3].metric("Remaining (estimate)",
                   "?" if state.remaining is None else ex.duration_text(state.remaining))
    if state.error:
        st.warning(md(state.error))


state = ex.progress(store, experiment_id)
if state.status == "running":
    st.session_state["exp-results-at"] = time.monotonic()

    @st.fragment(run_every=1.0)
    def watch() -> None:
        now = ex.progress(store, experiment_id)
        show_progress(now)
        stale = time.monotonic() - st.session_state.get("exp-results-at", 0) > RESULTS_EVERY
        if now.status != "running" or (stale and now.done > state.done):
            st.rerun()  # the whole page: results and buttons follow the runs

    watch()
    if _shared.tasks().task(experiment_id) is not None and st.button("Stop", key="exp-stop"):
        _shared.tasks().stop(experiment_id)
        st.toast("Stopping: runs in flight end after their current call.")
else:
    show_progress(state)
    verb = "Start" if state.status == "planned" else "Resume"
    if state.status != "completed" and st.button(verb, type="primary", key="exp-resume",
                                                 help="runs the cells without a completed run"):
        try:
            _shared.tasks().start_experiment(experiment_id, endpoints=_shared.endpoints())
        except ConfigError as exc:
            st.error(md(exc))
        else:
            st.rerun()


# ------------------------------------------------------------------ results
STATE_COLORS = {"fixed": "background-color: #d7f5dd", "broke": "background-color: #fbd5d5"}
SORTS = {"question": "question order", "regressions": "regressions first"}


def drill_to_runs(event: Any) -> None:
    """A bar clicked on the accuracy chart lists that configuration's runs below (once per
    click: the selection stays while the user picks something else)."""
    points = event.selection.points if event else []
    picked = html.unescape(str(points[0].get("x"))) if points else None
    if picked and st.session_state.get("exp-drilled") != picked:
        st.session_state["exp-drilled"] = picked
        st.session_state["exp-drill-label"] = picked
        st.session_state["exp-drill-q"] = None
        st.toast(md(f"The runs of {picked} are listed under Runs behind a cell."))
    elif not points:
        st.session_state.pop("exp-drilled", None)


def show_baseline(result: ex.Report) -> None:
    """The question matrix against a chosen baseline configuration: each cell's answer,
    fixed (green), broke (red) or the same, repeats collapsed with their stability; a click
    on a cell opens its runs beside the baseline's in the compare view."""
    cols = st.columns(3)
    base = cols[0].selectbox("Baseline", result.labels, key="exp-base")
    show = cols[1].selectbox("Show", list(baseline.FILTERS), format_func=baseline.FILTERS.get,
                             key="exp-base-show")
    sort = cols[2].selectbox("Order", list(SORTS), format_func=SORTS.get, key="exp-base-sort")
    cells = baseline.baseline_matrix(result.runs, result.experiment["spec"], base, show, sort)
    counts = baseline.matrix_counts(cells)
    _shared.metrics_row([("Fixed", counts["fixed"]), ("Broke", counts["broke"]),
                         ("Same", counts["same"]), ("Unscored", counts["unscored"])])
    if cells.empty:
        st.caption("No cell matches.")
        return
    grid = baseline.wide(cells)
    styled = grid.style.map(lambda v: next((c for state, c in STATE_COLORS.items()
                                            if f" · {state}" in str(v)), ""))
    picked = st.dataframe(styled, hide_index=True, key="exp-baseline", on_select="rerun",
                          selection_mode="single-cell")
    st.caption(f"Each cell: the configuration's final answer (the most frequent over its "
               f"repeats, spelled canonically), fixed (green) or broke (red) against "
               f"{md(base)}'s answer to the same question, and with repeats the share of them "
               "that agree. Click a cell to compare its runs with the baseline's.")
    chosen = picked.selection.cells if picked is not None else []
    if chosen:
        row, column = chosen[0][0], str(chosen[0][1])
        q = int(grid.iloc[int(row)]["q"])
        mine = cells[(cells["q"] == q) & (cells["configuration"] == column)]
        base_ids = result.runs[(result.runs["q"] == q) & (result.runs["label"] == base)
                               & result.runs["counted"]]["id"].tolist()
        ids = [*base_ids, *(mine["run_ids"].iloc[0] if not mine.empty else [])]
        if len(ids) >= 2:
            st.switch_page("pages/compare.py", query_params={"compare": ",".join(ids[:8])})
        st.caption("That cell has no runs to compare yet.")


KIND_NAMES = {"real": "Real", "simulated": "Simulated", "both": "Both, side by side"}
every = ex.runs_frame(store, experiment_id)
kind = st.segmented_control(
    "Runs", list(aggregate.KINDS), default=aggregate.default_kind(every),
    format_func=KIND_NAMES.get, key="exp-kind",
    help="Simulated runs (any seat played by the offline simulated model) and real runs are "
         "never pooled: both side by side lists every configuration's simulated runs as "
         "\"LABEL (simulated)\".") or aggregate.default_kind(every)
result = ex.report(store, experiment_id, kind)
if result.hidden:
    other = "simulated" if kind == "real" else "real"
    st.caption(f"{result.hidden:,} {other} run(s) are not shown; choose "
               f"*{KIND_NAMES[other]}* or *{KIND_NAMES['both']}* to see them.")
if result.runs.empty:
    st.info("No runs yet." if every.empty else f"No {kind} runs in this experiment.")
    st.stop()
simulated = result.runs["simulated"]
_shared.simulated_note(bool(simulated.all()))
if simulated.any() and not simulated.all():
    st.caption(":material/science: Simulated and real runs side by side: every simulated "
               "configuration is labelled **(simulated)**; the `simulated` column says which "
               "seats the offline model played.")
TITLE = {"real": "", "simulated": " (simulated)", "both": " (simulated and real, kept apart)"}

st.subheader("Results by configuration")
st.caption("Rates, means and calibration are over each cell's completed run only: failed and "
           "interrupted cells are counted apart and never enter them. `degraded` counts the "
           "completed runs that lost a decisive call (a judge, a synthesis, the last reviewer) "
           "or most of their turns; what they lost is left out of the means.")
percent = st.column_config.NumberColumn(format="percent")
three, whole = st.column_config.NumberColumn(format="%.3f"), \
    st.column_config.NumberColumn(format="%.0f")
formats = {"accuracy": percent, "accuracy_low": percent, "accuracy_high": percent,
           "mind_change_rate": percent, "consensus_ece": three, "consensus_brier": three,
           "judge_ece": three, "judge_brier": three, "tokens_per_run": whole,
           "seconds_per_run": st.column_config.NumberColumn(format="%.2f"),
           "calls_per_run": st.column_config.NumberColumn(format="%.1f")}
for number, (title, columns) in enumerate(ex.SUMMARY_GROUPS.items()):
    st.markdown(f"**{md(title)}**")
    shown = result.summary[["configuration", *columns]]  # `few` greys the accuracy rows
    st.dataframe(aggregate.grey_few(shown) if "few" in columns else shown, hide_index=True,
                 key=f"exp-summary-{number}", column_config=formats)
if result.summary["few"].any():
    st.caption("Greyed: fewer than 5 scored runs; read the rate with its interval and n.")
if (result.summary["scored"] > 0).any():
    drill_to_runs(st.plotly_chart(ex.accuracy_figure(result.summary, "Accuracy" + TITLE[kind]),
                                  key="exp-accuracy", on_select="rerun",
                                  selection_mode="points"))
    st.caption("Click a bar to list its runs under *Runs behind a cell*.")
else:
    st.caption("No run has an expected answer to score, so there is no accuracy.")

st.subheader("Accuracy by round")
configs = result.experiment["spec"]["configs"]
points = rounds.accuracy_by_round(result.runs, configs)
published = references(result.experiment["spec"].get("source"))
if points.empty:
    st.caption("No run has an expected answer to score, so there is no accuracy by round.")
elif (points["round"] == 1).all() and not published:
    st.caption("Every configuration answers in one round: its accuracy by round is its "
               "accuracy above.")
else:
    st.caption("Each round's plurality scored against the expected answer, over the counted "
               "runs that have that round, with its 95% Wilson interval; a configuration "
               "without rounds is one point at its final round. Dashed: each configuration's "
               "round-1 accuracy, the majority vote of its agents' independent answers."
               + (f" Markers: {md(published[0].citation)}, measured with "
                  f"{published[0].model}; does your model reproduce them?" if published
                  else ""))
    st.plotly_chart(rounds.accuracy_by_round_figure(points, published,
                                                    "Accuracy by round" + TITLE[kind]),
                    key="exp-rounds")
    st.dataframe(rounds.round_table(points), hide_index=True, key="exp-rounds-table")
conforming = rounds.conformity_by_config(result.runs, configs)
if not conforming.empty:
    st.markdown("**Conformity between rounds**")
    st.caption("Counts over their chances, summed over the counted runs: right to wrong over "
               "answers right the round before (DebateLLM's \"bullied\"), wrong to right over "
               "answers wrong before (\"relied on other\"), adoption of the previous round's "
               "majority over agents off it, and runs whose final plurality discarded a "
               "correct answer some agent gave over runs where one did (\"Cost of Consensus\", "
               "2026). Greyed: n under 5.")
    st.dataframe(aggregate.grey_few(conforming), hide_index=True, key="exp-conformity",
                 column_config={"rate": percent, "low": percent, "high": percent})

st.subheader("Calibration")
if result.calibrations:
    st.caption("Each confidence signal against correctness: a calibrated signal follows the "
               "diagonal. " + " ".join(f"{k}: {v}." for k, v in ex.SIGNALS.items()))
    st.plotly_chart(ex.reliability_figure(result.calibrations, "Calibration" + TITLE[kind]),
                    key="exp-calibration")
else:
    st.caption("Calibration needs runs with expected answers and a confidence signal "
               "(a panel's or vote's consensus, a scored judge).")

st.subheader("Paired comparison")
if len(result.labels) >= 2:
    left, right = st.columns(2)
    a = left.selectbox("Configuration A", result.labels, index=0, key="exp-cmp-a")
    b = right.selectbox("Configuration B", result.labels, index=1, key="exp-cmp-b")
    if a == b:
        st.caption("Choose two different configurations.")
    else:
        pair = ex.compare(result.runs, a, b)
        cols = st.columns(4)
        cols[0].metric(md(f"{a} better"), pair["wins"])
        cols[1].metric(md(f"{b} better"), pair["losses"])
        cols[2].metric("Ties", pair["ties"])
        cols[3].metric("Sign test p", f"{pair['p_value']:.3g}")
        st.markdown(md(pair["sentence"]))
else:
    st.caption("One configuration: nothing to compare.")

st.subheader("Questions")
if len(result.labels) >= 2:
    show_baseline(result)
else:
    st.dataframe(result.questions, hide_index=True, key="exp-questions")

st.subheader("Runs behind a cell")
left, right = st.columns(2)
label = left.selectbox("Configuration", [None, *result.labels], key="exp-drill-label",
                       format_func=lambda v: "all" if v is None else v)
spec_questions = result.experiment["spec"]["questions"]
question = right.selectbox("Question", [None, *range(len(spec_questions))], key="exp-drill-q",
                           format_func=lambda q: "all" if q is None else
                           f"{q}: {spec_questions[q]['question'][:80]}")
st.dataframe(ex.drill(result.runs, label, question), hide_index=True, key="exp-drill",
             column_config={"link": st.column_config.LinkColumn("Run", display_text="open")})

st.download_button("Download runs (CSV)", ex.to_csv(result.runs),
                   file_name=f"experiment-{experiment_id}-runs.csv", mime="text/csv",
                   key="exp-csv")
st.download_button("Download summary (CSV)", ex.to_csv(result.summary),
                   file_name=f"experiment-{experiment_id}-summary.csv", mime="text/csv",
                   key="exp-summary-csv")
st.download_button("Download results as HTML", lambda: share.experiment_html(result),
                   file_name=f"experiment-{experiment_id}.html", mime="text/html",
                   key="exp-html", help="One file with these results and charts that opens "
                   "from disk without Parley")
