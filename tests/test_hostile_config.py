"""Issue 10, bullets 6 and 8: options, limits, names and text are checked before any call.

Every case must be refused with a `ConfigError` (or exit 2 on the CLI) that names what to
change, before any model is called and before anything is stored.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine import REGISTRY, ConfigError, Seat, Store, experiments, run_debate, run_duel, run_panel, run_peer_review, run_roundtable, run_vote

from engine.services import library
from engine.cli.main import main as cli_main
from engine.protocols import (
    arun_config,
    check_config,
    resolve_config,
    run_sync,
    seats_from_config,
)
from engine.protocols.templates import Template

APP = str(Path(__file__).resolve().parent.parent / "app.py")
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"


def refused(call, *words, code=None):
    with pytest.raises(ConfigError) as caught:
        call()
    for word in words:
        assert word in str(caught.value), str(caught.value)
    if code is not None:
        assert caught.value.code == code, caught.value.code
    return caught.value


@pytest.fixture
def spy(recording_model):
    return recording_model(["should never be used"])


def nothing_happened(spy, store):
    assert spy.received == [] and store.runs().empty


# ------------------------------------------------------------------ bullet 6: options
@pytest.mark.parametrize("options, words", [
    ({"retries": -1}, ["retries", "0..10"]),
    ({"retries": 1.5}, ["retries", "whole number"]),
    ({"retries": True}, ["retries"]),
    ({"timeout_per_call": 0}, ["timeout_per_call"]),
    ({"timeout_per_call": -5}, ["timeout_per_call"]),
    ({"timeout_per_call": float("nan")}, ["timeout_per_call"]),
    ({"timeout_per_call": "fast"}, ["timeout_per_call"]),
    ({"concurrency": 0}, ["concurrency", "1..64"]),
    ({"concurrency": -3}, ["concurrency"]),
])
def test_retries_minus_one_and_other_bad_run_options_are_refused_before_any_call(
        options, words, spy, store):
    refused(lambda: run_debate("q", proponent=spy, opponent=spy, judge=spy, store=store,
                               **options), *words)
    nothing_happened(spy, store)


@pytest.mark.parametrize("call, words", [
    (lambda m, s: run_debate("q", proponent=m, opponent=m, judge=m, max_rounds=21, store=s),
     ["max_rounds must be 1..20 for a debate, got 21"]),
    (lambda m, s: run_debate("q", proponent=m, opponent=m, judge=m, store=s,
                             max_rounds=99999999999999999999), ["max_rounds", "1..20"]),
    (lambda m, s: run_peer_review("q", producer=m, reviewer=m, max_iterations=21, store=s),
     ["max_iterations must be 1..20"]),
    (lambda m, s: run_duel("q", a=Seat("a", m), b=Seat("b", m), rounds=21, store=s),
     ["rounds must be 1..20 for a duel"]),
    (lambda m, s: run_roundtable("q", agents=[Seat("a", m)], rounds=4, store=s),
     ["rounds must be 1..3"]),
])
def test_debate_rounds_and_review_iterations_have_a_maximum(call, words, spy, store):
    refused(lambda: call(spy, store), *words, code="limit")
    nothing_happened(spy, store)


@pytest.mark.parametrize("protocol, flag", [("debate", "swap_sides"),
                                            ("debate", "consultancy"),
                                            ("society", "summarise"), ("society", "synthesize")])
def test_a_flag_given_as_text_is_refused_by_the_configuration_and_the_runner(protocol, flag,
                                                                              spy, store):
    """A flag option is true or false, as its `Option` row says: "yes" is refused when the
    configuration is resolved (before a Start) and by the runner, before any call."""
    refused(lambda: resolve_config({"protocol": protocol, "options": {flag: "yes"}}),
            f"{flag} must be true or false, got 'yes'", code="input")
    seats = {"proponent": spy, "opponent": spy, "judge": spy} if protocol == "debate" else {
        "agents": [Seat("a", spy), Seat("b", spy)]}
    refused(lambda: run_sync(REGISTRY[protocol].runner("q", store=store, **seats,
                                                       **{flag: "yes"})),
            f"{flag} must be true or false", code="input")
    nothing_happened(spy, store)


def test_rounds_option_is_named_by_the_registry():
    assert {name: spec.rounds_option for name, spec in REGISTRY.items()} == {
        "debate": "max_rounds", "peer-review": "max_iterations", "roundtable": "rounds",
        "duel": "rounds", "panel": None, "vote": None, "society": "rounds",
        "single": "rounds", "council": None}


@pytest.mark.parametrize("argv, words", [
    (["run", "panel", "q", "--rounds", "2"], "--rounds: panel has no rounds"),
    (["run", "vote", "q", "--rounds", "2"], "--rounds: vote has no rounds"),
    (["run", "debate", "q", "--rounds", "99999999999999999999"], "max_rounds must be 1..20"),
    (["run", "peer-review", "q", "--rounds", "50"], "max_iterations must be 1..20"),
])
def test_rounds_on_panel_or_vote_is_refused_by_name_and_huge_rounds_name_the_limit(
        argv, words, tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 'p.db'}"
    assert cli_main(argv + ["--db", db]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err
    assert Store(db).runs().empty


def big_spec(repeats: int = 100) -> dict:
    """5 questions x `repeats` debates of 20 rounds (41 calls each): 20,500 calls at 100."""
    return {"questions": [f"Question {n}?" for n in range(5)], "repeats": repeats,
            "configs": [{"protocol": "debate", "label": "long",
                         "options": {"max_rounds": 20}}]}


def test_an_experiment_of_too_many_calls_needs_confirming(store, tmp_path, capsys):
    error = refused(lambda: experiments.plan(big_spec(), store), "20,500 model calls",
                    "20,000", "--yes", code="limit")
    assert "confirm" in str(error)
    confirmed = experiments.plan(big_spec(), store, confirmed=True)
    assert confirmed.calls == 20_500 and confirmed.needs_confirmation
    assert not experiments.plan(big_spec(repeats=10), store).needs_confirmation
    refused(lambda: experiments.create(store, big_spec()), "--yes")
    assert experiments.list_experiments(store).empty
    spec = tmp_path / "big.yaml"
    spec.write_text(json.dumps(big_spec()), encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert cli_main(["experiment", "run", str(spec), "--db", db]) == 2
    assert "--yes" in capsys.readouterr().err
    assert cli_main(["experiment", "run", str(spec), "--yes", "--dry-run", "--db", db]) == 0
    assert "20500 calls" in capsys.readouterr().out
    assert experiments.list_experiments(Store(db)).empty


def test_an_experiment_planning_millions_of_calls_is_refused(store):
    spec = {**big_spec(), "repeats": 100,
            "questions": [f"Q{n}?" for n in range(100)],
            "configs": [{"protocol": "debate", "label": f"c{n}", "options": {"max_rounds": 20}}
                        for n in range(3)]}
    refused(lambda: experiments.plan(spec, store), "30000 runs", "20000", code="limit")


OPTION_PATHS = {
    "configuration": lambda s, t: run_sync(arun_config(
        {"protocol": "debate", "options": {"mood": "calm"}}, "q", store=s)),
    "saved configuration": lambda s, t: library.save_config(
        s, {"protocol": "debate", "options": {"mood": "calm"}}, "x"),
    "library YAML": lambda s, t: library.import_yaml(
        s, "configurations:\n  - name: x\n    protocol: debate\n    options: {mood: calm}\n"),
    "experiment spec": lambda s, t: experiments.plan(
        {"questions": ["q"], "configs": [{"protocol": "debate",
                                          "options": {"mood": "calm"}}]}, s),
    "CLI --config": lambda s, t: _cli_config(t, "protocol: debate\noptions: {mood: calm}\n"),
    "CLI --option": lambda s, t: _cli(t, ["--option", "mood=calm"]),
}


def _cli(tmp_path, extra):
    if cli_main(["run", "debate", "q", "--db", f"sqlite:///{tmp_path / 'c.db'}", *extra]) == 2:
        raise ConfigError("mood: refused by the CLI (exit 2)")


def _cli_config(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    _cli(tmp_path, ["--config", str(path)])


@pytest.mark.parametrize("path", list(OPTION_PATHS))
def test_an_option_a_protocol_does_not_have_is_refused_by_name_on_every_path(path, store,
                                                                             tmp_path,
                                                                             capsys):
    refused(lambda: OPTION_PATHS[path](store, tmp_path), "mood")
    err = capsys.readouterr().err
    if path.startswith("CLI"):
        assert "no option 'mood'" in err and "max_rounds" in err, err
    assert store.runs().empty and store.saved_configs() == []


@pytest.mark.parametrize("config, words", [
    ({"protocol": "debate", "modle": "simulated"}, ["'modle'", "model", "base_url"]),
    ({"protocol": "debate", "baseurl": "http://x/v1"}, ["'baseurl'", "base_url"]),
    ({"protocol": "debate", "seats": {"judge": {"modle": "simulated"}}},
     ["seat judge", "'modle'", "temperature"]),
    ({"protocol": "debate", "seats": {"judge": {"name": "j", "temprature": 0.2}}},
     ["'temprature'"]),
    ({"protocol": "debate", "seats": {"judge": {"temperature": "hot"}}},
     ["temperature", "0..2"]),
    ({"protocol": "debate", "seats": {"judge": ["simulated", "simulated"]}},
     ["judge is one seat"]),
    ({"protocol": "debate", "seats": {"judge": [3]}}, ["seat judge"]),
    ({"protocol": "debate", "options": {"max_rounds": 50}}, ["max_rounds must be 1..20"]),
    ({"protocol": "debate", "options": {"max_rounds": 2.5}}, ["max_rounds", "whole"]),
    ({"protocol": "debate", "options": ["max_rounds"]}, ["options must be a mapping"]),
])
def test_unknown_configuration_keys_and_bad_values_are_refused_with_what_is_allowed(
        config, words, store):
    refused(lambda: seats_from_config(REGISTRY["debate"], config), *words, code=None)
    refused(lambda: check_config(config), *words)
    refused(lambda: run_sync(arun_config(config, "q", store=store)), *words)
    assert store.runs().empty


@pytest.mark.parametrize("spec, words", [
    ("openai:gpt-4o?temperature=hot", ["temperature", "number"]),
    ("openai:gpt-4o?temperature=9", ["temperature", "0..2"]),
    ("openai:gpt-4o?max_tokens=lots", ["max_tokens", "whole number"]),
    ("openai:gpt-4o?top_p=nan", ["top_p"]),
    ("openai:gpt-4o?openai_proxy=http://evil:8080", ["openai_proxy", "parameters are"]),
    ("openai:gpt-4o?openai_api_base=http://evil/v1", ["openai_api_base"]),
    ("openai:gpt-4o?http_client=x", ["http_client"]),
])
def test_temperature_hot_and_other_spec_params_are_checked_before_any_call(spec, words,
                                                                           store, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    error = refused(lambda: run_vote("q", voters=[spec, spec], store=store), *words)
    assert error.code == "input" and store.runs().empty


# ------------------------------------------------------------------ the Run page
def run_page(query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(query or {})
    at.run()
    at.switch_page("pages/run.py").run()
    assert not at.exception, at.exception
    return at


def test_the_run_page_shows_and_refuses_a_saved_max_rounds_of_50(db_url):
    store = Store(db_url)
    library.ensure_seeded(store)
    # saved by an older Parley (or edited by hand): the form cannot show 50 (its max is 20)
    store.put_library("config", "fifty", {"protocol": "debate", "model": "simulated",
                                          "options": {"max_rounds": 50}})
    at = run_page({"config": "fifty"})
    assert not at.exception, at.exception
    shown = at.text_input(key="run-1-debate-option-max_rounds-saved")
    assert shown.value == "50" and shown.disabled
    errors = " ".join(e.value.replace("\\", "") for e in at.error)
    assert "max_rounds must be 1..20 for a debate, got 50" in errors
    at.text_area(key="run-1-question").input("Should we?").run()
    assert at.button(key="run-start").disabled and at.button(key="run-save").disabled
    assert store.runs().empty
    at.button(key="run-1-debate-option-max_rounds-reset").click().run()  # the user's choice
    assert at.number_input(key="run-1-debate-option-max_rounds").value == 3
    assert not at.error, [e.value for e in at.error]


@pytest.mark.parametrize("body, words", [
    ({"seats": ["x"], "options": ["max_rounds"], "prompts": "judge"}, "prompts must map"),
    ({"seats": ["x"]}, "seats must map"),
    ({"seats": {"judge": {"temperature": "hot"}}}, "temperature must be a number"),
    ({"seats": {"judge": 7}}, "seat judge"),
    ({"modle": "simulated"}, "no key 'modle'"),
])
def test_the_run_page_shows_a_malformed_saved_configuration_instead_of_crashing(body, words,
                                                                               db_url):
    store = Store(db_url)
    library.ensure_seeded(store)
    store.put_library("config", "odd", {"protocol": "debate", **body})
    at = run_page({"config": "odd"})
    assert not at.exception, at.exception
    assert words in " ".join(e.value.replace("\\", "") for e in at.error)
    at.text_area(key="run-1-question").input("Should we?").run()
    assert at.button(key="run-start").disabled and store.runs().empty
    if "use-form" in str([b.key for b in at.button]):  # the user's explicit choice
        at.button(key="run-1-use-form").click().run()
        assert not at.error and not at.button(key="run-start").disabled


def test_a_saved_seat_temperature_survives_the_run_page(db_url):
    store = Store(db_url)
    library.save_config(store, {"protocol": "debate", "seats": {"judge": {
        "name": "judge", "temperature": 0.3}}}, "warm")
    at = run_page({"config": "warm"})
    at.text_area(key="run-1-question").input("Should we?").run()
    assert not at.error, [e.value for e in at.error]
    at.button(key="run-save").click().run()
    judge = store.saved_config("warm")["seats"]["judge"][0]
    assert judge["temperature"] == 0.3


def test_temperature_hot_shows_an_error_instead_of_crashing_the_run_page(db_url):
    at = run_page()
    at.text_area(key="run-0-question").input("Should we?").run()
    at.text_input(key="run-0-model").input("openai:gpt-4o?temperature=hot").run()
    assert not at.exception, at.exception
    errors = " ".join(e.value.replace("\\", "") for e in at.error)
    assert "temperature must be a number" in errors
    assert at.button(key="run-start").disabled


# ------------------------------------------------------------------ bullet 8: names and text
@pytest.mark.parametrize("question", [ZERO_WIDTH, " \u200b \t\n", "\u2028\u2029", "\x01\x02"])
def test_a_question_of_only_zero_width_characters_is_refused(question, spy, store):
    refused(lambda: run_vote(question, voters=[Seat("a", spy), Seat("b", spy)], store=store),
            "question", code="input")
    nothing_happened(spy, store)


def test_an_experiment_with_a_zero_width_question_is_refused_before_it_starts(store):
    refused(lambda: experiments.plan({"questions": ["Fine?", ZERO_WIDTH],
                                      "configs": [{"protocol": "vote"}]}, store),
            "item 2", "visible")
    assert experiments.list_experiments(store).empty


@pytest.mark.parametrize("first, second", [("Ana", "ana"), ("Ana", " Ana  "),
                                           ("Ana", "ＡＮＡ"), ("Ana", "A\u200bna"),
                                           ("Dr Who", "dr   who")])
def test_persona_names_that_differ_by_case_spacing_or_look_alikes_are_refused(first, second,
                                                                              store):
    library.save_entry(store, "persona", {"name": first, "prompt": "p"})
    before = library.entries(store, "persona")
    refused(lambda: library.save_entry(store, "persona", {"name": second, "prompt": "q"}),
            "same name" if first != second.strip() else "already exists")
    yaml = f"personas:\n  - name: {json.dumps(second)}\n    prompt: q\n"
    if second.strip() != first:
        refused(lambda: library.import_yaml(store, yaml), "same name", "nothing was imported")
    refused(lambda: library.import_yaml(
        store, f"personas:\n  - name: Bo\n  - name: {json.dumps(second.upper())}\n"
               f"  - name: {json.dumps(second)}\n"), "twice")
    assert library.entries(store, "persona") == before


def test_a_persona_can_still_be_renamed_in_place(store):
    item = library.save_entry(store, "persona", {"name": "Ana", "prompt": "p"})
    assert library.save_entry(store, "persona", {"name": "ANA", "prompt": "p"},
                              item_id=item) == item
    copy = library.duplicate_entry(store, "persona", item)
    names = {row["name"] for row in library.entries(store, "persona")}
    assert "ANA" in names and "ANA (copy)" in names and copy != item


def test_configuration_labels_that_fold_together_are_refused(store):
    library.save_config(store, {"protocol": "vote"}, "Baseline")
    library.save_config(store, {"protocol": "vote", "seats": {}}, "Baseline")  # replaces
    refused(lambda: library.save_config(store, {"protocol": "vote"}, "BASELINE "), "same name")
    assert [c["label"] for c in store.saved_configs()] == ["Baseline"]


@pytest.mark.parametrize("call", [
    lambda m, s: run_roundtable("q", agents=[Seat("Ada", m), Seat("ada", m)], store=s),
    lambda m, s: run_vote("q", voters=[Seat("Bo", m), Seat("ＢＯ", m)], store=s),
    lambda m, s: run_panel("q", debaters=[Seat("Cy", m), Seat("Dee", m)],
                           critic=Seat("cy", m), judge=Seat("j", m), store=s),
    lambda m, s: run_duel("q", a=Seat("Eve", m), b=Seat(" eve", m), store=s),
    lambda m, s: run_debate("q", proponent=Seat("Pat", m), opponent=Seat("PAT", m),
                            judge=Seat("j", m), store=s),
    lambda m, s: run_peer_review("q", producer=Seat("Sam", m), reviewer=Seat("sam ", m),
                                 store=s),
    lambda m, s: run_roundtable("q", agents=[Seat("Ada", m)], judge=Seat("ada", m), store=s),
])
def test_seat_names_that_collide_after_folding_are_refused(call, spy, store):
    refused(lambda: call(spy, store), code="input")
    nothing_happened(spy, store)


def _required():
    for name, spec in REGISTRY.items():
        for template_name, template in spec.templates.items():
            for placeholder in template.required:
                yield name, template_name, placeholder


@pytest.mark.parametrize("protocol, template, placeholder", list(_required()))
def test_a_prompt_override_without_a_required_placeholder_is_refused(protocol, template,
                                                                     placeholder, store):
    text = REGISTRY[protocol].templates[template].text.replace("{" + placeholder + "}", "it")
    config = {"protocol": protocol, "prompts": {template: text}}
    refused(lambda: run_sync(arun_config(config, "q", store=store)), "{" + placeholder + "}",
            template, code="input")
    refused(lambda: library.save_config(store, config, "dropped"), "{" + placeholder + "}")
    assert store.runs().empty and store.saved_configs() == []


def test_every_protocol_requires_its_content_placeholders():
    content = {"question", "topic", "task", "text", "draft", "role"}
    for name, spec in REGISTRY.items():
        first = next(iter(spec.templates.values()))
        assert first.required, f"{name}: its first template requires nothing"
        carried = {p for t in spec.templates.values() for p in t.required}
        assert carried & content, name
    assert "transcript" in REGISTRY["debate"].templates["judge"].required
    assert "proposals" in REGISTRY["panel"].templates["critique"].required
    with pytest.raises(ValueError):
        Template("no slot here", ("question",), required=("question",))


LONG = "x" * 201


@pytest.mark.parametrize("call, words", [
    (lambda m, s: run_vote("q", voters=[Seat(LONG, m), Seat("b", m)], store=s),
     ["seat name", "200"]),
    (lambda m, s: run_vote("q", voters=[Seat("a\x00b", m), Seat("b", m)], store=s), ["NUL"]),
    (lambda m, s: run_vote("q", voters=[Seat("a", m), Seat("b", m)], label=LONG, store=s),
     ["label", "200"]),
    (lambda m, s: run_vote("q", voters=[Seat("a", m), Seat("b", m)], label="x\x00", store=s),
     ["label", "NUL"]),
    (lambda m, s: run_vote("q", voters=[Seat("a", m), Seat("b", m)], tags=[LONG], store=s),
     ["tag", "200"]),
    (lambda m, s: run_vote("q", voters=["simulated?seed=" + "1" * 200, m], store=s),
     ["model spec", "200"]),
    (lambda m, s: run_vote("q", voters=[Seat("a", m, role=LONG), Seat("b", m)], store=s),
     ["role", "200"]),
    (lambda m, s: library.save_entry(s, "persona", {"name": LONG}), ["200"]),
    (lambda m, s: library.save_entry(s, "persona", {"name": "p\x00"}), ["NUL"]),
    (lambda m, s: library.save_config(s, {"protocol": "vote"}, LONG), ["label", "200"]),
    (lambda m, s: experiments.plan({"questions": ["q"], "configs": [
        {"protocol": "vote", "label": LONG}]}, s), ["label", "200"]),
])
def test_names_labels_and_specs_over_200_characters_or_with_nul_are_refused_before_any_call(
        call, words, spy, store):
    refused(lambda: call(spy, store), *words)
    nothing_happened(spy, store)
    assert store.saved_configs() == []
