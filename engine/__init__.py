"""Parley's engine: multi-agent debate, peer review, panels, roundtables and duels.

Pure Python (never imports streamlit). Every `run_*` is a synchronous wrapper over an
`arun_*` coroutine with the same arguments.
"""
from .models import ConfigError, RunResult, Seat, Turn
from .providers import get_model
from .store import Store
from .protocols import REGISTRY, get_protocol, prompt_templates
from .protocols.debate import DebateResult, DebateRound, arun_debate, run_debate
from .protocols.peer_review import (PeerReviewIteration, PeerReviewResult, arun_peer_review,
                                    run_peer_review)

__all__ = [
    "ConfigError", "RunResult", "Seat", "Turn", "get_model", "Store", "REGISTRY",
    "get_protocol", "prompt_templates",
    "DebateResult", "DebateRound", "arun_debate", "run_debate",
    "PeerReviewIteration", "PeerReviewResult", "arun_peer_review", "run_peer_review",
]
