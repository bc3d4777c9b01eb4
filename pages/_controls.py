"""The Experiments page's controls (DESIGN 2.13): which protocol when (what routing between
the configurations could gain per question, and what a router that sees only round one's
votes does gain), the placebo arms (peers' messages from another question), the judge read
from the final answers alone and dropped seats (the accuracy over the questions every seat
answered).
Real and simulated runs each get their own tables, never pooled."""
from __future__ import annotations

import streamlit as st

from engine import Store
from engine.reports import controls
from pages import _shared

md = _shared.md
PERCENT = st.column_config.NumberColumn(format="percent")
KIND_WORDS = {"real": "Real runs", "simulated": "Simulated runs"}


@st.cache_data(max_entries=16, show_spinner=False)
def read(_store: Store, stamp: tuple, experiment_id: str, kind: str
         ) -> tuple[controls.Headroom, list[controls.Dropped]]:
    """The headroom and dropped seats of one kind of run, built again only when `stamp`
    changed."""
    return controls.controls_of(_store, experiment_id, kind)


@st.cache_data(max_entries=16, show_spinner=False)
def read_placebo(_store: Store, stamp: tuple, experiment_id: str, kind: str
                 ) -> list[controls.Placebo]:
    """Each configuration against its placebo arm over one kind of run, built again only
    when `stamp` changed."""
    return controls.placebo(_store, experiment_id, kind)


def show_placebo(experiment_id: str, kinds: list[str], stamp: tuple) -> None:
    """The placebo arms' table (nothing when the experiment has none)."""
    found = {k: read_placebo(_shared.store(), stamp, experiment_id, k) for k in kinds}
    if not any(found.values()):
        return
    st.subheader("Placebo: peers talking about another question")
    st.caption("Each placebo arm runs its configuration's seats and prompts, but every message "
               "an agent reads from another agent is that agent's message of the same round on "
               "a different question of the set: as much peer reasoning, about the wrong "
               "problem. Configuration minus placebo in points over the questions both scored, "
               "with a 95% bootstrap interval paired over questions, and the tokens per run of "
               "both. The Cost of Consensus (arXiv 2605.00914) found debate 2.1 to 3.4 times "
               "the tokens for equal or lower accuracy against such a control.")
    for name, rows in found.items():
        if not rows:
            continue
        if len(kinds) > 1:
            st.markdown(f"**{KIND_WORDS[name]}**")
        st.dataframe(controls.placebo_rows(rows), hide_index=True, key=f"exp-placebo-{name}")
    theirs = controls.findings_of(_shared.store(), experiment_id)
    if theirs:
        st.caption(md(theirs))


@st.cache_data(max_entries=16, show_spinner=False)
def read_answers_only(_store: Store, stamp: tuple, experiment_id: str, kind: str
                      ) -> list[controls.AnswersOnly]:
    """The judge read from the transcript and from the final answers alone over one kind of
    run, built again only when `stamp` changed."""
    return controls.answers_only(_store, experiment_id, kind)


def show_answers_only(experiment_id: str, kinds: list[str], stamp: tuple) -> None:
    """The answers-only judge's table (nothing before a re-judge)."""
    found = {k: read_answers_only(_shared.store(), stamp, experiment_id, k) for k in kinds}
    if not any(found.values()):
        return
    st.subheader("The judge without the transcript")
    st.caption("Each judged run (a judge, a chairman or a synthesiser read a transcript) judged "
               "again by the same model from the question and the agents' final answers "
               "alone, beside the judge that read the transcript (the same runs, paired: "
               "answers only minus transcript, with a 95% bootstrap interval) and the "
               "consultancy baseline where the experiment has one. Rates with their 95% "
               "Wilson interval and n; calls, tokens and cost are the re-judge's own. "
               f"{controls.PAPER_ANSWERS_ONLY}.")
    for name, rows in found.items():
        if not rows:
            continue
        if len(kinds) > 1:
            st.markdown(f"**{KIND_WORDS[name]}**")
        st.dataframe(controls.answers_only_rows(rows), hide_index=True,
                     key=f"exp-answers-only-{name}")


def show(experiment_id: str, kind: str, stamp: tuple) -> None:
    """The controls over the experiment's runs of `kind` (both: each kind in turn)."""
    kinds = ["real", "simulated"] if kind == "both" else [kind]
    st.subheader("Which protocol when?")
    st.caption("Over the questions every configuration scored: the best single configuration, "
               "the oracle (per question the configuration that did best: the most that choosing "
               "per question could gain) and a router that sees only how split the agents' "
               "first, independent answers were (round one unanimous or split) and sends each "
               "question to the configuration that did best on the other questions like it. "
               "Gains are in points over the best single configuration, with a 95% bootstrap "
               "interval paired over questions; an interval that includes 0 is no gain shown. "
               "arXiv 2605.09618 found the oracle about 14 points ahead and such a router 1.3 "
               "to 1.7.")
    found = {k: read(_shared.store(), stamp, experiment_id, k) for k in kinds}
    for name, (room, _) in found.items():
        if len(kinds) > 1:
            st.markdown(f"**{KIND_WORDS[name]}**")
        if room.note:
            st.info(md(room.note[:1].upper() + room.note[1:] + "."))
            continue
        st.dataframe(controls.headroom_rows(room), hide_index=True, key=f"exp-headroom-{name}",
                     column_config={"accuracy": PERCENT})
        fixed = controls.unanimous_text(room.unanimous_wrong)
        st.caption(md(fixed[:1].upper() + fixed[1:] + "."))
    show_placebo(experiment_id, kinds, stamp)
    show_answers_only(experiment_id, kinds, stamp)
    st.subheader("Dropped seats")
    st.caption("Calls that failed or timed out: slow, strong models drop first, so a "
               "configuration's accuracy over every question can differ from its accuracy over "
               "the questions on which every call came back. Flagged when the second lies "
               "outside the first's 95% Wilson interval.")
    for name, (_, dropped) in found.items():
        label = f"{KIND_WORDS[name]}: " if len(kinds) > 1 else ""
        if not dropped:
            st.caption(md(f"{label}no run lost a call."))
            continue
        if label:
            st.markdown(f"**{KIND_WORDS[name]}**")
        st.dataframe(controls.dropped_rows(dropped), hide_index=True,
                     key=f"exp-dropped-{name}")
