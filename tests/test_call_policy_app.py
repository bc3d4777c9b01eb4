"""Issue 15, bullet 2: call policy in the app and a preflight that estimates time from the
endpoint's measured latency (the Run page, the Experiments page's form, `experiment run`'s
printed plan, and the store query under them)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from apptest_helpers import open_new_experiment, plain, poll
from openai_stub import ENDPOINT_SETTINGS, SimulatedOpenAI, loopback_only
from streamlit.testing.v1 import AppTest

from engine import Store, run_vote
from engine.cli.main import main
from engine.experiments.planning import plan, time_preflight
from engine.llm.endpoints import EndpointRegistry
from engine.llm.policy import CallPolicy
from engine.protocols import resolve_config
from engine.services.rerun import rerun_resolved
from engine.services.runform import policy_line, with_call_policy
from engine.reports.timing import policy_defaults, time_estimate
from engine.store.latency import measured_latency

APP = str(Path(__file__).resolve().parent.parent / "app.py")
QUESTION = "What is 6 x 7?"


@pytest.fixture(autouse=True)
def loopback_env(monkeypatch):
    loopback_only(monkeypatch, *ENDPOINT_SETTINGS)


@pytest.fixture
def stub():
    with SimulatedOpenAI() as server:
        yield server


def endpoint_env(monkeypatch, url: str, **policy) -> None:
    monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps({"local": {"base_url": url, **policy}}))


def open_page(page: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def policy_inputs(at: AppTest) -> dict[str, object]:
    """The Run page's "Advanced: calls" fields by name (their keys carry the default)."""
    out = {}
    for widget in at.number_input:
        for name in ("timeout_per_call", "retries", "concurrency"):
            if f"-policy-{name}-" in str(widget.key):
                out[name] = widget
    return out


# ------------------------------------------------------------------ the store's measurement
def test_measured_latency_is_the_median_of_recent_ok_turns(stub, store, tmp_path):
    model = f"openai:smol?base_url={stub.base_url}"
    result = run_vote(QUESTION, voters=[model] * 3, store=store)
    got = measured_latency(store, [model, "openai:never-called"])
    assert set(got) == {model} and got[model].calls == 3
    latencies = sorted(t.latency for t in result.turns)
    assert got[model].median == pytest.approx(latencies[1])
    assert measured_latency(store, [model], recent=2)[model].calls == 2
    assert measured_latency(Store(f"sqlite:///{tmp_path / 'empty.db'}"), [model]) == {}


def test_time_estimate_uses_the_measured_median_or_says_there_is_none(stub, store):
    model = f"openai:smol?base_url={stub.base_url}"
    config = {"protocol": "vote", "model": model}
    unknown = time_estimate([config], store=store)
    assert unknown["seconds"] is None
    assert unknown["text"] == (f"no time estimate: no measurement yet for {model} "
                               "(its first calls measure it)")
    run_vote(QUESTION, voters=[model] * 3, store=store)
    timed = time_estimate([config], store=store)
    median = measured_latency(store, [model])[model].median
    assert timed["seconds"] == pytest.approx(median)  # 3 calls in one wave
    assert f"the measured median of {median:.3g} s per call over the last 3 calls" in \
        timed["text"] and "(critical path 1 calls, concurrency 8)" in timed["text"]
    simulated = time_estimate([{"protocol": "debate", "model": "simulated?latency=2"}])
    assert "the simulated model's declared 2 s per call" in simulated["text"]
    assert simulated["seconds"] and simulated["seconds"] >= 2 * 3  # three rounds in a row


def test_preflight_warns_when_a_run_asks_more_than_the_endpoint_serves(stub):
    registry = EndpointRegistry.from_settings({"PARLEY_ENDPOINTS": json.dumps(
        {"local": {"base_url": stub.base_url, "concurrency": 1, "timeout": 180,
                   "retries": 0}})})
    config = {"protocol": "vote", "model": "openai:smol?endpoint=local"}
    defaults, sources = policy_defaults(config, registry)
    assert defaults == CallPolicy(timeout_per_call=180, retries=0, concurrency=1)
    assert sources == {"timeout_per_call": ["local"], "retries": ["local"],
                       "concurrency": ["local"]}
    assert time_estimate([config], endpoints=registry)["notes"] == []
    asked = with_call_policy(resolve_config(config, registry), {"concurrency": 4}, defaults)
    notes = time_estimate([asked], endpoints=registry)["notes"]
    assert notes and "endpoint local serves 1 call(s) at a time" in notes[0]
    assert policy_line(asked.config.stored(), registry) == (
        "Call policy: per-call timeout 180 s (endpoint local), retries 0 (endpoint local), "
        "calls at once 4 (this run)")



