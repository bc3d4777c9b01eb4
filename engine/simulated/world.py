"""The simulated model's world: how it reads a prompt, and the positions its personas hold.

Everything is seeded and reproducible (`stable_int` hashes its parts). `read_prompt` reads the
reply format a prompt asks for (JSON keys, labelled sections, a `STANCE:` line) and the question;
`position` is a persona's answer to a question.
"""
from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from engine import questions as bank


def stable_int(*parts: Any) -> int:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big")


# --------------------------------------------------------------------------- reading a prompt
@dataclass
class Prompt:
    """What the simulated model understands of a conversation."""

    system: str
    user: str
    history: list[BaseMessage]
    question: str
    persona: str
    json_keys: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    wants_stance: bool = False

    @property
    def own_turns(self) -> int:
        return sum(1 for m in self.history if isinstance(m, AIMessage))

    def has(self, *words: str) -> bool:
        text = self.user.lower()
        return any(w.lower() in text for w in words)


_QUESTION_RE = re.compile(r"^\s*(?:question|topic|task)\s*:\s*(.+)$", re.I | re.M)
_SECTION_RE = re.compile(r"^\s*(?:\d+[.)]\s*)?\**([A-Z][A-Z ]{1,30}[A-Z])\**\s*:", re.M)
_KEY_RE = re.compile(r'"([A-Za-z_]+)"\s*:')
PERSONA_WORDS = ("cautious", "creative", "literal", "devil", "skeptic", "optimist", "synthes",
                 "verif", "critic", "propos", "judge", "reviewer", "editor", "writer",
                 "opponent", "proponent", "against", "favor")


def read_prompt(messages: list[BaseMessage]) -> Prompt:
    system = "\n".join(str(m.content) for m in messages if isinstance(m, SystemMessage))
    user = str(messages[-1].content) if messages else ""
    everything = "\n".join(str(m.content) for m in messages)
    found = _QUESTION_RE.search(user) or _QUESTION_RE.search(everything)
    if found:
        question = found.group(1).strip().strip('"')
    else:
        topic = re.search(r"about:\s*(.+?)(?:\.\s*2-3 sentences|$)", everything, re.M)
        question = topic.group(1).strip() if topic else user.strip().splitlines()[0][:300] \
            if user.strip() else ""
    lowered = system.lower()
    persona = next((w for w in PERSONA_WORDS if w in lowered), "") or (
        "persona-" + str(stable_int(system) % 97) if system else "")
    prompt = Prompt(system=system, user=user, history=list(messages[:-1]), question=question,
                    persona=persona)
    if "json" in user.lower():
        prompt.json_keys = list(dict.fromkeys(_KEY_RE.findall(user)))
        if not prompt.json_keys:  # a re-ask: the keys were given in the first request
            asked = "\n".join(str(m.content) for m in messages[:-1]
                              if not isinstance(m, (SystemMessage, AIMessage)))
            prompt.json_keys = list(dict.fromkeys(_KEY_RE.findall(asked)))
    else:
        labels = [s.strip() for s in _SECTION_RE.findall(user)]
        prompt.sections = [s for s in dict.fromkeys(labels)
                           if s not in {"QUESTION", "TOPIC", "TASK", "CONTEXT", "STANCE"}]
        prompt.wants_stance = bool(re.search(r"STANCE\s*:", user))
    return prompt


# --------------------------------------------------------------------------- choosing positions
def _options_for(question: str) -> tuple[bank.Question | None, list[str]]:
    known = bank.lookup(question)
    if known is not None:
        if known.expected is not None:
            return known, [known.expected, *known.lures]
        return known, list(known.options)
    arithmetic = re.search(r"(-?\d+(?:\.\d+)?)\s*([-+*/x×])\s*(-?\d+(?:\.\d+)?)", question)
    if arithmetic:
        a, op, b = float(arithmetic.group(1)), arithmetic.group(2), float(arithmetic.group(3))
        value = {"+": a + b, "-": a - b, "*": a * b, "x": a * b, "×": a * b,
                 "/": a / b if b else float("nan")}[op]
        answer = f"{value:g}"
        lure = f"{value + (1 if value == int(value) else 0.1):g}"
        return bank.Question(question, answer, (lure,)), [answer, lure]
    parts = re.split(r"\bor\b", re.sub(r"^(should|is|are|do|does|can|will)\b", "",
                                        question.strip().rstrip("?"), flags=re.I), maxsplit=1)
    if len(parts) == 2 and all(p.strip() for p in parts):
        first = re.sub(r"^.*\b(to|we|i|it|they)\b\s+", "", parts[0].strip(), flags=re.I)
        return None, [first.strip().lower()[:60], parts[1].strip().lower()[:60], "it depends"]
    return None, ["yes", "no", "it depends"]


_ACCURACY = {"literal": 0.85, "cautious": 0.7, "verif": 0.8, "creative": 0.45, "devil": 0.35}


def position(seed: int, question: str, persona: str) -> str:
    """The position a persona opens with on a question (reproducible for a seed)."""
    known, options = _options_for(question)
    rng = random.Random(stable_int(seed, "position", question, persona))
    if known is not None and known.definite:
        return options[0] if rng.random() < _ACCURACY.get(persona, 0.6) else rng.choice(
            options[1:] or options)
    preference = {"cautious": 0, "literal": 0, "skeptic": 1, "against": 1, "opponent": 1,
                  "creative": 1, "optimist": 0, "favor": 0, "proponent": 0}.get(persona)
    if preference is not None and rng.random() < 0.7:
        return options[min(preference, len(options) - 1)]
    return rng.choice(options)


def correct_answer(question: str) -> str | None:
    known, options = _options_for(question)
    return options[0] if known is not None and known.definite else None


_REASONS = {
    "cautious": "I checked the arithmetic and the edge cases before committing",
    "creative": "looking at it from an unusual angle shows where the upside is",
    "literal": "reading exactly what was asked and working it step by step",
    "devil": "someone has to argue the other side before we commit",
    "synthes": "pulling together the strongest points made so far",
    "verif": "checking each claim made so far against the question",
}


def reason(persona: str, stance: str, question: str) -> str:
    why = _REASONS.get(persona, "weighing the evidence in the question")
    return f"My answer is {stance}, {why}."
