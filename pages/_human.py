"""People's judgement in Insights (`engine.reports.human`): win rates per configuration,
agreement between people and the machine (Cohen's kappa, its n and interval, and the table it
is computed from), calibration of the judge's confidence against ratings, and accuracy against
each question's human majority. Simulated runs are shown apart from real ones, never pooled.
And in an experiment's results (`experiment`), accuracy against the human majority on its
questions that have no expected answer, in a table of its own."""
from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from engine import Store
from engine import experiments as ex
from engine.reports import human
from pages import _shared

PERCENT = {name: st.column_config.NumberColumn(format="percent")
           for name in ("rate", "low", "high")}


def _kind(runs: pd.DataFrame, prefs: pd.DataFrame, ratings: pd.DataFrame, simulated: bool
          ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    runs = runs[runs["simulated"] == simulated]
    ids = set(runs["id"])
    prefs = prefs[prefs["run_a"].isin(ids) & prefs["run_b"].isin(ids)] if not prefs.empty \
        else prefs
    ratings = ratings[ratings["run_id"].isin(ids)] if not ratings.empty else ratings
    return runs, prefs, ratings


def show(store: Store) -> None:
    """The section, when anyone has labelled a run."""
    prefs, ratings = store.preferences(), store.ratings()
    if prefs.empty and ratings.empty:
        return  # nothing judged yet: the Review page queues pairs, a run's detail rates it
    st.subheader("People's judgement")
    st.caption("Win rate: wins / (wins + losses); ties are counted apart, never as half a win. "
               "The machine's preference between two runs: the one scored correct, else the "
               "one with the higher judge confidence, else the higher consensus; a pair "
               "without a score on both sides is left out. Kappa's interval: 95% bootstrap. "
               "Intervals on rates: 95% Wilson.")
    runs = store.runs(with_config=False)
    for simulated in (False, True):
        kind_runs, kind_prefs, kind_ratings = _kind(runs, prefs, ratings, simulated)
        if kind_prefs.empty and kind_ratings.empty:
            continue
        if simulated:
            st.caption(":material/science: **simulated** — the labels below are of runs the "
                       "simulated model played, kept apart from real runs.")
        st.markdown("**Human win rate by configuration**" + (" (simulated)" if simulated
                                                              else ""))
        st.dataframe(human.win_rates(kind_prefs, kind_runs), hide_index=True,
                     column_config=PERCENT, key=f"human_wins_{simulated}")
        found = human.agreement(kind_prefs, kind_runs)
        kappa = "–" if math.isnan(found.kappa) else f"{found.kappa:.2f}"
        interval = "" if math.isnan(found.low) else f" [{found.low:.2f}–{found.high:.2f}]"
        st.markdown("**Agreement between people and the machine**")
        _shared.metrics_row([("Cohen's kappa", f"{kappa}{interval}"), ("n", str(found.n)),
                             ("left out (no machine score)", str(found.skipped))])
        if found.one_sided:
            st.warning(f"{found.one_sided.capitalize()} gave one and the same choice on every "
                       "pair, so kappa is fixed by its arithmetic and its interval by the "
                       "resamples repeating it: here it does not measure agreement.",
                       icon=":material/warning:")
        st.dataframe(human.agreement_table(found), hide_index=True,
                     key=f"human_kappa_{simulated}")
        calibration = human.calibration(kind_ratings, kind_runs)
        if not calibration.empty:
            st.markdown("**The judge's confidence against people's ratings** (share rated "
                        "4 or 5)")
            st.dataframe(calibration, hide_index=True, column_config=PERCENT,
                         key=f"human_calibration_{simulated}")
        majority = human.majority_accuracy(kind_prefs, kind_runs)
        if not majority.empty:
            st.markdown("**Accuracy against the human majority** (the answer people preferred "
                        "most, as the expected answer)")
            st.dataframe(majority, hide_index=True, column_config=PERCENT,
                         key=f"human_majority_{simulated}")


def experiment(store: Store, result: ex.Report) -> None:
    """Under an experiment's accuracy: its questions with no expected answer scored against
    their human majority, labelled so and kept apart from the accuracy against the file's
    expected answers; nothing when every question has an expected answer."""
    section = human.majority_section(result.runs, store.preferences(),
                                     result.experiment["spec"]["questions"], result.labels)
    if section is None:
        return
    st.markdown(f"**{human.HEADING}** (expected answer: *{human.HUMAN_MAJORITY}*, on the "
                "questions that have none of their own)")
    st.caption(section.note)
    if not section.table.empty:
        st.dataframe(section.table, hide_index=True, column_config=PERCENT,
                     key="exp-human-majority")
