"""The rough edges a new user hit (issue 14, bullet 6), each reproduced by a test named after it.

Engine-level and AppTest checks here; what only a browser shows is in tests/test_browser_edges.py.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from apptest_helpers import plain, poll
from engine import ConfigError, Store
from engine.reports import charts, vega
from engine.views.ballots import canonical_rows, flow_links
from engine.services.demo import demo_plan
from engine.services.runform import PACED_MODEL

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def test_tally_bar_plots_numeric_stances_as_categories():
    fig = charts.tally_bar({"0.05": 2, "0.1": 1}, winner="0.05")  # the static HTML export's
    assert fig.layout.xaxis.type == "category"
    assert list(fig.data[0].x) == ["0.05", "0.1"]
    spec = vega.tally({"0.05": 2, "0.1": 1}, winner="0.05")  # the run page's
    bars = spec["layer"][0]["encoding"]
    assert bars["x"]["type"] == "nominal" and bars["x"]["sort"] == ["0.05", "0.1"]
    assert [(r["group"], r["votes"], r["winner"]) for r in spec["data"]["values"]] == [
        ("0.05", 2, True), ("0.1", 1, False)]
    assert bars["y"]["axis"]["tickMinStep"] == 1  # whole votes


def test_mind_change_sankey_names_the_debaters_in_large_labels():
    flows = pd.DataFrame([{"seat": "cautious", "before": "0.1", "after": "0.05"},
                          {"seat": "creative", "before": "0.5", "after": "0.5"},
                          {"seat": "literal", "before": "0.05", "after": "0.05"}])
    (trace,) = charts.sankey(flow_links(flows)).data
    labels = list(trace.node.label)
    assert any("cautious" in label and "0.1" in label for label in labels)
    assert any("cautious" in label and "literal" in label and "0.05" in label
               for label in labels)
    assert trace.textfont.size >= 14


def test_neighbouring_tables_spell_an_answer_one_way_with_the_raw_one_beside():
    rows = [{"debater": "cautious", "stance": "0.10", "verdict": "flawed"},
            {"debater": "literal", "stance": "$0.05", "verdict": "sound"},
            {"debater": "quiet", "stance": "(abstained)", "verdict": ""}]
    shown = canonical_rows(rows)
    assert [r["stance"] for r in shown] == ["0.1", "0.05", "(abstained)"]
    assert [r["stance as written"] for r in shown] == ["0.10", "$0.05", ""]
    assert list(shown[0]) == ["debater", "stance", "stance as written", "verdict"]
    counted = [{"voter": "a", "stance": "0.10", "counted as": "0.1"}]
    assert canonical_rows(counted) == counted  # already shows both
    same = [{"seat": "a", "before": "0.05", "after": "0.05"}]
    assert canonical_rows(same) == same


def test_live_chat_bubbles_show_the_parsed_answer_and_keep_the_transcript_open(db_url):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/run.py").run()
    at.selectbox(key="run-0-protocol").select("panel").run()
    at.text_area(key="run-0-question").input("What is 2 + 2?").run()
    at.text_input(key="run-0-model").input("simulated").run()
    at.button(key="run-start").click().run()
    poll(at, lambda a: bool(a.success))
    run = Store(db_url).get(at.session_state["run_page_run"])
    # No transcript folded away at the end: every bubble sits on the page, none in an
    # expander but the raw replies'.
    assert not [e for e in at.expander if e.label.startswith("Transcript")]
    assert len(at.chat_message) == len(run["turns"])
    first = at.chat_message[0]
    shown = " ".join(plain(m.value) for m in first.markdown)
    assert "stance" in shown and "reasoning" in shown
    assert first.expander[0].label == "Raw reply (JSON)"
    assert first.expander[0].text[0].value == run["turns"][0]["reply"]


def test_default_simulated_model_has_a_watchable_pace_and_says_so(db_url):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/run.py").run()
    assert at.text_input(key="run-0-model").value == PACED_MODEL
    assert any("second a call" in c.value for c in at.caption)
    at.selectbox(key="run-0-protocol").select("vote").run()
    at.text_area(key="run-0-question").input("What is 2 + 2?").run()
    at.button(key="run-start").click().run()
    poll(at, lambda a: bool(a.success))
    run = Store(db_url).get(at.session_state["run_page_run"])
    assert run["duration"] >= 0.9  # three voters at once, about a second each


def demo_count(at) -> str:
    return next(plain(m.value) for m in at.markdown if "demo runs are stored now" in m.value)


def test_home_demo_count_is_fresh_after_storing_and_the_demo_is_idempotent(db_url):
    store = Store(db_url)
    at = AppTest.from_file(APP, default_timeout=300).run()
    assert "**0** demo runs" in demo_count(at)
    at.button(key="demo_run").click().run()
    poll(at, lambda a: bool(a.success))
    planned = len(demo_plan())
    assert f"**{planned}** demo runs" in demo_count(at)
    # Pressed again: nothing more is stored, and the page says the demo runs are there.
    at.button(key="demo_run").click().run()
    assert any("already stored" in i.value for i in at.info)
    assert len(store.runs(tag="demo")) == planned
    # One deleted by hand: the button makes only that one again.
    store.delete([store.runs(tag="demo")["id"].iloc[0]])
    at.run()
    assert at.button(key="demo_run").label == "Add the 1 missing demo run"
    at.button(key="demo_run").click().run()
    poll(at, lambda a: bool(a.success))
    assert len(store.runs(tag="demo")) == planned
    assert f"**{planned}** demo runs" in demo_count(at)


def test_remove_all_demo_runs_asks_before_deleting(db_url):
    store = Store(db_url)
    store.start_run("vote", "a demo question", tags=["demo"], label="demo")
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.button(key="demo_remove").click().run()
    assert len(store.runs(tag="demo")) == 1  # not yet: the page asks
    assert any("cannot be undone" in w.value for w in at.warning)
    at.button(key="demo_remove_no").click().run()
    assert len(store.runs(tag="demo")) == 1 and not at.warning
    at.button(key="demo_remove").click().run()
    at.button(key="demo_remove_yes").click().run()
    assert store.runs(tag="demo").empty
    assert at.success[0].value == "Removed 1 demo runs."
    assert "**0** demo runs" in demo_count(at)


def test_deleted_builtin_personas_can_be_restored(db_url):
    from engine.services import library
    store = Store(db_url)
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/personas.py").run()
    cautious = library.find(store, "persona", "cautious")
    at.button(key=f"delete-persona-{cautious['id']}").click().run()
    assert any("built in" in w.value for w in at.warning)
    at.button(key=f"confirm-persona-{cautious['id']}").click().run()
    assert library.find(store, "persona", "cautious") is None
    assert any("cautious" in plain(i.value) for i in at.info)
    at.button(key="restore-persona").click().run()
    restored = library.find(store, "persona", "cautious")
    assert restored and restored["builtin"] and restored["icon"] == "🛡️"
    assert "Restored 1 built-in persona" in plain(at.success[0].value)
    assert not [b for b in at.button if b.key == "restore-persona"]  # nothing left to restore


def test_duel_first_converge_and_reply_are_selects_checked_before_start(db_url):
    from engine import get_protocol
    from engine.protocols import check_config
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/run.py").run()
    at.selectbox(key="run-0-protocol").select("duel").run()
    first = at.selectbox(key="run-0-duel-option-first")
    assert first.options == ["(default)", "a", "b", "optimist", "skeptic"]
    assert at.selectbox(key="run-0-duel-option-converge").options == ["(default)", "agreed"]
    assert at.selectbox(key="run-0-duel-option-reply").options == ["transcript", "last"]
    first.select("skeptic").run()
    at.selectbox(key="run-0-duel-option-converge").select("agreed").run()
    at.text_area(key="run-0-question").input("Tabs or spaces?").run()
    assert not at.error and not at.button(key="run-start").disabled
    # A value no select offers (a hand-written configuration) is refused before any call.
    store = Store(db_url)
    for bad in ({"reply": "full"}, {"first": "nobody"}, {"converge": "maybe"}):
        config = {"protocol": "duel", "model": "simulated", "options": bad}
        with pytest.raises(ConfigError, match=list(bad)[0]):
            check_config(config, None)
    assert {o.name: o.choices for o in get_protocol("duel").options}["converge"] == (
        None, "agreed")
    assert store.runs().empty


def test_a_running_rerun_does_not_say_it_did_not_complete(db_url):
    store = Store(db_url)
    run_id = store.start_run("vote", "Still going?")  # a run whose process is still at work
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/runs.py")
    at.query_params["run"] = run_id
    at.run()
    said = " ".join(i.value for i in at.info)
    assert "still going" in said and "did not complete" not in said
