"""Duel (seed 004): two agents take turns until a convergence rule or the round cap ends it.

Each side has its own system prompt (its role), its own conversation history and possibly its
own model. The opener states its case; every later turn answers the opponent's newest text.
A failed turn halts both sides, keeping the transcript so far.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal, Unpack

from engine.analysis.answers import extract_answer, hedge
from engine.checks import ROUNDS_MAX, require_text, unique_names
from engine.config import RunKwargs
from engine.llm.calls import RunContext
from engine.models import ConfigError, RunResult, Seat, Signals, Task
from engine.protocols.base import (
    Option,
    ProtocolSpec,
    Slot,
    execute,
    presentation_order,
    split_run_options,
    synchronous,
)
from engine.protocols.checks import check_options, require_seat
from engine.protocols.roles import library_text
from engine.protocols.templates import Template, render
from engine.views.aggregate import completed, counts_by, rate_by
from engine.views.blocks import Block, Chart, InsightsData, Section, warnings_block

MAX_ROUNDS = ROUNDS_MAX
DEFAULT_ROLES = {"a": "optimist arguing in favor", "b": "skeptic arguing against"}
_AGREED = re.compile(r"\bAGREED\b")
# A duel's turns are free prose; a turn declares an answer only on a line of its own that
# starts "ANSWER:", "FINAL ANSWER:" or "STANCE:" (markdown bold allowed), or in a \boxed{}.
_DECLARED = re.compile(r"^[ \t>*_]*(?:final\s+answer|answer|stance)[*_]*\s*[:=][*_]*\s*"
                       r"(?P<rest>\S[^\n]*)$", re.IGNORECASE | re.MULTILINE)

TEMPLATES = {
    "system": Template(
        'You are debating the topic: "{topic}".\n\nYour role: {role}.\n\n'
        "Keep each response to 2-3 sentences. Be direct and specific.\n"
        "Stay in character. Do not summarize the opponent's point --\n"
        "just rebut or extend the argument.",
        ("topic", "role", "speaker", "opponent"),
        "Each side's system prompt (seed 004); the seat's persona, if any, is appended.",
        required=("role",)),
    "opening": Template(
        "Make your opening statement about: {topic}. 2-3 sentences.", ("topic",),
        "The first speaker's first turn.", required=("topic",)),
    "reply": Template(
        'Your opponent just said: "{text}"\n\nRespond briefly, staying in your role.',
        ("text", "topic"),
        "Every later turn: the opponent's newest statement.", required=("text",)),
}


def agreed(text: str) -> bool:
    """The built-in convergence rule: the text contains the word `AGREED` (upper case)."""
    return bool(_AGREED.search(text or ""))


class DuelResult(RunResult):
    """Seed 004's transcript of `(name, text)` pairs in speaking order, the reply and status."""

    topic: str
    transcript: list[tuple[str, str]]
    reply: str
    status: Literal["finished", "converged", "failed"]
    failed_agent: str | None = None
    error: str = ""
    rounds: int = 0


def _opener(first: Any, a: Seat, b: Seat, order_seed: int | None) -> str:
    """'a' or 'b' for who opens: `first` (checked: a slot letter, which wins over a seat
    name, or a seat's name), or with an order seed the first of a permutation of the two
    seats drawn from it (DESIGN 2.10); giving both is refused, since they would disagree."""
    if order_seed is None:
        key = (first or "a").strip()
        return key.lower() if key.lower() in ("a", "b") else "a" if key == a.name else "b"
    if first is not None:
        raise ConfigError("a duel takes first or an order seed, not both: the order seed "
                          f"draws who opens (first is {first!r})", "input")
    return "a" if presentation_order([a.name, b.name], order_seed)[0] == a.name else "b"


def _reply(reply: Any) -> Callable[[list[tuple[str, str]]], str]:
    """The run's `reply` from its transcript: a callable's text, the last turn's, or (the
    checked option's other choice) the whole transcript."""
    if callable(reply):
        def custom(transcript: list[tuple[str, str]]) -> str:
            value = reply(list(transcript))
            if not isinstance(value, str):
                raise TypeError(f"the reply callable must return a string, got "
                                f"{type(value).__name__}")
            return value
        return custom
    if reply.strip().lower() == "last":
        return lambda t: t[-1][1] if t else ""
    return lambda t: "\n\n".join(f"{name}:\n{text}" for name, text in t)


