"""The library: personas, roles and saved run configurations, stored in the database.

Personas carry a system prompt and an icon; roles are names a seat plays (with a description);
configurations are exactly what `protocols.arun_config` takes, saved under a label so a run or
an experiment can reuse them. The seeds' personas and roles are put in on first open, then they
are ordinary entries the analyst may edit or delete. YAML import checks the whole document
before writing anything.
"""
from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import yaml

from engine.access import LOCAL, Actor, require
from engine.checks import require_name
from engine.config import RunConfig, check_traits
from engine.models import ConfigError
from engine.protocols import check_config
from engine.simulated import TRAITS
from engine.text import fold_name
from engine.yamlfile import safe_load, yaml_problem

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry
    from engine.protocols import Resolved
    from engine.store import Store

KINDS = ("persona", "role")
CONFIG = "config"
_SEEDED = ("meta", "seeded-library-v1")  # a marker row: seed once, even if all are deleted

# The fields each kind has besides its name, with the label a page shows for them.
FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "persona": (("icon", "Icon (an emoji)"), ("prompt", "System prompt"),
                ("description", "Description")),
    "role": (("icon", "Icon (an emoji)"), ("description", "What the role does")),
}
LONG_FIELDS = {"prompt", "description"}
_YAML_KEYS = {"personas": "persona", "roles": "role", "configurations": CONFIG}


# ---------------------------------------------------------------------- built-ins
def builtin_entries() -> dict[str, list[dict[str, str]]]:
    """The seeds' personas and roles as library entries: `engine.protocols.personas`, plus the
    default roles of every registered protocol's seats (a duel's optimist and skeptic)."""
    from engine.protocols import REGISTRY, personas, roles
    return {"persona": [{"name": p.id, "icon": p.icon, "prompt": p.prompt,
                         "description": p.name} for p in personas.PERSONAS.values()],
            "role": roles.builtin_roles(REGISTRY.values())}


def ensure_seeded(store: Store) -> bool:
    """Put the built-in personas and roles in the library once per database."""
    kind, name = _SEEDED
    if any(row["name"] == name for row in store.library(kind)):
        return False
    for k in KINDS:
        _put_builtins(store, k)
    _put_once(store, kind, name, {})
    return True


def missing_builtins(store: Store, kind: str) -> list[dict[str, str]]:
    """The built-in personas (or roles) deleted from the library: no entry has their name."""
    present = {fold_name(row["name"]) for row in store.library(kind)}
    return [entry for entry in builtin_entries()[kind] if fold_name(entry["name"]) not in present]


def restore_builtins(store: Store, kind: str, actor: Actor = LOCAL) -> int:
    """Put the deleted built-in personas (or roles) back as they shipped; returns how many.
    Entries that exist, edited or not, are left as they are."""
    require(actor, "edit the library")
    return _put_builtins(store, kind)


def _put_builtins(store: Store, kind: str) -> int:
    """Put the built-in personas (or roles) the library lacks; returns how many."""
    missing = missing_builtins(store, kind)
    for entry in missing:
        _put_once(store, kind, entry["name"], entry, builtin=True)
    return len(missing)


def _put_once(store: Store, kind: str, name: str, body: Mapping[str, Any], **kw: Any) -> None:
    with contextlib.suppress(ConfigError):  # another session seeded it a moment ago
        store.put_library(kind, name, body, **kw)


# ---------------------------------------------------------------------- personas and roles
def entries(store: Store, kind: str) -> list[dict[str, Any]]:
    """All personas (or roles), seeding the built-ins on first use."""
    _check_kind(kind)
    ensure_seeded(store)
    return store.library(kind)


def clean_entry(kind: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """A persona or role checked field by field; a `ConfigError` names what is wrong. Its
    optional `traits` (stubbornness, accuracy, conformity: rates in 0..1) are what the
    simulated model reads of it: they set the world of the simulated seats that play it."""
    _check_kind(kind)
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"a {kind} needs a name", "input")
    require_name(name.strip(), f"a {kind} name")  # visible text, at most NAME_MAX characters
    allowed = {"name", "id", "builtin", "traits"} | {key for key, _ in FIELDS[kind]}
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ConfigError(f"{kind} {name.strip()!r} has an unknown field {unknown[0]!r}; "
                          f"fields are name, traits, "
                          f"{', '.join(k for k, _ in FIELDS[kind])}", "input")
    out: dict[str, Any] = {"name": name.strip()}
    for key, _label in FIELDS[kind]:
        value = "" if entry.get(key) is None else entry[key]
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ConfigError(f"{kind} {name.strip()!r}: {key} must be text", "input")
        out[key] = str(value).strip() if key == "icon" else str(value)
        if "\x00" in out[key]:
            raise ConfigError(f"{kind} {name.strip()!r}: {key} must not contain NUL bytes",
                              "input")
    if len(out.get("icon", "")) > 16:
        raise ConfigError(f"{kind} {name.strip()!r}: the icon must be one emoji", "input")
    if entry.get("traits") is not None:
        traits = check_traits(entry["traits"], f"{kind} {name.strip()!r}")
        if traits:
            out["traits"] = traits
    return out


