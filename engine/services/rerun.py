"""Re-run a stored run: the configuration it stored (a `RunConfig`) on the same question,
with the same label, tags and expected answer.

A stored seat keeps its endpoint (`openai:M?base_url=URL` or `?endpoint=NAME`); a URL read
back from the store is data, so it gets a server-side key only if it is a registered
endpoint's URL under the caller's registry (default: the environment's).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.config import RunConfig
from engine.models import ConfigError, RunResult
from engine.protocols import arun_config, get_protocol, run_sync, seats_from_config


def rerun_config(stored: Any) -> RunConfig:
    """The stored configuration, checked as a new run's would be; a `ConfigError` says why it
    cannot run again (no seats by slot: a run saved without its configuration)."""
    config = RunConfig.parse(stored)
    if not config.seats:
        raise ConfigError("this run stored no seats by slot (it was saved without its "
                          "configuration), so it cannot be re-run", "input")
    seats_from_config(get_protocol(config.protocol), config)  # unknown slots or options
    return config


def _run_options(run: Mapping[str, Any]) -> dict[str, Any]:
    return {"label": run.get("label") or None, "tags": list(run.get("tags") or []),
            "expected": run.get("expected") or None}


def rerun(store: Any, run: Mapping[str, Any], **run_options: Any) -> RunResult:
    """Run a stored run (`Store.get`) again, synchronously; returns the new result (its
    `run_id` is the new run)."""
    config = rerun_config(run.get("config") or {})
    options = {"store": store, **_run_options(run), **run_options}
    return run_sync(arun_config(config, str(run.get("question", "")), **options))


def start_rerun(store: Any, run: Mapping[str, Any], jobs: Any = None,
                endpoints: Any = None) -> str:
    """Start a re-run and return its run id: in the background through `jobs` (the app's
    task runner) when given, else synchronously. `endpoints` is the caller's registry."""
    config = rerun_config(run.get("config") or {})
    routed = {"endpoints": endpoints} if endpoints is not None else {}
    if jobs is not None:
        return str(jobs.start(config, str(run.get("question", "")), **_run_options(run),
                              **routed))
    result = rerun(store, run, **routed)
    return str(result.run_id)
