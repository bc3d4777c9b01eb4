"""Single agent, Du et al. 2023's baseline (arXiv 2305.14325): one agent answers the question
with the society's round-one prompt; in each later round it is asked, in its own
conversation, to double check its answer and give it again. Du's "single agent" is
`rounds=1`; their "single agent with reflection" is `rounds=2`.

Replies are read exactly as the society reads them (`engine.protocols.society.read_answer`),
so a single agent and a society are scored alike. The rounds follow one another: each call
waits for the one before.
"""
from __future__ import annotations

from typing import Any, Unpack

import pandas as pd
from pydantic import Field

from engine.analysis.conformity import conformity
from engine.checks import require_int, require_text
from engine.config import RunKwargs
from engine.llm.calls import RunContext
from engine.models import ConfigError, Seat, Signals, Task
from engine.protocols.base import (
    AnswerResult,
    Option,
    ProtocolSpec,
    Slot,
    execute,
    split_run_options,
    synchronous,
)
from engine.protocols.checks import require_seat
from engine.protocols.society import (
    ANSWER,
    FINAL,
    TASK_KEYS,
    MindChange,
    Reply,
    changes,
    judged,
    reply_warning,
    speak,
)
from engine.protocols.tallying import ABSTAINED
from engine.protocols.templates import Template, render
from engine.views.aggregate import completed, numbers
from engine.views.blocks import Block, InsightsData, Section, warnings_block

REFLECT = Template(
    "Can you double check that your answer is correct. Please reiterate your answer. " + FINAL,
    ("question",), "Rounds two on: the agent, after its own conversation so far, checks its "
                   "answer and gives it again (Du et al.'s self-reflection).")
JUDGE_ANSWERS = Template(
    "Several agents answered the following question; their final answers are below, without "
    "their reasoning.\n\nQuestion: {question}\n\nTheir final answers:\n{answers}\n\n"
    "Judge which answer is right and give it. " + FINAL,
    ("question", "answers"), "Round one with `answers` given: the agent judges the other "
    "agents' final answers alone (an answers-only judge).", required=("question", "answers"))
TEMPLATES = {"answer": ANSWER, "reflect": REFLECT, "judge_answers": JUDGE_ANSWERS}
ANSWERS_MAX = 20_000  # characters of final answers an answers-only judge reads
MIN_ROUNDS, MAX_ROUNDS = 1, 10


class SingleResult(AnswerResult):
    """One reply per round; `answer` is the last round's answer ("" when it gave none)."""

    question: str
    replies: list[Reply] = Field(default_factory=list)
    mind_changes: list[MindChange] = Field(default_factory=list)


async def arun_single(question: str, *, agent: Seat | Any, rounds: int = 1,
                      answers: str = "", **kw: Unpack[RunKwargs]) -> SingleResult:
    """One agent answers, then reflects on its answer in each of the `rounds - 1` rounds after.
    Given `answers` (other agents' final answers, one `NAME: ANSWER` a line), its first
    answer judges them: it reads the question and those answers alone, not how they were
    reached (the answers-only judge of DESIGN 2.13).

    A failed call, or a reply with no answer, abstains in that round; the agent is still asked
    to reflect in the next one.
    """
    run = split_run_options(dict(kw), "single")
    question = require_text(question, "question")
    agent = require_seat(agent, "agent", run.endpoints)
    rounds = require_int(rounds, "rounds", MIN_ROUNDS, MAX_ROUNDS, "single")
    answers = _answers(answers)
    given = dict(line.split(": ", 1) for line in answers.splitlines() if ": " in line)

    async def body(ctx: RunContext) -> SingleResult:
        first = render(TEMPLATES, ctx.prompts, "judge_answers", question=question,
                       answers=answers) if answers else \
            render(TEMPLATES, ctx.prompts, "answer", question=question)
        history = [{"role": "user", "content": first}]
        replies: list[Reply] = []
        for number in range(1, rounds + 1):
            if number == 1 and answers:  # a judge of the others' final answers
                task = Task(kind="chair", sections=("ANSWER",), others=given)
            elif number == 1:
                task = Task(kind="answer", keys=TASK_KEYS)
            else:
                task = Task(kind="revise", keys=TASK_KEYS, own=replies[-1].answer or None)
                history.append({"role": "user", "content": render(
                    TEMPLATES, ctx.prompts, "reflect", question=question)})
            reply, history = await speak(ctx, agent, history, number, task,
                                         "answer" if number == 1 else "reflect")
            replies.append(reply)
        warnings = [f"round {r.round}: {reply_warning(r)}; the agent abstains"
                    for r in replies if not r.answer]
        return SingleResult(question=question, replies=replies, answer=replies[-1].answer,
                            mind_changes=changes([[r] for r in replies]), warnings=warnings)

    return await execute(SPEC, question, body, {"agent": agent},
                         {"rounds": rounds, "answers": answers}, run, [agent.name])


