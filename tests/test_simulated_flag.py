"""Issue 12 (2, 4): a run is simulated when any seat is, and every output says so; pages keep
simulated and real runs apart; every rate carries its n and a 95% Wilson interval.

"Real" runs here go over HTTP to the loopback OpenAI-compatible test server (`openai_stub`),
so they are made exactly as a run against a real model is.
"""
from __future__ import annotations

import asyncio
import csv
import io
import json
from pathlib import Path

import insights_frames as frames
import pandas as pd
import pytest
from apptest_helpers import plain
from openai_stub import SimulatedOpenAI
from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.cli.main import main
from engine.experiments.runner import arun_experiment
from engine.protocols import arun_config, run_sync
from engine.reports import insights
from engine.reports import runs as history
from engine.store import RunFilters
from engine.views import aggregate

PAGES = Path(__file__).resolve().parent.parent / "pages"
QUESTION, EXPECTED = "What is 6 x 7?", "42"


@pytest.fixture
def server(monkeypatch):
    with SimulatedOpenAI() as stub:
        monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps(
            {"stub": {"base_url": stub.base_url, "key_env": "OPENAI_API_KEY"}}))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
        yield stub


@pytest.fixture
def db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)  # the pages' store is cached per URL
    return url


def real(server, protocol: str = "vote") -> dict:
    return {"protocol": protocol, "model": "openai:stub-model", "base_url": server.base_url}


def mixed_debate(server) -> dict:
    """A debate whose debaters are simulated and whose judge is a (loopback) real model."""
    return {"protocol": "debate", "model": "simulated", "seats": {"judge": {
        "model": f"openai:stub-model?base_url={server.base_url}"}}}


def store_both(url: str, server) -> dict[str, str]:
    """A simulated vote, a real vote (same label), and a mixed debate; their run ids."""
    store = Store(url)
    ids = {}
    for name, config in (("sim", {"protocol": "vote", "model": "simulated"}),
                         ("real", real(server)), ("mixed", mixed_debate(server))):
        result = run_sync(arun_config(config, QUESTION, store=store, label="cheap",
                                      expected=EXPECTED))
        ids[name] = result.run_id
    return ids


# --------------------------------------------------------------------------- the flag
def test_the_flag_says_all_mixed_with_its_seats_or_nothing(db, server):
    ids = store_both(db, server)
    table = history.history_table(Store(db).runs()).set_index("id")
    assert table.loc[ids["sim"], "simulated"] == "all"
    assert table.loc[ids["real"], "simulated"] == ""
    assert table.loc[ids["mixed"], "simulated"] == "mixed: proponent, opponent"
    detail = history.run_detail(Store(db), ids["mixed"])
    assert detail.simulated and detail.simulation == "mixed: proponent, opponent"
    runs = frames.load_runs(Store(db), RunFilters()).set_index("id")
    assert runs.loc[ids["mixed"], "simulated"] and not runs.loc[ids["real"], "simulated"]


