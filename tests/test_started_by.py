"""Who started a run, for the runs no page starts (issue 31): an experiment records who started
it (`experiments.started_by`, migration 0017, both backends) and every run of it carries that
name, whether it runs in process or on a worker of the pool (which reads the name from the
experiment, not from its own process); the CLI records `cli:` and the operating-system user
(`engine.access.cli_user`). The names travel with the runs in exports and imports.

The pool's test needs PostgreSQL (PARLEY_TEST_PG_URL; skipped without it unless
PARLEY_REQUIRE_PG=1), with the `pg_url` fixture of tests/test_workers.py.
"""
from __future__ import annotations

import getpass
import json
import signal
import time

import pytest
from conftest import table_columns
from plugins.pool import _worker
from sqlalchemy import text

import engine.experiments as ex
from engine import Store
from engine.access import Actor, Role, cli_user
from engine.cli import main
from engine.models import ConfigError
from engine.services import jobs
from engine.services.tasks import TaskRunner
from engine.store.experiments import claim

ANN = Actor("ann@example.com", Role.ANALYST)
ADA = Actor("ada@example.com", Role.ADMIN)
SPEC = {"name": "who", "repeats": 2,
        "questions": [{"question": "What is 2 plus 2?", "expected": "4"},
                      {"question": "What is 3 plus 3?", "expected": "6"}],
        "configs": [{"protocol": "vote", "label": "vote", "model": "simulated"}]}


def starters(store: Store, experiment_id: str) -> list[str]:
    """Each run of the experiment's `started_by`, oldest first."""
    runs = store.runs(experiment_id=experiment_id, with_config=False)
    return list(runs.sort_values("created_at")["started_by"])


@pytest.fixture
def alice(monkeypatch):
    """The operating-system user is `alice`."""
    monkeypatch.setattr(getpass, "getuser", lambda: "alice")


# --------------------------------------------------------------------------- in process
def test_an_experiment_records_its_actor_on_its_row_and_every_run(store):
    tasks = TaskRunner(store)
    experiment_id = ex.create(store, SPEC, actor=ANN)
    assert ex.get(store, experiment_id)["started_by"] == ""  # planned, not started yet
    tasks.start_experiment(experiment_id, actor=ANN)
    assert tasks.wait(experiment_id) == "completed"
    assert ex.get(store, experiment_id)["started_by"] == "ann@example.com"
    assert starters(store, experiment_id) == ["ann@example.com"] * 4


def test_a_resume_by_someone_else_names_them_on_the_runs_it_makes(store):
    experiment_id = ex.create(store, SPEC)
    # Ann's start made one run only; the three cells left are Ada's resume's.
    cell = ex.Cell(0, 0, 0)
    first = store.start_run("vote", "What is 2 plus 2?", tags=[cell.tag],
                            experiment_id=experiment_id, started_by=ANN.user)
    store.end_run(first, "completed")
    tasks = TaskRunner(store)
    tasks.start_experiment(experiment_id, actor=ADA)
    assert tasks.wait(experiment_id) == "completed"
    assert ex.get(store, experiment_id)["started_by"] == "ada@example.com"
    assert starters(store, experiment_id) == ["ann@example.com"] + ["ada@example.com"] * 3


def test_an_experiment_started_without_a_name_records_none(store):
    experiment_id = ex.create(store, SPEC)
    ex.run_experiment(store, experiment_id)
    assert ex.get(store, experiment_id)["started_by"] == ""
    assert set(starters(store, experiment_id)) == {""}


def test_a_name_that_cannot_be_stored_is_refused_before_the_claim(store):
    experiment_id = ex.create(store, SPEC)
    for bad in ("x" * 201, 5):
        with pytest.raises(ConfigError, match="started_by"):
            claim(store, experiment_id, bad)  # type: ignore[arg-type]
    assert ex.get(store, experiment_id)["status"] == "planned"


