"""Accuracy by round and conformity on the pages (AppTest): the Experiments results of a
society experiment on arithmetic (chart with Du et al.'s points, the by-round table, the
conformity table), and the society section of Insights."""
from __future__ import annotations

from pathlib import Path

from apptest_helpers import chart_specs, plain
from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.questions import question_set

ROOT = Path(__file__).resolve().parent.parent
SOCIETY = [{"protocol": "society", "label": "society-3x2", "model": "simulated",
            "options": {"rounds": 2}},
           {"protocol": "society", "label": "society-3x1", "model": "simulated",
            "options": {"rounds": 1}}]


def society_experiment(url: str) -> str:
    """Three arithmetic problems x a society 3x2 and a 3x1, simulated, run to the end."""
    store = Store(url)
    experiment_id = ex.create(store, ex.plan({
        "questions": [q.as_dict() for q in question_set("arithmetic")[:3]],
        "source": "bundled:arithmetic", "configs": SOCIETY}, store))
    ex.run_experiment(store, experiment_id)
    return experiment_id


def frame_with(at: AppTest, *columns: str):
    return next(d.value for d in at.dataframe if set(columns) <= set(d.value.columns))


def test_experiments_page_shows_accuracy_by_round_and_conformity(db_url):
    experiment_id = society_experiment(db_url)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/experiments.py").run()
    assert not at.exception, at.exception
    assert at.session_state["experiments_page_selected"] == experiment_id
    at.session_state["exp-tab"] = "Accuracy by round"  # as a click on the tab
    at.run()
    charts = [str(c.proto.spec) for c in at.get("plotly_chart")]
    by_round = next(c for c in charts if "round-1 majority vote" in c)
    assert "Du et al. 2023: multiagent debate (3 agents, 2 rounds) 81.8%" in by_round
    assert "Accuracy by round (simulated)" in by_round
    assert any("gpt-3.5-turbo-0301" in plain(c.value) and "2305.14325" in plain(c.value)
               for c in at.caption)
    table = frame_with(at, "configuration", "round 1", "round 2")
    assert list(table["configuration"]) == ["society-3x2", "society-3x1"]
    assert table["round 1"].str.endswith("n=3").all()
    assert table.set_index("configuration").loc["society-3x1", "round 2"] == ""
    conformity = frame_with(at, "configuration", "measure", "rate [95% CI] n")
    assert set(conformity["configuration"]) == {"society-3x2", "society-3x1"}
    assert len(conformity) == 8  # four measures per configuration


def test_insights_shows_the_society_by_round_and_conformity(db_url):
    society_experiment(db_url)
    at = AppTest.from_file(str(ROOT / "pages" / "insights.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    assert "Society of minds (Du et al.)" in [h.value for h in at.subheader]
    charts = chart_specs(at)
    for title in ("Society: accuracy by round", "Society: mind changes by round",
                  "Society: conformity between rounds"):
        assert any(title in c for c in charts), title
    metrics = {plain(m.label): (plain(m.value), plain(m.proto.delta)) for m in at.metric}
    # 3 agents x 3 runs of two rounds: 9 answers, each right or wrong before
    chances = [int(metrics[m][1].rsplit("n=", 1)[1]) for m in ("Right to wrong",
                                                              "Wrong to right")]
    assert sum(chances) == 9
    table = frame_with(at, "label", "measure", "rate")
    assert set(table["label"]) == {"society-3x2", "society-3x1"}
