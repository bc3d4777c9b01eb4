"""An OpenAI-compatible chat-completions server on loopback that answers like the simulated model.

Every protocol can then run over real HTTP through `openai:MODEL` with `base_url`. Requests
(body and Authorization header) are kept for assertions.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from engine.simulated import SimulatedChatModel

_KINDS = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        server: SimulatedOpenAI = self.server  # type: ignore[assignment]
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        with server.lock:
            server.requests.append({"body": body,
                                    "auth": self.headers.get("Authorization", "")})
            number = len(server.requests)
        messages = [_KINDS[m["role"]](content=m["content"]) for m in body["messages"]]
        reply = server.model.invoke(messages)
        usage = reply.usage_metadata or {}
        payload = json.dumps({
            "id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply.content}}],
            "usage": {"prompt_tokens": usage.get("input_tokens", 0),
                      "completion_tokens": usage.get("output_tokens", 0),
                      "total_tokens": usage.get("total_tokens", 0)}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class SimulatedOpenAI(ThreadingHTTPServer):
    """Start with `with SimulatedOpenAI() as server:`; `server.base_url` ends in /v1."""

    daemon_threads = True

    def __init__(self, seed: int = 0):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.model = SimulatedChatModel(seed=seed)
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> "SimulatedOpenAI":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()
