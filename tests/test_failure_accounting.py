"""Failure accounting (issue 12, bullet 3): failures are not outcomes.

A run in which no model call succeeded is `failed`; a run that lost a decisive call (a judge)
is `completed` and flagged degraded with what it lost; Insights and the experiment summary
count both apart and never feed a failed judge's 0.00 into a mean; a run that ended early
keeps the tokens, calls and time it did spend.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from conftest import applied_migrations, table_columns
from loopback import closed_port
from openai_stub import loopback_only
from openai_stub import openai_model as model
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.experiments.headline import headline
from engine.llm.calls import RunStopped
from engine.models import Seat
from engine.protocols import arun_config, get_protocol, run_sync
from engine.protocols.debate import run_debate
from engine.questions import DEFINITE
from engine.reports import experiments as reports
from engine.reports import insights
from engine.reports.runs import history_table
from engine.store import RunFilters

PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "insights.py")
FAILING = "simulated?fail=1"
QUESTION = DEFINITE[0]


@pytest.fixture(autouse=True)
def loopback_env(monkeypatch):
    """No OpenAI key or base URL of the environment reaches these tests' calls."""
    loopback_only(monkeypatch, "OPENAI_API_KEY", "OPENAI_BASE_URL")


def plain(shown: str) -> str:
    """A page's text without the escapes that keep it from being read as markdown."""
    return shown.replace("\\", "")


def debate(store: Store, judge: str = "simulated", everyone: str = "simulated",
           label: str = "debates") -> str:
    """A one-round simulated debate; returns its run id."""
    seats = {"proponent": [{"name": "pro", "model": everyone}],
             "opponent": [{"name": "con", "model": everyone}],
             "judge": [{"name": "judge", "model": judge}]}
    result = run_sync(arun_config({"protocol": "debate", "seats": seats,
                                   "options": {"max_rounds": 1}}, QUESTION.text,
                                  store=store, label=label, expected=QUESTION.expected,
                                  retries=0))
    assert result.run_id is not None
    return result.run_id


# --------------------------------------------------------------------------- status
def test_a_run_against_an_unreachable_server_is_failed_and_says_why(store):
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    result = run_debate("Should we adopt HTTP-TOPIC-7?", proponent=Seat("pro", model(dead)),
                        opponent=Seat("con", model(dead)), judge=Seat("judge", model(dead)),
                        max_rounds=1, retries=0, timeout_per_call=30, store=store)
    assert len(result.turns) == 3 and not any(t.ok for t in result.turns)
    run = store.get(result.run_id)
    assert run["status"] == "failed" and not run["degraded_run"]
    assert run["error"] == "no model call succeeded (3 calls: 3 connection errors)"
    assert run["calls"] == 3 and run["degraded"] == 3
    assert history_table(store.runs())["status"].tolist() == ["failed"]


def test_a_simulated_run_where_every_call_fails_is_failed(store):
    run = store.get(debate(store, everyone=FAILING, judge=FAILING))
    assert run["status"] == "failed"
    assert run["error"].startswith("no model call succeeded (3 calls: 3 ")


def test_a_debate_whose_judge_failed_is_completed_and_degraded(store):
    run = store.get(debate(store, judge=FAILING))
    assert run["status"] == "completed" and run["degraded_run"]
    assert "judge" in run["lost"] and run["error"] == ""
    assert run["metrics"]["judge_confidence"] is None  # never the placeholder 0.00
    assert run["metrics"]["outcome"] == "judge failed"
    spec = get_protocol("debate")
    typed = spec.read_result(run["result"])
    assert "confidence: none (the judge failed)" in spec.summary(typed)
    assert ("Judge confidence", "none (the judge failed)") in spec.view(typed)[0].items
    assert history_table(store.runs())["status"].tolist() == ["completed (degraded)"]
    sound = store.get(debate(store))
    assert sound["status"] == "completed" and not sound["degraded_run"] and sound["lost"] == ""


def test_most_turns_lost_degrades_a_run_with_no_decisive_call(store):
    seats = {"voters": [{"name": "a", "model": FAILING}, {"name": "b", "model": FAILING},
                        {"name": "c", "model": "simulated"}]}
    result = run_sync(arun_config({"protocol": "vote", "seats": seats}, QUESTION.text,
                                  store=store, retries=0))
    run = store.get(result.run_id)
    assert run["status"] == "completed" and run["degraded_run"]
    assert run["lost"] == "2 of 3 calls"


def test_degraded_and_lost_travel_with_an_export(store, tmp_path):
    run_id = debate(store, judge=FAILING)
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    assert other.import_runs(store.export_run(run_id)) == [run_id]
    copied = other.get(run_id)
    assert copied["degraded_run"] and copied["lost"] == store.get(run_id)["lost"]
    assert json.loads(store.export_jsonl([run_id]))["lost"] == copied["lost"]


