"""The answers-only re-judge (DESIGN 2.13; Elasky and Nakasako, 2026: a judge shown only the
final answers matched or beat one shown the debate): for every judged run of an experiment
(its answer came from a judge, a chairman or a synthesiser that read a transcript), one new
call on the same judge's model that reads the question and the agents' final positions
alone, stored as a run labelled `LABEL · answers-only judge` with `source_run` in its
metrics. It runs as a single agent judging the others' answers (`single` with its `answers`
option), scored against the same expected answer; `engine.reports.controls.answers_only`
sets its accuracy beside the judge's from the transcript and the consultancy baseline.

A run already re-judged (a completed re-judge names it) is not judged again, so the command
can be repeated after a failure; a failed call is recorded on its run, never an answer."""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.llm.policy import SPEC_FIELDS, CallPolicy
from engine.models import RunStopped
from engine.protocols import REGISTRY, arun_config, run_sync
from engine.protocols.baselines import PLACEBO_SUFFIX
from engine.reports.controls import ANSWERS_ONLY_SUFFIX, ANSWERS_ONLY_TAG
from engine.reports.experiments import runs_frame
from engine.store.experiments import row
from engine.text import NAME_MAX

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry
    from engine.store import Store


@dataclass
class Rejudged:
    """What one `rejudge` did: runs judged now (`made`, of which `failed` ended without an
    answer-giving call), judged before (`already`), counted runs with no judge reading a
    transcript (`unjudged`), and the new runs' ids."""

    made: int = 0
    failed: int = 0
    already: int = 0
    unjudged: int = 0
    run_ids: list[str] = field(default_factory=list)


def label_of(label: str) -> str:
    """A re-judge's label: its configuration's, suffixed (shortened with `…` to fit)."""
    room = NAME_MAX - len(ANSWERS_ONLY_SUFFIX)
    return (label if len(label) <= room else label[:room - 1] + "…") + ANSWERS_ONLY_SUFFIX


def positions_text(positions: dict[str, str]) -> str:
    """The final positions as the judge reads them: one `NAME: POSITION` a line, each on
    one line (a newline inside a position would read as another agent)."""
    return "\n".join(f"{' '.join(name.split())}: {' '.join(text.split())}"
                     for name, text in positions.items())


def judged_config(detail: dict[str, Any]) -> dict[str, Any] | None:
    """The answers-only judge of a stored run (`Store.get`): a single agent on the model of
    the run's judge (its judge-phase turn), with its temperature and the run's call policy,
    reading the final positions; None when the run's answer came from no judge reading a
    transcript, or its judge made no call."""
    spec = REGISTRY.get(str(detail.get("protocol")))
    if spec is None or spec.final_positions is None or not spec.judge_phase:
        return None
    result = spec.read_result(detail.get("result"))
    positions = spec.final_positions(result) if result is not None else None
    judge = next((t for t in detail.get("turns") or () if t.get("phase") == spec.judge_phase),
                 None)
    if not positions or judge is None or not judge.get("model"):
        return None
    config = detail.get("config") or {}
    seats = [seat for slot in (config.get("seats") or {}).values() for seat in slot or ()
             if isinstance(seat, dict)]
    temperature = next((s.get("temperature") for s in seats if s.get("name") == judge["seat"]),
                       None)
    label = str(detail.get("label") or detail.get("protocol"))
    # the protocol that judges final answers alone: the one whose templates include it
    judge_of = next(name for name, entry in REGISTRY.items() if "judge_answers" in entry.templates)
    return {"protocol": judge_of, "label": label_of(label), "model": judge["model"],
            "seats": {"agent": [{"name": judge["seat"], "model": judge["model"],
                                 "temperature": temperature}]},
            "options": {"rounds": 1, "answers": positions_text(positions)},
            **CallPolicy.read(config, SPEC_FIELDS).given()}


def rejudged_sources(store: Store, experiment_id: str) -> set[str]:
    """The runs of the experiment a completed answers-only judge has judged."""
    runs = store.runs(experiment_id=experiment_id, tag=ANSWERS_ONLY_TAG, status="completed")
    return {str(m.get("source_run")) for m in runs.get("metrics", [])
            if isinstance(m, dict) and m.get("source_run")}


async def arejudge(store: Store, experiment_id: str, *, endpoints: EndpointRegistry | None = None,
                   started_by: str = "", concurrency: int = 4,
                   stop_event: threading.Event | None = None) -> Rejudged:
    """Judge again, from the final positions alone, every counted run of the experiment
    whose answer a judge, chairman or synthesiser gave after reading a transcript; placebo
    arms and earlier re-judges are left out. `concurrency` calls at a time."""
    row(store, experiment_id)  # a ConfigError naming it when there is no such experiment
    frame = runs_frame(store, experiment_id)
    done = rejudged_sources(store, experiment_id)
    out = Rejudged()
    todo: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    if not frame.empty:
        frame = frame[frame["counted"].astype(bool) & (frame["status"] == "completed")]
    for run_id, label in zip(frame["id"].tolist(), frame["label"].tolist(), strict=True):
        if PLACEBO_SUFFIX in str(label):
            continue
        if run_id in done:
            out.already += 1
            continue
        detail = store.get(run_id)
        config = judged_config(detail)
        if config is None:
            out.unjudged += 1
            continue
        todo.append((str(run_id), detail, config))
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(run_id: str, detail: dict[str, Any], config: dict[str, Any]) -> None:
        async with gate:
            if stop_event is not None and stop_event.is_set():
                return
            try:
                result = await arun_config(
                    config, str(detail["question"]), store=store, label=config["label"],
                    expected=detail.get("expected"), experiment_id=experiment_id,
                    started_by=started_by, endpoints=endpoints, tags=[ANSWERS_ONLY_TAG],
                    source_run=run_id, stop_event=stop_event)
            except RunStopped:
                return
            out.made += 1
            out.failed += not any(t.ok for t in result.turns)
            if result.run_id:
                out.run_ids.append(result.run_id)
    await asyncio.gather(*(one(*item) for item in todo))
    return out


def rejudge(store: Store, experiment_id: str, **kw: Any) -> Rejudged:
    """Synchronous `arejudge`."""
    return run_sync(arejudge(store, experiment_id, **kw))

