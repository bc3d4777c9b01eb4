"""A roundtable's result and how it reads: the result values, the CLI summary, the outcome
line, the signals stored for experiments and Insights, the run detail's blocks and the
roundtable's Insights section."""
from __future__ import annotations

from typing import ClassVar, Literal

import pandas as pd
from pydantic import BaseModel, Field

from engine.analysis.agreement import Agreement, Level
from engine.analysis.stances import Confidence, Tally
from engine.models import RunResult, Signals
from engine.protocols.tallying import tally_block
from engine.views.aggregate import completed, counts_by, rate_by
from engine.views.blocks import Block, Chart, InsightsData, Section, warnings_block


class Exchange(BaseModel):
    """One turn: `usable` only for a non-empty reply; a failed one is `degraded`, kept empty."""

    agent: str
    role: str
    round: int
    response: str
    usable: bool
    degraded: bool
    error: str = ""
    stance: str | None = None


class JudgeReading(BaseModel):
    """The judge's JSON reading of agreement (a model's reading, not verification)."""

    agreement_level: Level
    dominant_position: str = ""
    dissenting_views: list[str] = Field(default_factory=list)
    rationale: str = ""


class RoundtableResult(RunResult):
    """Exchanges, the lexical floor, the stance tally beside it, and the optional judge."""

    gives_answer: ClassVar[bool] = True  # its final answer is scored

    question: str
    context: str = ""
    rounds: int
    exchanges: list[Exchange]
    agreement: Agreement
    stance_tally: Tally             # each agent's stance in its last usable turn (None abstains)
    stance_confidence: Confidence
    judge: JudgeReading | None = None
    judge_status: Literal["applied", "degraded", "not_run"] = "not_run"
    diverged_from_floor: bool = False
    completion_state: Literal["qualified-draft", "blocked-escalated"]
    warning_codes: list[str] = Field(default_factory=list)

    def final_answer(self) -> str | None:
        """The stance tally's winner (None when nobody gave a stance)."""
        return self.stance_tally.winner



def summary(result: RoundtableResult) -> str:
    """The CLI's lines: the state, the lexical floor, the judge, the stance winner, dissent."""
    a = result.agreement
    judge = (f"; judge: {result.judge.agreement_level}" if result.judge else
             f"; judge: {result.judge_status}")
    winner = result.final_answer()
    return (f"{result.completion_state}: lexical floor {a.level_text()} "
            f"({a.overlap_fraction:.0%} of {a.voters} voter(s) agree){judge}"
            f"{' (diverged)' if result.diverged_from_floor else ''}\n"
            f"stance winner: {winner if winner is not None else 'none'}; dissent: "
            f"{', '.join(a.dissent) or 'none'}")


def outcome(result: RoundtableResult) -> str:
    """The runs table's outcome: the agreement level and the completion state."""
    return f"agreement {result.agreement.level_text()}, {result.completion_state}"


def signals(result: RoundtableResult) -> Signals:
    """The stored signals: the stance tally beside the lexical floor and the judge."""
    t = result.stance_tally
    return Signals(answer=t.winner, level=result.stance_confidence.level if t.total else None,
                   extra={
                       "agreement_level": result.agreement.level,
                       "overlap_fraction": result.agreement.overlap_fraction,
                       "voters": result.agreement.voters,
                       "completion_state": result.completion_state,
                       "judge_status": result.judge_status,
                       "judge_level": result.judge.agreement_level if result.judge else None,
                       "diverged": result.diverged_from_floor,
                       "stance_winner": t.winner,
                       "stance_confidence": result.stance_confidence.level,
                       "degraded_turns": sum(1 for e in result.exchanges if e.degraded)})


def lost(result: RoundtableResult) -> list[str]:
    """The agents' stances are decisive for the stance tally (with none, the run has no
    answer), and the judge, when one sat, for its reading of the agreement."""
    out = [] if result.stance_tally.positions or not result.exchanges else ["every stance"]
    return out + (["judge"] if result.judge_status == "degraded" else [])


def answers_by_round(result: RoundtableResult) -> list[dict[str, str | None]]:
    """Each round's stances by agent, in speaking order (a failed turn or one without a
    STANCE line abstains)."""
    rounds: dict[int, dict[str, str | None]] = {}
    for e in result.exchanges:
        rounds.setdefault(e.round, {})[e.agent] = e.stance if e.usable else None
    return [rounds[n] for n in sorted(rounds)]


def view(r: RoundtableResult) -> list[Block]:
    """The run detail: agreement, the judge's reading, dissent, exchanges, the stances."""
    a, judge, votes = r.agreement, r.judge, r.stance_tally
    judge_text = str(r.judge_status)
    if judge is not None:
        judge_text += f" ({judge.agreement_level}"
        judge_text += ", diverged)" if r.diverged_from_floor else ")"
    blocks = [Block("metrics", items=[
        ("Agreement (lexical floor)", a.level),
        ("Overlap fraction", f"{a.overlap_fraction:.2f}"),
        ("Voters", a.voters), ("State", r.completion_state), ("Judge", judge_text),
        ("Stance winner", votes.winner or "none"),
        ("Stance confidence", r.stance_confidence.level if votes.total else "none")]),
        Block("text", "Dominant group (lexical floor)", ", ".join(a.dominant)
              or "no two agents share enough words")]
    if judge is not None:
        blocks.append(Block("text", "Judge's dominant position", judge.dominant_position))
        blocks.append(Block("text", "Judge's rationale", judge.rationale))
    dissent = [{"agent": name, "final turn": text} for name, text in a.dissent_texts.items()]
    dissent += [{"agent": "(judge)", "final turn": view}
                for view in (judge.dissenting_views if judge is not None else [])]
    if dissent:
        blocks.append(Block("table", "Dissent", rows=dissent))
    blocks.append(Block("table", "Exchanges", rows=[
        {"round": e.round, "agent": e.agent, "role": e.role, "stance": e.stance or "",
         "usable": e.usable, "response": e.response if e.usable else f"(degraded: {e.error})"}
        for e in r.exchanges]))
    if votes.total:
        blocks.append(tally_block("Stance tally", votes))
    return blocks + warnings_block(r.warnings)


def insights(data: InsightsData) -> Section:
    """The roundtable's Insights section: agreement levels, completion states, and how often
    a judge read agreement differently from the lexical floor."""
    tables = completed(data.runs)
    charts = [
        Chart("stacked_counts", counts_by(tables, "m_agreement_level"), "Agreement levels",
              "The lexical floor's agreement level per label (shared words, not verified "
              "agreement).", {"order": ["strong", "moderate", "weak", "none"]}),
        Chart("stacked_counts", counts_by(tables, "m_completion_state"), "Completion states",
              "qualified-draft: two or more agents gave a usable turn; blocked-escalated: "
              "fewer did, and the question needs a person.",
              {"order": ["qualified-draft", "blocked-escalated"]})]
    judged = tables[tables.get("m_judge_status", pd.Series(dtype=str)) == "applied"] \
        if "m_judge_status" in tables else tables.iloc[0:0]
    if not judged.empty:
        charts.append(Chart("rate_bar", rate_by(judged, "m_diverged"),
                            "Judge diverged from the floor",
                            "Among roundtables with a judge, the share whose judge read a "
                            "different agreement level than the lexical floor.",
                            {"y_title": "roundtables"}))
    return Section("roundtable", "Roundtable", metrics=[("Roundtables", f"{len(tables):,}")],
                   charts=charts)
