"""A persona panel's result and how it reads: the result values, the CLI summary, the outcome
line, the signals stored for experiments and Insights, the run detail's blocks and the
panel's Insights section."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from engine.analysis.stances import Confidence, Tally
from engine.models import Signals
from engine.protocols.base import AnswerResult
from engine.protocols.personas import PERSONAS
from engine.protocols.tallying import (
    Proposal,
    confidence_text,
    flow_block,
    share,
    tally_block,
    tally_metrics,
    tally_outcome,
    tally_rows,
    tally_summary,
)
from engine.simulated.world import PERSONA_CAVEAT
from engine.views.aggregate import completed, rate_by, rate_text
from engine.views.ballots import (
    ballots_frame,
    correctness_flow_links,
    mind_change_by_label,
    mind_change_rates,
    plurality_flow_links,
    tally_charts,
    with_personas,
)
from engine.views.blocks import Block, Chart, InsightsData, Section, warnings_block


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


class PanelResult(AnswerResult):
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


def summary(result: PanelResult) -> str:
    """The CLI's lines: winner, confidence, round one and mind changes, the answer."""
    t, c, first = result.tally, result.confidence, result.first_round
    lines = [tally_summary(t, c),
             f"round one: {first.winner or '(none)'} ({first.winner_votes}/{first.total}); "
             f"mind changes: {', '.join(result.mind_changes) or 'none'}"]
    if result.answer:
        lines.append(f"answer: {result.answer[:200]}")
    return "\n".join(lines)


def outcome(result: PanelResult) -> str:
    """The runs table's outcome: the tally, and whether the debate changed round one's."""
    text = tally_outcome(result.tally, result.confidence)
    return text + (", debate changed it" if result.first_round.winner != result.tally.winner
                   else "")


def signals(result: PanelResult) -> Signals:
    """The stored signals: the tally, round one, mind changes and their kinds."""
    t, first = result.tally, result.first_round
    kinds = list(result.change_kinds.values())
    extra = {**tally_metrics(t, result.confidence), "debaters": len(result.proposals),
             "claimed_changes": len(result.claimed_changes),
             "claim_mismatches": len(result.claim_mismatches()),
             "critic_flawed": sum(a.verdict == "flawed" for a in result.critique.assessments)
             if result.critique.assessments else None,  # None: the critic failed or was not asked
             "first_round_winner": first.winner or "",
             "first_round_ratio": share(first),
             "first_round_confidence_level": result.first_round_confidence.level
             if first.positions else None,
             "changed_outcome": first.winner != t.winner,
             "judge_answer": result.answer[:500], "judged": bool(result.answer)}
    if result.change_kinds:
        extra.update({kind: kinds.count(kind) for kind in ("persuaded", "misled", "switched")})
    return Signals(answer=t.winner, first_answer=first.winner, consensus=share(t),
                   level=result.confidence.level if t.positions else None,
                   seats=len(result.proposals),
                   mind_changes=len(result.mind_changes),
                   persuaded=kinds.count("persuaded") if result.change_kinds else None,
                   misled=kinds.count("misled") if result.change_kinds else None, extra=extra)


def lost(result: PanelResult) -> list[str]:
    """The final ballots and the judge's synthesis are decisive: with no final ballot read
    the panel has no answer, without the synthesis no written one."""
    made = [t for t in result.turns if t.phase == "synthesis"]
    out = [] if result.tally.positions or not result.rebuttals else ["every final ballot"]
    return out + (["synthesis (judge)"] if made and not result.answer else [])


def view(r: PanelResult) -> list[Block]:
    """The run detail: tally, critique, rebuttals and mind changes, both tallies, the flow."""
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


BUILT_IN_PERSONAS = {p.prompt.strip(): p.id for p in PERSONAS.values()}


def _any_simulated(runs: Any) -> bool:
    """Whether any of these stored runs is simulated (its `simulated` column)."""
    return "simulated" in getattr(runs, "columns", ()) and bool(runs["simulated"].any())


def insights(data: InsightsData) -> Section:
    """The panel's Insights section: measured and claimed mind changes, per persona and per
    label, stance flows against the vote, right and wrong before and after, and the tally."""
    panels = completed(data.runs)
    section = Section("panel", "Persona panel", metrics=[("Panels", f"{len(panels):,}")])
    by_label = mind_change_by_label(panels)
    if not by_label.empty:
        section.metrics.append(("Mind-change rate", rate_text(
            int(by_label["changes"].sum()), int(by_label["n"].sum()))))
        section.charts.append(Chart(
            "rate_bar", by_label, "Mind-change rate per label",
            "Share of debaters whose stance changed between proposal and rebuttal: measured "
            "from the stances, beside what the debaters claimed.",
            {"y": ["rate", "claimed"], "names": ["measured", "claimed"],
             "y_title": "debaters"}))
    ballots = ballots_frame(data.results())
    ballots = ballots[ballots["id"].isin(panels["id"])] if not ballots.empty else ballots
    if not ballots.empty:
        section.charts += [
            Chart("rate_bar", mind_change_rates(with_personas(
                ballots, data.results(), BUILT_IN_PERSONAS), "persona").rename(
                columns={"persona": "group"}), "Mind-change rate per persona",
                "Share of each persona's panels in which its measured stance changed after "
                "the critique, by the persona a seat played (not its seat's name)."
                + (f" {PERSONA_CAVEAT}" if _any_simulated(panels) else ""),
                {"y_title": "panels it changed in"}),
            Chart("sankey", plurality_flow_links(ballots), "Stance flows against the vote",
                  "Each band is debaters: left, their first answer against the round-one "
                  "plurality; right, their final answer against the panel's answer.", {})]
        right_wrong = correctness_flow_links(ballots)
        if not right_wrong.empty:
            section.charts.append(Chart(
                "sankey", right_wrong, "Right and wrong, before and after the debate",
                "Panels with an expected answer: each debater's first and final answer, right "
                "or wrong.", {}))
    section.charts += tally_charts(panels, "Panel")
    section.charts.append(Chart(
        "rate_bar", rate_by(panels, "m_changed_outcome"), "Debate changed the answer",
        "Share of panels whose final winner differs from the round-one vote's winner, per "
        "label.", {"y_title": "panels"}))
    return section
