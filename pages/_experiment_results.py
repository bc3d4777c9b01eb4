"""The Experiments page's results: summary, accuracy by round, calibration, paired comparison,
the baseline view and the runs behind a cell, for one experiment.

Its report (the runs read once, for the kind of runs it shows first) and baseline matrix are
built once per change of the stored runs or the experiment's progress (`st.cache_data` keyed on
`Store.fingerprint`), so a second visit, or a click on a widget, draws them without reading and
adding up the runs again.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from engine import Store
from engine import experiments as ex
from engine.reports import (
    baseline,
    consensus,
    consultancy,
    hijack,
    pareto,
    rounds,
    share,
    vega,
)
from engine.reports.blind import blind_notes, config_worlds
from engine.reports.controls import ANSWERS_ONLY_TAG
from engine.reports.experiments import SIGNALS, drill
from engine.reports.references import published as published_figures
from engine.reports.references import published_note, references
from engine.reports.reliability import in_bin
from engine.text import words
from engine.views import aggregate
from pages import (
    _consensus,
    _controls,
    _hijack,
    _human,
    _positions,
    _shared,
    _summary_table,
)

md = _shared.md
PERCENT = st.column_config.NumberColumn(format="percent")
KIND_NAMES = {"real": "Real", "simulated": "Simulated", "both": "Both, side by side"}
TITLE = {"real": "", "simulated": " (simulated)", "both": " (simulated and real, kept apart)"}


@st.cache_data(max_entries=16, show_spinner="Adding up the runs…")
def report(_store: Store, stamp: tuple, experiment_id: str, kind: str | None) -> ex.Report:
    """`ex.report` over `kind` runs (None: the kind it shows first, its `kind`), built again
    only when `stamp` changed."""
    return ex.report(_store, experiment_id, kind)


@st.cache_data(max_entries=32, show_spinner=False)
def matrix(_result: ex.Report, stamp: tuple, experiment_id: str, kind: str, base: str,
           show: str, sort: str) -> pd.DataFrame:
    """`baseline.baseline_matrix` of the report, built again only when `stamp` changed."""
    return baseline.baseline_matrix(_result.runs, _result.experiment["spec"], base, show, sort)


STATE_COLORS = {"fixed": "background-color: #d7f5dd", "broke": "background-color: #fbd5d5"}
SORTS = {"question": "question order", "regressions": "regressions first"}


def drill_to_runs() -> None:
    """A bar clicked on the accuracy chart opens the *Runs behind a cell* tab on that
    configuration's runs (a callback: it runs before the tabs are drawn, so it can pick one)."""
    bar = vega.picked(st.session_state.get("exp-accuracy"))
    if bar is not None:
        open_cell_runs(bar[0])


def drill_from_rounds(drawn: Figures) -> None:
    """A point clicked on the accuracy-by-round chart opens the *Runs behind a cell* tab on
    its configuration's runs (those its rounds were counted over)."""
    picked = rounds.picked_line(drawn.rounds, drawn.points, st.session_state.get("exp-rounds"))
    if picked is not None:
        open_cell_runs(picked)


def drill_from_calibration(result: ex.Report, drawn: Figures) -> None:
    """A point clicked on the reliability diagram opens the *Runs behind a cell* tab on the
    runs in its bin: its configuration's counted runs whose signal falls there."""
    chosen = ex.picked_bin(drawn.calibration, result.calibrations,
                           st.session_state.get("exp-calibration"))
    if chosen is not None:
        open_cell_runs(chosen.label, chosen)


def open_cell_runs(label: str, chosen: ex.Bin | None = None, q: int | None = None) -> None:
    """The *Runs behind a cell* tab on `label`'s runs (of every question, or of question
    `q`), or only those in the reliability bin `chosen`."""
    st.session_state["exp-drill-label"] = label
    st.session_state[DRILL_BIN] = chosen
    if q is None:
        # every question: its select box back to its first option, "all" (a value of None
        # would show an empty box saying "Choose an option")
        st.session_state.pop("exp-drill-q", None)
    else:
        st.session_state["exp-drill-q"] = q
    open_section(CELL_RUNS)
    listed = chosen.text() if chosen is not None else label
    listed += f" on question {q}" if q is not None else ""
    st.toast(md(f"The runs of {listed} are listed under Runs behind a cell."))


DRILL_BIN = "exp-drill-bin"  # a reliability bin clicked: Runs behind a cell lists its runs


