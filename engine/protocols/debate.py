"""Debate (seed 000): proponent and opponent argue for up to `max_rounds`, then a judge rules."""
from __future__ import annotations

import time
from datetime import timedelta
from typing import Any, Unpack

from pydantic import BaseModel, Field, computed_field

from engine.analysis import parse_sections, read_confidence
from engine.analysis.answers import answer_line, answers_match, hedge
from engine.analysis.sections import own_block, parse_answer
from engine.checks import ROUNDS_MAX, require_text, unique_names
from engine.config import RunKwargs
from engine.llm.calls import RunContext
from engine.llm.lines import Line, line_format
from engine.models import ConfigError, Seat, Signals, Task
from engine.protocols.base import (
    NO_POSITION,
    POSITION_CHARS,
    AnswerResult,
    Option,
    ProtocolSpec,
    Slot,
    execute,
    presentation_order,
    split_run_options,
    synchronous,
)
from engine.protocols.checks import check_options, require_seat
from engine.protocols.sides import AGAINST, FOR, seat_sides, side_seats, verdict_winner
from engine.protocols.society import read_answer
from engine.protocols.templates import Template, render
from engine.views.aggregate import as_flag, completed, numbers, rate_by, rate_text
from engine.views.blocks import Block, Chart, InsightsData, Section, warnings_block

ARGUMENT_ERROR = "Error: Unable to generate argument."
COUNTER_ERROR = "Error: Unable to generate counter-argument."
JUDGE_ERROR_PREFIX = "Unable to reach verdict due to error: "
HIGH_CONFIDENCE = 0.7
SECTIONS = ("VERDICT", "REASONING", "PRO SUMMARY", "CON SUMMARY", "CONFIDENCE")
# Beyond the seed: the judge ends with a canonical short answer, so a debate can be scored.
ANSWER = "ANSWER"
# The judge's reply as the prompt lays it out: the five numbered sections, CONFIDENCE a number
# in 0..1, then the short ANSWER line (a grammar where the server applies one).
JUDGE_FORMAT = line_format("judge", *(Line(label, "unit" if label == "CONFIDENCE" else "text",
                                              number) for number, label in enumerate(SECTIONS, 1)),
                           Line(ANSWER, "short"))

TEMPLATES = {
    "proponent_opening": Template(
        "You are arguing IN FAVOR of the following topic.\n\nTopic: {topic}\n\n"
        "Present your strongest opening argument in favor.", ("topic",),
        "Round 1: the proponent opens.", required=("topic",)),
    "opponent_opening": Template(
        "You are arguing AGAINST the following topic.\n\nTopic: {topic}\n\n"
        "Your opponent argued in favor:\n{proponent_argument}\n\n"
        "Present your strongest counter-argument.", ("topic", "proponent_argument"),
        "Round 1: the opponent answers the proponent's opening.",
        required=("topic", "proponent_argument")),
    "proponent_rebuttal": Template(
        "You are arguing IN FAVOR of the following topic.\n\nTopic: {topic}\n\n"
        "Your opponent's last argument against:\n{opponent_argument}\n\n"
        "Rebut it and strengthen your case in favor.", ("topic", "opponent_argument", "round"),
        "Later rounds: the proponent sees the opponent's last argument.",
        required=("topic", "opponent_argument")),
    "opponent_rebuttal": Template(
        "You are arguing AGAINST the following topic.\n\nTopic: {topic}\n\n"
        "Your previous counter-argument:\n{previous_argument}\n\n"
        "Your opponent's newest argument in favor:\n{proponent_argument}\n\n"
        "Rebut it and strengthen your counter-argument.",
        ("topic", "proponent_argument", "previous_argument", "round"),
        "Later rounds: the opponent sees the newest argument and its own previous one.",
        required=("topic", "proponent_argument")),
    "consultant": Template(
        "You are arguing {side} the following topic.\n\nTopic: {topic}\n\n"
        "Your previous argument:\n{previous_argument}\n\n"
        "Present your strongest case {side}. A judge will read your case alone.",
        ("topic", "side", "previous_argument", "round"),
        "Consultancy (baseline: consultancy): one seat argues its side alone, every round.",
        required=("topic",)),
    "judge": Template(
        "You are the judge of a debate.\n\nTopic: {topic}\n\nTranscript:\n{transcript}\n\n"
        "Evaluate both sides and answer in exactly these five numbered sections:\n"
        "1. VERDICT: which side argued better, and your decision\n"
        "2. REASONING: why\n"
        "3. PRO SUMMARY: the case in favor, in brief\n"
        "4. CON SUMMARY: the case against, in brief\n"
        "5. CONFIDENCE: a number from 0.0 to 1.0\n"
        "Then end with this line:\n"
        "ANSWER: <the short answer the winning case supports: a number, a word or a short "
        "phrase>", ("topic", "transcript"),
        "After the last round, the judge reads the whole transcript.",
        required=("topic", "transcript")),
}


