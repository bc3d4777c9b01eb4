"""Persona panel (seed 002): personas propose, a critic probes, everyone rebuts, Python tallies
the vote, and a judge writes the answer; the confidence is the agreement itself.

Phases and calls (N debaters, 2N+2 calls when nothing fails):
propose (N, concurrent) -> critique (1) -> rebuttal (N, concurrent) -> vote (no call: `tally`
on the rebuttal stances) -> synthesis (1, the judge; it never states a confidence).

Failures are recorded, never invented over: a debater whose proposal fails rebuts without one;
a debater whose rebuttal fails *abstains* (it counts in the tally's `total` but is never a
position; its round-one proposal is not silently used instead, because that would be a stance
it was never asked to confirm after the critique). A failed critic leaves the rebuttals without
a note; a failed judge leaves `answer` empty. Each failure is named in `warnings`.
"""
from __future__ import annotations

import asyncio
import re
import time
from typing import Any, Literal

from pydantic import BaseModel, Field

from engine.llm.calls import RunContext
from typing import Unpack

from engine.config import RunKwargs
from engine.models import ConfigError, RunResult, Seat, Signals
from engine.protocols.personas import CRITIC, JUDGE, PANEL_DEBATERS
from engine.analysis.stances import (Confidence, Tally, classify_changes, derive_confidence,
                       detect_mind_changes, normalize_stance, tally)
from engine.protocols.templates import Template, render
from engine.reports.views import Block, warnings_block
from engine.text import fold_name
from engine.protocols.base import ProtocolSpec, Slot, execute, run_sync, split_run_options
from engine.protocols.checks import require_seat, require_text
from engine.protocols.ballots import (flow_block, tally_block, MAX_DEBATERS, PROPOSE, Proposal, confidence_text, need_stance, propose, require_seats, tally_metrics, tally_outcome, tally_rows, text_value)

MIN_DEBATERS = 2
VERDICTS = ("sound", "flawed", "unsupported")
CRITIQUE_KEYS = ("assessments", "overall")
REBUTTAL_KEYS = ("stance", "answer", "reasoning", "changed_mind")
SYNTHESIS_KEYS = ("answer", "rationale", "key_points")
NO_PROPOSAL = "(none: your proposal could not be read)"
NO_CRITIQUE = "unavailable (the critic failed)"

TEMPLATES = {
    "propose": PROPOSE,
    "critique": Template(
        "You are the critic of a debate panel. You answer nothing yourself.\n\n"
        "Question: {question}\n\nThe debaters' proposals:\n{proposals}\n\n"
        "For each proposal give a verdict (sound, flawed or unsupported) and its single most "
        "important flaw. Then give your overall read of the proposals in one or two "
        "sentences.\n\nReply with only a JSON object:\n"
        '{"assessments": [{"persona": "the debater\'s name as given in brackets", '
        '"verdict": "sound, flawed or unsupported", "flaw": "the single most important '
        'flaw"}], "overall": "your overall read"}',
        ("question", "proposals"),
        "One call over all proposals: a verdict and a flaw for each, and an overall read.",
        required=("question", "proposals")),
    "rebuttal": Template(
        "You are a debater on a panel, answering a second time after a critique.\n\n"
        "Question: {question}\n\n"
        "Your proposal's stance: {own_stance}\nYour proposal's answer: {own_answer}\n"
        "Your proposal's reasoning: {own_reasoning}\n\n"
        "Critic's verdict on your proposal: {verdict}\n"
        "Critic's note on your proposal: {flaw}\nCritic's overall read: {overall}\n\n"
        "The other debaters' proposals:\n{others}\n\n"
        "Revise or defend your answer. Change your stance only if you are genuinely "
        "convinced; if you hold it, keep the same short canonical stance.\n\n"
        "Reply with only a JSON object:\n"
        '{"stance": "your short canonical stance", "answer": "your full answer", '
        '"reasoning": "why, answering the critique", "changed_mind": true or false}',
        ("question", "debater", "own_stance", "own_answer", "own_reasoning", "verdict", "flaw",
         "overall", "others"),
        "Round two: a debater sees its own proposal, the critic's note on it, the critic's "
        "overall read and the other debaters' round-one proposals.",
        required=("question", "own_stance", "flaw", "others")),
    "synthesis": Template(
        "You are the judge of a debate panel.\n\nQuestion: {question}\n\n"
        "The debaters' final positions:\n{positions}\n\n"
        "The vote, counted in code:\n{vote}\n\n"
        "Write the panel's final answer from these positions, with a rationale and the key "
        "points. Do not state any confidence: it is computed from the vote.\n\n"
        "Reply with only a JSON object:\n"
        '{"answer": "the final answer", "rationale": "why, in two or three sentences", '
        '"key_points": ["a key point", "another key point"]}',
        ("question", "positions", "vote", "overall"),
        "After the vote: the judge writes the answer (the confidence is the vote's).",
        required=("question", "positions")),
}


