"""The Personas & roles page (AppTest): create, edit, duplicate, delete, YAML in and out."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from engine import Store

from engine.services import library
from apptest_helpers import plain

APP = str(Path(__file__).resolve().parent.parent / "app.py")




def open_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/personas.py").run()
    assert not at.exception, at.exception
    return at


def persona(store: Store, name: str) -> dict | None:
    return library.find(store, "persona", name)


def test_builtins_are_listed(db_url):
    at = open_page()
    labels = [plain(e.label) for e in at.expander]
    for name, icon in (("cautious", "🛡️"), ("creative", "💡"), ("literal", "📏")):
        assert f"{icon} {name} · built in" in labels
    for role in ("proposer", "devil_advocate", "optimist arguing in favor"):
        assert f"{role} · built in" in labels


def test_create_edit_duplicate_and_delete_a_persona(db_url):
    store = Store(db_url)
    at = open_page()
    # Form fields are sent together when the form's button is pressed.
    at.text_input(key="new-persona-name").input("contrarian")
    at.text_input(key="new-persona-icon").input("🙃")
    at.text_area(key="new-persona-prompt").input("Disagree with the majority.")
    at.button(key="create-persona").click().run()
    created = persona(store, "contrarian")
    assert created and created["prompt"] == "Disagree with the majority."
    assert "Created the persona contrarian." in plain(at.success[0].value)
    assert "🙃 contrarian" in [plain(e.label) for e in at.expander]

    pid = created["id"]
    at.text_area(key=f"persona-{pid}-prompt").input("Disagree, politely.")
    at.button(key=f"save-persona-{pid}").click().run()
    assert persona(store, "contrarian")["prompt"] == "Disagree, politely."

    at.button(key=f"duplicate-persona-{pid}").click().run()
    copy = persona(store, "contrarian (copy)")
    assert copy and copy["prompt"] == "Disagree, politely." and copy["icon"] == "🙃"

    # Delete asks first; Cancel keeps it; Yes deletes it.
    at.button(key=f"delete-persona-{pid}").click().run()
    assert any("Delete the persona" in plain(w.value) for w in at.warning)
    at.button(key=f"cancel-persona-{pid}").click().run()
    assert persona(store, "contrarian") is not None
    at.button(key=f"delete-persona-{pid}").click().run()
    at.button(key=f"confirm-persona-{pid}").click().run()
    assert persona(store, "contrarian") is None
    assert persona(store, "contrarian (copy)") is not None
    assert not at.exception

    # A clash is an error on the page, nothing changes.
    assert at.text_input(key="new-persona-1-name").value == ""  # the form starts empty again
    at.text_input(key="new-persona-1-name").input("cautious")
    at.button(key="create-persona").click().run()
    assert any("already exists" in plain(e.value) for e in at.error)


def test_a_role_can_be_created_and_deleted(db_url):
    store = Store(db_url)
    at = open_page()
    at.text_input(key="new-role-name").input("auditor")
    at.text_area(key="new-role-description").input("checks every sum")
    at.button(key="create-role").click().run()
    role = library.find(store, "role", "auditor")
    assert role and role["description"] == "checks every sum"
    at.button(key=f"delete-role-{role['id']}").click().run()
    at.button(key=f"confirm-role-{role['id']}").click().run()
    assert library.find(store, "role", "auditor") is None


def test_yaml_export_and_import_with_a_clear_error(db_url):
    store = Store(db_url)
    at = open_page()
    exported = [c.value for c in at.code if "personas:" in c.value]
    assert exported and "cautious" in exported[0] and "prompt:" in exported[0]
    assert at.get("download_button")  # the export is offered as a file too

    before = library.export_yaml(store)
    at.text_area(key="import-text").input("personas:\n  - name: broken\n   icon: [\n").run()
    at.button(key="import-run").click().run()
    errors = [plain(e.value) for e in at.error]
    assert errors and "malformed at line 3" in errors[0] and "nothing was imported" in errors[0]
    assert library.export_yaml(store) == before

    at.text_area(key="import-text").input("roles:\n  - name: scribe\n    description: notes\n"
                                          ).run()
    at.button(key="import-run").click().run()
    assert library.find(store, "role", "scribe")["description"] == "notes"
    assert "Imported" in at.success[0].value


def test_a_persona_declares_simulated_traits_on_the_page(db_url):
    """Three trait boxes under each persona: what is typed is stored as its traits, shown
    beside its name, and an empty box declares nothing."""
    store = Store(db_url)
    at = open_page()
    at.text_input(key="new-persona-name").input("mule")
    at.number_input(key="new-persona-trait-stubbornness").set_value(0.8)
    at.button(key="create-persona").click().run()
    assert persona(store, "mule")["traits"] == {"stubbornness": 0.8}
    assert "mule · simulated: stubbornness 0.8" in [plain(e.label) for e in at.expander]
    pid = persona(store, "mule")["id"]
    at.number_input(key=f"persona-{pid}-trait-accuracy").set_value(0.95)
    at.button(key=f"save-persona-{pid}").click().run()
    assert persona(store, "mule")["traits"] == {"stubbornness": 0.8, "accuracy": 0.95}
