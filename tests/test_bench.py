"""The benchmark table reads protocols from the registry; figures are reported, never asserted.
The dashboard fixture's shape is checked here at a small size, never its speed."""
from __future__ import annotations

import math
from datetime import timedelta

import pandas as pd
import pytest
from sqlalchemy import text

from engine.bench.dashboard import DAYS, REAL_MODEL, make_fixture, run_id, with_turns
from engine.bench.table import collect, command, format_table
from engine.cli import build_parser
from engine.protocols import REGISTRY, estimate
from engine.store import Store
from engine.store.signal_columns import SIGNAL_COLUMNS, signal_values
from engine.store.simulated import seat_models, simulation


def test_critical_path_rows_cover_every_protocol_whose_calls_overlap():
    rows = collect(quick=True, only=["critical-path"])
    overlapping = [name for name in REGISTRY
                   if estimate({"protocol": name})["waves"] < estimate({"protocol": name})["calls"]]
    assert overlapping, "some protocol in the registry runs calls at once"
    for name in overlapping:
        mine = [r for r in rows if r["name"].startswith(f"{name},") or
                r["name"].startswith(f"{name} ")]
        assert len(mine) == 3, name
        assert all(isinstance(r["value"], float) and math.isfinite(r["value"]) and r["value"] > 0
                   for r in mine)
    # A protocol that makes one call after another has nothing to overlap and no row.
    serial = [name for name in REGISTRY if name not in overlapping]
    assert not [r for r in rows if r["name"].split(",")[0].split(" ")[0] in serial]
    assert "critical path" in format_table(rows)


def test_waves_default_to_the_calls_when_a_protocol_declares_none():
    for spec in REGISTRY.values():
        cost = estimate({"protocol": spec.name})
        assert 1 <= cost["waves"] <= cost["calls"]
        if spec.estimate_waves is None:
            assert cost["waves"] == cost["calls"]


def test_a_small_fixture_has_its_runs_turns_on_the_first_only_and_real_and_simulated(tmp_path):
    n, turned = 300, 40
    reports: list[tuple[int, int]] = []
    assert make_fixture(f"sqlite:///{tmp_path / 'f.db'}", n, turn_runs=turned, chunk=100,
                        progress=lambda done, total: reports.append((done, total))) == turned
    assert reports == [(100, 300), (200, 300), (300, 300)]  # a line per chunk, once stored
    ids = [run_id(number) for number in range(n)]
    assert len(set(ids)) == n
    store = Store(f"sqlite:///{tmp_path / 'f.db'}")
    runs = store.runs()
    assert len(runs) == n and set(runs["id"]) == set(ids)
    with_turns = set(store.turns(list(ids))["run_id"])
    assert with_turns <= set(ids[:turned]) and len(with_turns) >= turned * 0.9
    counts = runs["status"].value_counts()
    assert counts.get("failed", 0) > 0 and counts.get("interrupted", 0) > 0
    assert counts.get("completed", 0) > n * 0.8 and "running" not in counts
    # Real and simulated runs both, each consistent: the flag, the models and every seat.
    kinds = {simulation(row.simulated, row.models, row.config)[0] for row in runs.itertuples()}
    assert kinds == {"all", ""}
    real = runs[~runs["simulated"].astype(bool)]
    assert 0 < len(real) < n and set(real["models"]) == {REAL_MODEL}
    assert all(model == REAL_MODEL for config in real["config"]
               for _, model in seat_models(config))
    turns = store.turns(list(real["id"]))
    assert set(turns["model"]) <= {REAL_MODEL} and not turns["simulated"].astype(bool).any()
    assert runs["label"].nunique() > 1 and runs["tags"].astype(str).nunique() > 1
    spread = runs["created_at"].max() - runs["created_at"].min()
    assert timedelta(days=30) < spread <= timedelta(days=DAYS)
    # The typed signals Insights' three answers add up say what each run's metrics say
    # (none for a run that did not complete).
    with store.engine.connect() as connection:
        typed = {row[0]: dict(zip(SIGNAL_COLUMNS, row[1:], strict=True)) for row in
                 connection.execute(text(f"SELECT id, {', '.join(SIGNAL_COLUMNS)} FROM runs"))}
    for stored, metrics in zip(runs["id"], runs["metrics"], strict=True):
        want = signal_values(metrics)
        got = {**typed[stored], "tied": None if typed[stored]["tied"] is None
               else bool(typed[stored]["tied"])}  # SQLite keeps a boolean as 0 or 1
        assert got == pytest.approx(want), stored
    assert summary_has_signals(store)
    store.close()


