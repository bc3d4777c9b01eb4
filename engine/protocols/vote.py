"""Vote baseline (DESIGN 2.4): each voter answers once, independently, with the panel's
proposal prompt; Python tallies the stances. The equal-calls baseline a debate is compared
against: N calls, no critique, no rebuttal, no judge. Round one's building blocks are in
`engine.protocols.tallying`, shared with the panel.
"""
from __future__ import annotations

import asyncio
from typing import Any, Unpack

from pydantic import Field

from engine.analysis.stances import Confidence, Tally, derive_confidence, tally
from engine.checks import require_text
from engine.config import RunKwargs
from engine.llm.calls import RunContext
from engine.models import Seat, Signals
from engine.protocols.base import (
    AnswerResult,
    ProtocolSpec,
    Slot,
    execute,
    presented,
    split_run_options,
    synchronous,
    tally_carried,
)
from engine.protocols.personas import PANEL_DEBATERS
from engine.protocols.tallying import (
    MAX_DEBATERS,
    PROPOSE,
    Proposal,
    confidence_text,
    propose,
    require_seats,
    share,
    tally_block,
    tally_metrics,
    tally_outcome,
    tally_rows,
    tally_summary,
)
from engine.views.aggregate import completed
from engine.views.ballots import tally_charts
from engine.views.blocks import Block, InsightsData, Section, warnings_block

TEMPLATES = {"propose": PROPOSE}


# --------------------------------------------------------------------------- the vote
MIN_VOTERS, MAX_VOTERS = 2, 2 * MAX_DEBATERS + 2


class VoteResult(AnswerResult):
    """The ballots, their tally and the computed confidence; `answer` is the tally winner."""

    question: str
    proposals: list[Proposal] = Field(default_factory=list)
    tally: Tally
    confidence: Confidence

    def final_answer(self) -> str | None:
        """The tally winner (normalised); None when every voter abstained."""
        return self.tally.winner


async def arun_vote(question: str, *, voters: list[Seat | Any], **kw: Unpack[RunKwargs]
                    ) -> VoteResult:
    """Each voter answers once with the panel's proposal prompt; the stances are tallied.

    A voter whose call fails or whose stance cannot be read abstains (counted in `total`).
    """
    run = split_run_options(dict(kw), "vote")
    question = require_text(question, "question")
    voters = require_seats(voters, "voters", MIN_VOTERS, MAX_VOTERS, "vote", "voter",
                           run.endpoints)
    # voters see no one's answer: the order is the one their ballots are listed in
    order, shown = presented(voters, run.order_seed)

    async def body(ctx: RunContext) -> VoteResult:
        proposals = list(await asyncio.gather(*(propose(ctx, seat, question) for seat in shown)))
        warnings = [f"voter {p.persona}: failed ({p.error}); it abstains"
                    for p in proposals if not p.usable]
        counted = tally({p.persona: p.stance if p.usable else None for p in proposals})
        return VoteResult(question=question, proposals=proposals, tally=counted,
                          confidence=derive_confidence(counted), answer=counted.winner or "",
                          warnings=warnings)

    return await execute(SPEC, question, body, {"voters": voters}, {}, run, order)


run_vote = synchronous(arun_vote)


# --------------------------------------------------------------------------- presentation
def _signals(result: VoteResult) -> Signals:
    t = result.tally
    return Signals(answer=t.winner, consensus=share(t),
                   level=result.confidence.level if t.positions else None,
                   extra={**tally_metrics(t, result.confidence),
                          "voters": len(result.proposals)})


def _lost(result: VoteResult) -> list[str]:
    """The ballots are the vote's decisive calls: with none readable it has no answer."""
    return [] if result.tally.positions or not result.proposals else ["every ballot"]


def _view(r: VoteResult) -> list[Block]:
    t, c = r.tally, r.confidence
    return [Block("metrics", items=[
                ("Winner", t.winner or "(none)"), ("Confidence", confidence_text(c)),
                ("Consensus", f"{t.winner_votes}/{t.total} ({t.ratio:.2f})")]),
            Block("caption", body="One independent answer per voter; the confidence is the "
                                  "vote's agreement, computed in code."),
            Block("table", "Ballots", rows=[
                {"voter": f"{p.icon} {p.persona}".strip(),
                 "stance": p.stance if p.usable else "(abstained)",
                 "counted as": p.normalized, "reasoning": p.reasoning or p.error}
                for p in r.proposals]),
            Block("table", "Tally", rows=tally_rows(t)), tally_block("Final vote", t)
            ] + warnings_block(r.warnings)


def _insights(data: InsightsData) -> Section:
    votes = completed(data.runs)
    return Section("vote", "Vote baseline", metrics=[("Votes", f"{len(votes):,}")],
                   charts=tally_charts(votes, "Vote"))


SPEC = ProtocolSpec(
    name="vote", title="Vote (baseline)", source="002", question_name="question",
    runner=arun_vote,
    slots=(Slot("voters", many=True, minimum=MIN_VOTERS, maximum=MAX_VOTERS,
                defaults=tuple(p.seat_dict() for p in PANEL_DEBATERS), role="voter",
                help="each answers once, independently"),),
    options=(), templates=TEMPLATES,
    estimate_calls=lambda options, seats: int(seats.get("voters", 3)),
    estimate_waves=lambda options, seats: 1,  # every voter at once
    insights=_insights,
    result_type=VoteResult, summary=lambda r: tally_summary(r.tally, r.confidence),
    outcome=lambda r: tally_outcome(r.tally, r.confidence), signals=_signals, view=_view,
    phases=("propose",), color="#00897b", carried=lambda r: tally_carried(r.tally),
    lost=_lost)
