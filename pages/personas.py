"""Personas & roles: the library of personas, roles and saved configurations, with YAML."""
from __future__ import annotations

import streamlit as st

from engine import ParleyError
from engine.services import library
from pages import _shared

store = _shared.store()
md = _shared.md
TITLES = {"persona": "persona", "role": "role"}
# Editing, deleting and importing need the admin role (engine/access.py): the controls are
# disabled for others, and the library service refuses them anyway.
LOCKED = not _shared.can("edit the library")
TRAITS = {"stubbornness": "Stubbornness", "accuracy": "Accuracy", "conformity": "Conformity"}

st.title("Personas & roles")
_shared.read_only_banner(_shared.store())
st.markdown("Personas are system prompts a seat speaks with; roles are the parts seats play "
            "(a roundtable's critic, a duel's skeptic). Either may declare simulated traits "
            "(stubbornness, accuracy, conformity) that the simulated model plays. The seeds' "
            "personas and roles are "
            "built in and editable. Saved configurations keep a protocol with its seats, "
            "options and prompt overrides for the Run and Experiments pages.")

if LOCKED:
    st.caption(_shared.refusal("edit the library"))
flash = st.session_state.pop("library_flash", None)
if flash:
    st.success(md(flash))


def done(message: str) -> None:
    """Remember a message for the next run, then rerun so every list is fresh."""
    st.session_state["library_flash"] = message
    st.rerun()


def confirm_delete(kind: str, item: dict) -> None:
    """Two-step delete: the first click asks, the second deletes."""
    pending = st.session_state.get("library_delete")
    key = f"{kind}-{item['id']}"
    if pending != key:
        if st.button("Delete", icon=":material/delete:", key=f"delete-{key}", disabled=LOCKED):
            st.session_state["library_delete"] = key
            st.rerun()
        return
    st.warning(f"Delete the {md(TITLES.get(kind, 'configuration'))} **{md(item['name'])}**? "
               + ("It is built in: “Restore the built-in …s” brings it back as shipped."
                  if item.get("builtin") else "This cannot be undone."))
    yes, no = st.columns(2)
    if yes.button("Yes, delete", key=f"confirm-{key}", type="primary"):
        library.delete_entry(store, item["id"], actor=_shared.actor())
        st.session_state.pop("library_delete", None)
        done(f"Deleted {item['name']}.")
    if no.button("Cancel", key=f"cancel-{key}"):
        st.session_state.pop("library_delete", None)
        st.rerun()


def entry_fields(kind: str, prefix: str, item: dict | None = None) -> dict:
    """The form fields of a persona or role; returns what was typed."""
    item = item or {}
    values = {"name": st.text_input("Name", item.get("name", ""), key=f"{prefix}-name")}
    for field, label in library.FIELDS[kind]:
        widget = st.text_area if field in library.LONG_FIELDS else st.text_input
        values[field] = widget(label, item.get(field, ""), key=f"{prefix}-{field}")
    st.caption("Simulated traits (optional): what the simulated model reads of this "
               f"{TITLES[kind]}. A seat that plays it on the simulated model gets these rates "
               "in its world (accuracy is its chance of being right on its own); a real model "
               "reads the text above, never these. Leave a box empty to keep the world's own "
               "rate.")
    declared = item.get("traits") or {}
    values["traits"] = {}
    for column, (trait, label) in zip(st.columns(len(TRAITS)), TRAITS.items(), strict=True):
        values["traits"][trait] = column.number_input(
            label, min_value=0.0, max_value=1.0, step=0.05, format="%.2f",
            value=declared.get(trait), key=f"{prefix}-trait-{trait}")
    return values