def test_an_experiment_preflight_notes_an_endpoint_serving_fewer_calls_than_its_runs(stub):
    registry = EndpointRegistry.from_settings({"PARLEY_ENDPOINTS": json.dumps(
        {"local": {"base_url": stub.base_url, "concurrency": 1}})})
    note = ("endpoint local serves 1 call(s) at a time and this experiment runs 2 runs at once: "
            "calls queue for it (set concurrency to 1 or raise the endpoint's)")
    for model in ("openai:smol?endpoint=local", f"openai:smol?base_url={stub.base_url}"):
        for runs_at_once, noted in ((2, [note]), (1, [])):
            checked = plan({"questions": [QUESTION], "concurrency": runs_at_once,
                            "configs": [{"protocol": "vote", "model": model}]},
                           endpoints=registry)
            notes = time_preflight(checked, endpoints=registry)["notes"]
            assert [n for n in notes if "this experiment runs" in n] == noted, model


# ------------------------------------------------------------------ the Run page
def test_run_page_advanced_calls_area_is_kept_with_the_run_and_its_rerun(db_url):
    at = open_page("pages/run.py")
    at.selectbox(key="run-0-protocol").select("vote").run()
    at.text_area(key="run-0-question").input(QUESTION).run()
    at.text_input(key="run-0-model").input("simulated?latency=0.1").run()
    fields = policy_inputs(at)
    assert {name: w.value for name, w in fields.items()} == {
        "timeout_per_call": 60.0, "retries": 2, "concurrency": 8}
    assert any("declared 0.1 s per call" in plain(i.value) for i in at.info)
    fields["timeout_per_call"].set_value(90.0).run()
    policy_inputs(at)["retries"].set_value(1).run()
    policy_inputs(at)["concurrency"].set_value(2).run()
    assert not at.error, [e.value for e in at.error]
    at.button(key="run-start").click().run()
    assert not at.exception, at.exception
    run_id = at.session_state["run_page_run"]
    poll(at, lambda a: bool(a.success) or bool(a.warning))
    run = Store(db_url).get(run_id)
    assert {k: run["config"].get(k) for k in ("timeout_per_call", "retries",
                                               "concurrency")} == {
        "timeout_per_call": 90.0, "retries": 1, "concurrency": 2}
    again = rerun_resolved(run["config"]).given  # Re-run repeats them
    assert (again.timeout_per_call, again.retries, again.concurrency) == (90.0, 1, 2)
    line = "Call policy: per-call timeout 90 s (this run), retries 1 (this run), calls at " \
           "once 2 (this run)"
    assert any(plain(c.value) == line for c in at.caption)


def test_run_page_policy_defaults_follow_the_seats_endpoint(db_url, monkeypatch):
    endpoint_env(monkeypatch, "http://127.0.0.1:9/v1", timeout=180, retries=0, concurrency=1)
    at = open_page("pages/run.py")
    at.selectbox(key="run-0-protocol").select("vote").run()
    at.text_area(key="run-0-question").input(QUESTION).run()
    at.text_input(key="run-0-model").input("openai:smol?endpoint=local").run()
    assert not at.error, [e.value for e in at.error]
    fields = policy_inputs(at)
    assert {name: w.value for name, w in fields.items()} == {
        "timeout_per_call": 180.0, "retries": 0, "concurrency": 1}
    assert any("no measurement yet for openai:smol?endpoint=local" in plain(i.value)
               for i in at.info)
    fields["concurrency"].set_value(4).run()
    assert any("endpoint local serves 1 call(s) at a time" in plain(w.value)
               for w in at.warning)
    policy_inputs(at)["timeout_per_call"].set_value(0.0).run()  # clamped to the lowest
    assert policy_inputs(at)["timeout_per_call"].value >= 0.1