async def arun_duel(topic: str, *, a: Seat | Any, b: Seat | Any, rounds: int = 3,
                    first: str | None = None, converge: Any = None, reply: Any = "transcript",
                    **kw: Unpack[RunKwargs]) -> DuelResult:
    """Seed 004's two-agent duel: each side speaks `rounds` times unless `converge` ends it."""
    run = split_run_options(dict(kw), "duel")
    topic = require_text(topic, "topic")
    a = require_seat(a, "a", run.endpoints)
    b = require_seat(b, "b", run.endpoints)
    unique_names([a, b], "seat")
    options = {"rounds": rounds, "first": first, "converge": converge, "reply": reply}
    # a callable converge or reply is the API's own; every other value follows its Option row
    check_options(SPEC, {k: v for k, v in options.items()
                         if not (callable(v) and k in ("converge", "reply"))}, [a.name, b.name])
    opener = _opener(first, a, b, run.order_seed)
    stop_rule = converge if callable(converge) else agreed if converge is not None else None
    make_reply = _reply(reply)
    sides = {key: seat if seat.role.strip() else seat.model_copy(
        update={"role": DEFAULT_ROLES[key]}) for key, seat in (("a", a), ("b", b))}

    async def body(ctx: RunContext) -> DuelResult:
        other = {"a": "b", "b": "a"}
        history: dict[str, list[dict[str, str]]] = {}
        for key, seat in sides.items():
            role = library_text(seat.role, ctx.role_library) or seat.role.strip()
            system = render(TEMPLATES, ctx.prompts, "system", topic=topic,
                            role=role.rstrip("."), speaker=seat.name,
                            opponent=sides[other[key]].name)
            if seat.persona.strip():
                system += "\n\n" + seat.persona.strip()
            history[key] = [{"role": "system", "content": system}]
        order = [opener, other[opener]] * rounds
        spoken = {"a": 0, "b": 0}
        transcript: list[tuple[str, str]] = []
        status, failed_agent, error, warnings = "finished", None, "", []
        for position, key in enumerate(order):
            seat = sides[key]
            if not transcript:
                prompt = render(TEMPLATES, ctx.prompts, "opening", topic=topic)
            else:
                heard = ctx.peer(transcript[-1][0], "opening" if position == 1 else "rebuttal",
                                 spoken[other[key]], transcript[-1][1])
                prompt = render(TEMPLATES, ctx.prompts, "reply", text=heard, topic=topic)
            history[key].append({"role": "user", "content": prompt})
            spoken[key] += 1
            turn = await ctx.call(seat, list(history[key]),
                                  phase="opening" if position == 0 else "rebuttal",
                                  round=spoken[key],
                                  task=Task(kind="statement", side=key, others={
                                      transcript[-1][0]: heard} if transcript else {}))
            if not turn.ok:
                history[key].pop()
                status, failed_agent, error = "failed", seat.name, turn.error
                warnings.append(f"{seat.name} failed on turn {position + 1} ({turn.error}); "
                                "both sides halted, the transcript so far is kept")
                break
            text = turn.reply.strip()
            history[key].append({"role": "assistant", "content": text})
            transcript.append((seat.name, text))
            if position >= 1 and stop_rule is not None and \
                    ctx.guard(turn, stop_rule, text) is True:  # a rule that raises: go on
                status = "converged"
                break
        return DuelResult(topic=topic, transcript=transcript, reply=make_reply(transcript),
                          status=status, failed_agent=failed_agent, error=error, rounds=rounds,
                          warnings=warnings)

    speaking = [sides[opener].name, sides["b" if opener == "a" else "a"].name]
    return await execute(SPEC, topic, body, {"a": sides["a"], "b": sides["b"]},
                         options, run, speaking)


run_duel = synchronous(arun_duel)


def declared_answer(text: str) -> str | None:
    """The answer a duel turn declares, read as `extract_answer` reads one; None when it
    declares none. A duel's prompts (seed 004) ask for prose, not an answer, so a turn
    declares one only when the sides' roles ask for it (an ANSWER line or a \\boxed{}):
    prose is never read as an answer. A turn declaring several different answers declares
    none."""
    if "\\boxed" in text:
        return extract_answer(text)  # none for a hedge (several different answers)
    if hedge(text):
        return None
    found = list(_DECLARED.finditer(text))
    return extract_answer(found[-1].group("rest")) if found else None


