"""Endpoint limits (engine.llm.limits): the bucket arithmetic, the in-process limiter (SQLite or
no store), and the limits every process shares through PostgreSQL: two processes calling the
loopback server through one endpoint stay within its requests per minute (plus one burst) in
any window, and a 429 one of them receives holds both back for its Retry-After.

The PostgreSQL tests need PARLEY_TEST_PG_URL (`.ci/run` starts a server and sets it)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from openai_stub import SimulatedOpenAI

from engine import Seat, Store, run_panel
from engine.llm.endpoints import EndpointRegistry
from engine.llm.limits import (
    CallGate,
    Limits,
    LimitState,
    admit,
    burst,
    cool,
    estimate_tokens,
    retry_after,
    settle,
)
from engine.models import ConfigError

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ the arithmetic
def test_a_requests_bucket_lets_one_burst_go_then_the_rate():
    limits = Limits("e", rpm=120)
    state = LimitState(now=100.0)
    assert burst(120) == 2.0 and burst(10) == 1.0 and burst(6000, need=500) == 500
    assert [admit(limits, state, 1, False) for _ in range(2)] == [0.0, 0.0]
    assert admit(limits, state, 1, False) == pytest.approx(0.5)  # 2 a second
    state.now = 100.25
    assert admit(limits, state, 1, False) == pytest.approx(0.25)
    state.now = 100.5
    assert admit(limits, state, 1, False) == 0.0
    state.now = 200.0  # a long pause refills one burst, never more
    assert [admit(limits, state, 1, False) for _ in range(3)][-1] > 0


def test_any_window_holds_the_rate_plus_one_burst():
    limits, state, now, times = Limits("e", rpm=600), LimitState(now=0.0), 0.0, []
    while now < 10.0:
        state.now = now
        wait = admit(limits, state, 1, False)
        if wait == 0:
            times.append(now)
        now += 0.013 if wait == 0 else wait
    assert len(times) >= 95  # 10 a second, for 10 s
    for width in (0.5, 1.0, 3.0):
        most = max(sum(1 for t in times if start <= t < start + width) for start in times)
        assert most <= 10 * width + burst(600) + 1e-9


def test_a_tokens_bucket_charges_the_estimate_then_settles_the_actual():
    limits = Limits("e", tpm=6000)  # 100 tokens a second, a bucket of 100
    state = LimitState(now=0.0)
    assert admit(limits, state, 60, False) == 0.0
    assert admit(limits, state, 60, False) == pytest.approx(0.2)  # 40 left, 20 short
    settle(limits, state, -50)  # the call used 10, not 60: refunded
    assert state.tokens == pytest.approx(90)
    assert admit(limits, state, 60, False) == 0.0
    settle(limits, state, 400)  # far more than estimated: a debt the next calls wait out
    assert admit(limits, state, 10, False) == pytest.approx((10 + 370) / 100)
    big = LimitState(now=0.0)  # one call bigger than the bucket waits for a full bucket only
    assert admit(limits, big, 500, False) == 0.0 and big.tokens == pytest.approx(0.0)


def test_a_cool_down_holds_every_call_and_empties_the_requests_bucket():
    limits = Limits("e", rpm=120)
    state = LimitState(now=10.0)
    cool(limits, state, 3.0)
    assert admit(limits, state, 1, False) == pytest.approx(3.0)
    state.now = 13.0
    assert state.requests == 0.0
    assert admit(limits, state, 1, False) == 0.0  # 3 s refilled it: 6 requests, capped at 2


def test_shared_state_counts_calls_in_flight():
    limits = Limits("e", concurrency=2)
    assert admit(limits, LimitState(now=0.0, in_flight=1), 1, True) == 0.0
    assert admit(limits, LimitState(now=0.0, in_flight=2), 1, True) > 0
    assert admit(limits, LimitState(now=0.0, in_flight=9), 1, False) == 0.0  # in-process


class _Response:
    def __init__(self, status: int, headers: dict):
        self.status_code, self.headers = status, headers


class _StatusError(Exception):
    def __init__(self, status: int, headers: dict | None = None):
        super().__init__("refused")
        self.status_code = status
        self.response = _Response(status, headers or {})


def _cooled_for(exc: BaseException) -> float | None:
    """The seconds a call's gate cools its endpoint down after `exc` (None: not at all)."""
    gate = CallGate({"gate": "e", "rpm": 60}, None, 10.0)
    gate.refused(exc)
    state = gate.limiter.held.state("e")
    return None if state is None else round(state.cool_until - state.now, 6)


def test_a_429_cools_down_for_its_retry_after():
    assert _cooled_for(_StatusError(429, {"retry-after": "7"})) == 7.0
    assert _cooled_for(_StatusError(429, {"retry-after-ms": "1500"})) == 1.5
    assert _cooled_for(_StatusError(429, {"retry-after": "soon"})) == 2.0
    assert _cooled_for(_StatusError(429)) == 2.0
    assert _cooled_for(_StatusError(429, {"retry-after": "99999"})) == 300.0
    assert _cooled_for(_StatusError(500)) is None
    assert _cooled_for(ValueError("no")) is None
    assert estimate_tokens([{"role": "user", "content": "x" * 400}], 50) == 151


