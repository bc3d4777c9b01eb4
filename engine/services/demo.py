"""Demo runs: the bundled demo questions through every registered protocol, and two simulated
models answering the same questions, offline.

They run on the simulated model and are all tagged `demo`, so they can be removed together.
Every protocol's runs are labelled `demo`, so Runs and Insights have something to show within
seconds. Two more simulated models, a stronger and a weaker one (`STRONG`, `WEAK`: the same
world but for their skill), then meet on the same questions: head to head in every protocol
with pairwise outcomes (a debate, once on each side; a council of two of each), which gives
the Leaderboard outcomes between two models, and alone in the one-seat protocol (one answer
each, under a label of their own), which gives Review pairs of two configurations' answers to
one question. The task runner makes them in the background
(`TaskRunner.start_demo`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.access import LOCAL, Actor, require
from engine.config import RunConfig
from engine.protocols import REGISTRY
from engine.questions import DEMO, Question

if TYPE_CHECKING:
    from engine.store import Store

DEMO_TAG = "demo"
DEMO_MODEL = "simulated"
STRONG = "simulated?skill=0.9"  # the demo's stronger model: right nine times in ten alone
WEAK = "simulated?skill=0.5"  # its weaker model: right half the time alone
HEAD_TO_HEAD = "demo: stronger vs weaker model"


@dataclass(frozen=True)
class DemoRun:
    """One run a demo makes: its configuration (label included) and its question."""

    config: RunConfig
    question: Question

    @property
    def key(self) -> tuple[str, str, str]:
        """What a stored demo run is matched on: label, protocol and question text (no two
        demo runs share all three)."""
        return (self.config.label or "", self.config.protocol, self.question.text)


def demo_config(protocol: str) -> RunConfig:
    """The configuration of a demo run of `protocol`: its defaults on the simulated model."""
    return RunConfig.parse({"protocol": protocol, "label": DEMO_TAG, "model": DEMO_MODEL})


def _head_to_head(name: str) -> list[RunConfig]:
    """`name`'s runs in which the two models meet: a slot of many seats holds two of each
    (alternating); otherwise its first two seats hold one each, in both orders."""
    spec = REGISTRY[name]
    many = next((slot for slot in spec.slots if slot.many and slot.maximum >= 4), None)
    base = {"protocol": name, "model": DEMO_MODEL, "label": HEAD_TO_HEAD}
    if many is not None:
        seats = [{"name": f"{many.role or many.name} {i + 1}", "model": model}
                 for i, model in enumerate((STRONG, WEAK, STRONG, WEAK))]
        return [RunConfig.parse({**base, "seats": {many.name: seats}})]
    first, second = (slot.name for slot in spec.slots[:2])
    return [RunConfig.parse({**base, "seats": {first: STRONG, second: WEAK}}),
            RunConfig.parse({**base, "label": f"{HEAD_TO_HEAD}, sides swapped",
                             "seats": {first: WEAK, second: STRONG}})]


def model_configs() -> list[RunConfig]:
    """The runs in which the stronger and the weaker model meet (each on every question):
    every protocol with pairwise outcomes (the Leaderboard's) seats them against each other
    (the other seats on the default simulated model), and every protocol of one seat has
    each model answer alone under a label of its own (Review's pairs)."""
    meet = [c for name, spec in REGISTRY.items() if spec.pairwise is not None
            and len([s for s in spec.slots if not s.optional]) >= 2
            for c in _head_to_head(name)]
    alone = [RunConfig.parse({"protocol": name, "model": model, "label": label})
             for name, spec in REGISTRY.items()
             if len(spec.slots) == 1 and not spec.slots[0].many
             for model, label in ((STRONG, "demo: stronger model alone"),
                                  (WEAK, "demo: weaker model alone"))]
    return meet + alone


def demo_plan() -> list[DemoRun]:
    """The runs a demo makes: every demo question x every protocol (label `demo`), then every
    demo question x each run of the two models (`model_configs`)."""
    configs = [demo_config(name) for name in REGISTRY] + model_configs()
    return [DemoRun(config, question) for config in configs for question in DEMO]


def demo_missing(store: Store) -> list[DemoRun]:
    """The demo's runs with no completed demo run of the same label, protocol and question
    stored: what pressing the demo button again makes, so a second press stores no
    duplicates."""
    stored = store.runs(tag=DEMO_TAG, status="completed", with_config=False)
    done = set(zip(stored["label"], stored["protocol"], stored["question"], strict=True))
    return [run for run in demo_plan() if run.key not in done]


def demo_run_ids(store: Store) -> list[str]:
    """Ids of the stored demo runs."""
    return list(store.runs(tag=DEMO_TAG, with_config=False)["id"])


def remove_demo(store: Store, actor: Actor = LOCAL) -> int:
    """Delete every run tagged `demo` (with its turns); returns how many were removed."""
    require(actor, "delete runs")
    return store.delete(demo_run_ids(store))
