"""Roundtable (seed 003): role-named agents answer in turn; the floor and a judge read agreement.

`rounds x agents` turns in order, one call each; each prompt holds the question, the context
and the earlier usable turns. Agreement is read by the lexical floor (`overlap_agreement`, code)
and, optionally, by one judge call (a model); a stance tally is reported beside them. None of
these readings is verification.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Unpack

from engine.analysis.agreement import LEVELS, overlap_agreement, unbacked
from engine.analysis.answers import hedge
from engine.analysis.stances import derive_confidence, tally
from engine.checks import require_int, require_text, unique_names
from engine.config import RunKwargs
from engine.llm.calls import RunContext
from engine.llm.lines import Line, line_format
from engine.llm.structured import REASONS, SENTENCE, SENTENCES, json_schema, one_of
from engine.models import ConfigError, Seat, Task, model_spec
from engine.protocols import roundtable_result as report
from engine.protocols.base import (
    Option,
    ProtocolSpec,
    Slot,
    execute,
    presented,
    split_run_options,
    synchronous,
    tally_carried,
)
from engine.protocols.checks import require_seat
from engine.protocols.roles import canonical, library_text
from engine.protocols.roundtable_result import Exchange, JudgeReading, RoundtableResult
from engine.protocols.tallying import require_seats
from engine.protocols.templates import Template, render, stance_problem

MAX_ROUNDS = 3
MAX_AGENTS = 5
ROLES = {
    "proposer": "the proposer: put forward a concrete answer to the question and make the "
                "case for it",
    "critic": "the critic: find the weakest points in the answers so far and say what would "
              "fix them",
    "devil_advocate": "the devil's advocate: argue for the strongest alternative to the view "
                      "most others hold, even one you would not hold yourself",
    "synthesiser": "the synthesiser: combine the strongest points made so far into one "
                   "position that most agents can accept",
    "verifier": "the verifier: check each claim made so far against the question and say "
                "which hold up",
}
PARTICIPANT = "a participant: give your own best answer to the question"
NO_CONTEXT = "(none given)"
NO_TURNS = "(none yet: you speak first)"
QUALIFIED, BLOCKED = "qualified-draft", "blocked-escalated"
JUDGE_SCHEMA = json_schema("agreement", {  # the judge's reply, declared once
    "agreement_level": one_of(*LEVELS), "dominant_position": SENTENCE,
    "dissenting_views": SENTENCES, "rationale": REASONS})
JUDGE_KEYS = JUDGE_SCHEMA.keys
# a turn: a paragraph, then its stance, a short answer (a grammar where the server applies one)
STANCE_LINE = line_format("stance", Line("STANCE", "short"), lead=True)

TEMPLATES = {
    "system": Template(
        "You are {agent}, {role}.\n\nYou take part in a roundtable where {agents} answer the "
        "same question in turn, each in its own role. Keep to your role.",
        ("agent", "role", "agents"),
        "Each agent's system prompt; it must start `You are {agent},` (the seat's persona, if "
        "any, is appended).", required=("agent", "role")),
    "turn": Template(
        "Question: {question}\n\nContext: {context}\n\nEarlier turns:\n{transcript}\n\n"
        "This is round {round} of {rounds}. Answer in your role in one short paragraph, taking "
        "up the earlier turns where they bear on your answer. End with one line of the form "
        '"STANCE: ...", where ... is your answer to "{question}" in at most 12 words.',
        ("question", "context", "transcript", "agent", "role", "round", "rounds"),
        "Every turn: the question, the context and the earlier usable turns.",
        required=("question", "transcript")),
    "judge": Template(
        "You are judging how far the agents at a roundtable agree, by meaning rather than by "
        "wording.\n\nQuestion: {question}\n\nContext: {context}\n\n"
        "Each agent's final turn:\n{final_turns}\n\n"
        "Levels: strong = every agent holds one position; moderate = at least two thirds do; "
        "weak = at least two agents agree; none = no two agree.\n\n"
        "Reply with only a JSON object with these keys:\n"
        '{"agreement_level": "none, weak, moderate or strong", '
        '"dominant_position": "the position most agents hold, in one sentence", '
        '"dissenting_views": ["each view outside it, one sentence each"], '
        '"rationale": "why, in one or two sentences"}',
        ("question", "context", "final_turns", "transcript", "agents"),
        "Optional judge, after the last round: each agent's final usable turn.",
        required=("question", "final_turns")),
}

# Greedy to the end of the line and stripped in Python: a lazy group followed by an optional
# trailing run was quadratic on a line of spaces (100,000 took 24 s).
_STANCE = re.compile(r"^[ \t>#*_-]*STANCE[*_]*[ \t]*:(.*)$", re.I | re.M)


def role_name(role: str) -> str:
    """A known role's canonical name (`devil's advocate` -> `devil_advocate`), else the text."""
    return canonical(role) or (role or "").strip()


def role_description(role: str) -> str:
    """The one-line description a known role gets in the prompt; free text is used as given
    (a role the library describes in its own words gets those, `roles.library_text`)."""
    name = role_name(role)
    return ROLES.get(name) or name or PARTICIPANT


def parse_stance(text: str, phrases: Iterable[str] = ()) -> tuple[dict[str, Any], list[str]]:
    """The last `STANCE:` line of a turn; a missing one is a warning, never invented, and a
    turn declaring several different answers (`analysis.answers.hedge`) or echoing the
    prompt's placeholder text (`phrases`, `templates.stance_problem`) gives none."""
    found = [m.group(1).strip().strip("*_ \t").strip() for m in _STANCE.finditer(text or "")]
    found = [s for s in found if s]
    if not found:
        return {"stance": None}, ["no STANCE line; this turn gives no stance"]
    why = stance_problem(found[-1], phrases) or hedge(text)
    return ({"stance": None}, [why]) if why else ({"stance": found[-1]}, [])


def _transcript(exchanges: list[Exchange]) -> str:
    usable = [e for e in exchanges if e.usable]
    return "\n\n".join(f"[round {e.round}] {e.agent} ({e.role or 'participant'}):\n{e.response}"
                       for e in usable) or NO_TURNS


def _peers(ctx: RunContext, mine: str, exchanges: list[Exchange]) -> list[Exchange]:
    """The transcript so far as agent `mine` hears it: its own turns, and the others' as
    `RunContext.peer` carries them (a placebo run's donor turns, their stances read again)."""
    def heard(e: Exchange) -> Exchange:
        text = ctx.peer(e.agent, "turn", e.round, e.response)
        return e.model_copy(update={"response": text, "usable": bool(text.strip()),
                                    "stance": parse_stance(text)[0]["stance"]})
    if ctx.donor is None:
        return exchanges
    return [e if e.agent == mine else heard(e) for e in exchanges]


def _turn_task(seat: Seat, exchanges: list[Exchange]) -> Task:
    """What a turn asks, as structure: each agent's latest stance so far, the seat's own apart."""
    latest = {e.agent: e.stance for e in exchanges if e.usable and e.stance}
    return Task(kind="turn", stance_line=True, role=role_name(seat.role),
                own=latest.pop(seat.name, None), others=latest)


def _check_judge(obj: dict[str, Any]) -> str:
    level = obj.get("agreement_level")
    if not isinstance(level, str) or level.strip().lower() not in LEVELS:
        return f"agreement_level must be one of {', '.join(LEVELS)}; got {level!r}"
    return ""


def _reading(obj: dict[str, Any]) -> tuple[JudgeReading, list[str]]:
    """The judge's fields; its own confidence or completion state, if any, is never read."""
    warnings = [f"judge reply has no {key}" for key in JUDGE_KEYS[1:] if key not in obj]
    views = obj.get("dissenting_views", [])
    if isinstance(views, str):
        views = [views] if views.strip() else []
    elif not isinstance(views, list):
        warnings.append(f"judge dissenting_views is not a list ({type(views).__name__}); "
                        "left empty")
        views = []

    def text(v: Any) -> str:
        return v if isinstance(v, str) else "" if v is None else str(v)
    return JudgeReading(agreement_level=obj["agreement_level"].strip().lower(),
                        dominant_position=text(obj.get("dominant_position")),
                        dissenting_views=[text(v) for v in views if text(v).strip()],
                        rationale=text(obj.get("rationale"))), warnings


def _model_key(model: Any) -> Any:
    return model_spec(model) if isinstance(model, str) else id(model)


async def arun_roundtable(question: str, *, agents: list[Seat | Any], rounds: int = 1,  # noqa: C901, PLR0915
                          context: str = "", judge: Seat | Any | None = None,
                          **kw: Unpack[RunKwargs]) -> RoundtableResult:
    """Seed 003's roundtable: role-named agents in turn, the lexical floor, an optional judge."""
    run = split_run_options(dict(kw), "roundtable")
    question = require_text(question, "question")
    seats = require_seats(agents, "agents", 1, MAX_AGENTS, "roundtable", "", run.endpoints)
    require_int(rounds, "rounds", 1, MAX_ROUNDS, "roundtable")
    if context is None:
        context = ""
    if not isinstance(context, str):
        raise ConfigError(f"context must be text, got {type(context).__name__}", "input")
    if context.strip():
        require_text(context, "context")  # a question's limits
    judge_seat = (require_seat(judge, "judge", run.endpoints) if judge is not None
                  else None)
    if judge_seat is not None:
        unique_names([*seats, judge_seat], "seat")
    # the speaking order (DESIGN 2.10); the stored configuration keeps the configured one
    order, speakers = presented(seats, run.order_seed)

    async def body(ctx: RunContext) -> RoundtableResult:  # noqa: C901, PLR0912
        roster = ", ".join(f"{s.name} ({role_name(s.role) or 'participant'})" for s in speakers)
        exchanges: list[Exchange] = []
        for number in range(1, rounds + 1):
            for seat in speakers:
                role = library_text(seat.role, ctx.role_library) or role_description(
                    seat.role)
                system = render(TEMPLATES, ctx.prompts, "system", agent=seat.name,
                                role=role, agents=roster)
                if seat.persona.strip():
                    system += "\n\n" + seat.persona.strip()
                heard = _peers(ctx, seat.name, exchanges)
                prompt = render(TEMPLATES, ctx.prompts, "turn", question=question,
                                context=context.strip() or NO_CONTEXT,
                                transcript=_transcript(heard), agent=seat.name,
                                role=role, round=number, rounds=rounds)
                turn = await ctx.call_lines(seat, [{"role": "system", "content": system},
                                                   {"role": "user", "content": prompt}],
                                            line=STANCE_LINE, phase="turn", round=number,
                                            parse=lambda text: parse_stance(
                                                text, ctx.phrases),
                                            task=_turn_task(seat, heard))
                exchanges.append(Exchange(
                    agent=seat.name, role=role_name(seat.role), round=number,
                    response=turn.reply if turn.ok else "", usable=turn.ok,
                    degraded=not turn.ok, error=turn.error,
                    stance=turn.parsed.get("stance") if turn.ok else None))

        last: dict[str, Exchange | None] = {seat.name: None for seat in speakers}
        for exchange in exchanges:
            if exchange.usable:
                last[exchange.agent] = exchange
        agreement = overlap_agreement({name: e.response if e else ""
                                       for name, e in last.items()})
        stance_tally = tally({name: e.stance if e else None for name, e in last.items()})
        stance_confidence = derive_confidence(stance_tally)

        warnings: list[tuple[str, str]] = []
        for exchange in exchanges:
            if exchange.degraded:
                warnings.append(("degraded-turn", f"{exchange.agent}'s turn in round "
                                 f"{exchange.round} gave nothing usable ({exchange.error}); it "
                                 "is kept empty and left out of later prompts and the floor."))
        for name, e in last.items():
            if e is not None and e.stance is None:
                warnings.append(("missing-stance", f"{name}'s last usable turn has no STANCE "
                                 "line, so it abstains in the stance tally."))
        state = QUALIFIED if agreement.voters >= 2 else BLOCKED
        reading, status, diverged = None, "not_run", False
        one_model = len(speakers) >= 2 and len({_model_key(s.model) for s in speakers}) == 1
        if state == BLOCKED:
            warnings.append(("no-content", f"only {agreement.voters} of {len(speakers)} agent(s) "
                             "gave a usable turn; there is no agreement to read, the judge was "
                             "not asked, and the question needs a person (blocked)."))
        elif judge_seat is None:
            warnings.append(("lexical-only", "agreement rests on shared words only (no judge): "
                             "paraphrase reads as disagreement and opposing stances that share "
                             "topic words read as agreement."))
        else:
            final = "\n\n".join(f"{name} ({e.role or 'participant'}):\n{e.response}"
                                for name, e in last.items() if e is not None)
            prompt = render(TEMPLATES, ctx.prompts, "judge", question=question,
                            context=context.strip() or NO_CONTEXT, final_turns=final,
                            transcript=_transcript(exchanges), agents=roster)
            obj, turn = await ctx.call_json(judge_seat, [{"role": "user", "content": prompt}],
                                            phase="judge", round=rounds + 1,
                                            schema=JUDGE_SCHEMA,
                                            validate=_check_judge,
                                            task=Task(kind="judge", keys=JUDGE_KEYS, others={
                                                name: e.stance or "" for name, e in last.items()
                                                if e is not None}))
            read = ctx.guard(turn, _reading, obj) if obj is not None else None
            if read is None:
                status = "degraded"
                warnings.append(("judge-failed", f"the judge gave no usable reading "
                                 f"({turn.error}); the lexical floor stands."))
            else:
                reading, notes = read
                if notes:
                    ctx.update(turn, warnings=list(turn.warnings) + notes)
                status = "applied"
                diverged = reading.agreement_level != agreement.level
                shared = ""
                if one_model:
                    same = _model_key(judge_seat.model) == _model_key(speakers[0].model)
                    shared = (" All agents ran on one model" + (", the judge too" if same else "")
                              + ", so this reads samples of one model: agreement may be "
                              "conformity rather than confirmation.")
                warnings.append(("model-agreement", "the judge's level is one model's reading "
                                 "of agreement, not verification." + shared))
                if diverged:
                    warnings.append(("judge-diverged", f"the judge reads "
                                     f"{reading.agreement_level} agreement, the lexical floor "
                                     f"{agreement.level}: read both."))
        if state != BLOCKED:  # a blocked run reads no agreement at all
            agreement = unbacked(agreement, reading is not None, len(stance_tally.counts))
        if agreement.caveat and judge_seat is not None:
            warnings.append(("lexical-only", "no judge reading and no stance: the agreement "
                             "level rests on shared words only."))
        return RoundtableResult(
            question=question, context=context, rounds=rounds, exchanges=exchanges,
            agreement=agreement, stance_tally=stance_tally,
            stance_confidence=stance_confidence, judge=reading, judge_status=status,
            diverged_from_floor=diverged, completion_state=state,
            warnings=[f"{code}: {text}" for code, text in warnings],
            warning_codes=list(dict.fromkeys(code for code, _ in warnings)))

    options = {"rounds": rounds, "context": context}
    return await execute(SPEC, question, body,
                         {"agents": seats, "judge": judge_seat}, options, run, order)


run_roundtable = synchronous(arun_roundtable)


SPEC = ProtocolSpec(
    shows_peers=True,  # DESIGN 2.13: a placebo arm swaps its peers' messages
    name="roundtable", title="Roundtable", source="003", question_name="question",
    runner=arun_roundtable,
    slots=(Slot("agents", many=True, minimum=1, maximum=MAX_AGENTS,
                # No model here: seats take the configuration's model ("simulated" by default).
                defaults=({"name": "Ada", "role": "proposer"},
                          {"name": "Bo", "role": "critic"},
                          {"name": "Cy", "role": "devil_advocate"}),
                role_in_template=True,  # the system template: "You are {agent}, {role}."
                help="role-named agents (proposer, critic, devil_advocate, synthesiser, "
                     "verifier) who answer in turn"),
           Slot("judge", optional=True, defaults=({"name": "judge"},),
                help="optional: reads agreement by meaning beside the lexical floor")),
    options=(Option("rounds", 1, 1, MAX_ROUNDS, "rounds; every agent speaks once a round"),
             Option("context", "", help="background every agent sees")),
    templates=TEMPLATES,
    estimate_calls=lambda options, seats: (int(options.get("rounds", 1))
                                           * int(seats.get("agents", 0))
                                           + int(seats.get("judge", 0))),
    result_type=RoundtableResult, summary=report.summary, outcome=report.outcome,
    signals=report.signals, view=report.view, insights=report.insights, lost=report.lost,
    phases=("turn", "judge"), carried=lambda r: tally_carried(r.stance_tally),
    rounds_option="rounds", color="#c62828", answers_by_round=report.answers_by_round)
