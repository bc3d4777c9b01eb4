"""The simulated model's turns that end in a `STANCE:` line, and a side's statements.

Stance turns: the role comes from the system prompt's first line (`You are NAME, ROLE.`) and the
earlier turns from the prompt's transcript. A proposer or critic states its own (seeded)
position; a devil's advocate takes a stance different from the earlier majority and words it in
its own, contrarian vocabulary; a synthesiser adopts the most common earlier stance in the
wording every holder of that stance uses, so the lexical floor sees the agreement; a verifier
checks the claims and backs the known answer (or the majority). In later rounds an agent in the
minority sometimes comes round to the majority. Side statements: each side argues its role
and sometimes concedes with `AGREED`. Everything is seeded and reproducible.
"""
from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any

from engine.simulated.world import Prompt, _options_for, correct_answer, position, stable_int

_STANCE_LINE = re.compile(r"^[ \t>#*_-]*STANCE[*_]*[ \t]*:[*_ \t]*(.*?)[*_ \t]*$", re.I | re.M)
_HEADER = re.compile(r"^\[round (\d+)\] (.+?) \((.*)\):[ \t]*$", re.M)
_FINAL_HEADER = re.compile(r"^(\S[^\n(]*?) \(([^\n]*)\):[ \t]*$", re.M)
_SELF = re.compile(r"You are ([^,\n]+),\s*([^\n]*)")
_ROLE_KEYS = (("devil", "devil"), ("synthes", "synthes"), ("verif", "verif"),
              ("critic", "critic"), ("propos", "propos"))

# Grounds a position rests on, in pairs with no word in common. Every agent holding one stance
# uses the same pair, and different options of one question get different pairs, so agreement
# and disagreement show up in the words, as they tend to with real models.
_GROUNDS = (
    ("it keeps the decision reversible and limits the downside",
     "the measured costs are lower and the benefits arrive sooner"),
    ("evidence from comparable cases points clearly this way",
     "it protects users first and leaves room to adjust later"),
    ("the team already knows how to deliver it with current tooling",
     "it answers exactly what was asked without extra assumptions"),
    ("waiting for better information costs little here",
     "a staged trial would settle the disagreement cheaply"),
)
# The devil's advocate's own vocabulary, shared with none of the grounds above.
_CONTRARY = (
    "The majority view leans on optimistic assumptions nobody has tested, and unwinding it "
    "later would be expensive.",
    "Everyone here is anchoring on the first proposal; the quiet failure modes get ignored "
    "until they bite.",
    "Consensus this quick usually means a shared blind spot, and the price of that blind spot "
    "falls on whoever inherits the mess.",
)


def _clean(stance: str) -> str:
    return stance.strip().rstrip(".").strip()


def _stance_of(text: str) -> str | None:
    found = [_clean(s) for s in _STANCE_LINE.findall(text) if s.strip() and "<" not in s]
    return found[-1] if found else None


def _earlier(user: str) -> list[tuple[str, str]]:
    """(agent, stance) for each earlier turn in a prompt's transcript, in order."""
    headers = list(_HEADER.finditer(user))
    turns = []
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(user)
        stance = _stance_of(user[header.end():end])
        if stance:
            turns.append((header.group(2).strip(), stance))
    if not headers:  # an overridden template: read the STANCE lines alone
        turns = [(f"turn{i}", _clean(s)) for i, s in enumerate(_STANCE_LINE.findall(user))
                 if s.strip() and "<" not in s]
    return turns


def _majority(stances: list[str]) -> str | None:
    """The most common stance (case-insensitive); on a tie, the one stated first."""
    if not stances:
        return None
    spelled: dict[str, str] = {}
    for s in stances:
        spelled.setdefault(s.lower(), s)
    return spelled[Counter(s.lower() for s in stances).most_common(1)[0][0]]


def _grounds(seed: int, question: str, stance: str) -> str:
    _known, options = _options_for(question)
    lowered = [o.lower() for o in options]
    index = (lowered.index(stance.lower()) if stance.lower() in lowered
             else stable_int(seed, "grounds", stance.lower()))
    first, second = _GROUNDS[(index + stable_int(seed, "grounds", question)) % len(_GROUNDS)]
    return f"{first}, and {second}"


def seat_role(system: str) -> tuple[str, str]:
    """(name, role key) read from `You are NAME, ROLE.`; role key is one of devil, synthes,
    verif, critic, propos or participant."""
    found = _SELF.search(system)
    if not found:
        return "", "participant"
    described = found.group(2).lower()
    role = next((key for word, key in _ROLE_KEYS if word in described), "participant")
    return found.group(1).strip(), role