class DebateRound(BaseModel):
    """One round: the argument in favour (`proponent_argument`) and the answer against it
    (`opponent_argument`), by side: with sides swapped the opponent seat argues in favour."""

    round_number: int
    proponent_argument: str
    opponent_argument: str


class DebateResult(AnswerResult):
    """Seed 000's DebateResult, plus the turn log and the judge's short `answer` (its
    `ANSWER:` line; "" when it gave none), which is what a debate given `expected` is scored
    on."""

    topic: str
    rounds: list[DebateRound]
    verdict: str
    reasoning: str = ""
    pro_summary: str = ""
    con_summary: str = ""
    confidence: float = 0.0
    confidence_stated: bool = True  # False: the judge failed or gave no readable CONFIDENCE
    # DESIGN 2.10: seat name -> the side it argued (for / against); the side the verdict
    # rules for and the seat that argued it (None: the judge failed or named neither)
    sides: dict[str, str] = Field(default_factory=dict)
    winning_side: str | None = None
    winner: str | None = None
    # consultancy (Khan et al. 2024): the one seat that argued, the judge reading its case
    # alone; None in a debate
    consultant: str | None = None

    @property
    def judged(self) -> bool:
        """True when the judge's call succeeded (a failed judge leaves an error verdict)."""
        return not self.verdict.startswith(JUDGE_ERROR_PREFIX)

    @computed_field  # type: ignore[prop-decorator]  # mypy types no decorator over @property
    @property
    def is_high_confidence(self) -> bool:
        return self.confidence >= HIGH_CONFIDENCE


def _transcript(rounds: list[DebateRound], first: str = FOR) -> str:
    """The rounds as the judge reads them, labelled by side (never by seat); `first` is the
    side each round shows first (DESIGN 2.10: the order the judge is presented the sides)."""
    def lines(r: DebateRound) -> list[str]:
        pro, con = f"Proponent: {r.proponent_argument}", f"Opponent: {r.opponent_argument}"
        both = [pro, con] if first == FOR else [con, pro]
        return [line for line in both if not line.endswith(": ")]  # a consultancy's silence
    return "\n\n".join("\n".join([f"Round {r.round_number}", *lines(r)]) for r in rounds
                       ) or "(no rounds were held)"


