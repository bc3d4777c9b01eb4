"""A recognisable API key is used for every protocol over real HTTP, and never stored or shown.

The key must reach the model server (the Authorization header proves it was in play) and
appear in no database row or file, export, log line or CLI output.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import Store
from engine.protocols import REGISTRY, arun_config, run_sync

from openai_stub import SimulatedOpenAI

KEY = "sk-parley-FAKE-0123456789-secret-canary"
ROOT = Path(__file__).resolve().parents[1]


def register(monkeypatch, server) -> None:
    """Register the stub as an endpoint whose key is OPENAI_API_KEY (issue 10: a key goes
    only to its provider's API or a registered endpoint)."""
    monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps(
        {"sim": {"base_url": server.base_url, "key_env": "OPENAI_API_KEY"}}))


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("PARLEY_ENDPOINTS", raising=False)
    return monkeypatch


def _all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


def test_key_is_used_but_never_stored_exported_or_logged(tmp_path, clean_env, caplog):
    caplog.set_level(logging.DEBUG)
    db = tmp_path / "db"
    store = Store(f"sqlite:///{db / 'parley.db'}")
    with SimulatedOpenAI() as server:
        register(clean_env, server)  # a URL in a configuration gets the key only when registered
        for name in REGISTRY:
            config = {"protocol": name, "model": "openai:sim-model", "base_url": server.base_url}
            result = run_sync(arun_config(config, "Should this service move to microservices?",
                                          store=store, tags=["secrets"]))
            assert result.run_id and result.turns
            assert all(t.status == "ok" for t in result.turns), name
        assert server.requests and all(r["auth"] == f"Bearer {KEY}" for r in server.requests)
        cli = subprocess.run(
            [sys.executable, "-m", "engine", "run", "debate", "Should we?", "--model",
             "openai:sim-model", "--base-url", server.base_url, "--db",
             f"sqlite:///{db / 'parley.db'}", "--json"],
            cwd=ROOT, env=os.environ.copy(), capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    runs = store.runs(tag="secrets")
    assert set(runs["protocol"]) == set(REGISTRY)
    exports = store.export_jsonl() + store.runs(with_result=True).to_csv()
    for run_id in runs["id"]:
        exports += store.export_run(run_id)
    assert KEY not in exports
    assert KEY.encode() not in _all_bytes(db)
    assert KEY not in cli.stdout + cli.stderr
    assert KEY not in caplog.text


def test_a_key_given_in_a_config_is_stripped_before_storing(tmp_path, clean_env):
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    run_id = store.start_run("debate", "q", config={"protocol": "debate", "api_key": KEY,
                                                    "seats": [{"name": "a", "token": KEY}]})
    assert KEY not in store.export_run(run_id)


def _shown(at) -> str:
    """Every value an AppTest page rendered: text elements, tables and widget values."""
    parts = []
    for kind in ("markdown", "caption", "text", "success", "warning", "error", "info",
                 "metric", "code", "json", "title", "header", "subheader", "text_input",
                 "text_area", "selectbox"):
        for element in getattr(at, kind, []):
            parts.append(str(getattr(element, "value", "")))
    parts += [at.dataframe[i].value.to_csv() for i in range(len(at.dataframe))]
    return "\n".join(parts)


def test_key_appears_on_no_page(tmp_path, clean_env, monkeypatch):
    from streamlit.testing.v1 import AppTest

    url = f"sqlite:///{tmp_path / 'pages.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    store = Store(url)
    with SimulatedOpenAI() as server:
        register(monkeypatch, server)
        for name in REGISTRY:
            config = {"protocol": name, "model": "openai:sim-model", "base_url": server.base_url}
            last = run_sync(arun_config(config, "Should we adopt the plan?", store=store))
    shown = []
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()  # Home
    shown.append(_shown(at))
    for page, params in (("runs.py", {}), ("runs.py", {"run": last.run_id}),
                         ("insights.py", {}), ("personas.py", {}), ("run.py", {}),
                         ("experiments.py", {})):
        at.switch_page(f"pages/{page}")
        for key in list(at.query_params):
            del at.query_params[key]
        for key, value in params.items():
            at.query_params[key] = value
        at.run()
        assert not at.exception, (page, at.exception)
        shown.append(_shown(at))
    everything = "\n".join(shown)
    assert last.run_id in everything  # the pages did render the stored runs
    assert KEY not in everything


def test_a_key_set_changed_or_removed_in_the_environment_is_redacted_as_it_now_is(monkeypatch):
    """The environment's secrets are read again after any change to it, never from a stale
    copy: a key set after a first redaction is hidden, a changed one hidden under its new
    value, and a removed one no longer is (it is ordinary text again)."""
    from engine.redaction import REDACTED, redact
    first, second = "parley-first-value-0123", "parley-second-value-4567"
    monkeypatch.delenv("PARLEY_PERF_TOKEN", raising=False)
    assert redact(f"a {first}", shapes=False) == f"a {first}"
    monkeypatch.setenv("PARLEY_PERF_TOKEN", first)
    assert redact(f"a {first}", shapes=False) == f"a {REDACTED}"
    monkeypatch.setenv("PARLEY_PERF_TOKEN", second)
    assert redact(f"a {first} {second}", shapes=False) == f"a {first} {REDACTED}"
    monkeypatch.delenv("PARLEY_PERF_TOKEN")
    assert redact(f"a {second}", shapes=False) == f"a {second}"


def test_a_mapping_entry_whose_key_names_a_secret_is_dropped_at_any_depth():
    """`strip_secrets` drops every entry whose key, lowercased, holds key, secret, token,
    password or authorization (a word inside a longer name counts: "monkey" goes too),
    in mappings nested in lists, and keeps everything else as it is."""
    from engine.store.records import strip_secrets
    value = {"API_KEY": 1, "Authorization": 2, "x-Token": 3, "db_password": 4, "monkey": 5,
             "model": "m", 7: "seven", "seats": [{"name": "a", "SecretSauce": 1,
                                                  "inner": ({"passwd": "kept"},)}]}
    assert strip_secrets(value) == {"model": "m", 7: "seven", "seats": [
        {"name": "a", "inner": [{"passwd": "kept"}]}]}
