"""An OpenAI-compatible chat-completions server on loopback that answers like the simulated model.

Every protocol can then run over real HTTP through `openai:MODEL` with `base_url`. Requests
(body and Authorization header) are kept for assertions. A request carries no task, so the
server reads the reply format from the prompt itself, as a real model would (the JSON keys,
the labelled lines, a `STANCE:` line, the proposals a critique assesses), and hands the
simulated model that much as a task with no expected answer.

Structured output: a request's `response_format` is honoured as a constraining server would
(`json_schema`: a bare JSON object with exactly the schema's keys, an enum's values only;
`json_object`: a bare JSON object, with a schema's keys when one comes beside it, as
llama-cpp-python's server does), unless the server is told to refuse it (`refuse="schema"`:
json_schema only, `refuse="all"`: any format; HTTP 400 as OpenAI's "not supported", or
`refuse_status=500` as llama-cpp-python's server fails on json_schema) or to ignore it (`ignore_format=True`: it answers as without one). Refused
requests are counted in `refused`.

A `grammar` field (llama.cpp's GBNF) is ignored by default, as most servers drop an unknown
field (`grammar="ignore"`); `grammar="honour"` answers a grammar that forces one literal (the
grammar probe's sentinel) with that literal, as a server applying it would; `grammar="refuse"`
answers any request carrying the field with HTTP 400 naming it. `grammar_delay` holds each
request carrying a grammar that many seconds first (a probe that times out).

`throttle(count, retry_after)` makes the next `count` requests a 429 (rate limit), with a
Retry-After header when `retry_after` is given; each request records when it arrived (`at`,
`time.time()`) and the status it got.

A hostile or careless server, set on a started server: `usage` replaces the reply's `usage`
field with any JSON value (`NO_USAGE` leaves the field out); `delay` holds each answer that
many seconds after the whole request was read (a slow model); `cut` reads each request whole
and closes the connection without answering.
"""
from __future__ import annotations

import json
import re
import select
import socket
import threading
import time
from http.server import ThreadingHTTPServer

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from loopback import LoopbackHandler

from engine.llm.providers import get_model
from engine.llm.replies import extract_json
from engine.models import Task
from engine.simulated import SimulatedChatModel, World

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
              "all_proxy")
ENDPOINT_SETTINGS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PARLEY_ENDPOINTS")
AS_COUNTED = object()  # `usage`: the simulated model's own counts (the default)
NO_USAGE = object()  # `usage`: no `usage` field at all


def loopback_only(monkeypatch, *clear: str) -> None:
    """Call loopback servers directly (no proxy variables; NO_PROXY for 127.0.0.1) with the
    environment names in `clear` unset, for a test's `monkeypatch`."""
    for name in (*PROXY_VARS, *clear):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


_KINDS = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
_KEY = re.compile(r'"([A-Za-z_]+)"\s*:')
_PROPOSAL = re.compile(r"^\[([^\]\n]+)\] stance: (.*)$", re.M)
_LITERAL = re.compile(r'^root ::= "([^"\\]*)"\s*$')
_LABEL = re.compile(r"^\s*(?:\d+[.)]\s*)?\**([A-Z][A-Z ]{1,30}[A-Z])\**\s*:", re.M)


def openai_model(url: str):
    """An OpenAI-compatible chat model served at `url`, without the grammar probe: the tests
    that use it count requests and script their statuses (line-format grammars are
    tests/test_line_grammar.py's)."""
    return get_model("openai:test-model?grammar=off", base_url=url)


def read_format(messages: list[dict]) -> Task:
    """The reply format a prompt asks for, read from its text (first request of a re-ask)."""
    asked = [m["content"] for m in messages if m["role"] == "user"]
    keys = next((tuple(dict.fromkeys(_KEY.findall(text))) for text in reversed(asked)
                 if _KEY.search(text)), ())
    last = asked[-1] if asked else ""
    labels = [label for label in dict.fromkeys(_LABEL.findall(last))
              if label not in {"QUESTION", "TOPIC", "TASK", "CONTEXT", "STANCE"}]
    # A critique needs the answers it assesses: the panel lists them as `[name] stance: X`.
    critique = "assessments" in keys
    return Task(kind="critique" if critique else "answer", keys=keys,
                sections=() if keys else tuple(labels), stance_line="STANCE:" in last,
                seat="server", others=dict(_PROPOSAL.findall(last)) if critique else {})


def _allowed(value: object, rule: dict) -> object:
    """`value` as a schema-constrained decoder would give it: an enum's first value when it
    is not one of them."""
    enum = rule.get("enum")
    return enum[0] if enum and value not in enum else value


