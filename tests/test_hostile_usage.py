"""A priced endpoint that misbehaves (DESIGN 2.11 and 4): the usage its replies report, the
limiter it feeds, its 429s and its silences. Each case runs over HTTP to the loopback
OpenAI-compatible server (`openai_stub`), registered as an endpoint priced at $1,000 per
million tokens each way, through the CLI (`python -m engine run`, in process) or an
experiment where it fits:

- usage read once and checked: -200, all zero, 10**30, NaN, -10**30, -5000, strings, floats,
  booleans, one side missing, a list where the object belongs: the replies stay good (the run
  completes), each turn is estimated from the text with a warning saying what the server
  reported, the cost is known and above $0, no total is negative and nothing overflows;
- the limiter settles only sane figures and clamps what it reads: 10**30 does not jam later
  calls, -10**30 does not turn the limit off, a bucket left in absurd debt (in this process, or
  on PostgreSQL by another) does not hold the endpoint shut;
- the wait for a slot counts inside the call's timeout: a 429 asking for 300 s under a 5 s
  timeout ends the call within it, saying so; a Stop (the run's stop_event, or a stop through
  the store) ends a run waiting on the limiter;
- a call that reached the server and never came back is billed its estimated input tokens
  for every attempt that reached it; one that never connected costs a known $0;
- a run's totals are clamped as its turns are: never negative, never an overflow;
- every request asks for a bounded output, and the limiter counts that cap;
- Hypothesis: a usage field drawn from any JSON value never fails a good reply, never gives a
  known $0 for a paid call, and never moves the limiter past its bounds.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import threading
import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage
from loopback import closed_port
from openai_stub import ENDPOINT_SETTINGS, NO_USAGE, SimulatedOpenAI, loopback_only

from engine import Seat, Store, get_model, run_vote
from engine.cli.main import main
from engine.llm import limits
from engine.llm.calls import RunContext
from engine.llm.endpoints import EndpointRegistry
from engine.llm.limits import CallGate, Limiter, Limits, LimitState, Ticket, burst
from engine.llm.prices import (
    REPORTED_USAGE,
    USAGE_ALLOWANCE,
    estimate_usage,
    read_usage,
    usage_bounds,
)
from engine.llm.providers import DEFAULT_MAX_TOKENS, cap_output
from engine.models import Turn
from engine.store.local_limits import LocalLimits
from engine.store.records import INT_MAX

PRICE = 1000.0  # dollars per million tokens, in and out: $0.001 a token
QUESTION = "What is 6 x 7?"
EXAMPLES = int(os.environ.get("PARLEY_FUZZ_EXAMPLES", "60"))

# The shapes of `usage` a hostile or careless server sends, each with what it breaks.
HOSTILE = {
    "negative input": {"prompt_tokens": -200, "completion_tokens": 12, "total_tokens": -188},
    "all zero": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    "10**30": {"prompt_tokens": 10**30, "completion_tokens": 12},
    "NaN": {"prompt_tokens": float("nan"), "completion_tokens": 12},
    "-10**30": {"prompt_tokens": -10**30, "completion_tokens": 12},
    "-5000": {"prompt_tokens": -5000, "completion_tokens": 400},
    "string": {"prompt_tokens": "120", "completion_tokens": 12},
    "float": {"prompt_tokens": 120.5, "completion_tokens": 12},
    "boolean": {"prompt_tokens": True, "completion_tokens": True},
    "one side": {"prompt_tokens": 120},
    "infinity": {"prompt_tokens": float("inf"), "completion_tokens": 12},
    "a list": [120, 12],
    "text": "lots",
    "nested": {"prompt_tokens": {"value": 120}, "completion_tokens": [12]},
}


def endpoint(name: str, url: str, **policy) -> dict:
    """A priced endpoint ($1,000 per million tokens each way) whose requests are counted
    exactly: no structured-output ladder and no grammar probe."""
    return {name: {"base_url": url, "price_input": PRICE, "price_output": PRICE,
                   "structured": "off", "grammar": "off", **policy}}


def unique(prefix: str) -> str:
    """An endpoint name of its own: this process's limiter buckets outlive a test."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def server(monkeypatch):
    loopback_only(monkeypatch, *ENDPOINT_SETTINGS, "PARLEY_PRICES")
    with SimulatedOpenAI() as stub:
        yield stub


