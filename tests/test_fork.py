"""Forking a stored run at round k (issue 29, engine/services/fork.py): the kept turns are not
called again (calls counted on the loopback OpenAI-compatible stub), later rounds differ only
where an edit or a dropped agent says they should, the new run names its parent, every
forkable protocol forks on the simulated model, the others are refused with a clear error,
the CLI, and the run detail's control that opens Compare."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from engine import ConfigError, Store
from engine.cli.main import main
from engine.protocols import REGISTRY, arun_config, run_sync, stored_rounds
from engine.services import fork as forking

STUB = "openai:stub-model?endpoint=stub"
QUESTION = "What is 17 * 3?"
KEPT = "kept from run"


def _society(store: Store, model: str = "simulated", rounds: int = 3, agents: int = 3,
             **options) -> str:
    config = {"protocol": "society", "model": model, "options": {"rounds": rounds, **options},
              "seats": {"agents": [{"name": f"agent {n}"} for n in range(1, agents + 1)]}}
    return str(run_sync(arun_config(config, QUESTION, store=store, expected="51",
                                    label="trio", tags=["mine"])).run_id)


def _calls(stub_endpoint, since: int = 0) -> list[dict]:
    """The chat calls the stub answered since request `since` (the grammar probe left out)."""
    return [r["body"] for r in stub_endpoint.requests[since:]
            if "grammar-probe" not in str(r["body"].get("grammar", ""))]


def _kept(turns) -> list:
    return [t for t in turns if any(str(w).startswith(KEPT) for w in t["warnings"])]


def test_kept_turns_are_not_called_again_over_http(stub_endpoint, store):
    original = _society(store, STUB)
    assert len(_calls(stub_endpoint)) == 9  # 3 agents x 3 rounds
    before = store.get(original)
    for k, calls in ((1, 9), (2, 6), (3, 3)):
        made = len(stub_endpoint.requests)
        result = forking.fork(store, original, k)
        assert len(_calls(stub_endpoint, made)) == calls
        new = store.get(result.run_id)
        kept = _kept(new["turns"])
        assert len(kept) == 3 * (k - 1) and all(t["round"] < k for t in kept)
        stored = {(t["seat"], t["round"]): t for t in before["turns"]}
        for again in kept:  # as stored (a round's calls end in any order: matched by seat)
            old = stored[(again["seat"], again["round"])]
            assert (again["reply"], again["tokens_in"], again["tokens_out"],
                    again["cost_usd"]) == (old["reply"], old["tokens_in"], old["tokens_out"],
                                           old["cost_usd"])
        # no edit: the stub answers the same prompts the same way, so nothing differs
        assert stored_rounds(new) == stored_rounds(before)
        assert new["metrics"]["forked_from"] == original
        assert (new["metrics"]["fork_round"], new["metrics"]["kept_turns"]) == (k, 3 * (k - 1))
        assert forking.forked_from(new) == (original, k)
        assert f"forked-from:{original}" in new["tags"] and "mine" in new["tags"]
        assert not any(t.startswith("rerun-of:") for t in new["tags"])
        assert (new["label"], new["expected"]) == ("trio", "51")


def test_an_edit_reaches_the_later_rounds_and_nothing_else(stub_endpoint, store):
    original = _society(store, STUB)
    first = store.get(original)["turns"][0]
    assert first["round"] == 1
    made = len(stub_endpoint.requests)
    edited = "I reconsidered: the answer is \\boxed{99}"
    result = forking.fork(store, original, 2, edits=[f"{first['idx']}={edited}"])
    sent = [json.dumps(body) for body in _calls(stub_endpoint, made)]
    assert len(sent) == 6
    # every round-2 prompt carries the edited reply: the others see it, its agent has it in
    # its own conversation
    assert sum("boxed{99}" in body for body in sent[:3]) == 3
    new = store.get(result.run_id)
    rounds = stored_rounds(new)
    assert rounds[0][first["seat"]] == "99"  # read again as a reply would be
    original_rounds = stored_rounds(store.get(original))
    assert {a: v for a, v in rounds[0].items() if a != first["seat"]} == {
        a: v for a, v in original_rounds[0].items() if a != first["seat"]}
    turn = next(t for t in new["turns"] if (t["seat"], t["round"]) == (first["seat"], 1))
    assert turn["reply"] == edited and "reply edited in the fork" in turn["warnings"]


def test_a_dropped_agent_is_gone_from_the_fork(stub_endpoint, store):
    original = _society(store, STUB)
    made = len(stub_endpoint.requests)
    result = forking.fork(store, original, 2, drop="agent 3")
    assert len(_calls(stub_endpoint, made)) == 4  # 2 agents x rounds 2 and 3
    new = store.get(result.run_id)
    assert {t["seat"] for t in new["turns"]} == {"agent 1", "agent 2"}
    assert all(set(r) == {"agent 1", "agent 2"} for r in stored_rounds(new))
    sent = [json.dumps(body) for body in _calls(stub_endpoint, made)]
    assert all(body.count("One agent's solution") == 1 for body in sent[:2])  # one other


def test_the_simulated_model_forks_every_forkable_protocol(store):
    assert {"society", "single", "roundtable", "panel", "duel"} <= set(forking.FORKABLE)
    assert not {"debate", "vote", "peer-review"} & set(forking.FORKABLE)
    for protocol in forking.FORKABLE:  # every one the registry says has rounds of answers
        spec = REGISTRY[protocol]
        options = {spec.rounds_option: 2} if spec.rounds_option else {}
        run_id = str(run_sync(arun_config({"protocol": protocol, "options": options},
                                          QUESTION, store=store, expected="51")).run_id)
        before = store.get(run_id)
        result = forking.fork(store, run_id, 2)
        new = store.get(result.run_id)
        assert new["status"] == "completed", (protocol, new["error"])
        kept = [t for t in before["turns"] if t["round"] < 2]
        assert len(_kept(new["turns"])) == len(kept) > 0
        assert len(new["turns"]) == len(before["turns"])
        assert stored_rounds(new) == stored_rounds(before), protocol  # nothing changed


def test_what_cannot_be_forked_says_why(store):
    debate = str(run_sync(arun_config({"protocol": "debate"}, QUESTION, store=store)).run_id)
    with pytest.raises(ConfigError, match="cannot be forked: only runs whose calls are rounds"):
        forking.fork(store, debate, 2)
    original = _society(store)
    with pytest.raises(ConfigError, match="from 1 to 3"):
        forking.fork(store, original, 4)
    with pytest.raises(ConfigError, match="from 1 to 3"):
        forking.fork(store, original, True)
    with pytest.raises(ConfigError, match="no agent 'nobody'"):
        forking.fork(store, original, 2, drop="nobody")
    with pytest.raises(ConfigError, match="turn 4 is not kept"):
        forking.fork(store, original, 2, edits={4: "x"})
    with pytest.raises(ConfigError):
        forking.fork(store, original, 2, edits={0: "   "})
    with pytest.raises(ConfigError, match="no run"):
        forking.fork(store, "missing", 2)
    pair = _society(store, agents=2)
    with pytest.raises(ConfigError, match="at least 2 agents"):
        forking.fork(store, pair, 2, drop="agent 1")
    single = str(run_sync(arun_config({"protocol": "single", "options": {"rounds": 2}},
                                      QUESTION, store=store)).run_id)
    with pytest.raises(ConfigError, match="sits alone"):
        forking.fork(store, single, 2, drop="agent")
    running = dict(store.get(original), status="running")
    with pytest.raises(ConfigError, match="still going"):
        forking.plan(running, 2)
    runs_before = len(store.runs())
    assert len(store.runs()) == runs_before  # a refused fork leaves no row


@given(st.text(max_size=30) | st.from_regex(r"\s*[0-9²٣]{1,12}\s*=.*", fullmatch=True))
def test_edit_flags_parse_or_refuse(text):
    head, sep, rest = text.partition("=")
    try:
        index, reply = forking.parse_edit(text)
    except ConfigError as exc:
        assert "INDEX=TEXT" in str(exc)
        assert not sep or not head.strip().isascii() or not head.strip().isdigit() or \
            len(head.strip()) > 9
    else:
        assert (index, reply) == (int(head.strip()), rest)


def test_the_cli(store, capsys):
    original = _society(store)
    assert main(["fork", original, "--round", "2", "--db", store.url,
                 "--edit", "1=\\boxed{7}"]) == 0
    out = capsys.readouterr().out
    assert f"a fork of {original} at round 2 (3 turn(s) kept, 6 call(s) made)" in out
    assert f"/compare?compare={original}," in out
    new_id = out.split()[1].rstrip(":")
    assert stored_rounds(store.get(new_id))[0]["agent 2"] == "7"
    assert main(["fork", original, "--round", "9", "--db", store.url]) == 2
    assert "from 1 to 3" in capsys.readouterr().err
    assert main(["fork", original, "--round", "2", "--edit", "x", "--db", store.url]) == 2


def test_the_run_detail_forks_and_opens_compare(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    store = Store(url)
    original = _society(store)
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"),
                           default_timeout=120).run()
    at.switch_page("pages/runs.py")
    at.query_params["run"] = original
    at.run()
    assert not at.exception, at.exception
    at.number_input(key="fork_round").set_value(3)
    at.selectbox(key="fork_drop").set_value("agent 2").run()
    at.selectbox(key="fork_edit").set_value(0).run()
    at.text_area(key="fork_text_0").input("\\boxed{12}")
    at.button(key="fork_go").click().run()
    assert not at.exception, at.exception
    forks = store.runs(tag=f"forked-from:{original}")
    assert len(forks) == 1
    new = store.get(forks.iloc[0]["id"])
    assert new["status"] == "completed"
    assert {t["seat"] for t in new["turns"]} == {"agent 1", "agent 3"}
    assert stored_rounds(new)[0]["agent 1"] == "12"
    assert at.query_params["compare"] == f"{original},{new['id']}"
