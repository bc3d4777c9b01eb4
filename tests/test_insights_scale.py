"""Issue 27: Insights added up where the runs are stored.

The page reads `Store.run_summary` (grouped counts and sums in SQL, on SQLite and PostgreSQL
alike) and typed columns, never one parsed row per run; a protocol's section and the boxes
read a systematic sample past `insights.SAMPLE` runs of a kind, and say so. These tests hold
the store's path to the frame path it replaces (`insights.report` over `load_runs`) on a store
that mixes protocols, labels, failed, interrupted, degraded, real and simulated runs.
"""
from __future__ import annotations

import json
from datetime import timedelta

import insights_frames as frames
import pandas as pd
import pytest
from conftest import applied_migrations
from sqlalchemy import text

from engine import Store
from engine.models import now
from engine.protocols import REGISTRY, arun_config, run_sync
from engine.reports import insights
from engine.reports import runs as history
from engine.store import RunFilters
from engine.store.migrations import SUMMARY_INDEXES

QUESTION, EXPECTED = "What is 2+2?", "4"


def _as_real(store: Store, run_id: str, new_id: str, label: str | None, number: int) -> None:
    """A copy of a stored run as a real model's run (as an import of one brings it), made
    `number` minutes before any other (no two runs share a time, so every order is one)."""
    doc = json.loads(store.export_run(run_id))
    doc.update(id=new_id, label=label, created_at=(now() - timedelta(minutes=number + 1))
               .isoformat(), simulated=False, simulated_seats="",
               models="openai:gpt-4o-mini",
               config={"protocol": doc["protocol"], "model": "openai:gpt-4o-mini",
                       "seats": {}})
    for turn in doc.get("turns", []):
        turn.update(model="openai:gpt-4o-mini", simulated=False)
    assert store.import_runs(json.dumps(doc)) == [new_id]


def mixed(store: Store) -> Store:
    """Every protocol on the simulated model, some calls failing, with and without a label;
    real copies of a few; a failed run; a run whose process died (shown interrupted)."""
    for seed in range(2):
        for protocol in REGISTRY:
            for label in ("cheap", None):
                config = {"protocol": protocol, "model": f"simulated?seed={seed}&fail=0.25"}
                try:
                    run_sync(arun_config(config, QUESTION, store=store, label=label,
                                         expected=EXPECTED if seed == 0 else None))
                except Exception:  # noqa: BLE001 - a failed run is a stored run too
                    pass
    stored = store.runs(with_config=False)
    for number, run_id in enumerate(stored["id"].iloc[:6]):
        _as_real(store, run_id, f"real{number}", "cheap" if number % 2 else None, number)
    dead = store.start_run("vote", QUESTION, config={"protocol": "vote", "seats": {}},
                           label="cheap")
    with store.engine.begin() as connection:  # its process is gone: another host, no beat
        connection.execute(text("UPDATE runs SET host = 'elsewhere', heartbeat_at = :t "
                                "WHERE id = :i"), {"t": now() - timedelta(hours=1), "i": dead})
    return store


def _same(old: list, new: list) -> None:
    assert [s.key for s in old] == [s.key for s in new]
    for a, b in zip(old, new):
        assert (a.title, a.note, a.metrics) == (b.title, b.note, b.metrics), a.key
        assert [c.title for c in a.charts] == [c.title for c in b.charts], a.key
        for ca, cb in zip(a.charts, b.charts):
            pd.testing.assert_frame_equal(ca.data.reset_index(drop=True),
                                          cb.data.reset_index(drop=True),
                                          check_dtype=False, check_like=True)
        if a.table is not None:
            pd.testing.assert_frame_equal(a.table.reset_index(drop=True),
                                          b.table.reset_index(drop=True), check_dtype=False)


@pytest.mark.parametrize("filters", [RunFilters(), RunFilters(protocol="panel"),
                                     RunFilters(label="cheap"), RunFilters(status="completed"),
                                     RunFilters(model="openai:gpt-4o-mini"),
                                     RunFilters(transcript="2+2")],
                         ids=["all", "panel", "label", "completed", "model", "transcript"])