def summary_has_signals(store: Store) -> bool:
    summary = store.answer_summary()
    return bool(summary["m_changes"].sum() and summary["t_runs"].sum()
                and summary["f_runs"].sum())


def test_the_dashboard_sizes_parse_and_reach_the_command_that_measures_again():
    parse = build_parser().parse_args
    assert parse(["bench", "--sizes", "10000,100000,1000000"]).sizes == (10_000, 100_000,
                                                                         1_000_000)
    assert parse(["bench", "--sizes", "300"]).sizes == (300,)
    assert parse(["bench"]).sizes is None  # the section's default: 10,000 (1,000 quick)
    for bad in ("", "ten", "10000,,5", "0", "-5", "100000000"):
        with pytest.raises(SystemExit) as exit_:
            parse(["bench", "--sizes", bad])
        assert exit_.value.code == 2
    assert command("dashboard", sizes=(10_000, 100_000)) == (
        "python -m engine bench --only dashboard --sizes 10000,100000")
    assert command("search", sizes=(10_000,)) == "python -m engine bench --only search"


def test_a_peer_not_installed_is_named_as_skipped_with_how_to_install_it(monkeypatch, tmp_path):
    """`--only peers` measures each peer found on PATH; one that is not gets rows saying so
    and the command that installs it, never a figure, and no ratio to it."""
    from contextlib import contextmanager

    from engine.bench import peers

    @contextmanager
    def server(latency):
        yield "http://127.0.0.1:9/v1", 0

    monkeypatch.setattr(peers, "serving", server)
    monkeypatch.setattr(peers, "SIDES", {**peers.SIDES, "Parley": lambda *a: peers.Outcome(
        2.0, 100.0, 4, 0), "promptfoo": lambda *a: peers.Outcome(4.0, 80.0, 4, 0)})
    monkeypatch.setattr(peers, "COMMANDS", {"Inspect": "no-such-inspect-here",
                                            "promptfoo": "sh"})
    rows = {row["name"].split(": ", 1)[1]: row for row in peers.rows_at(0.0, 4, 2)}
    for name in ("Inspect, whole process", "Inspect, peak RSS", "Parley / Inspect, whole process"):
        assert math.isnan(rows[name]["value"]) and "pip install inspect-ai" in rows[name]["note"]
    assert rows["Parley / promptfoo, whole process"]["value"] == 0.5
    assert rows["promptfoo, whole process"]["note"] == "4 answered, 0 failed"
    assert "Parley - Inspect, peak RSS" not in rows
    from engine.bench import table  # the peers run only when --only names them
    assert not table._chosen("peers", None) and table._chosen("peers", ["peers"])


def test_a_child_process_peak_memory_is_its_own_not_the_bench_process():
    """`ru_maxrss` of a child starts at its parent's peak (the fork keeps it): a bench
    process holding 300 MB would report every side it starts at 300 MB or more."""
    import sys
    import tempfile
    from pathlib import Path

    from engine.bench.peers import timed
    from engine.bench.serving import high_water_mb
    held = bytearray(300 * 2**20)
    held[::4096] = b"1" * len(held[::4096])  # touched, so resident
    child = [sys.executable, "-c", "import time; time.sleep(0.2)"]  # a bare interpreter
    with tempfile.TemporaryDirectory() as folder:
        _, peak = timed(child, Path(folder))
    assert 0 < peak < 150  # tens of MB, not the 300 MB held here
    assert high_water_mb() > 300  # this process's own peak counts what it holds
    assert len(held) == 300 * 2**20


class _OneRun:
    """A store whose one completed run of the protocol is the fixture's first."""

    def runs(self, **_: object) -> pd.DataFrame:
        return pd.DataFrame({"id": [run_id(0)]})


def test_the_browser_bench_always_has_two_different_runs_to_open() -> None:
    detail, other = with_turns(_OneRun(), 10, "debate")[:2]  # type: ignore[arg-type]
    assert (detail, other) == (run_id(0), run_id(1))