def show_baseline(result: ex.Report, stamp: tuple) -> None:
    """The question matrix against a chosen baseline configuration: each cell's answer,
    fixed (green), broke (red) or the same, repeats collapsed with their stability; a click
    on a cell opens its runs beside the baseline's in the compare view."""
    cols = st.columns(3)
    base = cols[0].selectbox("Baseline", result.labels, key="exp-base")
    show = cols[1].selectbox("Show", list(baseline.FILTERS),
                             format_func=baseline.FILTERS.__getitem__, key="exp-base-show")
    sort = cols[2].selectbox("Order", list(SORTS), format_func=SORTS.__getitem__,
                             key="exp-base-sort")
    cells = matrix(result, stamp, result.experiment["id"], result.kind, base, show, sort)
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



@dataclass
class Figures:
    """What the page draws from a report beyond its tables: the round tables and the
    figures (None when the report has nothing to draw): the accuracy as a Vega-Lite spec
    (`vega.accuracy`; the Summary tab opens without plotly's 4.7 MB chunk), the others plotly."""

    points: pd.DataFrame
    published: list[Any]
    conforming: pd.DataFrame
    accuracy: Any = None
    rounds: Any = None
    calibration: Any = None


def show_summary(result: ex.Report, drawn: Figures) -> None:
    """The answer first: a sentence per pair of configurations and one table, as
    `experiment show` prints them (`ex.headline`), then the question-by-configuration matrix,
    how each configuration reached its answers, and the accuracy chart. Every figure of the
    summary, Brier scores included, is in its CSV download."""
    st.subheader("Which configuration is better, and how sure?")
    told = ex.headline(result)
    for sentence in told.sentences:
        st.markdown(md(sentence))
    if not told.sentences:
        st.caption("One configuration: nothing to compare it with.")
    st.table(_summary_table.headline(told.table, result.summary["few"]), hide_index=True)
    st.caption(md(("Greyed and marked *: fewer than 5 scored runs; read the rate with its "
                   "interval and n. " if told.few else "")
                  + "Rates, means and calibration are over each cell's completed run only: "
                  "failed and interrupted cells are counted apart and never enter them; "
                  "degraded runs completed but lost a decisive call (a judge, a synthesis, "
                  "the last reviewer) or most of their turns."))
    show_matrix(result)
    st.markdown("**How each configuration reached its answers**")
    st.table(_summary_table.headline(told.how), hide_index=True)
    show_baselines(result)
    if drawn.accuracy is not None:
        theirs = published_note(published_figures(result.experiment["spec"]))
        st.vega_lite_chart(spec=drawn.accuracy, key="exp-accuracy", on_select=drill_to_runs,
                           selection_mode=vega.PICK,
                           width=vega.fitted_width(int((result.summary["scored"] > 0).sum()),
                                                   bool(theirs)))
        st.caption("Click a bar to list its runs under *Runs behind a cell*.")
        if theirs:
            st.caption(md(f"Diamonds: {theirs}"))
    else:
        st.caption("No run has an expected answer to score, so there is no accuracy.")
    _human.experiment(_shared.store(), result)


MATRIX = "exp-matrix"


def show_matrix(result: ex.Report) -> None:
    """One row per question, one column per configuration, each cell its answer and whether
    it was right (`baseline.answer_matrix`); a click on a cell lists its runs, a click on a
    question opens its runs side by side in the compare view."""
    st.markdown("**Every question, every configuration**")
    grid = baseline.answer_matrix(result.runs, result.experiment["spec"])
    named = baseline.matrix_columns(result.labels)
    st.session_state[SHOWN] = (grid["q"].tolist(), {v: k for k, v in named.items()})
    styled = grid.style.map(lambda v: MATRIX_COLORS.get(matrix_state(v), ""),
                            subset=list(named.values()))
    picked = st.dataframe(styled, hide_index=True, key=MATRIX, on_select=drill_from_matrix,
                          selection_mode="single-cell",
                          column_config={"q": st.column_config.NumberColumn("#", width=40)})
    st.caption("Each cell: the configuration's final answer (the most frequent over its "
               "repeats, spelled canonically) and whether it was right (green) or wrong (red); "
               "with repeats, how many of them were right. Click a cell to list its runs; "
               "click a question to read every configuration's runs on it side by side.")
    chosen = picked.selection.cells if picked is not None else []
    if chosen and str(chosen[0][1]) in ("question", "expected"):
        q = int(grid.iloc[int(chosen[0][0])]["q"])
        runs = result.runs
        ids = runs[(runs["q"] == q) & runs["counted"].astype(bool)]["id"].tolist()
        if len(ids) >= 2:
            st.switch_page("pages/compare.py", query_params={"compare": ",".join(ids[:8])})
        st.caption("That question has fewer than two runs to compare yet.")


