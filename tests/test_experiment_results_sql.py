"""An experiment's results read through `Store.experiment_runs` (narrow, typed, configurations
grouped in SQL) give exactly what the pandas path over `Store.runs` gave, on SQLite and on
PostgreSQL, over a mixed experiment: failed, interrupted, superseded and running runs, a run
whose process is gone, unscored questions, simulated and real runs.

The reference functions below are the pandas path as it was before (commit ea19bbd), kept
here only to hold the new path to it.
"""
from __future__ import annotations

import json
from datetime import timedelta
from urllib.parse import quote

import pandas as pd
import pytest

from engine import Store
from engine import experiments as ex
from engine.bench.results import make_experiment
from engine.cells import SUPERSEDED, Cell
from engine.models import now
from engine.reports import baseline
from engine.reports import experiments as results
from engine.store.experiments import progress, row
from engine.views.blocks import simulated_text


@pytest.fixture
def url(backend_url):
    return backend_url


def _mixed(url: str) -> tuple[Store, str]:
    """The bench's experiment, small: failed, interrupted and redone cells, every third
    question open (unscored), half the runs real; plus a run still going (another host, a
    fresh heartbeat) and one whose process is gone (another host, silent for an hour)."""
    experiment_id = make_experiment(url, n=150, seed=3, real=0.5, open_every=3)
    store = Store(url)
    runs, _ = store.raw_rows()
    template = next(r for r in runs if r["status"] == "completed")
    late = now() + timedelta(minutes=1)
    extra = []
    for number, (beat, cell) in enumerate([(late, Cell(1, 1, 9)), (late - timedelta(hours=1),
                                                                  Cell(2, 0, 9))]):
        extra.append({**template, "id": f"running{number}", "status": "running",
                      "result": "{}", "metrics": "{}", "correct": None, "host": "elsewhere",
                      "pid": 1, "tags": json.dumps([cell.tag]), "created_at": beat,
                      "heartbeat_at": beat, "finished_at": None})
    store.insert_raw(extra, [])
    return store, experiment_id


def _reference_runs_frame(store: Store, experiment_id: str) -> pd.DataFrame:
    spec = row(store, experiment_id)["spec"]
    labels = [c["label"] for c in spec["configs"]]
    frame = store.runs(experiment_id=experiment_id)
    records = []
    counted: set[Cell] = set()
    for run in frame.sort_values(["created_at", "id"]).to_dict("records"):
        cell = Cell.from_tags(run["tags"])
        if cell is None or cell.c >= len(labels):
            continue
        first = run["status"] == "completed" and cell not in counted
        if first:
            counted.add(cell)
        correct = run["correct"]
        simulation = simulated_text(run["simulated"], run["models"], run.get("config"))
        records.append({
            "id": run["id"], "label": labels[cell.c], "protocol": run["protocol"], "q": cell.q,
            "repeat": cell.r, "question": run["question"], "expected": run["expected"],
            "status": run["status"], "counted": first, "superseded": SUPERSEDED in run["tags"],
            "correct": None if correct is None or correct != correct else bool(correct),
            **results._signals(run["metrics"], run["expected"]), "calls": run["calls"],
            "degraded": run["degraded"], "degraded_run": bool(run["degraded_run"]),
            "lost": run["lost"], "tokens": run["tokens_in"] + run["tokens_out"],
            "cost_usd": run["cost_usd"], "seconds": run["duration"], "simulated": bool(simulation), "simulation": simulation,
            "created_at": run["created_at"],
            "link": f"{results.RUNS_PAGE}?run={quote(str(run['id']), safe='')}"})
    return pd.DataFrame(records, columns=results.RUN_COLUMNS)


def _reference_calibration_columns(frame: pd.DataFrame, label: str) -> dict[str, float]:
    out = {}
    for signal in results.SIGNALS:
        found = results.calibration(frame, label, signal)
        out[f"{signal}_ece"], out[f"{signal}_brier"] = found["ece"], found["brier"]
    return out


