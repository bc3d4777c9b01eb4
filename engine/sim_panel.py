"""The simulated model's JSON replies, filled by key name."""
from __future__ import annotations

import random
from typing import Any

from .simulated import Prompt, position, reason, stable_int


def json_reply(prompt: Prompt, seed: int) -> dict[str, Any]:
    rng = random.Random(stable_int(seed, prompt.system, prompt.user))
    stance = position(seed, prompt.question, prompt.persona)
    out: dict[str, Any] = {}
    for key in prompt.json_keys:
        name = key.lower()
        if name in ("stance", "answer", "position"):
            out[key] = stance
        elif name in ("reasoning", "rationale"):
            out[key] = reason(prompt.persona, stance, prompt.question)
        elif name == "changed_mind":
            out[key] = False
        elif name in ("key_points", "dissenting_views"):
            out[key] = []
        else:
            out[key] = rng.choice(["sound", "unclear"]) if name == "verdict" else ""
    return out
