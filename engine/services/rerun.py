"""Re-run a stored run: the configuration it stored (a `RunConfig`) on the same question,
with the same label, tags and expected answer, and a `rerun-of:ID` tag naming the run it
re-ran (the Runs page offers to compare the two).

A stored seat keeps its endpoint (`openai:M?base_url=URL` or `?endpoint=NAME`); a URL read
back from the store is data, so it gets a server-side key only if it is a registered
endpoint's URL under the caller's registry (default: the environment's). The app re-runs in
the background through `TaskRunner.start_rerun`.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.config import RunConfig
from engine.models import ConfigError
from engine.protocols import Resolved, resolve_config

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry


def rerun_resolved(stored: Any, endpoints: EndpointRegistry | None = None) -> Resolved:
    """The stored configuration resolved as a new run's would be (under `endpoints`); a
    `ConfigError` says why it cannot run again (no seats by slot: a run saved without its
    configuration)."""
    config = RunConfig.parse(stored)
    if not config.seats:
        raise ConfigError("this run stored no seats by slot (it was saved without its "
                          "configuration), so it cannot be re-run", "input")
    return resolve_config(config, endpoints)  # unknown slots or options refused here


RERUN_TAG = "rerun-of:"  # the tag a re-run carries: this prefix and its original's id


def rerun_options(run: Mapping[str, Any]) -> dict[str, Any]:
    """What a re-run keeps of the stored run besides its configuration: label, tags and
    expected answer; its `rerun-of:` tag names this run (not the one this run re-ran)."""
    tags = [t for t in run.get("tags") or [] if not str(t).startswith(RERUN_TAG)]
    if run.get("id"):
        tags.append(f"{RERUN_TAG}{run['id']}")
    return {"label": run.get("label") or None, "tags": tags,
            "expected": run.get("expected") or None}


def original_of(run: Mapping[str, Any]) -> str | None:
    """The id of the run a stored run re-ran (its `rerun-of:` tag), or None."""
    return next((str(t)[len(RERUN_TAG):] for t in run.get("tags") or []
                 if str(t).startswith(RERUN_TAG)), None)
