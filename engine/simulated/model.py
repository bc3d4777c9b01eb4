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
import json
import random
import threading
import time
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from engine.models import ConfigError
from engine.simulated.ballots import json_reply
from engine.simulated.prose import text_reply
from engine.simulated.world import Prompt, read_prompt, stable_int

FAULTS = ("fail", "ratelimit", "timeout", "empty", "malformed")


class SimulatedFault(RuntimeError):
    """An injected, non-transient model failure."""


class SimulatedRateLimitError(RuntimeError):
    """An injected transient failure (retried by guarded calls)."""

    status_code = 429


# --------------------------------------------------------------------------- composing replies
def fill_json(prompt: Prompt, seed: int) -> dict[str, Any]:
    """Answer a JSON-format prompt by key name (proposals, critiques, judges ...)."""
    return json_reply(prompt, seed)


def compose(prompt: Prompt, seed: int) -> str:
    """The reply text for a prompt (no faults)."""
    if prompt.json_keys:
        return json.dumps(fill_json(prompt, seed), ensure_ascii=False)
    return text_reply(prompt, seed)


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
