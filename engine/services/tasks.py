"""Background runs: a run started from a page keeps going when the page goes away.

`JobManager.start` runs `protocols.arun_config` in a daemon thread with its own event loop and
a stop `Event`, and returns the run id as soon as the run row exists. Live jobs sit in one
process-wide table, so any page (or a second manager on the same store) can watch or stop
them; everything a page shows is read back from the store.
"""
from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.llm.calls import RunStopped
from engine.models import ConfigError
from engine.protocols import arun_config, estimate, get_protocol

START_TIMEOUT = 60.0  # seconds to wait for the run row before giving up on a start


@dataclass
class Job:
    """One background run: its thread, its stop flag, and how it ended."""

    run_id: str
    protocol: str
    estimated_calls: int
    thread: threading.Thread
    stop_event: threading.Event
    done: threading.Event = field(default_factory=threading.Event)
    error: str = ""

    @property
    def alive(self) -> bool:
        return not self.done.is_set()


# Process-wide: every session and every manager in this process sees the same live jobs.
_LIVE: dict[str, Job] = {}
_LOCK = threading.Lock()
KEEP_FINISHED = 200  # finished jobs remembered (for their call estimates); the store has the rest


def _forget_finished() -> None:
    """Drop the oldest finished jobs beyond `KEEP_FINISHED` (call with `_LOCK` held)."""
    finished = [run_id for run_id, job in _LIVE.items() if not job.alive]
    for run_id in finished[:max(0, len(finished) - KEEP_FINISHED)]:
        del _LIVE[run_id]


class _Capture:
    """A store stand-in that reports the run id the moment the run row is written."""

    def __init__(self, store: Any, on_start):
        self._store, self._on_start = store, on_start

    def start_run(self, *args: Any, **kw: Any) -> str:
        run_id = self._store.start_run(*args, **kw)
        self._on_start(run_id)
        return run_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class JobManager:
    """Starts, watches and stops background runs on one store."""

    def __init__(self, store: Any):
        self.store = store

    def start(self, config: Mapping[str, Any], question: str, *, expected: str | None = None,
              label: str | None = None, tags: Iterable[str] = (), **run_options: Any) -> str:
        """Start `config` on `question` in the background; returns the run id.

        `run_options` go to the protocol as they would from `arun_config` (`timeout_per_call`,
        `retries`, `concurrency`, `prompts` ...). Bad configurations raise `ConfigError` here,
        before any call, as a direct run would.
        """
        config = dict(config)
        calls = estimate(config)["calls"]  # also validates seats and options
        started = threading.Event()
        box: dict[str, Any] = {}
        stop_event = threading.Event()

        def on_start(run_id: str) -> None:
            box["run_id"] = run_id
            job = Job(run_id, get_protocol(config["protocol"]).name, calls,
                      threading.current_thread(), stop_event)
            box["job"] = job
            with _LOCK:
                _LIVE[run_id] = job
                _forget_finished()
            started.set()

        def target() -> None:
            try:
                asyncio.run(arun_config(
                    config, question, store=_Capture(self.store, on_start),
                    label=label if label is not None else config.get("label"),
                    tags=list(tags), expected=expected or None, stop_event=stop_event,
                    **run_options))
            except RunStopped:
                pass  # the run is stored as interrupted
            except BaseException as exc:  # stored as failed by the protocol; kept for the page
                box["error"] = exc
                if "job" in box:
                    box["job"].error = f"{type(exc).__name__}: {exc}"
            finally:
                if "job" in box:
                    box["job"].done.set()
                started.set()

        thread = threading.Thread(target=target, name="parley-run", daemon=True)
        thread.start()
        started.wait(START_TIMEOUT)
        if "run_id" not in box:
            error = box.get("error")
            if isinstance(error, ConfigError):
                raise error
            if error is not None:
                raise RuntimeError(f"the run could not start: {type(error).__name__}: {error}")
            raise RuntimeError(f"the run did not start within {START_TIMEOUT:.0f} seconds")
        return box["run_id"]

    # ------------------------------------------------------------------ watching
    def job(self, run_id: str) -> Job | None:
        """The live job for `run_id` in this process, if any (finished ones too)."""
        with _LOCK:
            return _LIVE.get(run_id)

    def live(self) -> list[str]:
        """Ids of runs still going in this process whose rows are in this store."""
        with _LOCK:
            ids = [run_id for run_id, job in _LIVE.items() if job.alive]
        return [run_id for run_id in ids if self.store.exists(run_id)]

    def stop(self, run_id: str) -> bool:
        """Ask a running run to stop; it ends `interrupted`. A run of this process stops after
        the call in flight; a run of another process (or one stuck) is marked `interrupted` in
        the store at once, and its owner stops at its next turn. False when nothing ran."""
        job = self.job(run_id)
        if job is not None and job.alive:
            job.stop_event.set()
            return True
        return self.store.stop_run(run_id)

    def wait(self, run_id: str, timeout: float = 120.0) -> str:
        """Block until the run is no longer `running` (or `timeout`); returns its status."""
        job = self.job(run_id)
        if job is not None:
            job.done.wait(timeout)
            return self.store.get(run_id)["status"]
        deadline = time.monotonic() + timeout
        status = self.store.get(run_id)["status"]
        while status == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
            status = self.store.get(run_id)["status"]
        return status

    def progress(self, run_id: str) -> dict[str, Any]:
        """A run's live state from the store: status, calls done / estimated, current phase.

        Works for any stored run; the estimate comes from the live job when this process
        started it, otherwise it is unknown (`estimated_calls` 0) unless the run is over.
        """
        run = self.store.get(run_id)
        turns = run["turns"]
        job = self.job(run_id)
        done = len(turns)
        estimated = job.estimated_calls if job is not None else 0
        if run["status"] != "running":
            estimated = max(estimated, done) if run["status"] == "completed" else estimated
        phases = _phases(run["protocol"])
        phase = turns[-1]["phase"] if turns else (phases[0] if phases else "")
        return {"run_id": run_id, "status": run["status"], "calls_done": done,
                "estimated_calls": estimated,
                "fraction": min(1.0, done / estimated) if estimated else 0.0,
                "phase": phase, "phases": phases,
                "phase_number": phases.index(phase) + 1 if phase in phases else 0,
                "error": run.get("error") or (job.error if job is not None else ""),
                "stopping": bool(job is not None and job.alive and job.stop_event.is_set())}


def _phases(protocol: str) -> list[str]:
    try:
        return list(get_protocol(protocol).phases)
    except ConfigError:
        return []