def kind_editor(kind: str) -> None:
    noun = TITLES[kind]
    with st.expander(f"New {noun}", icon=":material/add:", key=f"new-{kind}-open"):
        with st.form(f"new-{kind}"):
            # A new generation of fields after each creation starts the form empty again.
            generation = st.session_state.get(f"new-{kind}-generation", 0)
            values = entry_fields(kind, f"new-{kind}" + (f"-{generation}" if generation else ""))
            if st.form_submit_button(f"Create {noun}", key=f"create-{kind}", type="primary",
                                     disabled=LOCKED):
                try:
                    library.save_entry(store, kind, values, actor=_shared.actor())
                    st.session_state[f"new-{kind}-generation"] = generation + 1
                    done(f"Created the {noun} {values['name'].strip()}.")
                except ParleyError as exc:
                    st.error(md(exc))
    items = library.entries(store, kind)
    st.caption(f"{len(items)} {noun}s")
    missing = library.missing_builtins(store, kind)
    if missing:
        names = ", ".join(entry["name"] for entry in missing)
        st.info(md(f"{len(missing)} built-in {noun}(s) deleted: {names}."))
        if st.button(f"Restore the built-in {noun}s", icon=":material/restore:",
                     key=f"restore-{kind}", disabled=LOCKED):
            restored = library.restore_builtins(store, kind, actor=_shared.actor())
            done(f"Restored {restored} built-in {noun}(s).")
    for item in items:
        icon = _shared.avatar(item.get("icon"), "")
        badge = " · built in" if item.get("builtin") else ""
        traits = library.traits_text(item.get("traits"))
        badge += f" · simulated: {traits}" if traits else ""
        with st.expander(f"{icon} {md(item['name'])}{badge}".strip(),
                         key=f"open-{kind}-{item['id']}"):
            with st.form(f"edit-{kind}-{item['id']}"):
                values = entry_fields(kind, f"{kind}-{item['id']}", item)
                if st.form_submit_button("Save changes", key=f"save-{kind}-{item['id']}",
                                         disabled=LOCKED):
                    try:
                        library.save_entry(store, kind, values, item_id=item["id"],
                                           actor=_shared.actor())
                        done(f"Saved the {noun} {values['name'].strip()}.")
                    except ParleyError as exc:
                        st.error(md(exc))
            left, right = st.columns(2)
            with left:
                if st.button("Duplicate", icon=":material/content_copy:",
                             key=f"duplicate-{kind}-{item['id']}", disabled=LOCKED):
                    library.duplicate_entry(store, kind, item["id"], actor=_shared.actor())
                    done(f"Duplicated {item['name']}.")
            with right:
                confirm_delete(kind, item)


def configurations() -> None:
    saved = store.saved_configs()
    if not saved:
        st.info("No saved configurations yet. Configure a run on the Run page and press "
                "“Save configuration”.")
    for entry in saved:
        config = entry["config"]
        with st.expander(f"{md(entry['label'])} · {md(config.get('protocol', ''))}",
                         key=f"open-config-{entry['id']}"):
            st.code(library.to_yaml(config),
                    language="yaml", wrap_lines=True)
            left, right = st.columns(2)
            left.page_link("pages/run.py", label="Use on the Run page",
                           icon=":material/play_circle:", query_params={"config": entry["label"]})
            with right:
                confirm_delete("config", {"id": entry["id"], "name": entry["label"]})


def import_export() -> None:
    st.markdown("**Export**: personas, roles and saved configurations as one YAML file.")
    text = library.export_yaml(store)
    st.download_button("Download YAML", text, file_name="parley-library.yaml",
                       mime="application/x-yaml", icon=":material/download:", key="export-yaml")
    with st.expander("Show the YAML"):
        st.code(text, language="yaml", wrap_lines=True)
    st.markdown("**Import**: the same format. Entries whose name exists are replaced; a "
                "document with any error imports nothing.")
    upload = st.file_uploader("YAML file", type=["yaml", "yml"], key="import-file")
    pasted = st.text_area("…or paste YAML", key="import-text", height=160)
    if st.button("Import", icon=":material/upload:", key="import-run", type="primary",
                 disabled=not _shared.can("import")):
        source = upload.getvalue().decode("utf-8", errors="replace") if upload else pasted
        if not source.strip():
            st.error("Choose a YAML file or paste YAML first.")
            return
        try:
            counts = library.import_yaml(store, source, _shared.endpoints(),
                                         actor=_shared.actor())
        except ParleyError as exc:
            st.error(md(f"Import failed: {exc}"))
            return
        done("Imported " + ", ".join(f"{n} {kind}(s)" for kind, n in counts.items()) + ".")


personas_tab, roles_tab, configs_tab, yaml_tab = st.tabs(
    ["Personas", "Roles", "Saved configurations", "Import / export"], key="library-tab")
with personas_tab:
    kind_editor("persona")
with roles_tab:
    kind_editor("role")
with configs_tab:
    configurations()
with yaml_tab:
    import_export()