@pytest.fixture
def db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    return url


def register(monkeypatch, endpoints: dict) -> EndpointRegistry:
    monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps(endpoints))
    return EndpointRegistry.from_settings(os.environ)


def cli_run(db: str, protocol: str, model: str, *flags: str) -> dict:
    """`python -m engine run PROTOCOL ...` in process; the stored run with its turns."""
    frame = Store(db).runs()
    before = set(frame["id"]) if "id" in frame else set()
    code = main(["run", protocol, QUESTION, "--db", db, "--model", model, *flags])
    runs = Store(db).runs()
    new = [run_id for run_id in runs["id"] if run_id not in before]
    assert len(new) == 1, (code, runs)
    stored = Store(db).get(new[0])
    stored["exit"] = code
    return stored


def paid(cost: float | None, tokens_in: int, tokens_out: int) -> bool:
    """A known cost at $1,000 per million tokens each way, above $0."""
    return cost is not None and cost > 0 and math.isclose(
        cost, (tokens_in + tokens_out) * PRICE / 1e6, rel_tol=1e-9)


# ------------------------------------------------------------------ 1. usage read once, checked
def reply(usage, *, content: str = "ANSWER: 42", reported: bool = True) -> AIMessage:
    """A reply as `get_model`'s OpenAI models hand it over (the usage as sent), or as another
    provider's (`usage_metadata`)."""
    if reported:
        return AIMessage(content=content, response_metadata={REPORTED_USAGE: usage})
    message = AIMessage(content=content)
    message.usage_metadata = usage  # as a provider's own code may set it: unchecked
    return message


PROMPT = [{"role": "user", "content": "x" * 400}]


@pytest.mark.parametrize("shape", list(HOSTILE))
def test_a_hostile_usage_is_estimated_with_a_warning_naming_it(shape):
    usage = read_usage(reply(HOSTILE[shape]), PROMPT, "ANSWER: 42", 1024)
    assert usage.estimated and (usage.tokens_in, usage.tokens_out) == \
        estimate_usage(PROMPT, "ANSWER: 42")
    assert "not believed" in usage.warning and "it reported" in usage.warning
    shown = json.dumps(HOSTILE[shape])[:40]
    assert shown[:20] in usage.warning, usage.warning  # what the server sent, said


def test_a_sane_usage_is_believed_and_its_bounds_follow_the_call():
    good = read_usage(reply({"prompt_tokens": 120, "completion_tokens": 12}), PROMPT, "A: 1",
                      1024)
    assert (good.tokens_in, good.tokens_out, good.estimated, good.warning) == \
        (120, 12, False, "")
    # a cached prompt may report no input; a reply with no text may report no output
    assert not read_usage(reply({"prompt_tokens": 0, "completion_tokens": 5}), PROMPT, "A: 1",
                          1024).estimated
    assert not read_usage(reply({"prompt_tokens": 90, "completion_tokens": 0}, content=""),
                          PROMPT, "", 1024).estimated
    # no output for a reply with text is not believed, nor anything past the call's bounds
    assert read_usage(reply({"prompt_tokens": 90, "completion_tokens": 0}), PROMPT, "A: 1",
                      1024).estimated
    most_in, most_out = usage_bounds(PROMPT, "A: 1", 1024)
    assert (most_in, most_out) == (2 * 400 + USAGE_ALLOWANCE, 2 * 1024 + USAGE_ALLOWANCE)
    assert not read_usage(reply({"prompt_tokens": most_in, "completion_tokens": most_out}),
                          PROMPT, "A: 1", 1024).estimated
    assert read_usage(reply({"prompt_tokens": most_in + 1, "completion_tokens": 1}),
                      PROMPT, "A: 1", 1024).estimated
    # no usage at all: estimated, as before, with nothing to warn about
    silent = read_usage(reply(None), PROMPT, "A: 1", 1024)
    assert silent.estimated and silent.warning == ""


