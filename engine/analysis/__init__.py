"""Deterministic analysis on plain values: sections, confidence, approval, stances, tallies,
agreement, dynamics over rounds and statistics. Nothing here calls a model."""
from engine.analysis.agreement import Agreement, overlap_agreement
from engine.analysis.answers import answers_match, extract_answer
from engine.analysis.rounds_dynamics import Dynamics, Flip, dynamics, influence, votes
from engine.analysis.sections import is_approved, parse_confidence, parse_sections, read_confidence
from engine.analysis.stances import (
                                      Confidence,
                                      Tally,
                                      classify_changes,
                                      derive_confidence,
                                      detect_mind_changes,
                                      normalize_stance,
                                      tally,
)

__all__ = ["Agreement", "overlap_agreement", "answers_match", "extract_answer", "is_approved",
           "parse_confidence", "parse_sections", "read_confidence", "Confidence", "Tally",
           "classify_changes", "derive_confidence", "detect_mind_changes", "normalize_stance",
           "tally", "Dynamics", "Flip", "dynamics", "influence", "votes"]
