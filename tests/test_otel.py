"""OpenTelemetry export (DESIGN 2.14) against an OTLP/HTTP receiver on loopback that decodes
the protobuf (opentelemetry-proto): a run is a trace, each model call a child span with the
GenAI semantic conventions' attributes and `parley.*` ones; no prompt or reply text unless
PARLEY_OTEL_CONTENT=1; cost only when known; with the variable unset no exporter is
imported."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from loopback import LoopbackHandler, LoopbackServer

from engine.llm import otel
from engine.models import Turn
from engine.protocols import arun_config, run_sync

pytest.importorskip("opentelemetry.proto")
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)

QUESTION = "What is the secret plan number?"
ROOT = Path(__file__).resolve().parent.parent


class OtlpReceiver(LoopbackServer):
    """Accepts OTLP/HTTP protobuf posts on /v1/traces and keeps the decoded spans."""

    def __init__(self):
        class Handler(LoopbackHandler):
            def do_POST(self):  # noqa: N802
                server: OtlpReceiver = self.server  # type: ignore[assignment]
                body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with server.lock:
                    server.paths.append(self.path)
                    server.types.append(self.headers.get("Content-Type"))
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            server.spans.extend(scope.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()
        super().__init__(Handler)
        self.lock = threading.Lock()
        self.spans, self.paths, self.types = [], [], []

    @property
    def url(self) -> str:
        return self.origin


def attributes(span) -> dict:
    out = {}
    for item in span.attributes:
        value = item.value
        out[item.key] = getattr(value, value.WhichOneof("value"))
    return out


def traced(monkeypatch, store, content: bool = False):
    """Run a simulated society (two rounds of three agents) with export on, to a fresh
    receiver; returns the result and the spans received."""
    receiver = OtlpReceiver().__enter__()
    monkeypatch.setenv(otel.ENDPOINT_ENV, receiver.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    if content:
        monkeypatch.setenv(otel.CONTENT_ENV, "1")
    else:
        monkeypatch.delenv(otel.CONTENT_ENV, raising=False)
    otel._provider.cache_clear()  # a provider reads the OTEL_* settings when it is made
    try:
        result = run_sync(arun_config({"protocol": "society", "model": "simulated"},
                                      QUESTION, store=store, label="traced"))
        assert otel.flush()
        deadline = time.monotonic() + 30
        while len(receiver.spans) < len(result.turns) + 1:
            assert time.monotonic() < deadline, len(receiver.spans)
            time.sleep(0.05)
        return result, list(receiver.spans)
    finally:
        receiver.__exit__()


def test_a_run_is_a_trace_and_each_call_a_child_span_with_genai_attributes(monkeypatch, store):
    result, spans = traced(monkeypatch, store)
    (root,) = [s for s in spans if s.name == "parley.run society"]
    calls = [s for s in spans if s is not root]
    assert len(calls) == len(result.turns) == 6
    assert all(s.trace_id == root.trace_id and s.parent_span_id == root.span_id
               for s in calls)
    assert not root.parent_span_id
    top = attributes(root)
    assert top["parley.protocol"] == "society" and top["parley.status"] == "completed"
    assert top["parley.run_id"] == result.run_id and top["parley.label"] == "traced"
    assert top["parley.cost_usd"] == 0.0  # the simulated model's calls cost 0: known
    for span, turn in zip(sorted(calls, key=lambda s: attributes(s)["parley.turn"]),
                          result.turns, strict=True):
        found = attributes(span)
        assert span.name == "chat simulated"
        assert found["gen_ai.operation.name"] == "chat"
        assert found["gen_ai.request.model"] == found["gen_ai.response.model"] == "simulated"
        assert found["gen_ai.usage.input_tokens"] == turn.tokens_in > 0
        assert found["gen_ai.usage.output_tokens"] == turn.tokens_out
        assert found["parley.phase"] == turn.phase and found["parley.seat"] == turn.seat
        assert found["parley.status"] == "ok" and found["parley.simulated"] is True
        assert span.start_time_unix_nano <= span.end_time_unix_nano
        assert root.start_time_unix_nano <= span.start_time_unix_nano
    text = b"".join(s.SerializeToString() for s in spans)
    assert QUESTION.encode() not in text  # no prompt, question or reply without the opt-in
    assert not any(k.startswith("gen_ai.input") for s in spans for k in attributes(s))


def test_prompts_and_replies_only_with_parley_otel_content(monkeypatch, store):
    _result, spans = traced(monkeypatch, store, content=True)
    calls = [attributes(s) for s in spans if s.name.startswith("chat ")]
    assert all(QUESTION in c["gen_ai.input.messages"] for c in calls)
    assert all("gen_ai.output.messages" in c for c in calls)


def test_an_unknown_cost_is_left_out_never_zero():
    turn = Turn(index=0, phase="answer", seat="a", model="openai:gpt-x", cost_usd=None)
    assert "parley.cost_usd" not in otel._call_attributes("vote", turn, False)
    priced = turn.model_copy(update={"cost_usd": 0.002})
    found = otel._call_attributes("vote", priced, False)
    assert found["parley.cost_usd"] == 0.002
    assert found["gen_ai.provider.name"] == "openai" and found["gen_ai.request.model"] == "gpt-x"


def test_with_the_variable_unset_no_exporter_is_imported():
    script = (
        "import sys\n"
        "from engine.protocols import arun_config, run_sync\n"
        "run_sync(arun_config({'protocol': 'society', 'model': 'simulated'}, 'Is it?'))\n"
        # langsmith (under langchain-core) loads opentelemetry.sdk itself when installed;
        # what Parley adds is the exporter, and only with the variable set
        "loaded = [m for m in sys.modules if "
        "m.startswith('opentelemetry.exporter')]\n"
        "print(len(loaded))\n")
    env = {k: v for k, v in __import__("os").environ.items()
           if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=120, cwd=str(ROOT))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "0"
