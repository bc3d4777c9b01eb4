"""Published accuracies to hold an experiment's numbers against, with their citations.

Keyed by the question set an experiment ran (its spec's `source`, e.g. `bundled:arithmetic`),
so the accuracy-by-round chart can show, beside a user's own lines, what the paper measured
on the same problems. Each point sits at the round it belongs to: a single agent and the
majority vote of independent answers at round 1, Du et al.'s debate (3 agents, 2 rounds) at
round 2.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


def _du(alone: float, reflected: float, majority: float, together: float
        ) -> tuple[Reference, ...]:
    """Table 1's single agent, single agent with reflection (its second answer, so at round
    2), majority of 3 and 3 agents x 2 rounds, in percent."""
    return (Reference("single agent", 1, alone / 100, "single agent"),
            Reference("single agent with reflection", 2, reflected / 100, "reflection"),
            Reference("majority vote (3 agents)", 1, majority / 100, "majority of 3"),
            Reference("multiagent debate (3 agents, 2 rounds)", 2, together / 100,
                      "3 agents x 2 rounds"))


ARITHMETIC = _du(67.0, 72.1, 69.0, 81.8)
GSM8K = _du(77.0, 75.0, 81.0, 85.0)
REFERENCES: dict[str, tuple[Reference, ...]] = {
    "bundled:arithmetic": ARITHMETIC, "bundled:gsm8k": GSM8K, "bundled:gsm8k-100": GSM8K}


def references(source: str | None) -> list[Reference]:
    """The published points for an experiment's question set (its spec's `source`); none for
    a set no paper measured (an uploaded file, an inline list, the demo set)."""
    return list(REFERENCES.get(str(source or "").strip().lower(), ()))


# andybhall/llm-council-governance: four ways a council of models reaches an answer, on GSM8K
# with 7-9B open models over 960 trials; the preset presets/llm-council-governance.yaml runs
# each as a configuration of its own (the `configuration` a figure belongs to).
GOVERNANCE_SOURCE = ("andybhall/llm-council-governance (github.com/andybhall/"
                     "llm-council-governance), results table")
GOVERNANCE_MODEL = "7-9B open models, 960 trials"


@dataclass(frozen=True)
class Published:
    """One published accuracy for one configuration of a preset: theirs, never Parley's."""

    configuration: str
    structure: str
    accuracy: float
    citation: str = GOVERNANCE_SOURCE
    model: str = GOVERNANCE_MODEL

    @property
    def label(self) -> str:
        return f"published (theirs): {self.structure} {self.accuracy * 100:.1f}%"

    def fits(self, label: str) -> bool:
        """True when an experiment's configuration `label` is this figure's (a label with a
        suffix, " (simulated)", still is)."""
        return label == self.configuration or label.startswith(self.configuration + " (")


GOVERNANCE = (Published("majority-vote", "majority vote", 0.817),
              Published("deliberate-vote", "deliberate -> vote", 0.795),
              Published("deliberate-synthesize", "deliberate -> synthesize", 0.783),
              Published("rank-synthesize", "rank -> synthesize", 0.746))
# The same study's README at commit 9791db8 (2026-01-04) leads with MMLU-Pro Math: 150
# questions, 1,004 valid trials, a council of four 7-9B models; the GSM8K table above is now
# its pilot. Structures Parley has no protocol for (agenda setter + veto 74.1%, weighted
# majority vote 69.0%) are left out.
GOVERNANCE_MMLU_PRO_SOURCE = ("andybhall/llm-council-governance (github.com/andybhall/"
                              "llm-council-governance), README at commit 9791db8, MMLU-Pro "
                              "Math table")
GOVERNANCE_MMLU_PRO_MODEL = ("four 7-9B open models (Llama 3.1 8B, Mistral 7B, Gemma 2 9B, "
                             "Qwen 2.5 7B), 150 questions, 1,004 valid trials")