# --------------------------------------------------------------------------- result values
class Rebuttal(Proposal):
    """A round-two answer; `changed_mind` is the debater's own claim (None when not stated)."""

    changed_mind: bool | None = None


class Assessment(BaseModel):
    """The critic's verdict on one proposal and its single most important flaw."""

    persona: str
    verdict: Literal["sound", "flawed", "unsupported"]
    flaw: str = ""


class Critique(BaseModel):
    """The critic's one call: a verdict per proposal and an overall read."""

    assessments: list[Assessment] = Field(default_factory=list)
    overall: str = ""
    usable: bool = True
    error: str = ""

    def for_persona(self, name: str) -> Assessment | None:
        return next((a for a in self.assessments if a.persona == name), None)


class PanelResult(RunResult):
    """Seed 002's debate result, plus round one's tally (what a plain vote would have said).

    `mind_changes` are measured from the normalised stances (round one -> rebuttal);
    `claimed_changes` are the debaters' own `changed_mind` claims, kept apart so that the two
    can disagree visibly. `change_kinds` (persuaded, misled, switched, held) is filled only
    when the run was given an `expected` answer.
    """

    question: str
    proposals: list[Proposal]
    critique: Critique
    rebuttals: list[Rebuttal]
    mind_changes: list[str] = Field(default_factory=list)
    claimed_changes: list[str] = Field(default_factory=list)
    change_kinds: dict[str, str] = Field(default_factory=dict)
    tally: Tally
    confidence: Confidence
    first_round: Tally
    first_round_confidence: Confidence
    answer: str = ""
    rationale: str = ""
    key_points: list[str] = Field(default_factory=list)

    def final_answer(self) -> str | None:
        """The tally winner (normalised), not the judge's wording: the vote is the verdict,
        and the judge may restate it in words `normalize_stance` cannot match."""
        return self.tally.winner

    def claim_mismatches(self) -> list[str]:
        """Debaters whose `changed_mind` claim disagrees with the measured change."""
        before = {p.persona: p.stance if p.usable else None for p in self.proposals}
        measured = set(self.mind_changes)
        return [r.persona for r in self.rebuttals
                if r.usable and r.changed_mind is not None and before.get(r.persona)
                and r.changed_mind != (r.persona in measured)]



# --------------------------------------------------------------------------- validation
def _with_role(seat: Seat, role: str) -> Seat:
    return seat if seat.role else seat.model_copy(update={"role": role})


