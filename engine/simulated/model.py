"""The simulated model: offline, deterministic, and it answers in the format a prompt asks for.

It reads the prompt's reply format (JSON keys, labelled sections, a `STANCE:` line, `APPROVED:`)
and the question, picks a position that depends on the persona (seeded, reproducible), and
answers in that format. Replies carry `response_metadata["simulated"] = True`, so every run made
with it is labelled simulated. Options (in the spec `simulated?latency=0.05&fail=0.1` or as
keyword arguments): `seed`, `latency` (seconds per call), and fault rates `fail` (an exception),
`ratelimit` (a transient error that a retry may clear), `timeout` (the call hangs for `hang`
seconds), `empty` (an empty reply), `malformed` (a reply that ignores the format).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from engine import questions as bank

FAULTS = ("fail", "ratelimit", "timeout", "empty", "malformed")


class SimulatedFault(RuntimeError):
    """An injected, non-transient model failure."""


class SimulatedRateLimitError(RuntimeError):
    """An injected transient failure (retried by guarded calls)."""

    status_code = 429


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


# --------------------------------------------------------------------------- composing replies
def fill_json(prompt: Prompt, seed: int) -> dict[str, Any]:
    """Answer a JSON-format prompt by key name (panel proposals, critiques, judges ...)."""
    from engine.simulated.panel import json_reply
    return json_reply(prompt, seed)


def compose(prompt: Prompt, seed: int) -> str:
    """The reply text for a prompt (no faults)."""
    from engine.simulated import text as sim_text
    if prompt.json_keys:
        return json.dumps(fill_json(prompt, seed), ensure_ascii=False)
    return sim_text.text_reply(prompt, seed)


# --------------------------------------------------------------------------- the chat model
class SimulatedChatModel(BaseChatModel):
    """Offline, seeded chat model that answers in the requested format; labelled simulated."""

    seed: int = 0
    latency: float = 0.0
    fail: float = 0.0
    ratelimit: float = 0.0
    timeout: float = 0.0
    empty: float = 0.0
    malformed: float = 0.0
    hang: float = 30.0
    parley_spec: str = "simulated"
    # Fault draws count attempts per prompt (a retry may succeed), shared by concurrent calls.
    _attempts: dict[int, int] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def from_options(cls, options: dict[str, Any], spec: str | None = None
                     ) -> SimulatedChatModel:
        from engine.models import ConfigError
        known = {"seed", "latency", "hang", *FAULTS}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(f"simulated model has no option {unknown[0]!r}; use "
                              f"{', '.join(sorted(known))}", "no_model")
        values: dict[str, Any] = {}
        for key, raw in options.items():
            try:
                values[key] = int(raw) if key == "seed" else float(raw)
            except (TypeError, ValueError):
                raise ConfigError(f"simulated option {key} must be a number, got {raw!r}",
                                  "no_model") from None
            if key in FAULTS and not 0 <= values[key] <= 1:
                raise ConfigError(f"simulated option {key} is a rate in 0..1, got {raw}",
                                  "no_model")
            if key in ("latency", "hang") and not 0 <= values[key] <= 600:
                raise ConfigError(f"simulated option {key} is seconds in 0..600, got {raw}",
                                  "no_model")
        label = spec or "simulated" + ("?" + "&".join(f"{k}={v}" for k, v in
                                                      sorted(values.items())) if values else "")
        return cls(parley_spec=label, **values)

    @property
    def _llm_type(self) -> str:
        return "parley-simulated"

    def _fault(self, messages: list[BaseMessage]) -> str | None:
        rates = [(name, getattr(self, name)) for name in FAULTS if getattr(self, name) > 0]

        if not rates:
            return None
        key = stable_int(*(m.content for m in messages))
        with self._lock:
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
        draw = random.Random(stable_int(self.seed, "fault", key, attempt)).random()
        for name, rate in rates:
            if draw < rate:
                return name
            draw -= rate
        return None

    def _reply(self, messages: list[BaseMessage], fault: str | None) -> AIMessage:
        if fault == "fail":
            raise SimulatedFault("simulated model failure (injected fault)")
        if fault == "ratelimit":
            raise SimulatedRateLimitError("simulated rate limit (injected fault)")
        prompt = read_prompt(messages)
        if fault == "empty":
            text = ""
        elif fault == "malformed":
            text = "Sorry, I lost the thread there. (simulated malformed reply)"
        else:
            text = compose(prompt, self.seed)
        tokens_in = sum(len(str(m.content).split()) for m in messages) * 4 // 3 + 3
        tokens_out = len(text.split()) * 4 // 3
        return AIMessage(content=text, response_metadata={"simulated": True,
                                                          "model_name": self.parley_spec},
                         usage_metadata={"input_tokens": tokens_in, "output_tokens": tokens_out,
                                         "total_tokens": tokens_in + tokens_out})

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kw: Any) -> ChatResult:
        fault = self._fault(messages)
        wait = self.hang if fault == "timeout" else self.latency
        if wait:
            time.sleep(wait)
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages, fault))])

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None,
                         **kw: Any) -> ChatResult:
        fault = self._fault(messages)
        wait = self.hang if fault == "timeout" else self.latency
        if wait:
            await asyncio.sleep(wait)
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages, fault))])
