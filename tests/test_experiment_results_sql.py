"""An experiment's results read through `Store.experiment_runs` (narrow, typed, configurations
grouped in SQL) give exactly what the pandas path over `Store.runs` gave, on SQLite and on
PostgreSQL, over a mixed experiment: failed, interrupted, superseded and running runs, a run
whose process is gone, unscored questions, simulated and real runs.

The reference functions below are the pandas path as it was before (commit ea19bbd), kept
here only to hold the new path to it.
"""
from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from urllib.parse import quote

import pandas as pd
import pytest
from sqlalchemy import update

from engine import Store
from engine import experiments as ex
from engine.analysis import normalize_stance, stats
from engine.bench.dashboard import REAL_MODEL
from engine.bench.results import make_experiment
from engine.cells import SUPERSEDED, Cell
from engine.models import now
from engine.reports import baseline
from engine.reports import experiments as results
from engine.store import experiment_reading, readback
from engine.store.experiment_reading import _picked
from engine.store.experiments import progress, row
from engine.store.schema import RunRow
from engine.views.aggregate import FEW, rate_text
from engine.views.blocks import simulated_text


def _signals(metrics: dict, expected: str | None) -> dict:
    """What one run's stored signals say, as `results._signal_columns` reads a column."""
    found = dict(metrics or {})
    return {name: values[0] for name, values in results._signal_columns(
        {key: [found.get(key)] for key in results.METRIC_KEYS}, [expected]).items()}


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
    store.insert_raw_chunks([(extra, [])])
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
            "unanswered": bool(run["unanswered"]),
            **_signals(run["metrics"], run["expected"]), "calls": run["calls"],
            "degraded": run["degraded"], "degraded_run": bool(run["degraded_run"]),
            "lost": run["lost"], "tokens": run["tokens_in"] + run["tokens_out"],
            "cost_usd": None if run["cost_usd"] is None or run["cost_usd"] != run["cost_usd"]
            else float(run["cost_usd"]),
            "seconds": run["duration"], "simulated": bool(simulation), "simulation": simulation,
            "created_at": run["created_at"],
            "link": f"{results.RUNS_PAGE}?run={quote(str(run['id']), safe='')}"})
    return pd.DataFrame(records, columns=results.RUN_COLUMNS)


def _reference_calibration(frame: pd.DataFrame, label: str, signal: str) -> dict:
    """A signal of one configuration against correctness over its counted runs that have
    both, straight from the statistics (the oracle the report's calibrations are held to)."""
    rows = frame[frame["counted"].astype(bool) & (frame["label"] == label)]
    rows = rows[rows["correct"].notna() & rows[signal].notna()]
    confidences = [float(v) for v in rows[signal]]
    outcomes = [bool(v) for v in rows["correct"]]
    return {"label": label, "signal": signal, "n": len(confidences),
            "bins": stats.reliability_bins(confidences, outcomes),
            "ece": stats.ece(confidences, outcomes), "brier": stats.brier(confidences, outcomes)}


def _reference_calibration_columns(frame: pd.DataFrame, label: str) -> dict[str, float]:
    out = {}
    for signal in results.SIGNALS:
        found = _reference_calibration(frame, label, signal)
        out[f"{signal}_ece"], out[f"{signal}_brier"] = found["ece"], found["brier"]
    return out


def _same(a: dict, b: dict) -> bool:
    """Equal, NaN equal to NaN."""
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (isinstance(a[k], float) and a[k] != a[k] and b[k] != b[k])
        for k in a)


def _reference_cell(rows: pd.DataFrame) -> dict:
    """One cell's repeats collapsed a data frame at a time (the oracle `_cells` is held to)."""
    answers = [a for a in rows["answer"].tolist() if isinstance(a, str) and a]
    canonical = [normalize_stance(a) for a in answers]
    counts = Counter(canonical)
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if counts else ""
    scored = rows[rows["correct"].notna()]
    right = int(scored["correct"].astype(bool).sum())
    return {"answer": top, "raw_answers": sorted(set(answers)), "runs": len(rows),
            "scored": len(scored), "right": right,
            "score": right / len(scored) if len(scored) else float("nan"),
            "stability": counts[top] / len(canonical) if canonical else float("nan"),
            "overturned": bool(rows["changed"].fillna(False).astype(bool).any()),
            "right_then_wrong": bool((rows["shift"] == "worse").any()),
            "run_ids": rows["id"].tolist()}