def _answers(value: Any) -> str:
    """The `answers` option: other agents' final answers as text, one `NAME: ANSWER` a line
    ("" for none)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigError(f"answers must be text (one 'name: answer' a line), got "
                          f"{type(value).__name__}", "input")
    if len(value) > ANSWERS_MAX or "\x00" in value:
        raise ConfigError(f"answers must be at most {ANSWERS_MAX:,} characters without NUL "
                          "bytes", "limit")
    return value.strip()


run_single = synchronous(arun_single)


# --------------------------------------------------------------------------- presentation
def _summary(result: SingleResult) -> str:
    return (f"answer: {result.answer or '(none)'} after {len(result.replies)} round(s); "
            f"{len(result.mind_changes)} change(s) of answer")


def _outcome(result: SingleResult) -> str:
    return result.answer or "(abstained)"


def _signals(result: SingleResult) -> Signals:
    replies = result.replies
    reflected = len(replies) > 1
    persuaded, misled = judged([[r] for r in replies], result.expected)
    measures = conformity([{r.agent: r.answer} for r in replies], result.expected,
                          result.answer or None)
    return Signals(answer=result.answer or None,
                   first_answer=(replies[0].answer or None) if replies else None,
                   seats=1 if reflected else None,
                   mind_changes=int(bool(result.mind_changes)) if reflected else None,
                   persuaded=persuaded, misled=misled,
                   round_answers=[r.answer for r in replies], **measures.model_dump(),
                   extra={"rounds": len(replies), "changes": len(result.mind_changes)})


def _lost(result: SingleResult) -> list[str]:
    """The agent's last reply is decisive: without an answer in it the run has none."""
    return ["the agent's answer"] if result.replies and not result.answer else []


def _view(r: SingleResult) -> list[Block]:
    blocks = [Block("metrics", items=[("Answer", r.answer or "(none)"),
                                      ("Rounds", str(len(r.replies))),
                                      ("Changes of answer", str(len(r.mind_changes)))]),
              Block("caption", body="Round one: the agent answers alone; each later round: it "
                                    "checks its own answer and gives it again. Answers are "
                                    "read in code."),
              Block("table", "Answers by round", rows=[
                  {"round": reply.round, "answer": reply.answer or ABSTAINED}
                  for reply in r.replies])]
    return blocks + warnings_block(r.warnings)


def _insights(data: InsightsData) -> Section:
    runs = completed(data.runs)
    changed = numbers(runs, "m_changes") if len(runs) else pd.Series(dtype=float)
    return Section("single", "Single agent (Du et al. baseline)", metrics=[
        ("Runs", f"{len(runs):,}"),
        ("Runs that changed their answer", f"{int((changed > 0).sum()):,}")])


SPEC = ProtocolSpec(
    name="single", title="Single agent (Du et al. baseline)", source="013",
    question_name="question", runner=arun_single,
    slots=(Slot("agent", defaults=({"name": "agent"},), role="agent",
                help="answers, then checks its own answer in each later round"),),
    options=(Option("rounds", 1, MIN_ROUNDS, MAX_ROUNDS,
                    "rounds, the first answer included (2: Du's single agent with "
                    "reflection)"),
             Option("answers", "", help="other agents' final answers to judge, one "
                                        "'name: answer' a line (an answers-only judge)")),
    templates=TEMPLATES,
    estimate_calls=lambda options, seats: int(options.get("rounds", 1)),
    insights=_insights,
    result_type=SingleResult, summary=_summary, outcome=_outcome, signals=_signals,
    view=_view, lost=_lost, phases=("answer", "reflect"), rounds_option="rounds",
    color="#8d6e63",
    answers_by_round=lambda r: [{reply.agent: reply.answer or None} for reply in r.replies])