class _Handler(LoopbackHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 - the handler's name is http.server's
        server: SimulatedOpenAI = self.server  # type: ignore[assignment]
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        with server.lock:
            limited = server.refusals > 0
            server.refusals -= limited
            server.requests.append({"body": body, "at": time.time(),
                                    "status": 429 if limited else 200,
                                    "auth": self.headers.get("Authorization", "")})
            number = len(server.requests)
            delay, cut = server.delay, server.cut  # as set when this request came in
        if limited:
            self._refuse(server.retry_after)
            return
        if cut:  # the request read whole, then the connection closed unanswered
            self.close_connection = True
            return
        if delay:
            time.sleep(delay)
        if server.hang:  # never answer: wait until the client gives up and closes
            server.disconnected.append(self._wait_for_close(server.hang))
            return
        grammar = body.get("grammar")
        if grammar is not None and server.grammar_delay:
            time.sleep(server.grammar_delay)
        if grammar is not None and server.grammar == "refuse":
            return self._send(400, {"error": {
                "message": "Unrecognized request argument supplied: grammar",
                "type": "invalid_request_error", "param": "grammar", "code": None}})
        literal = _LITERAL.match(grammar or "")
        if literal and server.grammar == "honour":
            return self._answer(number, body, literal.group(1), {})
        kind = (body.get("response_format") or {}).get("type")
        if kind and server.refuse in ("all", "schema" if kind == "json_schema" else "all"):
            with server.lock:
                server.refused.append(number)
            return self._send(server.refuse_status, {"error": {
                "message": f"response_format of type '{kind}' is not supported by this server",
                "type": "invalid_request_error", "param": "response_format", "code": None}})
        messages = [_KINDS[m["role"]](content=m["content"]) for m in body["messages"]]
        task = read_format(body["messages"])
        known = next((answer for question, answer in server.answers.items()
                      if any(question in m["content"] for m in body["messages"])), None)
        if known is not None:  # a model that knows this one (see `answers`)
            task = task.model_copy(update={"expected": known})
        asked = body.get("response_format") or {}
        schema = asked.get("json_schema", {}).get("schema") or asked.get("schema")
        if schema and not server.ignore_format:
            task = task.model_copy(update={"keys": tuple(schema["properties"]),
                                           "sections": ()})
        reply = server.model.invoke(messages,
                                    config={"metadata": {"parley_task": task.model_dump()}})
        content = reply.content
        if kind and not server.ignore_format:  # a constraining server: the bare object
            obj = extract_json(content)[0] or {}
            if schema:  # its keys, and a value of an enum's (as a grammar would force)
                obj = {key: _allowed(obj.get(key), rule)
                       for key, rule in schema["properties"].items()}
            content = json.dumps(obj)
        self._answer(number, body, content, reply.usage_metadata or {})

    def _answer(self, number: int, body: dict, content: str, usage: dict) -> None:
        server: SimulatedOpenAI = self.server  # type: ignore[assignment]
        document = {
            "id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": usage.get("input_tokens", 0),
                      "completion_tokens": usage.get("output_tokens", 0),
                      "total_tokens": usage.get("total_tokens", 0)}}
        if server.usage is NO_USAGE:
            del document["usage"]
        elif server.usage is not AS_COUNTED:
            document["usage"] = server.usage
        self._send(200, document)

    def _send(self, status: int, document: dict) -> None:
        payload = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _refuse(self, retry_after: float | None) -> None:
        payload = json.dumps({"error": {"message": "rate limit reached", "type": "requests",
                                        "code": "rate_limit_exceeded"}}).encode()
        self.send_response(429)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if retry_after is not None:
            self.send_header("Retry-After", f"{retry_after:g}")
        self.end_headers()
        self.wfile.write(payload)

    def _wait_for_close(self, limit: float) -> bool:
        """True when the client closed the connection within `limit` seconds."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if readable:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return True
                except OSError:
                    return True
        return False


class SimulatedOpenAI(ThreadingHTTPServer):
    """Start with `with SimulatedOpenAI() as server:`; `server.base_url` ends in /v1."""

    daemon_threads = True
    usage: object = AS_COUNTED  # see the module's docstring: a hostile server's settings
    delay = 0.0
    cut = False

    def __init__(self, seed: int = 0, hang: float = 0.0, refuse: str = "",
                 ignore_format: bool = False, refuse_status: int = 400,
                 grammar: str = "ignore", grammar_delay: float = 0.0,
                 answers: dict[str, str] | None = None):
        """`hang`: seconds each request is held without an answer, watching for the client
        to close the connection (`disconnected` records, per request, whether it did).
        `refuse` ("schema" or "all"), `ignore_format`, `grammar` ("ignore", "honour" or
        "refuse") and `grammar_delay`: see the module's docstring. `answers` (question text ->
        answer): questions the server's model knows, as a capable model would; its simulated
        world then takes that answer as the truth (the tests' stand-in for a real model's
        knowledge: Parley itself never sees it)."""
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.hang = hang
        self.disconnected: list[bool] = []
        self.refusals = 0
        self.retry_after: float | None = None
        self.refuse, self.ignore_format = refuse, ignore_format
        self.refuse_status = refuse_status
        self.grammar, self.grammar_delay = grammar, grammar_delay
        self.refused: list[int] = []
        self.model = SimulatedChatModel(world=World(seed=seed))
        self.answers = dict(answers or {})
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    def throttle(self, count: int = 1, retry_after: float | None = None) -> None:
        """Answer the next `count` requests with a 429 (and `Retry-After: retry_after`)."""
        with self.lock:
            self.refusals, self.retry_after = count, retry_after

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> SimulatedOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()