def test_another_providers_usage_metadata_is_checked_alike():
    for bad in ({"input_tokens": float("nan"), "output_tokens": 3},
                {"input_tokens": -10**30, "output_tokens": 3}, {"input_tokens": 4}):
        usage = read_usage(reply(bad, reported=False), PROMPT, "A: 1", 0)
        assert usage.estimated and "not believed" in usage.warning
    sane = read_usage(reply({"input_tokens": 100, "output_tokens": 3}, reported=False),
                      PROMPT, "A: 1", 0)
    assert (sane.tokens_in, sane.tokens_out, sane.estimated) == (100, 3, False)


@pytest.mark.parametrize("shape", ["negative input", "all zero", "10**30", "NaN", "-10**30",
                                   "-5000", "string", "one side", "a list"])
def test_hostile_usage_never_makes_a_paid_run_free_or_failed(shape, server, db, monkeypatch):
    """The issue's shapes through the CLI: three good answers make a completed run whose cost
    is known and above $0; each turn is estimated with a warning; no negative total, no
    OverflowError (the run is stored `completed`, not lost as `interrupted`)."""
    name = unique("priced")
    register(monkeypatch, endpoint(name, server.base_url))
    server.usage = HOSTILE[shape]
    run = cli_run(db, "vote", f"openai:m?endpoint={name}")
    assert run["exit"] == 0 and run["status"] == "completed" and run["degraded"] == 0
    assert run["tokens_in"] > 0 and run["tokens_out"] > 0
    assert paid(run["cost_usd"], run["tokens_in"], run["tokens_out"])
    for turn in run["turns"]:
        assert turn["status"] == "ok" and turn["usage_estimated"]
        assert paid(turn["cost_usd"], turn["tokens_in"], turn["tokens_out"])
        assert any("not believed" in w for w in turn["warnings"]), turn["warnings"]
    listed = Store(db).runs(ids=[run["id"]]).iloc[0]
    assert listed["tokens_in"] == run["tokens_in"] > 0 and listed["cost_usd"] > 0


def test_a_server_that_reports_no_usage_is_estimated_without_a_warning(server, db,
                                                                      monkeypatch):
    name = unique("silent")
    register(monkeypatch, endpoint(name, server.base_url))
    server.usage = NO_USAGE
    run = cli_run(db, "vote", f"openai:m?endpoint={name}")
    assert run["status"] == "completed" and paid(run["cost_usd"], run["tokens_in"],
                                                  run["tokens_out"])
    assert all(t["usage_estimated"] and not t["warnings"] for t in run["turns"])


def test_an_experiment_over_a_hostile_endpoint_is_paid_for_in_every_cell(server, db,
                                                                        monkeypatch, tmp_path):
    """An experiment whose server reports negative usage: every cell completes, each run's
    cost is known and above $0, and the experiment's spend is their sum."""
    name = unique("exp")
    register(monkeypatch, endpoint(name, server.base_url))
    server.usage = HOSTILE["-5000"]
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({
        "name": "hostile usage", "questions": [f"Is {n} prime?" for n in (7, 9, 11)],
        "configs": [{"protocol": "vote", "label": "vote",
                     "model": f"openai:m?endpoint={name}"}]}), encoding="utf-8")
    assert main(["experiment", "run", str(spec), "--yes", "--quiet", "--db", db]) == 0
    runs = Store(db).runs()
    assert len(runs) == 3 and set(runs["status"]) == {"completed"}
    assert (runs["cost_usd"] > 0).all() and (runs["tokens_in"] > 0).all()
    for run_id in runs["id"]:
        run = Store(db).get(run_id)
        assert paid(run["cost_usd"], run["tokens_in"], run["tokens_out"])


