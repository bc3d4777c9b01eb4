"""Real HTTP to an OpenAI-compatible server on loopback: requests, replies, usage, retries.

The server is `http.server` in a thread on 127.0.0.1 (a free port), speaking just enough of
`POST /v1/chat/completions` (HTTP/1.1 keep-alive, like vLLM or llama.cpp). The openai SDK
under langchain-openai sends through httpx (`httpx2` for openai>=3), which honours proxy
variables, so the tests clear them and set NO_PROXY for loopback.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from loopback import LoopbackHandler, closed_port
from openai_stub import PROXY_VARS, loopback_only
from openai_stub import openai_model as model

from engine import Seat, Store, run_debate, run_peer_review

ROOT = Path(__file__).resolve().parents[1]
JUDGE_REPLY = ("1. VERDICT: The proponent wins\n2. REASONING: Better evidence\n"
               "3. PRO SUMMARY: Cheaper\n4. CON SUMMARY: Riskier\n5. CONFIDENCE: 0.75")


class Handler(LoopbackHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

    def do_POST(self):  # noqa: N802 - the handler's name is http.server's
        server: FakeOpenAI = self.server  # type: ignore[assignment]
        size = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(size) or b"{}")
        with server.lock:
            server.requests.append({"path": self.path, "body": body,
                                    "auth": self.headers.get("Authorization", "")})
            number = len(server.requests)
            status = server.statuses.pop(0) if server.statuses else 200
        if status != 200:
            self._send(status, {"error": {"message": f"scripted {status}",
                                          "type": "server_error", "code": None}})
            return
        prompt = body["messages"][-1]["content"]
        text = JUDGE_REPLY if "judge of a debate" in prompt else f"http-reply-{number}"
        self._send(200, {
            "id": f"chatcmpl-{number}", "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model", ""),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 100 + number, "completion_tokens": 10 + number,
                      "total_tokens": 110 + 2 * number}})

    def _send(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.statuses: list[int] = []  # scripted statuses for the next requests

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@pytest.fixture(autouse=True)
def loopback_env(monkeypatch):
    loopback_only(monkeypatch, "OPENAI_API_KEY", "OPENAI_BASE_URL")


@pytest.fixture
def server():
    httpd = FakeOpenAI()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def debate(url, **kw):
    kw.setdefault("timeout_per_call", 30)
    kw.setdefault("retries", 2)
    return run_debate("Should we adopt HTTP-TOPIC-7?", proponent=Seat("pro", model(url)),
                      opponent=Seat("con", model(url)), judge=Seat("judge", model(url)),
                      **kw)


# --------------------------------------------------------------------------- a whole debate
def test_debate_over_real_http(server, store):
    result = debate(server.base_url, max_rounds=2, store=store)
    requests = server.requests
    assert len(requests) == 5  # 2 rounds x 2 sides + the judge, no retries
    assert all(r["path"] == "/v1/chat/completions" for r in requests)
    assert all(r["body"]["model"] == "test-model" for r in requests)
    assert all(r["auth"] == "Bearer not-needed" for r in requests)
    prompts = [r["body"]["messages"][-1]["content"] for r in requests]
    assert "HTTP-TOPIC-7" in prompts[0] and "IN FAVOR" in prompts[0]
    assert "http-reply-1" in prompts[1]                       # the opponent saw the opening
    assert "http-reply-2" in prompts[2]                       # the proponent saw the answer
    assert "http-reply-3" in prompts[3] and "http-reply-2" in prompts[3]
    assert all(f"http-reply-{n}" in prompts[4] for n in range(1, 5))   # the judge saw all

    assert [(r.proponent_argument, r.opponent_argument) for r in result.rounds] == [
        ("http-reply-1", "http-reply-2"), ("http-reply-3", "http-reply-4")]
    assert result.verdict == "The proponent wins"
    assert result.confidence == pytest.approx(0.75) and result.is_high_confidence
    assert [(t.tokens_in, t.tokens_out) for t in result.turns] == \
        [(100 + n, 10 + n) for n in range(1, 6)]
    assert all(t.ok and t.attempts == 1 and not t.simulated for t in result.turns)
    # the record keeps the endpoint, so a re-run calls the same server (issue 10)
    assert all(t.model == f"openai:test-model?base_url={server.base_url}" for t in result.turns)

    row = store.get(result.run_id)
    assert row["status"] == "completed" and row["simulated"] is False
    assert row["tokens_in"] == sum(100 + n for n in range(1, 6))
    assert row["tokens_out"] == sum(10 + n for n in range(1, 6))
    assert [(t["tokens_in"], t["tokens_out"]) for t in row["turns"]] == \
        [(100 + n, 10 + n) for n in range(1, 6)]
    assert row["turns"][0]["messages"][-1]["content"] == prompts[0]
    assert "openai:test-model" in row["models"]


def test_one_model_object_serves_several_runs(server):
    """Each synchronous run is a new event loop; a kept-alive connection must not leak."""
    shared = model(server.base_url)
    for _ in range(3):
        result = run_peer_review("Write notes", producer=shared, reviewer=shared,
                                 max_iterations=1, retries=0, timeout_per_call=30)
        assert [t.status for t in result.turns] == ["ok", "ok"], \
            [t.error for t in result.turns]
    assert len(server.requests) == 6


def test_debate_through_the_cli(server, tmp_path):
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS}
    done = subprocess.run(
        [sys.executable, "-m", "engine", "run", "debate", "Should we adopt HTTP-TOPIC-7?",
         "--model", "openai:test-model?grammar=off", "--base-url", server.base_url,
         "--rounds", "1",
         "--db", db, "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert len(server.requests) == 3
    assert "HTTP-TOPIC-7" in server.requests[0]["body"]["messages"][-1]["content"]
    assert result["rounds"] == [{"round_number": 1, "proponent_argument": "http-reply-1",
                                 "opponent_argument": "http-reply-2"}]
    assert result["verdict"] == "The proponent wins"
    assert [t["tokens_in"] for t in result["turns"]] == [101, 102, 103]
    row = Store(db).get(result["run_id"])
    assert row["tokens_in"] == 101 + 102 + 103 and row["tokens_out"] == 11 + 12 + 13
    assert row["simulated"] is False and row["status"] == "completed"


# --------------------------------------------------------------------------- retries
@pytest.mark.parametrize("status", [500, 503, 429])
def test_transient_http_error_is_retried(server, status):
    server.statuses = [status]  # the first request fails, the rest succeed
    result = debate(server.base_url, max_rounds=1)
    assert len(server.requests) == 4  # 3 calls + 1 retry
    first = result.turns[0]
    assert first.ok and first.attempts == 2
    assert first.reply == "http-reply-2"  # the retried request's answer
    assert first.tokens_in == 102
    assert server.requests[0]["body"] == server.requests[1]["body"]  # the same request again
    assert all(t.attempts == 1 for t in result.turns[1:])


def test_client_error_is_not_retried(server):
    server.statuses = [400]
    result = debate(server.base_url, max_rounds=1)
    first = result.turns[0]
    assert first.status == "degraded" and first.attempts == 1
    assert "400" in first.error or "BadRequest" in first.error
    assert result.rounds[0].proponent_argument == "Error: Unable to generate argument."
    assert len(server.requests) == 3


def test_persistent_server_error_exhausts_retries(server):
    server.statuses = [500, 500]
    result = debate(server.base_url, max_rounds=1, retries=1)
    first = result.turns[0]
    assert first.status == "degraded" and first.attempts == 2
    assert "500" in first.error  # langchain-openai wraps it as OpenAIAPIError
    assert first.reply == "" and first.tokens_in == 0
    assert len(server.requests) == 4


# --------------------------------------------------------------------------- unreachable server
def test_unreachable_server_gives_a_degraded_turn_and_the_run_completes(server, store):
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    result = run_debate("Should we adopt HTTP-TOPIC-7?",
                        proponent=Seat("pro", model(dead)),
                        opponent=Seat("con", model(server.base_url)),
                        judge=Seat("judge", model(server.base_url)),
                        max_rounds=1, retries=1, timeout_per_call=30, store=store)
    pro = result.turns[0]
    assert pro.status == "degraded" and pro.attempts == 2
    assert "Connection" in pro.error
    assert pro.reply == "" and (pro.tokens_in, pro.tokens_out) == (0, 0)  # nothing invented
    assert result.rounds[0].proponent_argument == "Error: Unable to generate argument."
    assert len(server.requests) == 2  # the opponent and the judge only
    assert "Error: Unable to generate argument." in \
        server.requests[0]["body"]["messages"][-1]["content"]
    assert result.verdict == "The proponent wins"
    row = store.get(result.run_id)
    assert row["status"] == "completed" and row["degraded"] == 1 and row["calls"] == 3
    assert row["turns"][0]["status"] == "degraded" and row["turns"][0]["reply"] == ""


# --------------------------------------------------------------------------- langchain's run
def test_a_call_nothing_watches_skips_langchains_run_and_keeps_what_it_gives(server,
                                                                             monkeypatch):
    """A model `get_model` resolved is called through its own `_agenerate` while no LangChain
    callback, tracer or cache is set up: its reply carries what `ainvoke` gives (the response
    headers, the usage, the model's name). A model with a callback handler takes
    `ainvoke`'s whole path, and the handler sees the call."""
    from langchain_core.callbacks import AsyncCallbackHandler
    from langchain_core.messages import HumanMessage

    from engine.llm.structured import generate

    class Seen(AsyncCallbackHandler):
        started = 0

        async def on_chat_model_start(self, *args, **kwargs):
            Seen.started += 1

    asked = [HumanMessage("hi")]
    plain, watched = model(server.base_url), model(server.base_url)
    through = asyncio.run(plain.ainvoke(asked))

    async def refused(*args, **kwargs):
        raise AssertionError("ainvoke was called")

    monkeypatch.setattr(type(plain), "ainvoke", refused)
    direct = asyncio.run(generate(plain, asked))
    formatted = asyncio.run(generate(plain, asked, response_format={"type": "json_object"}))
    monkeypatch.undo()
    assert direct.content == "http-reply-2" and formatted.content == "http-reply-3"
    assert server.requests[2]["body"]["response_format"] == {"type": "json_object"}
    assert set(direct.response_metadata) == set(through.response_metadata)
    assert direct.response_metadata["headers"]["content-type"] == "application/json"
    assert direct.response_metadata["token_usage"]["prompt_tokens"] == 102
    assert direct.usage_metadata["input_tokens"] == 102
    watched.callbacks = [Seen()]
    assert asyncio.run(generate(watched, asked)).content == "http-reply-4"
    assert Seen.started == 1
