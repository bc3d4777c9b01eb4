"""Each seat's model resolved once per run: by the check that refuses a bad spec before any
call, then reused by every call the run makes.

Resolving a spec string builds a chat model (`engine.llm.providers.get_model`); with no memo, a run
builds each seat's twice (its check, then its first call). `open_run()` starts a run's memo
in the current context (a runner's first step, `engine.protocols.base.split_run_options`);
`seat_model` reads it. The memo is the run's own: the next run opens a new one, and tasks the
run starts (its concurrent calls) share it, as they copy the context. Outside a run (no memo
open) every call resolves afresh. An experiment opens a memo its runs share (`open_shared`):
its cells repeat a few configurations, so a spec string is resolved once per experiment.
"""
from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from engine.llm.providers import resolve_model
from engine.llm.structured import WATCHED

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry

# (id of the seat's model, temperature, id of the registry) -> (model, registry, resolved);
# the entry holds the objects whose ids key it, so an id is never another object's meanwhile
_MEMO: ContextVar[dict[tuple[int, Any, int], tuple[Any, Any, Any]] | None] = ContextVar(
    "parley_run_models", default=None)
# An experiment's: (spec string, temperature, id of the registry) -> (registry, resolved)
_SHARED: ContextVar[dict[tuple[str, Any, int], tuple[Any, Any]] | None] = ContextVar(
    "parley_experiment_models", default=None)
SHARED_MAX = 256  # an experiment's distinct seat specs kept; past it the memo starts again


def open_shared() -> None:
    """Start a memo that every run started from the current context shares (an experiment's
    runs, `engine.experiments.runner`): a seat spec string is resolved once for them all, as
    its cells' configurations repeat. A chat model serves any number of runs at once."""
    _SHARED.set({})


def close_shared() -> None:
    """End the current context's shared memo (the experiment is over): its models go."""
    _SHARED.set(None)


def open_run() -> None:
    """Start a run's memos in the current context (dropping the previous run's): its models
    and what watches their calls (`engine.llm.structured.WATCHED`)."""
    _MEMO.set({})
    WATCHED.set({})


def seat_model(model: Any, temperature: float | None = None,
               endpoints: EndpointRegistry | None = None) -> Any:
    """`resolve_model(model, temperature, endpoints)`, once per run for the same three."""
    memo = _MEMO.get()
    if memo is None:
        return resolve_model(model, temperature, endpoints)
    key = (id(model), temperature, id(endpoints))
    found = memo.get(key)
    if found is None or found[0] is not model or found[1] is not endpoints:
        found = memo[key] = (model, endpoints, _shared(model, temperature, endpoints))
    return found[2]


def _shared(model: Any, temperature: float | None, endpoints: EndpointRegistry | None) -> Any:
    shared = _SHARED.get()
    if shared is None or not isinstance(model, str):
        return resolve_model(model, temperature, endpoints)
    key = (model, temperature, id(endpoints))
    found = shared.get(key)
    if found is None or found[0] is not endpoints:
        if len(shared) >= SHARED_MAX:
            shared.clear()
        found = shared[key] = (endpoints, resolve_model(model, temperature, endpoints))
    return found[1]
