"""Rough edges a new user hit on the Experiments page (issue 14, bullet 6), each reproduced."""
from __future__ import annotations

from pathlib import Path

from apptest_helpers import open_new_experiment, poll
from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def open_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/experiments.py").run()
    assert not at.exception, at.exception
    return at


def start(at: AppTest, *configs: str) -> str:
    open_new_experiment(at)
    at.selectbox(key="exp-set").select("demo").run()
    select = at.multiselect(key="exp-configs")
    for config in configs:
        select = select.select(config)
    select.run()
    at.button(key="exp-start").click().run()
    assert not at.exception, at.exception
    return at.session_state["experiments_page_selected"]


def test_starting_a_second_experiment_shows_it_says_so_and_clears_the_form(db_url):
    at = open_page()
    first = start(at, "vote · defaults")
    poll(at, lambda a: ex.progress(Store(db_url), first).status != "running")
    at.run()
    second = start(at, "panel · defaults")
    assert second != first
    assert at.selectbox(key="exp-pick").value == second  # the page is on the new one
    assert second in str(at.query_params["experiment"])  # and so is the address
    assert any("Started" in s.value for s in at.success)
    assert [t.value for t in at.toast] and "Started" in at.toast[0].value
    # No paid Start one click away: the form closed, and opened again it is empty.
    assert at.session_state["exp-new"] is False
    assert not [m for m in at.multiselect if m.key == "exp-configs"]
    open_new_experiment(at)
    assert at.multiselect(key="exp-configs").value == []
    assert not [b for b in at.button if b.key == "exp-start"]
    poll(at, lambda a: ex.progress(Store(db_url), second).status != "running")


def test_the_experiment_picker_label_says_nothing_that_goes_stale(db_url):
    at = open_page()
    experiment_id = start(at, "vote · defaults")
    label = next(o for o in at.selectbox(key="exp-pick").options if experiment_id in o)
    assert "running" not in label and "0/" not in label
    poll(at, lambda a: ex.progress(Store(db_url), experiment_id).status != "running")
    at.run()
    assert "completed" in " ".join(str(p.proto.text) for p in at.get("progress"))
    assert next(o for o in at.selectbox(key="exp-pick").options if experiment_id in o) == label


def test_the_new_experiment_form_is_drawn_only_open_and_keeps_what_was_typed(db_url):
    store = Store(db_url)
    ex.create(store, ex.plan({"name": "stored", "questions": "demo", "repeats": 1,
                              "configs": [{"protocol": "vote", "label": "v"}]}, store))
    at = open_page()
    # An experiment is stored: the form starts closed, and closed it draws no input.
    assert at.session_state["exp-new"] is False
    assert not [m for m in at.multiselect if m.key == "exp-configs"]
    open_new_experiment(at)
    at.multiselect(key="exp-configs").select("vote · defaults").run()
    at.text_input(key="exp-model").input("simulated").run()
    at.session_state["exp-new"] = False  # closed (a click on its header)
    at.run()
    at.switch_page("pages/experiments.py").run()
    open_new_experiment(at)
    assert at.multiselect(key="exp-configs").value == ["vote · defaults"]
    assert not at.exception, at.exception
