"""Accuracy against cost and tokens (issue 28, bullet 5): the Pareto front per configuration,
dominated configurations greyed, intervals and n shown, unknown spend never drawn at 0."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.reports import pareto, vega
from engine.reports.experiments import cost_per_run

HOSTILE = "<b>debate</b> [x](http://e)"
APP = str(Path(__file__).resolve().parent.parent / "app.py")


def _summary(rows):
    return pd.DataFrame([{"configuration": c, "cost_per_run": cost, "tokens_per_run": tokens,
                          "accuracy": acc, "accuracy_low": max(acc - 0.1, 0),
                          "accuracy_high": min(acc + 0.1, 1), "scored": n}
                         for c, cost, tokens, acc, n in rows])


def test_the_front_and_who_dominates_whom():
    table = _summary([("cheap", 0.01, 1000, 0.60, 20), ("dear", 0.05, 5000, 0.80, 20),
                      ("worse", 0.06, 6000, 0.70, 20), ("tie", 0.01, 1000, 0.60, 20),
                      ("same price better", 0.05, 5000, 0.85, 3)])
    rows, unplaced = pareto.pareto_rows(table, "cost_per_run")
    state = dict(zip(rows["configuration"], rows["dominated_by"], strict=True))
    assert unplaced == []
    assert state == {"cheap": "", "tie": "", "dear": "same price better",
                     "worse": "same price better", "same price better": ""}
    spec = vega.pareto(rows, "t", "cost_per_run")
    points = {v["configuration"]: v for v in spec["data"]["values"]}
    assert points["worse"]["state"] == "dominated" and points["cheap"]["state"] == "on the front"
    assert points["same price better"]["few"] is True and points["dear"]["n"] == 20
    assert spec["layer"][2]["encoding"]["color"]["scale"]["range"] == [vega.FRONT,
                                                                        vega.DOMINATED]
    json.dumps(spec)  # plain JSON for the page


def test_unknown_cost_is_not_placed_and_is_named():
    table = _summary([("priced", 0.02, 1000, 0.5, 10), ("unpriced", math.nan, 900, 0.9, 10),
                      ("unscored", 0.01, 800, math.nan, 0)])
    rows, unplaced = pareto.pareto_rows(table, "cost_per_run")
    assert list(rows["configuration"]) == ["priced"] and unplaced == ["unpriced", "unscored"]
    assert not rows["dominated"].any()
    text = pareto.caption(rows, unplaced, "cost_per_run")
    assert ("Not placed: unpriced (unknown cost or no scored run), unscored (unknown cost or "
            "no scored run).") in text
    # on tokens, the unpriced configuration is placed and dominates the priced one
    rows, _ = pareto.pareto_rows(table, "tokens_per_run")
    assert dict(zip(rows["configuration"], rows["dominated_by"], strict=True)) == {
        "priced": "unpriced", "unpriced": ""}
    assert "Within the interval of what dominates them" not in pareto.caption(
        rows, [], "tokens_per_run")


def test_a_dominated_point_within_noise_is_said_so():
    table = _summary([("a", 1.0, 10, 0.70, 50), ("b", 2.0, 20, 0.65, 50)])
    rows, _ = pareto.pareto_rows(table, "cost_per_run")
    assert "Within the interval of what dominates them: b." in pareto.caption(
        rows, [], "cost_per_run")


def test_a_mean_cost_over_only_some_runs_is_never_shown():
    assert cost_per_run(pd.DataFrame({"cost_usd": [0.1, 0.3]})) == 0.2
    assert math.isnan(cost_per_run(pd.DataFrame({"cost_usd": [0.1, None]})))
    assert math.isnan(cost_per_run(pd.DataFrame({"cost_usd": []})))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10), st.floats(0, 1)), min_size=1, max_size=12))
def test_the_front_is_never_empty_and_nothing_on_it_is_beaten(points):
    named = [(f"c{i}", s, a) for i, (s, a) in enumerate(points)]
    beaten = pareto.dominated_by(named)
    front = [p for p in named if not beaten[p[0]]]
    assert front
    for _label, spend, acc in front:
        assert not any(s <= spend and a >= acc and (s < spend or a > acc)
                       for _, s, a in named)
    for label, by in beaten.items():
        if by:
            mine = next(p for p in named if p[0] == label)
            theirs = next(p for p in named if p[0] == by)
            assert theirs[1] <= mine[1] and theirs[2] >= mine[2]


def test_the_experiment_results_draw_both_charts(db_url):
    store = Store(db_url)
    plan = ex.plan({"questions": "demo", "configs": [{"protocol": "vote", "label": "vote"},
                                                     {"protocol": "debate", "label": HOSTILE}]},
                   store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    at = AppTest.from_file(APP, default_timeout=120.0)
    at.query_params["experiment"] = experiment_id
    at.switch_page("pages/experiments.py").run()
    at.session_state["exp-tab"] = "Cost and accuracy"
    at.run()
    assert not at.exception, at.exception
    specs = [c.proto.spec for c in at.get("vega_lite_chart")]
    titles = [json.loads(s).get("title", {}).get("text") for s in specs]
    assert "Accuracy against tokens per run" in titles
    assert "Accuracy against cost per run" in titles  # simulated runs cost $0, known
    chart = next(c for c in at.get("vega_lite_chart") if "tokens per run" in c.proto.spec)
    data = chart.proto.data.data  # Streamlit sends the points as an Arrow table
    assert HOSTILE.encode() in data and b"on the front" in data  # as typed: Vega's text
    assert b"&lt;" not in data


def test_insights_puts_each_configuration_on_accuracy_against_tokens(store):
    from insights_frames import cost_section

    from engine.protocols import arun_config, run_sync
    from engine.questions import DEFINITE
    from engine.reports.insights import configurations, load_summary
    from engine.store import RunFilters
    for protocol in ("vote", "debate"):
        for label in ("cheap", "careful"):
            for question in DEFINITE[:2]:
                run_sync(arun_config({"protocol": protocol, "model": "simulated"},
                                     question.text, store=store, label=label,
                                     expected=question.expected))
    table = configurations(load_summary(store, RunFilters()))
    assert sorted(table["configuration"]) == ["careful · Debate", "careful · Vote (baseline)",
                                              "cheap · Debate", "cheap · Vote (baseline)"]
    assert (table["scored"] == 2).all()
    runs = store.runs()
    for row in table.to_dict("records"):
        label, title = row["configuration"].split(" · ")
        mine = runs[(runs["label"] == label) & (runs["protocol"] == (
            "debate" if title == "Debate" else "vote"))]
        assert row["tokens_per_run"] == (mine["tokens_in"] + mine["tokens_out"]).mean()
        assert row["accuracy"] == mine["correct"].astype(bool).mean()
    section = cost_section(runs.assign(tokens=runs["tokens_in"] + runs["tokens_out"],
                                       group=runs["label"], duration=runs["duration"]))
    titles = [c.title for c in section.charts if c.kind == "pareto"]
    assert titles == ["Accuracy against cost per run", "Accuracy against tokens per run"]
    chart = next(c for c in section.charts if c.title == titles[1])
    assert len(chart.data) == 4
    costs = configurations(load_summary(store, RunFilters()))["cost_per_run"]
    assert (costs == 0).all()  # simulated seats cost $0, a known cost
    assert "Grey: dominated" in chart.caption