def test_an_experiment_run_exported_and_imported_keeps_who_started_it(store, tmp_path):
    experiment_id = ex.create(store, SPEC)
    ex.run_experiment(store, experiment_id, started_by=ANN.user)
    ids = list(store.runs(experiment_id=experiment_id, with_config=False)["id"])
    lines = store.export_jsonl(ids).splitlines()
    assert {json.loads(line)["started_by"] for line in lines} == {"ann@example.com"}
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    imported = other.import_runs("\n".join(lines))
    assert set(other.runs(ids=imported, with_config=False)["started_by"]) == {
        "ann@example.com"}


# --------------------------------------------------------------------------- the CLI
def test_the_cli_user_is_prefixed_and_falls_back_to_cli(monkeypatch):
    assert cli_user("alice") == "cli:alice"
    assert cli_user("  ") == "cli"
    assert cli_user("a" * 300) == "cli:" + "a" * 100

    def no_user() -> str:
        raise OSError("No username set in the environment")
    monkeypatch.setattr(getpass, "getuser", no_user)
    assert cli_user() == "cli"
    monkeypatch.setattr(getpass, "getuser", lambda: "bob")
    assert cli_user() == "cli:bob"


def test_a_cli_run_records_the_cli_user(alice, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    assert main(["run", "vote", "Is the sky blue?", "--db", url]) == 0
    run_id = capsys.readouterr().out.split()[1].rstrip(":")
    assert Store(url).get(run_id)["started_by"] == "cli:alice"


def test_a_cli_experiment_and_its_resume_record_the_cli_user(alice, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps(SPEC), encoding="utf-8")
    assert main(["experiment", "run", str(spec), "--db", url, "--quiet"]) == 0
    store = Store(url)
    (experiment_id,) = ex.list_experiments(store)["id"]
    assert ex.get(store, experiment_id)["started_by"] == "cli:alice"
    assert starters(store, experiment_id) == ["cli:alice"] * 4
    store.delete(list(store.runs(experiment_id=experiment_id, with_config=False)["id"])[:1])
    assert main(["experiment", "resume", experiment_id, "--db", url, "--quiet"]) == 0
    assert starters(store, experiment_id) == ["cli:alice"] * 4
    assert list(ex.list_experiments(store)["started by"]) == ["cli:alice"]
    capsys.readouterr()
    assert main(["experiment", "show", experiment_id, "--db", url]) == 0
    assert "; started by cli:alice" in capsys.readouterr().out.splitlines()[0]


# --------------------------------------------------------------------------- migration 0017
def test_migration_0017_adds_started_by_to_older_experiments(backend):
    experiment_id = ex.create(backend, SPEC)
    with backend.engine.begin() as connection:  # as 0016 left it
        connection.execute(text("ALTER TABLE experiments DROP COLUMN started_by"))
        connection.execute(text("DELETE FROM schema_migrations "
                                "WHERE name = '0017_experiment_started_by'"))
    backend.engine.dispose()
    reopened = Store(backend.url)
    assert "started_by" in table_columns(reopened, "experiments")
    assert ex.get(reopened, experiment_id)["started_by"] == ""
    assert reopened.migrate() == []
    claim(reopened, experiment_id, ANN.user)
    assert ex.get(reopened, experiment_id)["started_by"] == "ann@example.com"


# --------------------------------------------------------------------------- the pool
def test_a_worker_gives_the_runs_the_experiments_starter_not_its_own(
        pg_url, tmp_path, alice):  # noqa: F811
    """The worker is a process of its own (whose CLI user would be `cli:...`): its runs
    carry the name the experiment was submitted with."""
    store = Store(pg_url)
    experiment_id = ex.create(store, SPEC, actor=ANN)
    assert jobs.submit(store, experiment_id, actor=ANN) == 4
    assert ex.get(store, experiment_id)["started_by"] == "ann@example.com"
    worker = _worker(pg_url, tmp_path / "worker.log")
    try:
        deadline = time.monotonic() + 90
        while ex.get(store, experiment_id)["status"] == "running":
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-3000:]
            time.sleep(0.2)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    assert ex.get(store, experiment_id)["status"] == "completed"
    assert starters(store, experiment_id) == ["ann@example.com"] * 4
