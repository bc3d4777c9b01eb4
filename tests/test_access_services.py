"""Roles enforced where the work is done (DESIGN section 5): every service that starts, stops,
deletes, imports or edits the library refuses a role that may not (`NotAllowed`) and changes
nothing; a run records who started it (`started_by`, migration 0016, both backends, exported
and imported); the pages pass the signed-in actor to every such service (read from their
source); and with `[auth]` in the secrets a page shows a stranger only the sign-in and a
viewer no control it cannot use (AppTest)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from conftest import table_columns
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.access import LOCAL, Actor, NotAllowed, Role
from engine.services import demo, jobs, library
from engine.services.tasks import TaskRunner
from engine.store import migrations

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
RUN = {"protocol": "vote", "model": "simulated"}
VIEWER = Actor("vera@example.com", Role.VIEWER)
ANALYST = Actor("ann@example.com", Role.ANALYST)
ADMIN = Actor("ada@example.com", Role.ADMIN)
NOBODY = Actor("nemo@else.net", None)
EXPERIMENT = {"name": "e", "questions": [{"question": "2+2?", "expected": "4"}],
              "configs": [{**RUN, "label": "v"}], "repeats": 1}
PERSONA = {"name": "Blunt", "prompt": "Say it plainly."}
YAML = "personas:\n  - name: Terse\n    prompt: Few words.\n"


def counts(store: Store) -> tuple[int, int, int]:
    return (len(store.runs(with_config=False)), len(store.library("persona")),
            len(ex.list_experiments(store)))


def test_a_viewer_or_no_role_is_refused_by_every_service_and_nothing_changes(store):
    tasks = TaskRunner(store)
    kept = tasks.start_run(RUN, "Kept?")
    assert tasks.wait(kept) == "completed"
    planned = ex.create(store, EXPERIMENT)
    library.ensure_seeded(store)
    entry = library.entries(store, "persona")[0]
    before = counts(store)
    attempts = {
        "start runs": [lambda a: tasks.start_run(RUN, "Q?", actor=a),
                       lambda a: tasks.start_rerun(store.get(kept), actor=a),
                       lambda a: tasks.start_demo(actor=a)],
        "stop runs": [lambda a: tasks.stop(kept, actor=a)],
        "run experiments": [lambda a: ex.create(store, EXPERIMENT, actor=a),
                            lambda a: tasks.start_experiment(planned, actor=a),
                            lambda a: jobs.submit(store, planned, actor=a),
                            lambda a: jobs.stop(store, planned, actor=a)],
        "delete runs": [lambda a: tasks.delete([kept], actor=a),
                        lambda a: demo.remove_demo(store, actor=a)],
        "import": [lambda a: library.import_yaml(store, YAML, actor=a)],
        "edit the library": [
            lambda a: library.save_entry(store, "persona", PERSONA, actor=a),
            lambda a: library.duplicate_entry(store, "persona", entry["id"], actor=a),
            lambda a: library.delete_entry(store, entry["id"], actor=a),
            lambda a: library.restore_builtins(store, "persona", actor=a),
            lambda a: library.save_config(store, RUN, "saved", actor=a)],
    }
    refused = 0
    for action, calls in attempts.items():
        for call in calls:
            for who in (VIEWER, NOBODY) + ((ANALYST,) if action in (
                    "delete runs", "import", "edit the library") else ()):
                with pytest.raises(NotAllowed, match=f"may not {action}"):
                    call(who)
                refused += 1
    assert refused == 40  # 8 analyst actions x 2 roles + 8 admin actions x 3
    assert counts(store) == before
    assert store.get(kept)["status"] == "completed"
    assert ex.get(store, planned)["status"] == "planned"


def test_an_analyst_runs_and_stops_and_an_admin_deletes_each_recorded(store):
    tasks = TaskRunner(store)
    run_id = tasks.start_run(RUN, "Who ran me?", actor=ANALYST)
    assert tasks.wait(run_id) == "completed"
    rerun = tasks.start_rerun(store.get(run_id), actor=ADMIN)
    assert tasks.wait(rerun) == "completed"
    assert store.get(run_id)["started_by"] == "ann@example.com"
    assert store.get(rerun)["started_by"] == "ada@example.com"
    assert tasks.stop(run_id, actor=ANALYST) is False  # over already; allowed all the same
    experiment = ex.create(store, EXPERIMENT, actor=ANALYST)
    tasks.start_experiment(experiment, actor=ANALYST)
    assert tasks.wait(experiment) == "completed"
    library.import_yaml(store, YAML, actor=ADMIN)
    assert library.find(store, "persona", "Terse")
    assert tasks.delete([run_id], actor=ADMIN) == 1 and not store.exists(run_id)
    assert tasks.delete([rerun]) == 1  # LOCAL, the CLI's and the single local user's, is admin
    assert LOCAL.role is Role.ADMIN


def test_the_demo_records_who_started_it(store):
    tasks = TaskRunner(store)
    tasks.start_demo(actor=ANALYST)
    tasks.wait("demo")
    made = store.runs(tag="demo", with_config=False)
    assert len(made) > 0 and set(made["started_by"]) == {"ann@example.com"}


def test_started_by_is_stored_listed_exported_and_imported_on_both_backends(backend, tmp_path):
    run_id = backend.start_run("vote", "Q?", started_by="ann@example.com")
    backend.end_run(run_id, "completed")
    unknown = backend.start_run("vote", "Q2?")
    assert backend.get(run_id)["started_by"] == "ann@example.com"
    assert backend.get(unknown)["started_by"] == ""
    listed = backend.runs(with_config=False).set_index("id")["started_by"]
    assert listed[run_id] == "ann@example.com" and listed[unknown] == ""
    exported = backend.export_run(run_id)
    assert json.loads(exported)["started_by"] == "ann@example.com"
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    (imported,) = other.import_runs(exported)
    assert other.get(imported)["started_by"] == "ann@example.com"
    old = json.loads(exported)
    del old["started_by"]  # a file exported before sign-in
    (older,) = Store(f"sqlite:///{tmp_path / 'third.db'}").import_runs(json.dumps(old))
    assert older


def test_migration_0016_adds_started_by_to_an_older_database(backend):
    run_id = backend.start_run("vote", "Old?")
    with backend.engine.begin() as connection:  # as 0014 left it
        connection.execute(text("ALTER TABLE runs DROP COLUMN started_by"))
        connection.execute(text("DELETE FROM schema_migrations WHERE name = '0016_started_by'"))
    backend.engine.dispose()
    reopened = Store(backend.url)
    assert "started_by" in table_columns(reopened, "runs")
    assert reopened.get(run_id)["started_by"] == ""
    assert reopened.migrate() == []


def test_a_migration_numbered_below_one_applied_is_still_applied(store, monkeypatch):
    """0015 belongs to another branch: a database that ran 0016 first gets 0015 once it is
    listed (the runner applies every name it has not seen), and the list stays in name
    order."""
    names = [name for name, _ in migrations.MIGRATIONS]
    assert names == sorted(names) and len(set(names)) == len(names)
    applied = []
    late = ("0015_from_another_branch", lambda connection: applied.append(connection))
    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS[:-1], late,
                                                   migrations.MIGRATIONS[-1]])
    import engine.store.database as database
    monkeypatch.setattr(database, "MIGRATIONS", migrations.MIGRATIONS)
    assert store.migrate() == ["0015_from_another_branch"] and len(applied) == 1
    assert store.migrate() == []


# ------------------------------------------------------------------ the pages
GUARDED = {"start_run", "start_rerun", "start_experiment", "start_demo", "stop", "delete",
           "create", "submit", "remove_demo", "save_entry", "duplicate_entry", "delete_entry",
           "restore_builtins", "import_yaml", "save_config", "approve"}
STORE_WRITES = {"delete", "import_runs", "put_library", "delete_library", "start_run",
                "stop_run"}


def test_every_page_passes_the_signed_in_actor_to_the_services_that_change_things():
    """Read from the pages' source: a call of a guarded service without `actor=` would act as
    the local admin, and a direct store write would skip the check."""
    checked, missing = 0, []
    for path in [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Attribute,
                                                                            ast.Name)):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            owner = ast.unparse(node.func.value) if isinstance(node.func, ast.Attribute) \
                else ""
            if name in STORE_WRITES and "store" in owner.lower():
                missing.append(f"{path.name}:{node.lineno} {owner}.{name} writes the store")
            elif name in GUARDED and owner not in ("st", "st.session_state"):
                checked += 1
                if not any(k.arg == "actor" for k in node.keywords):
                    missing.append(f"{path.name}:{node.lineno} {owner}.{name} has no actor=")
    assert not missing, missing
    assert checked >= 20


SECRETS_AUTH = {"client_id": "parley", "client_secret": "s", "cookie_secret": "c" * 32,
                "redirect_uri": "http://127.0.0.1:8501/oauth2callback",
                "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration"}
ROLES = {"vera@example.com": "viewer", "ann@example.com": "analyst",
         "ada@example.com": "admin"}


def signed(email: str | None, page: str = "pages/run.py", script: str = APP) -> AppTest:
    """The app as `email` sees it (None: a stranger), on `page` (AppTest's switch_page runs
    the page's file on its own, so its own gate is tested too; "" stays on Home)."""
    at = AppTest.from_file(script, default_timeout=60)
    at.secrets["auth"] = SECRETS_AUTH
    at.secrets["parley"] = {"roles": ROLES}
    at.user["is_logged_in"] = email is not None
    if email is not None:
        at.user["email"] = email
    at.run()
    if email is not None and page:
        at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def texts(at: AppTest) -> str:
    return " ".join(str(e.value) for e in [*at.markdown, *at.caption, *at.title]
                    ).replace("\\", "").replace("\u2060", "")


def test_a_stranger_sees_only_the_sign_in(db_url):
    at = signed(None)
    assert [b.label for b in at.button] == ["Sign in"]
    assert [t.value for t in at.title] == ["Parley"]
    assert not at.sidebar.caption and not at.text_area and not at.selectbox
    for page in ("run", "runs", "personas", "experiments", "insights", "compare"):
        direct = signed(None, script=str(ROOT / "pages" / f"{page}.py"))  # a deep link's run
        assert [b.label for b in direct.button] == ["Sign in"], page
        assert [t.value for t in direct.title] == ["Parley"], page
    nobody = signed("nemo@else.net", page="")
    assert [t.value for t in nobody.title] == ["Not authorised"]
    assert [b.label for b in nobody.button] == ["Sign out"] and not nobody.selectbox


def test_a_viewers_run_page_disables_start_and_save_and_says_why(db_url):
    at = signed("vera@example.com")
    assert at.button(key="run-start").disabled and at.button(key="run-save").disabled
    shown = texts(at)
    assert "to start runs needs the analyst role" in shown
    assert "to edit the library needs the admin role" in shown
    home = signed("vera@example.com", page="")
    assert "vera@example.com · viewer" in " ".join(c.value for c in home.sidebar.caption
                                                   ).replace("\\", "").replace("\u2060", "")
    assert [b.label for b in home.sidebar.button] == ["Sign out"]
    assert home.button(key="demo_run").disabled  # the demo makes runs: analyst


def test_an_analyst_may_start_but_not_save_and_an_admin_both(db_url):
    analyst = signed("ann@example.com")
    analyst.text_area[0].input("Should we ship?").run()
    assert not analyst.button(key="run-start").disabled
    assert analyst.button(key="run-save").disabled
    admin = signed("ada@example.com")
    assert not admin.button(key="run-save").disabled


def test_only_an_admin_sees_delete_on_a_run(db_url):
    store = Store(db_url)
    run_id = store.start_run("vote", "Delete me?", started_by="ann@example.com")
    store.end_run(run_id, "completed")
    for email, deletable in (("vera@example.com", False), ("ann@example.com", False),
                             ("ada@example.com", True)):
        at = AppTest.from_file(APP, default_timeout=60)
        at.secrets["auth"] = SECRETS_AUTH
        at.secrets["parley"] = {"roles": ROLES}
        at.user["is_logged_in"] = True
        at.user["email"] = email
        at.query_params["run"] = run_id
        at.run()
        at.switch_page("pages/runs.py").run()
        assert not at.exception, at.exception
        labels = [b.label for b in at.button]
        assert ("🗑️ Delete run" in labels) is deletable, (email, labels)
        assert "started by ann@example.com" in texts(at)