def test_every_cli_line_carries_the_flag(db, server, capsys):
    ids = store_both(db, server)
    assert main(["runs", "--db", db]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert " all " in lines[ids["sim"]] and "mixed: proponent, opponent" in lines[ids["mixed"]]
    assert "all" not in lines[ids["real"]] and "mixed" not in lines[ids["real"]]
    assert main(["runs", "--db", db, "--json"]) == 0
    listed = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert listed[ids["mixed"]]["simulated"] is True
    assert listed[ids["mixed"]]["simulated_seats"] == "proponent,opponent"
    assert listed[ids["real"]]["simulated"] is False
    for name, suffix in (("sim", " (simulated) "), ("mixed",
                         " (simulated seats: proponent, opponent) "), ("real", " - ")):
        assert main(["show", ids[name], "--db", db]) == 0
        first = capsys.readouterr().out.splitlines()[0]
        assert suffix in first and (name != "real" or "simulated" not in first), first
    assert main(["show", ids["mixed"], "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["simulated_seats"] == ["proponent", "opponent"]
    assert main(["run", "vote", QUESTION, "--db", db]) == 0
    assert "Vote (baseline) (simulated)," in capsys.readouterr().out
    assert main(["run", "vote", QUESTION, "--db", db, "--model", "openai:stub-model",
                 "--base-url", server.base_url]) == 0
    assert "simulated" not in capsys.readouterr().out.splitlines()[0]


def test_every_export_carries_the_flag(db, server, tmp_path, capsys):
    ids = store_both(db, server)
    one = json.loads(Store(db).export_run(ids["mixed"]))
    assert one["simulated"] is True and one["simulated_seats"] == ["proponent", "opponent"]
    lines = [json.loads(line) for line in Store(db).export_jsonl().splitlines()]
    flags = {r["id"]: (r["simulated"], r["simulated_seats"]) for r in lines}
    assert flags == {ids["sim"]: (True, ["cautious", "creative", "literal"]),
                     ids["real"]: (False, []),
                     ids["mixed"]: (True, ["proponent", "opponent"])}
    target = tmp_path / "runs.csv"
    assert main(["export", "--format", "csv", "--db", db, "-o", str(target)]) == 0
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(target.read_text("utf-8")))}
    assert rows[ids["mixed"]]["simulated"] == "True"
    assert rows[ids["mixed"]]["simulated_seats"] == "proponent,opponent"
    assert rows[ids["real"]]["simulated"] == "False" and rows[ids["real"]]["simulated_seats"] == ""
    # an export with the list imports: the flag is kept, the list ignored
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    assert sorted(other.import_runs(Store(db).export_jsonl())) == sorted(ids.values())
    assert bool(other.runs(ids=[ids["mixed"]]).iloc[0]["simulated"])


# --------------------------------------------------------------------------- Insights
def test_insights_report_keeps_kinds_apart(db, server):
    ids = store_both(db, server)
    store = Store(db)
    assert aggregate.default_kind(frames.load_runs(store, RunFilters())) == "real"
    real_only = {s.key: s for s in insights.report_from_store(store, RunFilters())}
    assert dict(real_only["overview"].metrics)["Runs"] == "1"
    both = {s.key: s for s in insights.report_from_store(store, RunFilters(), "both")}
    assert set(both["accuracy"].table["label"]) == {"cheap", "cheap (simulated)"}
    counted = both["overview"].charts[0].data
    assert set(counted["group"]) == {"Vote (baseline)", "Vote (baseline) (simulated)",
                                     "Debate (simulated)"}
    assert all(c.title.endswith("(simulated and real, kept apart)")
               for s in both.values() for c in s.charts)
    # The headline numbers are never pooled either: one per kind, labelled.
    accuracy = dict(both["accuracy"].metrics)
    assert {"Scored runs (real)", "Scored runs (simulated)", "Correct (real)",
            "Correct (simulated)"} <= set(accuracy)
    assert not {"Scored runs", "Correct"} & set(accuracy)
    vote = dict(both["vote"].metrics)
    assert all(label.endswith((" (real)", " (simulated)")) for label in vote)
    simulated = insights.report_from_store(store, RunFilters(), "simulated")
    assert all(c.title.endswith(" (simulated)") for s in simulated for c in s.charts)
    assert ids  # three runs made


def test_insights_page_shows_one_kind_by_default_and_both_labelled(db, server):
    store_both(db, server)
    at = AppTest.from_file(str(PAGES / "insights.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    at.pills(key="insights-sections").set_value(["overview", "accuracy"]).run()  # a click
    metrics = {plain(m.label): plain(m.value) for m in at.metric}
    assert metrics["Runs"] == "1" and metrics["Simulated"] == "0"  # the real run only
    assert any("2 simulated run(s) are not shown" in c.value for c in at.caption)
    table = at.dataframe[-1].value if at.dataframe else None
    assert table is not None and list(table["label"]) == ["cheap"]
    at.segmented_control(key="insights-kind").set_value("both").run()
    assert not at.exception, at.exception
    metrics = {plain(m.label): plain(m.value) for m in at.metric}
    assert metrics["Runs"] == "3" and metrics["Simulated"] == "2"
    labels = set(at.dataframe[-1].value["label"])
    assert labels == {"cheap", "cheap (simulated)"}
    shown = at.dataframe[-1].value.set_index(["label", "protocol"])
    assert shown.loc[("cheap", "Vote (baseline)"), "accuracy [95% CI] n"].endswith("n=1")
    assert bool(shown["few"].all())  # one run each: greyed
    at.segmented_control(key="insights-kind").set_value("simulated").run()
    metrics = {plain(m.label): plain(m.value) for m in at.metric}
    assert metrics["Runs"] == "2" and metrics["Simulated"] == "2"


def test_insights_keeps_the_user_s_kind_and_counts_each(db, server):
    """Runs of a kind arriving never switch the view the user chose: the choice holds across
    pages, and each choice says how many runs it has."""
    store = Store(db)
    for _ in range(2):
        run_sync(arun_config({"protocol": "vote", "model": "simulated"}, QUESTION,
                             store=store, expected=EXPECTED))
    at = AppTest.from_file(str(PAGES.parent / "app.py"), default_timeout=60).run()
    at.switch_page("pages/insights.py").run()
    control = at.segmented_control(key="insights-kind")
    assert control.value == "simulated"  # no real run yet
    assert list(control.options) == ["Real (0)", "Simulated (2)", "Both, side by side (2)"]
    at.run()  # what the user looked at is what comes back
    run_sync(arun_config(real(server), QUESTION, store=store, expected=EXPECTED))
    at.switch_page("pages/runs.py").run()
    at.switch_page("pages/insights.py").run()
    assert not at.exception, at.exception
    control = at.segmented_control(key="insights-kind")
    assert control.value == "simulated"  # not Real, though a real run now exists
    assert list(control.options)[0] == "Real (1)"


# --------------------------------------------------------------------------- experiments
def run_experiment(url: str, server) -> str:
    store = Store(url)
    plan = ex.plan({"name": "apart", "questions": [{"question": QUESTION, "expected": EXPECTED},
                                                   {"question": "What is 2 + 2?",
                                                    "expected": "4"}],
                    "configs": [{"label": "sim", "protocol": "vote", "model": "simulated"},
                                {"label": "real", **real(server)}],
                    "repeats": 1, "concurrency": 2}, store)
    experiment_id = ex.create(store, plan)
    asyncio.run(arun_experiment(store, experiment_id))
    return experiment_id


def test_experiment_report_and_cli_keep_kinds_apart(db, server, capsys):
    experiment_id = run_experiment(db, server)
    store = Store(db)
    default = ex.report(store, experiment_id)
    assert default.kind == "real" and default.hidden == 2
    assert set(default.runs["label"]) == {"real"}
    both = ex.report(store, experiment_id, "both")
    assert both.labels == ["sim (simulated)", "real"]
    table = both.summary.set_index("configuration")
    assert table.loc["sim (simulated)", "simulated"] == "all"
    assert table.loc["real", "simulated"] == ""
    assert table.loc["real", "accuracy [95% CI] n"].endswith("n=2")
    assert bool(table["few"].all())
    sentence = ex.compare(both.runs, "sim (simulated)", "real")["sentence"]
    assert sentence.startswith("Simulated: ")
    only_sim = ex.report(store, experiment_id, "simulated")
    assert only_sim.labels == ["sim", "real"] and set(only_sim.runs["label"]) == {"sim"}
    assert main(["experiment", "show", experiment_id, "--db", db]) == 0
    out = capsys.readouterr().out
    assert "(simulated and real runs, kept apart)" in out.splitlines()[0]
    assert "sim (simulated)" in out and "Simulated: " in out
    assert main(["experiment", "show", experiment_id, "--db", db, "--compare", "sim",
                 "real"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("Simulated: ")


def test_the_summary_never_pairs_a_configuration_with_its_own_runs_of_the_other_kind():
    # "a" ran on a real model and on the simulated one: its two groups are shown apart, and
    # each is compared with "b", but never with each other (that would measure the
    # simulator's world against a model, not one configuration against another).
    from types import SimpleNamespace

    from engine.experiments.headline import comparisons
    result = SimpleNamespace(labels=["a (simulated)", "a", "b"], experiment={"spec": {
        "configs": [{"label": "a"}, {"label": "b"}]}})
    assert comparisons(result) == [("a (simulated)", "b"), ("a", "b")]


def test_experiments_page_shows_one_kind_by_default_and_both_labelled(db, server):
    experiment_id = run_experiment(db, server)
    at = AppTest.from_file(str(PAGES / "experiments.py"), default_timeout=60)
    at.query_params["experiment"] = experiment_id
    at.run()
    assert not at.exception, at.exception
    summary = at.table[0].value  # the summary tables are st.table
    assert list(summary["configuration"]) == ["sim", "real"]
    assert list(summary["runs"]) == ["0/2", "2/2"]  # the simulated runs are not pooled in
    assert any("2 simulated run(s) are not shown" in c.value for c in at.caption)
    at.segmented_control(key="exp-kind").set_value("both").run()
    assert not at.exception, at.exception
    summary = at.table[0].value
    assert list(summary["configuration"]) == ["sim (simulated)", "real"]
    assert list(summary["simulated"]) == ["all", ""]
    assert list(summary["runs"]) == ["2/2", "2/2"]
    assert summary["accuracy [95% CI] n"].str.endswith("n=2 *").all()  # * under 5 scored
    at.session_state["exp-tab"] = "Paired comparison"  # as a click on the tab
    at.run()
    assert any(m.value.startswith("Simulated\\: ") for m in at.markdown)  # md() escapes ":"
    # another experiment opens on its own kind, not on this one's switch
    other = ex.create(Store(db), ex.plan({"name": "sim only", "questions": [QUESTION],
                                          "configs": [{"protocol": "vote", "label": "v"}]},
                                         confirmed=True))
    ex.run_experiment(Store(db), other)
    at.run()
    at.selectbox(key="exp-pick").set_value(other).run()
    assert not at.exception, at.exception
    assert at.segmented_control(key="exp-kind").value == "simulated"
    assert not any("No " in i.value and "runs in this experiment" in i.value for i in at.info)


def test_runs_page_shows_the_flag(db, server):
    ids = store_both(db, server)
    at = AppTest.from_file(str(PAGES / "runs.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value.set_index("id")
    assert table.loc[ids["mixed"], "simulated"] == "mixed: proponent, opponent"
    assert table.loc[ids["sim"], "simulated"] == "all"
    at = AppTest.from_file(str(PAGES / "runs.py"), default_timeout=60)
    at.query_params["run"] = ids["mixed"]
    at.run()
    assert not at.exception, at.exception
    assert any("**simulated seats** (proponent\\, opponent)" in c.value for c in at.caption)


# --------------------------------------------------------------------------- rates
def test_an_aggregate_rate_carries_n_and_its_wilson_interval():
    # 8 of 10 right: Wilson 95% (0.4902, 0.9433), worked out in test_stats; 1 of 2: greyed
    runs = pd.DataFrame({"group": ["A"] * 10 + ["B"] * 2,
                         "correct": [True] * 8 + [False] * 2 + [True, False]})
    rates = aggregate.rate_by(runs, "correct", ["group"])
    table = aggregate.table_of_rates(rates, ["group"]).set_index("group")
    assert table.loc["A", "n"] == 10 and table.loc["A", "right"] == 8
    assert table.loc["A", "low"] == pytest.approx(0.4902, abs=1e-4)
    assert table.loc["A", "high"] == pytest.approx(0.9433, abs=1e-4)
    assert table.loc["A", "shown"] == "80% [49%–94%] n=10" and not table.loc["A", "few"]
    assert table.loc["B", "shown"] == "50% [9%–91%] n=2" and table.loc["B", "few"]
    styles = aggregate.grey_few(table.reset_index())._compute().ctx
    greyed = {row for (row, _), css in styles.items() if ("color", "#9e9e9e") in css}
    assert greyed == {1}  # B's row only
    assert aggregate.rate_text(0, 0) == "– n=0"


def test_the_accuracy_figure_says_n_and_fades_small_samples():
    table = pd.DataFrame({"configuration": ["big", "small"], "scored": [10, 2],
                          "correct": [8, 1], "accuracy": [0.8, 0.5],
                          "accuracy_low": [0.4902, 0.0945], "accuracy_high": [0.9433, 0.9055]})
    fig = ex.accuracy_figure(table, "Accuracy (simulated)")
    bar = fig.data[0]
    assert fig.layout.title.text == "Accuracy (simulated)"
    assert list(bar.text) == ["", "n=2"] and "n=" in bar.hovertemplate
    assert bar.marker.color == "#3558c9" and list(bar.marker.opacity) == [1.0, 0.4]
    assert bar.error_y.array[0] == pytest.approx(0.9433 - 0.8)