MATRIX_COLORS = {"right": "background-color: #d7f5dd", "wrong": "background-color: #fbd5d5",
                 "mixed": "background-color: #fff3c4"}
_SCORE = re.compile(r" · (?:(right|wrong)|(\d+)/(\d+) right)$")


def matrix_state(cell: object) -> str:
    """"right", "wrong", "mixed" (some of its repeats right) or "" (unscored, not run) for a
    cell of the matrix."""
    found = _SCORE.search(str(cell))
    if found is None:
        return ""
    if found[1]:
        return found[1]
    right, scored = int(found[2]), int(found[3])
    return "right" if right == scored else "wrong" if right == 0 else "mixed"


def drill_from_matrix() -> None:
    """A configuration's cell clicked on the matrix opens *Runs behind a cell* on its runs
    of that question (a callback: it runs before the tabs are drawn)."""
    state = st.session_state.get(MATRIX)
    cells = state.selection.cells if state is not None else []
    shown = st.session_state.get(SHOWN)
    if not cells or shown is None:
        return
    row, column = int(cells[0][0]), str(cells[0][1])
    questions, by_column = shown
    if column in by_column and row < len(questions):
        open_cell_runs(by_column[column], q=questions[row])


# what the matrix drawn last holds (its questions in order, each column's configuration):
# what a click on it is on
SHOWN = "exp-matrix-shown"


def show_baselines(result: ex.Report) -> None:
    """What each baseline matches (a capped one says it is not equal), and for an equal-tokens
    one the ratio of tokens per run it achieved in this experiment."""
    per_run: dict[str, float] = dict(zip(result.summary["configuration"],
                                         result.summary["tokens_per_run"], strict=True))
    for pair in ex.baselines_of(result.experiment["spec"]):
        line = pair["note"]
        if pair.get("kind") == ex.EQUAL_TOKENS:
            line += ". " + ex.achieved_tokens(pair, *(per_run.get(
                label, per_run.get(label + aggregate.SIMULATED_SUFFIX, float("nan")))
                for label in (pair["label"], pair["of"])))
        st.caption(md(line))
    consulted = consultancy.table(result.summary, ex.baselines_of(result.experiment["spec"]))
    if not consulted.empty:
        st.markdown("**Judge accuracy: debate against consultancy**")
        st.dataframe(consulted, hide_index=True, key="exp-consultancy")
        st.caption("Consultancy: the judge reads one debater's case alone, each side in turn "
                   "(Khan et al. 2024 report 76% with debate against 48% with consultancy). "
                   "Rates with their 95% Wilson interval and n.")


def show_rounds(drawn: Figures) -> None:
    """Accuracy by round (the chart's title is the view's only title), its table and the
    conformity between rounds."""
    points, published = drawn.points, drawn.published
    if points.empty:
        st.caption("No run has an expected answer to score, so there is no accuracy by round.")
    elif drawn.rounds is None:
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
        st.plotly_chart(drawn.rounds, key="exp-rounds", selection_mode="points",
                        on_select=lambda: drill_from_rounds(drawn))
        st.caption("Click a point to list its configuration's runs under *Runs behind a "
                   "cell*.")
        st.dataframe(rounds.round_table(points), hide_index=True, key="exp-rounds-table")
    if not drawn.conforming.empty:
        st.markdown("**Conformity between rounds**")
        st.caption("Counts over their chances, summed over the counted runs: right to wrong over "
                   "answers right the round before (DebateLLM's \"bullied\"), wrong to right over "
                   "answers wrong before (\"relied on other\"), adoption of the previous round's "
                   "majority over agents off it, and runs whose final plurality discarded a "
                   "correct answer some agent gave over runs where one did (\"Cost of Consensus\", "
                   "2026). Greyed: n under 5.")
        st.dataframe(aggregate.grey_few(drawn.conforming), hide_index=True, key="exp-conformity",
                     column_config={"rate": PERCENT, "low": PERCENT, "high": PERCENT})


