"""Demo runs: the bundled demo questions through every registered protocol, offline.

They run on the simulated model, are tagged `demo` and labelled `demo`, and can all be removed
together, so the Runs and Insights pages have something to show within seconds.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.protocols import REGISTRY, arun_config, run_sync
from engine.questions import DEMO

DEMO_TAG = "demo"
DEMO_MODEL = "simulated"


def demo_plan() -> list[tuple[str, Any]]:
    """(protocol, question) pairs a demo makes: every demo question x every protocol."""
    return [(name, question) for name in REGISTRY for question in DEMO]


@dataclass
class DemoReport:
    """What a demo made: the stored run ids, and one line per run that raised."""

    run_ids: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def run_demo(store: Any, on_progress: Callable[[int, int, str], Any] | None = None
             ) -> DemoReport:
    """Make the demo runs synchronously, one after another.

    `on_progress(done, total, protocol)` is called after each run. A run that raises is
    reported in `errors` (the protocol stores it as `failed`) and the demo moves on, so one
    broken protocol does not hide the others.
    """
    plan = demo_plan()
    report = DemoReport()
    for number, (protocol, question) in enumerate(plan, 1):
        config = {"protocol": protocol, "label": DEMO_TAG, "model": DEMO_MODEL}
        try:
            result = run_sync(arun_config(config, question.text, store=store, tags=[DEMO_TAG],
                                          expected=question.expected))
            report.run_ids.append(result.run_id)
        except Exception as exc:  # noqa: BLE001 - reported, not hidden
            report.errors.append(f"{protocol}: {type(exc).__name__}: {exc}")
        if on_progress is not None:
            on_progress(number, len(plan), protocol)
    return report


def demo_run_ids(store: Any) -> list[str]:
    """Ids of the stored demo runs."""
    return list(store.runs(tag=DEMO_TAG)["id"])


def remove_demo(store: Any) -> int:
    """Delete every run tagged `demo` (with its turns); returns how many were removed."""
    return store.delete(demo_run_ids(store))
