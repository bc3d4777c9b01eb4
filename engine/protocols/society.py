"""Society of minds (DESIGN 2.7; Du et al. 2023, arXiv 2305.14325): every agent answers on its
own in round one; in each later round it sees the other agents' answers from the round before,
with its own conversation so far, and answers again. Python extracts and tallies the answers
of every round; the final answer is the last round's plurality.

`rounds` counts every round, the first included: Du's "3 agents, 2 rounds" is `rounds=2`,
six calls. The agents of one round run concurrently; a round starts when the one before ends.
"""
from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any, Unpack

from pydantic import BaseModel, Field

from engine.analysis.answers import answers_match, extract_answer, hedge
from engine.analysis.conformity import Conformity, conformity
from engine.analysis.rounds_dynamics import flips
from engine.analysis.stances import Confidence, Tally, derive_confidence, normalize_stance, tally
from engine.checks import require_text
from engine.config import RunKwargs
from engine.llm.calls import RunContext
from engine.llm.lines import Line, line_format
from engine.models import Seat, Signals, Task
from engine.protocols.base import (
    ANSWER_LINE,
    ENDING,
    NO_POSITION,
    AnswerResult,
    Option,
    ProtocolSpec,
    Slot,
    closing_answer,
    execute,
    presented,
    split_run_options,
    synchronous,
    tally_carried,
    warn_hedge,
)
from engine.protocols.checks import check_options
from engine.protocols.tallying import (
    ABSTAINED,
    confidence_text,
    flow_block,
    require_seats,
    share,
    tally_block,
    tally_metrics,
    tally_outcome,
    tally_rows,
)
from engine.protocols.templates import Template, render
from engine.views.aggregate import completed
from engine.views.ballots import tally_charts
from engine.views.blocks import Block, Chart, InsightsData, Section, warnings_block
from engine.views.round_frames import CONFORMITY, insights_frames

FINAL = ("If the answer is a number, give your final answer in the form \\boxed{...} at "
         "the end of your response; otherwise end with a short final answer on its own line.")
ANSWER = Template(
    "Can you answer the following question as accurately as possible?\n\n{question}\n\n"
    "Explain your reasoning. " + FINAL,
    ("question",), "Round one: each agent answers alone.", required=("question",))
REVISE = Template(
    "These are the answers to the question from the other agents:\n\n{others}\n\n"
    "Using the reasoning from the other agents as additional advice, can you give an updated "
    "answer to the question?\n\n{question}\n\nExamine your solution and that of the other "
    "agents step by step. " + FINAL,
    ("question", "others"),
    "Rounds two on: each agent, after its own conversation so far, sees the others' answers "
    "from the round before.", required=("others",))
SYNTHESIZE = Template(
    "Question: {question}\n\nAfter discussing it, the agents gave these final answers:\n\n"
    "{answers}\n\nSynthesize them into the single best final answer to the question. Explain "
    "briefly, then " + ENDING, ("question", "answers"),
    "With synthesize: after the last round, the first agent reads every agent's last reply "
    "and writes the final answer (deliberate, then synthesize).",
    required=("question", "answers"))
TEMPLATES = {"answer": ANSWER, "revise": REVISE, "synthesize": SYNTHESIZE}
# FINAL's ask: a reply ending in a short line, the answer (a grammar where the server applies one)
FINAL_LINE = line_format("final answer", Line("", "short"), lead=True)
TASK_KEYS = ("reasoning", "answer")  # the simulated model's reply shape (it reads no prose)

MIN_AGENTS, MAX_AGENTS = 2, 8
MIN_ROUNDS, MAX_ROUNDS = 1, 10


def answer_text(text: str) -> str:
    """The part of a reply that gives its answer: a JSON reply's `answer`, else the reply."""
    text = text.strip()
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and obj.get("answer") is not None:
            return str(obj["answer"]).strip()
    return text


def read_answer(text: str) -> str:
    """The answer a reply gives, normalised; "" when it gives none (an abstention, never a
    guess): `engine.analysis.extract_answer` of its `answer_text` (`\\boxed{...}`, the last
    number, a letter, yes/no, else the normalised stance; a reply declaring several
    different answers gives none). The single agent reads its replies the same way."""
    found = extract_answer(answer_text(text))
    return normalize_stance(found) if found else ""