# ------------------------------------------------------------------ 2. the limiter
def test_the_limiter_settles_at_most_a_calls_estimate_and_clamps_what_it_reads():
    lim = Limits("clamp", tpm=60_000, rpm=600)  # 1,000 tokens and 10 requests a second
    local = Limiter(LocalLimits())
    wait, ticket = local.try_acquire(lim, 500)
    assert wait == 0 and ticket is not None
    local.release(ticket, 10**30)  # absurd: settled as the estimate, no debt
    state = local.held.state("clamp")
    assert 0 <= state.tokens <= burst(60_000)
    wait, ticket = local.try_acquire(lim, 400)
    assert ticket is not None
    local.release(ticket, -10**30)  # absurd the other way: nothing refunded past the bucket
    assert 0 <= state.tokens <= burst(60_000)
    for _ in range(3):  # the limit still binds: the bucket empties, then a call waits
        local.try_acquire(lim, 400)
    assert local.try_acquire(lim, 400)[0] > 0
    # a state in absurd debt, stamped in the future, cooling for ages: clamped on read
    state.tokens, state.requests, state.stamp, state.cool_until = -1e30, float("nan"), 1e30, 1e30
    wait, _ = local.try_acquire(lim, 400)
    assert wait <= limits.LONGEST_COOL_DOWN + 1e-6
    clamped = limits.clamp(lim, LimitState(now=10.0, requests=-5.0, tokens=-1e30, stamp=1e30,
                                           cool_until=float("nan")))
    assert (clamped.requests, clamped.tokens, clamped.stamp, clamped.cool_until) == \
        (0.0, 0.0, 10.0, 0.0)
    assert limits.settled(float("nan"), 300) == 300 and limits.settled(-5, 300) == 0


def tpm_panel(name: str, registry: EndpointRegistry, store=None, **kw):
    voters = [Seat(f"v{i}", f"openai:m?endpoint={name}") for i in range(3)]
    return run_vote(QUESTION, voters=voters, endpoints=registry, store=store, **kw)


def test_a_reply_reporting_10_30_tokens_does_not_jam_later_calls(server, monkeypatch):
    """With `tpm` set, a reply claiming 10**30 tokens leaves the bucket sane: the next run's
    calls go within their 5 s timeout instead of waiting out a 10**30-token debt."""
    name = unique("tpm")
    registry = register(monkeypatch, endpoint(name, server.base_url, tpm=600_000,
                                              max_tokens=200))
    server.usage = {"prompt_tokens": 10**30, "completion_tokens": 10**30}
    first = tpm_panel(name, registry, timeout_per_call=5, retries=0)
    assert all(t.ok and t.usage_estimated for t in first.turns)
    state = registry.capabilities.local_limits.state(name)  # no store: the registry's
    assert 0 <= state.tokens <= burst(600_000, 1)  # no debt
    server.usage = {"prompt_tokens": 100, "completion_tokens": 10}
    clock = time.monotonic()
    second = tpm_panel(name, registry, timeout_per_call=5, retries=0)
    assert all(t.ok and not t.usage_estimated for t in second.turns), \
        [t.error for t in second.turns]
    assert time.monotonic() - clock < 30  # it used to wait forever in gate.acquire


def test_minus_10_30_does_not_turn_the_limit_off(server, monkeypatch):
    """After a run whose replies claim -10**30 tokens, the tokens bucket still spaces the
    calls: two more runs whose replies honestly use their whole estimate (the prompt plus the
    1,000-token cap) go at the rate of 1,500 tokens a second, one bucket at most at once."""
    name = unique("neg")
    registry = register(monkeypatch, endpoint(name, server.base_url, tpm=90_000,
                                              max_tokens=1000))
    server.usage = {"prompt_tokens": -10**30, "completion_tokens": -10**30}
    first = tpm_panel(name, registry, timeout_per_call=60, retries=0)
    assert all(t.ok and t.usage_estimated for t in first.turns)
    state = registry.capabilities.local_limits.state(name)  # no store: the registry's
    assert 0 <= state.tokens <= burst(90_000, 2000)  # not 10**30 tokens of credit
    server.usage = {"prompt_tokens": 1000, "completion_tokens": 900}
    started = len(server.requests)
    for _ in range(2):
        result = tpm_panel(name, registry, timeout_per_call=60, retries=0)
        assert all(t.ok for t in result.turns), [t.error for t in result.turns]
    times = sorted(r["at"] for r in server.requests[started:])
    estimate = limits.estimate_tokens(result.turns[0].messages, 1000)
    assert len(times) == 6
    # the first call may take a full bucket; the other five wait for the rate
    assert times[-1] - times[0] >= (6 * estimate - burst(90_000, estimate)) / 1500 * 0.8


