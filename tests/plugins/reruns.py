"""A stored run re-run as the Runs page re-runs it (`TaskRunner.start_rerun`), waited for."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine import Store
from engine.llm.endpoints import EndpointRegistry
from engine.services.tasks import TaskRunner


def rerun(store: Store, run: Mapping[str, Any], endpoints: EndpointRegistry | None = None
          ) -> dict[str, Any]:
    """Re-run `run` (`Store.get`) under `endpoints` and return the new run as stored, once
    it has ended; a configuration that cannot run again raises its `ConfigError` here."""
    runner = TaskRunner(store)
    new = runner.start_rerun(run, endpoints)
    task = runner.task(new)
    assert task is not None and task.done.wait(180), f"the re-run {new} did not end"
    return store.get(new)
