"""The simulated model's JSON replies: proposals, critiques, rebuttals and syntheses.

A prompt's phase is read from the keys it asks for: `assessments` is the critique,
`changed_mind` a rebuttal, `stance` a proposal, `answer` with `key_points` or `rationale` the
judge's synthesis; any other JSON prompt gets a reply filled by key name. What it reads from
the prompts that ask for them:

- proposals as `[name] stance: X` lines (critique, rebuttal and synthesis prompts);
- `Your proposal's stance: X` and `Critic's verdict on your proposal: V` (rebuttal);
- `Leading stance: X (k of n votes)` (synthesis).

Behaviour, all seeded and reproducible: on a question with a definite answer some personas
open with a lure; the critic marks every stance other than the correct answer `flawed`, and a
flawed debater is usually persuaded (a sound one is now and then misled by a wrong majority).
On an open question the critic's verdicts are drawn, a flawed or unsupported debater may move,
either towards the others (converging) or to a position nobody held (spreading out). The
self-reported `changed_mind` usually, not always, matches the measured change, and a debater
that holds sometimes rewrites its stance's spelling (`$0.05` -> `0.05`), which is no change.
"""
from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any

from engine.analysis.stances import normalize_stance
from engine.simulated.statements import stance_judge
from engine.simulated.world import (
    Prompt,
    _options_for,
    correct_answer,
    position,
    reason,
    stable_int,
)

_PROPOSAL = re.compile(r"^\[(?P<name>[^\]\n]+)\] stance: (?P<stance>.*)$", re.M)
_OWN = re.compile(r"^Your proposal's stance:[ \t]*(.*)$", re.M)
_VERDICT = re.compile(r"^Critic's verdict on your proposal:[ \t]*(.*)$", re.M)
_LEADING = re.compile(r"^Leading stance:[ \t]*(.*) \((\d+) of (\d+) votes\)", re.M)

PERSUADED = {"flawed": 0.9, "unsupported": 0.6}   # wrong answer -> the correct one
MISLED = 0.1                                      # right answer -> a unanimous wrong others
OPEN_MOVE = {"flawed": 0.65, "unsupported": 0.4, "sound": 0.1}
# How often `changed_mind` matches the measured change: a holder told it is sound rarely
# claims a change; one told it is flawed often says it "changed" while keeping its stance.
HONEST_CLAIM = {"held-sound": 0.97, "held-criticised": 0.75, "changed": 0.9}
RESPELL = 0.25                                    # a holder rewrites its stance's spelling


_OPEN_REASONS = {
    "cautious": "it has the smallest downside and a proven track record",
    "creative": "the upside is large enough to justify the bolder bet",
    "literal": "it answers exactly what was asked with the fewest assumptions",
    "": "it fits the question as stated better than the alternatives",
}


def _rng(seed: int, *parts: Any) -> random.Random:
    return random.Random(stable_int(seed, "ballot", *parts))


