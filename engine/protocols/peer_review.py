"""Peer review (seed 000): a producer drafts, a reviewer approves or sends feedback, repeat."""
from __future__ import annotations

import time
from typing import Any, Unpack

import pandas as pd
from pydantic import BaseModel

from engine.analysis import is_approved, parse_sections
from engine.analysis.answers import answer_line
from engine.checks import ROUNDS_MAX, require_int, require_text, unique_names
from engine.config import RunKwargs
from engine.llm.calls import RunContext
from engine.llm.lines import Line, line_format
from engine.models import Seat, Signals, Task, Turn
from engine.protocols.base import (
    AnswerResult,
    Option,
    ProtocolSpec,
    Slot,
    execute,
    split_run_options,
    synchronous,
    warn_hedge,
)
from engine.protocols.checks import require_seat
from engine.protocols.templates import Template, render
from engine.views.aggregate import as_flag, completed, counts_by, numbers, rate_by, rate_text
from engine.views.blocks import Block, Chart, InsightsData, Section, warnings_block

REVIEW_UNAVAILABLE = "Review unavailable: "
REVIEW_SECTIONS = ("APPROVED", "FEEDBACK", "STRENGTHS")
# The reviewer's reply and a scored draft's last line (grammars where the server applies one).
REVIEW_FORMAT = line_format("review", Line("APPROVED", "yes-no"), "FEEDBACK", "STRENGTHS")
DRAFT_FORMAT = line_format("draft", Line("ANSWER", "short"), lead=True)

TEMPLATES = {
    "producer_first": Template(
        "Task: {task}\n\nWrite your best response to the task. If the task asks for a specific "
        "answer (a number, a word or a short phrase), end with a last line `ANSWER: <that "
        "answer>`.", ("task",),
        "Iteration 1: the producer gets the task.", required=("task",)),
    "producer_revision": Template(
        "Revise your previous draft using the reviewer's feedback.\n\n"
        "Previous draft:\n{draft}\n\nFeedback:\n{feedback}\n\nWrite the improved draft. If the "
        "previous draft ends with an `ANSWER:` line, end yours with one too, giving the answer "
        "you now stand by.",
        ("draft", "feedback", "iteration"),
        "Later iterations: the previous draft and the feedback, not the task.",
        required=("draft", "feedback")),
    "reviewer": Template(
        "Review the draft written for this task.\n\nTask: {task}\n\nDraft:\n{draft}\n\n"
        "Answer in this format:\nAPPROVED: yes or no\nFEEDBACK: what to change\n"
        "STRENGTHS: what works", ("task", "draft", "iteration"),
        "Every iteration: the reviewer gets the task and the draft.",
        required=("task", "draft")),
}


class PeerReviewIteration(BaseModel):
    """One draft and its review."""

    iteration_number: int
    output: str
    feedback: str
    strengths: str = ""
    approved: bool
    duration: float


class PeerReviewResult(AnswerResult):
    """Seed 000's PeerReviewResult, plus the turn log and `answer`: the final output's
    `ANSWER:` line ("" when it has none), which is what a review given `expected` is scored
    on."""

    task: str
    final_output: str
    approved: bool
    iterations: list[PeerReviewIteration]
    iterations_used: int


async def arun_peer_review(task: str, *, producer: Seat | Any, reviewer: Seat | Any,
                           max_iterations: int = 3, **kw: Unpack[RunKwargs]) -> PeerReviewResult:
    """Seed 000's peer review loop; check `approved` before using `final_output`."""
    run = split_run_options(dict(kw), "peer-review")
    task = require_text(task, "task")
    producer = require_seat(producer, "producer", run.endpoints)
    reviewer = require_seat(reviewer, "reviewer", run.endpoints)
    unique_names([producer, reviewer], "seat")
    require_int(max_iterations, "max_iterations", 1, ROUNDS_MAX, "peer review")

    async def body(ctx: RunContext) -> PeerReviewResult:
        iterations: list[PeerReviewIteration] = []
        draft, feedback, approved, warnings = "", "", False, []
        verdict = ""  # the last review's verdict, as the producer's task shows it
        drafted: Turn | None = None  # the turn of the draft kept
        for number in range(1, max_iterations + 1):
            began = time.monotonic()
            if number == 1:
                prompt = render(TEMPLATES, ctx.prompts, "producer_first", task=task)
            else:
                prompt = render(TEMPLATES, ctx.prompts, "producer_revision", draft=draft,
                                feedback=feedback, iteration=number)
            # a run scored on an expected answer asks for one: its draft ends in ANSWER
            made = await ctx.call_lines(producer, [{"role": "user", "content": prompt}],
                                        line=DRAFT_FORMAT if ctx.expected else None,
                                        phase="draft", round=number,
                                        task=Task(kind="draft",
                                                  own=draft if number > 1 else None,
                                                  verdict=verdict,
                                                  others={reviewer.name: feedback}
                                                  if number > 1 else {}))
            if not made.ok:
                warnings.append(f"producer failed in iteration {number}: {made.error}; "
                                "the loop stopped")
                break
            draft, drafted = made.reply, made
            review_prompt = render(TEMPLATES, ctx.prompts, "reviewer", task=task, draft=draft,
                                   iteration=number)
            review = await ctx.call_lines(reviewer, [{"role": "user", "content": review_prompt}],
                                          line=REVIEW_FORMAT, phase="review", round=number,
                                          task=Task(kind="review", sections=REVIEW_SECTIONS,
                                                    others={producer.name: draft}))
            read = ctx.guard(review, _read_review, review.reply) if review.ok else None
            if read is not None:  # a reply the parser trips on is an unavailable review
                sections, approved = read
                feedback = sections.get("FEEDBACK") or review.reply.strip()
                strengths = sections.get("STRENGTHS", "")
                ctx.update(review, parsed={"approved": approved})
                verdict = "approved" if approved else "rejected"
            else:
                approved, strengths = False, ""
                feedback = REVIEW_UNAVAILABLE + review.error
                verdict = "unavailable"
                warnings.append(f"reviewer failed in iteration {number}: {review.error}")
            iterations.append(PeerReviewIteration(
                iteration_number=number, output=draft, feedback=feedback, strengths=strengths,
                approved=approved, duration=time.monotonic() - began))
            if approved:
                break
        answer = answer_line(draft)
        if not answer and drafted is not None and warn_hedge(ctx, drafted, draft):
            warnings.append("the final draft declares several different answers; the review "
                            "has no short answer")
        elif run.expected is not None and str(run.expected).strip() and not answer:
            warnings.append("the final draft has no ANSWER line; the review has no short "
                            "answer")
        return PeerReviewResult(task=task, final_output=draft, approved=approved,
                                iterations=iterations, iterations_used=len(iterations),
                                answer=answer, warnings=warnings)

    return await execute(SPEC, task, body,
                         {"producer": producer, "reviewer": reviewer},
                         {"max_iterations": max_iterations}, run,
                         # the loop fixes who goes first (a review needs a draft): no seat is
                         # ever shown a list of others, so an order seed changes nothing here
                         [producer.name, reviewer.name])


