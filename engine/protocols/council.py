"""Council (DESIGN 2.9, after karpathy/llm-council): every member answers alone; every member
ranks the OTHER members' answers, shown under anonymous labels; the rankings are aggregated by
Borda count; a chairman reads every answer and the aggregate ranking and writes the final
answer, ending with an `ANSWER:` line. 2 x members + 1 calls, in three waves.

Anonymity is by construction: a ranker is shown neither its own answer nor any seat's name,
persona or model, only `Response A`, `Response B`, ... in an order drawn per ranker from the
run's `seed` (`council_result.draw_labels`). The arithmetic is in `council_result`.

An answer is data, not instructions: each is fenced under its label in the ranking and
chairman prompts, and a line inside it that forges another response's header, a
`FINAL RANKING` block or a fence of its own is neutralised, with a warning on its turn and
the run (`council_result.fence`). A ranking that lists fewer responses than it was shown is
read as it stands, the unlisted sharing the bottom place, with a warning.
"""
from __future__ import annotations

import asyncio
from typing import Any, Unpack

from engine.analysis.answers import answer_line
from engine.analysis.stances import tally
from engine.checks import require_int, require_text
from engine.config import RunKwargs
from engine.llm.calls import RunContext
from engine.models import Seat, Signals, Task, Turn
from engine.protocols.base import (
    ANSWER_LINE,
    ENDING,
    NO_POSITION,
    Option,
    ProtocolSpec,
    Slot,
    closing_answer,
    execute,
    presented,
    split_run_options,
    synchronous,
    warn_hedge,
)
from engine.protocols.checks import require_seat
from engine.protocols.council_result import (
    CouncilResult,
    aggregate,
    borda,
    draw_labels,
    fence,
    label_of,
    mean_ranks,
    read_ranking,
    top_confidence,
)
from engine.protocols.tallying import confidence_text, require_seats
from engine.protocols.templates import Template, render
from engine.views.aggregate import completed, counts_by
from engine.views.blocks import Block, Chart, InsightsData, Section, warnings_block

TEMPLATES = {
    "answer": Template(
        "Answer the following question as accurately as you can.\n\nQuestion: {question}\n\n"
        "Explain the reasoning briefly, then " + ENDING, ("question",),
        "Stage 1: every member answers alone.", required=("question",)),
    "rank": Template(
        "You are evaluating different responses to the following question.\n\n"
        "Question: {question}\n\nHere are the responses, each under an anonymous label:\n\n"
        "{responses}\n\nEvaluate each response in turn: what it does well and what it does "
        "badly. Then give the final ranking, from best to worst. It must start on a line of "
        "its own reading FINAL RANKING: and list the responses as a numbered list, one per "
        "line, each naming only the label, for example:\n\nFINAL RANKING:\n1. Response B\n"
        "2. Response A\n\nWrite nothing after the ranking.", ("question", "responses"),
        "Stage 2: every member ranks the others' answers, shown under anonymous labels.",
        required=("question", "responses")),
    "chair": Template(
        "You are the chairman of a council. Each member answered the question below on its "
        "own; then each ranked the others' answers without knowing whose they were.\n\n"
        "Question: {question}\n\nThe answers, each under an anonymous label:\n\n{responses}\n\n"
        "The members' aggregate ranking (Borda count), best first:\n{ranking}\n\n"
        "Weigh the answers and the ranking, and write the council's final answer to the "
        "question. Then " + ENDING, ("question", "responses", "ranking"),
        "Stage 3: the chairman reads every answer and the aggregate ranking.",
        required=("question", "responses", "ranking")),
}
MIN_MEMBERS, MAX_MEMBERS = 2, 8
SEED_MAX = 2**31 - 1


def _shown(labels: dict[str, str], answers: dict[str, str]) -> str:
    """The answers under their labels, in label order, each fenced (`fence`): nothing else
    of any seat, and nothing inside an answer that reads as the prompt's own structure."""
    return "\n\n".join(fence(label, answers[seat])[0] for label, seat in labels.items())


def _ranking_text(order: list[str], totals: dict[str, int], chair: dict[str, str]) -> str:
    """The aggregate ranking as the chairman sees it: labels and points, no seat names."""
    label = {seat: lab for lab, seat in chair.items()}
    lines = [f"{k}. {label[seat]} ({totals[seat]} points)"
             for k, seat in enumerate((s for s in order if s in label), 1)]
    unranked = [lab for lab, seat in chair.items() if seat not in order]
    if unranked:
        lines.append(f"Not ranked by anyone: {', '.join(unranked)}")
    return "\n".join(lines) or "(no ranking could be read)"


