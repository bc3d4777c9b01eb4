"""Parley's engine: multi-agent debate, peer review, panels, roundtables, duels and councils.

Pure Python (never imports streamlit). Every `run_*` is a synchronous wrapper over an
`arun_*` coroutine with the same arguments.

The public names are imported on first use (a module `__getattr__`, as langchain-core does),
so `import engine.text` or a CLI call that needs no protocol does not pay for langchain,
SQLAlchemy and pandas.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Each public name and the module it lives in.
_WHERE = {
    "get_model": "engine.llm.providers",
    "ParleyError": "engine.errors",
    **dict.fromkeys(("ConfigError", "RunResult", "Seat", "Turn"), "engine.models"),
    **dict.fromkeys(("REGISTRY", "Resolved", "get_protocol", "prompt_templates"),
                    "engine.protocols"),
    "RunConfig": "engine.config",
    **dict.fromkeys(("CouncilResult", "arun_council", "run_council"),
                    "engine.protocols.council"),
    **dict.fromkeys(("DebateResult", "DebateRound", "arun_debate", "run_debate"),
                    "engine.protocols.debate"),
    **dict.fromkeys(("DuelResult", "arun_duel", "run_duel"), "engine.protocols.duel"),
    **dict.fromkeys(("PanelResult", "arun_panel", "run_panel"), "engine.protocols.panel"),
    **dict.fromkeys(("PeerReviewIteration", "PeerReviewResult", "arun_peer_review",
                     "run_peer_review"), "engine.protocols.peer_review"),
    **dict.fromkeys(("Exchange", "RoundtableResult", "arun_roundtable", "run_roundtable"),
                    "engine.protocols.roundtable"),
    **dict.fromkeys(("SingleResult", "arun_single", "run_single"), "engine.protocols.single"),
    **dict.fromkeys(("SocietyResult", "arun_society", "run_society"),
                    "engine.protocols.society"),
    **dict.fromkeys(("VoteResult", "arun_vote", "run_vote"), "engine.protocols.vote"),
    "question_set": "engine.questions",
    "Store": "engine.protocols.storing",
}

__all__ = [
    "REGISTRY", "ConfigError", "CouncilResult", "DebateResult", "DebateRound", "DuelResult",
    "Exchange", "PanelResult", "PeerReviewIteration", "PeerReviewResult", "Resolved",
    "RoundtableResult", "RunConfig", "RunResult", "Seat", "SingleResult", "SocietyResult",
    "Store", "Turn", "VoteResult",
    "arun_council", "arun_debate", "arun_duel", "arun_panel", "arun_peer_review",
    "arun_roundtable", "arun_single", "arun_society", "arun_vote", "get_model",
    "get_protocol", "prompt_templates", "question_set", "run_council", "run_debate",
    "run_duel", "run_panel", "run_peer_review", "run_roundtable", "run_single",
    "run_society", "run_vote", "ParleyError",
]


def __getattr__(name: str) -> Any:
    """A public name, from its module (imported the first time; Python keeps it after)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what type checkers and editors see: the same names, imported eagerly
    from engine.config import RunConfig
    from engine.errors import ParleyError
    from engine.llm.providers import get_model
    from engine.models import ConfigError, RunResult, Seat, Turn
    from engine.protocols import REGISTRY, Resolved, get_protocol, prompt_templates
    from engine.protocols.council import arun_council, run_council
    from engine.protocols.council_result import CouncilResult
    from engine.protocols.debate import DebateResult, DebateRound, arun_debate, run_debate
    from engine.protocols.duel import DuelResult, arun_duel, run_duel
    from engine.protocols.panel import arun_panel, run_panel
    from engine.protocols.panel_result import PanelResult
    from engine.protocols.peer_review import (
        PeerReviewIteration,
        PeerReviewResult,
        arun_peer_review,
        run_peer_review,
    )
    from engine.protocols.roundtable import arun_roundtable, run_roundtable
    from engine.protocols.roundtable_result import Exchange, RoundtableResult
    from engine.protocols.single import SingleResult, arun_single, run_single
    from engine.protocols.society import SocietyResult, arun_society, run_society
    from engine.protocols.storing import Store
    from engine.protocols.vote import VoteResult, arun_vote, run_vote
    from engine.questions import question_set
