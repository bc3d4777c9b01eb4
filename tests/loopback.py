"""The base of the tests' small HTTP servers on loopback: bound to 127.0.0.1 on a free port,
served from a daemon thread while the `with` block lasts, shut down and closed after it; and
the base of their request handlers (`LoopbackHandler`)."""
from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackHandler(BaseHTTPRequestHandler):
    """A quiet request handler whose replies leave without waiting on Nagle's algorithm.

    `send_response` and `end_headers` write the header, then the handler writes the body: with
    Nagle's algorithm on, the body waits for the client's delayed ACK of the header (40 ms on
    Linux), which no real server makes a client wait, and every call of a test paid it."""

    disable_nagle_algorithm = True

    def log_message(self, *args) -> None:  # keep test output quiet
        pass


class LoopbackServer(ThreadingHTTPServer):
    """`with Server(...) as server:` serves `handler`'s requests at `server.origin`."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        super().__init__(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)

    @property
    def origin(self) -> str:
        """`http://127.0.0.1:PORT`."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


def closed_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
