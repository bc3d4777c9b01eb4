"""Demo runs: the bundled demo questions through every registered protocol, offline.

They run on the simulated model, are tagged `demo` and labelled `demo`, and can all be removed
together, so the Runs and Insights pages have something to show within seconds. The task
runner makes them in the background (`TaskRunner.start_demo`).
"""
from __future__ import annotations

from typing import Any

from engine.access import LOCAL, Actor, require
from engine.config import RunConfig
from engine.protocols import REGISTRY
from engine.questions import DEMO

DEMO_TAG = "demo"
DEMO_MODEL = "simulated"


def demo_plan() -> list[tuple[str, Any]]:
    """(protocol, question) pairs a demo makes: every demo question x every protocol."""
    return [(name, question) for name in REGISTRY for question in DEMO]


def demo_missing(store: Any) -> list[tuple[str, Any]]:
    """The demo's (protocol, question) pairs with no completed demo run stored: what pressing
    the demo button again makes, so a second press stores no duplicates."""
    stored = store.runs(tag=DEMO_TAG, status="completed", with_config=False)
    done = set(zip(stored["protocol"], stored["question"]))
    return [(name, question) for name, question in demo_plan()
            if (name, question.text) not in done]


def demo_config(protocol: str) -> RunConfig:
    """The configuration of a demo run of `protocol`: its defaults on the simulated model."""
    return RunConfig.parse({"protocol": protocol, "label": DEMO_TAG, "model": DEMO_MODEL})


def demo_run_ids(store: Any) -> list[str]:
    """Ids of the stored demo runs."""
    return list(store.runs(tag=DEMO_TAG, with_config=False)["id"])


def remove_demo(store: Any, actor: Actor = LOCAL) -> int:
    """Delete every run tagged `demo` (with its turns); returns how many were removed."""
    require(actor, "delete runs")
    return store.delete(demo_run_ids(store))