def test_a_bucket_left_in_absurd_debt_in_this_process_does_not_jam(server, monkeypatch):
    """A bucket 10**30 tokens and requests in debt, stamped far in the future (a clock that
    jumped, a bug of an older version): clamped when read, so the calls go at once."""
    name = unique("debt")
    registry = register(monkeypatch, endpoint(name, server.base_url, tpm=600_000, rpm=600))

    def in_debt(state: LimitState) -> None:
        state.requests, state.tokens, state.stamp = -1e30, -1e30, time.monotonic() + 1e9
    registry.capabilities.local_limits.change(name, in_debt)  # no store: the registry's
    clock = time.monotonic()
    result = tpm_panel(name, registry, timeout_per_call=5, retries=0)
    assert all(t.ok for t in result.turns), [t.error for t in result.turns]
    assert time.monotonic() - clock < 60
    state = registry.capabilities.local_limits.state(name)  # no store: the registry's
    assert state.tokens >= 0 and state.requests >= 0 and state.stamp <= time.monotonic()


def test_a_bucket_left_in_absurd_debt_on_postgresql_does_not_jam(server, monkeypatch):
    from conftest import fresh_pg_url
    from sqlalchemy import text
    url = fresh_pg_url()
    store = Store(url)
    name = unique("pg-debt")
    registry = register(monkeypatch, endpoint(name, server.base_url, tpm=600_000, rpm=600))
    with store.writing() as connection:  # as an older process (or a hand) left it
        connection.execute(text(
            "INSERT INTO endpoint_limits (endpoint, requests, tokens, stamp, cool_until) "
            "VALUES (:e, -1e30, -1e30, 1e15, 0)"), {"e": name})
    clock = time.monotonic()
    result = tpm_panel(name, registry, store=store, timeout_per_call=5, retries=0)
    assert all(t.ok for t in result.turns), [t.error for t in result.turns]
    assert time.monotonic() - clock < 60
    with store.engine.connect() as connection:
        row = connection.execute(text("SELECT requests, tokens, stamp FROM endpoint_limits "
                                      "WHERE endpoint = :e"), {"e": name}).one()
    assert row.tokens >= 0 and row.requests >= 0 and row.stamp < 1e15


def test_a_429_asking_300_s_under_a_5_s_timeout_ends_within_it_saying_so(server, db,
                                                                         monkeypatch):
    """An honest 429 with Retry-After: 300, a 5 s timeout and two retries: the call is not
    held 300 s per retry; it ends at once, its error saying why; the endpoint's other calls
    (its limits cool down for everyone) end as rate limited too, within their timeout."""
    name = unique("r429")
    register(monkeypatch, endpoint(name, server.base_url, rpm=6000))
    server.throttle(3, retry_after=300)
    clock = time.monotonic()
    run = cli_run(db, "vote", f"openai:m?endpoint={name}", "--timeout-per-call", "5",
                  "--retries", "2")
    took = time.monotonic() - clock
    assert took < 30, took  # it held each retry for 300 s before
    refused = [t for t in run["turns"] if "429" in t["error"] or "RateLimit" in t["error"]]
    assert refused and all("Retry-After" in t["error"] and "rate limited" in t["error"]
                           for t in refused)
    assert all("rate limited" in t["error"] for t in run["turns"])
    # each call asked once: none retried, none sent while the endpoint cools down
    assert len(server.requests) <= 3 and all(t["attempts"] == 1 for t in run["turns"])
    assert all(r["status"] == 429 for r in server.requests)
    assert run["status"] == "failed" and "rate limited" in run["error"]


def test_a_429_without_limits_set_is_not_retried_past_the_timeout(server, db, monkeypatch):
    name = unique("r429-free")
    register(monkeypatch, endpoint(name, server.base_url))
    server.throttle(1, retry_after=300)
    run = cli_run(db, "single", f"openai:m?endpoint={name}", "--timeout-per-call", "5",
                  "--retries", "2")
    turn = run["turns"][0]
    assert turn["attempts"] == 1 and "Retry-After" in turn["error"]
    assert len(server.requests) == 1 and turn["cost_usd"] == 0.0  # refused: not billed


