"""Vote baseline (DESIGN 2.4): each voter answers once, independently, with the panel's
proposal prompt; Python tallies the stances. The equal-calls baseline a debate is compared
against: N calls, no critique, no rebuttal, no judge.

A vote *is* a panel's round one, so round one's building blocks live here and the panel
imports them: the `propose` template (the panel's `TEMPLATES["propose"]` is this same object),
`Proposal`, the `propose` call, seat-list validation and the tally table rows.
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from pydantic import BaseModel, Field

from engine.llm.calls import RunContext
from engine.models import ConfigError, RunResult, Seat
from engine.protocols.personas import PANEL_DEBATERS
from engine.analysis.stances import Confidence, Tally, derive_confidence, normalize_stance, tally
from engine.protocols.templates import Template, render
from engine.reports.views import Block, warnings_block
from engine.protocols.base import (ProtocolSpec, Slot, execute, require_seat, require_text, run_sync,
                   split_run_options, unique_names)

PROPOSE_KEYS = ("stance", "answer", "reasoning")
PROPOSE = Template(
    "You are one debater on a panel. Answer the question on your own, before seeing anyone "
    "else's answer.\n\nQuestion: {question}\n\n"
    "Give a short canonical stance: the position itself (a number, a name or a short "
    "phrase), not a description of your method, so that debaters who agree give the "
    "identical label.\n\nReply with only a JSON object:\n"
    '{"stance": "your short canonical stance", "answer": "your full answer in one or two '
    'sentences", "reasoning": "why, in two or three sentences"}',
    ("question",),
    "Round one: each debater answers alone (also the vote baseline's only prompt).",
    required=("question",))

# The panel's proposal prompt under the same name, so an override written for a panel's
# "propose" applies to the vote unchanged and the two are compared on the same prompt.
TEMPLATES = {"propose": PROPOSE}


# --------------------------------------------------------------------------- round one
class Proposal(BaseModel):
    """One debater's answer in one round; `usable=False` when it failed (it then abstains)."""

    persona: str
    icon: str = ""
    stance: str = ""
    normalized: str = ""
    answer: str = ""
    reasoning: str = ""
    usable: bool = True
    error: str = ""


def require_seats(seats: Any, slot: str, low: int, high: int, protocol: str,
                  role: str, endpoints: Any = None) -> list[Seat]:
    """A list of `low..high` seats with unique names; bare models are named `role 1`, ..."""
    if isinstance(seats, (str, Seat)) or not isinstance(seats, (list, tuple)):
        raise ConfigError(f"{slot} must be a list of seats ({low}..{high}), got "
                          f"{type(seats).__name__}", "input")
    if not low <= len(seats) <= high:
        raise ConfigError(f"{slot} must be {low}..{high} seats for a {protocol}, got "
                          f"{len(seats)}", "limit")
    out = []
    for number, seat in enumerate(seats, 1):
        if seat is not None and not isinstance(seat, Seat):
            seat = Seat(f"{role} {number}", seat)
        seat = require_seat(seat, f"{slot}[{number}]", endpoints)
        out.append(seat if seat.role else seat.model_copy(update={"role": role}))
    unique_names(out, slot[:-1] if slot.endswith("s") else slot)
    return out


def text_value(value: Any) -> str:
    """A JSON value as text: strings as they are, numbers without float noise, lists joined."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return format(value, ".12g")
    if isinstance(value, list):  # each item read once: twice per level was exponential
        return "; ".join(part for part in map(text_value, value) if part)
    return json.dumps(value, ensure_ascii=False)


def need_stance(obj: dict) -> str:
    """Validation for `call_json`: "" when `stance` is a usable label, else why not."""
    stance = obj.get("stance")
    if isinstance(stance, bool) or not isinstance(stance, (str, int, float)):
        return 'the "stance" key must be a non-empty string'
    return "" if normalize_stance(text_value(stance)) else 'the "stance" key must not be empty'


async def propose(ctx: RunContext, seat: Seat, question: str, templates: dict[str, Template],
                  *, phase: str = "propose") -> Proposal:
    """One seat's cold answer (the panel's round one; the vote's only call)."""
    prompt = render(templates, ctx.prompts, "propose", question=question)
    obj, turn = await ctx.call_json(seat, [{"role": "user", "content": prompt}], phase=phase,
                                    round=1, keys=PROPOSE_KEYS, validate=need_stance)
    made = ctx.guard(turn, _proposal, seat, obj) if obj is not None else None
    if made is None:  # no JSON, or one the reading trips on: this seat abstains
        return Proposal(persona=seat.name, icon=seat.icon, usable=False,
                        error=turn.error or "no usable reply")
    return made


def _proposal(seat: Seat, obj: dict[str, Any]) -> Proposal:
    stance = text_value(obj.get("stance"))
    return Proposal(persona=seat.name, icon=seat.icon, stance=stance,
                    normalized=normalize_stance(stance), answer=text_value(obj.get("answer")),
                    reasoning=text_value(obj.get("reasoning")))


# --------------------------------------------------------------------------- the vote
MAX_DEBATERS = 8  # the panel's limit; a vote may match the calls of the largest panel
MIN_VOTERS, MAX_VOTERS = 2, 2 * MAX_DEBATERS + 2


