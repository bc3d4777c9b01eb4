"""Parley's engine: multi-agent debate, peer review, panels, roundtables and duels.

Pure Python (never imports streamlit). Every `run_*` is a synchronous wrapper over an
`arun_*` coroutine with the same arguments.
"""
from engine.llm.providers import get_model
from engine.models import ConfigError, RunResult, Seat, Turn
from engine.protocols import REGISTRY, get_protocol, prompt_templates
from engine.protocols.debate import DebateResult, DebateRound, arun_debate, run_debate
from engine.protocols.duel import DuelResult, arun_duel, run_duel
from engine.protocols.panel import PanelResult, arun_panel, run_panel
from engine.protocols.peer_review import (
                                    PeerReviewIteration,
                                    PeerReviewResult,
                                    arun_peer_review,
                                    run_peer_review,
)
from engine.protocols.roundtable import Exchange, RoundtableResult, arun_roundtable, run_roundtable
from engine.protocols.single import SingleResult, arun_single, run_single
from engine.protocols.society import SocietyResult, arun_society, run_society
from engine.protocols.vote import VoteResult, arun_vote, run_vote
from engine.questions import question_set
from engine.store import Store

__all__ = [
    "ConfigError", "RunResult", "Seat", "Turn", "get_model", "Store", "REGISTRY",
    "get_protocol", "prompt_templates", "question_set",
    "DebateResult", "DebateRound", "arun_debate", "run_debate",
    "PeerReviewIteration", "PeerReviewResult", "arun_peer_review", "run_peer_review",
    "Exchange", "RoundtableResult", "arun_roundtable", "run_roundtable",
    "DuelResult", "arun_duel", "run_duel",
    "PanelResult", "arun_panel", "run_panel", "VoteResult", "arun_vote", "run_vote",
    "SocietyResult", "arun_society", "run_society", "SingleResult", "arun_single", "run_single",
]