def test_a_call_that_cannot_get_a_slot_in_time_is_rate_limited(server, monkeypatch):
    """rpm 1: one request a minute. With a 2 s timeout the second and third voters cannot get
    a slot in time: each is a degraded turn saying "rate limited", at once (their wait is
    known to pass the timeout), and the run completes on the first voter's answer."""
    name = unique("rpm1")
    registry = register(monkeypatch, endpoint(name, server.base_url, rpm=1))
    clock = time.monotonic()
    result = tpm_panel(name, registry, timeout_per_call=2, retries=1)
    assert time.monotonic() - clock < 30
    assert sum(t.ok for t in result.turns) == 1
    limited = [t for t in result.turns if not t.ok]
    assert len(limited) == 2 and all(t.error.startswith("RateLimited: rate limited: endpoint")
                                     and "requests per minute (1)" in t.error
                                     for t in limited)
    assert all(t.attempts == 1 and t.cost_usd == 0.0 for t in limited)
    assert len(server.requests) == 1


def waiting_run(server, monkeypatch, store, **kw):
    """A vote whose first voter's call takes the endpoint's one request a minute and whose
    other two wait for theirs (a 120 s timeout lets them wait), run on a thread."""
    name = unique("wait")
    registry = register(monkeypatch, endpoint(name, server.base_url, rpm=1))
    done: dict = {}

    def go():
        try:
            done["result"] = tpm_panel(name, registry, store=store, timeout_per_call=120,
                                       retries=0, **kw)
        except BaseException as exc:  # noqa: BLE001 - what the run raised, for the test
            done["error"] = exc
        done["at"] = time.monotonic()
    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not server.requests:
        time.sleep(0.05)
    assert server.requests, "the first call never went"
    time.sleep(1.5)  # the two others are now waiting on the limiter
    assert thread.is_alive()
    return thread, done


