"""Experiments: preflight, resume without redoing finished runs, results, CLI."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
from waiting import wait_for

from engine import Store
from engine import experiments as ex
from engine.cli.main import main
from engine.models import ConfigError
from engine.questions import DEFINITE
from engine.reports.experiments import drill

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = [{"question": q.text, "expected": q.expected} for q in DEFINITE[:4]]


def completed_per_cell(store: Store, experiment_id: str) -> Counter:
    runs = store.runs(experiment_id=experiment_id)
    done = runs[runs["status"] == "completed"]
    return Counter(ex.Cell.from_tags(tags) for tags in done["tags"])


# --------------------------------------------------------------------------- preflight
@pytest.mark.parametrize("config", [
    {"protocol": "debate", "label": "debate-2", "options": {"max_rounds": 2}},
    {"protocol": "panel", "label": "panel"},
    {"protocol": "vote", "label": "vote"},
])
def test_preflight_equals_the_calls_made_on_the_simulated_model(store, config):
    plan = ex.plan({"questions": QUESTIONS, "configs": [config], "repeats": 2,
                    "concurrency": 3}, store)
    assert plan.runs == len(QUESTIONS) * 2
    assert plan.tokens > 0
    experiment_id = ex.create(store, plan)
    state = ex.run_experiment(store, experiment_id)
    assert state.status == "completed" and state.done == plan.runs
    runs = store.runs(experiment_id=experiment_id)
    turns = store.turns(list(runs["id"]))
    assert int(runs["calls"].sum()) == plan.calls
    assert int(turns["attempts"].sum()) == plan.calls  # one model call per turn, no retries
    assert (runs["experiment_id"] == experiment_id).all()


def test_plan_rejects_bad_specs_before_anything_runs(store, monkeypatch):
    good = {"protocol": "vote", "label": "v"}
    cases = [
        ({"questions": "demo", "configs": [good, dict(good)]}, "labelled 'v'"),
        ({"questions": "demo", "configs": [{"protocol": "nope"}]}, "unknown protocol"),
        ({"questions": "demo", "configs": [good], "repeats": 0}, "repeats must be 1..100"),
        ({"questions": "demo", "configs": [good], "concurrency": True}, "whole number"),
        ({"questions": "demo", "questions_file": "x.csv", "configs": [good]}, "exactly one"),
        ({"questions": "nope", "configs": [good]}, "no bundled question set"),
        ({"questions": "demo", "configs": []}, "list of configurations"),
        ({"questions": "demo", "configs": ["not saved"]}, "no saved configuration"),
        ({"questions": "demo", "configs": [good], "extra": 1}, "no key 'extra'"),
        ({"questions": ["fine?", ""], "configs": [good]}, "item 2: empty question"),
    ]
    for spec, needle in cases:
        with pytest.raises(ConfigError, match=needle):
            ex.plan(spec, store)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="configuration 'gpt'.*OPENAI_API_KEY"):
        ex.plan({"questions": "demo", "configs": [
            {"protocol": "vote", "label": "gpt", "model": "openai:gpt-4o-mini"}]}, store)
    assert ex.list_experiments(store).empty


def test_saved_configurations_by_label_and_question_files(store, tmp_path):
    from engine.services.library import save_config
    save_config(store, {"protocol": "vote", "label": "saved vote"})
    (tmp_path / "qs.csv").write_text("question,expected\nWhat is 2 + 3?,5\nOpen?,\n",
                                     encoding="utf-8")
    plan = ex.plan({"questions_file": "qs.csv", "configs": ["saved vote"]}, store,
                   base_dir=tmp_path)
    assert plan.labels == ["saved vote"] and plan.source == "file:qs.csv"
    assert plan.questions == [{"question": "What is 2 + 3?", "expected": "5"},
                              {"question": "Open?", "expected": None}]
    (tmp_path / "bad.csv").write_text("question\nok\n\nx\x00y\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.csv: 1 bad row \(rows 4"):
        ex.plan({"questions_file": "bad.csv", "configs": ["saved vote"]}, store,
                base_dir=tmp_path)


# --------------------------------------------------------------------------- resume
def test_stop_after_k_runs_then_resume_finishes_exactly_the_missing_cells(store):
    spec = {"questions": QUESTIONS, "repeats": 2, "concurrency": 2, "configs": [
        {"protocol": "panel", "label": "panel", "model": "simulated?latency=0.01"},
        {"protocol": "debate", "label": "debate", "options": {"max_rounds": 1},
         "model": "simulated?latency=0.01"}]}
    experiment_id = ex.create(store, spec)
    total = len(QUESTIONS) * 2 * 2
    stop = threading.Event()

    def stop_after_three(state: ex.Progress) -> None:
        if state.done >= 3:
            stop.set()

    state = ex.run_experiment(store, experiment_id, stop_event=stop,
                              on_progress=stop_after_three)
    assert state.status == "stopped" and 3 <= state.done < total
    first = store.runs(experiment_id=experiment_id)
    done_before = set(first.loc[first["status"] == "completed", "id"])
    stale = set(first.loc[first["status"] == "interrupted", "id"])
    assert ex.get(store, experiment_id)["status"] == "stopped"
    missing = ex.pending_cells(store, experiment_id)
    assert len(missing) == total - len(done_before)

    state = ex.run_experiment(store, experiment_id)
    assert state.status == "completed" and state.done == total
    after = store.runs(experiment_id=experiment_id)
    per_cell = completed_per_cell(store, experiment_id)
    assert len(per_cell) == total and set(per_cell.values()) == {1}
    new = after[~after["id"].isin(first["id"])]
    assert len(new) == len(missing)  # exactly the missing cells ran again, nothing else
    assert set(after.loc[after["status"] == "completed", "id"]) >= done_before
    for _, run in after[after["id"].isin(stale)].iterrows():  # kept, and marked
        assert run["status"] == "interrupted" and ex.SUPERSEDED in run["tags"]
    assert ex.pending_cells(store, experiment_id) == []


def test_resume_after_a_crash(tmp_path):
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(json.dumps({
        "questions": QUESTIONS, "repeats": 3, "concurrency": 2,  # >= 4.8 s if not killed
        "configs": [{"protocol": "panel", "label": "slow",
                     "model": "simulated?latency=0.2"}]}), encoding="utf-8")
    child = subprocess.Popen([sys.executable, "-m", "engine", "experiment", "run",
                              str(spec_path), "--db", url, "--quiet"], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = Store(url)
    try:
        def two_done() -> bool:
            listed = ex.list_experiments(store)
            return not listed.empty and int(listed["done"].iloc[0]) >= 2
        wait_for(two_done)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    experiment_id = ex.list_experiments(store)["id"].iloc[0]
    assert ex.get(store, experiment_id)["status"] == "interrupted"  # its process is gone
    state = ex.run_experiment(store, experiment_id)
    assert state.status == "completed"
    per_cell = completed_per_cell(store, experiment_id)
    assert len(per_cell) == len(QUESTIONS) * 3 and set(per_cell.values()) == {1}
    runs = store.runs(experiment_id=experiment_id)
    assert "running" not in set(runs["status"])  # the dead process's runs were reaped


def test_runs_overlap_in_one_event_loop(store):
    experiment_id = ex.create(store, {"questions": QUESTIONS, "repeats": 2, "concurrency": 4,
                                      "configs": [{"protocol": "vote", "label": "v",
                                                   "model": "simulated?latency=0.05"}]})
    ex.run_experiment(store, experiment_id)
    runs = store.runs(experiment_id=experiment_id)
    spans = sorted(zip(runs["created_at"], runs["finished_at"]))
    most = max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)
    assert most >= 2  # runs were in flight together, not one after another
    turns = store.turns(list(runs["id"]))
    assert len(turns) == int(runs["calls"].sum())  # the batched writes lost nothing
    assert turns["parsed"].map(bool).all()  # updates to buffered turns were kept


# --------------------------------------------------------------------------- results
@pytest.fixture
def finished(store):
    experiment_id = ex.create(store, {"questions": QUESTIONS, "repeats": 1, "concurrency": 4,
                                      "configs": [{"protocol": "panel", "label": "panel"},
                                                  {"protocol": "vote", "label": "vote"},
                                                  {"protocol": "debate", "label": "debate",
                                                   "options": {"max_rounds": 1}}]})
    ex.run_experiment(store, experiment_id)
    return store, experiment_id


def test_report_per_configuration(finished):
    store, experiment_id = finished
    result = ex.report(store, experiment_id)
    table = result.summary.set_index("configuration")
    assert list(table.index) == ["panel", "vote", "debate"]
    assert (table["runs"] == len(QUESTIONS)).all()
    for label in ("panel", "vote"):
        row = table.loc[label]
        assert row["scored"] == len(QUESTIONS)
        assert row["accuracy_low"] <= row["accuracy"] <= row["accuracy_high"]
        assert row["high"] + row["medium"] + row["low"] == len(QUESTIONS)
        assert 0 <= row["consensus_ece"] <= 1 and 0 <= row["consensus_brier"] <= 1
    panel = table.loc["panel"]
    assert panel["changed_better"] + panel["changed_worse"] <= panel["answer_changed"]
    assert 0 <= panel["mind_change_rate"] <= 1
    assert table.loc["panel", "calls_per_run"] == 8 and table.loc["vote", "calls_per_run"] == 3
    assert table.loc["debate", "scored"] == len(QUESTIONS)  # from the judge's ANSWER line
    signals = {(c["label"], c["signal"]) for c in result.calibrations}
    assert {("panel", "consensus"), ("vote", "consensus"), ("debate", "judge")} <= signals
    assert list(result.questions.columns) == ["q", "question", "expected", "panel", "vote",
                                              "debate"]
    cell = drill(result.runs, "vote", 0)
    assert len(cell) == 1 and cell["link"].iloc[0] == f"runs?run={cell['id'].iloc[0]}"
    csv = ex.to_csv(result.runs)
    assert csv.splitlines()[0].startswith("id,label,protocol,q,repeat")
    assert len(csv.strip().splitlines()) == 1 + 3 * len(QUESTIONS)
    figure = ex.reliability_figure(result.calibrations)
    assert figure.data[0].name == "perfect calibration" and len(figure.data) >= 3


def test_paired_comparison_sentence():
    import pandas as pd
    rows = []
    for q in range(12):  # a right on 10, b right on 1 of those and on q=11; q=10 both wrong
        rows.append({"label": "a", "q": q, "counted": True, "correct": q < 10})
        rows.append({"label": "b", "q": q, "counted": True, "correct": q in (0, 11)})
    pair = ex.compare(pd.DataFrame(rows), "a", "b")
    assert (pair["wins"], pair["losses"], pair["ties"]) == (9, 1, 2)
    assert pair["p_value"] == 0.021484375
    assert pair["sentence"] == (
        "On 12 questions, a was right more often than b on 9, less often on 1 and equally "
        "often on 2; an exact two-sided sign test on the 10 that differ gives p = 0.0215, so "
        "a split this uneven would be unlikely (p < 0.05) if the two were equally good.")
    none = ex.compare(pd.DataFrame(rows), "a", "c")
    assert none["questions"] == 0 and "cannot be compared" in none["sentence"]


# --------------------------------------------------------------------------- CLI
def test_cli_run_show_list_resume(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: cli check\nquestions: demo\nconfigs:\n"
                    "  - {label: p, protocol: panel}\n  - {label: v, protocol: vote}\n"
                    "concurrency: 4\n", encoding="utf-8")
    assert main(["experiment", "run", str(spec), "--db", url, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "8 runs, 44 calls" in out and ex.list_experiments(Store(url)).empty
    assert main(["experiment", "run", str(spec), "--db", url]) == 0
    captured = capsys.readouterr()
    assert "completed: 8 runs" in captured.out and "sign test" in captured.out
    assert "8/8 runs" in captured.err  # the progress line
    experiment_id = ex.list_experiments(Store(url))["id"].iloc[0]
    assert main(["experiment", "list", "--db", url]) == 0
    assert experiment_id in capsys.readouterr().out
    csv = tmp_path / "runs.csv"
    assert main(["experiment", "show", experiment_id, "--db", url, "--compare", "p", "v",
                 "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    assert out.count("sign test") == 1 and csv.read_text().startswith("id,label")
    assert main(["experiment", "resume", experiment_id, "--db", url, "--quiet"]) == 0
    assert "0 run(s) left" in capsys.readouterr().out


@pytest.mark.parametrize("argv, needle", [
    (["experiment", "show", "nope"], "no experiment 'nope'"),
    (["experiment", "resume", "nope"], "no experiment 'nope'"),
    (["experiment", "run", "missing.yaml"], "cannot read missing.yaml"),
])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, needle):
    assert main([*argv, "--db", f"sqlite:///{tmp_path / 'x.db'}"]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_a_batched_run_ends_in_the_transaction_that_writes_its_last_turns(store):
    """An experiment's run costs two commits: its start, and its end written together with
    the turns the batch still holds (one transaction, not a flush and then the end). Counted
    over runs one at a time, so that every run's turn is still queued when it ends; the
    experiment's own row (claimed, ended) takes a few commits more."""
    from sqlalchemy import event
    experiment_id = ex.create(store, {"questions": [q["question"] for q in QUESTIONS] * 3,
                                      "repeats": 1, "concurrency": 1,
                                      "configs": [{"protocol": "single", "label": "one",
                                                   "model": "simulated"}]})
    commits: list[object] = []

    def counted(connection) -> None:
        commits.append(connection)
    event.listen(store.engine, "commit", counted)
    try:
        state = ex.run_experiment(store, experiment_id)
    finally:
        event.remove(store.engine, "commit", counted)
    frame = store.runs(experiment_id=experiment_id)
    assert state.status == "completed" and len(frame) == len(QUESTIONS) * 3
    assert len(store.turns(list(frame["id"]))) == int(frame["calls"].sum())  # none lost
    assert len(commits) <= 2 * len(frame) + 8, f"{len(commits)} commits for {len(frame)} runs"


def test_one_process_runs_an_experiment_once_at_a_time(store):
    """Runners of one process claiming the same experiment at once: one holds it, the others
    are told it is already running (the row's claim is conditional, so a race has one
    winner), and once it has ended it may be claimed again."""
    from concurrent.futures import ThreadPoolExecutor

    from engine.store.experiments import claim, set_values
    experiment_id = ex.create(store, {"questions": QUESTIONS[:1],
                                      "configs": [{"protocol": "single", "model": "simulated"}]})
    barrier = threading.Barrier(4)

    def claiming(_: int) -> str:
        barrier.wait()
        try:
            claim(store, experiment_id)
        except ConfigError as exc:
            return str(exc)
        return "held"
    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(claiming, range(4)))
    assert outcomes.count("held") == 1, outcomes
    assert all("already running here" in o or "started elsewhere just now" in o
               for o in outcomes if o != "held"), outcomes
    with pytest.raises(ConfigError, match="already running here"):
        claim(store, experiment_id)
    set_values(store, experiment_id, status="stopped")
    claim(store, experiment_id)  # ended: claimed again
