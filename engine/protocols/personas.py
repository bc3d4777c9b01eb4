"""Built-in personas and roles: the seeds' debaters, the panel's critic and judge, and the
roundtable's role names.

A persona is a system prompt with a name and an icon; a role is a name and a one-line
description that a protocol puts in the prompt. The Personas & roles page starts from these,
and the panel and vote protocols use the three debaters as their default seats.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.models import Seat


@dataclass(frozen=True)
class Persona:
    """A named system prompt: `id` is the seat name, `prompt` the seat's persona."""

    id: str
    name: str
    icon: str
    prompt: str

    def seat_dict(self) -> dict[str, str]:
        """A seat entry for a protocol slot's defaults (no model: the run's model applies)."""
        return {"name": self.id, "persona": self.prompt, "icon": self.icon}

    def seat(self, model: Any = "simulated", **kw: Any) -> Seat:
        """This persona seated on `model`."""
        return Seat(self.id, model, self.prompt, icon=self.icon, **kw)


@dataclass(frozen=True)
class Role:
    """A role name and the one line that tells an agent what the role asks of it."""

    name: str
    title: str
    description: str


# Seed 002's three debaters, with the seed's exact system prompts.
CAUTIOUS = Persona(
    "cautious", "Cautious", "🛡️",
    "You are the CAUTIOUS debater. Risk-averse and conservative: prefer proven, low-downside "
    "answers, distrust hype, and double-check the arithmetic and edge cases before committing.")
CREATIVE = Persona(
    "creative", "Creative", "💡",
    "You are the CREATIVE debater. Think laterally; back a bold, unconventional answer if the "
    "upside is high — but flair is no excuse for being wrong on a question with a definite "
    "answer.")
LITERAL = Persona(
    "literal", "Literal", "📏",
    "You are the LITERAL debater. Precise and methodical: answer EXACTLY what was asked, show "
    "the steps, and read nothing into the question that is not there.")

# The panel's critic (answers nothing; names each proposal's flaw) and judge (never states a
# confidence: the confidence falls out of the vote).
CRITIC = Persona(
    "critic", "Critic", "🔍",
    "You are the CRITIC of a debate panel. You answer nothing yourself: read every proposal "
    "and, for each, give a verdict (sound, flawed or unsupported) and the single most "
    "important flaw. Check the arithmetic and the reading of the question; be specific.")
JUDGE = Persona(
    "judge", "Judge", "⚖️",
    "You are the JUDGE of a debate panel. From the debaters' final positions and the vote, "
    "write the panel's final answer with a short rationale and the key points. You never state "
    "a confidence: it is computed from the vote.")

PANEL_DEBATERS: tuple[Persona, ...] = (CAUTIOUS, CREATIVE, LITERAL)
PERSONAS: dict[str, Persona] = {p.id: p for p in (*PANEL_DEBATERS, CRITIC, JUDGE)}

# Seed 003's roundtable roles.
ROLES: dict[str, Role] = {r.name: r for r in (
    Role("proposer", "Proposer",
         "Put forward a concrete answer to the question and the case for it."),
    Role("critic", "Critic", "Find the weakest point in the answers so far and say why it fails."),
    Role("devil_advocate", "Devil's advocate",
         "Argue for the strongest alternative to the emerging consensus, even if you doubt it."),
    Role("synthesiser", "Synthesiser",
         "Combine the strongest points made so far into one position, naming what is dropped."),
    Role("verifier", "Verifier",
         "Check each claim made so far against the question and flag what does not hold."),
)}


def panel_seats(model: Any = "simulated") -> dict[str, Any]:
    """Keyword arguments for `run_panel`: the seed's three debaters, critic and judge on `model`."""
    return {"debaters": [p.seat(model) for p in PANEL_DEBATERS],
            "critic": CRITIC.seat(model), "judge": JUDGE.seat(model)}


__all__ = ["CAUTIOUS", "CREATIVE", "CRITIC", "JUDGE", "LITERAL", "PANEL_DEBATERS", "PERSONAS",
           "Persona", "ROLES", "Role", "panel_seats"]
