"""Over time (the Experiments page): each configuration's accuracy and health by date over
the experiments of one name, with markers where its configuration, prompts or question set
changed, and a chart whose points open their experiment."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.questions.sets import question_set
from engine.reports import trends

QUESTIONS = [q.as_dict() for q in question_set("arithmetic")[:6]]
PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "experiments.py")


def spec(model: str = "simulated?seed=1", questions=QUESTIONS, prompts=None):
    config = {"protocol": "society", "label": "society", "model": model,
              "options": {"rounds": 2}}
    if prompts:
        config["prompts"] = prompts
    return {"name": "weekly", "questions": questions, "configs": [config]}


def made(store: Store, body) -> str:
    experiment_id = ex.create(store, body)
    ex.run_experiment(store, experiment_id)
    return experiment_id


def test_each_experiment_is_a_point_and_changes_are_marked(db_url):
    store = Store(db_url)
    first = made(store, spec())
    second = made(store, spec())
    third = made(store, spec(model="simulated?seed=1&conformity=0.9"))
    fourth = made(store, spec(model="simulated?seed=1&conformity=0.9", questions=QUESTIONS[:5]))
    made(store, {**spec(), "name": "another"})  # another name: not on the line
    frame = trends.over_time(store, "weekly")
    accuracy = frame[frame["measure"] == "accuracy"]
    assert list(accuracy["experiment"]) == [first, second, third, fourth]
    assert list(accuracy["configuration"].unique()) == ["society (simulated)"]
    assert list(accuracy["changed"]) == ["", "", "configuration", "question set"]
    assert (accuracy["low"] <= accuracy["value"]).all()
    assert (accuracy["value"] <= accuracy["high"]).all()
    assert set(frame["measure"]) == {"accuracy", "majority adoption", "agreement inflation"}
    spec_ = trends.trend_spec(frame, "accuracy")
    rings = spec_["layer"][3]
    assert rings["transform"] == [{"filter": "datum.marker != ''"}]
    assert sum(1 for v in spec_["data"]["values"] if v["marker"]) == 2
    event = {"selection": {"pick": [{"experiment": third}]}}
    assert trends.picked_experiment(event) == third
    assert trends.picked_experiment({"selection": {"pick": []}}) is None


def test_the_page_draws_over_time_for_the_experiments_name(db_url):
    store = Store(db_url)
    made(store, spec())
    latest = made(store, spec(model="simulated?seed=2"))
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params["experiment"] = latest
    at.session_state["exp-over-time"] = True  # the expander opened
    at.run()
    assert not at.exception, at.exception
    charts = at.get("vega_lite_chart")
    assert any("weekly" in e.label for e in at.expander)
    assert any("datum.marker" in str(c.proto) for c in charts), [str(c.proto)[:200]
                                                                  for c in charts]


def test_a_change_of_prompts_alone_is_marked_as_prompts(db_url):
    store = Store(db_url)
    vote = {"protocol": "vote", "label": "vote", "model": "simulated?seed=1"}
    body = {"name": "prompted", "questions": QUESTIONS[:3], "configs": [vote]}
    made(store, body)
    edited = {**vote, "prompts": {"propose": "Answer briefly. {question}"}}
    made(store, {**body, "configs": [edited]})
    frame = trends.over_time(store, "prompted")
    assert list(frame[frame["measure"] == "accuracy"]["changed"]) == ["", "prompts"]