async def _rank(ctx: RunContext, seat: Seat, question: str, labels: dict[str, str],
                answers: dict[str, str], briefs: dict[str, str]) -> list[str] | str:
    """One ranker's ranking, de-anonymised (seat names, best first), or why it abstains."""
    prompt = render(TEMPLATES, ctx.prompts, "rank", question=question,
                    responses=_shown(labels, answers))
    task = Task(kind="rank", own=briefs.get(seat.name) or None,
                others={label: briefs.get(s, "") for label, s in labels.items()})
    # No persona either: DESIGN 2.9 says a ranking prompt holds no seat's persona, and a
    # ranker's own persona (sent as its system prompt) could name or describe it, so the
    # ranker ranks as its bare model.
    anonymous = seat.model_copy(update={"persona": ""})
    turn = await ctx.call(anonymous, [{"role": "user", "content": prompt}],
                          phase="rank", round=2, task=task)
    if not turn.ok:
        return f"failed ({turn.error})"
    read = ctx.guard(turn, read_ranking, turn.reply, list(labels))
    if read is None:
        if not turn.ok:  # the reading itself failed on this reply
            return f"its ranking could not be read ({turn.error})"
        ctx.update(turn, warnings=[*turn.warnings, "no readable FINAL RANKING block; "
                                   "the ranker abstains"])
        return "its ranking could not be read"
    update: dict[str, Any] = {"parsed": {"ranking": read}}
    if len(read) < len(labels):
        update["warnings"] = [*turn.warnings, f"a partial ranking: {len(read)} of the "
                              f"{len(labels)} responses shown listed; the "
                              f"{len(labels) - len(read)} unlisted share the bottom place"]
    ctx.update(turn, **update)
    return [labels[label] for label in read]


async def _chairman(ctx: RunContext, chair: Seat, question: str, answers: dict[str, str],
                    briefs: dict[str, str], best: list[str], totals: dict[str, int],
                    chair_labels: dict[str, str]) -> tuple[str, str, list[str]]:
    """Stage 3: (the chairman's reply, its last ANSWER line, warnings); nothing from a failed
    chairman, never an invented answer."""
    prompt = render(TEMPLATES, ctx.prompts, "chair", question=question,
                    responses=_shown(chair_labels, answers),
                    ranking=_ranking_text(best, totals, chair_labels))
    by_label = {seat: label for label, seat in chair_labels.items()}
    leading = [*best, *(s for s in chair_labels.values() if s not in best)]
    task = Task(kind="chair", sections=("ANSWER",),
                others={by_label[s]: briefs.get(s, "") for s in leading})
    turn = await ctx.call_lines(chair, [{"role": "user", "content": prompt}],
                                line=ANSWER_LINE, phase="chair", round=3, task=task)
    return closing_answer(ctx, turn, "the chairman", "the chairman", "the council")


