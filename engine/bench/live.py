"""Live-view benchmark: what one poll of the Run page reads.

A run of the busiest protocol (`engine.bench.choice`; with 8 seats, an 18-turn panel) on the
simulated model is stored; the live view has shown its first 17 turns when the 18th arrives.
A poll by `Store.get(run_id)` (the run row with its result and every turn with its prompts)
is set against the live view's, `Store.run_state` (one row, no turns) and
`Store.turns_after(run_id, last)` (only the new turn). The rows and
bytes counted are what the database hands back for the statements each poll sends (every
value's UTF-8 length; 8 bytes a number), measured by `engine.store.probe`; the time is the
median of `repeats` polls. Figures are measured, never asserted.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from engine.bench.choice import busiest, crowded_config
from engine.bench.table import Row, fact, median_time
from engine.protocols import arun_config, run_sync
from engine.store import Store
from engine.store.probe import reads

SEATS = 8  # the busiest protocol's many-seat slot (18 turns for a panel of 8)


def bench_live(repeats: int = 200) -> list[Row]:
    """Rows for the bench table: one live poll after one new turn, `get` against
    `run_state` + `turns_after`."""
    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{Path(folder) / 'live.db'}")
        spec = busiest()
        result = run_sync(arun_config(crowded_config(spec, SEATS), "Which is larger, 3 or 5?",
                                      store=store))
        run_id, turns = str(result.run_id), len(result.turns)
        shown = turns - 2  # the index of the last turn the view shows: one turn is new

        def before() -> Any:
            return store.get(run_id)

        def after() -> Any:
            return store.run_state(run_id), store.turns_after(run_id, shown)

        old, new = reads(store, before), reads(store, after)
        old_ms, new_ms = median_time(before, repeats) * 1000, median_time(after, repeats) * 1000
        store.close()
    what = f"live poll after one new turn of a {turns}-turn {spec.name} run"
    polls = (("get()", old, old_ms), ("run_state + turns_after", new, new_ms))
    return [*(row for how, read, ms in polls for row in (
        fact(f"{what}, {how}: rows read", read.rows, "rows", note=f"{read.statements} statements"),
        fact(f"{what}, {how}: bytes read", read.bytes, "B"),
        fact(f"{what}, {how}: time", round(ms, 3), "ms"))),
        fact("live poll bytes read, run_state + turns_after / get()",
             round(new.bytes / old.bytes, 4), "x")]
