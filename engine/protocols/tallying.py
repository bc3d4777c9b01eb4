"""Ballots: what the tallying protocols share (the vote, the panel and any protocol whose
agents answer with a stance): round one's prompt and call, proposals, seat lists, and how a
tally reads as an outcome, as signals and as table rows.

A vote *is* a panel's round one, so both use the same `propose` template object: an override
written for one applies to the other, and the two are compared on the same prompt.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from engine.analysis.answers import hedge
from engine.analysis.stances import Confidence, Tally, normalize_stance
from engine.checks import unique_names
from engine.llm.calls import RunContext
from engine.llm.replies import extract_json
from engine.llm.structured import REASONS, SENTENCE, STANCE_STRING, json_schema
from engine.models import ConfigError, Seat, Task, Turn
from engine.protocols.checks import require_seat
from engine.protocols.templates import Template, render, stance_problem
from engine.views.blocks import Block

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry

ABSTAINED = "(abstained)"

MAX_DEBATERS = 8  # the panel's limit; a vote may match the calls of the largest panel
PROPOSE_SCHEMA = json_schema("proposal", {"stance": STANCE_STRING, "answer": SENTENCE,
                                          "reasoning": REASONS})
PROPOSE_KEYS = PROPOSE_SCHEMA.keys
PROPOSE = Template(
    "You are one debater on a panel. Answer the question on your own, before seeing anyone "
    "else's answer.\n\nQuestion: {question}\n\n"
    "Give a short canonical stance: the position itself (a number, a name or a short "
    "phrase), not a description of your method, so that debaters who agree give the "
    "identical label.\n\nReply with only a JSON object with three keys: \"stance\" holds "
    'that short canonical stance, your answer to "{question}" in at most 12 words; '
    '"answer" your full answer in one or two sentences; "reasoning" why, in two or three '
    'sentences:\n{"stance": <...>, "answer": <...>, "reasoning": <...>}',
    ("question",),
    "Round one: each debater answers alone (also the vote baseline's only prompt).",
    required=("question",))

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
                  role: str, endpoints: EndpointRegistry | None = None) -> list[Seat]:
    """A list of `low..high` seats with unique names; bare models are named `role 1`, ...
    (no role: after the slot, `agent 1`), and a seat without a role plays `role`."""
    if isinstance(seats, (str, Seat)) or not isinstance(seats, (list, tuple)):
        raise ConfigError(f"{slot} must be a list of seats ({low}..{high}), got "
                          f"{type(seats).__name__}", "input")
    if not low <= len(seats) <= high:
        raise ConfigError(f"{slot} must be {low}..{high} seats for a {protocol}, got "
                          f"{len(seats)}", "limit")
    out, one = [], slot[:-1] if slot.endswith("s") else slot
    for number, seat in enumerate(seats, 1):
        if seat is not None and not isinstance(seat, Seat):
            seat = Seat(f"{role or one} {number}", seat)
        out.append(require_seat(seat, f"{slot}[{number}]", endpoints, role))
    unique_names(out, one)
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


def need_stance(obj: dict[str, Any]) -> str:
    """Validation for `call_json`: "" when `stance` is a usable label, else why not."""
    stance = obj.get("stance")
    if isinstance(stance, bool) or not isinstance(stance, (str, int, float)):
        return 'the "stance" key must be a non-empty string'
    return "" if normalize_stance(text_value(stance)) else 'the "stance" key must not be empty'


async def propose(ctx: RunContext, seat: Seat, question: str) -> Proposal:
    """One seat's cold answer (the panel's round one; the vote's only call), on the one
    `PROPOSE` template both protocols list (or the run's override of it)."""
    prompt = render({"propose": PROPOSE}, ctx.prompts, "propose", question=question)
    obj, turn = await ctx.call_json(seat, [{"role": "user", "content": prompt}], phase="propose",
                                    round=1, schema=PROPOSE_SCHEMA, validate=need_stance,
                                    task=Task(kind="answer", keys=PROPOSE_KEYS))
    return ballot(ctx, turn, seat, obj, read_proposal, Proposal)


Ballot = TypeVar("Ballot", bound=Proposal)


def ballot(ctx: RunContext, turn: Turn, seat: Seat, obj: dict[str, Any] | None,
           read: Callable[[Seat, dict[str, Any]], Ballot], kind: type[Ballot]) -> Ballot:
    """A seat's proposal or rebuttal (`kind`), `read` from its JSON reply `obj`. Without JSON,
    or with one the reading trips on, the seat abstains (`usable=False`); a stance that is no
    position (the prompt's own placeholder echoed, or an essay: `stance_problem`; or a hedge
    declaring several different answers: `analysis.answers.hedge`) abstains too: it is
    blanked and the turn carries the warning."""
    made = ctx.guard(turn, read, seat, obj) if obj is not None else None
    if made is None:
        return kind(persona=seat.name, icon=seat.icon, usable=False,
                    error=turn.error or "no usable reply")
    why = stance_problem(made.stance, ctx.phrases) or hedge(made.stance)
    if not why:
        return made
    ctx.update(turn, warnings=[*turn.warnings, why])
    return made.model_copy(update={"stance": "", "normalized": ""})


def read_proposal(seat: Seat, obj: dict[str, Any]) -> Proposal:
    """A seat's proposal read from its JSON reply (its stance normalised)."""
    stance = text_value(obj.get("stance"))
    return Proposal(persona=seat.name, icon=seat.icon, stance=stance,
                    normalized=normalize_stance(stance), answer=text_value(obj.get("answer")),
                    reasoning=text_value(obj.get("reasoning")))


def peer_proposals(ctx: RunContext, proposals: list[Proposal]) -> list[Proposal]:
    """The proposals as another agent's prompt carries them (`RunContext.peer`): their own,
    or in a placebo run each seat's donor proposal, read from the donor's reply as the seat's
    own would be (a donor reply with no usable stance is no proposal)."""
    if ctx.donor is None:
        return proposals
    out = []
    for p in proposals:
        obj = extract_json(ctx.peer(p.persona, "propose", 1, ""))[0]
        made = read_proposal(Seat(name=p.persona, icon=p.icon, model=None), obj) \
            if obj is not None and not need_stance(obj) else None
        out.append(made or Proposal(persona=p.persona, icon=p.icon, usable=False,
                                    error="the donor run has no usable proposal"))
    return out


# --------------------------------------------------------------------------- presentation
def tally_rows(final: Tally, first: Tally | None = None) -> list[dict[str, Any]]:
    """Rows of a tally (and round one's, when given) for a table block: a column of counts
    per tally, a row per stance either counted, then the abstentions when there were any."""
    columns = {"votes": final, **({"round one": first} if first is not None else {})}
    stances = dict.fromkeys(s for t in columns.values() for s in t.counts)
    rows = [{"stance": s, **{k: t.counts.get(s, 0) for k, t in columns.items()}}
            for s in stances]
    abstained = {k: len(t.abstentions) for k, t in columns.items()}
    return rows + ([{"stance": ABSTAINED, **abstained}] if any(abstained.values()) else [])


def confidence_text(c: Confidence) -> str:
    """A confidence as `LEVEL: reason`."""
    return f"{c.level.upper()}: {c.reason}"


def tally_summary(t: Tally, c: Confidence) -> str:
    """A tally as the CLI's line: the winner and its votes, the confidence and its reason."""
    return (f"winner: {t.winner or '(none)'} ({t.winner_votes}/{t.total}); confidence "
            f"{c.level.upper()} {c.ratio:.0%} ({c.reason})")


def tally_outcome(t: Tally, c: Confidence) -> str:
    """A tally in a few words: the winner, the confidence level and the winner's share."""
    text = f"{t.winner or '(abstained)'} ({c.level}, {t.ratio:.0%})"
    return text + (", tied" if t.tied else "")


def share(t: Tally) -> float | None:
    """The winner's share of the ballots; None when every seat abstained (the tally's 0.0
    then is a placeholder, not a measured consensus)."""
    return round(t.ratio, 4) if t.positions else None


def tally_metrics(t: Tally, c: Confidence) -> dict[str, Any]:
    """A tally's numbers as stored on the run row (the tallying protocols' own signals); with
    no ballot the share and the confidence level are None, not the tally's placeholders."""
    return {"winner": t.winner or "", "votes": t.winner_votes, "total": t.total,
            "ratio": share(t), "tied": t.tied, "confidence_level": c.level if t.positions else None,
            "abstentions": len(t.abstentions)}


def tally_block(title: str, t: Tally) -> Block:
    """A tally as a chart block (bars per stance, the winner marked)."""
    return Block("tally", title, counts=dict(t.counts), winner=t.winner or "")


def flow_block(title: str, before: Tally, after: Tally) -> Block | None:
    """Each seat's stance before and after, as a chart block; None when there are no seats."""
    seats = list(dict.fromkeys([*before.ballots, *after.ballots]))
    if not seats:
        return None
    return Block("flow", title, rows=[{"seat": s, "before": before.ballots.get(s) or ABSTAINED,
                                       "after": after.ballots.get(s) or ABSTAINED}
                                      for s in seats])
