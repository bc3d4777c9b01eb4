"""`Store`: the one public class over the store's parts (a module each: `database`, `runs`,
`reading`, `transfer`, `aggregates`, `library`, `experiment_reading`, `labels`), one database
per instance; `experiments` holds functions over a store.
"""
from __future__ import annotations

import copy

from engine.store.aggregates import RunAggregates
from engine.store.batching import TurnBatch
from engine.store.experiment_reading import ExperimentReading
from engine.store.labels import Labels
from engine.store.library import Library
from engine.store.runs import RunWriting
from engine.store.transfer import Transfer


class Store(RunWriting, Transfer, RunAggregates, Library, ExperimentReading, Labels):
    """Runs, turns, experiments, the library and human labels in one database (SQLite WAL
    or PostgreSQL); every method opens and closes its own session, so one store serves many
    threads."""

    def batched(self, window: float = 0.0) -> Store:
        """This store with group commit for the runs it records: turns are written at the
        event loop's next iteration (`engine.store.batching`), an experiment's many runs in
        one transaction. It shares this store's database, pending ends and reaper."""
        view = copy.copy(self)
        view._batch = TurnBatch(view, window)
        return view