def _mmlu_pro(configuration: str, structure: str, accuracy: float) -> Published:
    return Published(configuration, structure, accuracy, GOVERNANCE_MMLU_PRO_SOURCE,
                     GOVERNANCE_MMLU_PRO_MODEL)


GOVERNANCE_MMLU_PRO = (
    _mmlu_pro("deliberate-vote", "deliberate -> vote", 0.809),
    _mmlu_pro("majority-vote", "majority vote", 0.768),
    _mmlu_pro("deliberate-synthesize", "deliberate -> synthesize", 0.754),
    _mmlu_pro("best-single", "best single model (Qwen 2.5 7B)", 0.717),
    _mmlu_pro("rank-synthesize", "rank -> synthesize", 0.707),
    _mmlu_pro("self-consistency", "self-consistency vote (9 samples)", 0.689))
PUBLISHED: dict[str, tuple[Published, ...]] = {
    "llm-council-governance": GOVERNANCE,  # the GSM8K pilot: experiments stored with it keep it
    "llm-council-governance-mmlu-pro": GOVERNANCE_MMLU_PRO}


def published(spec: Mapping[str, Any]) -> list[Published]:
    """The published accuracies an experiment's spec names by its `reference` key, for the
    configurations it has (a label with a suffix, " (simulated)", still matches)."""
    found = PUBLISHED.get(str(spec.get("reference") or "").strip().lower(), ())
    labels = [str(c.get("label", "")) for c in spec.get("configs") or ()]
    return [p for p in found if any(p.fits(label) for label in labels)]


def published_note(published: Sequence[Published]) -> str:
    """What the published figures beside an experiment's accuracy are, in one sentence that
    says they are theirs, never Parley's runs, and where they come from ("" when none)."""
    if not published:
        return ""
    return (f"published figures, theirs, not Parley's runs ({published[0].citation}; "
            f"{published[0].model}): "
            + "; ".join(p.label.removeprefix("published (theirs): ") for p in published) + ".")


# "The Cost of Consensus" (arXiv 2605.00914, CAIS 2026): debate on GSM-Hard and MMLU-Hard held
# against a noise control that feeds agents rationales written for unrelated problems (what
# Parley's placebo arm is). Its headline figures are not accuracies of a configuration, so they
# are shown as findings beside the placebo comparison, never drawn as Parley's points.
COST_OF_CONSENSUS = ('"The Cost of Consensus" (arXiv 2605.00914, CAIS 2026), debate on '
                     "GSM-Hard and MMLU-Hard against a noise control")


@dataclass(frozen=True)
class Finding:
    """One published figure that is not a configuration's accuracy: what it measures, the
    figure as the paper states it, where it was published, and where Parley measures the
    same thing (`parley`)."""

    measure: str
    value: str
    parley: str
    citation: str = COST_OF_CONSENSUS

    @property
    def label(self) -> str:
        return f"published (theirs): {self.measure} {self.value}"


FINDINGS: dict[str, tuple[Finding, ...]] = {"cost-of-consensus": (
    Finding("modal adoption (agents taking the majority's answer)", "up to 85.5%",
            "conformity between rounds: adopted the previous round's majority"),
    Finding("correct answers lost by deliberating", "up to 70%",
            "conformity between rounds: final plurality discarded a correct answer"),
    Finding("tokens of debate against the noise control's answer", "2.1-3.4x, for equal or "
            "lower accuracy", "the placebo comparison's tokens per run"))}


def findings(spec: Mapping[str, Any]) -> list[Finding]:
    """The published findings an experiment's spec names by its `reference` key."""
    return list(FINDINGS.get(str(spec.get("reference") or "").strip().lower(), ()))


def findings_note(found: Sequence[Finding]) -> str:
    """The findings in one sentence that says they are theirs and where Parley measures the
    same thing ("" when none)."""
    if not found:
        return ""
    return (f"Published figures, theirs, not Parley's runs ({found[0].citation}): "
            + "; ".join(f"{f.measure} {f.value} (here: {f.parley})" for f in found) + ".")