def show_calibration(result: ex.Report, drawn: Figures) -> None:
    """The reliability diagram (its title the view's only title)."""
    if drawn.calibration is not None:
        st.caption("Each confidence signal against correctness: a calibrated signal follows the "
                   "diagonal. " + " ".join(f"{k}: {v}." for k, v in SIGNALS.items()))
        st.plotly_chart(drawn.calibration, key="exp-calibration", selection_mode="points",
                        on_select=lambda: drill_from_calibration(result, drawn))
        st.caption("Click a point to list the runs in its bin under *Runs behind a cell*.")
    else:
        st.caption("Calibration needs runs with expected answers and a confidence signal "
                   "(a panel's or vote's consensus, a scored judge).")


def show_pair(result: ex.Report) -> None:
    st.subheader("Paired comparison")
    if len(result.labels) < 2:
        st.caption("One configuration: nothing to compare.")
        return
    left, right = st.columns(2)
    a = left.selectbox("Configuration A", result.labels, index=0, key="exp-cmp-a")
    b = right.selectbox("Configuration B", result.labels, index=1, key="exp-cmp-b")
    if a == b:
        st.caption("Choose two different configurations.")
        return
    pair = ex.compare(result.runs, a, b)
    cols = st.columns(4)
    cols[0].metric(md(f"{a} better"), pair["wins"])
    cols[1].metric(md(f"{b} better"), pair["losses"])
    cols[2].metric("Ties", pair["ties"])
    cols[3].metric("Sign test p", f"{pair['p_value']:.3g}")
    st.markdown(md(pair["sentence"]))


def show_cell_runs(result: ex.Report) -> None:
    st.subheader("Runs behind a cell")
    left, right = st.columns(2)
    label = left.selectbox("Configuration", [None, *result.labels], key="exp-drill-label",
                           format_func=lambda v: "all" if v is None else v)
    spec_questions = result.experiment["spec"]["questions"]
    question = right.selectbox("Question", [None, *range(len(spec_questions))], key="exp-drill-q",
                               format_func=lambda q: "all" if q is None else
                               f"{q}: {spec_questions[q]['question'][:80]}")
    chosen = st.session_state.get(DRILL_BIN)
    frame = result.runs
    if isinstance(chosen, ex.Bin) and chosen.label == label and question is None:
        frame = in_bin(result.runs, chosen)
        note, clear = st.columns([4, 1], vertical_alignment="center")
        note.caption(md(f"Only the runs behind the point clicked on the reliability diagram: "
                        f"{chosen.text()} ({len(frame)} run(s))."))
        if clear.button("Show all its runs", key="exp-drill-bin-clear"):
            st.session_state[DRILL_BIN] = None
            st.rerun()
    elif chosen is not None:
        st.session_state[DRILL_BIN] = None  # another configuration or a question: all runs
    listed = drill(frame, label, question)
    listed["correct"] = [SCORES.get(v if v is None or v == v else None, "")
                         for v in listed["correct"]]
    for column in ("answer", "level", "consensus", "judge", "cost_usd"):  # missing: a dash
        listed[column] = listed[column].astype(object).where(listed[column].notna(), "–")
    st.dataframe(listed.rename(columns=words), hide_index=True, key="exp-drill",
                 column_config={"link": st.column_config.LinkColumn("Run", display_text="open")})


SCORES = {True: "right", False: "wrong", None: "not scored"}  # a run's `correct`, in words


def show_set_version(result: ex.Report) -> None:
    """Which version of its question set the experiment asked: two experiments compare on
    their questions only when the versions match."""
    version = result.experiment.get("set_version") or "not known"
    st.caption(f"Question set version {version}: experiments with the same version asked "
               "the same questions with the same expected answers.")


def show_downloads(store: Store, result: ex.Report, experiment_id: str) -> None:
    """The downloads; each file is made only when its button is pressed."""
    version = result.experiment.get("set_version") or ""
    st.download_button("Download runs (CSV)", lambda: ex.to_csv(result.runs, version),
                       file_name=f"experiment-{experiment_id}-runs.csv", mime="text/csv",
                       key="exp-csv")
    st.download_button("Download summary (CSV)", lambda: ex.to_csv(result.summary),
                       file_name=f"experiment-{experiment_id}-summary.csv", mime="text/csv",
                       key="exp-summary-csv")
    st.download_button("Download results as HTML", lambda: share.experiment_html(
                           result, preferences=store.preferences(), judged=store.runs(
                               experiment_id=experiment_id, tag=ANSWERS_ONLY_TAG)),
                       file_name=f"experiment-{experiment_id}.html", mime="text/html",
                       key="exp-html", help="One file with these results and charts that opens "
                       "from disk without Parley")