def traits_text(traits: Any) -> str:
    """A persona's or role's declared simulated traits in words ("stubbornness 0.8 ·
    accuracy 0.9"), "" when it declares none."""
    if not isinstance(traits, Mapping):
        return ""
    return " · ".join(f"{name} {float(traits[name]):g}" for name in TRAITS
                      if isinstance(traits.get(name), (int, float)))


def save_entry(store: Store, kind: str, entry: Mapping[str, Any],
               item_id: int | None = None, actor: Actor = LOCAL) -> int:
    """Create a persona or role (or replace entry `item_id`); returns its id."""
    require(actor, "edit the library")
    clean = clean_entry(kind, entry)
    return put(store, kind, clean["name"], clean, item_id=item_id)


def clash(store: Store, kind: str, name: str, item_id: int | None = None) -> dict[str, Any] | None:
    """The other entry of `kind` whose name folds to the same key as `name` (case, spacing
    and look-alike letters ignored), if any."""
    key = fold_name(name)
    return next((row for row in store.library(kind)
                 if fold_name(row["name"]) == key and row["id"] != item_id), None)


def put(store: Store, kind: str, name: str, body: Mapping[str, Any],
        item_id: int | None = None) -> int:
    """Write a library entry, refusing a name that collides with another one after folding
    (`Ana`, ` ana ` and `ＡＮＡ` are one name)."""
    other = clash(store, kind, name, item_id)
    if other is not None:
        what = "configuration" if kind == CONFIG else kind
        same = "already exists" if other["name"] == name.strip() else (
            f"would be the same name as {other['name']!r} (case, spacing and look-alike "
            "letters are ignored)")
        raise ConfigError(f"a {what} named {name.strip()!r} {same}", "input")
    return store.put_library(kind, name, body, item_id=item_id)


def duplicate_entry(store: Store, kind: str, item_id: int, actor: Actor = LOCAL) -> int:
    """Copy an entry under a free name (`NAME (copy)`, `NAME (copy 2)` ...); returns its id."""
    require(actor, "edit the library")
    rows = store.library(kind)
    source = next((row for row in rows if row["id"] == item_id), None)
    if source is None:
        raise ConfigError(f"no {kind} with id {item_id}", "input")
    names = {fold_name(row["name"]) for row in rows}
    name, number = f"{source['name']} (copy)", 2
    while fold_name(name) in names:
        name, number = f"{source['name']} (copy {number})", number + 1
    return save_entry(store, kind, {**source, "name": name}, actor=actor)


def delete_entry(store: Store, item_id: int, actor: Actor = LOCAL) -> None:
    """Delete a persona, role or configuration by id."""
    require(actor, "edit the library")
    store.delete_library(item_id)


def find(store: Store, kind: str, name: str) -> dict[str, Any] | None:
    """The entry called `name`, or None."""
    return next((row for row in store.library(kind) if row["name"] == name), None)


# ---------------------------------------------------------------------- configurations
class LabelTaken(ConfigError):
    """A configuration is already saved under the label: replacing it must be asked for, since
    runs stored under that label would then mix two configurations."""

    def __init__(self, label: str, protocol: str):
        super().__init__(f"a configuration is already saved as {label!r} ({protocol}); choose "
                         "another label, or replace it", "input")
        self.label = label


def save_config(store: Store, config: RunConfig | Mapping[str, Any], label: str | None = None,
                item_id: int | None = None, endpoints: EndpointRegistry | None = None,
                replace: bool = True, actor: Actor = LOCAL) -> int:
    """Validate and save a configuration under `label` (or its own `label`); returns its id.
    Saving under a saved label replaces it; with `replace=False` (the Run page's first
    Save) it raises `LabelTaken` instead, so the user is asked."""
    require(actor, "edit the library")
    given = config.label if isinstance(config, RunConfig) else config.get("label")
    label = (label or given or "").strip()
    if not label:
        raise ConfigError("a saved configuration needs a label", "input")
    require_name(label, "a configuration label")
    return _put_config(store, label, check_config(config, endpoints), item_id, replace)


def _put_config(store: Store, label: str, resolved: Resolved, item_id: int | None = None,
                replace: bool = True) -> int:
    """Save a checked configuration under `label` (`save_config` says when it replaces)."""
    body = {k: v for k, v in resolved.given.stored().items() if k != "label"}
    body["protocol"] = resolved.spec.name
    if item_id is None:
        existing = find(store, CONFIG, label)
        if existing is not None and not replace:
            raise LabelTaken(label, str(existing.get("protocol") or "?"))
        item_id = existing["id"] if existing is not None else None
    return put(store, CONFIG, label, body, item_id=item_id)


