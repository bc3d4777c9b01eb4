"""Dashboard benchmark: how long the Runs and Insights pages take on 10,000 stored runs, or
on each of several sizes (`python -m engine bench --only dashboard --sizes 10000,100000`).

`make_fixture` fills a SQLite file quickly: it runs every registered protocol on the
simulated model over a few questions and seeds (some with injected faults) to get realistic
rows, then bulk-inserts `n` copies in chunks (one transaction of `CHUNK` runs each, so memory
stays bounded at a million runs) with fresh ids, dates over 90 days, labels, tags, about 3%
failed and 2% interrupted runs, and a `REAL_SHARE` of runs whose seats name a real model
(`REAL_MODEL`, `simulated` false) beside the simulated ones. Only the first `TURN_RUNS` runs
get their turns (at most `TURNS_PER_RUN` each): a million runs with six turns each would be
tens of GB, and the run detail and search benches need only some runs with turns.
`bench_dashboard` then times the engine functions the pages call, including building the
plotly figures and serialising them as Streamlit would. Figures are measured here, never
asserted in tests.
"""
from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from itertools import combinations, islice
from pathlib import Path
from typing import Any

from engine.bench.choice import busiest
from engine.bench.table import Row, fact, timed
from engine.models import now
from engine.protocols import REGISTRY, arun_config, run_sync
from engine.questions import DEFINITE, OPEN
from engine.reports import answers, charts, insights, vega
from engine.reports import runs as history
from engine.store import RunFilters, Store
from engine.store.signal_columns import SIGNAL_COLUMNS
from engine.views.ballots import flow_links

LABELS = ("baseline", "strict-critic", "gpt-mix", "long-rounds", "cheap-models", None)
TAGS = ("demo", "nightly", "ab-test", "regression", "exploration")
# A run has 0, 1 or 2 tags (equally often), sorted, as the store keeps them (JSON text).
TAG_SETS = tuple(tuple(json.dumps(sorted(c)) for c in combinations(TAGS, k)) for k in range(3))
MODELS = ("simulated?seed={k}", "simulated?seed={k}&fail=0.15")
REAL_MODEL = "openai:gpt-4o-mini"  # what a real run's seats name (no call is made)
REAL_SHARE = 0.3  # of the fixture's runs, copies of a simulated run with REAL_MODEL seats
TURNS_PER_RUN = 6
TURN_RUNS = 10_000  # runs (the first ones) that get turns: enough for run detail and search
CHUNK = 20_000  # runs per transaction
DAYS = 90  # the fixture's runs are spread over the last DAYS days
Progress = Callable[[int, int], None]  # (runs stored so far, runs in all)


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


# A model named in a stored configuration (`json.dumps`'s spacing), when it is the simulated one.
_SIMULATED_MODEL = re.compile(r'"model": "simulated[^"]*"')
Template = tuple[Row, list[Row]]  # a stored run to copy and (the first of) its turns


def as_real(run: Row) -> Row:
    """A stored run's row as a real model's run: every simulated model its configuration
    names is `REAL_MODEL`, and `simulated` is false, as the store derives it for such seats."""
    return {**run, "config": _SIMULATED_MODEL.sub(f'"model": "{REAL_MODEL}"', run["config"]),
            "models": REAL_MODEL, "simulated": False}


def _pairs(folder: Path) -> list[tuple[Template, Template]]:
    """Every template run twice: as the simulated model ran it, and as a real model's run
    (its turns too)."""
    runs, turns = _templates(folder)
    out = []
    for run in runs:
        kept = turns.get(run["id"], [])[:TURNS_PER_RUN]
        out.append(((run, kept), (as_real(run), [{**turn, "model": REAL_MODEL,
                                                  "simulated": False} for turn in kept])))
    return out


def run_id(number: int) -> str:
    """The id of the fixture's run `number` (0-based, in insertion order)."""
    return f"b{number:011x}"


def copied(run: Row, new_id: str, created: datetime, **changes: Any) -> Row:
    """A stored run's row under `new_id`, created at `created` and finished its duration
    later, on the bench's host, with `changes`."""
    return {**run, "id": new_id, "created_at": created, "heartbeat_at": created,
            "finished_at": created + timedelta(seconds=float(run["duration"] or 0)),
            "host": "bench", "pid": 0, **changes}


def unfinished(status: str, error: str = "RuntimeError: the provider closed the connection"
               ) -> Row:
    """What a run that ended `status` stores instead of a result."""
    return {"status": status, "result": "{}", "metrics": "{}", "correct": None, "error": error}


