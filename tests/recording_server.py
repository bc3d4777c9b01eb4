"""A loopback HTTP server that records every connection and request, whatever its method.

`RecordingServer()` answers any request with a chat completion, a proposal's JSON object
whose answer is `reply` (so a call that reaches it succeeds, and a test that expects none to
fails loudly); `redirect=(status, location)` answers instead with that redirect, except
under `/moved/`, which is always answered. Each
request records its method, path, Host and Authorization headers, every header (its name in
lower case) and body; `connections`
counts the TCP connections accepted, so "nothing reached this server" can be asserted even
for a request that never got as far as a method.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import ThreadingHTTPServer

from loopback import LoopbackHandler


class _Handler(LoopbackHandler):
    protocol_version = "HTTP/1.1"

    def _any(self):
        server: RecordingServer = self.server  # type: ignore[assignment]
        size = int(self.headers.get("Content-Length", 0) or 0)
        body = self.rfile.read(size).decode("utf-8", "replace") if size else ""
        with server.lock:
            server.requests.append({"method": self.command, "path": self.path, "body": body,
                                    "host": self.headers.get("Host", ""),
                                    "auth": self.headers.get("Authorization", ""),
                                    "headers": [(k.lower(), v) for k, v in self.headers.items()]})
        if server.redirect is not None and not self.path.startswith("/moved/"):
            status, location = server.redirect
            self.send_response(status)
            self.send_header("Location", location.replace("{path}", self.path))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        payload = json.dumps({
            "id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()),
            "model": "m", "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": json.dumps({
                    "stance": "yes", "answer": server.reply, "reasoning": server.reply,
                    "confidence": 0.7})}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = do_PATCH = _any  # noqa: N815


class RecordingServer(ThreadingHTTPServer):
    """Start with `with RecordingServer() as server:`; `server.base_url` ends in /v1."""

    daemon_threads = True

    def __init__(self, redirect: tuple[int, str] | None = None, reply: str = "reached"):
        """`redirect` is (status, Location); `{path}` in the Location is the request's path."""
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.connections = 0
        self.redirect, self.reply = redirect, reply
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)

    def process_request(self, request, client_address):
        with self.lock:
            self.connections += 1
        super().process_request(request, client_address)

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    def __enter__(self) -> RecordingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()