def test_stop_ends_a_run_waiting_on_the_limiter_at_once(server, monkeypatch, tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    stop = threading.Event()
    thread, done = waiting_run(server, monkeypatch, store, stop_event=stop)
    pressed = time.monotonic()
    stop.set()
    thread.join(60)
    assert not thread.is_alive()
    took = done["at"] - pressed
    print(f"\nStop pressed: the run waiting on the limiter ended in {took:.2f} s")
    assert took < 5, took  # within about a second (the waits look at least once a second)
    run = store.runs().iloc[0]
    assert run["status"] == "interrupted" and len(server.requests) == 1


def test_a_stop_through_the_store_ends_a_run_waiting_on_the_limiter(server, monkeypatch,
                                                                    tmp_path):
    """A stop from another process (the Runs page of another app, `astop` of a pool) marks
    the run `interrupted` in the store; the run waiting on the limiter sees it and ends."""
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    thread, done = waiting_run(server, monkeypatch, store)
    run_id = store.runs().iloc[0]["id"]
    pressed = time.monotonic()
    assert store.stop_run(run_id)
    thread.join(60)
    assert not thread.is_alive()
    took = done["at"] - pressed
    print(f"\nStopped through the store: the run waiting on the limiter ended in {took:.2f} s")
    assert took < 5, took
    assert store.get(run_id)["status"] == "interrupted" and len(server.requests) == 1


# ------------------------------------------------------------------ 1. calls with no answer
def test_timeouts_bill_the_estimated_input_of_every_attempt(server, db, monkeypatch):
    """A priced endpoint that reads the prompt and answers after 5 s, `--timeout-per-call 2
    --retries 2`: three requests reached it; the run costs their estimated input tokens, not
    $0, flagged estimated, each timeout kept as the error."""
    name = unique("slow")
    register(monkeypatch, endpoint(name, server.base_url))
    server.delay = 5.0
    run = cli_run(db, "single", f"openai:m?endpoint={name}", "--timeout-per-call", "2",
                  "--retries", "2")
    turn = run["turns"][0]
    assert len(server.requests) == 3 and turn["attempts"] == 3
    each = estimate_usage(turn["messages"], "")[0]
    assert (turn["tokens_in"], turn["tokens_out"]) == (3 * each, 0)
    assert turn["usage_estimated"] and turn["status"] == "degraded"
    assert "Timeout" in turn["error"] or "did not answer in time" in turn["error"]
    assert any("3 attempts reached the server" in w for w in turn["warnings"])
    assert paid(turn["cost_usd"], 3 * each, 0)
    assert run["status"] == "failed" and paid(run["cost_usd"], 3 * each, 0)


def test_a_connection_cut_after_sending_is_billed(server, db, monkeypatch):
    name = unique("cut")
    register(monkeypatch, endpoint(name, server.base_url))
    server.cut = True
    run = cli_run(db, "single", f"openai:m?endpoint={name}", "--retries", "1")
    turn = run["turns"][0]
    assert len(server.requests) == 2 and turn["attempts"] == 2
    each = estimate_usage(turn["messages"], "")[0]
    assert turn["tokens_in"] == 2 * each and turn["usage_estimated"]
    assert paid(run["cost_usd"], 2 * each, 0)


def test_a_call_that_never_connected_costs_a_known_zero(db, monkeypatch):
    loopback_only(monkeypatch, *ENDPOINT_SETTINGS, "PARLEY_PRICES")
    name = unique("refused")
    register(monkeypatch, endpoint(name, f"http://127.0.0.1:{closed_port()}/v1"))
    run = cli_run(db, "single", f"openai:m?endpoint={name}", "--retries", "1")
    turn = run["turns"][0]
    assert turn["attempts"] == 2 and "Connection" in turn["error"]
    assert (turn["tokens_in"], turn["tokens_out"], turn["usage_estimated"]) == (0, 0, False)
    assert turn["cost_usd"] == 0.0 and run["cost_usd"] == 0.0


def test_a_retry_that_answers_bills_the_attempt_before_it(server, monkeypatch):
    """One timeout, then an answer: the reported usage of the answer plus the estimated
    input of the attempt that got none, flagged estimated, with a warning saying so."""
    name = unique("retry")
    registry = register(monkeypatch, endpoint(name, server.base_url))
    server.delay = 3.0

    def answer_from_now_on():  # once the first request is in, the next is answered at once
        while not server.requests:
            time.sleep(0.01)
        server.delay = 0.0
    threading.Thread(target=answer_from_now_on, daemon=True).start()
    model = get_model(f"openai:m?endpoint={name}", endpoints=registry)
    ctx = RunContext("test", timeout=1.5, retries=1, backoff=0.5)
    turn = asyncio.run(ctx.call(Seat("s", model), [{"role": "user", "content": "y" * 400}],
                                phase="p"))
    assert turn.ok and turn.attempts == 2 and turn.usage_estimated
    assert turn.tokens_in > 100 + 1  # the answer's reported input, plus the lost attempt's
    assert any("1 attempt reached the server" in w for w in turn.warnings)


# ------------------------------------------------------------------ 3. run totals
@pytest.mark.parametrize("tokens", [-10**30, 10**30, -5000])
def test_run_totals_are_clamped_as_turn_rows_are(backend, tokens):
    """A result whose turns carry absurd counts (as one saved from Python code may) is
    stored `completed` with totals in 0..INT_MAX, never an OverflowError, never negative."""
    result = run_vote(QUESTION, voters=[Seat(n) for n in "abc"])
    for turn in result.turns:
        turn.tokens_in, turn.tokens_out = tokens, tokens
    run_id = backend.save(result)
    row = backend.get(run_id)
    expected = 0 if tokens < 0 else INT_MAX
    assert row["status"] == "completed"
    assert (row["tokens_in"], row["tokens_out"]) == (expected, expected)
    assert all(t["tokens_in"] == expected for t in row["turns"])
    # a run ended from its stored turns (stopped, failed) totals them by the same rule
    other = backend.start_run("vote", QUESTION)
    backend.add_turn(other, Turn(index=0, phase="p", seat="s", tokens_in=tokens,
                                 tokens_out=tokens))
    backend.end_run(other, "interrupted", "stopped")
    assert backend.get(other)["tokens_in"] == expected


# ------------------------------------------------------------------ 6. a bounded output
def test_every_request_asks_for_a_bounded_output_and_the_limiter_counts_it(server,
                                                                          monkeypatch):
    name = unique("cap")
    registry = register(monkeypatch, endpoint(name, server.base_url, tpm=600_000))
    model = get_model(f"openai:m?endpoint={name}", endpoints=registry)
    assert model.parley_call["max_tokens"] == DEFAULT_MAX_TOKENS
    gate = CallGate(model.parley_call, None, 10.0)
    assert gate.limits is not None and gate.limits.max_tokens == DEFAULT_MAX_TOKENS
    seat = get_model(f"openai:m?endpoint={name}&max_tokens=77", endpoints=registry)
    assert CallGate(seat.parley_call, None, 10.0).limits.max_tokens == 77
    tpm_panel(name, registry, timeout_per_call=10, retries=0)
    assert all(r["body"].get("max_tokens") == DEFAULT_MAX_TOKENS for r in server.requests)
    # the other providers' clients get theirs in the field each reads (their packages are
    # optional: the options get_model hands them)
    for provider, field, own in (("anthropic", "max_tokens", {}), ("ollama", "num_predict", {}),
                                 ("anthropic", "max_tokens", {"max_tokens": 55}),
                                 ("ollama", "num_predict", {"num_predict": 55})):
        options = dict(own)
        cap = cap_output(provider, options, None, DEFAULT_MAX_TOKENS)
        assert options[field] == cap == own.get(field, DEFAULT_MAX_TOKENS)


# ------------------------------------------------------------------ 8. any JSON value
JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(min_value=-10**40, max_value=10**40) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                  max_size=4),
    max_leaves=12)
