"""The Experiments page's baseline view (AppTest, issue 14 bullet 2): the question matrix
against a chosen configuration, fixed / broke counts, answers in the cells, the filters."""
from __future__ import annotations

from pathlib import Path

from apptest_helpers import plain
from plugins.baselines import experiment
from streamlit.testing.v1 import AppTest

from engine import question_set

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def test_the_baseline_view_counts_fixes_and_regressions_and_shows_answers(db_url):
    experiment_id = experiment(db_url)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/experiments.py")
    at.query_params["experiment"] = experiment_id
    at.run()
    assert not at.exception, at.exception
    at.session_state["exp-tab"] = "Questions"  # as a click on the tab (only it is drawn)
    at.run()
    assert at.selectbox(key="exp-base").value == "vote"
    metrics = {plain(m.label): int(plain(m.value)) for m in at.metric
               if plain(m.label) in ("Fixed", "Broke", "Same", "Unscored")}
    assert sum(metrics.values()) == len(question_set("definite"))
    assert metrics["Fixed"] + metrics["Broke"] > 0  # the two protocols differ somewhere
    grid = next(d.value for d in at.dataframe if "baseline" in d.value.columns)
    assert list(grid.columns)[:4] == ["q", "question", "expected", "baseline"]
    assert grid["panel"].str.contains(r" · (?:fixed|broke|same)", regex=True).all()
    at.selectbox(key="exp-base-show").set_value("different").run()
    grid = next(d.value for d in at.dataframe if "baseline" in d.value.columns)
    assert len(grid) == metrics["Fixed"] + metrics["Broke"]
    assert not grid["panel"].str.contains(" · same").any()
    at.selectbox(key="exp-base").set_value("panel").run()
    assert not at.exception, at.exception
    assert next(d.value for d in at.dataframe if "baseline" in d.value.columns
                ).columns[-1] == "vote"