def _bool(value: Any) -> bool | None:
    """A `changed_mind` claim: JSON booleans, or yes/no/true/false text; else unknown."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower().rstrip(".") if value is not None else ""
    return {"true": True, "yes": True, "false": False, "no": False}.get(word)


def _verdict(value: Any) -> str:
    return re.sub(r"[^a-z]", "", str(value or "").lower())


def _need_assessments(obj: dict) -> str:
    items = obj.get("assessments")
    if not isinstance(items, list) or not items:
        return 'the "assessments" key must be a non-empty list'
    for item in items:
        if not isinstance(item, dict) or not text_value(item.get("persona")):
            return 'each assessment needs a "persona"'
        if _verdict(item.get("verdict")) not in VERDICTS:
            return (f'each "verdict" must be one of {", ".join(VERDICTS)}, got '
                    f'{item.get("verdict")!r}')
    return ""


def _need_answer(obj: dict) -> str:
    return "" if text_value(obj.get("answer")) else 'the "answer" key must be non-empty text'


# --------------------------------------------------------------------------- phases
def format_proposals(proposals: list[Proposal]) -> str:
    """Proposals as the critic, the rebuttals and the judge read them, one block per debater."""
    blocks = []
    for p in proposals:
        if not p.usable:
            blocks.append(f"[{p.persona}] no usable proposal ({p.error or 'no reply'})")
            continue
        blocks.append(f"[{p.persona}] stance: {p.stance}\n    answer: {p.answer}\n"
                      f"    reasoning: {p.reasoning}")
    return "\n".join(blocks) or "(none)"


def _match(name: str, names: list[str]) -> str | None:
    """The debater an assessment's `persona` means: exact, then loose, then a unique part."""
    if name in names:
        return name

    def key(text: str) -> str:
        return re.sub(r"[^\w]+", " ", text.lower()).strip()
    loose = {key(n): n for n in names}
    if key(name) in loose:
        return loose[key(name)]
    inside = [n for n in names if key(n) and key(n) in key(name)]
    return inside[0] if len(inside) == 1 else None


async def _critique(ctx: RunContext, critic: Seat, question: str, proposals: list[Proposal],
                    warnings: list[str]) -> Critique:
    if not any(p.usable for p in proposals):
        warnings.append("no debater made a usable proposal; the critic was not asked")
        return Critique(usable=False, error="no usable proposals")
    prompt = render(TEMPLATES, ctx.prompts, "critique", question=question,
                    proposals=format_proposals(proposals))
    obj, turn = await ctx.call_json(critic, [{"role": "user", "content": prompt}],
                                    phase="critique", round=1, keys=CRITIQUE_KEYS,
                                    validate=_need_assessments)
    read = ctx.guard(turn, _read_critique, obj, proposals) if obj is not None else None
    if read is None:  # no JSON, or one the reading trips on: no critique, the run goes on
        error = turn.error or "no usable reply"
        warnings.append(f"critic {critic.name} failed ({error}); the rebuttals went ahead "
                        "without a critique")
        return Critique(usable=False, error=error)
    critique, notes = read
    warnings.extend(notes)
    return critique


def _read_critique(obj: dict[str, Any], proposals: list[Proposal]
                   ) -> tuple[Critique, list[str]]:
    names = [p.persona for p in proposals if p.usable]
    found: dict[str, Assessment] = {}
    warnings: list[str] = []
    for item in obj["assessments"]:
        who = _match(text_value(item.get("persona")), names)
        if who is None:
            warnings.append(f"critic assessed {text_value(item.get('persona'))!r}, who is not "
                            "among the usable proposals; ignored")
        elif who not in found:
            found[who] = Assessment(persona=who, verdict=_verdict(item.get("verdict")),
                                    flaw=text_value(item.get("flaw")))
    for name in names:
        if name not in found:
            warnings.append(f"critic gave no verdict on {name}'s proposal")
    return Critique(assessments=[found[n] for n in names if n in found],
                    overall=text_value(obj.get("overall"))), warnings


