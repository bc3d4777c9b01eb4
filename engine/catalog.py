"""The protocols the store meets, handed down to it instead of imported up.

The store is the bottom layer that keeps runs, yet three of its jobs need to know the
protocols: a result saved without its metrics gets them from its protocol, an import refuses a
protocol or a result shape Parley cannot read, and two data migrations re-read old results.
Inside the protocols package, the shared run loop (`base.execute`) and the prompt-echo check
(`templates.template_phrases`) need the whole registry, which imports them. The registry sits
above all of these (`engine.protocols`), so they ask this module instead;
`engine/__init__.py`, which Python runs before any `engine.*` module and which sits above every
layer, names where the registry comes from (`provide`). Nothing is imported until the store
first asks, so `import engine.text` stays cheap.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol


class ProtocolEntry(Protocol):
    """What the store reads of a registry entry (`engine.protocols.base.ProtocolSpec`)."""

    @property
    def result_type(self) -> type[Any]: ...

    @property
    def templates(self) -> Mapping[str, Any]: ...

    def metrics(self, result: Any) -> dict[str, Any]: ...

    def assess(self, result: Any) -> tuple[str, list[str]]: ...

    def read_result(self, dump: Mapping[str, Any] | None) -> Any: ...


_loader: Callable[[], Mapping[str, ProtocolEntry]] | None = None


def provide(loader: Callable[[], Mapping[str, ProtocolEntry]]) -> None:
    """Name where the protocol registry comes from (called once, by `engine/__init__.py`)."""
    global _loader
    _loader = loader


def protocols() -> Mapping[str, ProtocolEntry]:
    """Every protocol Parley runs, by name, in the registry's order."""
    if _loader is None:  # only when this module was loaded without its package
        raise RuntimeError("no protocol registry was provided: import engine first")
    return _loader()


def entry(name: str) -> ProtocolEntry:
    """The registry entry of a stored protocol name (`KeyError` for an unknown one)."""
    return protocols()[name]