def _same(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and normalize_stance(a) == normalize_stance(b)


def _spell(stance: str, rng: random.Random) -> str:
    """The same stance, sometimes spelled differently ("$0.05" / "0.05", "Hybrid" / "hybrid")."""
    if stance.startswith("$") and rng.random() < 0.5:
        return stance[1:]
    if stance[:1].isalpha() and rng.random() < 0.3:
        return stance[:1].upper() + stance[1:]
    return stance


def _proposals(text: str) -> list[tuple[str, str]]:
    return [(m.group("name").strip(), m.group("stance").strip())
            for m in _PROPOSAL.finditer(text)]


# --------------------------------------------------------------------------- the phases
def proposal_reply(prompt: Prompt, seed: int) -> dict[str, Any]:
    """Round one: the persona's opening position (the same one `position` gives elsewhere)."""
    stance = position(seed, prompt.question, prompt.persona)
    shown = _spell(stance, _rng(seed, "spell", prompt.question, prompt.persona))
    truth = correct_answer(prompt.question)
    if truth is not None and not _same(stance, truth):
        why = (f"Reading it quickly, {shown} is the natural answer and it looks right "
               "straight away.")
    elif truth is None:
        why = f"I back {shown}: {_OPEN_REASONS.get(prompt.persona, _OPEN_REASONS[''])}."
    else:
        why = reason(prompt.persona, shown, prompt.question)
    return {"stance": shown, "answer": f"My answer is {shown}.", "reasoning": why}


def critique_reply(prompt: Prompt, seed: int) -> dict[str, Any]:
    """One verdict per proposal: on a definite question, flawed exactly when it is wrong."""
    truth = correct_answer(prompt.question)
    found = _proposals(prompt.user)
    assessments = []
    for name, stance in found:
        # Keyed on the stance, not the debater: the critic judges positions, not who holds them.
        rng = _rng(seed, "critique", prompt.question, normalize_stance(stance))
        if truth is not None:
            if _same(stance, truth):
                verdict, flaw = "sound", "none material: the steps check out against the question"
            else:
                verdict = "flawed"
                flaw = (f"{stance} fails when you plug it back into the question; it is the "
                        "tempting shortcut, not the worked answer")
        else:
            verdict = rng.choices(("sound", "unsupported", "flawed"), (0.4, 0.35, 0.25))[0]
            flaw = {"sound": f"minor: the case for {stance} leaves its costs implicit",
                    "unsupported": f"no evidence that {stance} fits this particular case",
                    "flawed": f"{stance} ignores the main risk the question raises"}[verdict]
        assessments.append({"persona": name, "verdict": verdict, "flaw": flaw})
    stances = list(dict.fromkeys(normalize_stance(s) for _, s in found))
    if truth is not None:
        good = sum(a["verdict"] == "sound" for a in assessments)
        overall = (f"{good} of {len(found)} proposals hold up"
                   + ("; the others took the tempting shortcut." if good < len(found) else "."))
    elif len(stances) > 1:
        overall = (f"The proposals split across {', '.join(stances)}; none settles the "
                   "trade-off with evidence.")
    else:
        overall = "The proposals agree, but the shared case rests on untested assumptions."
    return {"assessments": assessments, "overall": overall}


def _move_open(own: str, others: list[str], question: str, rng: random.Random) -> str:
    """An open-question move: towards the others' commonest stance, or to one nobody held."""
    _known, options = _options_for(question)
    held = {normalize_stance(s) for s in [own, *others]}
    unheld = [o for o in options if normalize_stance(o) not in held]
    elsewhere = [s for s in others if not _same(s, own)]
    if elsewhere and (not unheld or rng.random() < 0.5):
        counts = Counter(normalize_stance(s) for s in elsewhere)
        best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        return next(s for s in elsewhere if normalize_stance(s) == best)
    return rng.choice(unheld) if unheld else own


def rebuttal_reply(prompt: Prompt, seed: int) -> dict[str, Any]:
    """Round two: persuaded, misled, moved, or held, and a claim that is usually honest."""
    question, persona = prompt.question, prompt.persona
    own_found = _OWN.search(prompt.user)
    own = own_found.group(1).strip() if own_found else ""
    had_proposal = bool(own) and not own.startswith("(")
    if not had_proposal:
        own = position(seed, question, persona)
    verdict_found = _VERDICT.search(prompt.user)
    verdict = (verdict_found.group(1).strip().split() or [""])[0].lower() \
        if verdict_found else ""
    others = [s for _, s in _proposals(prompt.user)]
    truth = correct_answer(question)
    rng = _rng(seed, "rebuttal", question, persona, normalize_stance(own), verdict)
    new, why = own, ""
    if truth is not None and not _same(own, truth):
        if rng.random() < PERSUADED.get(verdict, 0.1):
            new = _spell(truth, rng)
            why = (f"The critic is right: {own} does not hold when I plug it back in. Working "
                   f"it through properly gives {new}.")
    elif truth is not None:
        wrong = [s for s in others if not _same(s, truth)]
        unanimous = len(wrong) >= 2 and len(wrong) == len(others) and \
            len({normalize_stance(s) for s in wrong}) == 1
        if unanimous and rng.random() < MISLED:
            new = wrong[0]
            why = f"Everyone else reads it as {new}, and on reflection I think they are right."
    elif rng.random() < OPEN_MOVE.get(verdict, 0.2):
        new = _move_open(own, others, question, rng)
        if not _same(new, own):
            why = (f"After the critique the case for {new} is stronger than mine: {own} "
                   "does not answer the objection.")
    changed = not _same(new, own)
    if not changed:
        new = _spell(normalize_stance(own), rng) if rng.random() < RESPELL else own
        why = (f"I hold {new}: the critique does not change the answer." if verdict == "flawed"
               else f"I hold {new}; the critique found no material flaw in it.")
    kind = "changed" if changed else "held-sound" if verdict == "sound" else "held-criticised"
    claimed = changed if rng.random() < HONEST_CLAIM[kind] else not changed
    return {"stance": new, "answer": f"My answer is {new}.", "reasoning": why,
            "changed_mind": claimed if had_proposal else False}


def synthesis_reply(prompt: Prompt, seed: int) -> dict[str, Any]:
    """The judge: the leading stance in its usual spelling, a rationale and key points."""
    finals = _proposals(prompt.user)
    found = _LEADING.search(prompt.user)
    if found:
        leading, votes, total = found.group(1).strip(), int(found.group(2)), int(found.group(3))
    else:
        counts = Counter(normalize_stance(s) for _, s in finals)
        leading, votes = (sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
                          if counts else ("no answer", 0))
        total = len(finals)
    truth = correct_answer(prompt.question)
    if truth is not None and _same(leading, truth):
        answer = truth  # the bank's spelling of the expected answer ("$0.05")
    else:
        answer = next((s for _, s in finals if _same(s, leading)), leading)
    backers = [n for n, s in finals if _same(s, leading)]
    dissent = [f"{n} ({s})" for n, s in finals if not _same(s, leading)]
    points = [f"{votes} of {total} final stances back {answer}"
              + (f" ({', '.join(backers)})" if backers else "")]
    points.append(f"dissent: {', '.join(dissent)}" if dissent else "no dissent after the "
                  "critique")
    if "tied" in prompt.user:
        points.append("the vote is tied; the leading stance wins only by the tie-break")
    rationale = (f"The final positions favour {answer}; the critique was answered "
                 "and the remaining arguments do not overturn it.")
    return {"answer": answer, "rationale": rationale, "key_points": points}


def generic_reply(prompt: Prompt, seed: int) -> dict[str, Any]:
    """Any other JSON prompt: each requested key filled by its name."""
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


def json_reply(prompt: Prompt, seed: int) -> dict[str, Any]:
    """The JSON object the simulated model answers with, chosen by the keys asked for."""
    keys = {k.lower() for k in prompt.json_keys}
    if "agreement_level" in keys:
        return stance_judge(prompt, seed)
    if "assessments" in keys:
        return critique_reply(prompt, seed)
    if "changed_mind" in keys and "stance" in keys:
        return rebuttal_reply(prompt, seed)
    if "stance" in keys:
        return proposal_reply(prompt, seed)
    if "answer" in keys and keys & {"key_points", "rationale"} and _PROPOSAL.search(prompt.user):
        return synthesis_reply(prompt, seed)
    return generic_reply(prompt, seed)
