"""Experiments: a question set x saved configurations x repeats, run, resumed and compared.

An experiment is stored once (the `experiments` table holds its spec: questions,
configurations, repeats, concurrency) and each planned cell (question x configuration x
repeat) is a run carrying the experiment's id and a `cell:Q:C:R` tag. Completion is derived
from the runs, never kept twice: resuming runs exactly the cells with no `completed` run, and
the stale (interrupted or failed) runs of a cell that is redone are kept, tagged `superseded`.
All runs of an experiment share one event loop; a semaphore-like pool of `concurrency` workers
bounds how many runs are in flight, and each run still makes its independent calls at once.

With `baseline: equal-compute`, each configuration gets its self-consistency baseline beside
it: a vote of as many samples as the configuration makes calls (`baselines_of`), so a
comparison is never 7 calls against 3; where the vote's limit binds, the label says so.

Results are per configuration label: accuracy with a Wilson interval, confidence levels,
calibration of each confidence signal, mind changes, the final answer against the round-one
vote, tokens, latency and calls; and a paired comparison of two configurations by sign test.
The arithmetic lives in `engine.analysis.stats`.
"""
from __future__ import annotations

from engine.cells import SUPERSEDED, Cell
from engine.experiments.headline import headline
from engine.experiments.planning import (
    DEFAULT_CONCURRENCY,
    EQUAL_COMPUTE,
    EQUAL_TOKENS,
    MAX_CALLS,
    MAX_CONCURRENCY,
    MAX_REPEATS,
    baselines_of,
    config_choices,
    create,
    plan,
    time_preflight,
)
from engine.experiments.runner import arun_experiment, pending_cells, run_experiment
from engine.protocols.baselines import achieved_tokens
from engine.reports.experiments import Report, accuracy_figure, compare, report, runs_frame, to_csv
from engine.reports.reliability import Bin, picked_bin, reliability_figure
from engine.store.experiments import (
    Progress,
    duration_text,
    get,
    list_experiments,
    progress,
)

__all__ = [
    "DEFAULT_CONCURRENCY", "MAX_CALLS", "MAX_CONCURRENCY", "MAX_REPEATS", "EQUAL_COMPUTE",
    "EQUAL_TOKENS", "config_choices", "time_preflight", "achieved_tokens",
    "SUPERSEDED", "Cell", "baselines_of", "plan", "Progress", "create", "duration_text", "get",
    "list_experiments", "progress", "arun_experiment", "pending_cells", "run_experiment",
    "Report", "accuracy_figure", "compare", "reliability_figure", "report", "runs_frame",
    "to_csv", "Bin", "picked_bin", "headline",
]
