"""The real-model path over HTTP (`python -m engine bench --only http`): what a user with an
OpenAI-compatible endpoint runs, against a loopback server the bench starts.

The server (`Server`, a process of its own) answers chat completions as a constraining server
would: a request carrying a JSON schema gets an object of that schema, any other request a
short answer with an `ANSWER:` line; it waits `latency` seconds first, on its own thread per
connection, and keeps connections alive. Each measured side runs in a fresh process (`python -m
engine.bench.http experiment ...`), so its wall time is the whole process's (interpreter,
imports, detection of the endpoint, the work) and its peak memory its own:

- `experiment`: an experiment of N questions through `engine.experiments` (as `python -m
  engine experiment run` does), every run and turn stored in a new SQLite file;
- `cli`: the same experiment through `python -m engine experiment run` itself (its spec in a
  YAML file, its summary printed), timed as a whole process only;
- `bare`: the same calls through one langchain-openai `ChatOpenAI`, as many at once, in a
  process that imports nothing of Parley (`CLIENT`), each run's calls in the waves a Parley
  run of that shape makes them (one call for a one-call question);
- `bare-aiohttp`: the same bare ChatOpenAI given the openai SDK's `DefaultAioHttpClient`
  (aiohttp under httpx, what Parley's async client sends through): the fair comparison;
- `raw`: the same calls in the same waves through a few lines of HTTP on asyncio streams
  (`CLIENT`'s raw mode): the instrument's own floor, so that a ratio splits into the server's
  and the machine's share (the raw side's) and the client's (the rest of the bare side's).

The server's own CPU per call (its process's CPU time over a side's calls) is a row beside
the clients': a thread per connection is cheap next to a client's work, and these rows say
whether it stays so.

Rows: both at no latency and at 0.2 s (wall time, the ratio, CPU per call over the work), the
questions one call each (`engine.bench.choice.cheapest`), and at no latency the CLI against
the bare client; the busiest protocol (the panel) and a 5x3 crowd answering by rounds (the
society) in this process against their critical path (median of 3 runs, each a new event
loop), each beside a bare ChatOpenAI and the raw client making the same calls in the same
waves; 200 runs of the busiest at 32 in flight in a fresh process against the floor of
runs x critical path / concurrency, beside the bare and the raw client in the same shape,
with the server's CPU per call under each; peak RSS of an experiment of 50 and of 300 runs,
and its growth per run added, while the runs run and with their results read back.
Figures are measured here, never asserted in tests.
"""
from __future__ import annotations

import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from engine.bench.choice import busiest, cheapest, crowd_by_rounds, crowded_config
from engine.bench.table import Row, fact

MODEL = "bench"
ANSWER = "The answer is 42.\nANSWER: 42"
PROMPT = "What is 6 x 7? Answer with one line: ANSWER: <number>."


# ------------------------------------------------------------------ the loopback server
def example(schema: Any) -> Any:
    """A value of JSON schema `schema`: an enum's first value, "42" for a string, every
    property of an object, one item of an array."""
    if not isinstance(schema, Mapping):
        return "42"
    if "enum" in schema:
        return schema["enum"][0]
    json_type = schema.get("type")
    if json_type == "object":
        return {key: example(value) for key, value in (schema.get("properties") or {}).items()}
    if json_type == "array":
        return [example(schema.get("items"))]
    if json_type == "boolean":
        return False
    if json_type in ("number", "integer"):
        return 1
    return "42"