def _rows(pairs: Sequence[tuple[Template, Template]], n: int, seed: int, turn_runs: int,
          base: datetime) -> Iterator[tuple[Row, list[Row]]]:
    """The fixture's `n` runs one at a time, each with its turns (none past `turn_runs`)."""
    rng = random.Random(seed)
    span = DAYS * 24 * 3600
    for number in range(n):
        simulated, real = pairs[rng.randrange(len(pairs))]
        source, source_turns = real if rng.random() < REAL_SHARE else simulated
        created = base - timedelta(seconds=rng.uniform(0, span))
        row = copied(source, run_id(number), created, label=rng.choice(LABELS),
                     tags=rng.choice(TAG_SETS[rng.randrange(3)]))
        fate = rng.random()
        if fate < 0.05:  # a run that did not complete has no signals
            row.update(dict.fromkeys(SIGNAL_COLUMNS))
        if fate < 0.03:
            row.update(unfinished("failed"))
        elif fate < 0.05:
            row.update(unfinished("interrupted", "the process running it stopped"))
        turns: list[Row] = []
        if number < turn_runs:
            shift = created - source["created_at"].replace(tzinfo=created.tzinfo)
            for turn in source_turns:
                copy = {k: v for k, v in turn.items() if k != "id"}
                copy.update(run_id=row["id"],
                            started_at=turn["started_at"].replace(tzinfo=created.tzinfo) + shift,
                            finished_at=turn["finished_at"].replace(tzinfo=created.tzinfo)
                            + shift)
                turns.append(copy)
        yield row, turns


def _chunks(rows: Iterable[tuple[Row, list[Row]]], size: int, n: int,
            progress: Progress | None) -> Iterator[tuple[list[Row], list[Row]]]:
    """`rows` in chunks of `size` runs; `progress` hears of each chunk once it is stored (the
    store asks for the next chunk only after committing this one)."""
    done, pending = 0, iter(rows)
    while chunk := list(islice(pending, size)):
        yield [run for run, _ in chunk], [turn for _, turns in chunk for turn in turns]
        done += len(chunk)
        if progress is not None:
            progress(done, n)


def to_stderr() -> Progress:
    """A progress callback that prints a line per chunk to stderr, with the time so far."""
    start = time.perf_counter()

    def report(done: int, total: int) -> None:
        seconds = time.perf_counter() - start
        print(f"dashboard fixture: {done:,} of {total:,} runs stored ({seconds:.1f} s, "
              f"{done / max(seconds, 1e-9):,.0f} runs/s)", file=sys.stderr, flush=True)
    return report


def make_fixture(url: str, n: int = 10_000, seed: int = 0, *, turn_runs: int = TURN_RUNS,
                 chunk: int = CHUNK, progress: Progress | None = None) -> int:
    """Fill the store at `url` with `n` realistic runs, `run_id(0)` to `run_id(n - 1)`, the
    first `turn_runs` with turns (bulk insert, `chunk` runs per transaction); returns how many
    have turns. The file is the benchmark's own, written without waiting for the disk
    (`Store.insert_raw_chunks`)."""
    with tempfile.TemporaryDirectory() as folder:
        pairs = _pairs(Path(folder))
    store = Store(url)
    try:
        rows = _rows(pairs, n, seed, turn_runs, now())
        store.insert_raw_chunks(_chunks(rows, chunk, n, progress), durable=False)
    finally:
        store.close()
    return min(n, turn_runs)


# --------------------------------------------------------------------------- what pages do
def runs_page(store: Store, filters: RunFilters) -> history.History:
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
        figures.append(charts.sankey(flow_links(detail.flows)))
    return sum(len(f.to_json()) for f in figures)


def insights_page(store: Store, filters: RunFilters, every: bool = False) -> int:
    """The Insights page's first view as the page makes it: the newest run, the filter
    choices, the cache key, the runs added up in the store, the three answers it opens on,
    the default kind and sections (`every`: all of them), every table and figure made and
    serialised."""
    history.newest(store)
    history.choices(store)
    store.fingerprint()
    summary = insights.load_summary(store, filters)
    if summary.empty:
        return 0
    only = None if every else insights.default_sections(summary)
    kind = insights.default_kind(summary)
    opening = answers.report(store, filters, kind)  # the three answers, drawn as tables
    sections = insights.report_from_store(store, filters, kind, only, summary)
    return sum(len(s.table.to_json()) for s in opening if s.table is not None) + sum(
        len(json.dumps(vega.spec(c), default=str)) if vega.spec(c) is not None
        else len(charts.figure(c).to_json()) for s in sections for c in s.charts)