def _reference_cells(counted: pd.DataFrame) -> dict:
    return {(int(str(q)), str(label)): _reference_cell(rows)
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
        for config in configs:  # each signal's calibration as the statistics compute it
            got = report.summary.set_index("configuration").loc[config["label"]]
            alone = results.summary(frame[frame["label"] == config["label"]],
                                    {**spec, "configs": [config]})
            pd.testing.assert_frame_equal(
                report.summary[report.summary["configuration"] == config["label"]]
                .reset_index(drop=True), alone)
            want = _reference_calibration_columns(frame, config["label"])
            assert {k: got[k] for k in want} == pytest.approx(want, nan_ok=True)
        calibrations = [_reference_calibration(frame, c["label"], s) for s in results.SIGNALS
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


# ---------------------------------------------------------------- the report, run by run
def _present(values) -> list[float]:
    return [float(v) for v in values if v is not None and v == v]


def _reference_summary(frame: pd.DataFrame, spec: dict) -> pd.DataFrame:
    """The summary added up run by run over the runs frame's records, as its docstring says."""
    nan = float("nan")
    records = frame.to_dict("records")
    rows = []
    for config in spec["configs"]:
        mine = [r for r in records if r["label"] == config["label"]]
        done = [r for r in mine if r["counted"]]
        scored = [r for r in done if r["correct"] is not None and r["correct"] == r["correct"]]
        right = sum(bool(r["correct"]) for r in scored)
        low, high = stats.wilson_interval(right, len(scored)) if scored else (nan, nan)
        finished = {(r["q"], r["repeat"]) for r in done}
        unfinished = {status: len({(r["q"], r["repeat"]) for r in mine if r["status"] == status
                                   and not r["superseded"]} - finished)
                      for status in ("failed", "interrupted")}
        calibrated = {}
        for signal in results.SIGNALS:
            pairs = [(float(r[signal]), bool(r["correct"])) for r in scored
                     if r[signal] == r[signal]]
            calibrated[f"{signal}_ece"] = stats.ece([c for c, _ in pairs],
                                                    [o for _, o in pairs])
            calibrated[f"{signal}_brier"] = stats.brier([c for c, _ in pairs],
                                                        [o for _, o in pairs])

        def total(name: str, runs: list = done) -> float:
            present = _present(r[name] for r in runs)
            return float(sum(present)) if present else nan

        def mean(name: str, runs: list = done) -> float:
            present = _present(r[name] for r in runs)
            return sum(present) / len(present) if present else nan
        costs = [r["cost_usd"] for r in done]
        kinds = sorted({r["simulation"] for r in mine})
        seats = total("seats")
        rows.append({
            "configuration": config["label"], "protocol": config.get("protocol", ""),
            "simulated": "; ".join(k or "real" for k in kinds) if len(kinds) > 1
            else "".join(kinds), "runs": len(done),
            "planned": len(spec["questions"]) * spec["repeats"], **unfinished,
            "degraded": sum(bool(r["degraded_run"]) for r in done), "scored": len(scored),
            "correct": right, "unanswered": sum(bool(r["unanswered"]) for r in scored),
            "accuracy": right / len(scored) if scored else nan,
            "accuracy_low": low, "accuracy_high": high,
            "accuracy [95% CI] n": rate_text(right, len(scored)), "few": len(scored) < FEW,
            **{level: sum(r["level"] == level for r in done)
               for level in ("high", "medium", "low")},
            **calibrated,
            "mind_change_rate": total("mind_changes") / seats if seats else nan,
            "persuaded": total("persuaded"), "misled": total("misled"),
            "answer_changed": sum(r["changed"] is True for r in done),
            "changed_better": sum(r["shift"] == "better" for r in done),
            "changed_worse": sum(r["shift"] == "worse" for r in done),
            "tokens_per_run": mean("tokens"),
            "cost_per_run": nan if not costs or any(c is None or c != c for c in costs)
            else sum(costs) / len(costs),
            "seconds_per_run": mean("seconds"), "calls_per_run": mean("calls")})
    return pd.DataFrame(rows, columns=results.SUMMARY_COLUMNS)


def _reference_questions(frame: pd.DataFrame, spec: dict) -> dict[str, list[str]]:
    out = {}
    for config in spec["configs"]:
        cells = []
        for q in range(len(spec["questions"])):
            done = [r for r in frame.to_dict("records") if r["counted"]
                    and r["label"] == config["label"] and r["q"] == q]
            scored = [r for r in done if r["correct"] is not None and r["correct"] == r["correct"]]
            right = sum(bool(r["correct"]) for r in scored)
            silent = sum(bool(r["unanswered"]) for r in scored)
            cells.append(f"{right}/{len(scored)} right" + (f", {silent} unanswered" if silent
                                                            else "") if scored else
                         f"{len(done)} run{'s' * (len(done) != 1)}")
        out[config["label"]] = cells
    return out


def _reference_progress(store: Store, experiment_id: str) -> tuple:
    """What `progress` counts, from every run as `Store.runs` reads it."""
    runs = store.runs(experiment_id=experiment_id).sort_values(["created_at", "id"])
    cells = [(Cell.from_tags(tags), status, SUPERSEDED in tags)
             for tags, status in zip(runs["tags"], runs["status"], strict=True)]
    cells = [c for c in cells if c[0] is not None]
    done = {cell for cell, status, _ in cells if status == "completed"}
    live = [(cell, status) for cell, status, old in cells if not old and cell not in done]
    return (len(done), sum(s == "failed" for _, s in live),
            sum(s == "interrupted" for _, s in live), sum(s == "running" for _, s, _ in cells))


def _varied(url: str) -> tuple[Store, str]:
    """`_mixed`, with answers that moved for the better and for the worse (the expected answer
    set to the final or to round one's), a run with an unknown cost and degraded runs."""
    store, experiment_id = _mixed(url)
    runs, _ = store.raw_rows()
    moved = [r for r in runs if r["status"] == "completed" and r["expected"] is not None
             and (m := json.loads(r["metrics"])).get("first_answer")
             and m.get("answer") and m["first_answer"] != m["answer"]]
    # at least three: one moved for the worse, one for the better, and one more, which also
    # has an unknown cost (the first two are degraded)
    assert len(moved) >= 3
    chosen = moved[:6]
    with store.engine.begin() as connection:
        for number, run in enumerate(chosen):
            metrics = json.loads(run["metrics"])
            changes = {"expected": metrics["answer" if number % 2 else "first_answer"],
                       "degraded_run": number < 2}
            if number == len(chosen) - 1:
                changes["cost_usd"] = None
            connection.execute(update(RunRow).where(RunRow.id == run["id"]).values(**changes))
    return store, experiment_id


def test_the_report_adds_up_as_a_run_by_run_count_does(url):
    """Every table of the report against a straightforward count over the runs frame (itself
    held to the pandas path above): whatever makes the report faster keeps its figures."""
    store, experiment_id = _varied(url)
    every = _reference_runs_frame(store, experiment_id)
    for kind in ("real", "simulated", "both"):
        report = results.report(store, experiment_id, kind)
        frame, configs = results.split_configs(every, ex.get(store, experiment_id)["spec"][
            "configs"], kind)
        spec = {**report.experiment["spec"], "configs": configs}
        pd.testing.assert_frame_equal(report.runs, frame)
        pd.testing.assert_frame_equal(report.summary, _reference_summary(frame, spec))
        questions = _reference_questions(frame, spec)
        assert {label: report.questions[label].tolist() for label in questions} == questions
        assert report.questions["q"].tolist() == list(range(len(spec["questions"])))
        calibrations = []
        for signal in results.SIGNALS:
            for config in configs:
                done = frame[frame["counted"] & (frame["label"] == config["label"])]
                pairs = [(float(c), bool(o)) for c, o in zip(done[signal], done["correct"],
                                                              strict=True)
                         if c == c and o is not None and o == o]
                if pairs:
                    confidences, outcomes = [c for c, _ in pairs], [o for _, o in pairs]
                    calibrations.append({
                        "label": config["label"], "signal": signal, "n": len(pairs),
                        "bins": stats.reliability_bins(confidences, outcomes, 10),
                        "ece": stats.ece(confidences, outcomes, 10),
                        "brier": stats.brier(confidences, outcomes)})
        assert report.calibrations == calibrations
        state = report.progress
        assert (state.done, state.failed, state.interrupted, state.running) == \
            _reference_progress(store, experiment_id)
        assert report.hidden == len(every) - len(frame)
        if kind == "both":  # the fixture reaches what the counts count
            assert report.summary[["changed_better", "changed_worse", "degraded", "failed",
                                   "interrupted"]].to_numpy().sum(axis=0).all()
            assert report.summary["cost_per_run"].isna().any()
    state = progress(store, experiment_id)
    assert (state.done, state.failed, state.interrupted, state.running) == \
        _reference_progress(store, experiment_id)
    store.close()


VALID_ODDITIES = ['[1, 2]', '"text"', '5', 'null', '{"consensus": true, "level": 3}',
                  '{"consensus": 1e400, "seats": 12345678901234567890, "answer": "x\\u00e9"}',
                  '{"round_votes": [{"a": 1}, {"a": 2.50}], "round_answers": ["a", 1]}',
                  '{"judge_confidence": 0.5, "level": ""}']
INVALID = ['not json', '', '{"consensus": NaN, "level": "high"}', '{"a": Infinity}', '{"a": 1,}']


def _picked_as_decoded(store: Store, experiment_id: str) -> None:
    """`experiment_runs` with metrics keys gives each run's value of each key as Python's
    `json.loads` of its whole metrics gives it (None when missing or unreadable)."""
    whole = store.experiment_runs(experiment_id).set_index("id")["metrics"]
    picked = store.experiment_runs(experiment_id, results.METRIC_KEYS).set_index("id")
    assert "metrics" not in picked
    for key in results.METRIC_KEYS:
        for run_id, value in picked[f"metrics.{key}"].items():
            want = whole[run_id].get(key)
            assert json.dumps(value) == json.dumps(want) and type(value) is type(want), \
                (run_id, key, value, want)


def test_metrics_keys_picked_in_the_database_read_as_python_reads_them(url):
    store, experiment_id = _mixed(url)
    ids = store.experiment_runs(experiment_id)["id"].tolist()
    with store.engine.begin() as connection:
        for run_id, metrics in zip(ids, VALID_ODDITIES, strict=False):
            connection.execute(update(RunRow).where(RunRow.id == run_id).values(metrics=metrics))
    _picked_as_decoded(store, experiment_id)
    keys = list(results.METRIC_KEYS)  # SQLite picked them out itself (it fell back on none)
    assert not store._experiment_runs(experiment_id, keys, _picked(store.engine.dialect.name,
                                                                   keys)).empty
    with store.engine.begin() as connection:
        for run_id, metrics in zip(ids[len(VALID_ODDITIES):], INVALID, strict=False):
            connection.execute(update(RunRow).where(RunRow.id == run_id).values(metrics=metrics))
    _picked_as_decoded(store, experiment_id)  # text SQLite does not read: decoded in Python
    frame = results.runs_frame(store, experiment_id)
    pd.testing.assert_frame_equal(frame, _reference_runs_frame(store, experiment_id))
    store.close()


def test_cells_read_off_the_tags_text_as_decoding_them_reads_them():
    texts = ['["cell:1:2:3"]', '["cell:1:2:3", "superseded"]', '["superseded", "cell:0:0:0"]',
             '["cell:01:2:3"]', '["cell:1:2:3", "x"]', '["x", "cell:4:5:6"]', '[]', '',
             None, 'not json', '"cell:1:2:3"', '["cell:1:2:3","superseded"]', '[1, "cell:1:1:1"]',
             '["cell:1234567890:0:0"]', '["cell:١:2:3"]', '["cell:1:2:3"] ', 7,
             '["cell:999999999:999999999:999999999", "superseded"]']
    q, c, r, old = readback.tag_cells(texts)
    for i, text in enumerate(texts):
        tags = readback.decode_tags(text)
        cell = Cell.from_tags(tags)
        assert (q[i], c[i], r[i]) == ((cell.q, cell.c, cell.r) if cell else (-1, -1, -1)), text
        assert old[i] == (SUPERSEDED in tags), text


def test_a_label_that_ran_two_configurations_reads_each_run_with_its_own(url):
    """The read sends each label's configuration once; when a label ran two (a run stored with
    another configuration under the same label), each run is read with its own, grouped and
    joined in SQL, and says whether it was simulated by its own."""
    store, experiment_id = _mixed(url)
    runs, _ = store.raw_rows()
    run = next(r for r in runs if r["status"] == "completed" and not r["simulated"])
    other = '{"x": 1, ' + run["config"][1:].replace(f'"{REAL_MODEL}"', '"simulated"', 1)
    assert other != run["config"]
    with store.engine.begin() as connection:
        connection.execute(update(RunRow).where(RunRow.id == run["id"]).values(config=other))
        chosen = [RunRow.id, RunRow.simulated, RunRow.models]
        assert experiment_reading._by_label(connection, experiment_id, chosen) is None
    stored = store.experiment_runs(experiment_id)
    everything = store.runs(experiment_id=experiment_id)
    distinct = {(json.dumps(c, sort_keys=True), m, bool(s)) for c, m, s in zip(
        everything["config"], everything["models"], everything["simulated"], strict=True)}
    assert stored["setup"].nunique() == len(distinct)
    assert stored.set_index("id").loc[run["id"], "simulation"].startswith("mixed")
    pd.testing.assert_frame_equal(results.runs_frame(store, experiment_id),
                                  _reference_runs_frame(store, experiment_id))
    store.close()