@st.cache_resource(max_entries=16, show_spinner=False)
def figures(_result: ex.Report, stamp: tuple, experiment_id: str, kind: str) -> Figures:
    """The page's figures and round tables, made once per change of `stamp`: plotly checks
    every property as a figure is built (a tenth of a second a figure). Kept as objects, not
    copies (`st.plotly_chart` only reads them), and shared by the sessions."""
    result = _result
    configs = result.experiment["spec"]["configs"]
    points = rounds.accuracy_by_round(result.runs, configs)
    published = references(result.experiment["spec"].get("source"))
    drawn = Figures(points, published, rounds.conformity_by_config(result.runs, configs))
    if (result.summary["scored"] > 0).any():
        drawn.accuracy = vega.accuracy(result.summary, "Accuracy" + TITLE[kind],
                                       published_figures(result.experiment["spec"]))
    if not points.empty and not ((points["round"] == 1).all() and not published):
        drawn.rounds = rounds.accuracy_by_round_figure(points, published,
                                                       "Accuracy by round" + TITLE[kind])
    if result.calibrations:
        drawn.calibration = ex.reliability_figure(result.calibrations,
                                                  "Calibration" + TITLE[kind])
    return drawn


def stamp_of(store: Store, state: ex.Progress) -> tuple:
    """What the cached results of an experiment are keyed on: the stored runs and its
    progress."""
    return (store.url_safe, *store.fingerprint(), state.status, state.done, state.total)


def warm(store: Store) -> None:
    """Fill the caches of the newest experiment's results (the one the page opens on) as a
    first visit would: its runs, report for the default kind and figures."""
    experiments = ex.list_experiments(store)
    if experiments.empty:
        return
    experiment_id = str(experiments["id"].iloc[0])
    stamp = stamp_of(store, ex.progress(store, experiment_id))
    result = report(store, stamp, experiment_id, None)
    if not result.runs.empty:
        figures(result, stamp, experiment_id, result.kind)


def show(store: Store, experiment_id: str, state: ex.Progress) -> None:
    """The results of `experiment_id` so far, built once per database and change of its runs
    or progress (`stamp`) and kept for every later visit."""
    stamp = stamp_of(store, state)
    first = report(store, stamp, experiment_id, None)  # the kind shown first, read once
    # another experiment's switch, or this one's from before its first runs were stored (it
    # opened on real runs while it had none): the switch opens on the kind of runs it has
    if st.session_state.get("exp-kind-of") != (experiment_id, first.kind):
        st.session_state.pop("exp-kind", None)
        st.session_state["exp-kind-of"] = (experiment_id, first.kind)
    kind = st.segmented_control(
        "Runs", list(aggregate.KINDS), default=first.kind,
        format_func=KIND_NAMES.__getitem__, key="exp-kind",
        help="Simulated runs (any seat played by the offline simulated model) and real runs are "
             "never pooled: both side by side lists every configuration's simulated runs as "
             "\"LABEL (simulated)\".") or first.kind
    result = first if kind == first.kind else report(store, stamp, experiment_id, kind)
    show_set_version(result)
    if result.hidden:
        other = "simulated" if kind == "real" else "real"
        st.caption(f"{result.hidden:,} {other} run(s) are not shown; choose "
                   f"*{KIND_NAMES[other]}* or *{KIND_NAMES['both']}* to see them.")
    if result.runs.empty:
        st.info("No runs yet." if first.runs.empty and not first.hidden
                else f"No {kind} runs in this experiment.")
        return
    simulated = result.runs["simulated"]
    _shared.simulated_note(bool(simulated.all()),
                           config_worlds(result.experiment["spec"].get("configs") or [])
                           if simulated.any() else ())
    if simulated.any():
        for note in blind_notes(result.experiment["spec"].get("configs") or []):
            st.warning(md(note), icon=":material/science:")
    if simulated.any() and not simulated.all():
        st.caption(":material/science: Simulated and real runs side by side: every simulated "
                   "configuration is labelled **(simulated)**; the `simulated` column says which "
                   "seats the offline model played.")
    drawn = figures(result, stamp, experiment_id, kind)
    show_tabs(result, drawn, stamp)
    _hijack.show(hijack.for_experiment(store, experiment_id), f"hijack-{experiment_id}")
    show_downloads(store, result, experiment_id)