# --------------------------------------------------------------------------- the result
class Reply(BaseModel):
    """One agent's reply in one round: its text and the answer read from it ("" abstains)."""

    agent: str
    icon: str = ""
    round: int
    text: str = ""
    answer: str = ""
    error: str = ""


def reply_warning(reply: Reply) -> str:
    """Why a round's reply gave no answer: its call failed, it declared several different
    answers, or none was found."""
    if reply.error:
        return f"failed ({reply.error})"
    return "several different answers declared" if hedge(answer_text(reply.text)) else \
        "no answer found"


class MindChange(BaseModel):
    """An agent whose answer in `round` differs from its answer in the round before."""

    agent: str
    round: int
    before: str
    after: str


class SocietyResult(AnswerResult):
    """Every round's replies and tally; `answer` is the last round's plurality, or with
    `synthesize` the synthesizer's ANSWER line (`synthesis` its whole reply)."""

    question: str
    rounds: list[list[Reply]] = Field(default_factory=list)
    tallies: list[Tally] = Field(default_factory=list)
    first_round: Tally | None = None
    mind_changes: list[MindChange] = Field(default_factory=list)
    confidence: Confidence | None = None
    synthesizer: str | None = None
    synthesis: str = ""


# --------------------------------------------------------------------------- the run
def _others_text(mine: str, previous: list[Reply], summarise: bool) -> str:
    """The other agents' answers from the round before: quoted in full, or summarised as
    their extracted answers with counts."""
    others = [r for r in previous if r.agent != mine]
    if summarise:
        counts = Counter(reply.answer or ABSTAINED for reply in others)
        return "\n".join(f"- {answer}: {n} agent{'s' if n != 1 else ''}"
                         for answer, n in counts.items())
    return "\n\n".join(f"One agent's solution: ```{r.text or ABSTAINED}```" for r in others)


def _peers(ctx: RunContext, mine: str, previous: list[Reply]) -> list[Reply]:
    """The round before as agent `mine` sees it: its own reply, and the others' as
    `RunContext.peer` carries them (a placebo run's donor replies, their answers read again)."""
    def heard(r: Reply) -> Reply:
        text = ctx.peer(r.agent, "answer" if r.round == 1 else "revise", r.round, r.text)
        return r.model_copy(update={"text": text, "answer": read_answer(text) if text else ""})
    if ctx.donor is None:
        return previous
    return [r if r.agent == mine else heard(r) for r in previous]


async def speak(ctx: RunContext, seat: Seat, history: list[dict[str, str]], number: int,
                task: Task, phase: str) -> tuple[Reply, list[dict[str, str]]]:
    """One agent's call in round `number`: its reply and its conversation with the reply
    (the single agent's rounds too)."""
    turn = await ctx.call_lines(seat, history, line=FINAL_LINE, phase=phase, round=number,
                                task=task)
    text = turn.reply if turn.ok else ""
    answer = (ctx.guard(turn, read_answer, text) or "") if text else ""
    if answer == "" and text:
        warn_hedge(ctx, turn, answer_text(text))
    reply = Reply(agent=seat.name, icon=seat.icon, round=number, text=text, answer=answer,
                  error=turn.error)
    return reply, [*history, {"role": "assistant", "content": text or ABSTAINED}]


async def _synthesize(ctx: RunContext, seat: Seat, question: str, last: list[Reply]
                      ) -> tuple[str, str, list[str]]:
    """The synthesis: (its reply, its ANSWER line, warnings)."""
    answers = "\n\n".join(f"One agent's final answer: ```{r.text or ABSTAINED}```"
                           for r in last)
    prompt = render(TEMPLATES, ctx.prompts, "synthesize", question=question, answers=answers)
    turn = await ctx.call_lines(seat, [{"role": "user", "content": prompt}],
                                line=ANSWER_LINE, phase="synthesis",
                                round=last[0].round + 1 if last else 1,
                                task=Task(
                                    kind="chair", sections=("ANSWER",),
                                    others={r.agent: r.answer for r in last if r.answer}))
    return closing_answer(ctx, turn, f"the synthesizer {seat.name}", "the synthesis", "the run")


def changes(rounds: list[list[Reply]]) -> list[MindChange]:
    """Each agent's answer changes between consecutive rounds (abstentions are no answer):
    the rounds' flips (`engine.analysis.rounds_dynamics.flips`)."""
    answers = [{r.agent: r.answer or None for r in replies} for replies in rounds]
    return [MindChange(**flip._asdict()) for flip in flips(answers)]


