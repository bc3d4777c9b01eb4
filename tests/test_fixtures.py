"""The test fakes themselves behave as the other tests assume."""
import pytest

from engine import run_debate


def test_recording_model_keeps_messages_and_raises(recording_model):
    pro = recording_model(["p1", RuntimeError("down")])
    con = recording_model(["c1", "c2"])
    judge = recording_model(["1. VERDICT: pro\n5. CONFIDENCE: 0.8"])
    result = run_debate("T", proponent=pro, opponent=con, judge=judge, max_rounds=2, retries=0)
    assert len(pro.received) == 2 and len(con.received) == 2 and len(judge.received) == 1
    assert pro.received[0][-1][0] == "human"
    assert result.rounds[1].proponent_argument == "Error: Unable to generate argument."
    assert result.confidence == pytest.approx(0.8)