def test_run_page_starts_the_fields_at_a_loaded_configurations_policy(db_url):
    from engine.services import library
    library.save_config(Store(db_url), {"protocol": "vote", "model": "simulated",
                                        "timeout_per_call": 30, "retries": 5}, "patient")
    at = open_page("pages/run.py")
    at.selectbox(key="run-saved-pick").select("patient").run()
    at.button(key="run-load").click().run()
    fields = policy_inputs(at)
    assert {name: w.value for name, w in fields.items()} == {
        "timeout_per_call": 30.0, "retries": 5, "concurrency": 8}
    next(t for t in at.text_area if str(t.key).endswith("-question")).input(QUESTION).run()
    at.button(key="run-start").click().run()
    assert not at.exception, at.exception
    run = Store(db_url).get(at.session_state["run_page_run"])
    assert (run["config"]["timeout_per_call"], run["config"]["retries"]) == (30, 5)
    assert "concurrency" not in run["config"]  # left at its default: the endpoint decides


# ------------------------------------------------------------------ the Experiments page
def test_experiment_form_writes_the_call_policy_into_the_spec(db_url):
    at = open_page("pages/experiments.py")
    open_new_experiment(at)
    at.selectbox(key="exp-set").select("demo").run()
    at.multiselect(key="exp-configs").select("vote · defaults").run()
    timeout = next(w for w in at.number_input if str(w.key).startswith("exp-timeout_per_call-"))
    retries = next(w for w in at.number_input if str(w.key).startswith("exp-retries-"))
    assert (timeout.value, retries.value) == (60.0, 2)
    timeout.set_value(120.0).run()
    next(w for w in at.number_input if str(w.key).startswith("exp-retries-")).set_value(0).run()
    assert any(plain(i.value).startswith("Time: under 1 s at the simulated model's declared")
               for i in at.info)
    at.button(key="exp-start").click().run()
    assert not at.exception, at.exception
    experiment_id = at.session_state["experiments_page_selected"]
    from engine import experiments as ex
    stored = ex.get(Store(db_url), experiment_id)
    assert all(c["timeout_per_call"] == 120.0 and c["retries"] == 0
               for c in stored["spec"]["configs"])
    poll(at, lambda a: ex.progress(Store(db_url), experiment_id).status != "running")


# ------------------------------------------------------------------ experiment run's plan
def test_experiment_run_prints_the_time_at_the_measured_pace(stub, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    model = f"openai:smol?base_url={stub.base_url}"
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"questions": [QUESTION], "repeats": 2, "concurrency": 1,
                                    "configs": [{"protocol": "vote", "model": model}]}))
    assert main(["experiment", "run", str(spec), "--db", url, "--dry-run"]) == 0
    assert f"  time: no time estimate: no measurement yet for {model}" in \
        capsys.readouterr().out
    store = Store(url)
    run_vote(QUESTION, voters=[model] * 3, store=store)
    assert main(["experiment", "run", str(spec), "--db", url, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "over the last 3 calls" in out
    assert "(critical path 1 calls, concurrency 8; 1 run(s) at once of 2 per configuration)" \
        in out
    checked = plan(yaml.safe_load(spec.read_text()), store)
    median = measured_latency(store, [model])[model].median
    assert time_preflight(checked, store)["seconds"] == pytest.approx(2 * median)


def test_experiment_show_prints_each_configurations_call_policy(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"questions": [QUESTION], "timeout_per_call": 45,
                                    "retries": 0, "configs": [
                                        {"protocol": "vote", "label": "v"},
                                        {"protocol": "vote", "label": "w", "retries": 3}]}))
    assert main(["experiment", "run", str(spec), "--db", url, "--quiet"]) == 0
    experiment_id = Store(url).engine.connect().exec_driver_sql(
        "SELECT id FROM experiments").scalar()
    capsys.readouterr()
    assert main(["experiment", "show", experiment_id, "--db", url]) == 0
    out = capsys.readouterr().out
    assert "call policy of v (simulated): timeout_per_call 45, retries 0" in out
    assert "call policy of w (simulated): timeout_per_call 45, retries 3" in out
