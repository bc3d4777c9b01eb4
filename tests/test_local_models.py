"""Issue 15: local models behind an OpenAI-compatible server. Output is bounded in the field
the server reads, an abandoned call closes its connection, call policy is configurable and
checked, the endpoint travels with the seat, and progress says what happened.

Every call here goes over HTTP to the loopback test server (`openai_stub`).
"""
from __future__ import annotations

import json
import time

import pytest
from openai_stub import ENDPOINT_SETTINGS, SimulatedOpenAI, loopback_only
from plugins.reruns import rerun

from engine import Seat, Store, get_model, run_vote
from engine.cli.main import main
from engine.llm.endpoints import EndpointRegistry
from engine.llm.providers import DEFAULT_MAX_TOKENS
from engine.models import ConfigError

QUESTION = "What is 6 x 7?"


@pytest.fixture(autouse=True)
def loopback_env(monkeypatch):
    loopback_only(monkeypatch, *ENDPOINT_SETTINGS)


@pytest.fixture
def stub():
    with SimulatedOpenAI() as server:
        yield server


def bodies(server) -> list[dict]:
    return [r["body"] for r in server.requests]


def vote(model, **kw):
    seats = [Seat(name, model) for name in ("a", "b", "c")]
    return run_vote(QUESTION, voters=seats, **kw)


# ------------------------------------------------------------------ 1. bounded output
def test_cap_reaches_the_server_in_max_tokens(stub):
    """The seat's cap arrives as `max_tokens` (what llama.cpp's server reads), never as
    `max_completion_tokens` alone (which it ignores)."""
    vote(get_model(f"openai:smol?max_tokens=30&base_url={stub.base_url}"))
    assert bodies(stub) and all(b.get("max_tokens") == 30 for b in bodies(stub))
    assert not any("max_completion_tokens" in b for b in bodies(stub))


def test_default_cap_reaches_the_server(stub):
    vote(get_model(f"openai:smol?base_url={stub.base_url}"))
    assert all(b.get("max_tokens") == DEFAULT_MAX_TOKENS for b in bodies(stub))


def test_endpoint_cap_applies_and_the_seat_wins(stub, monkeypatch):
    monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps(
        {"local": {"base_url": stub.base_url, "max_tokens": 77}}))
    get_model("openai:smol?endpoint=local").invoke("hi")
    get_model("openai:smol?endpoint=local&max_tokens=12").invoke("hi")
    assert [b["max_tokens"] for b in bodies(stub)] == [77, 12]


def test_openai_own_api_keeps_its_field():
    """OpenAI's API reads `max_completion_tokens`: its models keep langchain's field."""
    model = get_model("openai:gpt-4o-mini", endpoints=EndpointRegistry(), api_key="sk-x")
    assert model.max_tokens == DEFAULT_MAX_TOKENS and not model.extra_body


def test_hung_reply_is_abandoned_and_its_connection_closed():
    """Past the timeout Parley gives up on the call and closes the request: the server sees
    the client disconnect, so a server that stops on disconnect stops generating."""
    with SimulatedOpenAI(hang=10) as server:
        model = get_model(f"openai:smol?base_url={server.base_url}")
        clock = time.monotonic()
        result = vote(model, timeout_per_call=0.5, retries=0)
        assert time.monotonic() - clock < 8
        assert [t.status for t in result.turns] == ["degraded"] * 3
        assert all("TimeoutError" in t.error for t in result.turns)
        # every request sent was closed (the calls waiting on structured-output detection,
        # engine.llm.structured, gave up before sending theirs)
        deadline = time.monotonic() + 8
        while len(server.disconnected) < len(server.requests) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests and server.disconnected == [True] * len(server.requests)