class VoteResult(RunResult):
    """The ballots, their tally and the computed confidence; `answer` is the tally winner."""

    question: str
    proposals: list[Proposal] = Field(default_factory=list)
    tally: Tally
    confidence: Confidence
    answer: str = ""

    def final_answer(self) -> str | None:
        """The tally winner (normalised); None when every voter abstained."""
        return self.tally.winner

    def outcome(self) -> dict[str, Any]:
        return {"winner": self.tally.winner or "", "votes": self.tally.winner_votes,
                "total": self.tally.total, "ratio": round(self.tally.ratio, 4),
                "tied": self.tally.tied, "confidence_level": self.confidence.level,
                "abstentions": len(self.tally.abstentions), "voters": len(self.proposals)}


async def arun_vote(question: str, *, voters: list[Seat | Any], **kw: Any) -> VoteResult:
    """Each voter answers once with the panel's proposal prompt; the stances are tallied.

    A voter whose call fails or whose stance cannot be read abstains (counted in `total`).
    """
    run = split_run_options(kw, "vote")
    question = require_text(question, "question")
    voters = require_seats(voters, "voters", MIN_VOTERS, MAX_VOTERS, "vote", "voter",
                           run.get("endpoints"))

    async def body(ctx: RunContext) -> VoteResult:
        start = time.monotonic()
        proposals = list(await asyncio.gather(
            *(propose(ctx, seat, question, TEMPLATES) for seat in voters)))
        warnings = [f"voter {p.persona}: failed ({p.error}); it abstains"
                    for p in proposals if not p.usable]
        counted = tally({p.persona: p.stance if p.usable else None for p in proposals})
        return VoteResult(question=question, proposals=proposals, tally=counted,
                          confidence=derive_confidence(counted), answer=counted.winner or "",
                          warnings=warnings, duration=time.monotonic() - start)

    return await execute("vote", question, TEMPLATES, body, {"voters": voters}, {}, run)


def run_vote(question: str, **kw: Any) -> VoteResult:
    """Synchronous `arun_vote`."""
    return run_sync(arun_vote(question, **kw))


# --------------------------------------------------------------------------- presentation
def tally_rows(final: dict[str, Any], first: dict[str, Any] | None = None
               ) -> list[dict[str, Any]]:
    """Rows of a stored tally (and round one's, when given) for a table block."""
    stances = list(final.get("counts", {}))
    if first:
        stances += [s for s in first.get("counts", {}) if s not in stances]
    rows = []
    for stance in stances:
        row = {"stance": stance, "votes": final.get("counts", {}).get(stance, 0)}
        if first is not None:
            row["round one"] = first.get("counts", {}).get(stance, 0)
        rows.append(row)
    abstained = {"stance": "(abstained)", "votes": len(final.get("abstentions", []))}
    if first is not None:
        abstained["round one"] = len(first.get("abstentions", []))
    if any(v for k, v in abstained.items() if k != "stance"):
        rows.append(abstained)
    return rows


def confidence_text(c: dict[str, Any]) -> str:
    """A stored confidence as `LEVEL: reason`."""
    return f"{c.get('level', '?').upper()}: {c.get('reason', '')}"


def _summary(result: RunResult) -> str:
    assert isinstance(result, VoteResult)
    t, c = result.tally, result.confidence
    return (f"winner: {t.winner or '(none)'} ({t.winner_votes}/{t.total}); confidence "
            f"{c.level.upper()} {c.ratio:.0%} ({c.reason})")


def _view(run: dict[str, Any]) -> list[Block]:
    r = run.get("result") or {}
    if not r:
        return []
    t, c = r.get("tally", {}), r.get("confidence", {})
    return [Block("metrics", items=[
                ("Winner", t.get("winner") or "(none)"), ("Confidence", confidence_text(c)),
                ("Consensus", f"{t.get('winner_votes', 0)}/{t.get('total', 0)} "
                              f"({t.get('ratio', 0):.2f})")]),
            Block("caption", body="One independent answer per voter; the confidence is the "
                                  "vote's agreement, computed in code."),
            Block("table", "Ballots", rows=[
                {"voter": f"{p.get('icon', '')} {p['persona']}".strip(),
                 "stance": p["stance"] if p["usable"] else "(abstained)",
                 "counted as": p.get("normalized", ""),
                 "reasoning": p.get("reasoning", "") or p.get("error", "")}
                for p in r.get("proposals", [])]),
            Block("table", "Tally", rows=tally_rows(t))] + warnings_block(r)


SPEC = ProtocolSpec(
    name="vote", title="Vote (baseline)", seed="002", question_name="question",
    runner=arun_vote,
    slots=(Slot("voters", many=True, minimum=MIN_VOTERS, maximum=MAX_VOTERS,
                defaults=tuple(p.seat_dict() for p in PANEL_DEBATERS),
                help="each answers once, independently"),),
    options=(), templates=TEMPLATES,
    estimate_calls=lambda options, seats: int(seats.get("voters", 3)),
    summary=_summary, phases=("propose",), view=_view)
