"""Hostile input, third pass (issue 32): a test per finding, over loopback servers and on both
store backends (PostgreSQL when PARLEY_TEST_PG_URL names a server).

- a key stored through an error message: a registered endpoint answers 401 with the key it
  was sent; the key must reach no row, export, page, CLI output or log line;
- one long reply failed a whole run on PostgreSQL (a tsvector is refused past 1 MB);
- an imported run counted as an experiment's cell (and the experiment then never ran it);
- an import with an unknown protocol (`brawl`) was accepted.

The poisoned jobs are in test_poison_jobs.py, the redirects in test_redirects.py.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import applied_migrations
from loopback import LoopbackHandler
from openai_stub import loopback_only
from sqlalchemy import text

from engine import ConfigError, Store
from engine.experiments import create, plan, run_experiment
from engine.experiments.runner import pending_cells
from engine.protocols import arun_config, run_sync
from engine.redaction import REDACTED, redact, redact_log_records, secret_values
from engine.store.experiments import progress
from engine.store.search_index import MAX_INDEXED

ROOT = Path(__file__).resolve().parents[1]
# Shaped like no provider's key, so only "every configured key" can catch it.
CANARY = "canary-7f3a9b2c4d5e6f7081929a"
SHAPED = "sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"  # an OpenAI-shaped key nobody configured


class Answers(ThreadingHTTPServer):
    """A chat-completions server on 127.0.0.1 whose every answer is `reply(request)`:
    (status, JSON document). The Authorization header of each request is kept."""

    daemon_threads = True

    def __init__(self, reply):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.reply, self.auth = reply, []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


class _Handler(LoopbackHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 - the handler's name is http.server's
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        self.server.auth.append(key)
        status, document = self.server.reply(key)
        payload = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def echo_the_key(key: str):
    """What a careless proxy answers a refused key with: the key itself, and a key-shaped
    value besides."""
    return 401, {"error": {"message": f"Incorrect API key provided: {key}. Also tried "
                                      f"{SHAPED}; header was 'Authorization: Bearer {key}'",
                           "type": "invalid_request_error", "code": "invalid_api_key"}}


def completion(content: str):
    def reply(_key: str):
        return 200, {"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": content}}],
                     "usage": {"prompt_tokens": 10, "completion_tokens": 10,
                               "total_tokens": 20}}
    return reply


@pytest.fixture
def echo_endpoint(monkeypatch):
    """A registered endpoint whose key lives in a variable with no secret-sounding name."""
    loopback_only(monkeypatch, "OPENAI_API_KEY", "OPENAI_BASE_URL", "PARLEY_ENDPOINTS")
    monkeypatch.setenv("PARLEY_CANARY", CANARY)
    with Answers(echo_the_key) as server:
        monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps(
            {"echo": {"base_url": server.base_url, "key_env": "PARLEY_CANARY"}}))
        yield server


def _everything_stored(store: Store) -> str:
    """Every value of every row of every table, as text."""
    out = []
    with store.engine.connect() as connection:
        for table in ("runs", "turns", "experiments", "search_docs"):
            for row in connection.execute(text(f"SELECT * FROM {table}")):
                out.append(" ".join(str(v) for v in row))
    return "\n".join(out)


# --------------------------------------------------------------------------- finding 1
def test_a_key_stored_through_an_error_message_is_redacted_everywhere(  # noqa: F811
        backend, echo_endpoint, caplog):
    config = {"protocol": "vote", "model": "openai:m?endpoint=echo"}
    result = run_sync(arun_config(config, "Is the key safe?", store=backend, tags=["echo"]))
    assert echo_endpoint.auth and set(echo_endpoint.auth) == {CANARY}  # the key was in play
    row = backend.get(result.run_id)
    assert row["status"] == "failed"
    errors = [t["error"] for t in row["turns"]]
    assert errors and all("401" in e and REDACTED in e for e in errors)
    stored = _everything_stored(backend)
    exports = (backend.export_run(result.run_id) + backend.export_jsonl()
               + backend.runs(with_result=True).to_csv() + backend.turns().to_csv())
    for secret in (CANARY, SHAPED):
        assert secret not in stored and secret not in exports
    if backend.url.startswith("sqlite"):
        db = Path(backend.url.removeprefix("sqlite:///"))
        assert CANARY.encode() not in b"".join(
            p.read_bytes() for p in db.parent.iterdir() if p.is_file())
    shown = subprocess.run([sys.executable, "-m", "engine", "show", result.run_id, "--db",
                            backend.url], cwd=ROOT, env=os.environ.copy(),
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "401" in shown.stdout and CANARY not in shown.stdout + shown.stderr
    # A log line that quotes the error (a worker's, a library's) is redacted as it is made.
    redact_log_records([CANARY])
    caplog.set_level(logging.WARNING)
    logging.getLogger("parley.test").warning("call failed: %s", f"Bearer {CANARY}")
    logging.getLogger("httpx").error("boom %s", SHAPED)
    assert caplog.text and CANARY not in caplog.text and SHAPED not in caplog.text


def test_the_runs_page_shows_the_error_without_the_key(echo_endpoint, db_url):
    from apptest_helpers import plain
    from streamlit.testing.v1 import AppTest
    store = Store(db_url)
    config = {"protocol": "single", "model": "openai:m?endpoint=echo"}
    run_id = run_sync(arun_config(config, "Is the key safe?", store=store)).run_id
    at = AppTest.from_file(str(ROOT / "pages" / "runs.py"), default_timeout=60)
    at.query_params["run"] = run_id
    at.run()
    assert not at.exception
    page = "\n".join(plain(str(e.value)) for kind in ("markdown", "caption", "text", "warning",
                                                      "error", "info", "success", "code")
                     for e in getattr(at, kind))
    page += "".join(df.value.to_csv() for df in at.dataframe)
    assert "no model call succeeded" in page
    assert CANARY not in page and SHAPED not in page


def test_an_environment_key_and_key_shapes_are_redacted_wherever_they_appear(monkeypatch):
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-abcdefgh12345678")
    monkeypatch.setenv("MY_FLAG", "abcdefgh12345678-not-a-secret-name")
    said = redact("t=tok-abcdefgh12345678 k=sk-ant-api03-abcdefghijklmnop x=AKIAABCDEFGHIJKLMNOP "
                  "url?api_key=hunter2hunter2&n=1 Authorization: Basic dXNlcjpwYXNzd29yZA== "
                  "ok abcdefgh12345678-not-a-secret-name max_tokens=4096")
    assert "tok-abcdefgh" not in said and "sk-ant" not in said and "AKIA" not in said
    assert "hunter2" not in said and "dXNlcjpw" not in said
    assert "abcdefgh12345678-not-a-secret-name" in said and "max_tokens=4096" in said
    assert secret_values({"endpoints": {"x": {"key": "k" * 12, "key_env": "SOME_VAR_NAME"}},
                          "OPENAI_API_KEY": "o" * 20, "other": "plain-value-here"}) == [
        "k" * 12, "o" * 20]


def test_keys_an_older_parley_stored_in_errors_are_redacted_on_open(backend):  # noqa: F811
    run_id = backend.start_run("vote", "Old run?")
    with backend.engine.begin() as connection:
        connection.execute(text("UPDATE runs SET error = :e WHERE id = :i"),
                           {"e": f"Incorrect API key provided: {SHAPED}", "i": run_id})
        connection.execute(text(
            "INSERT INTO turns (run_id, idx, phase, round, seat, role, model, messages, reply, "
            "parsed, status, error, warnings, latency, tokens_in, tokens_out, attempts, "
            "simulated, started_at, finished_at) VALUES (:i, 0, 'vote', 0, 'a', '', 'm', '[]',"
            " '', '{}', 'degraded', :e, :w, 0, 0, 0, 1, false, :t, :t)"),
            {"i": run_id, "e": f"AuthenticationError: {SHAPED}", "t": "2026-01-01 00:00:00",
             "w": json.dumps([f"retried with Bearer {SHAPED}"])})
        connection.execute(text("DELETE FROM schema_migrations WHERE name = "
                                "'0011_redacted_errors'"))
    backend.engine.dispose()
    reopened = Store(backend.url)
    assert "0011_redacted_errors" in applied_migrations(reopened)
    assert SHAPED not in _everything_stored(reopened)
    assert REDACTED in reopened.get(run_id)["turns"][0]["error"]


# --------------------------------------------------------------------------- finding 2
def test_one_long_reply_never_fails_a_run_on_postgresql(backend, monkeypatch):  # noqa: F811
    loopback_only(monkeypatch, "OPENAI_API_KEY", "OPENAI_BASE_URL", "PARLEY_ENDPOINTS")
    # 1.8 MB of distinct words (a tsvector of it is past PostgreSQL's 1 MB), one word early
    # and one past the indexed part.
    words = " ".join(f"w{i:x}" for i in range(330_000))
    reply = f"STANCE: yes\nearlyword {words} lateword"
    assert len(reply) > 1_800_000 and reply.index("lateword") > MAX_INDEXED
    with Answers(completion(reply)) as server:
        # an endpoint whose replies the store keeps up to 4 MB (256 KB by default)
        monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps({"long": {
            "base_url": server.base_url, "max_reply_bytes": 4 << 20}}))
        config = {"protocol": "single", "model": "openai:m?endpoint=long"}
        result = run_sync(arun_config(config, "How long can a reply be?", store=backend))
    row = backend.get(result.run_id)
    assert row["status"] == "completed", row["error"]
    assert [len(t["reply"]) for t in row["turns"]] == [len(reply)]  # stored whole
    assert backend.runs(transcript="earlyword")["id"].tolist() == [result.run_id]
    assert backend.runs(transcript="lateword").empty  # past the bound: not indexed, on both backends
    with backend.engine.connect() as connection:
        assert connection.execute(text("SELECT max(length(body)) FROM search_docs")
                                  ).scalar() == MAX_INDEXED


# --------------------------------------------------------------------------- findings 3, 4
def _experiment(store: Store) -> str:
    return create(store, plan({"questions": ["What is 2 + 2?", "What is 3 + 3?"],
                               "configs": [{"protocol": "vote", "label": "v"}]}, store))


def _forged(experiment_id: str | None, run_id: str = "forged1", cell: str = "cell:0:0:0",
            protocol: str = "vote") -> str:
    return json.dumps({"id": run_id, "protocol": protocol, "question": "What is 2 + 2?",
                       "status": "completed", "experiment_id": experiment_id,
                       "tags": [cell, "keep-me"], "label": "v", "config": {},
                       "created_at": "2026-01-01T00:00:00+00:00", "turns": []})


def test_an_imported_run_never_counts_as_an_experiments_cell(backend):  # noqa: F811
    experiment_id = _experiment(backend)
    assert backend.import_runs(_forged(experiment_id)) == ["forged1"]
    imported = backend.get("forged1")
    assert imported["experiment_id"] is None
    assert sorted(imported["tags"]) == [f"imported-cell:{experiment_id}:0:0:0", "keep-me"]
    assert progress(backend, experiment_id).done == 0
    assert len(pending_cells(backend, experiment_id)) == 2  # the forged cell still runs
    state = run_experiment(backend, experiment_id)
    assert state.status == "completed" and state.done == 2
    runs = backend.runs(experiment_id=experiment_id)
    assert "forged1" not in set(runs["id"]) and len(runs) == 2
    # An export of the experiment's own runs, imported again, is skipped (same ids).
    assert backend.import_runs(backend.export_jsonl(list(runs["id"]))) == []


def test_an_import_with_an_unknown_protocol_is_refused_with_its_line(backend):  # noqa: F811
    good = _forged(None, run_id="fine1", cell="x")
    with pytest.raises(ConfigError) as refused:
        backend.import_runs(good + "\n" + _forged(None, run_id="brawl1", protocol="brawl"))
    message = str(refused.value)
    assert "line 2" in message and "'brawl'" in message and "nothing was imported" in message
    assert backend.runs().empty  # the good line was not written either