def _same(a: dict, b: dict) -> bool:
    """Equal, NaN equal to NaN."""
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (isinstance(a[k], float) and a[k] != a[k] and b[k] != b[k])
        for k in a)


def _reference_cells(counted: pd.DataFrame) -> dict:
    return {(int(str(q)), str(label)): baseline._cell(rows)
            for (q, label), rows in counted.groupby(["q", "label"], sort=False)}


def test_the_sql_path_gives_what_the_pandas_path_gave(url):
    store, experiment_id = _mixed(url)
    old = _reference_runs_frame(store, experiment_id)
    new = results.runs_frame(store, experiment_id)
    pd.testing.assert_frame_equal(new, old)
    statuses = set(new["status"])
    assert {"completed", "failed", "interrupted", "running"} <= statuses
    assert new["superseded"].any() and new["simulated"].any() and not new["simulated"].all()
    assert new["correct"].isna().any() and new["correct"].notna().any()
    assert new.loc[new["id"] == "running1", "status"].item() == "interrupted"  # gone
    for kind in ("real", "simulated", "both"):
        report = results.report(store, experiment_id, kind)
        frame, configs = results.split_configs(old, ex.get(store, experiment_id)["spec"][
            "configs"], kind)
        pd.testing.assert_frame_equal(report.runs, frame)
        spec = report.experiment["spec"]
        assert [c["label"] for c in spec["configs"]] == [c["label"] for c in configs]
        for config in configs:  # each signal's calibration as `calibration` computes it
            got = report.summary.set_index("configuration").loc[config["label"]]
            alone = results.summary(frame[frame["label"] == config["label"]],
                                    {**spec, "configs": [config]})
            pd.testing.assert_frame_equal(
                report.summary[report.summary["configuration"] == config["label"]]
                .reset_index(drop=True), alone)
            want = _reference_calibration_columns(frame, config["label"])
            assert {k: got[k] for k in want} == pytest.approx(want, nan_ok=True)
        calibrations = [results.calibration(frame, c["label"], s) for s in results.SIGNALS
                        for c in configs]
        assert report.calibrations == [c for c in calibrations if c["n"]]
        pd.testing.assert_frame_equal(report.questions, results.question_table(frame, spec))
        assert report.progress == progress(store, experiment_id)
        counted = frame[frame["counted"].astype(bool)]
        cells, want = baseline._cells(counted), _reference_cells(counted)
        assert cells.keys() == want.keys()
        assert all(_same(cells[key], want[key]) for key in want)
        for show in baseline.FILTERS:
            for order in ("question", "regressions"):
                table = baseline.baseline_matrix(report.runs, spec, configs[-1]["label"],
                                                 show, order)
                assert len(table) <= len(spec["questions"]) * (len(configs) - 1)
    store.close()


def test_an_experiment_with_no_runs_reads_empty(url):
    store = Store(url)
    experiment_id = ex.create(store, {"questions": ["Is it?"], "configs": [
        {"protocol": "vote", "label": "v"}]})
    assert store.experiment_runs(experiment_id).empty
    frame = results.runs_frame(store, experiment_id)
    assert frame.empty and list(frame.columns) == results.RUN_COLUMNS
    report = results.report(store, experiment_id)
    assert report.runs.empty and report.summary["runs"].tolist() == [0]
    store.close()


def test_a_configuration_is_sent_once_per_distinct_one(url):
    store, experiment_id = _mixed(url)
    stored = store.experiment_runs(experiment_id)
    everything = store.runs(experiment_id=experiment_id)
    distinct = {(json.dumps(c, sort_keys=True), m, bool(s)) for c, m, s in zip(
        everything["config"], everything["models"], everything["simulated"], strict=True)}
    assert stored["setup"].nunique() == len(distinct) < len(stored)
    assert "config" not in stored  # the runs frame never needed it per run
    store.close()