CELL_RUNS = "Runs behind a cell"
# The results' views in four groups (a tab each, with a tab per view inside): eleven tabs in
# a row overflowed the page at 1280 px. A view's name is the one it always had, so an old
# link or a click on a chart that names a view still opens it (`route`, `open_section`).
GROUPS = {"The answer": ("Summary", "Questions", "Paired comparison", CELL_RUNS),
          "Rounds and confidence": ("Accuracy by round", "Calibration", "Consensus earned?"),
          "Cost and position": ("Cost and accuracy", "Positions"),
          "When to deliberate": ("Which protocol when?", "What if")}
GROUP_KEYS = dict(zip(GROUPS, ("exp-in-answer", "exp-in-rounds", "exp-in-cost", "exp-in-when"),
                      strict=True))
GROUP_OF = {view: group for group, views in GROUPS.items() for view in views}


def open_section(view: str) -> None:
    """Open the view `view` (one of `TABS`): its group's tab, and its tab in the group. Only
    before the tabs are drawn (a callback, or `route`)."""
    group = GROUP_OF[view]
    st.session_state["exp-tab"] = group
    st.session_state[GROUP_KEYS[group]] = view


def route() -> None:
    """A view named where a group is expected (a link or a test from before the groups:
    `exp-tab=Calibration`) opens that view in its group."""
    given = st.session_state.get("exp-tab")
    linked = st.query_params.get("exp-tab")
    for view, in_address in ((given, False), (linked, True)):
        if view in GROUP_OF and view not in GROUPS:
            open_section(view)
            if in_address:
                st.query_params["exp-tab"] = GROUP_OF[view]
                st.query_params[GROUP_KEYS[GROUP_OF[view]]] = view
            return


def show_tabs(result: ex.Report, drawn: Figures, stamp: tuple) -> None:
    """The results as tabs of groups of views, only the open one drawn (switching tabs
    reruns the page): every section at once was a dozen tables and three figures, seconds of
    the browser's time."""
    draws: dict[str, Callable[[], None]] = {
        "Summary": lambda: show_summary(result, drawn),
        "Accuracy by round": lambda: show_rounds(drawn),
        "Calibration": lambda: show_calibration(result, drawn),
        "Paired comparison": lambda: show_pair(result),
        "Positions": lambda: _positions.show(result, stamp),
        "Questions": lambda: show_questions(result, stamp),
        "Cost and accuracy": lambda: show_pareto(result.summary),
        "Consensus earned?": lambda: _consensus.show(
            consensus.from_experiment(result.runs, result.labels), "exp-consensus"),
        CELL_RUNS: lambda: show_cell_runs(result), "What if": lambda: show_what_if(result),
        "Which protocol when?": lambda: _controls.show(str(result.experiment["id"]),
                                                       result.kind, stamp)}
    route()
    for tab, group in zip(st.tabs(list(GROUPS), key="exp-tab", on_change="rerun",
                                  bind="query-params"), GROUPS, strict=True):
        if not tab.open:
            continue
        with tab:
            views = GROUPS[group]
            for inner, view in zip(st.tabs(list(views), key=GROUP_KEYS[group],
                                           on_change="rerun", bind="query-params"),
                                   views, strict=True):
                if inner.open:
                    with inner:
                        draws[view]()


def show_what_if(result: ex.Report) -> None:
    """Stop rules replayed on the experiment's runs with rounds (`pages/_whatif`)."""
    from pages import _whatif
    _whatif.render(_shared.store(), (), result.kind, key="exp-whatif",
                   experiment_id=str(result.experiment["id"]))


def show_pareto(summary: pd.DataFrame, key: str = "exp") -> None:
    """Accuracy against the mean cost, and against the mean tokens, of a run per
    configuration: intervals, n, the Pareto front in colour and the dominated grey."""
    st.subheader("Accuracy against cost")
    for x, what in (("cost_per_run", "cost"), ("tokens_per_run", "tokens")):
        rows, unplaced = pareto.pareto_rows(summary, x)
        if rows.empty:
            st.caption(md(f"No configuration has both scored runs and a known {what} per run"
                          + (f" (not placed: {', '.join(unplaced)})." if unplaced else ".")))
            continue
        st.vega_lite_chart(spec=vega.pareto(rows, f"Accuracy against {what} per run", x),
                           key=f"{key}-{x}")
        st.caption(md(pareto.caption(rows, unplaced, x)))


def show_questions(result: ex.Report, stamp: tuple) -> None:
    st.subheader("Questions")
    if len(result.labels) >= 2:
        show_baseline(result, stamp)
    else:
        st.dataframe(result.questions, hide_index=True, key="exp-questions")
