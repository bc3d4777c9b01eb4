"""End-to-end smoke: both seed-000 protocols through the store on the simulated model."""
from engine import Store, run_debate, run_peer_review


def test_debate_and_peer_review_are_stored(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/p.db")
    debate = run_debate("Should we?", proponent="simulated", opponent="simulated",
                        judge="simulated", max_rounds=2, store=store)
    review = run_peer_review("Write notes", producer="simulated", reviewer="simulated",
                             store=store)
    runs = store.runs()
    assert set(runs["id"]) == {debate.run_id, review.run_id}
    assert set(runs["status"]) == {"completed"}
    assert len(store.turns(debate.run_id)) == 5
    assert all(runs["simulated"])
