"""An endpoint that answers with a web page (a wrong base URL: a proxy's welcome page, a
dashboard) fails its calls in words naming the server, not as a bare `ValueError`."""
from __future__ import annotations

import http.server
import threading

import pytest
from loopback import LoopbackHandler

from engine import Seat
from engine.protocols.vote import run_vote


class WebPage(LoopbackHandler):
    def do_POST(self) -> None:  # noqa: N802 - the handler's name is http.server's
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<html><body>Welcome to nginx</body></html>")



@pytest.fixture
def web_page():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), WebPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_a_web_page_for_a_reply_is_said_in_words(web_page, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    voters = [Seat(f"v{n}", f"openai:m?base_url={web_page}/v1") for n in range(2)]
    result = run_vote("What is 2+2?", voters=voters, retries=0)
    for turn in result.turns:
        assert turn.error.startswith("the server answered with something other than an "
                                     "OpenAI-compatible reply"), turn.error
        assert web_page in turn.error and "ValueError" not in turn.error
    from engine.protocols.base import no_call_succeeded
    assert no_call_succeeded(result.turns) == (
        "no model call succeeded (2 calls: 2 replies that were not an API's (check the base "
        "URL))")