def reply(body: Mapping[str, Any]) -> str:
    """What the server answers a request: an object of its schema, else the short answer."""
    asked = body.get("response_format") or {}
    schema = (asked.get("json_schema") or {}).get("schema") or asked.get("schema")
    if schema:
        return json.dumps(example(schema))
    return '{"answer": "42"}' if asked else ANSWER


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real server
    # a reply's header and body leave in two writes: with Nagle's algorithm on, the body
    # waits for the client's delayed ACK (40 ms on Linux) of the header, which no real
    # server (uvicorn, llama.cpp, vLLM) makes its clients wait
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - the health URL
        self._send({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length", 0) or 0)
        raw = self.rfile.read(length)
        if not self.path.endswith("/chat/completions"):  # an OTLP export: accepted, discarded
            return self._send({})
        body = json.loads(raw or b"{}")
        server: Any = self.server
        if server.latency:
            time.sleep(server.latency)
        self._send({"id": "chatcmpl-bench", "object": "chat.completion", "created": 0,
                    "model": MODEL, "choices": [{"index": 0, "finish_reason": "stop",
                                                 "message": {"role": "assistant",
                                                             "content": reply(body)}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 10,
                              "total_tokens": 110}})

    def _send(self, document: Any) -> None:
        payload = json.dumps(document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class Server(ThreadingHTTPServer):
    """An OpenAI-compatible chat-completions server on loopback port `port`."""

    daemon_threads = True
    request_queue_size = 256  # hundreds of connections may open at once

    def __init__(self, latency: float, port: int):
        super().__init__(("127.0.0.1", port), _Handler)
        self.latency = latency


@contextmanager
def serving(latency: float = 0.0) -> Iterator[tuple[str, int]]:
    """A `Server` in a process of its own (its threads take no time from the side measured)
    for the block; yields its base URL and process id once it answers."""
    from engine.bench.serving import free_port, served
    port = free_port()
    command = [sys.executable, "-m", "engine.bench.http", "serve", str(port), str(latency)]
    with served(command, f"http://127.0.0.1:{port}/v1/models", "the bench's OpenAI-compatible "
                "server", 120, cwd=Path(__file__).resolve().parents[2]) as process:
        yield f"http://127.0.0.1:{port}/v1", process.pid


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system, every thread) process `pid` has used so far, from
    Linux's /proc (NaN where there is none)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------ one measured process
def spec(base_url: str) -> str:
    return f"openai:{MODEL}?base_url={base_url}"


def protocol_config(protocol: str, base_url: str) -> dict[str, Any]:
    """`protocol`'s default configuration on the server."""
    return {"protocol": protocol, "model": spec(base_url)}


def questions(count: int) -> list[str]:
    """The questions every side asks, one call each."""
    return [f"Question {i}: {PROMPT}" for i in range(count)]


def work_experiment(base_url: str, protocol: str, runs: int, concurrency: int,
                    folder: str) -> dict[str, Any]:
    """An experiment of `runs` questions of `protocol`, stored in a new SQLite file, in a
    process of its own whose collector is off since it started (`main`): the collector as
    `python -m engine experiment run` keeps it, start-up frozen out of its scans and the
    collector on again before the run (`engine.cli.commands.started`)."""
    from engine import experiments as ex
    from engine.bench.serving import high_water_mb
    from engine.llm.transport import releasing
    from engine.store import Store
    store = Store(f"sqlite:///{Path(folder) / 'bench.db'}")
    experiment_id = ex.create(store, {"questions": questions(runs),
                                      "configs": [protocol_config(protocol, base_url)],
                                      "concurrency": concurrency, "source": "bench"})
    gc.freeze()
    gc.enable()
    wall, cpu = time.perf_counter(), time.process_time()
    state = asyncio.run(releasing(ex.arun_experiment(store, experiment_id)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    running_mb = high_water_mb()  # the peak while the runs ran, before their results are read
    frame = store.runs(experiment_id=experiment_id)
    return {"status": state.status, "wall": wall, "cpu": cpu, "runs": len(frame),
            "running_mb": running_mb, "peak_mb": high_water_mb(),  # results read back too
            "calls": int(frame["calls"].sum()), "failed": int((frame["status"] != "completed")
                                                               .sum())}


# The client sides import nothing of Parley: each process is a client's alone. Each of its
# `runs` makes the calls of `shape` ("3,1,3,1": three at once, then one, ...), wave after wave,
# `concurrency` runs at once (a one-call question is shape "1"), through one langchain-openai
# ChatOpenAI (`httpx`: the SDK's default client; `aiohttp`: given the SDK's
# `DefaultAioHttpClient`, as its README shows it) or, as the instrument's own floor, through a
# few lines of HTTP/1.1 on asyncio streams (`raw`: a keep-alive connection per call in flight,
# nothing parsed but the status line and Content-Length), so what the raw side takes is the
# server's and the machine's share, and what a ChatOpenAI takes beyond it is the client's.
# The raw side makes one call before the runs. Each run's wall time is printed too (`walls`).
CLIENT = """
import asyncio, json, sys, time
url, runs, concurrency, prompt, shape, mode = sys.argv[1:7]

def peak_mb():  # VmHWM: ru_maxrss would count the bench's own peak (the fork keeps it)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM"))

runs, concurrency, shape = int(runs), int(concurrency), [int(n) for n in shape.split(",")]
if mode == "raw":
    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    path = "/" + url.split("//", 1)[1].split("/", 1)[1].strip("/") + "/chat/completions"
    idle = []

    async def call(text):
        body = json.dumps({"model": "bench", "messages": [{"role": "user", "content": text}]})
        request = (f"POST {path} HTTP/1.1\\r\\nHost: {host}:{port}\\r\\n"
                   "Content-Type: application/json\\r\\n"
                   f"Content-Length: {len(body)}\\r\\n\\r\\n{body}").encode()
        reader, writer = idle.pop() if idle else await asyncio.open_connection(host, int(port))
        writer.write(request)
        head = (await reader.readuntil(b"\\r\\n\\r\\n")).decode("latin-1").lower()
        length = int(head.split("content-length:", 1)[1].split("\\r\\n", 1)[0])
        answer = json.loads(await reader.readexactly(length))
        idle.append((reader, writer))
        return head.startswith("http/1.1 200") and bool(answer["choices"][0]["message"]["content"])
else:
    from langchain_openai import ChatOpenAI
    over = {}
    if mode == "aiohttp":
        from openai import DefaultAioHttpClient
        over = {"http_async_client": DefaultAioHttpClient()}
    model = ChatOpenAI(model="bench", base_url=url, api_key="not-needed", max_retries=0, **over)

    async def call(text):
        return bool((await model.ainvoke(text)).content)

async def go():
    gate = asyncio.Semaphore(concurrency)
    walls = []

    async def one(i):
        async with gate:
            done, start = 0, time.perf_counter()
            for wave, width in enumerate(shape):
                done += sum(await asyncio.gather(*(call(f"Question {i}.{wave}.{j}: {prompt}")
                                                   for j in range(width))))
            walls.append(time.perf_counter() - start)
            return done
    if mode == "raw":  # one connection open, as the other sides' first call opens one
        await call(prompt)
    return sum(await asyncio.gather(*(one(i) for i in range(runs)))), walls
wall, cpu = time.perf_counter(), time.process_time()
done, walls = asyncio.run(go())
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
calls = runs * sum(shape)
print(json.dumps({"status": "completed", "wall": wall, "cpu": cpu, "runs": runs,
                  "calls": done, "failed": calls - done, "walls": walls,
                  "peak_mb": peak_mb()}))
"""


def cli_command(base_url: str, count: int, concurrency: int, folder: Path,
                protocol: str = "") -> list[str]:
    """`python -m engine experiment run` of `count` one-call questions of `protocol` (default
    the cheapest) on the server, `concurrency` at once: its spec written in `folder`, every
    run stored in `folder`'s bench.db."""
    spec_file = folder / "experiment.yaml"  # JSON is YAML
    spec_file.write_text(json.dumps({
        "name": "bench", "questions": questions(count), "concurrency": concurrency,
        "configs": [protocol_config(protocol or cheapest().name, base_url)]}), encoding="utf-8")
    return [sys.executable, "-m", "engine", "experiment", "run", str(spec_file),
            "--db", f"sqlite:///{folder / 'bench.db'}", "--quiet", "--yes"]


def measured(client: str, base_url: str, count: int, concurrency: int,
             protocol: str = "", shape: str = "1") -> dict[str, Any]:
    """One side in a fresh process: what it reports, with `process` (its whole wall time,
    seconds) and `peak_mb` (its peak RSS). `client` is `experiment` (this module's worker:
    `count` runs of `protocol`, default the cheapest, one call a run), `cli` (the same
    experiment through `python -m engine experiment run`, which reports its process time
    only), `bare` (`count` runs of `shape` through a bare ChatOpenAI, as a user writes it:
    the SDK's default httpx client; each run's wall time in `walls`), `bare-aiohttp` (the
    same given the SDK's
    `DefaultAioHttpClient`, what Parley's client sends through) or `raw` (the same through
    `CLIENT`'s few lines of HTTP)."""
    protocol = protocol or cheapest().name
    root = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as folder:
        if client in ("bare", "bare-aiohttp", "raw"):
            mode = {"bare": "httpx", "bare-aiohttp": "aiohttp"}.get(client, client)
            command = [sys.executable, "-c", CLIENT, base_url, str(count), str(concurrency),
                       PROMPT, shape, mode]
        elif client == "cli":
            command = cli_command(base_url, count, concurrency, Path(folder), protocol)
        else:
            command = [sys.executable, "-m", "engine.bench.http", client, base_url, str(count),
                       str(concurrency), protocol, folder]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800, cwd=root)
        process = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"the {client} process failed: {(done.stderr or done.stdout)[-2000:]}")
    if client == "cli":
        return {"process": process}
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "process": process}


def shape_of(turns: Any) -> str:
    """A run's calls wave by wave ("3,1,3,1"), from its turns: one wave per phase and round,
    in the order they began."""
    waves: dict[tuple[str, int], int] = {}
    for turn in sorted(turns, key=lambda t: t.started_at):
        waves[(turn.phase, turn.round)] = waves.get((turn.phase, turn.round), 0) + 1
    return ",".join(str(n) for n in waves.values())


# ------------------------------------------------------------------ the rows
def _per_call(seconds: float, side: dict[str, Any], digits: int = 2) -> float:
    """`seconds` spread over `side`'s calls, in milliseconds."""
    return round(seconds / max(side["calls"], 1) * 1000, digits)


def _versus(latency: float, count: int, concurrency: int) -> list[Row]:
    with serving(latency) as (url, _):
        parley = measured("experiment", url, count, concurrency)
        bare = measured("bare", url, count, concurrency)
        cli = None if latency else measured("cli", url, count, concurrency)["process"]
    shown = f"{latency * 1000:.0f} ms" if latency else "no latency"
    label = f"{count} one-call questions, {concurrency} at once, {shown}"
    rows = [
        fact(f"{label}: Parley experiment (every run stored), whole process",
             round(parley["process"], 2), "s", note=f"{parley['failed']} runs failed"),
        fact(f"{label}: bare ChatOpenAI, whole process", round(bare["process"], 2), "s"),
        fact(f"{label}: Parley / bare ChatOpenAI, whole process",
             round(parley["process"] / bare["process"], 2), "x", "<= 1.5" if latency else ""),
    ]
    if cli is not None:
        rows += [
            fact(f"{label}: python -m engine experiment run (the CLI), whole process",
                 round(cli, 2), "s"),
            fact(f"{label}: the CLI / bare ChatOpenAI, whole process",
                 round(cli / bare["process"], 2), "x", "<= 1.5")]
    return [*rows,
            fact(f"{label}: Parley CPU per call (the work, imports aside)",
                 _per_call(parley["cpu"], parley), "ms"),
            fact(f"{label}: bare ChatOpenAI CPU per call", _per_call(bare["cpu"], bare), "ms"),
            fact(f"{label}: Parley calls per second (the work)",
                 round(parley["calls"] / parley["wall"], 1), "calls/s"),
            fact(f"{label}: bare ChatOpenAI calls per second",
                 round(bare["calls"] / bare["wall"], 1), "calls/s")]


def _critical(latency: float = 0.2, repeats: int = 3) -> list[Row]:
    from engine.llm.endpoints import registry_or_environment
    from engine.protocols import arun_config, estimate, run_sync
    rows: list[Row] = []
    crowd = crowd_by_rounds()
    with serving(latency) as (url, _):
        for title, config in ((busiest().name, protocol_config(busiest().name, url)),
                              (f"5x3 {crowd.name}", {**crowded_config(crowd, 5, spec(url)),
                                                      "options": {"rounds": 3}})):
            cost = estimate(config)
            # one registry for every run, as the app, the CLI and a worker hold one per process:
            # the endpoint detected and its client opened once, as in a warm process
            endpoints = registry_or_environment(None)
            run_sync(arun_config(config, PROMPT, endpoints=endpoints))
            walls, shape = [], ""
            for i in range(repeats):
                start = time.perf_counter()
                result = run_sync(arun_config(config, f"Question {i}: {PROMPT}",
                                              endpoints=endpoints))
                walls.append(time.perf_counter() - start)
                if not all(turn.ok for turn in result.turns):
                    raise RuntimeError(f"{title} over HTTP: a turn failed")
                shape = shape_of(result.turns)
            critical = cost["waves"] * latency
            head = f"{title} over HTTP, {cost['calls']} calls at {latency * 1000:.0f} ms"
            rows.append(fact(f"{head}: wall time / critical path ({cost['waves']} calls deep)",
                             round(statistics.median(walls) / critical, 3), "x", "<= 1.10"))
            # each client in a fresh process, one run after another: the first run (its
            # connection opened, as Parley's detection run opens one) is not timed
            bare, aio, raw = (statistics.median(measured(client, url, repeats + 1, 1,
                                                         shape=shape)["walls"][1:]) / critical
                              for client in ("bare", "bare-aiohttp", "raw"))
            rows += [
                fact(f"{head}: bare ChatOpenAI making the same calls in the same waves "
                     f"({shape}) / critical path", round(bare, 3), "x"),
                fact(f"{head}: the same bare ChatOpenAI over aiohttp (the SDK's "
                     "DefaultAioHttpClient) / critical path", round(aio, 3), "x"),
                fact(f"{head}: a minimal HTTP client making the same calls in the same waves "
                     "/ critical path, the server's and the machine's share", round(raw, 3),
                     "x")]
    return rows


def _many_runs(runs: int = 200, concurrency: int = 32, latency: float = 0.2) -> list[Row]:
    from engine.protocols import estimate
    name = busiest().name
    served: dict[str, float] = {}  # the server's CPU seconds per side
    with serving(latency) as (url, pid):
        config = protocol_config(name, url)
        cost = estimate(config)
        waves, calls = cost["waves"], cost["calls"]
        shape = _run_shape(url, config)
        sides = {}
        for client in ("experiment", "bare", "bare-aiohttp", "raw"):
            before = cpu_seconds(pid)
            sides[client] = measured(client, url, runs, concurrency, protocol=name, shape=shape)
            served[client] = cpu_seconds(pid) - before
    done, bare, raw = sides["experiment"], sides["bare"], sides["raw"]
    aio = sides["bare-aiohttp"]
    floor = runs * waves * latency / concurrency
    head = f"{runs} {name} runs ({calls} calls each), {concurrency} at once, " \
        f"{latency * 1000:.0f} ms a call, a fresh process"
    return [
        fact(f"{head} (detection included): the experiment's run, its first call to its last "
             "result stored", round(done["wall"], 2), "s", note=f"{done['failed']} runs failed"),
        fact(f"{runs} {name} runs: the experiment's run / floor (runs x critical path / "
             f"concurrency = {floor:g} s)", round(done["wall"] / floor, 3), "x", "<= 1.5"),
        fact(f"{runs} {name} runs: whole process (Python's start, imports, the store, the "
             "experiment planned, run and read back) / floor", round(done["process"] / floor, 3),
             "x"),
        fact(f"{runs} {name} runs: Parley CPU per call", _per_call(done["cpu"], done), "ms"),
        fact(f"{runs} runs of the same calls in the same waves through a bare ChatOpenAI, "
             "the calls' wall time / floor", round(bare["wall"] / floor, 3), "x"),
        fact(f"{runs} runs of the same calls in the same waves through a bare ChatOpenAI, "
             "whole process / floor", round(bare["process"] / floor, 3), "x"),
        fact(f"{runs} {name} runs: Parley / bare ChatOpenAI in the same shape, whole process",
             round(done["process"] / bare["process"], 3), "x"),
        fact(f"{runs} runs of the same calls through the bare ChatOpenAI over aiohttp (the "
             "SDK's DefaultAioHttpClient), whole process / floor",
             round(aio["process"] / floor, 3), "x"),
        fact(f"{runs} {name} runs: Parley / the bare ChatOpenAI over aiohttp, whole process",
             round(done["process"] / aio["process"], 3), "x"),
        fact(f"{runs} runs of the same calls in the same waves through a minimal HTTP client, "
             "the calls' wall time / floor: the server's and the machine's share",
             round(raw["wall"] / floor, 3), "x"),
        fact(f"{runs} {name} runs: the loopback server's CPU per call (under Parley, the bare "
             "ChatOpenAI, the minimal client)", _per_call(served["experiment"], done, 3), "ms",
             note=f"{_per_call(served['bare'], bare, 3):.3f} ms and "
                  f"{_per_call(served['raw'], raw, 3):.3f} ms"),
        fact(f"{runs} {name} runs: bare ChatOpenAI CPU per call (the work)",
             _per_call(bare["cpu"], bare), "ms"),
        fact(f"{runs} {name} runs: bare ChatOpenAI over aiohttp CPU per call (the work)",
             _per_call(aio["cpu"], aio), "ms"),
    ]


def _run_shape(url: str, config: dict[str, Any]) -> str:
    """The waves of one run of `config` on the server (`shape_of` its turns)."""
    from engine.protocols import arun_config, run_sync
    return shape_of(run_sync(arun_config(config, PROMPT)).turns)


def _memory(sizes: tuple[int, ...] = (50, 300)) -> list[Row]:
    rows: list[Row] = []
    found: list[dict[str, Any]] = []
    with serving(0.0) as (url, _):
        for size in sizes:
            done = measured("experiment", url, size, 32)
            found.append(done)
            rows.append(fact(f"experiment of {size} one-call questions over HTTP: peak RSS",
                             round(done["peak_mb"], 1), "MB",
                             f"as at {sizes[0]} runs" if size != sizes[0] else ""))
    extra = sizes[-1] - sizes[0]
    for key, what, target in (
            ("running_mb", "while the runs run (before their results are read back)",
             "flat"),
            ("peak_mb", "of the whole process (the results read back included)",
             "a run's results only")):
        rows.append(fact(f"peak RSS growth from {sizes[0]} to {sizes[-1]} runs, per run added, "
                         f"{what}", round((found[-1][key] - found[0][key]) * 1024 / extra, 1),
                         "KB", target))
    return rows


def bench_http(count: int = 300, runs: int = 200) -> list[Row]:
    """Every row of the section (see the module)."""
    return [*_versus(0.0, count, 32), *_versus(0.2, count, 32), *_critical(),
            *_many_runs(runs), *_memory((50, count))]


def main(argv: list[str]) -> int:
    """`serve PORT LATENCY`: the server, until stopped; `experiment URL COUNT CONCURRENCY
    PROTOCOL FOLDER`: `work_experiment`, its figures and peak RSS printed as JSON."""
    if argv[0] == "serve":
        Server(float(argv[2]), int(argv[1])).serve_forever()
        return 0
    gc.disable()  # as `python -m engine` starts (engine.__main__)
    url, count, concurrency, protocol, folder = argv[1:6]
    print(json.dumps(work_experiment(url, protocol, int(count), int(concurrency), folder)),
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