def stance_turn(prompt: Prompt, seed: int) -> str:
    """A turn in the agent's role, ending with a `STANCE:` line."""
    name, role = seat_role(prompt.system)
    earlier = _earlier(prompt.user)
    latest: dict[str, str] = {}
    for agent, stance in earlier:
        latest[agent] = stance
    mine = latest.pop(name, None)
    common = _majority(list(latest.values()))
    rng = random.Random(stable_int(seed, "stance-turn", name, prompt.question, len(earlier)))
    own = position(stable_int(seed, name), prompt.question, role)
    q = prompt.question or "the question"

    def grounds(stance: str) -> str:
        return _grounds(seed, prompt.question, stance)

    if role == "devil":
        _known, options = _options_for(prompt.question)
        # Dissent from the majority, and from every earlier stance when there is one left.
        avoid = (common or own).lower()
        said = {s.lower() for s in latest.values()} | {avoid}
        others = ([o for o in options if o.lower() not in said]
                  or [o for o in options if o.lower() != avoid] or [f"the opposite of {avoid}"])
        stance = others[stable_int(seed, "devil", name, q) % len(others)]
        body = (f"Let me argue the other side: {stance}. "
                f"{_CONTRARY[stable_int(seed, 'contrary', name, len(earlier)) % len(_CONTRARY)]}")
        return f"{body}\nSTANCE: {stance}"
    if role == "synthes" and common is not None:
        stance = common
        body = f"Pulling the strongest points together: {stance}, because {grounds(stance)}."
    elif role == "verif" and (common is not None or correct_answer(prompt.question)):
        stance = correct_answer(prompt.question) or common or own
        body = (f"Checking each claim against the question: {stance} holds up, because "
                f"{grounds(stance)}.")
    elif mine is not None:  # a later round: keep one's stance, or come round to the majority
        if common is not None and common.lower() != mine.lower() and rng.random() < 0.4:
            stance = common
            body = f"I have changed my mind: {stance}, because {grounds(stance)}."
        else:
            stance = mine
            body = f"I stand by {stance}, because {grounds(stance)}."
    elif role == "critic":
        stance = own
        if common is not None and common.lower() == own.lower():
            body = (f"I tested the proposals so far and still back {stance}, because "
                    f"{grounds(stance)}; the weak spot is how we would measure it.")
        else:
            body = (f"I tested the proposals so far and they miss something: {stance}, because "
                    f"{grounds(stance)}.")
    else:
        stance = own
        body = f"My proposal: {stance}, because {grounds(stance)}."
    return f"{body}\nSTANCE: {stance}"


def stance_judge(prompt: Prompt, seed: int) -> dict[str, Any]:
    """A judge's JSON fields, read from the final turns' STANCE lines.

    For `ballots.json_reply` to use when a prompt asks for `agreement_level`: the level is
    strong when every final stance is the same, moderate when at least 2/3 are, weak when two
    are, none otherwise (by stance, not by words, so it can differ from the lexical floor).
    """
    section = prompt.user.split("final turn:", 1)[-1]
    headers = list(_FINAL_HEADER.finditer(section))
    stances = []
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(section)
        stance = _stance_of(section[header.end():end])
        if stance:
            stances.append(stance)
    if not headers:
        stances = [_clean(s) for s in _STANCE_LINE.findall(section) if "<" not in s]
    common = _majority(stances)
    count = sum(1 for s in stances if common and s.lower() == common.lower())
    total = max(len(headers), len(stances))
    if total >= 2 and count == total:
        level = "strong"
    elif total and count >= 2 and 3 * count >= 2 * total:
        level = "moderate"
    elif count >= 2:
        level = "weak"
    else:
        level = "none"
    dissent = list(dict.fromkeys(s for s in stances if common and s.lower() != common.lower()))
    return {"agreement_level": level,
            "dominant_position": common or "",
            "dissenting_views": dissent,
            "rationale": (f"{count} of {total} final turns take the position "
                          f"{common!r}." if common else "No final turn states a position.")}


# --------------------------------------------------------------------------- side statements
_TOPIC = re.compile(r'debating the topic:\s*"(.+?)"\.?\s*$', re.I | re.M)
_ROLE = re.compile(r"your role:\s*(.+?)\.?\s*$", re.I | re.M)
_AGAINST_WORDS = ("against", "skeptic", "sceptic", "oppos", "critic", "con ")


def side_statement(prompt: Prompt, seed: int) -> str:
    """A side's statement in its role; from its second statement on it may concede."""
    topic_match = _TOPIC.search(prompt.system)
    topic = topic_match.group(1) if topic_match else (prompt.question or "this")
    role_match = _ROLE.search(prompt.system)
    role = role_match.group(1).strip() if role_match else "a debater"
    against = any(word in f"{role.lower()} " for word in _AGAINST_WORDS)
    turns = prompt.own_turns
    rng = random.Random(stable_int(seed, "side-statement", prompt.system, turns))
    replying = "opponent just said" in prompt.user.lower()
    subject = f'"{topic.strip().rstrip(".?!")}"'
    if replying and turns >= 1 and rng.random() < 0.06 * turns:
        return (f"You make a fair point, and I can accept it: on {subject} we have found "
                "common ground. AGREED")
    if not replying:
        side = "against it" if against else "in favour of it"
        grounds = ("the risks are real and the gains uncertain" if against else
                   "the benefits are concrete and the risks manageable")
        return (f"Speaking as the {role}, I am {side}. On {subject} the balance of evidence "
                f"is on my side: {grounds}.")
    lines = ([
        "That argument ignores the cost of getting it wrong; the evidence points the other way.",
        "Your example is the exception, not the rule, and the rule favours caution.",
        "Promised benefits are not delivered benefits; show me where this has worked at scale.",
    ] if against else [
        "You overstate the risk; the benefits compound over time and outweigh the costs.",
        "Every change carries risk, but standing still is the costliest option here.",
        "The cases that went wrong skipped the safeguards we would keep, so they prove my point.",
    ])
    if turns >= 1 and rng.random() < 0.25:
        return f"I grant part of that, but not the conclusion. {rng.choice(lines)}"
    return rng.choice(lines)