def test_an_older_database_gains_the_columns_and_its_runs_are_assessed(backend):  # noqa: F811
    """Migration 0005 on a database made before it (SQLite, and PostgreSQL when a server is
    given): the columns are added, and runs stored `completed` by the old rule are assessed
    as a run is now (failed, degraded, signals)."""
    url, old = backend.url, backend
    sound, judgeless, dead = debate(old), debate(old, judge=FAILING), debate(
        old, everyone=FAILING, judge=FAILING)
    placeholder = {**old.get(judgeless)["metrics"], "judge_confidence": 0.0}
    with old.engine.begin() as connection:
        # A database this old had no summary index either (migration 0012 adds it).
        connection.execute(text("DROP INDEX IF EXISTS ix_runs_summary"))
        connection.execute(text("ALTER TABLE runs DROP COLUMN degraded_run"))
        connection.execute(text("ALTER TABLE runs DROP COLUMN lost"))
        connection.execute(text("UPDATE runs SET status = 'completed', error = ''"))
        connection.execute(text("UPDATE runs SET metrics = :m WHERE id = :i"),
                           {"m": json.dumps(placeholder), "i": judgeless})
        connection.execute(text("DELETE FROM schema_migrations "
                                "WHERE name = '0005_degraded_runs'"))
    old.engine.dispose()
    reopened = Store(url)  # migrated, then back-filled by the protocols
    assert "0005_degraded_runs" in applied_migrations(reopened)
    assert {"degraded_run", "lost"} <= set(table_columns(reopened, "runs"))
    kept = reopened.get(sound)
    assert kept["status"] == "completed" and not kept["degraded_run"] and kept["lost"] == ""
    flagged = reopened.get(judgeless)
    assert flagged["status"] == "completed" and flagged["degraded_run"]
    assert flagged["lost"] == "judge" and flagged["metrics"]["judge_confidence"] is None
    failed = reopened.get(dead)
    assert failed["status"] == "failed"
    assert failed["error"].startswith("no model call succeeded (3 calls")
    assert reopened.migrate() == []


# --------------------------------------------------------------------------- totals
def test_a_stopped_run_keeps_what_it_spent(store):
    stop = threading.Event()
    with pytest.raises(RunStopped):
        run_sync(arun_config({"protocol": "vote"}, QUESTION.text, store=store,
                             on_event=lambda turn: stop.set(), stop_event=stop, retries=0))
    run = store.runs().iloc[0]
    turns = store.turns(run["id"])
    assert run["status"] == "interrupted" and len(turns) == run["calls"] > 0
    assert run["tokens_in"] == turns["tokens_in"].sum() > 0
    assert run["tokens_out"] == turns["tokens_out"].sum()
    assert run["latency"] == pytest.approx(turns["latency"].sum())
    assert run["duration"] > 0


def test_a_run_ended_as_the_reaper_ends_it_keeps_what_it_spent(store):
    result = run_sync(arun_config({"protocol": "vote"}, QUESTION.text, retries=0))
    run_id = store.start_run("vote", QUESTION.text)
    store.add_turns([(run_id, turn) for turn in result.turns])
    store.end_run(run_id, "interrupted", "the process is gone")
    run = store.get(run_id)
    assert run["calls"] == len(result.turns)
    assert run["tokens_in"] == sum(t.tokens_in for t in result.turns) > 0
    assert run["tokens_out"] == sum(t.tokens_out for t in result.turns)
    assert run["latency"] == pytest.approx(sum(t.latency for t in result.turns))


# --------------------------------------------------------------------------- aggregates
def test_placeholders_never_reach_the_mean_judge_confidence(store):
    debate(store)
    debate(store, judge="simulated?seed=4")

    def mean() -> str:
        sections = insights.report_from_store(store, RunFilters())
        return dict(next(s for s in sections if s.key == "debate").metrics)[
            "Mean judge confidence"]

    before = mean()
    assert before != "—"
    debate(store, judge=FAILING)
    debate(store, everyone=FAILING, judge=FAILING)
    assert mean() == before
    overview = dict(insights.report_from_store(store, RunFilters())[0].metrics)
    assert (overview["Runs"], overview["Completed"], overview["Degraded"],
            overview["Failed"]) == ("4", "3", "1", "1")


