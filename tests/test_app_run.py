"""The Run page (AppTest): configure, start in the background, watch, stop, come back."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine.reports.runs import result_blocks
from engine import REGISTRY, Store
from apptest_helpers import plain, poll

APP = str(Path(__file__).resolve().parent.parent / "app.py")
GENEROUS = 120.0  # seconds; polling stops as soon as the run is done




def open_run_page(query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=GENEROUS)
    at.query_params.update(query or {})
    at.run()
    at.switch_page("pages/run.py").run()
    assert not at.exception, at.exception
    return at



def start(at: AppTest, protocol: str, question: str, **widgets) -> str:
    at.selectbox(key="run-0-protocol").select(protocol).run()
    at.text_area(key="run-0-question").input(question).run()
    widgets.setdefault("run-0-model", "simulated")  # no pace: the page's default waits 1 s a call
    for key, value in widgets.items():
        at.text_input(key=key).input(value).run()
    assert not at.error, [e.value for e in at.error]
    assert "Preflight" in at.info[-1].value
    at.button(key="run-start").click().run()
    assert not at.exception, at.exception
    run_id = at.session_state["run_page_run"]
    assert at.query_params["run"] in (run_id, [run_id])
    return run_id


def finished(at: AppTest) -> bool:
    return bool(at.success) or bool(at.warning) and any("Interrupted" in w.value
                                                        for w in at.warning)


@pytest.mark.parametrize("protocol", [p for p in ("debate", "panel") if p in REGISTRY])
def test_a_simulated_run_completes_and_shows_its_result(db_url, protocol):
    at = open_run_page()
    run_id = start(at, protocol, "A bat and a ball cost $1.10 in total. The bat costs $1.00 "
                                 "more than the ball. How much does the ball cost?")
    poll(at, finished)
    store = Store(db_url)
    run = store.get(run_id)
    assert run["status"] == "completed" and run["simulated"]
    assert [s.value for s in at.success][0].startswith("Completed")
    # Labelled simulated, one chat bubble per turn, the protocol's own result blocks.
    assert any("simulated" in c.value for c in at.caption)
    assert len(at.chat_message) == len(run["turns"])
    view = result_blocks(run)
    # Short values are metrics; long ones a caption (the label) and bold text.
    metric_labels = {plain(m.label) for m in at.metric} | {plain(c.value) for c in at.caption}
    for block in view:
        if block.kind == "metrics":
            assert {label for label, _ in block.items} <= metric_labels
    texts = {t.value for t in at.text}
    assert run["question"] in texts
    assert all(turn["reply"] in texts for turn in run["turns"] if turn["reply"])
    if (Path(APP).parent / "pages" / "runs.py").exists():
        assert any(link.label.startswith("Open this run") for link in at.page_link)


def test_stop_ends_the_run_interrupted_and_keeps_its_turns(db_url):
    at = open_run_page()
    at.number_input(key="run-0-debate-option-max_rounds").set_value(10).run()
    run_id = start(at, "debate", "Should we stop early?",
                   **{"run-0-model": "simulated?latency=0.3"})
    store = Store(db_url)
    poll(at, lambda a: len(store.turns(run_id)) >= 2 or finished(a))
    assert store.get(run_id)["status"] == "running"
    at.button(key="run-stop").click().run()
    poll(at, finished)
    run = store.get(run_id)
    assert run["status"] == "interrupted"
    assert 2 <= len(run["turns"]) < 21
    assert any("Interrupted" in w.value for w in at.warning)
    assert len(at.chat_message) == len(run["turns"])  # the transcript so far is shown


def test_a_refreshed_page_finds_the_run_from_the_address(db_url):
    at = open_run_page()
    run_id = start(at, "debate", "Will a refresh lose this run?")
    poll(at, finished)
    # A new session (a refresh, or a link) with only ?run=ID in the address.
    again = AppTest.from_file(APP, default_timeout=GENEROUS)
    again.query_params["run"] = run_id
    again.run()
    again.switch_page("pages/run.py")
    again.query_params["run"] = run_id
    again.run()
    assert not again.exception
    assert again.session_state["run_page_run"] == run_id
    assert again.success and again.success[0].value.startswith("Completed")
    # "New run" goes back to the form with the last configuration and question kept.
    again.button(key="run-new").click().run()
    assert again.button(key="run-start")


def test_bad_prompt_placeholder_blocks_the_start(db_url):
    at = open_run_page()
    at.text_area(key="run-0-question").input("Q?").run()
    at.text_area(key="run-0-debate-prompt-judge").input("Judge {topic} by {mood}").run()
    assert any("got {mood}" in plain(e.value) for e in at.error)
    assert at.button(key="run-start").disabled
    assert Store(db_url).runs().empty


def test_save_a_configuration_and_load_it_back(db_url):
    at = open_run_page()
    at.selectbox(key="run-0-protocol").select("debate").run()
    at.selectbox(key="run-0-debate-proponent-0-persona").select("creative").run()
    at.number_input(key="run-0-debate-option-max_rounds").set_value(1).run()
    at.text_input(key="run-0-label").input("one round").run()
    at.button(key="run-save").click().run()
    assert at.success and "one round" in at.success[0].value
    fresh = open_run_page({"config": "one round"})
    assert fresh.number_input(key="run-1-debate-option-max_rounds").value == 1
    assert fresh.selectbox(key="run-1-debate-proponent-0-persona").value == "creative"
    assert "3 model calls" in fresh.info[-1].value


def test_saving_under_an_existing_label_asks_before_replacing(db_url):
    """Issue 14: saving under a saved label silently overwrote it (a vote became a duel and
    the runs under that label mixed protocols). Now the page asks; keeping both leaves it."""
    from engine.services import library
    at = open_run_page()
    at.selectbox(key="run-0-protocol").select("vote").run()
    at.text_input(key="run-0-label").input("baseline").run()
    at.button(key="run-save").click().run()
    assert "Saved the configuration baseline" in at.success[0].value
    at.selectbox(key="run-0-protocol").select("duel").run()
    at.button(key="run-save").click().run()
    assert not at.exception, at.exception
    assert "already saved as baseline" in at.warning[0].value
    assert Store(db_url).saved_config("baseline")["protocol"] == "vote"  # untouched
    at.button(key="run-save-keep").click().run()
    assert not [b for b in at.button if b.key == "run-save-replace"]
    at.button(key="run-save").click().run()
    at.button(key="run-save-replace").click().run()
    assert "Replaced the configuration baseline" in at.success[0].value
    assert Store(db_url).saved_config("baseline")["protocol"] == "duel"


def test_a_persona_picked_for_a_seat_names_it_in_the_tally_and_on_insights(db_url):
    """The Run page pre-fills no seat name: a seat takes its persona's name unless one is
    typed, so the CFO votes as cfo (not as the default seat's cautious), and Insights' per
    persona chart counts it as cfo."""
    from engine.services import library
    store = Store(db_url)
    for name in ("cfo", "cto"):
        library.save_entry(store, "persona", {"name": name, "prompt": f"You are the {name}."})
    at = open_run_page()
    at.selectbox(key="run-0-protocol").select("panel").run()
    at.selectbox(key="run-0-panel-debaters-0-persona").select("cfo").run()
    at.selectbox(key="run-0-panel-debaters-1-persona").select("cto").run()
    at.text_input(key="run-0-panel-debaters-2-name").input("Lee").run()
    run_id = start(at, "panel", "Should we hire two engineers or one?")
    poll(at, finished)
    run = store.get(run_id)
    assert list(run["result"]["tally"]["ballots"]) == ["cfo", "cto", "Lee"]
    assert [s["name"] for s in run["config"]["seats"]["debaters"]] == ["cfo", "cto", "Lee"]
    from engine.reports import insights
    from engine.store import RunFilters
    section = next(s for s in insights.report_from_store(store, RunFilters(), only=["panel"]))
    chart = next(c for c in section.charts
                 if c.title.startswith("Mind-change rate per persona"))
    assert set(chart.data["group"]) == {"cfo", "cto", "literal"}