# ------------------------------------------------------------------ 2. call policy
def cli(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_policy_flags_are_checked_before_any_call(stub, capsys, tmp_path):
    db = ["--db", f"sqlite:///{tmp_path / 'p.db'}", "--base-url", stub.base_url,
          "--model", "openai:smol"]
    for flags, said in ((["--timeout-per-call", "0"], "--timeout-per-call must be"),
                        (["--retries", "-1"], "--retries must be")):
        code, _out, err = cli(["run", "vote", QUESTION, *db, *flags], capsys)
        assert code == 2 and said in err
    code, _out, err = cli(["run", "vote", QUESTION, *db, "--option", "timeout_per_call=180"],
                          capsys)
    assert code == 2 and "use --timeout-per-call 180" in err and "options are \n" not in err
    code, _out, err = cli(["run", "vote", QUESTION, *db, "--option", "nope=1"], capsys)
    assert code == 2 and "vote takes no options" in err
    assert stub.requests == []


def test_endpoint_policy_sets_timeout_and_retries(monkeypatch):
    with SimulatedOpenAI(hang=10) as server:
        monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps(
            {"slow": {"base_url": server.base_url, "timeout": 0.3, "retries": 0,
                      "concurrency": 1}}))
        clock = time.monotonic()
        result = vote("openai:smol?endpoint=slow")
        assert time.monotonic() - clock < 6  # one at a time, 0.3 s each, no retry
        assert [t.attempts for t in result.turns] == [1, 1, 1]


def test_endpoint_policy_is_checked_when_read():
    for field, value in (("timeout", 0), ("retries", -1), ("concurrency", 0),
                         ("max_tokens", "many")):
        with pytest.raises(ConfigError, match=field):
            EndpointRegistry.from_settings({"PARLEY_ENDPOINTS": json.dumps(
                {"local": {"base_url": "http://127.0.0.1:9/v1", field: value}})})


def test_spec_configs_take_call_policy_and_refuse_unknown_keys(store):
    from engine.experiments import plan
    base = {"questions": [{"question": QUESTION, "expected": "42"}],
            "configs": [{"protocol": "vote", "label": "v"}]}
    checked = plan({**base, "timeout_per_call": 180, "retries": 1}, store)
    assert checked.configs[0]["timeout_per_call"] == 180 and checked.configs[0]["retries"] == 1
    own = plan({**base, "retries": 1, "configs": [{"protocol": "vote", "retries": 3}]}, store)
    assert own.configs[0]["retries"] == 3
    for bad, said in (({"timeout_per_call": 0}, "timeout_per_call"),
                      ({"retries": -1}, "retries"),
                      ({"configs": [{"protocol": "vote", "modle": "openai:x"}]}, "'modle'"),
                      ({"configs": [{"protocol": "vote", "baseurl": "http://x"}]},
                       "'baseurl'")):
        with pytest.raises(ConfigError, match=said):
            plan({**base, **bad}, store)