def test_insights_page_counts_failed_and_degraded_runs_apart(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    store = Store(url)
    debate(store)
    debate(store, judge=FAILING)
    debate(store, everyone=FAILING, judge=FAILING)
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not at.exception, at.exception
    metrics = {plain(m.label): plain(m.value) for m in at.metric}
    assert (metrics["Runs"], metrics["Completed"], metrics["Degraded"],
            metrics["Failed"], metrics["Interrupted"]) == ("3", "2", "1", "1", "0")
    assert any("never counted as 0" in c.value for c in at.caption)


def test_the_experiment_summary_counts_failed_and_degraded_runs_apart(store):
    questions = [{"question": q.text, "expected": q.expected} for q in DEFINITE[:2]]
    judge_fails = {"protocol": "debate", "label": "judge fails", "options": {"max_rounds": 1},
                   "seats": {"judge": [{"name": "judge", "model": FAILING}]}}
    all_fail = {"protocol": "vote", "label": "all fail", "model": FAILING}
    sound = {"protocol": "debate", "label": "sound", "options": {"max_rounds": 1}}
    plan = ex.plan({"questions": questions, "configs": [judge_fails, all_fail, sound],
                    "repeats": 1}, store)
    experiment_id = ex.create(store, plan)
    state = ex.run_experiment(store, experiment_id)
    assert (state.status, state.done, state.failed) == ("incomplete", 4, 2)
    assert "no model call succeeded" in state.error
    report = reports.report(store, experiment_id)
    table = report.summary.set_index("configuration")
    assert table.loc["judge fails", ["runs", "failed", "degraded"]].tolist() == [2, 0, 2]
    assert table.loc["all fail", ["runs", "failed", "degraded"]].tolist() == [0, 2, 0]
    assert table.loc["sound", ["runs", "failed", "degraded"]].tolist() == [2, 0, 0]
    assert not [c for c in report.calibrations if c["label"] == "judge fails"
                and c["signal"] == "judge"]  # only a signal with runs has a calibration
    assert report.runs.loc[report.runs["label"] == "judge fails", "judge"].isna().all()
    printed = headline(report).text()
    assert "(2 degraded)" in printed and "(2 failed)" in printed


@pytest.mark.parametrize("protocol", ["vote", "panel"])
def test_a_tally_with_no_ballot_stores_no_consensus(store, protocol):
    """With every seat failed the tally's 0.0 share and its level are placeholders: None."""
    result = run_sync(arun_config({"protocol": protocol, "model": FAILING}, QUESTION.text,
                                  store=store, retries=0))
    run = store.get(result.run_id)
    assert run["status"] == "failed"
    metrics = run["metrics"]
    assert metrics["consensus"] is None and metrics["ratio"] is None
    assert metrics["level"] is None and metrics["confidence_level"] is None


def test_the_cli_lists_and_shows_a_degraded_run(tmp_path, capsys):
    from engine.cli.main import main
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    run_id = debate(Store(url), judge=FAILING)
    assert main(["runs", "--db", url]) == 0
    assert "completed (degraded)" in capsys.readouterr().out
    assert main(["show", run_id, "--db", url]) == 0
    assert "completed (degraded) (lost: judge)" in capsys.readouterr().out.splitlines()[0]


def test_the_runs_page_shows_a_degraded_run_amber(db_url):
    store = Store(db_url)
    run_id = debate(store, judge=FAILING)
    at = AppTest.from_file(str(Path(PAGE).with_name("runs.py")), default_timeout=60)
    at.query_params["run"] = run_id
    at.run()
    assert not at.exception, at.exception
    assert any(plain(w.value).startswith("Completed, but degraded: it lost judge")
               for w in at.warning)
    assert not any(s.value.startswith("Completed") for s in at.success)
    # the facts are tiles, or text under captions when one is too long for a tile
    metrics = {plain(m.label): plain(m.value) for m in at.metric}
    shown = metrics.get("Status") or next(
        plain(m.value) for m in at.markdown if "completed" in plain(m.value))
    assert "Status" in metrics or "Status" in [plain(c.value) for c in at.caption]
    assert shown.strip("*") == "completed (degraded)"


def test_the_run_page_shows_a_degraded_run_amber_and_a_failed_one_red(db_url):
    store = Store(db_url)
    app = str(Path(PAGE).parent.parent / "app.py")
    for run_id, kind in ((debate(store, judge=FAILING), "warning"),
                         (debate(store, everyone=FAILING, judge=FAILING), "error")):
        at = AppTest.from_file(app, default_timeout=60)
        at.query_params["run"] = run_id
        at.run()
        at.switch_page("pages/run.py")
        at.query_params["run"] = run_id
        at.run()
        assert not at.exception, at.exception
        assert not at.success
        shown = [plain(e.value) for e in getattr(at, kind)]
        assert any("degraded: it lost judge" in v if kind == "warning"
                   else v.startswith("Failed: no model call succeeded") for v in shown), shown


def test_a_saved_result_is_assessed_as_a_run_is(store):
    judgeless = run_debate("Q?", proponent="simulated", opponent="simulated", judge=FAILING,
                           max_rounds=1, retries=0)
    dead = run_debate("Q?", proponent=FAILING, opponent=FAILING, judge=FAILING, max_rounds=1,
                      retries=0)
    flagged, failed = store.get(store.save(judgeless)), store.get(store.save(dead))
    assert flagged["status"] == "completed" and flagged["lost"] == "judge"
    assert failed["status"] == "failed" and failed["error"].startswith("no model call")