async def _rebut(ctx: RunContext, seat: Seat, question: str, own: Proposal,
                 proposals: list[Proposal], critique: Critique) -> Rebuttal:
    note = critique.for_persona(seat.name)
    if not critique.usable:
        verdict, flaw, overall = NO_CRITIQUE, "(no note)", "(the critic's review is unavailable)"
    elif note is None:
        verdict, flaw, overall = "not assessed", "(no note)", critique.overall or "(none)"
    else:
        verdict, flaw, overall = note.verdict, note.flaw or "(none)", critique.overall or "(none)"
    others = [p for p in proposals if p.persona != seat.name]
    prompt = render(TEMPLATES, ctx.prompts, "rebuttal", question=question, debater=seat.name,
                    own_stance=own.stance if own.usable else NO_PROPOSAL,
                    own_answer=own.answer if own.usable else "(none)",
                    own_reasoning=own.reasoning if own.usable else "(none)",
                    verdict=verdict, flaw=flaw, overall=overall,
                    others=format_proposals(others))
    obj, turn = await ctx.call_json(seat, [{"role": "user", "content": prompt}],
                                    phase="rebuttal", round=2, keys=REBUTTAL_KEYS,
                                    validate=need_stance)
    made = ctx.guard(turn, _rebuttal, seat, obj) if obj is not None else None
    if made is None:  # no JSON, or one the reading trips on: this seat abstains
        return Rebuttal(persona=seat.name, icon=seat.icon, usable=False,
                        error=turn.error or "no usable reply")
    return made


def _rebuttal(seat: Seat, obj: dict[str, Any]) -> Rebuttal:
    stance = text_value(obj.get("stance"))
    return Rebuttal(persona=seat.name, icon=seat.icon, stance=stance,
                    normalized=normalize_stance(stance), answer=text_value(obj.get("answer")),
                    reasoning=text_value(obj.get("reasoning")),
                    changed_mind=_bool(obj.get("changed_mind")))


def format_vote(t: Tally) -> str:
    """The counted vote as the judge reads it."""
    lines = [f"[{name}] {stance if stance is not None else 'abstained'}"
             for name, stance in t.ballots.items()]
    lines.append("Counts: " + (", ".join(f"{s} x{n}" for s, n in t.counts.items()) or "none"))
    if t.winner is not None:
        tie = " (tied; the tie is broken by the smallest stance)" if t.tied else ""
        lines.append(f"Leading stance: {t.winner} ({t.winner_votes} of {t.total} votes){tie}")
    return "\n".join(lines)


async def _synthesise(ctx: RunContext, judge: Seat, question: str, rebuttals: list[Rebuttal],
                      vote: Tally, overall: str, warnings: list[str]
                      ) -> tuple[str, str, list[str]]:
    if vote.winner is None:
        warnings.append("no debater gave a usable final stance; the judge was not asked")
        return "", "", []
    prompt = render(TEMPLATES, ctx.prompts, "synthesis", question=question,
                    positions=format_proposals(list(rebuttals)), vote=format_vote(vote),
                    overall=overall or "(none)")
    obj, turn = await ctx.call_json(judge, [{"role": "user", "content": prompt}],
                                    phase="synthesis", round=2, keys=SYNTHESIS_KEYS,
                                    validate=_need_answer)
    read = ctx.guard(turn, _read_synthesis, obj) if obj is not None else None
    if read is None:  # no JSON, or one the reading trips on: no synthesis, the run goes on
        warnings.append(f"judge {judge.name} failed ({turn.error or 'no usable reply'}); "
                        "there is no synthesis and the answer is empty")
        return "", "", []
    *synthesis, notes = read
    warnings.extend(notes)
    return synthesis[0], synthesis[1], synthesis[2]


def _read_synthesis(obj: dict[str, Any]) -> tuple[str, str, list[str], list[str]]:
    notes = []
    asserted = [k for k in obj if "confidence" in k.lower()]
    if asserted:
        notes.append(f"the judge stated {asserted[0]!r}; ignored: the confidence is the "
                     "vote's")
    points = obj.get("key_points")
    points = [points] if isinstance(points, str) else points if isinstance(points, list) else []
    texts = [text for text in map(text_value, points) if text]
    return text_value(obj.get("answer")), text_value(obj.get("rationale")), texts, notes