# ------------------------------------------------------------------ 4. the endpoint travels
def test_rerun_of_a_base_url_run_calls_the_same_url(stub, capsys, tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    code, _out, _err = cli(["run", "vote", QUESTION, "--model", "openai:smol", "--base-url",
                            stub.base_url, "--db", url], capsys)
    assert code == 0 and len(stub.requests) == 3
    store = Store(url)
    run = store.get(store.runs().iloc[0]["id"])
    models = {seat["model"] for seats in run["config"]["seats"].values() for seat in seats}
    assert models == {f"openai:smol?base_url={stub.base_url}"}
    again = rerun(store, run)
    assert len(stub.requests) == 6 and all(t["status"] == "ok" for t in again["turns"])
    assert all(r["auth"] in ("", "Bearer not-needed") for r in stub.requests[3:])


def test_rerun_refuses_an_endpoint_it_may_not_call(stub, capsys, tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    cli(["run", "vote", QUESTION, "--model", "openai:smol", "--base-url", stub.base_url,
         "--db", url], capsys)
    store = Store(url)
    run = store.get(store.runs().iloc[0]["id"])
    with pytest.raises(ConfigError, match="not a registered endpoint"):
        rerun(store, run, endpoints=EndpointRegistry(allow_free_urls=False))
    assert len(stub.requests) == 3


def test_a_seats_own_base_url_wins_over_the_global_one(stub, capsys, tmp_path):
    with SimulatedOpenAI() as other:
        url = f"sqlite:///{tmp_path / 'p.db'}"
        code, _out, _err = cli(["run", "vote", QUESTION, "--model", "openai:smol",
                                "--base-url", stub.base_url, "--seat",
                                f"cautious=openai:smol?base_url={other.base_url}",
                                "--db", url], capsys)
        assert code == 0 and len(other.requests) == 1 and len(stub.requests) == 2


# ------------------------------------------------------------------ 5. say what happened
def test_progress_shows_final_status_retries_and_the_host(capsys, tmp_path):
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, _out, err = cli(["run", "vote", QUESTION, "--model", "openai:smol", "--base-url",
                           f"http://127.0.0.1:{port}/v1?x=1", "--retries", "1",
                           "--timeout-per-call", "5", "--db",
                           f"sqlite:///{tmp_path / 'p.db'}"], capsys)
    lines = [line for line in err.splitlines() if line.startswith("  [")]
    assert len(lines) == 3
    for line in lines:
        assert "degraded (connection error)" in line and "after 1 retry" in line
        assert f"calling http://127.0.0.1:{port}" in line and "x=1" not in line


def test_experiment_progress_counts_turns_by_status_and_retries(capsys, tmp_path):
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({
        "questions": [{"question": QUESTION, "expected": "42"}],
        "configs": [{"protocol": "vote", "label": "dead", "model": "openai:smol",
                     "base_url": f"http://127.0.0.1:{port}/v1"}]}), encoding="utf-8")
    code, _out, err = cli(["experiment", "run", str(spec), "--retries", "1",
                           "--db", f"sqlite:///{tmp_path / 'p.db'}"], capsys)
    assert code == 1
    assert "turns 0 ok, 3 degraded (3 connection errors), 3 retries" in err
    assert err.count("degraded (connection error)") == 3
    assert f"calling http://127.0.0.1:{port}" in err


# ------------------------------------------------------------------ 3. garbage is no position
def test_template_echo_stances_abstain(recording_model):
    """The prompt's own placeholder, and an essay, are no position: they abstain and the turn
    says why; a short real stance still counts."""
    replies = ['{"stance": "your answer to", "answer": "x", "reasoning": "y"}',
               '{"stance": "' + " ".join(["word"] * 13) + '", "answer": "x", "reasoning": "y"}',
               '{"stance": "42", "answer": "42", "reasoning": "six sevens"}']
    seats = [Seat(f"s{i}", recording_model([reply])) for i, reply in enumerate(replies)]
    result = run_vote(QUESTION, voters=seats)
    assert result.tally.winner == "42" and result.tally.abstentions == ["s0", "s1"]
    echo, essay, fine = sorted(result.turns, key=lambda t: t.seat)
    assert any("echoes the prompt's own text" in w for w in echo.warnings)
    assert any("13 words" in w for w in essay.warnings)
    assert fine.warnings == [] and all(t.ok for t in result.turns)


def test_roundtable_template_stance_abstains_and_the_floor_carries_its_caveat(recording_model):
    from engine import run_roundtable
    llm = recording_model(fn=lambda convo: "We agree on the plan.\n"
                                           "STANCE: your role in a short paragraph")
    judge = recording_model(fn=lambda convo: "not json")
    result = run_roundtable(QUESTION, agents=[Seat("a", llm, role="critic"),
                                              Seat("b", llm, role="optimist")],
                            judge=Seat("j", judge), rounds=1)
    assert result.stance_tally.winner is None
    assert all(any("echoes" in w for w in t.warnings) for t in result.turns
               if t.phase == "turn")
    assert result.agreement.caveat == "lexical floor only"
    from engine.protocols.roundtable_result import outcome, summary
    assert "(lexical floor only)" in summary(result) and "(lexical floor only)" in outcome(result)
    assert any(w.startswith("lexical-only") for w in result.warnings)


def test_an_echoed_format_line_is_no_approval():
    from engine.analysis import is_approved
    assert not is_approved("APPROVED: yes or no\nFEEDBACK: what to change")
    assert not is_approved("approved: yes/no")
    assert is_approved("APPROVED: yes or no\n\nAPPROVED: yes\nFEEDBACK: none")
    assert is_approved("approved: yes")


# ------------------------------------------------------------------ 5. outcome sentences
def test_compare_says_why_nothing_could_be_compared():
    import pandas as pd

    from engine.reports.experiments import compare
    rows = [{"label": label, "q": q, "counted": True, "correct": None, "expected": expected}
            for label in ("a", "b") for q, expected in ((0, ""), (1, None))]
    assert "scoring needs expected answers" in compare(pd.DataFrame(rows), "a", "b")["sentence"]
    rows = [{"label": "a", "q": 0, "counted": True, "correct": True, "expected": "42"},
            {"label": "b", "q": 0, "counted": True, "correct": None, "expected": "42"}]
    sentence = compare(pd.DataFrame(rows), "a", "b")["sentence"]
    assert "expected answers, but b produced no answer to score" in sentence
    assert "scoring needs" not in sentence
    # b answered, but only questions with no expected answer: it had nothing to score
    rows[1] = {"label": "b", "q": 1, "counted": True, "correct": None, "expected": ""}
    sentence = compare(pd.DataFrame(rows), "a", "b")["sentence"]
    assert "(b ran only questions with no expected answer)" in sentence
    assert "produced no answer" not in sentence


def test_preflight_notes_an_endpoint_that_serves_fewer_calls_at_once(capsys, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps(
        {"smol": {"base_url": "http://127.0.0.1:9/v1", "concurrency": 1}}))
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({
        "questions": [{"question": QUESTION, "expected": "42"}], "concurrency": 4,
        "configs": [{"protocol": "vote", "label": "local", "model": "openai:smol?endpoint=smol"},
                    {"protocol": "vote", "label": "by-url", "model": "openai:smol",
                     "base_url": "http://127.0.0.1:9/v1/"}]}), encoding="utf-8")
    code, out, _err = cli(["experiment", "run", str(spec), "--dry-run",
                           "--db", f"sqlite:///{tmp_path / 'p.db'}"], capsys)
    assert code == 0
    assert out.count("note: endpoint smol serves 1 call(s) at a time") == 1
    assert "runs 4 runs at once" in out


