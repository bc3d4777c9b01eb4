"""Demo runs: the bundled demo questions through every registered protocol, offline.

They run on the simulated model, are tagged `demo` and labelled `demo`, and can all be removed
together, so the Runs and Insights pages have something to show within seconds. The task
runner makes them in the background (`TaskRunner.start_demo`).
"""
from __future__ import annotations

from typing import Any

from engine.config import RunConfig
from engine.protocols import REGISTRY
from engine.questions import DEMO

DEMO_TAG = "demo"
DEMO_MODEL = "simulated"


def demo_plan() -> list[tuple[str, Any]]:
    """(protocol, question) pairs a demo makes: every demo question x every protocol."""
    return [(name, question) for name in REGISTRY for question in DEMO]


def demo_config(protocol: str) -> RunConfig:
    """The configuration of a demo run of `protocol`: its defaults on the simulated model."""
    return RunConfig.parse({"protocol": protocol, "label": DEMO_TAG, "model": DEMO_MODEL})


def demo_run_ids(store: Any) -> list[str]:
    """Ids of the stored demo runs."""
    return list(store.runs(tag=DEMO_TAG)["id"])


def remove_demo(store: Any) -> int:
    """Delete every run tagged `demo` (with its turns); returns how many were removed."""
    return store.delete(demo_run_ids(store))
