"""The simulated model's prose replies: argument sides and judge, drafts and reviews,
labelled sections, turns with a `STANCE:` line, and a side's statements (which may
concede)."""
from __future__ import annotations

import random
import re

from engine.simulated.statements import side_statement, stance_turn
from engine.simulated.world import Prompt, stable_int


def _rng(seed: int, prompt: Prompt, *extra: object) -> random.Random:
    return random.Random(stable_int(seed, prompt.system, prompt.user, *extra))


def section_value(label: str, prompt: Prompt, seed: int, rng: random.Random) -> str:
    """A plausible value for one labelled section, chosen by the label's meaning."""
    name = label.lower()
    q = prompt.question or "the question"
    if name == "approved":
        revised = len(re.findall(r"\(revision \d+\)", prompt.user))
        return "yes" if rng.random() < (0.75 if revised else 0.3) else "no"
    if name == "verdict":
        side = rng.choice(["proponent", "opponent"])
        return (f"The {side} made the stronger case on: {q}")
    if name == "confidence":
        return f"{rng.choice([0.55, 0.62, 0.7, 0.74, 0.8, 0.85, 0.9]):.2f}"
    if name in ("pro summary", "con summary"):
        side = "in favour" if name.startswith("pro") else "against"
        return f"The argument {side} rests on costs, risks and the evidence offered."
    if name == "feedback":
        return rng.choice(["Tighten the structure and state the main change first.",
                           "Add concrete examples and cut the repetition.",
                           "Looks complete; minor wording only."])
    if name == "strengths":
        return "Clear, well organised, covers the essentials."
    if name in ("reasoning", "rationale"):
        return f"Weighing both sides of {q}, the stronger arguments address cost and risk."
    return f"{label.title()} for {q}."


def sections_reply(prompt: Prompt, seed: int) -> str:
    rng = _rng(seed, prompt)
    lines = [f"{i}. {label}: {section_value(label, prompt, seed, rng)}"
             if label in {"VERDICT", "REASONING", "PRO SUMMARY", "CON SUMMARY", "CONFIDENCE"}
             else f"{label}: {section_value(label, prompt, seed, rng)}"
             for i, label in enumerate(prompt.sections, 1)]
    return "\n".join(lines)


def text_reply(prompt: Prompt, seed: int) -> str:
    """Prose for a prompt that asks for no JSON (sections, a stance line, a side's statement or
    free text)."""
    if prompt.wants_stance:
        return stance_turn(prompt, seed)
    if prompt.sections:
        return sections_reply(prompt, seed)
    lowered = prompt.user.lower()
    if "your opponent just said" in lowered or "opening statement" in lowered:
        return side_statement(prompt, seed)
    rng = _rng(seed, prompt)
    q = prompt.question or "the question"
    if "revise" in lowered or "previous draft" in lowered:
        count = len(re.findall(r"\(revision \d+\)", prompt.user)) + 1
        return (f"(revision {count}) A revised draft that addresses the feedback: clearer "
                f"structure, the main change first, and concrete examples.")
    if "arguing against" in lowered or ("against" in lowered and "arguing in favor" not in lowered):
        return rng.choice([f"Against: {q} The costs and risks outweigh the benefits.",
                           f"Against: {q} The evidence offered does not hold up in practice."])
    if "favor" in lowered or "favour" in lowered:
        return rng.choice([f"In favour: {q} The benefits are concrete and the risks manageable.",
                           f"In favour: {q} Experience elsewhere shows this pays off."])
    return f"A first draft for: {q} It covers the essentials in a clear order."