def test_the_registry_describes_each_endpoints_call_policy():
    registry = EndpointRegistry.from_settings({"PARLEY_ENDPOINTS": json.dumps(
        {"smol": {"base_url": "http://127.0.0.1:9/v1", "max_tokens": 300, "timeout": 180,
                  "concurrency": 1}, "plain": {"base_url": "http://127.0.0.1:8/v1"}})})
    rows = {row["name"]: row["call policy"] for row in registry.describe()}
    assert rows == {"smol": "max_tokens 300, timeout 180, concurrency 1", "plain": "defaults"}


def test_experiment_run_policy_flags_are_checked_and_applied(capsys, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"questions": [{"question": QUESTION, "expected": "42"}],
                                "configs": [{"protocol": "vote", "retries": 3}]}),
                    encoding="utf-8")
    db = ["--db", f"sqlite:///{tmp_path / 'p.db'}"]
    code, _out, err = cli(["experiment", "run", str(spec), "--timeout-per-call", "0", *db],
                          capsys)
    assert code == 2 and "--timeout-per-call must be" in err
    code, _out, _err = cli(["experiment", "run", str(spec), "--timeout-per-call", "7",
                            "--retries", "0", "--quiet", *db], capsys)
    assert code == 0
    from engine.store.experiments import list_experiments, row
    store = Store(db[1])
    stored = row(store, list_experiments(store)["id"].iloc[0])["spec"]["configs"][0]
    assert (stored["timeout_per_call"], stored["retries"]) == (7, 0)