# --------------------------------------------------------------------------- the run
async def arun_panel(question: str, *, debaters: list[Seat | Any], critic: Seat | Any,
                     judge: Seat | Any, **kw: Unpack[RunKwargs]) -> PanelResult:
    """Seed 002's persona panel: propose, critique, rebut, vote (Python), synthesise."""
    run = split_run_options(dict(kw), "panel")
    question = require_text(question, "question")
    endpoints = run.endpoints
    debaters = require_seats(debaters, "debaters", MIN_DEBATERS, MAX_DEBATERS, "panel",
                             "debater", endpoints)
    critic = _with_role(require_seat(critic, "critic", endpoints), "critic")
    judge = _with_role(require_seat(judge, "judge", endpoints), "judge")
    for seat, slot in ((critic, "critic"), (judge, "judge")):
        if fold_name(seat.name) in {fold_name(d.name) for d in debaters}:
            raise ConfigError(f"the {slot}'s name {seat.name!r} is also a debater's; give "
                              "every seat its own name", "input")
    expected = str(run.expected or "").strip()

    async def body(ctx: RunContext) -> PanelResult:
        start = time.monotonic()
        warnings: list[str] = []
        proposals = list(await asyncio.gather(
            *(propose(ctx, seat, question, TEMPLATES) for seat in debaters)))
        for p in proposals:
            if not p.usable:
                warnings.append(f"debater {p.persona}: proposal failed ({p.error}); it "
                                "rebuts without one")
        critique = await _critique(ctx, critic, question, proposals, warnings)
        rebuttals = list(await asyncio.gather(
            *(_rebut(ctx, seat, question, own, proposals, critique)
              for seat, own in zip(debaters, proposals))))
        for r in rebuttals:
            if not r.usable:
                warnings.append(f"debater {r.persona}: rebuttal failed ({r.error}); it "
                                "abstains from the vote")
        before = {p.persona: p.stance if p.usable else None for p in proposals}
        after = {r.persona: r.stance if r.usable else None for r in rebuttals}
        first, final = tally(before), tally(after)
        answer, rationale, points = await _synthesise(ctx, judge, question, rebuttals, final,
                                                      critique.overall, warnings)
        return PanelResult(
            question=question, proposals=proposals, critique=critique, rebuttals=rebuttals,
            mind_changes=detect_mind_changes(before, after),
            claimed_changes=[r.persona for r in rebuttals if r.usable and r.changed_mind],
            change_kinds=classify_changes(before, after, expected) if expected else {},
            tally=final, confidence=derive_confidence(final), first_round=first,
            first_round_confidence=derive_confidence(first), answer=answer,
            rationale=rationale, key_points=points, warnings=warnings,
            duration=time.monotonic() - start)

    return await execute("panel", question, TEMPLATES, body, {"debaters": debaters, "critic": critic, "judge": judge}, {},
                         run)


def run_panel(question: str, **kw: Any) -> PanelResult:
    """Synchronous `arun_panel`."""
    return run_sync(arun_panel(question, **kw))


# --------------------------------------------------------------------------- presentation
def _summary(result: PanelResult) -> str:
    t, c, first = result.tally, result.confidence, result.first_round
    lines = [f"winner: {t.winner or '(none)'} ({t.winner_votes}/{t.total}); confidence "
             f"{c.level.upper()} {c.ratio:.0%} ({c.reason})",
             f"round one: {first.winner or '(none)'} ({first.winner_votes}/{first.total}); "
             f"mind changes: {', '.join(result.mind_changes) or 'none'}"]
    if result.answer:
        lines.append(f"answer: {result.answer[:200]}")
    return "\n".join(lines)


def _outcome(result: PanelResult) -> str:
    text = tally_outcome(result.tally, result.confidence)
    return text + (", debate changed it" if result.first_round.winner != result.tally.winner
                   else "")


def _signals(result: PanelResult) -> Signals:
    t, first = result.tally, result.first_round
    kinds = list(result.change_kinds.values())
    extra = {**tally_metrics(t, result.confidence), "debaters": len(result.proposals),
             "mind_changes": len(result.mind_changes),
             "claimed_changes": len(result.claimed_changes),
             "claim_mismatches": len(result.claim_mismatches()),
             "critic_flawed": sum(a.verdict == "flawed" for a in result.critique.assessments),
             "first_round_winner": first.winner or "",
             "first_round_ratio": round(first.ratio, 4),
             "first_round_confidence_level": result.first_round_confidence.level,
             "changed_outcome": first.winner != t.winner,
             "answer": result.answer[:500], "judged": bool(result.answer)}
    if result.change_kinds:
        extra.update({kind: kinds.count(kind) for kind in ("persuaded", "misled", "switched")})
    return Signals(answer=t.winner, first_answer=first.winner, consensus=t.ratio,
                   level=result.confidence.level, seats=len(result.proposals),
                   mind_changes=len(result.mind_changes),
                   persuaded=kinds.count("persuaded") if result.change_kinds else None,
                   misled=kinds.count("misled") if result.change_kinds else None, extra=extra)


