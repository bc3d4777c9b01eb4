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
from typing import Any, Unpack

from engine.analysis.stances import (
    Tally,
    classify_changes,
    derive_confidence,
    detect_mind_changes,
    tally,
)
from engine.checks import require_text, unique_names
from engine.config import RunKwargs
from engine.llm.calls import RunContext
from engine.llm.replies import extract_json
from engine.llm.structured import (
    BOOLEAN,
    REASONS,
    SENTENCE,
    SENTENCES,
    STANCE_STRING,
    STRING,
    array_of,
    json_schema,
    one_of,
)
from engine.models import Seat, Task
from engine.protocols import base
from engine.protocols import panel_result as report
from engine.protocols.base import (
    NO_POSITION,
    ProtocolSpec,
    Slot,
    execute,
    split_run_options,
    synchronous,
)
from engine.protocols.checks import require_seat
from engine.protocols.panel_result import Assessment, Critique, PanelResult, Rebuttal
from engine.protocols.personas import CRITIC, JUDGE, PANEL_DEBATERS
from engine.protocols.tallying import (
    MAX_DEBATERS,
    PROPOSE,
    Proposal,
    ballot,
    need_stance,
    peer_proposals,
    propose,
    read_proposal,
    require_seats,
    text_value,
)
from engine.protocols.templates import Template, render

MIN_DEBATERS = 2
VERDICTS = ("sound", "flawed", "unsupported")
# Each JSON phase's reply, declared once: asked of a server that constrains output to it.
CRITIQUE_SCHEMA = json_schema("critique", {"assessments": array_of(
    {"persona": STRING, "verdict": one_of(*VERDICTS), "flaw": SENTENCE}), "overall": REASONS})
REBUTTAL_SCHEMA = json_schema("rebuttal", {"stance": STANCE_STRING, "answer": SENTENCE,
                                           "reasoning": REASONS, "changed_mind": BOOLEAN})
SYNTHESIS_SCHEMA = json_schema("synthesis", {"answer": SENTENCE, "rationale": REASONS,
                                             "key_points": SENTENCES})
CRITIQUE_KEYS, REBUTTAL_KEYS = CRITIQUE_SCHEMA.keys, REBUTTAL_SCHEMA.keys
SYNTHESIS_KEYS = SYNTHESIS_SCHEMA.keys
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
        "Reply with only a JSON object with four keys: \"stance\" holds the short canonical "
        'stance you now stand by, your answer to "{question}" in at most 12 words; "answer" '
        'your full answer; "reasoning" why, answering the critique; "changed_mind" true or '
        'false:\n{"stance": <...>, "answer": <...>, "reasoning": <...>, "changed_mind": <...>}',
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


# --------------------------------------------------------------------------- validation
def _bool(value: Any) -> bool | None:
    """A `changed_mind` claim: JSON booleans, or yes/no/true/false text; else unknown."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower().rstrip(".") if value is not None else ""
    return {"true": True, "yes": True, "false": False, "no": False}.get(word)


def _verdict(value: Any) -> str:
    return re.sub(r"[^a-z]", "", str(value or "").lower())


def _need_assessments(obj: dict[str, Any]) -> str:
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


def _need_answer(obj: dict[str, Any]) -> str:
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


def _stances(proposals: list[Proposal]) -> dict[str, str]:
    """The usable proposals' stances by debater, as a task shows them to a seat."""
    return {p.persona: p.stance for p in proposals if p.usable}


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
                                    phase="critique", round=1, schema=CRITIQUE_SCHEMA,
                                    validate=_need_assessments,
                                    task=Task(kind="critique", keys=CRITIQUE_KEYS,
                                              others=_stances(proposals)))
    read = ctx.guard(turn, _read_critique, obj, proposals) if obj is not None else None
    if read is None:  # no JSON, or one the reading trips on: no critique, the run goes on
        error = turn.error or "no usable reply"
        warnings.append(f"critic {critic.name} failed ({error}); the rebuttals went ahead "
                        "without a critique")
        return Critique(usable=False, error=error)
    critique, notes = read
    warnings.extend(notes)
    return critique


