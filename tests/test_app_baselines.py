"""The Experiments page's approved baseline (AppTest): an analyst approves a completed
experiment as its name's baseline; the page then says who approved it and when, and a later
experiment of the name shows the baseline and the earlier ones."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.store.approvals import approve, baseline_of

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SPEC = {"name": "nightly", "questions": [{"question": "What is 2 plus 2?", "expected": "4"}],
        "configs": [{"protocol": "vote", "label": "vote", "model": "simulated"}]}


def plain(text: str) -> str:
    """Page text without the escapes that keep it from being read as markdown."""
    return text.replace("\\", "").replace("\u2060", "")


def page_of(experiment_id: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.query_params["experiment"] = experiment_id
    at.switch_page("pages/experiments.py").run()
    assert not at.exception, at.exception
    return at


def test_an_approved_baseline_shows_who_approved_it_and_its_history(db_url):
    store = Store(db_url)
    first = ex.create(store, SPEC)
    ex.run_experiment(store, first)
    at = page_of(first)
    assert any("No experiment of this name is approved" in c.value for c in at.caption)
    at.button(key="exp-approve").click().run()
    assert not at.exception, at.exception
    assert baseline_of(store, "nightly")["experiment"] == first
    assert any("approved by local on" in plain(s.value) for s in at.success)
    assert not [b for b in at.button if b.key == "exp-approve"]  # it is the baseline already
    second = ex.create(store, SPEC)
    ex.run_experiment(store, second)
    approve(store, second, "ann@example.com")
    third = ex.create(store, SPEC)  # planned: cannot be approved yet
    at = page_of(third)
    assert any(f"experiment {second}, approved by ann@example.com" in plain(c.value)
               for c in at.caption)
    assert at.button(key="exp-approve").disabled
    assert "Earlier baselines (1)" in [e.label for e in at.expander]