def test_the_store_adds_up_what_the_frames_added_up(backend, filters):
    store = mixed(backend)
    for kind in ("real", "simulated", "both"):
        old = frames.report(frames.load_runs(store, filters),
                            frames.results_loader(store, filters), kind)
        new = insights.report_from_store(store, filters, kind)
        _same(old, new)
        assert all(not s.caption for s in new)  # every run read: no sample to speak of


def test_the_summary_counts_every_run_once_and_a_dead_running_run_as_interrupted(backend):
    store = mixed(backend)
    summary = insights.load_summary(store, RunFilters())
    runs = store.runs(with_config=False)
    assert int(summary["n"].sum()) == len(runs)
    by_status = summary.groupby("status")["n"].sum().to_dict()
    assert by_status == runs["status"].value_counts().to_dict()
    assert by_status.get("interrupted") == 1 and "running" not in by_status
    # The six real copies, and the dead run (no seat, so no simulated one).
    assert int(summary.loc[~summary["simulated"], "n"].sum()) == 7
    overview = dict(insights.overview_of(summary).metrics)
    assert overview["Runs"] == f"{len(runs):,}" and overview["Interrupted"] == "1"


def test_past_the_sample_size_a_section_says_it_was_drawn_from_a_sample(backend, monkeypatch):
    store = mixed(backend)
    monkeypatch.setattr(insights, "SAMPLE", 3)
    monkeypatch.setattr(insights, "SECTION_SAMPLE", 3)
    sections = {s.key: s for s in insights.report_from_store(
        store, RunFilters(), "simulated", ["overview", "panel", "accuracy", "cost"])}
    total = int(insights.load_summary(store, RunFilters())
                .query("simulated and protocol == 'panel'")["n"].sum())
    every = -(-total // 3)
    assert f"every {every}th in time order" in sections["panel"].caption
    assert f"of {total:,} runs" in sections["panel"].caption
    assert "sample" in sections["cost"].caption
    assert not sections["overview"].caption and not sections["accuracy"].caption
    # The overview still counts every run.
    every_run = store.runs(with_config=False)
    assert dict(sections["overview"].metrics)["Simulated"] == \
        f"{int(every_run['simulated'].astype(bool).sum()):,}"


def test_a_sample_is_every_kth_run_in_time_order(backend):
    store = mixed(backend)
    everyone = store.runs(with_config=False).sort_values(["created_at", "id"])
    picked = store.runs(every=3, with_config=False)
    assert sorted(picked["id"]) == sorted(everyone["id"].iloc[2::3])
    values = store.run_values(["id", "tokens_in"], every=3)
    assert sorted(values["id"]) == sorted(picked["id"])
    real = store.runs(simulated=False, with_config=False)
    assert set(real["id"]) - {f"real{n}" for n in range(6)} == set(
        store.runs(status="running")["id"])  # and the dead run, which has no seat


def test_run_values_reads_only_typed_columns(backend):
    with pytest.raises(ValueError, match="metrics"):
        backend.run_values(["id", "metrics"])


def test_an_import_that_hides_a_simulated_seat_is_still_simulated(backend):
    store = mixed(backend)
    vote = store.runs(protocol="vote", status="completed", simulated=True)["id"].iloc[0]
    doc = json.loads(store.export_run(str(vote)))
    doc.update(id="liar", simulated=False)  # its models and seats still say simulated
    store.import_runs(json.dumps(doc))
    assert store.get("liar")["simulated"] is True
    summary = insights.load_summary(store, RunFilters())
    assert "liar" not in set(store.runs(simulated=False)["id"])
    assert int(summary.loc[~summary["simulated"], "n"].sum()) == 7


def test_migration_0012_sets_the_flag_from_the_seats_and_adds_the_indexes(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    store = Store(url)
    run_sync(arun_config({"protocol": "vote", "model": "simulated"}, QUESTION, store=store))
    with store.engine.begin() as connection:  # as an older Parley could leave it
        connection.execute(text("UPDATE runs SET simulated = 0"))
        for index in SUMMARY_INDEXES:  # the indexes 0012 adds
            connection.execute(text(f"DROP INDEX {index}"))
        connection.execute(text("DELETE FROM schema_migrations "
                                "WHERE name = '0012_run_summary'"))
    store.engine.dispose()
    reopened = Store(url)
    assert "0012_run_summary" in applied_migrations(reopened)
    assert bool(reopened.runs()["simulated"].iloc[0]) is True
    with reopened.engine.connect() as connection:
        plan = connection.execute(text(
            "EXPLAIN QUERY PLAN SELECT protocol, label, status, count(*), sum(tokens_in) "
            "FROM runs GROUP BY protocol, label, status, degraded_run, simulated")).all()
    assert "COVERING INDEX ix_runs_summary" in " ".join(str(row) for row in plan)


def test_the_filters_offer_what_the_runs_hold_without_reading_them(backend):
    store = mixed(backend)
    run_sync(arun_config({"protocol": "vote", "model": "simulated"}, QUESTION, store=store,
                         tags=("nightly", "cell:0:0:0")))
    runs = store.runs(with_config=False)
    tags = {t for group in runs["tags"] for t in group if not t.startswith("cell:")}
    models = {m for joined in runs["models"] for m in joined.split(",") if m}
    choices = history.choices(store)
    assert set(choices["tag"]) == tags and "nightly" in tags
    assert set(choices["model"]) == models and "openai:gpt-4o-mini" in models
    with store.engine.connect() as connection:
        kept = {v for (v,) in connection.execute(text("SELECT value FROM run_facets"))}
    assert not any(v.startswith("cell:") for v in kept)  # one per run: never kept


def test_migration_0013_fills_the_facets_from_the_runs(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    store = Store(url)
    run_sync(arun_config({"protocol": "vote", "model": "simulated"}, QUESTION, store=store,
                         tags=("weekly",)))
    with store.engine.begin() as connection:  # as an older Parley left it: no such table
        connection.execute(text("DROP TABLE run_facets"))
        connection.execute(text("DELETE FROM schema_migrations "
                                "WHERE name = '0013_run_facets'"))
    store.engine.dispose()
    reopened = Store(url)
    assert "0013_run_facets" in applied_migrations(reopened)
    assert history.choices(reopened)["tag"] == ["weekly"]
    assert history.choices(reopened)["model"] == ["simulated"]


def test_the_runs_page_says_how_many_match_beyond_its_page(backend):
    store = mixed(backend)
    total = len(store.runs(with_config=False))
    page = history.history(store, RunFilters(), limit=5)
    assert page.more and len(page.table) == 5 and page.matching == total
    assert store.count_runs(protocol="panel") == len(store.runs(protocol="panel"))
    assert history.history(store, RunFilters(label="nothing-has-it")).matching == 0


def test_a_section_reads_its_runs_results_once_and_past_a_bound_a_sample(backend, monkeypatch):
    """A protocol's section asks for its runs' stored results more than once (the panel's
    persona chart and its flows): they are read once; past `RESULTS_SAMPLE` runs of a kind,
    every k-th of them, and the section's caption says so."""
    store = mixed(backend)
    reads: list[int] = []
    real = store.run_results

    def counted(ids, **kwargs):
        reads.append(len(ids))
        return real(ids, **kwargs)

    monkeypatch.setattr(store, "run_results", counted)
    whole = insights.report_from_store(store, RunFilters(), "simulated", ["panel"])[0]
    assert len(reads) == 1 and not whole.caption
    panels = reads[0]
    monkeypatch.setattr(insights, "RESULTS_SAMPLE", 1)
    reads.clear()
    thinned = insights.report_from_store(store, RunFilters(), "simulated", ["panel"])[0]
    assert reads == [1]
    assert f"a sample of 1 of these {panels:,} runs: every {panels}th" in thinned.caption