async def arun_society(question: str, *, agents: list[Seat | Any], rounds: int = 2,
                       summarise: bool = False, synthesize: bool = False,
                       **kw: Unpack[RunKwargs]) -> SocietyResult:
    """Du et al.'s multiagent debate: `rounds` rounds (the first included) of every agent
    answering, from round two on after seeing the others' answers of the round before.

    An agent whose call fails, or whose reply gives no answer, abstains in that round.
    `synthesize`: the first agent then reads every agent's last reply and writes the final
    answer (its ANSWER line; none when it fails, never the plurality put in its place).
    """
    run = split_run_options(dict(kw), "society")
    question = require_text(question, "question")
    agents = require_seats(agents, "agents", MIN_AGENTS, MAX_AGENTS, "society", "agent",
                           run.endpoints)
    options = check_options(SPEC, {"rounds": rounds, "summarise": summarise,
                                   "synthesize": synthesize})
    # each agent sees the others' answers in this order (DESIGN 2.10)
    order, shown = presented(agents, run.order_seed)

    async def body(ctx: RunContext) -> SocietyResult:
        first = render(TEMPLATES, ctx.prompts, "answer", question=question)
        histories = {s.name: [{"role": "user", "content": first}] for s in shown}
        done: list[list[Reply]] = []
        for number in range(1, rounds + 1):
            calls = []
            for seat in shown:
                if number == 1:
                    task = Task(kind="answer", keys=TASK_KEYS)
                else:
                    previous = _peers(ctx, seat.name, done[-1])
                    own = next(r.answer for r in previous if r.agent == seat.name)
                    task = Task(kind="revise", keys=TASK_KEYS, own=own or None,
                                others={r.agent: r.answer for r in previous
                                        if r.agent != seat.name})
                    histories[seat.name] = [*histories[seat.name], {
                        "role": "user", "content": render(
                            TEMPLATES, ctx.prompts, "revise", question=question,
                            others=_others_text(seat.name, previous, summarise))}]
                calls.append(speak(ctx, seat, histories[seat.name], number, task,
                                   "answer" if number == 1 else "revise"))
            spoken = await asyncio.gather(*calls)
            done.append([reply for reply, _ in spoken])
            histories = {reply.agent: history for reply, history in spoken}
        tallies = [tally({r.agent: r.answer or None for r in replies}) for replies in done]
        last = tallies[-1]
        warnings = [f"agent {r.agent}, round {r.round}: {reply_warning(r)}; it abstains"
                    for replies in done for r in replies if not r.answer]
        synthesis, answer = ("", last.winner or "")
        if synthesize:
            synthesis, answer, said = await _synthesize(ctx, agents[0], question, done[-1])
            warnings += said
        return SocietyResult(question=question, rounds=done, tallies=tallies,
                             first_round=tallies[0], answer=answer,
                             synthesizer=agents[0].name if synthesize else None,
                             synthesis=synthesis,
                             mind_changes=changes(done), confidence=derive_confidence(last),
                             warnings=warnings)

    return await execute(SPEC, question, body, {"agents": agents}, options, run, order)


run_society = synchronous(arun_society)


# --------------------------------------------------------------------------- presentation
def _last(result: SocietyResult) -> tuple[Tally, Confidence]:
    t = result.tallies[-1] if result.tallies else tally({})
    return t, result.confidence or derive_confidence(t)


def _measures(result: SocietyResult) -> Conformity:
    """The run's conformity counts (`engine.analysis.conformity`) over its rounds."""
    return conformity([{r.agent: r.answer for r in replies} for replies in result.rounds],
                      result.expected, _last(result)[0].winner)


def _conformity_rows(result: SocietyResult) -> list[dict[str, Any]]:
    """The run's conformity counts as table rows: each count with its chances; the
    right/wrong ones and the discarded answer only where an expected answer is known."""
    counts = _measures(result).model_dump()
    rows = [(measure, counts[count], counts[chances])
            for measure, count, chances in CONFORMITY]
    return [{"measure": measure, "count": int(count), "chances": int(chances)}
            for measure, count, chances in rows if count is not None and chances is not None]