def test_only_a_retry_after_the_server_gave_is_its_ask():
    """A 429's cool-down defaults to 2 s, but only a header the server sent says how long it
    asked for (what a call compares with its timeout before retrying)."""
    assert retry_after(_StatusError(429, {"retry-after": "300"})) == 300.0
    assert retry_after(_StatusError(429, {"retry-after": "NaN"})) is None
    assert retry_after(_StatusError(429)) is None and _cooled_for(_StatusError(429)) == 2.0
    assert retry_after(_StatusError(503, {"retry-after": "9"})) is None


def test_a_wait_says_what_holds_it():
    limits = Limits("e", rpm=60, tpm=600, concurrency=1)
    assert admit(limits, LimitState(now=0.0, cool_until=5.0), 1, True).reason == "cool-down"
    assert admit(limits, LimitState(now=0.0, in_flight=1), 1, True).reason == "in flight"
    assert admit(limits, LimitState(now=0.0, requests=0.0), 1, True).reason == "requests"
    assert admit(limits, LimitState(now=0.0, tokens=0.0), 5, True).reason == "tokens"


def test_the_registry_checks_and_shows_rpm_and_tpm():
    registry = EndpointRegistry.from_settings({"PARLEY_ENDPOINTS": json.dumps(
        {"lab": {"base_url": "http://127.0.0.1:9/v1", "rpm": 120, "tpm": 90000,
                 "concurrency": 4}})})
    assert registry.get("lab").policy() == {"concurrency": 4, "rpm": 120, "tpm": 90000}
    assert registry.describe()[0]["call policy"] == "concurrency 4, rpm 120, tpm 90000"
    for bad in (0, -5, 1.5, "120", True):
        with pytest.raises(ConfigError, match="rpm must be a whole number"):
            EndpointRegistry.from_settings({"PARLEY_ENDPOINTS": json.dumps(
                {"lab": {"base_url": "http://127.0.0.1:9/v1", "rpm": bad}})})


# ------------------------------------------------------------------ in one process
def _registry(url: str, **limits) -> EndpointRegistry:
    return EndpointRegistry.from_settings({"PARLEY_ENDPOINTS": json.dumps(
        {"stub": {"base_url": url, **limits}})})


def _panel(model: str, registry: EndpointRegistry, store=None):
    debaters = [Seat(f"d{i}", model) for i in range(3)]
    return run_panel("Is 7 prime?", debaters=debaters, critic=Seat("c", model),
                     judge=Seat("j", model), endpoints=registry, store=store)


def _most_in_window(times: list[float], width: float) -> int:
    times = sorted(times)
    return max(sum(1 for t in times if start <= t < start + width) for start in times)


def test_in_process_an_endpoints_rpm_spaces_the_calls(tmp_path):
    with SimulatedOpenAI() as server:
        # a unique endpoint name: this process's buckets outlive one test
        registry = EndpointRegistry.from_settings({"PARLEY_ENDPOINTS": json.dumps(
            {"stub-rpm": {"base_url": server.base_url, "rpm": 240}})})
        started = time.time()
        result = _panel("openai:m?endpoint=stub-rpm", registry,
                        Store(f"sqlite:///{tmp_path / 'p.db'}"))
        times = [r["at"] for r in server.requests]
    assert all(t.ok for t in result.turns) and len(times) >= 8
    assert _most_in_window(times, 1.0) <= 4 + burst(240) + 1
    assert max(times) - started >= (len(times) - burst(240)) / 4 - 0.1  # the limit did bind


def test_in_process_a_429_holds_the_next_calls_for_its_retry_after():
    with SimulatedOpenAI() as server:
        registry = EndpointRegistry.from_settings({"PARLEY_ENDPOINTS": json.dumps(
            {"stub-429": {"base_url": server.base_url, "concurrency": 3}})})
        server.throttle(1, retry_after=1.5)
        result = _panel("openai:m?endpoint=stub-429", registry)
        requests = list(server.requests)
    assert all(t.ok for t in result.turns)
    refused = [r["at"] for r in requests if r["status"] == 429]
    assert len(refused) == 1
    # the calls sent with the refused one may arrive just after it; then none until 1.5 s
    assert not [r for r in requests if refused[0] + 0.5 < r["at"] < refused[0] + 1.4]
    assert max(r["at"] for r in requests) >= refused[0] + 1.4


# ------------------------------------------------------------------ across processes
@pytest.fixture
def pg_url():
    from conftest import fresh_pg_url
    url = fresh_pg_url()
    Store(url)  # migrated once, before two processes open it
    return url


