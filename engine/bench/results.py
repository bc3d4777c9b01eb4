"""The experiment-results rows of `python -m engine bench`: an experiment's report and its
baseline matrix over 20,000 stored runs.

`make_experiment` fills a store with an experiment shaped like GSM8K's: questions x 4
configurations (the registry's protocols, chosen by what they do) x 4 repeats. It runs a
small experiment of those configurations on the simulated model for realistic rows, then
bulk-inserts copies (`Store.insert_raw_chunks`) into every planned cell, with a few cells
failed or interrupted, a few redone (a superseded failed run, then a completed one) and a share of
the runs marked as played by a real model, so the report keeps simulated and real runs
apart as it must. `bench_results` times what the Experiments page asks for. Figures are
measured here, never asserted in tests.
"""
from __future__ import annotations

import json
import random
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.bench.dashboard import as_real, copied, unfinished
from engine.bench.table import Row, fact, timed
from engine.models import now

if TYPE_CHECKING:
    from engine.store import Store

CONFIGS = 4
REPEATS = 4


def _protocols() -> list[str]:
    """Four protocols that score an answer, the busiest first (never named here)."""
    from engine.bench.choice import busiest
    from engine.protocols import REGISTRY
    first = busiest().name
    others = [name for name in REGISTRY if name != first]
    return [first, *others][:CONFIGS]


def _templates(folder: Path) -> tuple[list[dict[str, Any]], list[list[Row]]]:
    """A small experiment of the bench's configurations on the simulated model: its spec's
    configurations and, per configuration, its stored run rows (unparsed)."""
    from engine import experiments as ex
    from engine.questions import DEFINITE
    from engine.store import Store
    store = Store(f"sqlite:///{folder / 'templates.db'}")
    configs = [{"protocol": name, "label": f"{name} {i + 1}",
                "model": f"simulated?seed={i}&fail=0.05"}
               for i, name in enumerate(_protocols())]
    questions = [{"question": q.text, "expected": q.expected} for q in DEFINITE[:6]]
    experiment_id = ex.create(store, {"questions": questions, "configs": configs,
                                      "repeats": 2, "concurrency": 8})
    ex.run_experiment(store, experiment_id)
    runs, _ = store.raw_rows()
    store.close()
    by_config: list[list[Row]] = [[] for _ in configs]
    for run in runs:
        cell = ex.Cell.from_tags(json.loads(run["tags"]))
        if cell is not None and run["status"] == "completed":
            by_config[cell.c].append(run)
    return configs, by_config


def make_experiment(url: str, n: int = 20_000, seed: int = 0, real: float = 0.75,
                    open_every: int = 0) -> str:
    """Store an experiment of about `n` runs at `url` (bulk insert); returns its id. A share
    `real` of the cells' runs is marked as played by a real model (`dashboard.as_real`); 2% of
    the cells end failed, 1% interrupted, and 1% are redone after a failure. With
    `open_every`, every such question has no expected answer (its runs are unscored)."""
    from engine.experiments import Cell, create, plan
    from engine.store import Store
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as folder:
        configs, templates = _templates(Path(folder))
    count = max(1, -(-n // (CONFIGS * REPEATS)))
    questions = [{"question": f"Question {q}: what is {q} + {q % 7}?",
                  "expected": None if open_every and q % open_every == 0 else str(q + q % 7)}
                 for q in range(count)]
    store = Store(url)
    experiment_id = create(store, plan({"questions": questions, "configs": configs,
                                        "repeats": REPEATS}, store, confirmed=True))
    base = now() - timedelta(days=2)
    rows: list[Row] = []

    def add(cell: Cell, status: str, tags: list[str]) -> None:
        template = rng.choice(templates[cell.c])
        created = base + timedelta(seconds=len(rows) * 0.5)
        row = copied(template, f"x{len(rows):011x}", created, experiment_id=experiment_id,
                     tags=json.dumps(sorted(tags)), question=questions[cell.q]["question"],
                     expected=questions[cell.q]["expected"])
        if row["expected"] is None:
            row.update(correct=None)
        if rng.random() < real:
            row = as_real(row)
        if status != "completed":
            row.update(unfinished(status))
        rows.append(row)

    for q in range(count):
        for c in range(CONFIGS):
            for r in range(REPEATS):
                if len(rows) >= n:
                    break
                cell, fate = Cell(q, c, r), rng.random()
                if fate < 0.01:  # redone: the failed try kept, superseded
                    add(cell, "failed", [cell.tag, "superseded"])
                add(cell, "failed" if 0.01 <= fate < 0.03 else
                    "interrupted" if 0.03 <= fate < 0.04 else "completed", [cell.tag])
    store.insert_raw_chunks([(rows[:n], [])])
    store.close()
    return experiment_id


def page_data(store: Store, experiment_id: str) -> Any:
    """What the Experiments page computes on a first visit to an experiment's results (its
    caches empty): the progress, the report of the kind it shows first, the round tables, the
    summary's chart and the baseline matrix against the first configuration."""
    from engine import experiments as ex
    from engine.reports import baseline, rounds, vega
    ex.progress(store, experiment_id)
    result = ex.report(store, experiment_id)
    configs = result.experiment["spec"]["configs"]
    rounds.accuracy_by_round(result.runs, configs)
    rounds.conformity_by_config(result.runs, configs)
    vega.accuracy(result.summary, "Accuracy")
    baseline.wide(baseline.baseline_matrix(result.runs, result.experiment["spec"],
                                           result.labels[0]))
    return result


def bench_results(n: int = 20_000) -> list[Row]:
    """Rows for the bench table: the fixture, `report`, the baseline matrix and the page's
    first visit over `n` runs of one experiment (medians of three)."""
    from engine import experiments as ex
    from engine.reports import baseline
    from engine.store import Store
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'results.db'}"
        start = time.perf_counter()
        experiment_id = make_experiment(url, n)
        built = time.perf_counter() - start
        store = Store(url)
        result = ex.report(store, experiment_id)
        spec, first = result.experiment["spec"], result.labels[0]
        size = f"{n:,} runs"
        rows = [
            fact(f"experiment results fixture: {size} ({CONFIGS} configurations x "
                 f"{REPEATS} repeats, simulated runs copied, bulk insert)", round(built, 3), "s"),
            timed(f"experiment results: report ({size})",
                  lambda: ex.report(store, experiment_id), "< 1 s"),
            timed(f"experiment results: runs frame ({size})",
                  lambda: ex.runs_frame(store, experiment_id)),
            timed(f"experiment results: baseline matrix from the report ({size})",
                  lambda: baseline.baseline_matrix(result.runs, spec, first)),
            timed(f"experiment results: page data, first visit ({size})",
                  lambda: page_data(store, experiment_id)),
        ]
        store.close()
    return rows

