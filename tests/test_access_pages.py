"""Whose judgement counts, on the pages (AppTest; the browser's sign-in cases are in
tests/test_browser_auth.py): roles are read afresh at every click, so a role taken away or
lowered reaches a tab already open; sign-in settings without `[auth]` are refused on every
page, never served as an open admin app; an unverified address gets no role whatever the
spelling of its claim; and no settings value that looks like a credential reaches a page (the
endpoint table's `key_env`, the roles' and the endpoints' errors)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from apptest_helpers import everything
from streamlit.testing.v1 import AppTest

from engine import Store

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
PAGES = ("home", "run", "runs", "insights", "personas", "experiments", "compare", "review",
         "leaderboard")
AUTH = {"client_id": "parley", "client_secret": "s", "cookie_secret": "c" * 32,
        "redirect_uri": "http://127.0.0.1:8501/oauth2callback",
        "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration"}
ROLES = {"vera@example.com": "viewer", "ann@example.com": "analyst",
         "ada@example.com": "admin"}
PASTED = "sk-proj-PASTEDintoTheWrongField0123456789"


def texts(at: AppTest) -> str:
    return " ".join(str(e.value) for e in [*at.markdown, *at.caption, *at.title, *at.error]
                    ).replace("\\", "").replace("\u2060", "")


def signed_in(email: str, roles: dict, query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.secrets["auth"] = AUTH
    at.secrets["parley"] = {"roles": roles}
    at.user["is_logged_in"] = True
    at.user["email"] = email
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


# --------------------------------------------------------------------------- fresh roles
@pytest.mark.parametrize("now", [{**ROLES, "ada@example.com": "viewer"},
                                 {k: v for k, v in ROLES.items() if k != "ada@example.com"}],
                         ids=["lowered to viewer", "removed"])
def test_an_admin_whose_role_is_taken_away_cannot_confirm_a_delete_in_the_open_tab(db_url,
                                                                                  now):
    """The admin asked to delete, the operator changed the roles, the admin pressed Yes in
    the tab already open: the run used to be deleted (roles were read once per session)."""
    store = Store(db_url)
    run_id = store.start_run("vote", "Still here?", started_by="ann@example.com")
    store.end_run(run_id, "completed")
    at = signed_in("ada@example.com", ROLES, {"run": run_id})
    at.switch_page("pages/runs.py").run()
    at.button(key="runs_delete_ask").click().run()
    assert not at.exception, at.exception
    yes = at.button(key="runs_delete_yes")
    at.secrets["parley"] = {"roles": now}
    yes.click().run()
    assert not at.exception, at.exception
    assert store.exists(run_id)
    assert not [b for b in at.button if b.key == "runs_delete_yes"]
    shown = texts(at)
    if "ada@example.com" in now:
        assert "Signed in as ada@example.com (viewer): to delete runs needs the admin " \
            "role" in shown
    else:
        assert [t.value for t in at.title] == ["Not authorised"]


def test_a_lowered_role_takes_effect_at_the_next_click_and_a_raised_one_too(db_url):
    """Home's demo button (analyst and up) follows the roles as they are now, run by run."""
    at = signed_in("ada@example.com", ROLES)
    assert not at.button(key="demo_run").disabled
    for role, disabled in (("viewer", True), ("analyst", False), ("viewer", True)):
        at.secrets["parley"] = {"roles": {**ROLES, "ada@example.com": role}}
        at.run()
        assert not at.exception, at.exception
        assert at.button(key="demo_run").disabled is disabled, role
    at.secrets["parley"] = {"roles": {"vera@example.com": "viewer"}}
    at.run()
    assert [t.value for t in at.title] == ["Not authorised"]


