"""Notifications (`PARLEY_NOTIFY_URL`, DESIGN 2.14) against a receiver on loopback: one JSON
POST when an experiment completes, stops or fails and when a gate fails; bounded retries;
never a key or a prompt; the endpoints' network rules; a failed notification never fails the
experiment."""
from __future__ import annotations

import json
import logging
import threading

import pytest
from loopback import LoopbackHandler, LoopbackServer
from waiting import wait_for

import engine.experiments as ex
from engine.cli import main
from engine.llm.notify import NOTIFY_ENV, notify, notify_url, send
from engine.models import ConfigError

KEY = "sk-test-notify-0123456789abcdef0123"
SPEC = {"name": "nightly", "repeats": 1,
        "questions": [{"question": "What is the secret plan number?", "expected": "4"},
                      {"question": "What is 3 plus 3?", "expected": "6"}],
        "configs": [{"protocol": "vote", "label": "vote", "model": "simulated"}]}


class Receiver(LoopbackServer):
    """Answers each POST with the next status of `statuses` (the last one repeats) and keeps
    every body it received."""

    def __init__(self, statuses=(200,)):
        class Handler(LoopbackHandler):
            def do_POST(self):  # noqa: N802
                server: Receiver = self.server  # type: ignore[assignment]
                body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                with server.lock:
                    server.bodies.append(json.loads(body))
                    server.headers.append(dict(self.headers))
                    status = server.statuses[min(len(server.bodies), len(server.statuses)) - 1]
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
        super().__init__(Handler)
        self.statuses, self.bodies, self.headers = list(statuses), [], []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"{self.origin}/hook"


def test_a_completed_experiment_posts_one_notice_without_keys_or_prompts(store, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with Receiver() as receiver:
        monkeypatch.setenv(NOTIFY_ENV, receiver.url)
        experiment_id = ex.create(store, SPEC)
        assert ex.run_experiment(store, experiment_id).status == "completed"
        wait_for(lambda: receiver.bodies, "the notice")
    (notice,) = receiver.bodies
    assert notice["event"] == "experiment" and notice["status"] == "completed"
    assert notice["experiment_id"] == experiment_id and notice["name"] == "nightly"
    assert notice["counts"] == {"done": 2, "total": 2, "failed": 0, "interrupted": 0}
    assert notice["spend_usd"] == 0 and "2/2 runs done" in notice["summary"]
    assert receiver.headers[0]["Content-Type"] == "application/json"
    sent = json.dumps(receiver.bodies) + json.dumps(receiver.headers)
    assert KEY not in sent and "secret plan" not in sent


def test_a_stopped_experiment_says_who_stopped_it(store, monkeypatch):
    with Receiver() as receiver:
        monkeypatch.setenv(NOTIFY_ENV, receiver.url)
        experiment_id = ex.create(store, SPEC)
        stop = threading.Event()
        stop.set()
        assert ex.run_experiment(store, experiment_id, stop_event=stop).status == "stopped"
        wait_for(lambda: receiver.bodies, "the notice")
    assert receiver.bodies[0]["status"] == "stopped"
    assert receiver.bodies[0]["stopped_by"] == "a person"


def test_failures_are_retried_a_bounded_number_of_times_and_never_fatal(store, monkeypatch,
                                                                         caplog):
    with Receiver(statuses=(500, 503, 200)) as receiver:
        assert send(receiver.url, {"event": "x"}, backoff=0.01)
        assert len(receiver.bodies) == 3
    with Receiver(statuses=(500,)) as receiver:
        monkeypatch.setenv(NOTIFY_ENV, receiver.url)
        experiment_id = ex.create(store, SPEC)
        with caplog.at_level(logging.WARNING, logger="engine.llm.notify"):
            assert ex.run_experiment(store, experiment_id).status == "completed"
        assert len(receiver.bodies) == 3  # one POST and two retries, then given up
    assert any("not sent: HTTP 500" in r.getMessage() for r in caplog.records)
    with Receiver(statuses=(400,)) as receiver:
        assert not send(receiver.url, {"event": "x"}, backoff=0.01)
        assert len(receiver.bodies) == 1  # the receiver refuses it: no retry


@pytest.mark.parametrize("url, why", [
    ("http://169.254.169.254/hook", "metadata"),
    ("http://[::ffff:169.254.169.254]/hook", "metadata"),
    ("http://metadata.google.internal/x", "metadata"),
    ("http://user:pw@127.0.0.1:9/hook", "user:password"),
    ("ftp://127.0.0.1/hook", "only http and https"),
    ("http://127.0.0.1:9/hook?token=abc", "token")])
def test_the_address_obeys_the_endpoints_network_rules(url, why, store, monkeypatch):
    with pytest.raises(ConfigError, match=why):
        notify_url({NOTIFY_ENV: url})
    monkeypatch.setenv(NOTIFY_ENV, url)
    assert notify({"event": "x"}) is False  # refused, logged, not raised
    experiment_id = ex.create(store, SPEC)
    assert ex.run_experiment(store, experiment_id).status == "completed"


def test_the_address_comes_from_secrets_when_the_environment_has_none():
    assert notify_url({}, {"parley": {"notify_url": "https://hooks.example/x/"}}) == \
        "https://hooks.example/x"
    assert notify_url({}, {}) is None


def test_a_failed_gate_posts_a_notice_a_passed_one_does_not(store, monkeypatch, capsys):
    spec = {**SPEC, "configs": [{"protocol": "vote", "label": "vote",
                                 "model": "simulated?seed=1"}]}
    baseline = ex.create(store, spec)
    ex.run_experiment(store, baseline)
    candidate = ex.create(store, {**spec, "questions": SPEC["questions"][1:]})
    ex.run_experiment(store, candidate)
    with Receiver() as receiver:
        monkeypatch.setenv(NOTIFY_ENV, receiver.url)
        assert main(["gate", candidate, "--baseline", baseline, "--db", store.url]) == 1
        wait_for(lambda: receiver.bodies, "the notice")
        (notice,) = receiver.bodies
        assert notice["event"] == "gate" and notice["status"] == "failed"
        assert notice["experiment_id"] == candidate and notice["baseline_id"] == baseline
        assert "secret plan" not in json.dumps(notice)  # a missing question is counted
        assert "missing question" in notice["summary"]
        assert main(["gate", baseline, "--baseline", baseline + "x", "--db", store.url]) == 2
        assert len(receiver.bodies) == 1