def _peer_critique(ctx: RunContext, critic: Seat, proposals: list[Proposal],
                   critique: Critique) -> Critique:
    """The critique as a debater's rebuttal prompt carries it: the critic's own, or in a
    placebo run the donor run's critique, read against the donor's proposals."""
    if ctx.donor is None:
        return critique
    obj = extract_json(ctx.peer(critic.name, "critique", 1, ""))[0]
    if obj is None or _need_assessments(obj):
        return Critique(usable=False, error="the donor run has no usable critique")
    try:
        return _read_critique(obj, proposals)[0]
    except (TypeError, ValueError, KeyError, AttributeError):
        return Critique(usable=False, error="the donor run has no usable critique")


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
                                    phase="rebuttal", round=2, schema=REBUTTAL_SCHEMA,
                                    validate=need_stance,
                                    task=Task(kind="revise", keys=REBUTTAL_KEYS,
                                              own=own.stance if own.usable else None,
                                              verdict=note.verdict if note else "",
                                              others=_stances(others)))
    return ballot(ctx, turn, seat, obj, _rebuttal, Rebuttal)


def _rebuttal(seat: Seat, obj: dict[str, Any]) -> Rebuttal:
    return Rebuttal(**read_proposal(seat, obj).model_dump(),
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
                                    phase="synthesis", round=2, schema=SYNTHESIS_SCHEMA,
                                    validate=_need_answer,
                                    task=Task(kind="judge", keys=SYNTHESIS_KEYS,
                                              others={r.persona: r.stance for r
                                                      in rebuttals if r.usable}))
    read = ctx.guard(turn, _read_synthesis, obj) if obj is not None else None
    if read is None:  # no JSON, or one the reading trips on: no synthesis, the run goes on
        warnings.append(f"judge {judge.name} failed ({turn.error or 'no usable reply'}); "
                        "there is no synthesis and the answer is empty")
        return "", "", []
    answer, rationale, texts, notes = read
    warnings.extend(notes)
    return answer, rationale, texts


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
    critic = require_seat(critic, "critic", endpoints, "critic")
    judge = require_seat(judge, "judge", endpoints, "judge")
    for seat in (critic, judge):  # the critic and the judge may share a name
        unique_names([*debaters, seat], "seat")
    expected = str(run.expected or "").strip()
    # the order debaters are shown to the critic, to one another and to the judge
    order, shown = base.presented(debaters, run.order_seed)

    async def body(ctx: RunContext) -> PanelResult:
        warnings: list[str] = []
        proposals = list(await asyncio.gather(*(propose(ctx, seat, question) for seat in shown)))
        for p in proposals:
            if not p.usable:
                warnings.append(f"debater {p.persona}: proposal failed ({p.error}); it "
                                "rebuts without one")
        seen = peer_proposals(ctx, proposals)  # what the critic and the others read
        critique = await _critique(ctx, critic, question, seen, warnings)
        noted = _peer_critique(ctx, critic, seen, critique)
        rebuttals = list(await asyncio.gather(
            *(_rebut(ctx, seat, question, own, seen, noted)
              for seat, own in zip(shown, proposals))))
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
            rationale=rationale, key_points=points, warnings=warnings)

    return await execute(SPEC, question, body,
                         {"debaters": debaters, "critic": critic, "judge": judge}, {}, run, order)


run_panel = synchronous(arun_panel)


def _defaults(*personas: Any) -> tuple[dict[str, str], ...]:
    return tuple(p.seat_dict() for p in personas)


SPEC = ProtocolSpec(
    final_positions=lambda r: {b.persona: b.stance or NO_POSITION for b in r.rebuttals} or None,
    judge_phase="synthesis",
    shows_peers=True,  # DESIGN 2.13: a placebo arm swaps its peers' messages
    name="panel", title="Persona panel", source="002", question_name="question",
    runner=arun_panel,
    slots=(Slot("debaters", many=True, minimum=MIN_DEBATERS, maximum=MAX_DEBATERS,
                defaults=_defaults(*PANEL_DEBATERS), role="debater",
                help="personas who propose, rebut and vote"),
           Slot("critic", defaults=_defaults(CRITIC), role="critic",
                help="names each proposal's flaw; answers nothing"),
           Slot("judge", defaults=_defaults(JUDGE), role="judge",
                help="writes the final answer; never states a confidence")),
    options=(), templates=TEMPLATES,
    estimate_calls=lambda options, seats: 2 * int(seats.get("debaters", 3)) + 2,
    estimate_waves=lambda options, seats: 4,  # propose (all at once), critique, rebuttal, synthesis
    result_type=PanelResult, summary=report.summary, outcome=report.outcome,
    signals=report.signals, view=report.view, insights=report.insights, lost=report.lost,
    carried=lambda r: base.tally_carried(r.tally),
    # the proposals are round one, the rebuttals round two (a failed call abstains)
    answers_by_round=lambda r: [{p.persona: p.stance if p.usable else None for p in ps}
                                for ps in (r.proposals, r.rebuttals)],
    phases=("propose", "critique", "rebuttal", "synthesis"), color="#2e7d32")
