"""The simulated model's roundtable turns (with a `STANCE:` line) and duel statements."""
from __future__ import annotations

import random
import re
from collections import Counter

from .simulated import Prompt, _options_for, correct_answer, position, stable_int

_STANCE_LINE = re.compile(r"STANCE\s*:\s*(.+)", re.I)


def _rng(seed: int, prompt: Prompt, *extra: object) -> random.Random:
    return random.Random(stable_int(seed, prompt.system, prompt.user, *extra))


def roundtable_reply(prompt: Prompt, seed: int) -> str:
    text = (prompt.system + "\n" + prompt.user).lower()
    earlier = [s.strip().rstrip(".").lower() for s in _STANCE_LINE.findall(prompt.user)
               if "<" not in s]
    own = position(seed, prompt.question, prompt.persona)
    _known, options = _options_for(prompt.question)
    common = Counter(earlier).most_common(1)[0][0] if earlier else None
    if "devil" in text and common is not None:
        others = [o for o in options if o != common] or ["the opposite"]
        stance = others[stable_int(seed, prompt.question) % len(others)]
    elif "synthes" in text and common is not None:
        stance = common
    elif "verif" in text and common is not None:
        truth = correct_answer(prompt.question)
        stance = truth if truth is not None else common
    else:
        stance = own
    body = (f"I support {stance}. The strongest case for {stance} is that it keeps the "
            f"decision reversible, limits risk and matches the evidence we have.")
    return f"{body}\nSTANCE: {stance}"


def duel_reply(prompt: Prompt, seed: int) -> str:
    rng = _rng(seed, prompt, prompt.own_turns)
    role = re.search(r"role:\s*(.+)", prompt.system, re.I)
    who = role.group(1).strip().rstrip(".") if role else "a debater"
    topic = prompt.question or "this"
    if prompt.own_turns >= 1 and rng.random() < 0.3:
        return "That is a fair point and I can accept it; we have found common ground. AGREED"
    if prompt.own_turns == 0 and "opening statement" in prompt.user.lower():
        return (f"Speaking as the {who}: on {topic}, the balance of evidence is on my side. "
                f"The costs are clear and the benefits are real.")
    return rng.choice([
        "That argument ignores the cost of getting it wrong. The evidence points the other way.",
        "You overstate the risk; the benefits compound over time and outweigh the costs.",
        "Your example is the exception, not the rule, and the rule favours my side.",
    ])