def _view(r: PanelResult) -> list[Block]:
    t, first, c, fc = r.tally, r.first_round, r.confidence, r.first_round_confidence
    verdicts = {a.persona: a for a in r.critique.assessments}
    before = {p.persona: p for p in r.proposals}
    changed = set(r.mind_changes)
    blocks = [
        Block("metrics", items=[
            ("Winner", t.winner or "(none)"), ("Confidence", confidence_text(c)),
            ("Consensus", f"{t.winner_votes}/{t.total} ({t.ratio:.2f})"),
            ("Round-one winner", f"{first.winner or '(none)'} ({fc.level})"),
            ("Mind changes", len(changed))]),
        Block("caption", body="The confidence is the vote's agreement, computed in code; the "
                              "judge never states one."),
        Block("text", "Answer (judge)", r.answer or "(no synthesis)"),
        Block("text", "Rationale", r.rationale),
        Block("text", "Key points", "\n".join(f"- {p}" for p in r.key_points)),
        Block("table", "Round one: proposals and the critic's verdicts", rows=[
            {"debater": f"{p.icon} {p.persona}".strip(),
             "stance": p.stance if p.usable else "(failed)",
             "verdict": verdicts[p.persona].verdict if p.persona in verdicts else "",
             "flaw": verdicts[p.persona].flaw if p.persona in verdicts else "",
             "reasoning": p.reasoning or p.error} for p in r.proposals]),
        Block("text", "Critic's overall read", r.critique.overall or r.critique.error),
        Block("table", "Rebuttals and mind changes (measured vs claimed)", rows=[
            {"debater": f"{x.icon} {x.persona}".strip(),
             "before": (before[x.persona].stance if x.persona in before else "") or "(none)",
             "after": x.stance if x.usable else "(abstained)",
             "changed (measured)": x.persona in changed, "changed (claimed)": x.changed_mind,
             "kind": r.change_kinds.get(x.persona, ""), "reasoning": x.reasoning or x.error}
            for x in r.rebuttals]),
        Block("table", "Tally (final vs round one)", rows=tally_rows(t, first)),
        tally_block("Final vote", t), tally_block("Round-one vote", first),
    ]
    flow = flow_block("Stance before → after the critique", first, t)
    blocks += [flow] if flow is not None else []
    return [b for b in blocks if b.kind != "text" or b.body] + warnings_block(r.warnings)


def _defaults(*personas: Any) -> tuple[dict[str, str], ...]:
    return tuple(p.seat_dict() for p in personas)


SPEC = ProtocolSpec(
    name="panel", title="Persona panel", seed="002", question_name="question",
    runner=arun_panel,
    slots=(Slot("debaters", many=True, minimum=MIN_DEBATERS, maximum=MAX_DEBATERS,
                defaults=_defaults(*PANEL_DEBATERS),
                help="personas who propose, rebut and vote"),
           Slot("critic", defaults=_defaults(CRITIC),
                help="names each proposal's flaw; answers nothing"),
           Slot("judge", defaults=_defaults(JUDGE),
                help="writes the final answer; never states a confidence")),
    options=(), templates=TEMPLATES,
    estimate_calls=lambda options, seats: 2 * int(seats.get("debaters", 3)) + 2,
    result_type=PanelResult, summary=_summary, outcome=_outcome, signals=_signals,
    view=_view, phases=("propose", "critique", "rebuttal", "synthesis"), color="#2e7d32")
