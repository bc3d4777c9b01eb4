"""The live view's reads: each poll of a running run reads its state row and only the turns
written since the previous poll, never the whole run again.

`Store.get` reads every turn with its prompt messages; a page that polls it every second
reads a long run over and over. A `TurnFeed` remembers the turns it has read per run and asks
the store for the rest (`Store.run_state` and `Store.turns_after`). One feed serves every
session of the process (the task runner holds it), so two watchers of one run share its reads.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.store import Store

KEEP_RUNS = 50  # runs whose turns a feed keeps while nobody has seen them end
FIRST_FIELDS = ("stance", "answer", "reasoning")  # a bubble shows these first, in this order


@dataclass(frozen=True)
class LiveRun:
    """What one poll saw: the run's state (`Store.run_state`), every turn read so far in
    speaking order, and how many of them this poll added."""

    run_id: str
    state: dict[str, Any]
    turns: list[dict[str, Any]]
    new: int


class TurnFeed:
    """Per run, the turns read so far; each poll reads the state and the turns after the
    last index it holds. A run that is seen to end is forgotten (the page then reads the
    finished run once), and at most `KEEP_RUNS` runs are held."""

    def __init__(self, store: Store):
        self.store = store
        self._turns: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def poll(self, run_id: str) -> LiveRun:
        """Read `run_id`'s state and its turns not read yet. The state is read first, so a
        run seen ended has all its turns in this poll."""
        with self._lock:
            held = self._turns.get(run_id, [])
            last = held[-1]["idx"] if held else -1
        state = self.store.run_state(run_id)
        new = self.store.turns_after(run_id, last)
        with self._lock:
            held = self._turns.pop(run_id, held)
            top = held[-1]["idx"] if held else -1
            added = [turn for turn in new if turn["idx"] > top]  # another poll may have them
            turns = held + added
            if state["status"] == "running":
                self._turns[run_id] = turns  # re-inserted: the most recently polled is last
                while len(self._turns) > KEEP_RUNS:
                    del self._turns[next(iter(self._turns))]
        return LiveRun(run_id, state, turns, len(added))


def reply_fields(turn: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A JSON reply as (field, text) pairs for a chat bubble: the turn's parsed fields, else
    the object the reply holds (a protocol may read only part of it). Stance, answer and
    reasoning come first; a list of objects (a critic's assessments) is one line per item.
    Empty for a plain-text reply, which a bubble shows as it came."""
    try:
        loaded = json.loads(str(turn.get("reply") or ""))
    except ValueError:
        return []
    parsed = turn.get("parsed")
    if not (isinstance(parsed, Mapping) and parsed):
        parsed = loaded
    if not (isinstance(loaded, Mapping) and isinstance(parsed, Mapping)):
        return []
    order = [k for k in FIRST_FIELDS if k in parsed] + [k for k in parsed
                                                        if k not in FIRST_FIELDS]
    return [(str(k), _field_text(parsed[k])) for k in order if parsed[k] not in (None, "")]


def _field_text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(_field_text(item) for item in value)
    if isinstance(value, Mapping):
        return " · ".join(f"{k}: {_field_text(v)}" for k, v in value.items())
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
