"""Links a reviewer pastes (AppTest): a run's turn (`?run=ID&turn=N` opens the transcript and
marks that turn, each turn offering its own link), a run's and an experiment's tab, and an
Insights view with its filters and sections, all kept in the address."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from engine import Store, run_vote
from engine import experiments as ex

ROOT = Path(__file__).resolve().parent.parent
LINKED = "The turn this link points to."
VOTERS = ["simulated"] * 3


def page(name: str, **params: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / name), default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_turn_link_opens_the_transcript_and_marks_that_turn(db_url):
    result = run_vote("What is 2 plus 2?", voters=VOTERS, store=Store(db_url), expected="4")
    at = page("runs.py", run=result.run_id, turn="1")
    marked = [i.value for i in at.info if LINKED in i.value]
    assert len(marked) == 1  # the Transcript tab is open, and one turn is marked
    links = [c.value for c in at.caption if c.value.startswith("[Link to this turn]")]
    assert len(links) == len(result.turns)
    assert f"(runs?run={result.run_id}&turn=1)" in links[1]
    plain = page("runs.py", run=result.run_id)
    assert not [i for i in plain.info if LINKED in i.value]  # the Result tab, nothing marked
    for bad in ("x", "-1", "99999999"):
        assert not [i for i in page("runs.py", run=result.run_id, turn=bad).info
                    if LINKED in i.value]


def test_a_run_tab_and_an_experiment_tab_are_kept_in_the_address(db_url):
    store = Store(db_url)
    result = run_vote("What is 2 plus 2?", voters=VOTERS, store=store, expected="4")
    at = page("runs.py", run=result.run_id, runs_tab="Configuration")
    assert any("configuration as stored" in c.value for c in at.caption)
    experiment_id = ex.create(store, {"questions": "demo", "configs": [
        {"protocol": "vote", "label": "vote", "model": "simulated"}]})
    ex.run_experiment(store, experiment_id)
    at = page("experiments.py", experiment=experiment_id, **{"exp-tab": "Questions"})
    assert "Questions" in [h.value for h in at.subheader]  # that tab is the one drawn
    at = page("experiments.py", experiment=experiment_id)
    assert "Questions" not in [h.value for h in at.subheader]


def test_an_insights_view_keeps_its_filters_and_sections_in_the_address(db_url):
    store = Store(db_url)
    run_vote("What is 2 plus 2?", voters=VOTERS, store=store, expected="4", label="alpha")
    run_vote("What is 3 plus 3?", voters=VOTERS, store=store, expected="6", label="beta")
    at = page("insights.py", insights_label="beta", **{"insights-view": "Sections"})
    assert at.selectbox(key="insights_label").value == "beta"
    assert at.session_state["insights-view"] == "sections"
    at = page("insights.py", **{"insights-view": "Who moved whom"})
    assert at.session_state["insights-view"] == "moved"  # the view the link names
