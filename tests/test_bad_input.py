"""Hostile and mistaken input, as a table: each case gets a clear message, and nothing is stored.

API cases must raise `ConfigError` (with the expected code and a message naming what to
change) before any model is called; CLI cases must exit 2 with one line on stderr.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import integrity

from engine import (
    ConfigError,
    Seat,
    Store,
    experiments,
    get_model,
    run_debate,
    run_duel,
    run_panel,
    run_peer_review,
    run_roundtable,
    run_vote,
)
from engine.cli.main import main as cli_main
from engine.llm.endpoints import EndpointRegistry
from engine.protocols import arun_config, check_config, get_protocol, run_sync
from engine.questions import files as qsets
from engine.services import library

ROOT = Path(__file__).resolve().parents[1]


def spy_model(recording_model):
    """A fake model that records calls: bad input must be refused before any."""
    return recording_model(["should never be used"])


def seats(model, *names, role=""):
    return [Seat(n, model, role=role) for n in names]


# (id, call(model, store) -> None, code, words the message must contain)
API_CASES = [
    ("empty question", lambda m, s: run_debate("", proponent=m, opponent=m, judge=m, store=s),
     "input", ["topic", "non-empty"]),
    ("whitespace-only question",
     lambda m, s: run_panel("   \n\t ", debaters=seats(m, "a", "b"), critic=m, judge=m, store=s),
     "input", ["question"]),
    ("100 KB question", lambda m, s: run_vote("x" * 100_000, voters=seats(m, "a", "b"), store=s),
     "limit", ["20,000"]),
    ("NUL byte in question",
     lambda m, s: run_peer_review("write\x00this", producer=m, reviewer=m, store=s),
     "input", ["NUL"]),
    ("unknown protocol", lambda m, s: get_protocol("brawl"), "input", ["debate", "panel"]),
    ("debate rounds 0",
     lambda m, s: run_debate("q", proponent=m, opponent=m, judge=m, max_rounds=0, store=s),
     "limit", ["max_rounds"]),
    ("debate rounds not a number",
     lambda m, s: run_debate("q", proponent=m, opponent=m, judge=m, max_rounds="3", store=s),
     "input", ["max_rounds"]),
    ("peer review iterations -1",
     lambda m, s: run_peer_review("q", producer=m, reviewer=m, max_iterations=-1, store=s),
     "limit", ["max_iterations"]),
    ("roundtable rounds 4",
     lambda m, s: run_roundtable("q", agents=seats(m, "a", "b"), rounds=4, store=s),
     "limit", ["rounds", "1..3"]),
    ("roundtable rounds 0",
     lambda m, s: run_roundtable("q", agents=seats(m, "a", "b"), rounds=0, store=s),
     "limit", ["rounds"]),
    ("roundtable 6 agents",
     lambda m, s: run_roundtable("q", agents=seats(m, *"abcdef"), store=s),
     "limit", ["agents", "5"]),
    ("roundtable 0 agents", lambda m, s: run_roundtable("q", agents=[], store=s),
     "limit", ["agents"]),
    ("duplicate seat names (roundtable)",
     lambda m, s: run_roundtable("q", agents=seats(m, "Ada", "Ada"), store=s),
     "input", ["Ada"]),
    ("duplicate seat names (duel)",
     lambda m, s: run_duel("q", a=Seat("x", m), b=Seat("x", m), store=s), "input", ["x"]),
    ("seat with no model",
     lambda m, s: run_roundtable("q", agents=[Seat("a", m), Seat("b", None)], store=s),
     "no_model", ["model"]),
    ("unknown model spec",
     lambda m, s: run_debate("q", proponent="gpt-9", opponent=m, judge=m, store=s),
     "no_model", ["openai:MODEL"]),
    ("unknown simulated option", lambda m, s: get_model("simulated?speed=3"),
     "no_model", ["speed"]),
    ("fault rate out of range", lambda m, s: get_model("simulated?fail=2"),
     "no_model", ["0..1"]),
    ("simulated latency of 1e308 seconds", lambda m, s: get_model("simulated?latency=1e308"),
     "no_model", ["latency", "0..600"]),
    ("unknown prompt template",
     lambda m, s: run_debate("q", proponent=m, opponent=m, judge=m, store=s,
                             prompts={"closing": "x"}), "input", ["judge"]),
    ("unknown placeholder in a prompt",
     lambda m, s: run_debate("q", proponent=m, opponent=m, judge=m, store=s,
                             prompts={"judge": "Rule on {topic} with {mood}"}),
     "input", ["{transcript}"]),
    ("panel with one debater",
     lambda m, s: run_panel("q", debaters=seats(m, "a"), critic=m, judge=m, store=s),
     "limit", ["debaters"]),
    ("vote with no voters", lambda m, s: run_vote("q", voters=[], store=s), "limit", ["voters"]),
    ("duel converge not callable",
     lambda m, s: run_duel("q", a=Seat("a", m), b=Seat("b", m), converge="maybe", store=s),
     "input", ["converge"]),
    ("duel reply unknown",
     lambda m, s: run_duel("q", a=Seat("a", m), b=Seat("b", m), reply="summary", store=s),
     "input", ["reply"]),
    ("duel first unknown",
     lambda m, s: run_duel("q", a=Seat("a", m), b=Seat("b", m), first="c", store=s),
     "input", ["first"]),
    ("duel first callable",  # only converge and reply take a callable
     lambda m, s: run_duel("q", a=Seat("a", m), b=Seat("b", m), first=str, store=s),
     "input", ["first"]),
    ("unknown run option",
     lambda m, s: run_debate("q", proponent=m, opponent=m, judge=m, store=s, rounds=3),
     "input", ["rounds"]),
    ("configuration with an unknown seat",
     lambda m, s: run_sync(arun_config({"protocol": "debate", "seats": {"moderator": {}}},
                                       "q", store=s)), "input", ["moderator", "proponent"]),
    ("configuration with an unknown option",
     lambda m, s: run_sync(arun_config({"protocol": "panel", "options": {"rounds": 2}},
                                       "q", store=s)), "input", ["rounds"]),
    ("malformed run import", lambda m, s: s.import_runs("{not json"), "input", ["JSON"]),
    ("import of something that is not a run",
     lambda m, s: s.import_runs('{"hello": "world"}'), "input", ["record 1"]),
    ("malformed persona YAML",
     lambda m, s: library.import_yaml(s, "personas:\n  - name: [unclosed\n"), "input",
     ["line"]),
    ("persona YAML of the wrong shape",
     lambda m, s: library.import_yaml(s, "- just\n- a list\n"), "input", ["YAML"]),
    ("persona with an empty name",
     lambda m, s: library.save_entry(s, "persona", {"name": "  ", "persona": "x"}),
     "input", ["name"]),
    ("question file with bad rows",
     lambda m, s: qsets.parse_questions("question,expected\nWhat is 2+2?,4\n,5\n", "q.csv"),
     "input", ["3"]),
    ("question JSONL with a broken line",
     lambda m, s: qsets.parse_questions('{"question": "ok"}\n{oops\n', "q.jsonl"),
     "input", ["2"]),
    # issue 10, "YAML alias bombs": size, aliases and nesting are capped, with the place named
    ("library YAML alias bomb",
     lambda m, s: library.import_yaml(s, "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
         f"{k}: &{k} [{', '.join([f'*{p}'] * 10)}]\n" for p, k in zip("abcde", "bcdef"))),
     "limit", ["aliases", "10,000", "line", "nothing was imported"]),
    ("library YAML nested 1,000 deep",
     lambda m, s: library.import_yaml(s, "personas: " + "[" * 1000 + "]" * 1000), "limit",
     ["deeper than 50", "line 1"]),
    ("library YAML over 1 MB",
     lambda m, s: library.import_yaml(s, "personas: []\n#" + "x" * 1_000_000), "limit",
     ["1,000,000"]),
    ("question file over 20 MB",
     lambda m, s: qsets.parse_questions(b"question\n" + b"x?\n" * 7_000_000, "q.csv"),
     "limit", ["20 MB"]),
    ("question JSONL nested 100,000 deep",
     lambda m, s: qsets.parse_questions('{"question": ' + "[" * 100_000 + "]" * 100_000 + "}",
                                        "q.jsonl"), "input", ["row 1", "nested too deeply"]),
    ("saved configuration with a bad placeholder",
     lambda m, s: check_config({"protocol": "panel",
                                   "prompts": {"critique": "{question} {nonsense}"}}),
     "input", ["{nonsense}"]),
    # issue 10, bullet 1: keys stay home
    ("a key inside a model spec",
     lambda m, s: run_debate("q", proponent="openai:gpt-4o?api_key=sk-x", opponent=m, judge=m,
                             store=s), "input", ["environment", "secrets.toml"]),
    ("a key inside a saved configuration's spec",
     lambda m, s: library.save_config(s, {"protocol": "vote",
                                          "model": "openai:m?token=sk-x"}, "leak"),
     "input", ["secrets.toml"]),
    ("a typed base URL when free URLs are off",
     lambda m, s: get_model("openai:m?base_url=http://127.0.0.1:9/v1",
                            endpoints=EndpointRegistry(allow_free_urls=False)),
     "input", ["not a registered endpoint", "?endpoint=NAME"]),
    ("a file:// base URL", lambda m, s: get_model("openai:m?base_url=file:///etc/passwd"),
     "input", ["only http and https"]),
    ("a gopher:// base URL", lambda m, s: get_model("openai:m?base_url=gopher://h:70/_"),
     "input", ["only http and https"]),
    ("a link-local base URL", lambda m, s: get_model("openai:m?base_url=http://169.254.1.2/v1"),
     "input", ["link-local"]),
    ("a metadata base URL",
     lambda m, s: run_sync(arun_config({"protocol": "vote", "model": "openai:m",
                                        "base_url": "http://169.254.169.254/"}, "q",
                                       store=s)), "input", ["metadata"]),
    ("an unknown endpoint", lambda m, s: get_model("openai:m?endpoint=nope"), "input",
     ["no endpoint named 'nope'"]),
    # issue 10, bullet 6: options and limits
    ("retries -1", lambda m, s: run_debate("q", proponent=m, opponent=m, judge=m, retries=-1,
                                           store=s), "limit", ["retries"]),
    ("timeout_per_call 0", lambda m, s: run_vote("q", voters=seats(m, "a", "b"),
                                                 timeout_per_call=0, store=s),
     "input", ["timeout_per_call"]),
    ("concurrency 0", lambda m, s: run_vote("q", voters=seats(m, "a", "b"), concurrency=0,
                                            store=s), "limit", ["concurrency"]),
    ("debate rounds 10**20",
     lambda m, s: run_debate("q", proponent=m, opponent=m, judge=m, max_rounds=10**20,
                             store=s), "limit", ["max_rounds", "1..20"]),
    ("peer review iterations 21",
     lambda m, s: run_peer_review("q", producer=m, reviewer=m, max_iterations=21, store=s),
     "limit", ["max_iterations", "1..20"]),
    ("an experiment of more than 20,000 calls",
     lambda m, s: experiments.plan({"questions": [f"q{n}" for n in range(5)], "repeats": 100,
                                    "configs": [{"protocol": "debate",
                                                 "options": {"max_rounds": 20}}]}, s),
     "limit", ["20,000", "--yes"]),
    ("a configuration key misspelt",
     lambda m, s: run_sync(arun_config({"protocol": "debate", "modle": "simulated"}, "q",
                                       store=s)), "input", ["'modle'", "model"]),
    ("a seat key misspelt",
     lambda m, s: check_config({"protocol": "debate",
                                   "seats": {"judge": {"baseurl": "x"}}}),
     "input", ["'baseurl'", "name"]),
    ("a saved max_rounds beyond the form's range",
     lambda m, s: check_config({"protocol": "debate",
                                   "options": {"max_rounds": 50}}),
     "limit", ["max_rounds must be 1..20"]),
    ("temperature=hot in a spec",
     lambda m, s: run_vote("q", voters=["openai:m?temperature=hot", m], store=s),
     "input", ["temperature", "number"]),
    ("a seat temperature that is not a number",
     lambda m, s: run_sync(arun_config({"protocol": "vote", "seats": {"voters": [
         {"name": "a", "temperature": "hot"}, {"name": "b"}]}}, "q", store=s)),
     "input", ["temperature"]),
    # issue 10, bullet 8: names and text
    ("a question of zero-width characters",
     lambda m, s: run_vote("\u200b\u200d\ufeff", voters=seats(m, "a", "b"), store=s),
     "input", ["visible"]),
    ("seat names equal after folding",
     lambda m, s: run_roundtable("q", agents=seats(m, "Ada", "ＡＤＡ"), store=s),
     "input", ["same name"]),
    ("persona names equal after folding",
     lambda m, s: library.import_yaml(s, "personas:\n  - name: Ana\n  - name: ' ana'\n"),
     "input", ["twice", "nothing was imported"]),
    ("a prompt override without {question}",
     lambda m, s: run_vote("q", voters=seats(m, "a", "b"), store=s,
                           prompts={"propose": "Answer in JSON."}), "input", ["{question}"]),
    ("a seat name over 200 characters",
     lambda m, s: run_vote("q", voters=seats(m, "a", "b" * 201), store=s), "limit", ["200"]),
    ("a label over 200 characters",
     lambda m, s: run_vote("q", voters=seats(m, "a", "b"), label="L" * 201, store=s),
     "limit", ["label", "200"]),
    ("a NUL in a seat name",
     lambda m, s: run_vote("q", voters=seats(m, "a", "b\x00"), store=s), "input", ["NUL"]),
    ("a model spec over 200 characters",
     lambda m, s: run_vote("q", voters=[m, "simulated?seed=" + "9" * 200], store=s),
     "limit", ["200"]),
]


@pytest.mark.parametrize("name,call,code,words", API_CASES, ids=[c[0] for c in API_CASES])
def test_api_bad_input(name, call, code, words, recording_model, store, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = spy_model(recording_model)
    with pytest.raises(ConfigError) as caught:
        call(model, store)
    assert caught.value.code == code
    for word in words:
        assert word in str(caught.value), f"{name}: {caught.value}"
    assert model.received == []  # raised before any model call
    assert store.runs().empty  # nothing stored
    assert store.library("persona") == []


def test_missing_api_key_names_the_variable(monkeypatch, store):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError) as caught:
        run_debate("q", proponent="openai:gpt-4o-mini", opponent="simulated",
                   judge="simulated", store=store)
    assert "OPENAI_API_KEY" in str(caught.value) and caught.value.code == "no_model"
    assert store.runs().empty


def test_unreachable_base_url_degrades_turns_and_fails_the_run(store, monkeypatch):
    import socket
    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    model = get_model("openai:nobody", base_url=f"http://127.0.0.1:{port}/v1", timeout=2)
    result = run_debate("q", proponent=model, opponent=model, judge=model, max_rounds=1,
                        store=store, retries=0)
    assert all(t.status == "degraded" and t.error for t in result.turns)
    assert result.rounds[0].proponent_argument == "Error: Unable to generate argument."
    assert result.verdict.startswith("Unable to reach verdict due to error:")
    row = store.get(result.run_id)  # no call succeeded: the run is failed, and says why
    assert row["status"] == "failed"
    assert row["error"].startswith("no model call succeeded (3 calls: 3 ")


def test_sql_metacharacters_and_html_are_kept_as_plain_data(store):
    question = "<script>alert(1)</script> '; DROP TABLE runs; -- <img src=x onerror=alert(1)>"
    result = run_vote(question, voters=seats("simulated", "a", "b"), store=store,
                      label="x' OR '1'='1", tags=["<b>t</b>"])
    row = store.get(result.run_id)
    assert row["question"] == question and row["label"] == "x' OR '1'='1"
    assert store.runs(search="'; DROP TABLE runs; --")["id"].tolist() == [result.run_id]
    assert store.runs(label="x' OR 1=1").empty
    assert len(store.runs()) == 1 and integrity(store) == "ok"


CLI_CASES = [
    ("unknown protocol", ["run", "brawl", "q"], "unknown protocol"),
    ("rounds 0", ["run", "debate", "q", "--rounds", "0"], "max_rounds"),
    ("rounds not a number", ["run", "debate", "q", "--rounds", "three"], "--rounds"),
    ("bad --seat", ["run", "debate", "q", "--seat", "judge"], "NAME=SPEC"),
    ("unknown seat", ["run", "debate", "q", "--seat", "moderator=simulated"], "moderator"),
    ("empty question", ["run", "panel", ""], "question"),
    ("unknown model", ["run", "vote", "q", "--model", "gpt-9"], "openai:MODEL"),
    ("roundtable rounds 4", ["run", "roundtable", "q", "--rounds", "4"], "rounds"),
    ("show unknown run", ["show", "nope"], "no run"),
    ("export unknown run", ["export", "nope"], "no run"),
    ("missing config file", ["run", "debate", "q", "--config", "/nonexistent.yaml"],
     "cannot read"),
    ("unknown command", ["fight"], "invalid choice"),
    ("unknown --option", ["run", "debate", "q", "--option", "mood=calm"], "max_rounds"),
    ("bad --option", ["run", "duel", "q", "--option", "converge"], "NAME=VALUE"),
    ("bad --option value", ["run", "duel", "q", "--option", "converge=maybe"], "converge"),
    ("bad debate timeout", ["run", "debate", "q", "--option", "timeout=soon"], "timeout"),
    ("--rounds on a panel", ["run", "panel", "q", "--rounds", "2"], "panel has no rounds"),
    ("--rounds on a vote", ["run", "vote", "q", "--rounds", "2"], "vote has no rounds"),
    ("--rounds 10**20", ["run", "debate", "q", "--rounds", "99999999999999999999"], "1..20"),
    ("a key in --model", ["run", "vote", "q", "--model", "openai:m?api_key=sk-x"],
     "secrets.toml"),
    ("a file:// --base-url", ["run", "vote", "q", "--model", "openai:m", "--base-url",
                              "file:///etc/passwd"], "only http and https"),
    ("temperature=hot", ["run", "vote", "q", "--model", "openai:m?temperature=hot"],
     "temperature"),
    ("a zero-width question", ["run", "vote", "\u200b\u200b"], "visible"),
    ("a label over 200 characters", ["run", "vote", "q", "--label", "L" * 201], "200"),
]


@pytest.mark.parametrize("name,argv,words", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_bad_input(name, argv, words, tmp_path, capsys):
    db = ["--db", f"sqlite:///{tmp_path / 'p.db'}"] if argv[0] in {"run", "show",
                                                                    "export"} else []
    with pytest.raises(SystemExit) if argv[0] == "fight" or "three" in argv else _nullcontext():
        code = cli_main(argv + db)
        assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err
    if db:
        assert Store(db[1]).runs().empty


def test_cli_malformed_config_yaml(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("protocol: [debate\nseats: {", encoding="utf-8")
    code = cli_main(["run", "debate", "q", "--config", str(bad), "--db",
                     f"sqlite:///{tmp_path / 'p.db'}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "not valid JSON or YAML" in err


def test_cli_exit_status_from_a_real_process(tmp_path):
    done = subprocess.run([sys.executable, "-m", "engine", "run", "debate", " ", "--db",
                           f"sqlite:///{tmp_path / 'p.db'}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=os.environ.copy())
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