def _summary(result: SocietyResult) -> str:
    t, c = _last(result)
    rows = _conformity_rows(result) if len(result.rounds) > 1 else []
    return (f"answer: {t.winner or '(none)'} ({t.winner_votes}/{t.total}) after "
            f"{len(result.tallies)} round(s); {len(result.mind_changes)} mind change(s); "
            f"confidence {c.level.upper()} {c.ratio:.0%} ({c.reason})"
            + "".join(f"; {r['measure']}: {r['count']}/{r['chances']}" for r in rows[:3]))


def _outcome(result: SocietyResult) -> str:
    return tally_outcome(*_last(result))


def judged(rounds: list[list[Reply]], expected: str | None) -> tuple[int | None, int | None]:
    """(persuaded: wrong in round one and right in the last, misled: the reverse), counted
    over agents; None without an expected answer or a second round."""
    if not expected or len(rounds) < 2:
        return None, None
    first = {r.agent: bool(answers_match(r.answer, expected)) for r in rounds[0]}
    last = {r.agent: bool(answers_match(r.answer, expected)) for r in rounds[-1]}
    persuaded = sum(1 for a, right in last.items() if right and not first.get(a, False))
    misled = sum(1 for a, right in last.items() if not right and first.get(a, False))
    return persuaded, misled


def _signals(result: SocietyResult) -> Signals:
    t, c = _last(result)
    first = result.first_round
    persuaded, misled = judged(result.rounds, result.expected)
    agents = len(result.rounds[0]) if result.rounds else 0
    measures = _measures(result)
    return Signals(answer=(result.answer or None) if result.synthesizer else t.winner,
                   first_answer=first.winner if first else None,
                   consensus=share(t), level=c.level if t.positions else None,
                   seats=agents if len(result.rounds) > 1 else None,
                   mind_changes=(len({m.agent for m in result.mind_changes})
                                 if len(result.rounds) > 1 else None),
                   persuaded=persuaded, misled=misled,
                   round_answers=[tally_.winner or "" for tally_ in result.tallies],
                   **measures.model_dump(),
                   extra={**tally_metrics(t, c), "agents": agents,
                          "rounds": len(result.rounds),
                          "changes": len(result.mind_changes),
                          "first_winner": first.winner or "" if first else ""})


def _view(r: SocietyResult) -> list[Block]:
    t, c = _last(r)
    blocks = [Block("metrics", items=[
                  ("Answer", (r.answer if r.synthesizer else t.winner) or "(none)"),
                  ("Confidence", confidence_text(c)),
                  ("Consensus", f"{t.winner_votes}/{t.total} ({t.ratio:.2f})"),
                  ("Mind changes", str(len(r.mind_changes)))]),
              Block("caption", body="Round one: every agent alone; each later round: every "
                                    "agent after the others' answers of the round before. "
                                    "Answers are read and tallied in code.")]
    if r.synthesizer:
        blocks.append(Block("text", f"Synthesis ({r.synthesizer}), the final answer",
                            body=r.synthesis or "(none: see the warnings)"))
    blocks += [tally_block(f"Round {n}", tally_) for n, tally_ in enumerate(r.tallies, 1)]
    for n in range(1, len(r.tallies)):
        flow = flow_block(f"Round {n} to round {n + 1}", r.tallies[n - 1], r.tallies[n])
        if flow is not None:
            blocks.append(flow)
    blocks.append(Block("table", "Answers by round", rows=[
        {"agent": f"{replies[i].icon} {replies[i].agent}".strip(),
         **{f"round {n}": (rs[i].answer or ABSTAINED) for n, rs in enumerate(r.rounds, 1)}}
        for replies in r.rounds[:1] for i in range(len(replies))]))
    if r.mind_changes:
        blocks.append(Block("table", "Mind changes", rows=[
            {"agent": m.agent, "round": m.round, "before": m.before, "after": m.after}
            for m in r.mind_changes]))
    blocks.append(Block("table", "Final tally", rows=tally_rows(t, r.first_round)))
    if len(r.rounds) > 1:
        blocks += [Block("table", "Conformity between rounds", rows=_conformity_rows(r)),
                   Block("caption", body="Each count over its chances, agents answering in "
                         "consecutive rounds: right to wrong over answers right the round "
                         "before (DebateLLM's \"bullied\"), wrong to right over answers "
                         "wrong before (\"relied on other\"), adoption of the previous "
                         "round's majority over agents off it; the final plurality discarded "
                         "a correct answer (\"Cost of Consensus\", 2026): 1 of 1 when some "
                         "agent gave the expected answer and the final plurality is not it.")]
    return blocks + warnings_block(r.warnings)


