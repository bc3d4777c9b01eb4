"""Demo runs: the bundled demo questions through every registered protocol, and two simulated
models answering the same questions, offline.

They run on the simulated model and are all tagged `demo`, so they can be removed together.
Every protocol's runs are labelled `demo`, so Runs and Insights have something to show within
seconds. Two more simulated models, a stronger and a weaker one (`STRONG`, `WEAK`: the same
world but for their skill), then meet on the same questions: head to head in a debate (once on
each side) and in a council, which gives the Leaderboard pairwise outcomes between two models,
and alone (one answer each, under a label of their own), which gives Review pairs of two
configurations' answers to one question. The task runner makes them in the background
(`TaskRunner.start_demo`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.access import LOCAL, Actor, require
from engine.config import RunConfig
from engine.protocols import REGISTRY
from engine.questions import DEMO, Question

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


def model_configs() -> list[RunConfig]:
    """The runs in which the stronger and the weaker model meet (each on every question):
    a debate with each on either side (the judge is the default simulated model), a council
    of two of each, and each model answering alone under a label of its own."""
    debate = {"protocol": "debate", "model": DEMO_MODEL}
    return [RunConfig.parse(c) for c in (
        {**debate, "label": HEAD_TO_HEAD, "seats": {"proponent": STRONG, "opponent": WEAK}},
        {**debate, "label": f"{HEAD_TO_HEAD}, sides swapped",
         "seats": {"proponent": WEAK, "opponent": STRONG}},
        {"protocol": "council", "model": DEMO_MODEL, "label": HEAD_TO_HEAD,
         "seats": {"members": [{"name": "member 1", "model": STRONG},
                               {"name": "member 2", "model": WEAK},
                               {"name": "member 3", "model": STRONG},
                               {"name": "member 4", "model": WEAK}]}},
        {"protocol": "single", "model": STRONG, "label": "demo: stronger model alone"},
        {"protocol": "single", "model": WEAK, "label": "demo: weaker model alone"})]


def demo_plan() -> list[DemoRun]:
    """The runs a demo makes: every demo question x every protocol (label `demo`), then every
    demo question x each run of the two models (`model_configs`)."""
    configs = [demo_config(name) for name in REGISTRY] + [
        c for c in model_configs() if c.protocol in REGISTRY]
    return [DemoRun(config, question) for config in configs for question in DEMO]


def demo_missing(store: Any) -> list[DemoRun]:
    """The demo's runs with no completed demo run of the same label, protocol and question
    stored: what pressing the demo button again makes, so a second press stores no
    duplicates."""
    stored = store.runs(tag=DEMO_TAG, status="completed", with_config=False)
    done = set(zip(stored["label"], stored["protocol"], stored["question"], strict=True))
    return [run for run in demo_plan() if run.key not in done]


def demo_run_ids(store: Any) -> list[str]:
    """Ids of the stored demo runs."""
    return list(store.runs(tag=DEMO_TAG, with_config=False)["id"])


def remove_demo(store: Any, actor: Actor = LOCAL) -> int:
    """Delete every run tagged `demo` (with its turns); returns how many were removed."""
    require(actor, "delete runs")
    return store.delete(demo_run_ids(store))