COUNT = st.one_of(JSON, st.integers(min_value=-10, max_value=3000))
USAGE = st.one_of(
    JSON,
    st.fixed_dictionaries({}, optional={"prompt_tokens": COUNT, "completion_tokens": COUNT,
                                        "total_tokens": COUNT,
                                        "prompt_tokens_details": JSON,
                                        "completion_tokens_details": JSON}))


FUZZ_ENDPOINT = "fuzz-usage"  # one bucket for every example: it must stay within its bounds


@pytest.fixture(scope="module")
def fuzz_seat():
    """A seat calling one loopback server through a priced endpoint with `tpm` set (its
    model made once: the examples differ only in what the server reports)."""
    with pytest.MonkeyPatch.context() as patch, SimulatedOpenAI() as stub:
        loopback_only(patch, *ENDPOINT_SETTINGS, "PARLEY_PRICES")
        registry = EndpointRegistry.from_settings({"PARLEY_ENDPOINTS": json.dumps(endpoint(
            FUZZ_ENDPOINT, stub.base_url, tpm=6_000_000, max_tokens=500))})
        model = get_model(f"openai:m?endpoint={FUZZ_ENDPOINT}", endpoints=registry)
        yield stub, Seat("s", model)


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(usage=USAGE)
def test_any_json_usage_never_fails_a_good_reply_nor_makes_it_free(usage, fuzz_seat):
    server, seat = fuzz_seat
    server.usage = usage
    ctx = RunContext("test", timeout=30, retries=0)
    turn = asyncio.run(ctx.call(seat, [{"role": "user", "content": "Is 7 prime? " * 8}],
                                phase="p"))
    assert turn.ok, turn.error
    assert turn.tokens_in >= 0 and turn.tokens_out >= 0 and turn.tokens_in + turn.tokens_out
    assert paid(turn.cost_usd, turn.tokens_in, turn.tokens_out)
    most_in, most_out = usage_bounds(turn.messages, turn.reply, 500)
    assert turn.tokens_in <= most_in and turn.tokens_out <= most_out
    if turn.usage_estimated:
        assert usage is None or any("not believed" in w for w in turn.warnings)
    state = seat.model.parley_call["capabilities"].local_limits.state(FUZZ_ENDPOINT)
    assert state.tokens is not None and 0 <= state.tokens <= burst(6_000_000)
    assert state.requests is None and state.cool_until <= time.monotonic()


def test_a_ticket_settles_within_its_estimate_whatever_it_is_handed():
    @given(st.one_of(st.integers(min_value=-10**40, max_value=10**40),
                     st.floats(allow_nan=True, allow_infinity=True)))
    @settings(max_examples=EXAMPLES, deadline=None, database=None)
    def check(used):
        lim = Limits("settle-any", tpm=60_000)
        local = Limiter(LocalLimits())
        _, ticket = local.try_acquire(lim, 700)
        assert isinstance(ticket, Ticket)
        local.release(ticket, used)
        tokens = local.held.state("settle-any").tokens
        assert tokens is not None and 0 <= tokens <= burst(60_000)
    check()
