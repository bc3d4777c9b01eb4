"""Scripted council members: each answers with a token of its own and ranks the others'
answers by the tokens it prefers (`member`), and the ranking prompts a model received
(`prompts_of`)."""
from __future__ import annotations

import re

Q = "What is 2+2?"
SHOWN = re.compile(r"^(Response [A-Z]):\n(.*?)(?=\n\nResponse [A-Z]:\n|\n\nEvaluate |\Z)",
                   re.M | re.S)


def shown_answers(prompt: str) -> dict[str, str]:
    """{label: answer text} as a ranking prompt shows them."""
    return {label: text for label, text in SHOWN.findall(prompt)}


def member(recording_model, token: str, answer: str = "4", prefs: list[str] | None = None,
           ranking: str | None = None, chair: str | None = None):
    """A scripted member: its stage-1 answer holds `token`; asked to rank, it lists the labels
    whose answers hold the tokens in `prefs`, in that order (or replies `ranking` as is)."""
    def fn(convo):
        prompt = convo[-1][1]
        if "FINAL RANKING" in prompt:
            if ranking is not None:
                return ranking
            by_token = {next((t for t in (prefs or []) if t in text), None): label
                        for label, text in shown_answers(prompt).items()}
            listed = [by_token[t] for t in (prefs or []) if t in by_token]
            return "Thoughts.\n\nFINAL RANKING:\n" + "\n".join(
                f"{k}. {label}" for k, label in enumerate(listed, 1))
        if "chairman" in prompt:
            return chair if chair is not None else f"Considered.\nANSWER: {answer}"
        return f"Reasoning {token} in full.\nANSWER: {answer}"
    return recording_model(fn=fn)


def prompts_of(model, phase_word: str = "FINAL RANKING") -> list[str]:
    return ["\n".join(c for _, c in convo) for convo in model.received
            if phase_word in convo[-1][1]]