def answers_by_round(result: DuelResult) -> list[dict[str, str | None]]:
    """Each round's declared answers (round k: each side's k-th turn, by seat name); no rounds
    at all when no turn declares an answer, as in a duel of plain prose."""
    rounds: list[dict[str, str | None]] = []
    spoken: dict[str, int] = {}
    for name, text in result.transcript:
        spoken[name] = spoken.get(name, 0) + 1
        if spoken[name] > len(rounds):
            rounds.append({})
        rounds[spoken[name] - 1][name] = declared_answer(text)
    if not any(answer is not None for answers in rounds for answer in answers.values()):
        return []
    return rounds


def _summary(result: DuelResult) -> str:
    head = f"{result.status} after {len(result.transcript)} turn(s)"
    if result.status == "failed":
        head += f": {result.failed_agent} failed ({result.error})"
    last = result.transcript[-1] if result.transcript else None
    return head + (f"\nlast word, {last[0]}: {last[1][:300]}" if last else "")


def _outcome(result: DuelResult) -> str:
    return f"{result.status}, {len(result.transcript)} turns"


def _signals(result: DuelResult) -> Signals:
    """How the duel ended; `converged` is None for a halted duel (it never got to say)."""
    return Signals(extra={"status": result.status, "turns": len(result.transcript),
                          "converged": None if result.status == "failed"
                          else result.status == "converged",
                          "failed_agent": result.failed_agent})


def _lost(result: DuelResult) -> list[str]:
    """A failed turn halts both sides: the rest of the duel is lost."""
    return ([f"{result.failed_agent or 'a side'}'s turn (both sides halted)"]
            if result.status == "failed" else [])


def _view(r: DuelResult) -> list[Block]:
    items: list[tuple[str, Any]] = [("Status", r.status), ("Turns", len(r.transcript)),
                                    ("Rounds", r.rounds)]
    blocks = [Block("metrics", items=items)]
    if r.status == "failed":
        items.append(("Failed agent", r.failed_agent or ""))
        blocks.append(Block("text", "Error (both sides halted)", r.error))
    blocks.append(Block("table", "Transcript", rows=[
        {"turn": i, "speaker": name, "text": text} for i, (name, text) in
        enumerate(r.transcript, 1)]))
    return blocks + warnings_block(r.warnings)


def _insights(data: InsightsData) -> Section:
    duels = completed(data.runs)
    return Section("duel", "Duel", metrics=[("Duels", f"{len(duels):,}")], charts=[
        Chart("rate_bar", rate_by(duels, "m_converged"), "Convergence rate",
              "Share of duels that ended early because a side agreed (converged), per label.",
              {"y_title": "duels"}),
        Chart("stacked_counts", counts_by(duels, "m_status"), "How duels ended",
              "finished: every turn was spoken; converged: a side agreed; failed: a call "
              "failed and both sides halted.", {"order": ["converged", "finished", "failed"]})])


SPEC = ProtocolSpec(
    shows_peers=True,  # DESIGN 2.13: a placebo arm swaps its peers' messages
    name="duel", title="Duel", source="004", question_name="topic", runner=arun_duel,
    slots=(Slot("a", defaults=({"name": "optimist", "role": DEFAULT_ROLES["a"]},),
                role_in_template=True, help="one side (opens by default)"),
           Slot("b", defaults=({"name": "skeptic", "role": DEFAULT_ROLES["b"]},),
                role_in_template=True, help="the other side")),
    options=(Option("rounds", 3, 1, MAX_ROUNDS, "turns per side"),
             Option("first", None, help='who opens: "a", "b" or a seat name (default a)',
                    choices=(None, "a", "b"), or_seat=True),
             Option("converge", None, help='None, or "agreed" to stop when a reply says AGREED',
                    choices=(None, "agreed")),
             Option("reply", "transcript", help='"transcript" or "last"',
                    choices=("transcript", "last"))),
    templates=TEMPLATES,
    estimate_calls=lambda options, seats: 2 * int(options.get("rounds", 3)),
    insights=_insights,
    result_type=DuelResult, summary=_summary, outcome=_outcome, signals=_signals, view=_view,
    lost=_lost,
    phases=("opening", "rebuttal"), rounds_option="rounds", color="#ef6c00",
    answers_by_round=answers_by_round)
