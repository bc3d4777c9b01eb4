"""Fuzzing the pool's job payloads (the poisoned-job finding): a job's `args` may be any JSON a
client wrote into `procrastinate_jobs`. Hypothesis drives `Cell.from_tags`, the payload
reader (`read_job`), the log-line cutter (`brief`) and the queue's JSON decoder
(`load_payload`) with hostile cells (Unicode digits, signs, leading zeros, 5,000 digits),
arbitrary JSON-ish payloads, very long strings and huge numbers: none raises (but the
reader's `PoisonJob`), every message is one bounded line, and a cell read back is the cell
written. With PostgreSQL, the store's SQL reading of a payload agrees with the Python one.

Settings as in tests/test_fuzz.py: `PARLEY_FUZZ_EXAMPLES=N` examples per test (default 100),
and a `deadline` of 10 s per example (a catastrophic blow-up, not a timing: the machine may
be loaded).
"""
from __future__ import annotations

import json
import os
import sys

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from engine.cells import Cell
from engine.store import Store
from engine.store import workers as pool_store
from engine.store.workers import MAX_ID, PoisonJob, Unreadable, brief, load_payload, read_job
from engine.workers.pool import ensure_schema

EXAMPLES = int(os.environ.get("PARLEY_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=10000, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

# What PostgreSQL's jsonb can hold: no NUL, no lone surrogate.
STORABLE = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
INDEX = st.integers(0, 999_999_999)
CELLS = st.builds(Cell, INDEX, INDEX, INDEX)
DIGITS = st.one_of(
    st.integers(-10**12, 10**12).map(str),
    st.text(st.characters(whitelist_categories=("Nd", "No")), min_size=1, max_size=5),
    st.text("0123456789", min_size=1, max_size=12),
    st.integers(1, 5000).map(lambda n: "9" * n),
    st.sampled_from(["²", "٣", "١٢", "0x1", "1e3", " 1", "1 ", "+1", "-0", "01", "1_0", ""]))
HOSTILE_CELLS = st.one_of(
    CELLS.map(lambda c: c.tag),
    st.builds(lambda q, c, r: f"cell:{q}:{c}:{r}", DIGITS, DIGITS, DIGITS),
    st.builds(lambda tag, junk: tag + junk, CELLS.map(lambda c: c.tag),
              st.sampled_from(["\n", ":0", " ", "\u2028", "\x85", "\x00"])),
    st.text(STORABLE, max_size=40),
    st.builds(lambda s, n: s * n, st.text(STORABLE, min_size=1, max_size=8),
              st.integers(1000, 50_000)))  # very long strings
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-10**30, 10**30),
    st.integers(1, 6000).map(lambda n: 10**n),  # beyond repr's digit limit
    st.floats(allow_nan=False, allow_infinity=False), st.text(STORABLE, max_size=30),
    HOSTILE_CELLS)
JSONISH = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(STORABLE, max_size=10), inner,
                                                 max_size=4)), max_leaves=12)
IDS = st.one_of(st.text(STORABLE, min_size=1, max_size=MAX_ID + 5), st.just(""),
                st.text("0123456789abcdef", min_size=12, max_size=12))
PAYLOADS = st.one_of(
    st.fixed_dictionaries({"experiment_id": IDS, "cell": HOSTILE_CELLS},
                          optional={"context": JSONISH, "priority": JSONISH}),
    st.fixed_dictionaries({}, optional={"experiment_id": JSONISH | IDS,
                                        "cell": JSONISH | HOSTILE_CELLS}),
    st.dictionaries(st.text(STORABLE, max_size=20) | st.sampled_from(["experiment_id", "cell"]),
                    JSONISH, max_size=5),
    JSONISH)  # not even an object


_STORES: dict[str, Store] = {}  # one per test database, shared by a test's examples


def _dumps(value) -> str:
    """JSON as a client could write it: a number of any length (PostgreSQL stores 6,000
    digits; Python reads back at most 4,300)."""
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return json.dumps(value)
    finally:
        sys.set_int_max_str_digits(before)


def _one_bounded_line(message: str, limit: int = 400) -> None:
    assert "\n" not in message and len(message) <= limit, message[:500]


@FUZZ
@given(st.lists(HOSTILE_CELLS | JSONISH, max_size=5) | JSONISH)
def test_from_tags_never_raises_and_reads_only_what_tag_writes(tags):
    cell = Cell.from_tags(tags)
    if cell is not None:  # the tag it read is exactly the one `Cell.tag` writes
        assert not isinstance(tags, str) and cell.tag in list(tags)


@FUZZ
@given(CELLS, st.lists(HOSTILE_CELLS, max_size=3))
def test_a_cell_read_back_round_trips(cell, others):
    assert Cell.from_tags([cell.tag]) == cell
    bad = [t for t in others if Cell.from_tags([t]) is None]
    assert Cell.from_tags([*bad, cell.tag]) == cell  # the first real cell, past any junk


@FUZZ
@given(PAYLOADS)
def test_read_job_refuses_with_one_bounded_line_and_nothing_else(args):
    try:
        job = read_job(args)
    except PoisonJob as refused:
        _one_bounded_line(str(refused))
        return
    assert isinstance(args, dict) and job.experiment_id == args["experiment_id"]
    assert 1 <= len(job.experiment_id) <= MAX_ID and job.cell.tag == args["cell"]


@FUZZ
@given(JSONISH | PAYLOADS, st.integers(10, 300))
def test_brief_is_one_short_line_whatever_it_is_given(value, limit):
    _one_bounded_line(brief(value, limit), limit)


@FUZZ
@given(PAYLOADS, st.integers(0, 3000))
def test_load_payload_never_raises(args, depth):
    raw = _dumps(args)
    for text_ in (raw, "[" * depth + raw + "]" * depth, raw.encode()):
        decoded = load_payload(text_)
        try:
            expected = json.loads(text_)
        except (RecursionError, ValueError):
            assert isinstance(decoded, Unreadable)
            _one_bounded_line(repr(decoded))
        else:
            assert decoded == expected
        try:
            read_job(decoded)
        except PoisonJob as refused:
            _one_bounded_line(str(refused))


@settings(max_examples=max(10, EXAMPLES // 2), deadline=10000, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(args=PAYLOADS)
def test_the_stores_sql_reads_a_payload_as_read_job_does(pg_url, args):  # noqa: F811
    """`has_open_jobs` (SQL, never decoding) waits on a job exactly when `read_job` (Python)
    accepts its payload: what one takes for a cell the other does too."""
    if pg_url not in _STORES:
        _STORES[pg_url] = Store(pg_url)
        ensure_schema(_STORES[pg_url])
    store = _STORES[pg_url]
    raw = _dumps(args)
    assume("\\u0000" not in raw)  # jsonb refuses NUL: no row can hold one
    eid = args.get("experiment_id") if isinstance(args, dict) else None
    with store.writing() as connection:
        connection.execute(text("DELETE FROM procrastinate_jobs"))
        connection.execute(text(
            "INSERT INTO procrastinate_jobs (queue_name, task_name, args) "
            "VALUES ('parley-default', :task, CAST(:args AS jsonb))"),
            {"task": pool_store.TASK, "args": raw})
    try:
        read_job(args)
        accepted = True
    except PoisonJob:
        accepted = False
    if isinstance(eid, str) and eid.isprintable():  # ids are printable; SQL does not check it
        assert pool_store.has_open_jobs(store, eid) == accepted
        assert pool_store.refused_jobs(store, eid, (2**31 - 1,) * 3) == (not accepted)
    assert len(pool_store.unheld_jobs(store)) == 0  # only running jobs: none here
