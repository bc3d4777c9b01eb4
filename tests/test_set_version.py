"""The version of an experiment's question set (`set_version`, DESIGN 2.14): 12 hex digits of
the sha256 of its questions and expected answers in order, stored with the experiment
(migration 0018 computes it for older ones, on both backends), shown by `experiment show`, the
page and the exports, and checked by a resume, which refuses a set that changed and names
each added, removed or edited question."""
from __future__ import annotations

import hashlib
import json

import pytest
from conftest import table_columns
from sqlalchemy import text

import engine.experiments as ex
from engine import Store
from engine.cli import main
from engine.models import ConfigError
from engine.reports import share
from engine.reports.experiments import report, to_csv
from engine.store.experiments import set_unchanged, set_values
from engine.store.versions import set_changes, set_version

QUESTIONS = [{"question": "What is 2 plus 2?", "expected": "4"},
             {"question": "What is 3 plus 3?", "expected": "6"},
             {"question": "What is 4 plus 4?", "expected": "8"}]
SPEC = {"name": "sums", "repeats": 2, "questions": QUESTIONS,
        "configs": [{"protocol": "vote", "label": "vote", "model": "simulated"}]}


def test_the_version_is_the_sha256_of_the_canonical_questions():
    canonical = json.dumps([[q["question"], q["expected"]] for q in QUESTIONS],
                           separators=(",", ":"), ensure_ascii=False)
    assert set_version(QUESTIONS) == hashlib.sha256(canonical.encode()).hexdigest()[:12]
    assert len(set_version(QUESTIONS)) == 12
    assert set_version(QUESTIONS) != set_version(QUESTIONS[::-1])  # order counts
    edited = [*QUESTIONS[:2], {**QUESTIONS[2], "expected": "9"}]
    assert set_version(edited) != set_version(QUESTIONS)
    # what a question carries beyond its text and expected answer is not the set's version
    assert set_version([{**q, "id": "x"} for q in QUESTIONS]) == set_version(QUESTIONS)


def test_set_changes_names_added_removed_and_edited_questions():
    before = dict(enumerate(QUESTIONS))
    after = [QUESTIONS[0], {"question": "What is 3 plus 4?", "expected": "7"}]
    lines = set_changes(before, after, 3)
    assert lines[0].startswith("question 2 edited: 'What is 3 plus 3?'")
    assert lines[1] == "question 3 removed: 'What is 4 plus 4?'"
    grown = [*QUESTIONS, {"question": "What is 5 plus 5?", "expected": "10"}]
    assert set_changes(before, grown, 3) == ["question 4 added: 'What is 5 plus 5?'"]
    assert set_changes(before, QUESTIONS, 3) == []


def test_an_experiment_stores_its_version_and_show_and_exports_give_it(store, tmp_path,
                                                                        capsys):
    experiment_id = ex.create(store, SPEC)
    assert ex.get(store, experiment_id)["set_version"] == set_version(QUESTIONS)
    ex.run_experiment(store, experiment_id)
    assert main(["experiment", "show", experiment_id, "--db", store.url,
                 "--csv", str(tmp_path / "runs.csv")]) == 0
    out = capsys.readouterr().out
    assert f"version {set_version(QUESTIONS)}" in out
    lines = (tmp_path / "runs.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0].endswith(",set_version")
    assert all(line.endswith("," + set_version(QUESTIONS)) for line in lines[1:])
    result = report(store, experiment_id)
    assert f"question set version {set_version(QUESTIONS)}" in share.experiment_html(result)
    assert to_csv(result.runs).splitlines()[0].endswith("link")  # no version: as before


@pytest.mark.parametrize("change, named", [
    (lambda qs: [*qs[:2], {"question": "What is 4 plus 5?", "expected": "9"}],
     "question 3 edited: 'What is 4 plus 4?' is now 'What is 4 plus 5?'"),
    (lambda qs: qs[:2], "question 3 removed"),
    (lambda qs: [*qs, {"question": "What is 5 plus 5?", "expected": "10"}],
     "question 4 added: 'What is 5 plus 5?'"),
    (lambda qs: [{**qs[0], "expected": "5"}, *qs[1:]],
     "question 1 edited: its expected answer '4' is now '5'")])
def test_a_resume_refuses_a_changed_set_naming_the_change(store, capsys, change, named):
    experiment_id = ex.create(store, SPEC)
    ex.run_experiment(store, experiment_id)
    runs = store.runs(experiment_id=experiment_id, with_config=False)
    # one cell left to run (a second repeat: every question was asked once)
    store.delete([i for i, tags in zip(runs["id"], runs["tags"]) if "cell:0:0:1" in tags])
    spec = ex.get(store, experiment_id)["spec"]
    set_values(store, experiment_id, spec=json.dumps({**spec, "questions": change(QUESTIONS)}))
    with pytest.raises(ConfigError, match="question set changed") as refused:
        set_unchanged(store, experiment_id)
    assert named in str(refused.value)
    assert main(["experiment", "resume", experiment_id, "--db", store.url, "--quiet"]) == 2
    assert named in capsys.readouterr().err
    assert len(store.runs(experiment_id=experiment_id, with_config=False)) == 5  # none ran


def test_a_resume_of_an_unchanged_set_runs(store):
    experiment_id = ex.create(store, SPEC)
    ex.run_experiment(store, experiment_id)
    store.delete(list(store.runs(experiment_id=experiment_id, with_config=False)["id"])[:1])
    set_unchanged(store, experiment_id)  # no error
    assert main(["experiment", "resume", experiment_id, "--db", store.url, "--quiet"]) == 0
    assert ex.get(store, experiment_id)["status"] == "completed"


def test_migration_0018_computes_the_version_of_older_experiments(backend):
    experiment_id = ex.create(backend, SPEC)
    with backend.engine.begin() as connection:  # as 0017 left it
        connection.execute(text("ALTER TABLE experiments DROP COLUMN set_version"))
        connection.execute(text("DROP TABLE approvals"))  # which 0022 also adds
        connection.execute(text("DELETE FROM schema_migrations "
                                "WHERE name = '0022_set_version'"))
    backend.engine.dispose()
    reopened = Store(backend.url)
    assert "set_version" in table_columns(reopened, "experiments")
    assert ex.get(reopened, experiment_id)["set_version"] == set_version(QUESTIONS)
    assert reopened.migrate() == []
