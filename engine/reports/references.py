"""Published accuracies to hold an experiment's numbers against, with their citations.

Keyed by the question set an experiment ran (its spec's `source`, e.g. `bundled:arithmetic`),
so the accuracy-by-round chart can show, beside a user's own lines, what the paper measured
on the same problems. Each point sits at the round it belongs to: a single agent and the
majority vote of independent answers at round 1, Du et al.'s debate (3 agents, 2 rounds) at
round 2.
"""
from __future__ import annotations

from dataclasses import dataclass

DU_2023 = ('Du et al. 2023, "Improving Factuality and Reasoning in Language Models through '
           'Multiagent Debate" (arXiv 2305.14325), Table 1')
DU_MODEL = "gpt-3.5-turbo-0301"  # the ChatGPT snapshot behind every agent of that table


@dataclass(frozen=True)
class Reference:
    """One published accuracy: what was run (`setting`), at which round it sits on the
    chart, the accuracy as a share (0..1), a short `tag` for the chart, where it was
    published and with which model."""

    setting: str
    round: int
    accuracy: float
    tag: str  # a few words for the marker's text
    citation: str = DU_2023
    model: str = DU_MODEL

    @property
    def short(self) -> str:
        """The marker's own text on a chart: "majority of 3: 69.0%"."""
        return f"{self.tag}: {self.accuracy * 100:.1f}%"

    @property
    def label(self) -> str:
        """A short name for a legend: "Du et al. 2023: majority vote (3 agents) 69.0%"."""
        return f"Du et al. 2023: {self.setting} {self.accuracy * 100:.1f}%"


def _du(single: float, majority: float, together: float) -> tuple[Reference, ...]:
    """Table 1's single agent, majority of 3 and 3 agents x 2 rounds, in percent."""
    return (Reference("single agent", 1, single / 100, "single agent"),
            Reference("majority vote (3 agents)", 1, majority / 100, "majority of 3"),
            Reference("multiagent debate (3 agents, 2 rounds)", 2, together / 100,
                      "3 agents x 2 rounds"))


ARITHMETIC = _du(67.0, 69.0, 81.8)
GSM8K = _du(77.0, 81.0, 85.0)
REFERENCES: dict[str, tuple[Reference, ...]] = {
    "bundled:arithmetic": ARITHMETIC, "bundled:gsm8k": GSM8K, "bundled:gsm8k-100": GSM8K}


def references(source: str | None) -> list[Reference]:
    """The published points for an experiment's question set (its spec's `source`); none for
    a set no paper measured (an uploaded file, an inline list, the demo set)."""
    return list(REFERENCES.get(str(source or "").strip().lower(), ()))