def _seconds(timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    if isinstance(timeout, str):  # from a form or the command line
        try:
            timeout = float(timeout)
        except ValueError:
            raise ConfigError(f"timeout must be seconds, got {timeout!r}", "input") from None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise ConfigError(f"timeout must be seconds (>= 0) or a timedelta, got {timeout!r}",
                          "input")
    return float(timeout)


async def arun_debate(topic: str, *, proponent: Seat | Any, opponent: Seat | Any,  # noqa: PLR0915
                      judge: Seat | Any, max_rounds: int = 3, timeout: Any = None,
                      swap_sides: bool = False, consultancy: bool = False,
                      **kw: Unpack[RunKwargs]) -> DebateResult:
    """Seed 000's debate: rounds of argument and counter-argument, then a judge's verdict.

    `swap_sides`: the proponent seat argues against and the opponent seat in favour (the
    seats keep their names and models; `sides` says who argued what). The side in favour
    always opens. An order seed draws which side the judge's transcript shows first in each
    round (`order`: the arguing seats in that order).

    `consultancy` (Khan et al. 2024's baseline): only the proponent seat argues, for the side
    it holds (against when swapped), each round; the judge reads that one case alone, with
    the same prompt and scoring. `consultant` on the result names it."""
    run = split_run_options(dict(kw), "debate")
    topic = require_text(topic, "topic")
    endpoints = run.endpoints
    proponent = require_seat(proponent, "proponent", endpoints)
    opponent = require_seat(opponent, "opponent", endpoints)
    judge = require_seat(judge, "judge", endpoints)
    unique_names([proponent, opponent, judge], "seat")
    options = check_options(SPEC, {"max_rounds": max_rounds, "timeout": _seconds(timeout),
                                   "swap_sides": swap_sides, "consultancy": consultancy})
    limit = options["timeout"]
    by_seat = seat_sides(proponent.name, opponent.name, swap_sides)
    sides = side_seats(by_seat)  # side -> seat, as the simulated judge reads it
    pro_seat, con_seat = (opponent, proponent) if swap_sides else (proponent, opponent)
    order = presentation_order([pro_seat.name, con_seat.name], run.order_seed)
    first = FOR if order[0] == pro_seat.name else AGAINST
    order = [proponent.name] if consultancy else order

    async def body(ctx: RunContext) -> DebateResult:
        start = time.monotonic()
        rounds: list[DebateRound] = await _consult(
            ctx, proponent, by_seat[proponent.name], sides, topic, max_rounds, limit,
            start) if consultancy else []
        for number in range(1, 0 if consultancy else max_rounds + 1):
            if limit is not None and time.monotonic() - start >= limit:
                break  # the timeout only stops new rounds from starting
            previous = rounds[-1] if rounds else None
            if previous is None:
                pro_prompt = render(TEMPLATES, ctx.prompts, "proponent_opening", topic=topic)
            else:
                heard = ctx.peer(con_seat.name, "counter-argument", number - 1,
                                 previous.opponent_argument) or COUNTER_ERROR
                pro_prompt = render(TEMPLATES, ctx.prompts, "proponent_rebuttal", topic=topic,
                                    opponent_argument=heard, round=number)
            pro = await ctx.call(pro_seat, [{"role": "user", "content": pro_prompt}],
                                 phase="argument", round=number,
                                 task=Task(kind="argue", side="for", sides=sides))
            pro_text = pro.reply if pro.ok else ARGUMENT_ERROR
            pro_heard = ctx.peer(pro_seat.name, "argument", number, pro_text) or ARGUMENT_ERROR
            if previous is None:
                con_prompt = render(TEMPLATES, ctx.prompts, "opponent_opening", topic=topic,
                                    proponent_argument=pro_heard)
            else:
                con_prompt = render(TEMPLATES, ctx.prompts, "opponent_rebuttal", topic=topic,
                                    proponent_argument=pro_heard,
                                    previous_argument=previous.opponent_argument, round=number)
            con = await ctx.call(con_seat, [{"role": "user", "content": con_prompt}],
                                 phase="counter-argument", round=number,
                                 task=Task(kind="argue", side="against", sides=sides))
            rounds.append(DebateRound(round_number=number, proponent_argument=pro_text,
                                      opponent_argument=con.reply if con.ok else COUNTER_ERROR))
        judge_prompt = render(TEMPLATES, ctx.prompts, "judge", topic=topic,
                              transcript=_transcript(rounds, first))
        last = ({pro_seat.name: rounds[-1].proponent_argument,
                 con_seat.name: rounds[-1].opponent_argument} if rounds else {})
        last = {name: text for name, text in last.items() if text}
        verdict_turn = await ctx.call_lines(judge, [{"role": "user", "content": judge_prompt}],
                                            line=JUDGE_FORMAT, phase="judge",
                                            round=len(rounds) + 1,
                                            task=Task(kind="judge", sides=sides, sections=tuple(
                                                dict.fromkeys((*SECTIONS, "ANSWER"))),
                                                others={name: last[name] for name in order
                                                        if name in last}))
        held = {"topic": topic, "rounds": rounds,
                "sides": by_seat, "consultant": proponent.name if consultancy else None}
        read = ctx.guard(verdict_turn, _read_judge, verdict_turn.reply) if verdict_turn.ok \
            else None  # a reply the parser trips on degrades the judge's turn, not the run
        if not verdict_turn.ok or read is None:
            return DebateResult(**held, confidence_stated=False,
                                verdict=JUDGE_ERROR_PREFIX + verdict_turn.error,
                                warnings=[f"judge failed: {verdict_turn.error}"])
        sections, (confidence, readable), answer = read
        warnings = []
        verdict = sections.get("VERDICT")
        if not verdict:
            verdict = verdict_turn.reply.strip()
            warnings.append("judge reply has no VERDICT section; the whole reply is the verdict")
        if not readable:
            warnings.append("judge CONFIDENCE could not be read "
                            f"({sections.get('CONFIDENCE', 'missing')!r}); confidence is 0.0")
        for label in ("REASONING", "PRO SUMMARY", "CON SUMMARY"):
            if label not in sections:
                warnings.append(f"judge reply has no {label} section")
        if not answer:
            warnings.append(_no_answer(verdict_turn.reply))
        parsed = {"verdict": verdict, "confidence": confidence} | (
            {"answer": answer} if answer else {})
        ctx.update(verdict_turn, parsed=parsed, warnings=list(warnings))
        # Parley's reading of the verdict, not a fault of the reply (the seed asks for free
        # text): noted on the result only, so the judge's turn stays clean
        winning_side, winner = verdict_winner(verdict, by_seat)
        if winner is None:
            warnings.append("the verdict names neither side nor one seat; no seat is "
                            "recorded as the winner")
        return DebateResult(**held, verdict=verdict, reasoning=sections.get("REASONING", ""),
                            pro_summary=sections.get("PRO SUMMARY", ""),
                            con_summary=sections.get("CON SUMMARY", ""),
                            confidence=confidence, answer=answer, confidence_stated=readable,
                            warnings=warnings, winning_side=winning_side, winner=winner)

    return await execute(SPEC, topic, body,
                         {"proponent": proponent, "opponent": opponent, "judge": judge},
                         options, run, order)


async def _consult(ctx: RunContext, seat: Seat, side: str, sides: dict[str, str], topic: str,
                   max_rounds: int, limit: float | None, start: float) -> list[DebateRound]:
    """A consultancy's rounds: `seat` argues `side` alone; the other side is left empty."""
    rounds, previous = [], "(none yet)"
    for number in range(1, max_rounds + 1):
        if limit is not None and time.monotonic() - start >= limit:
            break
        prompt = render(TEMPLATES, ctx.prompts, "consultant", topic=topic,
                        side="IN FAVOR of" if side == FOR else "AGAINST",
                        previous_argument=previous, round=number)
        turn = await ctx.call(seat, [{"role": "user", "content": prompt}],
                              phase="argument" if side == FOR else "counter-argument",
                              round=number, task=Task(kind="argue", side=side, sides=sides))
        previous = turn.reply if turn.ok else ARGUMENT_ERROR
        rounds.append(DebateRound(round_number=number,
                                  proponent_argument=previous if side == FOR else "",
                                  opponent_argument=previous if side == AGAINST else ""))
    return rounds


def _answer_part(reply: str) -> str:
    """Where a judge's short answer is read: its own block (from its last VERDICT label,
    `own_block`) when that holds an ANSWER line, else the whole reply. A debater's ANSWER
    line the judge quotes before its own block is neither its answer nor a hedge."""
    own = own_block(reply, "VERDICT")
    return own if parse_answer(own) else reply


def _no_answer(reply: str) -> str:
    """Why a judge's reply gave no short answer: no ANSWER line, or several different ones."""
    why = hedge(_answer_part(reply))
    return (f"judge: {why}; the debate has no short answer" if why else
            "judge reply has no ANSWER line; the debate has no short answer")


def _read_judge(reply: str) -> tuple[dict[str, str], tuple[float, bool], str]:
    """The judge's sections (ANSWER among the labels, so no section runs into it), its
    confidence, and its short answer: the last ANSWER line of `_answer_part` (`answer_line`:
    none when that declares several different answers)."""
    sections = parse_sections(reply, (*SECTIONS, ANSWER))
    return (sections, read_confidence(sections.get("CONFIDENCE", "")),
            answer_line(_answer_part(reply)))


run_debate = synchronous(arun_debate)


def _confidence_text(result: DebateResult) -> str:
    """The judge's confidence as shown: its number, or why there is none (never 0.00)."""
    if not result.judged:
        return "none (the judge failed)"
    if not result.confidence_stated:
        return "none stated"
    return f"{result.confidence:.2f}" + (" (high)" if result.is_high_confidence else "")


def _summary(result: DebateResult) -> str:
    answer = f"\nanswer: {result.answer[:200]}" if result.answer else ""
    if result.winner:
        answer += f"\nwinner: {result.winner} (argued {result.winning_side})"
    return (f"verdict: {result.verdict[:200]}{answer}\nconfidence: "
            f"{_confidence_text(result)}; rounds: {len(result.rounds)}")


def _outcome(result: DebateResult) -> str:
    if not result.judged:
        return "judge failed"
    return f"judge {_confidence_text(result)}" if result.confidence_stated else \
        "judge stated no confidence"


def _signals(result: DebateResult) -> Signals:
    """The judge's answer and confidence; the confidence (and whether it was high) is None
    when the judge failed or stated none, so its 0.00 placeholder never enters a mean."""
    stated = result.judged and result.confidence_stated
    confidence = result.confidence if stated else None
    return Signals(answer=result.answer[:500] or None, judge_confidence=confidence, extra={
        "verdict": result.verdict[:500], "rounds": len(result.rounds),
        "high_confidence": result.is_high_confidence if stated else None,
        **{f"seat_{side}": seat for seat, side in result.sides.items()},
        "judge_side": result.winning_side, "winner": result.winner,
        "consultant": result.consultant})


def _pairwise(result: DebateResult) -> list[tuple[str, str]]:
    """The verdict as one game: the seat that argued the side ruled for beats the other
    arguing seat; none for a consultancy (one seat argued) or a verdict naming no seat."""
    if result.consultant or result.winner not in result.sides or len(result.sides) != 2:
        return []
    return [(result.winner, next(s for s in result.sides if s != result.winner))]


def _right_sides(result: DebateResult) -> dict[str, bool] | None:
    """Seat -> whether it argued the right side, where exactly one side's last argument
    gave the expected answer (its ANSWER line); None otherwise or in a consultancy."""
    if result.consultant or not result.expected or not result.rounds or len(result.sides) != 2:
        return None
    last = result.rounds[-1]
    right = {FOR: answers_match(answer_line(last.proponent_argument) or None, result.expected),
             AGAINST: answers_match(answer_line(last.opponent_argument) or None,
                                    result.expected)}
    if sorted(bool(v) for v in right.values()) != [False, True]:
        return None
    return {seat: bool(right.get(side)) for seat, side in result.sides.items()}


def _lost(result: DebateResult) -> list[str]:
    """The judge is decisive: without its ruling the debate has no verdict."""
    return [] if result.judged else ["judge"]


def _view(r: DebateResult) -> list[Block]:
    argued = ", ".join(f"{seat} {side}" for seat, side in r.sides.items())
    if r.consultant:
        argued = (f"{r.consultant} {r.sides.get(r.consultant, '')} alone (consultancy: the "
                  "judge read this one case)")
    blocks = [Block("metrics", items=[("Judge confidence", _confidence_text(r)),
                                      ("Answer", r.answer or "—"), ("Rounds", len(r.rounds))]),
              *([Block("text", "Sides", f"{argued}; the verdict is for "
                                        f"{r.winner or 'no seat it names'}" +
                                        (f" ({r.winning_side})" if r.winning_side else ""))]
                if r.sides else []),
              Block("text", "Verdict", r.verdict),
              Block("text", "Reasoning", r.reasoning),
              Block("text", "Case in favor", r.pro_summary),
              Block("text", "Case against", r.con_summary),
              Block("table", "Rounds", rows=[{"round": x.round_number,
                                             "proponent": x.proponent_argument,
                                             "opponent": x.opponent_argument}
                                            for x in r.rounds])]
    return blocks + warnings_block(r.warnings)


def _insights(data: InsightsData) -> Section:
    debates = completed(data.runs)
    confidence = debates[["group"]].assign(
        confidence=numbers(debates, "m_judge_confidence")).dropna()
    right = as_flag(debates["correct"]).dropna()  # scored debates: the judge's ANSWER line
    return Section("debate", "Debate", metrics=[
        ("Debates", f"{len(debates):,}"),
        ("Mean judge confidence", f"{confidence['confidence'].mean():.2f}"
         if not confidence.empty else "—"),
        ("Judge's answer right", rate_text(int(right.sum()), len(right))
         if not right.empty else "—")], charts=[
        Chart("histogram", confidence, "Judge confidence",
              "How confident the judge said it was (0 to 1), per label; its own reading, not "
              "a measure of agreement.",
              {"x": "confidence", "x_title": "judge confidence", "x_range": [0, 1]}),
        Chart("rate_bar", rate_by(debates, "m_high_confidence"), "High-confidence verdicts",
              "Share of debates whose judge stated a confidence of 0.7 or more, per label.",
              {"y_title": "debates"})])


def _positions(r: DebateResult) -> dict[str, str] | None:
    """Each debater's final position, for an answers-only judge: the side it argued and the
    answer its last argument gives (its ANSWER line, else what `read_answer` finds in it);
    None for a consultancy or a debate with no round."""
    if r.consultant or not r.rounds:
        return None
    last = r.rounds[-1]
    out = {}
    for seat, side in r.sides.items():
        text = last.proponent_argument if side == FOR else last.opponent_argument
        found = (answer_line(text) or read_answer(text))[:POSITION_CHARS]
        out[seat] = f"argues {side}: {found or NO_POSITION}"
    return out


SPEC = ProtocolSpec(
    final_positions=lambda r: _positions(r),
    judge_phase="judge",
    shows_peers=True,  # DESIGN 2.13: a placebo arm swaps its peers' messages
    name="debate", title="Debate", source="000", question_name="topic", runner=arun_debate,
    slots=(Slot("proponent", help="argues in favor"), Slot("opponent", help="argues against"),
           Slot("judge", help="reads the transcript and rules")),
    options=(Option("max_rounds", 3, 1, ROUNDS_MAX, "rounds of argument before the judge"),
             Option("timeout", None, help="seconds; checked before each round, a started "
                    "round finishes and the judge always runs (empty: no limit)"),
             Option("swap_sides", False, help="the proponent seat argues against and the "
                    "opponent seat in favour (the seats keep their names and models)"),
             Option("consultancy", False, help="a baseline (Khan et al. 2024): only the "
                    "proponent seat argues its side, and the judge reads that case alone")),
    templates=TEMPLATES,
    estimate_calls=lambda options, seats: (1 if options.get("consultancy") else 2) * int(
        options.get("max_rounds", 3)) + 1,
    insights=_insights,
    result_type=DebateResult, summary=_summary, outcome=_outcome, signals=_signals, view=_view,
    lost=_lost, phases=("argument", "counter-argument", "judge"), rounds_option="max_rounds",
    carried=lambda r: [r.winner] if r.winner else None,
    pairwise=_pairwise, right_sides=_right_sides,
    color="#1565c0")