# --------------------------------------------------------------------------- no [auth]
@pytest.mark.parametrize("secrets, words", [
    ({"parley": {"roles": {"ada@example.com": "admin"}}}, "no [auth] section"),
    ({"Auth": AUTH, "parley": {"roles": {"ada@example.com": "admin"}}},
     "[Auth] section, not [auth]"),
], ids=["roles without auth", "auth misspelt"])
def test_sign_in_settings_without_auth_are_refused_on_every_page(db_url, secrets, words):
    """A roles table without [auth] used to serve everyone as the local admin."""
    store = Store(db_url)
    run_id = store.start_run("vote", "A secret question?", started_by="local")
    store.end_run(run_id, "completed")
    for page in PAGES:
        script = APP if page == "home" else str(ROOT / "pages" / f"{page}.py")
        at = AppTest.from_file(script, default_timeout=60)
        for name, value in secrets.items():
            at.secrets[name] = value
        at.run()
        assert not at.exception, (page, at.exception)
        assert [t.value for t in at.title] == ["Parley"], page
        assert words in texts(at), page
        assert not at.button and not at.text_area and not at.selectbox, page
        assert "A secret question" not in everything(at), page
        assert not at.sidebar.caption, page


# --------------------------------------------------------------------------- unverified
@pytest.mark.parametrize("claim", ["false", "False", 0, "0", False])
def test_an_unverified_address_is_not_authorised_whatever_the_spelling(db_url, claim):
    at = AppTest.from_file(APP, default_timeout=60)
    at.secrets["auth"] = AUTH
    at.secrets["parley"] = {"roles": ROLES}
    at.user["is_logged_in"] = True
    at.user["email"] = "ada@example.com"
    at.user["email_verified"] = claim
    at.user["sub"] = "mallory"
    at.run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Not authorised"]
    assert "admin" not in " ".join(c.value for c in at.sidebar.caption)


# --------------------------------------------------------------------------- no key shown
def test_a_key_pasted_into_key_env_never_reaches_home(db_url, monkeypatch):
    monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps({
        "lab": {"base_url": "http://127.0.0.1:9/v1", "key_env": PASTED},
        "home": {"base_url": "http://127.0.0.1:8/v1", "key_env": "HOME_API_KEY"}}))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, at.exception
    shown = everything(at)
    assert "HOME_API_KEY" in shown and "127.0.0.1:9" in shown  # the table was drawn
    assert PASTED not in shown and "PASTEDintoTheWrongField" not in shown
    table = at.dataframe[1].value.set_index("Name")
    assert "hidden" in table.loc["lab", "Key (where it lives)"]


@pytest.mark.parametrize("secrets", [
    {"parley": {"roles": {"ada@example.com": PASTED}}, "auth": AUTH},
    {"parley": {"roles": {PASTED: "admin"}}, "auth": AUTH},
])
def test_a_key_in_the_roles_table_is_not_echoed_by_its_error(db_url, secrets):
    at = AppTest.from_file(APP, default_timeout=60)
    for name, value in secrets.items():
        at.secrets[name] = value
    at.user["is_logged_in"] = True
    at.user["email"] = "ada@example.com"
    at.run()
    assert not at.exception, at.exception
    shown = everything(at)
    assert "the roles cannot be read" in texts(at)
    assert "[redacted]" in texts(at) and "PASTEDintoTheWrongField" not in shown


@pytest.mark.parametrize("entry", [
    {"bad name!" + PASTED: {"base_url": "http://127.0.0.1:9/v1"}},
    {"lab": {"base_url": "http://127.0.0.1:9/v1", "price_input": PASTED, "price_output": 1}},
    {"lab": {"base_url": "http://127.0.0.1:9/v1", PASTED: 1}},
], ids=["name", "price", "field"])
def test_a_key_in_an_endpoint_setting_is_not_echoed_by_its_error(db_url, monkeypatch, entry):
    monkeypatch.setenv("PARLEY_ENDPOINTS", json.dumps(entry))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, at.exception
    assert "could not be read" in texts(at)
    assert "PASTEDintoTheWrongField" not in everything(at)
