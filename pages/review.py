"""Review: a blinded pairwise queue (DESIGN section 5). Two runs' final answers to one
question side by side, as text, with every model, seat, persona, role, label and protocol name
hidden; which run is shown on the left is drawn at random per pair and recorded with the
judgement ("A better / B better / tie", keys a, b, t) and an optional comment. The widgets'
keys are a random token per pair (`token`), never the runs' ids nor anything in the
configurations' order: the page's HTML carries its widget keys."""
from __future__ import annotations

import secrets

import streamlit as st

from engine import ParleyError
from engine.reports import review
from pages import _shared

store = _shared.store()
md = _shared.md
CHOICES = (("A better", "a"), ("B better", "b"), ("Tie", "t"))


def draw(key: str) -> str:
    """Which of the pair's runs (a | b) is shown on the left, drawn once per pair and kept
    for the session (a rerun never swaps the sides under the reader)."""
    draws = st.session_state.setdefault("review_draws", {})
    if key not in draws:
        draws[key] = "a" if secrets.randbelow(2) == 0 else "b"
    return str(draws[key])


def token(key: str) -> str:
    """The opaque name of a pair's widgets, drawn once per pair and kept for the session."""
    tokens = st.session_state.setdefault("review_tokens", {})
    if key not in tokens:
        tokens[key] = secrets.token_hex(8)
    return str(tokens[key])


def judge(pair: review.Pair, shown_left: str, picked: str) -> None:
    """Record the reader's pick of the left (A), the right (B) or neither, as the store's
    choice between the pair's run_a and run_b, with the side each was shown on."""
    if picked == "tie":
        choice = "tie"
    else:
        left_won = picked == "left"
        choice = shown_left if left_won else ("b" if shown_left == "a" else "a")
    comment = str(st.session_state.get(f"review-comment-{token(pair.key)}") or "")
    try:
        store.add_preference(pair.run_a, pair.run_b, rater=_shared.rater(), choice=choice,
                             comment=comment, shown_left=shown_left, actor=_shared.actor())
    except ParleyError as exc:
        st.session_state["review_error"] = str(exc)


st.title(":material/rate_review: Review")
st.caption("Two final answers to one question, from two configurations. Which is better? "
           "Models (and the names they may call themselves), seats, personas, labels and "
           "protocols are hidden, and the sides are drawn at random. Keys: **a**, **b**, "
           "**t**.")
st.caption(_shared.md(
    f"Where your judgement goes: it is stored in this database under your name "
    f"({_shared.rater()}), with the two runs, which one was on the left and your comment. "
    "Insights counts it in the human win rate by configuration, in the agreement between "
    "people and the machine (Cohen's kappa) and in the accuracy against the human majority; "
    "it travels with the runs when they are exported. One judgement per pair counts: judging "
    "a pair again replaces your earlier one."))
if "review_error" in st.session_state:
    st.error(md(f"Not recorded: {st.session_state.pop('review_error')}"))
pairs = review.queue(store.runs(status="completed", with_config=False))
done = review.judged(pairs, store.preferences(rater=_shared.rater()), _shared.rater())
total = len(pairs)
st.progress(len(done) / total if total else 0.0,
            text=f"{len(done)} of {total} pairs judged")
waiting = [p for p in pairs if p.key not in done]
if not pairs:
    st.info("No pairs to judge yet: the queue holds completed runs that answered the same "
            "question under two configurations (two labels).")
    st.stop()
if not waiting:
    st.success(f"All {total} pairs judged. New pairs appear as runs complete.")
    st.stop()
pair = waiting[0]
shown_left = draw(pair.key)
run_a, run_b = store.get(pair.run_a), store.get(pair.run_b)
hide = review.names(run_a) | review.names(run_b)
left, right = (run_a, run_b) if shown_left == "a" else (run_b, run_a)
st.subheader(f"Pair {len(done) + 1} of {total}")
if pair.simulated:
    st.caption(":material/science: **simulated** — both answers come from the simulated "
               "model.")
st.markdown("**Question**")
st.text(review.blinded(pair.question, hide))
for column, side, run in zip(st.columns(2), ("A", "B"), (left, right), strict=True):
    with column, st.container(border=True):
        st.markdown(f"**{side}**")
        st.text(review.blinded(review.final_answer(run), hide))
        why = review.reasoning(run)
        if why:
            with st.expander(f"The reasoning behind {side}", expanded=False):
                st.text(review.blinded(why, hide))
st.text_area("Comment (optional)", key=f"review-comment-{token(pair.key)}",
             max_chars=10_000)
for column, (title, key), picked in zip(st.columns(3), CHOICES, ("left", "right", "tie"),
                                        strict=True):
    column.button(f"{title} ({key})", key=f"review-{token(pair.key)}-{key}", shortcut=key,
                  width="stretch", disabled=store.read_only or not _shared.can("label runs"),
                  on_click=judge, args=(pair, shown_left, picked))
if not _shared.can("label runs"):
    st.caption(_shared.refusal("label runs"))
