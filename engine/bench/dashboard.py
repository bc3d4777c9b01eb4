"""Dashboard benchmark: how long the Runs and Insights pages take on 10,000 stored runs.

`make_fixture` fills a SQLite file quickly: it runs every registered protocol on the
simulated model over a few questions and seeds (some with injected faults) to get realistic
rows, then bulk-inserts `n` copies with fresh ids, spread-out dates, labels, tags and a few
failed or interrupted runs, each with a few of its turns. `bench_dashboard` then times the
engine functions the pages call, including building the plotly figures and serialising them
as Streamlit would. Figures are measured here, never asserted in tests.
"""
from __future__ import annotations

import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from engine.bench.choice import busiest
from engine.models import now
from engine.protocols import REGISTRY, arun_config, run_sync
from engine.questions import DEFINITE, OPEN
from engine.reports import charts, insights
from engine.reports import runs as history
from engine.store import Store

LABELS = ("baseline", "strict-critic", "gpt-mix", "long-rounds", "cheap-models", None)
TAGS = ("demo", "nightly", "ab-test", "regression", "exploration")
MODELS = ("simulated?seed={k}", "simulated?seed={k}&fail=0.15")
TURNS_PER_RUN = 6
Row = dict[str, Any]


def _templates(folder: Path) -> tuple[list[Row], dict[str, list[Row]]]:
    """Real stored runs (rows and turns, as stored) of every protocol on the simulated model."""
    store = Store(f"sqlite:///{folder / 'templates.db'}")
    questions = [*DEFINITE[:2], *OPEN[:2]]
    for protocol in REGISTRY:
        for k, spec in enumerate(MODELS * 2):
            for question in questions:
                config = {"protocol": protocol, "model": spec.format(k=k)}
                try:
                    run_sync(arun_config(config, question.text, store=store,
                                         expected=question.expected))
                except Exception:  # noqa: BLE001 - a failed run is a realistic row too
                    pass
    runs, turns = store.raw_rows()
    store.close()
    return runs, turns


def make_fixture(url: str, n: int = 10_000, seed: int = 0) -> list[str]:
    """Fill the store at `url` with `n` realistic runs (bulk insert); returns their ids."""
    rng = random.Random(seed)
    store = Store(url)
    with tempfile.TemporaryDirectory() as folder:
        templates, turns = _templates(Path(folder))
    base = now()
    ids, run_rows, turn_rows = [], [], []
    for number in range(n):
        template = templates[rng.randrange(len(templates))]
        run_id = f"b{number:011x}"
        created = base - timedelta(seconds=rng.uniform(0, 90 * 24 * 3600))
        shift = created - template["created_at"].replace(tzinfo=created.tzinfo)
        row = {k: v for k, v in template.items()}
        row.update(id=run_id, created_at=created, heartbeat_at=created,
                   finished_at=created + timedelta(seconds=float(row["duration"] or 0)),
                   label=rng.choice(LABELS),
                   tags=json.dumps(sorted(rng.sample(TAGS, rng.randrange(3)))),
                   host="bench", pid=0)
        fate = rng.random()
        if fate < 0.03:
            row.update(status="failed", result="{}", metrics="{}", correct=None,
                       error="RuntimeError: the provider closed the connection")
        elif fate < 0.05:
            row.update(status="interrupted", result="{}", metrics="{}", correct=None,
                       error="the process running it stopped")
        run_rows.append(row)
        ids.append(run_id)
        for turn in turns.get(template["id"], [])[:TURNS_PER_RUN]:
            copy = {k: v for k, v in turn.items() if k != "id"}
            copy.update(run_id=run_id,
                        started_at=turn["started_at"].replace(tzinfo=created.tzinfo) + shift,
                        finished_at=turn["finished_at"].replace(tzinfo=created.tzinfo) + shift)
            turn_rows.append(copy)
    store.insert_raw(run_rows, turn_rows)
    store.close()
    return ids


# --------------------------------------------------------------------------- what pages do
def runs_page(store: Store, filters: history.Filters) -> history.History:
    """The Runs page's history view: the filter choices, then one bounded page of runs."""
    history.choices(store)
    return history.history(store, filters)


def run_detail_page(store: Store, run_id: str) -> int:
    """The Runs page's detail view: the run taken apart and its figures serialised."""
    detail = history.run_detail(store, run_id)
    figures = [charts.timeline(detail.timeline), charts.seat_usage(detail.usage)]
    figures += [charts.tally_bar(counts, winner, title)
                for title, counts, winner in detail.tallies]
    if detail.flows is not None:
        figures.append(charts.sankey(insights.flow_links(detail.flows)))
    return sum(len(f.to_json()) for f in figures)


def insights_page(store: Store, filters: history.Filters) -> int:
    """The Insights page: the filter choices, the runs' metrics, the panels' ballots, every
    section and every figure serialised."""
    history.newest(store)
    history.choices(store)
    runs = insights.load_runs(store, filters)
    sections = insights.report(runs, insights.results_loader(store, filters))
    return sum(len(charts.figure(c).to_json()) for s in sections for c in s.charts)


def _time(work: Callable[[], Any], repeats: int = 3) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def bench_dashboard(n: int = 10_000) -> list[Row]:
    """Rows for the benchmark table: fixture build, Runs and Insights load + build times."""
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'dashboard.db'}"
        start = time.perf_counter()
        ids = make_fixture(url, n)
        built = time.perf_counter() - start
        store = Store(url)
        everything = store.runs()
        name = busiest().name  # the richest run detail and Insights section
        chosen = everything[(everything["protocol"] == name)
                            & (everything["status"] == "completed")]
        detail_id = str(chosen["id"].iloc[0]) if not chosen.empty else ids[0]
        narrow = history.Filters(protocol=name, search="bat")
        size = f"{n:,} runs"
        rows = [
            _row(f"dashboard fixture: {size} with turns (simulated runs, then bulk insert)",
                 built, ""),
            _row(f"runs page: load + build ({size})",
                 _time(lambda: runs_page(store, history.Filters())), "< 2 s"),
            _row(f"runs page, filtered ({name} + text search) ({size})",
                 _time(lambda: runs_page(store, narrow)), "< 2 s"),
            _row(f"runs page: run detail + charts ({size})",
                 _time(lambda: run_detail_page(store, detail_id)), "< 2 s"),
            _row(f"insights page: load + build ({size})",
                 _time(lambda: insights_page(store, history.Filters())), "< 2 s"),
            _row(f"insights page, filtered ({name}) ({size})",
                 _time(lambda: insights_page(store, history.Filters(protocol=name))),
                 "< 2 s"),
        ]
        store.close()
    return rows


def _row(name: str, seconds: float, target: str) -> Row:
    return {"name": name, "value": round(seconds, 3), "unit": "s", "target": target}


if __name__ == "__main__":
    import sys

    from engine.bench.table import format_table
    print(format_table(bench_dashboard(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)))