# ---------------------------------------------------------------------- YAML
def to_yaml(value: Any) -> str:
    """Any library value as readable YAML (unicode kept, keys in their order)."""
    return yaml.safe_dump(value, allow_unicode=True, sort_keys=False, width=100)


def export_yaml(store: Store) -> str:
    """Personas, roles and configurations as one YAML document."""
    ensure_seeded(store)
    return to_yaml({key: [{k: v for k, v in row.items() if k not in ("id", "builtin", "label")}
                          for row in store.library(kind)] for key, kind in _YAML_KEYS.items()})


def parse_yaml(text: str, endpoints: EndpointRegistry | None = None
               ) -> dict[str, list[dict[str, Any]]]:
    """Read and check a library YAML document (a configuration comes back `Resolved`); a
    `ConfigError` says what and where."""
    try:
        doc = safe_load(text, note="; nothing was imported")  # size, aliases and depth capped
    except yaml.YAMLError as exc:
        raise ConfigError(f"the YAML is malformed{yaml_problem(exc)}; nothing was imported",
                          "input") from None
    if doc is None:
        raise ConfigError("the YAML document is empty; nothing was imported", "input")
    if not isinstance(doc, dict):
        raise ConfigError("the YAML must be a mapping with personas, roles and/or "
                          f"configurations, got a {type(doc).__name__}; nothing was imported",
                          "input")
    unknown = sorted(str(k) for k in doc if k not in _YAML_KEYS)
    if unknown:
        raise ConfigError(f"unknown section {unknown[0]!r}; sections are "
                          f"{', '.join(_YAML_KEYS)}; nothing was imported", "input")
    out: dict[str, list[dict[str, Any]]] = {}
    for key, kind in _YAML_KEYS.items():
        items = doc.get(key) or []
        if not isinstance(items, list):
            raise ConfigError(f"{key} must be a list; nothing was imported", "input")
        seen: set[str] = set()
        checked = []
        for number, item in enumerate(items, 1):
            if not isinstance(item, dict):
                raise ConfigError(f"{key} item {number} must be a mapping with a name; "
                                  "nothing was imported", "input")
            try:
                if kind == CONFIG:
                    name = str(item.get("name") or item.get("label") or "").strip()
                    if not name:
                        raise ConfigError("a configuration needs a name", "input")
                    require_name(name, "a configuration name")
                    body = {k: v for k, v in item.items() if k not in ("name", "label")}
                    entry: dict[str, Any] = {"name": name,
                                             "config": check_config(body, endpoints)}
                else:
                    entry = dict(clean_entry(kind, item))
                    name = str(entry["name"])
            except ConfigError as exc:
                raise ConfigError(f"{key} item {number}: {exc}; nothing was imported",
                                  "input") from None
            if fold_name(name) in seen:
                raise ConfigError(f"{key}: {name!r} appears twice (case, spacing and "
                                  "look-alike letters are ignored); nothing was imported",
                                  "input")
            seen.add(fold_name(name))
            checked.append(entry)
        out[kind] = checked
    return out


def import_yaml(store: Store, text: str, endpoints: EndpointRegistry | None = None,
                actor: Actor = LOCAL) -> dict[str, int]:
    """Import a library YAML document (entries with an existing name are replaced).

    The whole document is checked first -- including names that would collide, after
    folding, with a different entry already stored -- so a bad one stores nothing. Returns
    counts by kind. Configurations' models resolve under `endpoints`.
    """
    require(actor, "import")
    require(actor, "edit the library")
    parsed = parse_yaml(text, endpoints)
    ensure_seeded(store)
    plan: list[tuple[str, dict[str, Any], int | None]] = []
    for kind, items in parsed.items():
        for item in items:
            existing = find(store, kind, item["name"])
            item_id = existing["id"] if existing else None
            other = clash(store, kind, item["name"], item_id)
            if other is not None:
                raise ConfigError(f"{item['name']!r} would be the same name as the stored "
                                  f"{other['name']!r} (case, spacing and look-alike letters "
                                  "are ignored); nothing was imported", "input")
            plan.append((kind, item, item_id))
    for kind, item, item_id in plan:
        if kind == CONFIG:
            _put_config(store, item["name"], item["config"], item_id)
        else:
            put(store, kind, item["name"], item, item_id=item_id)
    return {kind: len(items) for kind, items in parsed.items()}


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ConfigError(f"library kind must be one of {', '.join(KINDS)}, got {kind!r}",
                          "input")