def _read_review(reply: str) -> tuple[dict[str, str], bool]:
    return parse_sections(reply, REVIEW_SECTIONS), is_approved(reply)


run_peer_review = synchronous(arun_peer_review)


def _summary(result: PeerReviewResult) -> str:
    state = "approved" if result.approved else "not approved"
    answer = f"; answer: {result.answer[:200]}" if result.answer else ""
    return (f"{state} after {result.iterations_used} iteration(s){answer}\n"
            f"{result.final_output[:300]}")


def _outcome(result: PeerReviewResult) -> str:
    state = "approved" if result.approved else "not approved"
    return f"{state} after {result.iterations_used}"


def _last_review_failed(result: PeerReviewResult) -> bool:
    """True when no review was made or the last reviewer's call failed."""
    return not result.iterations or result.iterations[-1].feedback.startswith(
        REVIEW_UNAVAILABLE)


def _signals(result: PeerReviewResult) -> Signals:
    """The answer and approval; `approved` is None when the last review failed (its "not
    approved" is a placeholder, not a reviewer's decision)."""
    approved = None if _last_review_failed(result) else result.approved
    return Signals(answer=result.answer[:500] or None, extra={"approved": approved,
                          "iterations_used": result.iterations_used})


def _lost(result: PeerReviewResult) -> list[str]:
    """The last reviewer's decision and the producer's drafts are decisive."""
    out = []
    drafts = [t for t in result.turns if t.phase == "draft"]
    if drafts and not drafts[-1].ok:
        out.append(f"the producer's draft {drafts[-1].round}")
    if result.iterations and _last_review_failed(result):
        out.append("the last reviewer")
    return out


def _view(r: PeerReviewResult) -> list[Block]:
    state = "approved" if r.approved else "not approved"
    blocks = [Block("metrics", items=[("Outcome", state), ("Iterations", r.iterations_used)]
                    + ([("Answer", r.answer)] if r.answer else [])),
              Block("text", "Final output" if r.approved else "Last draft (not approved)",
                    r.final_output),
              Block("table", "Approval history", rows=[
                  {"iteration": i.iteration_number, "approved": i.approved,
                   "feedback": i.feedback, "strengths": i.strengths,
                   "seconds": round(i.duration, 2)} for i in r.iterations])]
    return blocks + warnings_block(r.warnings)


def _insights(data: InsightsData) -> Section:
    reviews = completed(data.runs)
    approved = as_flag(reviews.get("m_approved", pd.Series(index=reviews.index, dtype=float)))
    iterations = numbers(reviews, "m_iterations_used")
    outcome = [f"approved after {int(i)}" if a == 1 and i == i else "not approved"
               for a, i in zip(approved, iterations)]
    order = sorted({o for o in outcome if o != "not approved"},
                   key=lambda o: int(o.rsplit(" ", 1)[1])) + ["not approved"]
    return Section("peer-review", "Peer review", metrics=[
        ("Reviews", f"{len(reviews):,}"),
        ("Approved", rate_text(int(approved.dropna().sum()), int(approved.notna().sum()))
         if approved.notna().any() else "—")], charts=[
        Chart("rate_bar", rate_by(reviews, "m_approved"), "Approval rate",
              "Share of peer reviews the reviewer approved within the iteration limit, per "
              "label.", {"y_title": "reviews"}),
        Chart("stacked_counts", counts_by(reviews.assign(outcome=outcome), "outcome"),
              "Iterations to approval",
              "How many drafts each review took to be approved, or that it never was.",
              {"order": order})])


SPEC = ProtocolSpec(
    name="peer-review", title="Peer review", source="000", question_name="task",
    runner=arun_peer_review,
    slots=(Slot("producer", help="writes and revises the draft"),
           Slot("reviewer", help="approves or gives feedback")),
    options=(Option("max_iterations", 3, 1, ROUNDS_MAX, "drafts before giving up"),),
    templates=TEMPLATES,
    estimate_calls=lambda options, seats: 2 * int(options.get("max_iterations", 3)),
    insights=_insights,
    result_type=PeerReviewResult, summary=_summary, outcome=_outcome, signals=_signals,
    lost=_lost, view=_view, phases=("draft", "review"), rounds_option="max_iterations",
    color="#6a1b9a")
