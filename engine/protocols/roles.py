"""What a seat's role says to the model.

A seat's `role` is a role's name or a description typed in its place (DESIGN 2). The text
that reaches the model is the library's description for a name the analyst wrote or edited,
else the built-in role's own line for a built-in name, else the text as given. A protocol
whose templates already carry a role (the roundtable's and the duel's system prompts) puts it
there; every other protocol's seat gains one line, `Your role: ...`, in its system prompt, and
only when a role is set: a seat's role equal to its slot's own (a panel's critic seated as
`critic`) is no role set, so the seeds' prompts are byte for byte as they were without one.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from engine.models import Seat
from engine.protocols.personas import ROLES
from engine.text import fold_name

if TYPE_CHECKING:
    from engine.store import Store

ROLE_TEXT_MAX = 2_000  # characters of a description that reach a prompt
ROLE_PREFIX = "Your role: "


def builtin_roles(specs: Iterable[Any]) -> list[dict[str, str]]:
    """The roles as they ship, as library entries (`name`, `icon`, `description`): the seeds'
    roles (`personas.ROLES`), then the default roles of the seats of `specs` (registry
    entries: a duel's optimist and skeptic)."""
    out = [{"name": r.name, "icon": "", "description": f"{r.title}: {r.description}"}
           for r in ROLES.values()]
    known = {entry["name"] for entry in out}
    for spec in specs:
        for slot in getattr(spec, "slots", ()):
            for default in slot.defaults:
                role = str(default.get("role") or "").strip()
                if role and role not in known:
                    known.add(role)
                    out.append({"name": role, "icon": "", "description":
                                f"{getattr(spec, 'title', '')}: the default role of seat "
                                f"{slot.name}"})
    return out


def one_line(text: str) -> str:
    """A description as one line of at most `ROLE_TEXT_MAX` characters (whitespace runs,
    newlines included, become one space)."""
    line = " ".join(str(text or "").split())
    return line if len(line) <= ROLE_TEXT_MAX else line[:ROLE_TEXT_MAX - 1].rstrip() + "…"


def library_roles(entries: Iterable[Mapping[str, Any]], specs: Iterable[Any] = ()
                  ) -> dict[str, str]:
    """The library's roles that say something of their own, by folded name: each entry with
    a description other than the one it shipped with (`builtin_roles` of `specs`, the
    protocols a run knows: a built-in entry left as it was says what the built-in role says,
    in the protocol's own words)."""
    shipped = {fold_name(r["name"]): r["description"].strip() for r in builtin_roles(specs)}
    out: dict[str, str] = {}
    for entry in entries:
        name, text = str(entry.get("name") or ""), str(entry.get("description") or "").strip()
        if name.strip() and text and shipped.get(fold_name(name)) != text:
            out[fold_name(name)] = one_line(text)
    return out


def stored_library(store: Store | None, specs: Iterable[Any] = ()) -> dict[str, str]:
    """`library_roles` of a store's library, for a run of `specs` (nothing without a store,
    or when its library cannot be read: a role then says what its name or text says)."""
    if store is None or not hasattr(store, "library"):
        return {}
    try:
        return library_roles(store.library("role"), specs)
    except Exception:  # a library that cannot be read never stops a run
        return {}


def library_text(role: str, library: Mapping[str, str]) -> str:
    """The library's own description of `role` ("" when it has none)."""
    return library.get(fold_name(role or ""), "") if (role or "").strip() else ""


def canonical(role: str) -> str:
    """A built-in role's name for any way of writing it (`Devil's advocate` ->
    `devil_advocate`); "" for any other text."""
    key = "_".join("".join(c if c.isalpha() else " " for c in (role or "").lower()).split())
    key = {"devils_advocate": "devil_advocate", "devil_s_advocate": "devil_advocate",
           "devil": "devil_advocate", "synthesizer": "synthesiser",
           "synthesis": "synthesiser"}.get(key, key)
    return key if key in ROLES else ""


def describe(role: str, library: Mapping[str, str]) -> str:
    """What `role` asks of a seat, in one line: the library's description, else a built-in
    role's, else the text given."""
    text = library_text(role, library)
    if text:
        return text
    builtin = canonical(role)
    return ROLES[builtin].description if builtin else one_line(role)


def set_roles(seats: Iterable[tuple[Seat, str]]) -> list[Seat]:
    """The seats whose role is set: non-empty and other than their slot's own role (given
    with each seat)."""
    return [seat for seat, slot_role in seats
            if seat.role.strip() and fold_name(seat.role) != fold_name(slot_role)]


def role_lines(seats: Iterable[Seat], library: Mapping[str, str]) -> dict[str, str]:
    """The line each seat's role adds to its system prompt, by seat name."""
    return {seat.name: ROLE_PREFIX + describe(seat.role, library) for seat in seats}


__all__ = ["ROLE_PREFIX", "builtin_roles", "canonical", "describe", "library_roles",
           "library_text", "one_line", "role_lines", "set_roles", "stored_library"]