def _peak_mb(work: Callable[[], Any]) -> float:
    """The peak of Python's traced allocations (tracemalloc: objects and numpy/pandas
    buffers, not SQLite's own cache) while `work` runs once, in MB."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


_RSS_CHILD = """
import sys
from engine.bench.dashboard import insights_page
from engine.bench.serving import high_water_mb
from engine.store import RunFilters, Store

store = Store(sys.argv[1])
ready = high_water_mb()
insights_page(store, RunFilters())
print(ready, high_water_mb())
"""


def _peak_rss_mb(url: str) -> tuple[float, float]:
    """(peak resident memory after the imports and the store's opening, peak resident memory
    once Insights' first view is built), in MB, of a new process that does only that: what
    the page's process holds, SQLite's cache and every C buffer included (Linux `VmHWM`)."""
    done = subprocess.run([sys.executable, "-c", _RSS_CHILD, url], capture_output=True,
                          text=True, timeout=600, cwd=Path(__file__).resolve().parents[2])
    if done.returncode != 0:
        raise RuntimeError(f"the memory probe failed: {done.stderr[-500:]}")
    ready, peak = (float(x) for x in done.stdout.split()[-2:])
    return ready, peak


def with_turns(store: Store, turned: int, protocol: str) -> list[str]:
    """The completed runs of `protocol` among the fixture's first `turned` runs (those with
    turns; the first 500 at most), in order; then the fixture's first two runs, so that there
    are always two different runs to open."""
    found = store.runs(ids=[run_id(i) for i in range(min(turned, 500))], protocol=protocol,
                       status="completed", with_config=False)
    return list(dict.fromkeys([*sorted(found["id"]), run_id(0), run_id(1)]))


def bench_dashboard(counts: Sequence[int] = (10_000,)) -> list[Row]:
    """Rows for the benchmark table, for each run count in `counts`: fixture build, Runs and
    Insights load + build times, and the Insights build's peak memory. A build of more than
    one chunk reports each chunk on stderr."""
    return [row for n in counts for row in _bench_size(n)]


def _bench_size(n: int) -> list[Row]:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'dashboard.db'}"
        start = time.perf_counter()
        turned = make_fixture(url, n, progress=to_stderr() if n > CHUNK else None)
        built = time.perf_counter() - start
        megabytes = sum(f.stat().st_size for f in Path(folder).iterdir()) / 2**20
        store = Store(url)
        name = busiest().name  # the richest run detail and Insights section
        detail_id = with_turns(store, turned, name)[0]
        narrow = RunFilters(protocol=name, search="bat")
        size = f"{n:,} runs"
        everything = RunFilters()
        first = "< 1 s" if n <= 100_000 else "< 3 s"  # the first-view targets
        rows = [
            fact(f"dashboard fixture: {size}, the first {turned:,} with turns "
                 "(simulated runs, then bulk insert)", round(built, 3), "s"),
            fact(f"dashboard fixture: SQLite file size ({size})", round(megabytes, 3), "MB"),
            timed(f"runs page: load + build ({size})", lambda: runs_page(store, everything),
                  "< 2 s"),
            timed(f"runs page, filtered ({name} + text search) ({size})",
                  lambda: runs_page(store, narrow), "< 2 s"),
            timed(f"runs page: run detail + charts ({size})",
                  lambda: run_detail_page(store, detail_id), "< 2 s"),
            timed(f"insights page: load + build ({size})",
                  lambda: insights_page(store, everything), first),
            timed(f"insights page, filtered ({name}) ({size})",
                  lambda: insights_page(store, RunFilters(protocol=name)), first),
            timed(f"insights page: the three answers alone ({size})",
                  lambda: answers.report(store, everything, "real")),
            timed(f"insights page, filtered ({name}): the three answers alone ({size})",
                  lambda: answers.report(store, RunFilters(protocol=name), "real")),
            timed(f"insights page: every section, protocols' sampled past "
                  f"{insights.SAMPLE:,} runs ({size})",
                  lambda: insights_page(store, everything, every=True), repeats=1),
            fact(f"insights page: peak traced memory of load + build, tracemalloc ({size})",
                 round(_peak_mb(lambda: insights_page(store, everything)), 3), "MB",
                 "< 500 MB"),
        ]
        ready, peak = _peak_rss_mb(url)
        rows.append(fact(f"insights page: peak resident memory of a new process that builds "
                         f"the first view (imports included: {ready:.0f} MB before the build) "
                         f"({size})", round(peak, 3), "MB", "< 500 MB"))
        store.close()
    return rows