def _start(model: str, url: str, endpoints: dict, tmp_path: Path, questions: int):
    spec = tmp_path / f"{model}.yaml"
    spec.write_text(json.dumps({
        "questions": [f"Question {model} {i}: is {i + 2} prime?" for i in range(questions)],
        "concurrency": questions,
        "configs": [{"protocol": "panel", "label": model,
                     "model": f"openai:{model}?endpoint=stub"}]}), encoding="utf-8")
    env = {**os.environ, "PARLEY_ENDPOINTS": json.dumps(endpoints), "PYTHONIOENCODING": "utf-8"}
    return subprocess.Popen([sys.executable, "-m", "engine", "experiment", "run", str(spec),
                             "--yes", "--quiet", "--db", url], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(processes) -> None:
    for process in processes:
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, (out, err)


def _by_model(requests: list[dict]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for request in requests:
        out.setdefault(request["body"]["model"], []).append(request["at"])
    return out


def _opening(times: list[float]) -> list[float]:
    """A process's opening calls: those that arrive within 0.1 s of its first. They were
    admitted in turn, but each waits for the process's HTTP client to start, so they may
    arrive together however far apart they were let go."""
    return [t for t in times if t < min(times) + 0.1]


def test_two_processes_share_an_endpoints_rpm(pg_url, tmp_path):
    rpm, questions = 240, 3  # 4 a second, a burst of 4; 3 panels of 8 calls each
    with SimulatedOpenAI() as server:
        endpoints = {"stub": {"base_url": server.base_url, "rpm": rpm}}
        processes = [_start(name, pg_url, endpoints, tmp_path, questions)
                     for name in ("one", "two")]
        _finish(processes)
        requests = list(server.requests)
    times = sorted(r["at"] for r in requests)
    by_model = _by_model(requests)
    assert set(by_model) == {"one", "two"} and len(times) >= 2 * questions * 8
    # both processes called at once: their spans overlap
    spans = [(min(t), max(t)) for t in by_model.values()]
    assert max(s for s, _ in spans) < min(e for _, e in spans)
    # one burst, and arrivals that may lag their admission by up to half a second (a
    # process on a busy machine) on top of the rate
    rate, extra = rpm / 60, burst(rpm) + rpm / 60 * 0.5
    opening = {t for one in by_model.values() for t in _opening(one)}
    steady = [t for t in times if t not in opening]
    for width in (1.0, 2.0, 5.0):
        assert _most_in_window(steady, width) <= rate * width + extra, width
    # the limit did bind: the calls took as long as the rate makes them
    assert steady[-1] - steady[0] >= (len(steady) - extra) / rate - 0.5


def _warm(requests: list[dict]) -> bool:
    """Both processes past their opening calls (see `_opening`): calling steadily."""
    by_model = _by_model(requests)
    return len(by_model) == 2 and all(len(t) > len(_opening(t)) + 2 for t in by_model.values())


def test_a_429_slows_every_process_on_the_endpoint(pg_url, tmp_path):
    retry_after = 3.0
    with SimulatedOpenAI() as server:
        endpoints = {"stub": {"base_url": server.base_url, "rpm": 600, "concurrency": 4}}
        processes = [_start(name, pg_url, endpoints, tmp_path, 4) for name in ("one", "two")]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not _warm(list(server.requests)):
            time.sleep(0.02)
        server.throttle(1, retry_after=retry_after)
        _finish(processes)
        requests = list(server.requests)
    refused = [r["at"] for r in requests if r["status"] == 429]
    assert len(refused) == 1
    # calls let go before the 429 was seen may still arrive after it (a process on a busy
    # machine may lag a second); then nothing from either process until the cool-down ends
    quiet = [r for r in requests if refused[0] + 1.0 < r["at"] < refused[0] + retry_after - 0.1]
    assert quiet == [], [(round(r["at"] - refused[0], 3), r["body"]["model"]) for r in quiet]
    after = _by_model([r for r in requests if r["at"] >= refused[0] + retry_after - 0.1])
    assert set(after) == {"one", "two"}  # both went on afterwards
    assert all(r["status"] == 200 for r in requests if r["at"] > refused[0])


def test_a_lapsed_lease_stops_counting(pg_url):
    from engine.llm.limits import Limiter
    from engine.store.limits import change
    from engine.store.local_limits import LocalLimits
    store = Store(pg_url)
    limits = Limits("lapse", concurrency=1, lease=0.2)
    limiter = Limiter(LocalLimits(), store)
    wait, ticket = limiter.try_acquire(limits, 1)
    assert wait == 0 and ticket is not None and ticket.lease_id
    assert limiter.try_acquire(limits, 1)[1] is None  # the one call in flight is taken
    time.sleep(0.3)  # its process "died": the lease lapses
    wait, again = limiter.try_acquire(limits, 1)
    assert wait == 0 and again is not None
    limiter.release(again, 1)
    assert change(store, "lapse", lambda s: s.in_flight) == 0
