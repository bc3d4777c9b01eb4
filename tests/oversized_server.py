"""A loopback OpenAI-compatible server whose every answer is huge: a chat completion whose
reply is a proposal's JSON object (stance `42`) followed by `size` bytes of filler.

The body is written a megabyte at a time as it goes out (a 30 MB answer is never held in
the test's memory), with its Content-Length, or chunked (`declare=False`). `encoding="gzip"`
(or `"deflate"`) compresses it once up front, a piece at a time (200 MB of spaces are about
200 KB); `encoding` any other name sends a gzip body labelled so (an encoding Parley did not
ask for). `status` answers with that status instead, `kind="html"` with an HTML page of the same
size instead of a completion, `headers` adds headers (a forged `x-parley-cut`). `requests`
counts the requests; `hung_up` the answers the client stopped reading before their end.
"""
from __future__ import annotations

import json
import threading
import zlib

from loopback import LoopbackHandler, LoopbackServer

MB = 1 << 20
ANSWER = json.dumps({"stance": "42", "answer": "42", "reasoning": "six sevens are 42"})
WORDS = (b" and so the model went on" * (MB // 25 + 1))[:MB]  # one megabyte of filler


class _Handler(LoopbackHandler):
    protocol_version = "HTTP/1.1"

    def handle(self):
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: fine
            pass

    def do_POST(self):  # noqa: N802 - the handler's name is http.server's
        server: Oversized = self.server  # type: ignore[assignment]
        self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
        with server.lock:
            server.requests += 1
        head, tail = server.ends()
        self.close_connection = True
        self.send_response(server.status)
        self.send_header("Content-Type", "text/html" if server.kind == "html"
                         else "application/json")
        for name, value in server.headers.items():
            self.send_header(name, value)
        if server.compressed is not None:
            self.send_header("Content-Encoding", server.encoding)
            self.send_header("Content-Length", str(len(server.compressed)))
        elif server.declare:
            self.send_header("Content-Length", str(len(head) + server.size + len(tail)))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if server.compressed is not None:
                self.wfile.write(server.compressed)
                return
            for piece in server.pieces(head, tail):
                self.wfile.write(piece if server.declare else
                                 b"%x\r\n%s\r\n" % (len(piece), piece))
            if not server.declare:
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            with server.lock:
                server.hung_up += 1


class Oversized(LoopbackServer):
    """Start with `with Oversized(size) as server:`; `server.base_url` ends in /v1."""

    def __init__(self, size: int, *, encoding: str = "", declare: bool = True,
                 status: int = 200, kind: str = "completion", filler: bytes = WORDS,
                 headers: dict[str, str] | None = None):
        super().__init__(_Handler)
        self.size, self.encoding, self.declare, self.status = size, encoding, declare, status
        self.kind, self.filler, self.headers = kind, filler, dict(headers or {})
        self.lock = threading.Lock()
        self.requests = self.hung_up = 0
        self.compressed: bytes | None = None
        if encoding:
            # deflate as zlib-wrapped (RFC 1950), anything else as gzip
            packer = zlib.compressobj(9, zlib.DEFLATED, 15 if encoding == "deflate" else 31)
            head, tail = self.ends()
            self.compressed = b"".join([*(packer.compress(p) for p in self.pieces(head, tail)),
                                        packer.flush()])

    def ends(self) -> tuple[bytes, bytes]:
        """What comes before and after the filler."""
        if self.kind == "html":
            return b"<html><body><p>", b"</p></body></html>"
        if self.status != 200:
            return b'{"error": {"message": "overloaded ', b'", "type": "server_error"}}'
        head = ('{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m", '
                '"choices": [{"index": 0, "message": {"role": "assistant", "content": '
                + json.dumps(ANSWER)[:-1])
        tail = ('"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 40, '
                '"completion_tokens": 7000000, "total_tokens": 7000040}}')
        return head.encode(), tail.encode()

    def pieces(self, head: bytes, tail: bytes):
        """The body a megabyte at a time (the filler's pieces are one object, reused)."""
        yield head
        left = self.size
        while left > 0:
            piece = self.filler if left >= len(self.filler) else self.filler[:left]
            left -= len(piece)
            yield piece
        yield tail

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"
