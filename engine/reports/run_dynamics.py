"""A run's dynamics strip (DESIGN 2.12) for its detail: entropy and agreement per round, the
flips with the fixes and breaks among them, who moved whom, and the silent-agreement and
collapsed-wrong flags. Plain values from `engine.analysis.dynamics` over the rounds the run's
protocol gives (`engine.protocols.stored_rounds`); the page draws them as text and a chart."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from engine.analysis import Dynamics, dynamics, influence
from engine.protocols import stored_rounds


@dataclass(frozen=True)
class DynamicsStrip:
    """What the strip shows: `per_round` (round, answered, entropy in bits, agreement),
    `flips` (agent, round, before, after, and `effect` fix/break/"" when scored), `influence`
    (mover, moved, times) and `flags` (one short sentence each)."""

    per_round: pd.DataFrame
    flips: pd.DataFrame
    influence: pd.DataFrame
    flags: list[str]


def flags_text(measures: Dynamics, rounds: int) -> list[str]:
    """The strip's sentences: silent agreement, a collapse onto a wrong answer, the inflation
    of agreement and the counts of flips, fixes and breaks."""
    out = []
    if measures.silent_agreement:
        out.append("Silent agreement: every agent gave the same answer in round 1.")
    if measures.collapsed_wrong:
        out.append("Collapsed wrong: every agent gave the same wrong answer in the last round.")
    if rounds > 1:
        out.append(f"Agreement inflation (last round minus first): {measures.inflation:+.2f}.")
    counts = f"{len(measures.flips)} flip(s)"
    if measures.fixes is not None and measures.breaks is not None:
        counts += f": {len(measures.fixes)} fix(es), {len(measures.breaks)} break(s)"
    else:
        counts += " (no expected answer: fixes and breaks not scored)"
    out.append(counts + ".")
    return out


def dynamics_strip(run: Mapping[str, Any]) -> DynamicsStrip | None:
    """The strip for a stored run (a `Store.get` dict); None when its protocol has no rounds
    of answers or its result cannot be read. Scored against the run's expected answer."""
    rounds = stored_rounds(run)
    if not rounds:
        return None
    expected = run.get("expected")
    expected = str(expected) if expected is not None and str(expected).strip() else None
    measures = dynamics(rounds, expected)
    per_round = pd.DataFrame({"round": range(1, len(rounds) + 1),
                              "answered": measures.answered,
                              "entropy (bits)": measures.entropy,
                              "agreement": measures.agreement})
    effects = {**dict.fromkeys(measures.breaks or (), "break"),
               **dict.fromkeys(measures.fixes or (), "fix")}
    flips = pd.DataFrame(
        [{"agent": f.agent, "round": f.round, "before": f.before, "after": f.after,
          **({"effect": effects.get(f, "")} if expected else {})} for f in measures.flips],
        columns=["agent", "round", "before", "after", *(["effect"] if expected else [])])
    moved = pd.DataFrame([{"mover": a, "moved": b, "times": n}
                          for (a, b), n in sorted(influence(rounds).items())],
                         columns=["mover", "moved", "times"])
    return DynamicsStrip(per_round=per_round, flips=flips, influence=moved,
                         flags=flags_text(measures, len(rounds)))
