"""The council (DESIGN 2.9, karpathy/llm-council): three stages, anonymous rankings, the Borda
count with its tie-breaks, unreadable rankings abstaining, failures, the order seed, the CLI,
and a fuzz of the FINAL RANKING parser."""
from __future__ import annotations

from protocol_contract import ProtocolContract

from engine import CouncilResult, arun_council, run_council

Q = "What is 2+2?"


class TestCouncilContract(ProtocolContract):
    """The protocol contract (tests/protocol_contract.py), kept by the council."""

    protocol = "council"
    run = staticmethod(run_council)
    arun = staticmethod(arun_council)
    question = Q

    def assert_failure_shown(self, result, seat, slot, failure):
        """A failed member is not shown for ranking; a failed chairman gives no answer."""
        assert isinstance(result, CouncilResult)
        if slot == "members":
            assert seat.name not in result.answers
            assert all(seat.name not in shown.values() for shown in result.labels.values())
            assert seat.name not in result.rankings
        else:
            assert result.answer == "" and result.final_text == ""
            assert result.final_answer() is None