async def arun_council(question: str, *, members: list[Seat | Any], chairman: Seat | Any,
                       seed: int = 0, **kw: Unpack[RunKwargs]) -> CouncilResult:
    """A council of `members` (2..8) and a `chairman`: answers, anonymous peer rankings,
    a Borda count, and the chairman's final answer (its last `ANSWER:` line, scored).

    A member whose answer failed is not shown for ranking; a ranking that cannot be read
    abstains (a warning); a failed chairman leaves the run without an answer.
    """
    run = split_run_options(dict(kw), "council")
    question = require_text(question, "question")
    members = require_seats(members, "members", MIN_MEMBERS, MAX_MEMBERS, "council", "member",
                            run.endpoints)
    chair = require_seat(chairman, "chairman", run.endpoints)
    seed = require_int(seed, "seed", 0, SEED_MAX, "council")
    names = [seat.name for seat in members]
    # the order the answers are presented in (DESIGN 2.10), before each ranker's own draw
    order, shown = presented(members, run.order_seed)

    async def body(ctx: RunContext) -> CouncilResult:
        warnings: list[str] = []
        first = render(TEMPLATES, ctx.prompts, "answer", question=question)
        turns: list[Turn] = list(await asyncio.gather(*(
            ctx.call_lines(seat, [{"role": "user", "content": first}], line=ANSWER_LINE,
                           phase="answer", round=1,
                           task=Task(kind="answer", sections=("ANSWER",)))
            for seat in shown)))
        answers = {t.seat: t.reply for t in turns if t.ok}
        for t in turns:
            if not t.ok:
                warnings.append(f"member {t.seat}: failed ({t.error}); its answer is not "
                                "shown for ranking")
        briefs = {seat: answer_line(text) for seat, text in answers.items()}
        for t in turns:  # an answer forging the prompt's structure is shown neutralised
            forged = fence("", answers[t.seat])[1] if t.seat in answers else []
            if forged:
                note = (f"member {t.seat}'s answer held " + "; ".join(forged) + ": shown "
                        "to the rankers and the chairman neutralised, inside its fence")
                ctx.update(t, warnings=[*t.warnings, note])
                warnings.append(note)
        for t in turns:  # an answer without its line is still an answer: ranked as written
            if t.ok and not briefs.get(t.seat) and not warn_hedge(ctx, t, t.reply):
                ctx.update(t, warnings=[*t.warnings, "no ANSWER line; shown for ranking as "
                                        "written"])
        presented_answers = [name for name in order if name in answers]
        labels: dict[str, dict[str, str]] = {}
        for index, seat in enumerate(members):
            others = [name for name in presented_answers if name != seat.name]
            if others:
                labels[seat.name] = draw_labels(others, seed, index)
            else:
                warnings.append(f"member {seat.name}: no other answer to rank")
        # what a ranker reads of the others' answers (`RunContext.peer`: a placebo run's
        # are the donor run's); its own stays its own
        heard = {name: ctx.peer(name, "answer", 1, text) for name, text in answers.items()}
        heard_briefs = {name: answer_line(text) for name, text in heard.items()}
        ranked = await asyncio.gather(*(
            _rank(ctx, seat, question, labels[seat.name],
                  {**heard, **{k: v for k, v in answers.items() if k == seat.name}},
                  {**heard_briefs, **{k: v for k, v in briefs.items() if k == seat.name}})
            for seat in shown if seat.name in labels))
        rankers = [seat.name for seat in shown if seat.name in labels]
        rankings = {name: r for name, r in zip(rankers, ranked, strict=True)
                    if isinstance(r, list)}
        warnings += [f"ranker {name}: {r}; it abstains"
                     for name, r in zip(rankers, ranked, strict=True) if isinstance(r, str)]
        shown_to = {ranker: list(shown_labels.values()) for ranker, shown_labels in
                    labels.items()}
        totals = borda(rankings, names, shown_to)
        best = aggregate(rankings, names, shown_to)
        top = best[0] if best else None
        chair_labels = {label_of(i): seat for i, seat in enumerate(presented_answers)}
        final_text, answer = "", ""
        if not answers:
            warnings.append("no member answered; the chairman was not asked")
        else:
            final_text, answer, said = await _chairman(ctx, chair, question, answers, briefs,
                                                       best, totals, chair_labels)
            warnings += said
        return CouncilResult(
            question=question, answers={n: answers[n] for n in order if n in answers},
            rankings=rankings, labels=labels, borda=totals, aggregate=best, top=top,
            chairman=chair.name, chair_labels=chair_labels, final_text=final_text,
            answer=answer, confidence=top_confidence(rankings, top), seed=seed,
            warnings=warnings)

    return await execute(SPEC, question, body,
                         {"members": members, "chairman": chair}, {"seed": seed}, run, order)


run_council = synchronous(arun_council)


# --------------------------------------------------------------------------- presentation
def _confidence(result: CouncilResult) -> str:
    return confidence_text(result.confidence) if result.confidence else "none"


def _summary(result: CouncilResult) -> str:
    ranked = ", ".join(f"{seat} {result.borda.get(seat, 0)}" for seat in result.aggregate)
    return (f"answer: {result.answer or '(none)'}; top: {result.top or '(none)'} "
            f"(Borda: {ranked or 'no ranking read'}); confidence {_confidence(result)}")


def _outcome(result: CouncilResult) -> str:
    c = result.confidence
    level = f" ({c.level}, {c.ratio:.0%})" if c and result.top else ""
    return f"{result.answer or '(no answer)'}; top {result.top or '(none)'}{level}"


def _signals(result: CouncilResult) -> Signals:
    """The chairman's answer; `first_answer` the plurality of the members' own ANSWER lines
    (stage 1, a vote within the council); `consensus` the share of rankers that put `top`
    first."""
    c = result.confidence
    read = bool(result.rankings)
    first = tally({seat: answer_line(text) or None for seat, text in result.answers.items()}
                  ) if result.answers else None
    return Signals(answer=result.answer or None, first_answer=first.winner if first else None,
                   consensus=round(c.ratio, 4) if c and read else None,
                   level=c.level if c and read else None,
                   extra={"top": result.top or "", "members": len(result.borda),
                          "answered": len(result.answers),
                          "rankings_read": len(result.rankings),
                          "top_points": result.borda.get(result.top or "", 0) if read else None,
                          "confidence_level": c.level if c and read else None})


