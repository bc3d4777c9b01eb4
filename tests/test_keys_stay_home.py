"""Issue 10, bullet 1: the server's API key goes only to its provider or a registered endpoint.

Two OpenAI-compatible servers on loopback: an "attacker" whose URL arrives with data, and
"home", an endpoint the operator registered (its key in `HOME_API_KEY`). A canary
`OPENAI_API_KEY` is set throughout. Each path a base URL can arrive by -- typed in the app, a
library YAML, an experiment spec (`base_url:` and inside a seat spec), an imported run and its
re-run -- must call the attacker without any server-side key (or refuse it), while the
registered endpoint does get its own key.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from apptest_helpers import poll
from openai_stub import SimulatedOpenAI
from plugins.reruns import rerun
from streamlit.testing.v1 import AppTest

from engine import ConfigError, Store, experiments, get_model
from engine.cli.main import main as cli_main
from engine.llm.endpoints import Endpoint, EndpointRegistry, check_url, risky_host
from engine.protocols import arun_config, run_sync
from engine.services import library
from engine.services.tasks import TaskRunner

CANARY = "sk-parley-CANARY-never-to-the-attacker-7f3a"
HOME_KEY = "sk-parley-HOME-endpoint-key-91c2"
APP = str(Path(__file__).resolve().parent.parent / "app.py")
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
QUESTION = "Should the team adopt the plan?"


@pytest.fixture
def servers(monkeypatch):
    """(attacker, home): home is registered in PARLEY_ENDPOINTS with key_env HOME_API_KEY."""
    for name in (*PROXIES, "OPENAI_BASE_URL", "PARLEY_ALLOW_BASE_URLS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("HOME_API_KEY", HOME_KEY)
    with SimulatedOpenAI(seed=1) as attacker, SimulatedOpenAI(seed=2) as home:
        monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps(
            {"home": {"base_url": home.base_url, "key_env": "HOME_API_KEY"}}))
        yield attacker, home


def app_registry(allow: bool = False) -> EndpointRegistry:
    """The registry the app builds from its settings (free URLs off unless allowed)."""
    return EndpointRegistry.from_settings(os.environ, None, allow_free_urls=allow)


def no_key_reached(attacker: SimulatedOpenAI) -> None:
    """The attacker saw requests (it was really called) and none carried a key."""
    assert attacker.requests, "the attacker was never called: this path proved nothing"
    seen = json.dumps(attacker.requests)
    assert CANARY not in seen and HOME_KEY not in seen
    assert {r["auth"] for r in attacker.requests} == {"Bearer not-needed"}


def home_got_its_key(home: SimulatedOpenAI) -> None:
    assert home.requests and {r["auth"] for r in home.requests} == {f"Bearer {HOME_KEY}"}


def vote(model: str, **extra) -> dict:
    return {"protocol": "vote", "model": model, **extra}


# ------------------------------------------------------------------ the app
def open_run_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/run.py").run()
    assert not at.exception, at.exception
    at.selectbox(key="run-0-protocol").select("vote").run()
    at.text_area(key="run-0-question").input(QUESTION).run()
    return at


def test_key_never_goes_to_a_base_url_typed_in_the_app(servers, db_url):
    attacker, home = servers
    at = open_run_page()
    assert any("openai:MODEL?endpoint=home" in c.value.replace("\\", "")
               for c in at.caption)  # registered endpoints are offered by name
    at.text_input(key="run-0-model").input(f"openai:m?base_url={attacker.base_url}").run()
    errors = " ".join(e.value.replace("\\", "") for e in at.error)
    assert "not a registered endpoint" in errors and "?endpoint=NAME" in errors
    assert at.button(key="run-start").disabled
    assert attacker.requests == [] and Store(db_url).runs().empty

    at.text_input(key="run-0-model").input("openai:m?endpoint=home").run()
    assert not at.error, [e.value for e in at.error]
    at.button(key="run-start").click().run()
    poll(at, lambda a: bool(a.success) or bool(a.error))
    assert Store(db_url).runs()["status"].tolist() == ["completed"]
    home_got_its_key(home)
    assert attacker.requests == []


def test_free_base_urls_in_the_app_are_called_without_the_key(servers, db_url, monkeypatch):
    attacker, _home = servers
    monkeypatch.setenv("PARLEY_ALLOW_BASE_URLS", "1")
    at = open_run_page()
    at.text_input(key="run-0-model").input(f"openai:m?base_url={attacker.base_url}").run()
    assert not at.error, [e.value for e in at.error]
    at.button(key="run-start").click().run()
    poll(at, lambda a: bool(a.success) or bool(a.error))
    no_key_reached(attacker)


def test_the_app_reads_secrets_without_writing_them_into_the_environment(db_url, monkeypatch):
    for name in ("OPENAI_API_KEY", "PARLEY_ENDPOINTS", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.secrets["OPENAI_API_KEY"] = CANARY
    at.secrets["endpoints"] = {"lab": {"base_url": "http://127.0.0.1:9/v1", "key": HOME_KEY}}
    at.run()
    assert not at.exception, at.exception
    assert "OPENAI_API_KEY" not in os.environ  # secrets are passed down, never exported
    registry = at.session_state["parley_settings"]["endpoints"]
    assert registry.get("lab").base_url == "http://127.0.0.1:9/v1"
    tables = "\n".join(frame.value.to_csv() for frame in at.dataframe)
    assert "lab" in tables and "secrets.toml [endpoints.lab] key" in tables
    assert "present" in tables  # the OpenAI key, found in the secrets
    shown = tables + " ".join(str(e.value) for e in (*at.caption, *at.markdown, *at.error))
    assert CANARY not in shown and HOME_KEY not in shown


# ------------------------------------------------------------------ library YAML
def test_key_never_goes_to_a_base_url_in_a_library_yaml(servers, store):
    attacker, _home = servers
    text = library.to_yaml({"configurations": [
        {"name": "colleague-a", **vote(f"openai:m?base_url={attacker.base_url}")},
        {"name": "colleague-b", **vote("openai:m", base_url=attacker.base_url)}]})
    with pytest.raises(ConfigError, match="not a registered endpoint"):
        library.import_yaml(store, text, app_registry())  # the app, free URLs off
    assert store.saved_configs() == []
    library.import_yaml(store, text)  # the Python API: free URLs on, but never a key
    for label in ("colleague-a", "colleague-b"):
        result = run_sync(arun_config(store.saved_config(label), QUESTION,
                                      store=store))
        assert all(t.ok for t in result.turns)
    no_key_reached(attacker)


# ------------------------------------------------------------------ experiment spec
def test_key_never_goes_to_a_base_url_in_an_experiment_spec(servers, store):
    attacker, home = servers
    spec = {"questions": [QUESTION], "configs": [
        vote("openai:m", base_url=attacker.base_url, label="by-key"),
        vote(f"openai:m?base_url={attacker.base_url}", label="in-seat"),
        vote(f"openai:m?base_url={home.base_url}", label="registered")]}
    with pytest.raises(ConfigError, match="not a registered endpoint"):
        experiments.plan(spec, store, endpoints=app_registry())
    experiment_id = experiments.create(store, experiments.plan(spec, store))
    state = experiments.run_experiment(store, experiment_id)
    assert state.status == "completed", state.error
    no_key_reached(attacker)
    home_got_its_key(home)  # the same URL, registered, gets its own key


# ------------------------------------------------------------------ imported run, re-run
def test_key_never_goes_to_a_base_url_in_an_imported_run_or_its_rerun(servers, store,
                                                                       tmp_path):
    attacker, home = servers
    first = run_sync(arun_config(vote("openai:m", base_url=home.base_url), QUESTION,
                                 store=store))
    home_got_its_key(home)
    stored = store.get(first.run_id)
    assert all(home.base_url in s["model"] for seats in stored["config"]["seats"].values()
               for s in seats)
    calls = len(home.requests)
    again = rerun(store, stored)  # a re-run calls the same registered endpoint, with its key
    assert len(home.requests) > calls and again["id"] != first.run_id
    home_got_its_key(home)

    # A colleague's export naming the attacker's server, imported and re-run.
    hostile = json.loads(store.export_run(first.run_id).replace(home.base_url,
                                                                attacker.base_url))
    hostile["config"]["base_url"] = attacker.base_url
    other = Store(f"sqlite:///{tmp_path / 'colleague.db'}")
    [imported] = other.import_runs(json.dumps(hostile))
    with pytest.raises(ConfigError, match="not a registered endpoint"):
        TaskRunner(other).start_rerun(other.get(imported), endpoints=app_registry())  # app
    assert attacker.requests == []
    rerun(other, other.get(imported))  # the CLI / Python API: called, never with a key
    no_key_reached(attacker)


def test_a_rerun_of_an_endpoint_no_longer_registered_gets_no_key(servers, store,
                                                                  monkeypatch):
    _attacker, home = servers
    first = run_sync(arun_config(vote("openai:m?endpoint=home"), QUESTION, store=store))
    home_got_its_key(home)
    assert store.get(first.run_id)["config"]["seats"]["voters"][0]["model"] == \
        "openai:m?endpoint=home"
    with_url = run_sync(arun_config(vote("openai:m", base_url=home.base_url), QUESTION,
                                    store=store))
    monkeypatch.delenv("PARLEY_ENDPOINTS")  # the operator removed the endpoint
    with pytest.raises(ConfigError, match="no endpoint named 'home'"):
        rerun(store, store.get(first.run_id))
    before = len(home.requests)
    rerun(store, store.get(with_url.run_id))
    assert {r["auth"] for r in home.requests[before:]} == {"Bearer not-needed"}


# ------------------------------------------------------------------ the CLI
def test_cli_base_url_counts_as_registered_but_a_config_file_url_does_not(servers, tmp_path,
                                                                          capsys):
    attacker, home = servers
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert cli_main(["run", "vote", QUESTION, "--model", "openai:m", "--base-url",
                     attacker.base_url, "--db", db]) == 0
    # typed by the operator: the provider's own key goes there (as documented)
    assert {r["auth"] for r in attacker.requests} == {f"Bearer {CANARY}"}
    attacker.requests.clear()
    config = tmp_path / "colleague.yaml"
    config.write_text(f"model: openai:m\nbase_url: {attacker.base_url}\n", encoding="utf-8")
    assert cli_main(["run", "vote", QUESTION, "--config", str(config), "--db", db]) == 0
    no_key_reached(attacker)
    assert cli_main(["run", "vote", QUESTION, "--model", "openai:m?endpoint=home",
                     "--db", db]) == 0
    home_got_its_key(home)
    assert CANARY not in capsys.readouterr().out


# ------------------------------------------------------------------ URLs and keys refused
@pytest.mark.parametrize("url, words", [
    ("file:///etc/passwd", "only http and https"),
    ("gopher://127.0.0.1:70/_x", "only http and https"),
    ("ftp://example.com/v1", "only http and https"),
    ("http://169.254.169.254/latest/meta-data", "metadata"),
    ("http://169.254.10.20/v1", "link-local"),
    ("http://[fe80::1]/v1", "link-local"),
    ("http://[fd00:ec2::254]/v1", "metadata"),
    ("http://[::ffff:169.254.169.254]/v1", "metadata"),
    ("http://2852039166/v1", "metadata"),  # 169.254.169.254 written as one number
    ("http://metadata.google.internal/computeMetadata/v1", "metadata"),
    ("http://metadata/v1", "metadata"),
    ("http://user:sk-x@example.com/v1", "credential"),
    ("http://example.com/v1?api_key=sk-x", "credential"),
    ("http:///v1", "no host"),
])
def test_file_gopher_link_local_and_metadata_urls_are_refused(url, words, monkeypatch):
    monkeypatch.delenv("PARLEY_ENDPOINTS", raising=False)
    with pytest.raises(ConfigError) as caught:
        get_model(f"openai:m?base_url={url}")
    assert words in str(caught.value) and caught.value.code == "input"
    with pytest.raises(ConfigError):
        run_sync(arun_config(vote("openai:m", base_url=url), QUESTION))


def test_link_local_is_allowed_when_registered_and_loopback_always():
    registry = EndpointRegistry([Endpoint("lab", check_url("http://169.254.10.20/v1"))],
                                allow_free_urls=True)
    assert registry.route("openai", base_url="http://169.254.10.20/v1/").registered
    assert get_model("openai:m?endpoint=lab", endpoints=registry).openai_api_base \
        == "http://169.254.10.20/v1"
    assert risky_host(check_url("http://127.0.0.1:8000/v1")) == ""
    assert risky_host(check_url("http://[::1]:8000/v1")) == ""


@pytest.mark.parametrize("param", ["api_key", "key", "token", "apikey", "access_token",
                                   "openai_api_key", "password", "Authorization"])
def test_a_key_inside_a_spec_is_refused_with_where_keys_go(param, store):
    spec = f"openai:gpt-4o?{param}=sk-hidden-123"
    with pytest.raises(ConfigError) as caught:
        get_model(spec)
    message = str(caught.value)
    assert caught.value.code == "input" and "sk-hidden-123" not in message
    assert "environment" in message and "secrets.toml" in message and "key_env" in message
    with pytest.raises(ConfigError):  # so it is never saved in the library ...
        library.save_config(store, vote(spec), "leaky")
    with pytest.raises(ConfigError):  # ... nor in the experiments table
        experiments.create(store, {"questions": [QUESTION], "configs": [vote(spec)]})
    assert store.saved_configs() == [] and experiments.list_experiments(store).empty
    assert "sk-hidden-123" not in library.export_yaml(store)


def test_the_python_base_url_keyword_counts_as_registered(servers):
    _attacker, home = servers
    unregistered = get_model("openai:m", base_url="http://127.0.0.1:9/v1")
    assert unregistered.openai_api_key.get_secret_value() == CANARY  # the operator's code
    registered = get_model("openai:m", base_url=home.base_url + "/")  # trailing slash
    assert registered.openai_api_key.get_secret_value() == HOME_KEY
    as_data = get_model(f"openai:m?base_url={home.base_url.upper().replace('/V1', '/v1')}")
    assert as_data.openai_api_key.get_secret_value() == HOME_KEY  # normalised: same URL


def test_endpoint_settings_never_show_a_key(monkeypatch):
    secrets = {"endpoints": {"vault": {"base_url": "https://LLM.example.com/v1/",
                                       "key": "sk-secret-in-toml"}},
               "OPENAI_API_KEY": "sk-toml-openai"}
    registry = EndpointRegistry.from_settings({}, secrets, allow_free_urls=False)
    vault = registry.get("vault")
    assert vault.base_url == "https://llm.example.com/v1"
    shown = repr(registry) + str(vault) + repr(vault) + json.dumps(registry.describe())
    assert "sk-secret-in-toml" not in shown and "sk-toml-openai" not in shown
    assert registry.describe()[0]["key"] == "secrets.toml [endpoints.vault] key"
    model = get_model("openai:m?endpoint=vault", endpoints=registry)
    assert model.openai_api_key.get_secret_value() == "sk-secret-in-toml"
    assert model.parley_spec == "openai:m?endpoint=vault"
    assert get_model("openai:m", endpoints=registry).openai_api_key.get_secret_value() \
        == "sk-toml-openai"  # the provider's own API takes the provider's key


@pytest.mark.parametrize("value, words", [
    ("{not json", "must be JSON"),
    ('{"x": {"base_url": "http://h/v1", "key": "sk-1"}}', "holds a key"),
    ('{"x": {"base_url": "http://h/v1", "keyenv": "K"}}', "no field 'keyenv'"),
    ('{"x": {"base_url": "file:///v1"}}', "only http and https"),
    ('{"bad name!": {"base_url": "http://h/v1"}}', "a name is"),
    ('["http://h/v1"]', "must map endpoint names"),
])
def test_bad_endpoint_settings_are_refused(value, words):
    with pytest.raises(ConfigError) as caught:
        EndpointRegistry.from_settings({"PARLEY_ENDPOINTS": value})
    assert words in str(caught.value)
    assert "sk-1" not in str(caught.value)


def test_registered_key_missing_names_the_variable(monkeypatch):
    monkeypatch.delenv("LAB_KEY", raising=False)
    registry = EndpointRegistry.from_settings(
        {"PARLEY_ENDPOINTS": '{"lab": {"base_url": "http://127.0.0.1:9/v1", '
                             '"key_env": "LAB_KEY"}}'})
    with pytest.raises(ConfigError, match="set LAB_KEY"):
        get_model("openai:m?endpoint=lab", endpoints=registry)