def _insights(data: InsightsData) -> Section:
    """Tallies, accuracy and mind changes by round, and the conformity rates, per label."""
    runs = completed(data.runs)
    frames = insights_frames(runs, data.results())
    accuracy_spec, (changes, changes_spec) = frames["accuracy"][1], frames["changes"]
    overall = frames["all"]
    charts = tally_charts(runs, "Society")
    if accuracy_spec["y"]:
        charts.append(Chart(
            "round_lines", frames["points"], "Society: accuracy by round",
            "Each round's plurality against the expected answer, one line per label, over the "
            "scored runs with that round, with its 95% Wilson interval; dashed: the label's "
            "round-1 accuracy, the majority vote of the agents' independent answers."))
    if changes_spec["y"]:
        charts.append(Chart(
            "rate_bar", changes, "Society: mind changes by round",
            "Share of agents whose answer in round k differs from their own in round k-1, "
            "over the agents answering in both (abstentions are no answer).",
            {**changes_spec, "y_title": "changed"}))
    table = frames["conformity"]
    if not table.empty:
        charts.append(Chart(
            "rate_bar", frames["conformity_wide"][0],
            "Society: conformity between rounds",
            "Counts over their chances: right to wrong over answers right the round before "
            "(DebateLLM's \"bullied\"), wrong to right over those wrong before (\"relied on "
            "other\"), adopting the previous round's majority over agents off it, and a "
            "final plurality that discarded a correct answer some agent gave over runs where "
            "one did (\"Cost of Consensus\", 2026).",
            {**frames["conformity_wide"][1], "y_title": "rate"}))
    return Section("society", "Society of minds (Du et al.)", charts=charts, metrics=[
        ("Runs", f"{len(runs):,}"),
        *((measure.split(" (")[0].capitalize(), shown) for measure, shown in zip(
            overall["measure"], overall["rate [95% CI] n"], strict=True))],
        table=table.rename(columns={"group": "label"}))


def _lost(result: SocietyResult) -> list[str]:
    """The decisive calls: the synthesis when one was asked for, else the last round's
    answers; with no usable one the run has no answer."""
    if result.synthesizer is not None:
        made = [t for t in result.turns if t.phase == "synthesis"]
        return ["the synthesis"] if made and not result.answer else []
    last = result.tallies[-1] if result.tallies else None
    return ["every answer of the last round"] if last is not None and not last.positions \
        else []


SPEC = ProtocolSpec(
    final_positions=lambda r: {reply.agent: reply.answer or NO_POSITION
                               for reply in r.rounds[-1]} if r.synthesizer and r.rounds else None,
    judge_phase="synthesis",
    shows_peers=True,  # DESIGN 2.13: a placebo arm swaps its peers' messages
    name="society", title="Society of minds (Du et al.)", source="013", question_name="question",
    runner=arun_society,
    slots=(Slot("agents", many=True, minimum=MIN_AGENTS, maximum=MAX_AGENTS,
                defaults=tuple({"name": f"agent {n}"} for n in range(1, 4)), role="agent",
                help="each answers every round, from round two on after the others"),),
    options=(Option("rounds", 2, MIN_ROUNDS, MAX_ROUNDS,
                    "rounds, the first (independent answers) included"),
             Option("summarise", False, help="show the others' answers as a summary of "
                                              "their extracted answers, not in full"),
             Option("synthesize", False, help="after the last round the first agent "
                    "synthesizes the final answer (deliberate, then synthesize)")),
    templates=TEMPLATES,
    estimate_calls=lambda options, seats: int(seats.get("agents", 3)) * int(
        options.get("rounds", 2)) + bool(options.get("synthesize")),
    estimate_waves=lambda options, seats: int(options.get("rounds", 2)) + bool(
        options.get("synthesize")),
    insights=_insights,
    result_type=SocietyResult, summary=_summary, outcome=_outcome, signals=_signals,
    view=_view, lost=_lost, phases=("answer", "revise", "synthesis"), rounds_option="rounds",
    color="#6d4c41",
    carried=lambda r: tally_carried(r.tallies[-1] if r.tallies else None),
    answers_by_round=lambda r: [{reply.agent: reply.answer or None for reply in replies}
                                for replies in r.rounds])