def _answers_by_round(result: CouncilResult) -> list[dict[str, str | None]]:
    """One round (DESIGN 2.12): every member's own ANSWER line, stage 1 (a member whose call
    failed, or whose answer has no ANSWER line, abstains). The rankings are not answers and
    the chairman's answer is not a member's revised one, so a council has no round two."""
    members = [*result.answers, *(s for s in result.borda if s not in result.answers)]
    return [{seat: answer_line(result.answers.get(seat, "")) or None for seat in members}]


def _pairwise(result: CouncilResult) -> list[tuple[str, str]]:
    """Every ranker's ordering as games: each member it ranked above another beats it."""
    return [(better, worse) for ranked in result.rankings.values()
            for i, better in enumerate(ranked) for worse in ranked[i + 1:]]


def _lost(result: CouncilResult) -> list[str]:
    """The chairman's call is decisive: when it failed, or gave no usable ANSWER line (none,
    or several different ones), the council has no answer."""
    chair = [t for t in result.turns if t.phase == "chair"]
    return ["the chairman"] if chair and (not chair[-1].ok or not result.answer) else []


def _view(r: CouncilResult) -> list[Block]:
    means = mean_ranks(r.rankings)
    firsts = [ranked[0] for ranked in r.rankings.values() if ranked]
    blocks = [Block("metrics", items=[
                  ("Answer", r.answer or "(none)"), ("Top-ranked member", r.top or "(none)"),
                  ("Confidence", _confidence(r)),
                  ("Rankings read", f"{len(r.rankings)}/{len(r.labels)}")]),
              Block("caption", body="Stage 1: every member answers alone. Stage 2: every "
                                    "member ranks the others' answers under anonymous labels. "
                                    "Borda count in code. Stage 3: the chairman's answer."),
              Block("table", "Borda count", rows=[
                  {"member": seat, "points": r.borda.get(seat, 0),
                   "mean rank": round(means[seat], 2) if seat in means else None,
                   "first choices": firsts.count(seat)}
                  for seat in [*r.aggregate, *(s for s in r.borda if s not in r.aggregate)]]),
              Block("table", "Rankings", rows=[
                  {"ranker": ranker, "ranking (best first)": " > ".join(
                      r.rankings.get(ranker, [])) or "(abstained)",
                   "labels": ", ".join(f"{lab} = {seat}" for lab, seat in shown.items())}
                  for ranker, shown in r.labels.items()])]
    if r.final_text:
        blocks.append(Block("text", f"Chairman ({r.chairman})", body=r.final_text))
    blocks += [Block("text", f"Answer of {seat}", body=text) for seat, text in r.answers.items()]
    return blocks + warnings_block(r.warnings)


def _insights(data: InsightsData) -> Section:
    """The councils' count and how often the rankers agreed on the top member, per label (a
    `caption`, not a `note`: a section with a note is drawn as that note alone)."""
    runs = completed(data.runs)
    return Section("council", "Council", metrics=[("Councils", f"{len(runs):,}")],
                   charts=[Chart("stacked_counts", counts_by(runs, "m_confidence_level"),
                                 "Council: agreement on the top-ranked member",
                                 "high = every ranker put the top member first, medium = a "
                                 "strict majority did, low = split or no ranking read.",
                                 {"order": ["high", "medium", "low"]})],
                   caption="Each council's answer, Borda ranking and confidence are on its "
                           "run page; accuracy by label is in the comparison above.")


SPEC = ProtocolSpec(
    final_positions=lambda r: {seat: answer_line(text) or NO_POSITION
                               for seat, text in r.answers.items()} or None,
    judge_phase="chair",
    shows_peers=True,  # DESIGN 2.13: a placebo arm swaps its peers' messages
    name="council", title="Council (llm-council)", source="030", question_name="question",
    runner=arun_council,
    slots=(Slot("members", many=True, minimum=MIN_MEMBERS, maximum=MAX_MEMBERS,
                defaults=tuple({"name": f"member {n}"} for n in range(1, 4)), role="member",
                help="each answers alone, then ranks the others' answers anonymously"),
           Slot("chairman", defaults=({"name": "chairman"},), role="chairman",
                help="reads every answer and the aggregate ranking, writes the final answer")),
    options=(Option("seed", 0, 0, SEED_MAX, "draws the order of each ranker's labels"),),
    templates=TEMPLATES,
    estimate_calls=lambda options, seats: 2 * int(seats.get("members", 3)) + 1,
    estimate_waves=lambda options, seats: 3,  # answers, rankings, the chairman
    insights=_insights,
    result_type=CouncilResult, summary=_summary, outcome=_outcome, signals=_signals,
    view=_view, lost=_lost, phases=("answer", "rank", "chair"), color="#5e35b1",
    carried=lambda r: [r.top] if r.top else None, answers_by_round=_answers_by_round,
    pairwise=_pairwise)
