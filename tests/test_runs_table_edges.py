"""The Runs table as a new user found it (issue 14, bullet 6): it cut the question, had no
expected/correct column, and its Tag filter was full of internal `cell:...` tags."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.protocols import arun_config, run_sync
from engine.reports import runs as history
from engine.store import RunFilters

RUNS_PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "runs.py")
LONG = ("A question long enough that the old table cut it at a hundred and twenty characters, "
        "so nobody could read its end, which is where the real question is: what is 6 x 7?")


def test_the_runs_table_shows_the_whole_question_expected_and_correct(db_url):
    store = Store(db_url)
    run_sync(arun_config({"protocol": "vote", "model": "simulated"}, LONG, store=store,
                         expected="42", label="long"))
    run_sync(arun_config({"protocol": "vote", "model": "simulated"}, "Unscored?", store=store))
    table = history.history(store, RunFilters()).table
    scored = table[table["label"] == "long"].iloc[0]
    assert scored["question"] == LONG
    assert scored["expected"] == "42" and scored["correct"] in (True, False)
    assert table[table["label"] == ""].iloc[0]["correct"] is None
    at = AppTest.from_file(RUNS_PAGE, default_timeout=60).run()
    assert not at.exception, at.exception
    shown = at.dataframe[0].value
    assert {"expected", "correct"} <= set(shown.columns) and LONG in set(shown["question"])


def test_the_tag_filter_leaves_out_internal_tags(db_url):
    store = Store(db_url)
    run_sync(arun_config({"protocol": "vote", "model": "simulated"}, "Tagged?", store=store,
                         tags=("nightly",)))
    plan = ex.plan({"questions": "demo", "repeats": 1,
                    "configs": [{"label": "v", "protocol": "vote", "model": "simulated"}]}, store)
    ex.run_experiment(store, ex.create(store, plan))
    stored = {t for tags in store.runs()["tags"] for t in tags}
    assert any(t.startswith("cell:") for t in stored)  # the experiment's cells are tagged
    assert history.choices(store)["tag"] == ["nightly"]
