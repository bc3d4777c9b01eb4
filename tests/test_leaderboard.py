"""The leaderboard (issue 30, bullet 4): Bradley-Terry ratings from stored pairwise outcomes,
checked against a closed form and an independent fit; intervals, n, the right and wrong side,
simulated and real kept apart, the runs behind each rating."""
from __future__ import annotations

import math

import pytest

from engine import Store
from engine.protocols import arun_config, run_sync
from engine.reports import leaderboard as lb

A, B, C, D = (lb.Player(m, "(no persona)") for m in ("m:a", "m:b", "m:c", "m:d"))


def games(*spec: tuple[lb.Player, lb.Player, int], run: str = "r") -> list[lb.Game]:
    """`n` games in which the first player beats the second, each in its own run."""
    return [lb.Game(f"{run}{w.model}{lo.model}{i}", "debate", w, lo)
            for w, lo, n in spec for i in range(n)]


def test_two_players_without_a_prior_match_the_closed_form():
    # A beats B 3 times, B beats A once: p_A / p_B = 3, so 400 log10(3) points apart,
    # centred on 1000 (a geometric mean of 1)
    ratings = lb.fit([("a", "b")] * 3 + [("b", "a")], prior=0.0)
    gap = 400 * math.log10(3)
    assert ratings["a"] - ratings["b"] == pytest.approx(gap, abs=1e-6)
    assert ratings["a"] + ratings["b"] == pytest.approx(2000, abs=1e-6)


def test_two_players_with_the_prior_match_its_closed_form():
    # one game, A beats B, one virtual win and loss each against the reference (strength 1):
    # by symmetry p_B = 1 / p_A, and the stationarity condition of A reads
    # (1 + 1) / p_A = 1 / (p_A + 1 / p_A) + 2 / (p_A + 1); solved below by bisection
    ratings = lb.fit([("a", "b")], prior=1.0)

    def condition(p: float) -> float:
        return 2 / p - 1 / (p + 1 / p) - 2 / (p + 1)
    low, high = 1.0, 10.0
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if condition(mid) > 0 else (low, mid)
    assert ratings["a"] == pytest.approx(1000 + 400 * math.log10(low), abs=1e-6)
    assert ratings["b"] == pytest.approx(1000 - 400 * math.log10(low), abs=1e-6)


def independent_fit(pairs: list[tuple[str, str]], prior: float) -> dict[str, float]:
    """Gradient ascent on the log-likelihood in log-strengths t (natural log), the virtual
    games as the module describes them: sum over games of log s(t_w - t_l) plus, per player,
    prior * (log s(t_i) + log s(-t_i)), with s the logistic function."""
    players = sorted({p for pair in pairs for p in pair})
    t = dict.fromkeys(players, 0.0)

    def s(x: float) -> float:
        return 1 / (1 + math.exp(-x))
    for _ in range(20000):
        grad = {p: prior * (1 - s(t[p])) - prior * s(t[p]) for p in players}
        for w, lo in pairs:
            g = 1 - s(t[w] - t[lo])
            grad[w] += g
            grad[lo] -= g
        for p in players:
            t[p] += 0.1 * grad[p]
        if max(abs(v) for v in grad.values()) < 1e-12:
            break
    return {p: 1000 + 400 * v / math.log(10) for p, v in t.items()}


SCRIPTED = [("a", "b")] * 5 + [("b", "a")] * 2 + [("b", "c")] * 4 + [("c", "b")] * 3 + \
    [("a", "c")] * 6 + [("c", "d")] * 2 + [("d", "a")] * 1 + [("a", "d")] * 3 + [("d", "b")]


@pytest.mark.parametrize("prior", [1.0, 0.5])
def test_ratings_match_an_independent_fit(prior):
    mine, theirs = lb.fit(SCRIPTED, prior), independent_fit(SCRIPTED, prior)
    assert mine.keys() == theirs.keys() == {"a", "b", "c", "d"}
    for player in mine:
        assert mine[player] == pytest.approx(theirs[player], abs=1e-4)
    assert mine["a"] > mine["b"] > mine["c"]  # a won most, and c lost most to b


def test_an_unbeaten_player_keeps_a_finite_rating():
    ratings = lb.fit([("a", "b")] * 20, prior=1.0)
    assert math.isfinite(ratings["a"]) and ratings["a"] > 1200 > 800 > ratings["b"]


def test_runs_that_all_went_one_way_still_give_an_interval_that_narrows_with_n():
    few = lb.rated(games((A, B, 3)), "model", bootstrap=100, seed=2)
    many = lb.rated(games((A, B, 30)), "model", bootstrap=100, seed=2)
    for table in (few, many):
        a = table["m:a"]
        assert a["low"] < a["rating"] <= a["high"] and a["losses"] == 0
        assert table["m:b"]["low"] <= table["m:b"]["rating"] < table["m:b"]["high"]
    assert many["m:a"]["high"] - many["m:a"]["low"] < few["m:a"]["high"] - few["m:a"]["low"]


def test_intervals_hold_the_point_and_narrow_with_more_runs():
    few = lb.rated(games((A, B, 3), (B, A, 1)), "model", bootstrap=100, seed=1)
    many = lb.rated(games((A, B, 30), (B, A, 10)), "model", bootstrap=100, seed=1)
    for table in (few, many):
        for row in table.values():
            assert row["low"] <= row["rating"] <= row["high"]
    assert many["m:a"]["high"] - many["m:a"]["low"] < few["m:a"]["high"] - few["m:a"]["low"]
    assert few["m:a"]["games"] == 4 and few["m:a"]["wins"] == 3 and few["m:a"]["losses"] == 1
    assert len(few["m:a"]["run_ids"]) == 4
    # seeded: the same seed, the same interval
    again = lb.rated(games((A, B, 3), (B, A, 1)), "model", bootstrap=100, seed=1)
    assert again == few


def test_a_pair_of_one_player_is_left_out():
    same = lb.Player("m:a", "skeptic")
    rated = lb.rated([lb.Game("r1", "debate", A, same)], "model", bootstrap=10)
    assert rated == {}
    by_persona = lb.rated([lb.Game("r1", "debate", A, same)], "persona", bootstrap=10)
    assert set(by_persona) == {"(no persona)", "skeptic"}


def debate_row(run_id: str, winner: str, *, swapped: bool = False, simulated: bool = False,
               pro_answer: str = "408", con_answer: str = "409", expected: str | None = "408",
               models: tuple[str, str] = ("m:a", "m:b")) -> dict:
    sides = {"proponent": "against", "opponent": "for"} if swapped else \
        {"proponent": "for", "opponent": "against"}
    return {"id": run_id, "protocol": "debate", "status": "completed", "simulated": simulated,
            "expected": expected, "label": "x", "question": "q",
            "config": {"seats": {
                "proponent": [{"name": "proponent", "model": models[0], "persona": ""}],
                "opponent": [{"name": "opponent", "model": models[1], "persona": ""}],
                "judge": [{"name": "judge", "model": "m:judge", "persona": ""}]}},
            "result": {"protocol": "debate", "topic": "q", "verdict": "the proponent",
                       "expected": expected, "sides": sides, "winner": winner, "rounds": [{
                "round_number": 1, "proponent_argument": f"so\nANSWER: {pro_answer}",
                "opponent_argument": f"no\nANSWER: {con_answer}"}]}}


def test_debate_verdicts_swapped_pairs_and_the_right_side():
    rows = [debate_row("d1", "proponent"),  # a argued for (right) and won
            debate_row("d2", "proponent", swapped=True),  # a argued against (wrong), won
            debate_row("d3", "opponent", swapped=True),  # b argued for (right), won
            debate_row("d4", "opponent", pro_answer="7", con_answer="8"),  # no right side
            debate_row("d5", "judge")]  # the winner is not an arguing seat: no game
    found = lb.outcomes(rows)
    assert [(g.run_id, g.winner.model) for g in found.games["real"]] == [
        ("d1", "m:a"), ("d2", "m:a"), ("d3", "m:b"), ("d4", "m:b")]
    table = lb.board(found, "real", "model", bootstrap=20).set_index("player")
    assert table.loc["m:a", "games"] == 4 and table.loc["m:a", "wins"] == 2
    assert table.loc["m:a", "right side"].endswith("n=1")  # d1 only
    assert table.loc["m:a", "right side"].startswith("100%")
    assert table.loc["m:a", "wrong side"].startswith("50%")  # d2 won, d3 lost
    assert table.loc["m:a", "wrong side"].endswith("n=2")
    assert table.loc["m:b", "right side"].startswith("50%")  # d3 won, d2 lost
    assert found.games["simulated"] == []


def test_council_rankings_give_every_pair_of_an_ordering():
    seats = {"members": [{"name": f"member {i}", "model": f"m:{x}", "persona": ""}
                         for i, x in enumerate("abc", 1)],
             "chairman": [{"name": "chairman", "model": "m:z", "persona": ""}]}
    row = {"id": "c1", "protocol": "council", "status": "completed", "simulated": False,
           "config": {"seats": seats},
           "result": {"protocol": "council", "question": "q",
                      "rankings": {"member 1": ["member 2", "member 3"],
                                   "member 2": ["member 1", "member 3"],
                                   "member 3": ["member 2", "member 1", "nobody"]}}}
    found = lb.outcomes([row])
    assert sorted((g.winner.model, g.loser.model) for g in found.games["real"]) == [
        ("m:a", "m:c"), ("m:b", "m:a"), ("m:b", "m:c")]


def test_simulated_and_real_runs_are_rated_apart():
    rows = [debate_row("s1", "proponent", simulated=True, models=("m:a", "m:b")),
            debate_row("r1", "opponent", models=("m:a", "m:b")),
            debate_row("r2", "opponent", models=("m:a", "m:b"))]
    found = lb.outcomes(rows)
    real = lb.board(found, "real", "model", bootstrap=20).set_index("player")
    simulated = lb.board(found, "simulated", "model", bootstrap=20).set_index("player")
    assert real.loc["m:b", "rating"] > real.loc["m:a", "rating"]
    assert simulated.loc["m:a", "rating"] > simulated.loc["m:b", "rating"]
    assert simulated.loc["m:a", "games"] == 1 and real.loc["m:a", "games"] == 2
    assert sorted(lb.behind(found, "real", "model", "m:a")["run"]) == ["r1", "r2"]
    assert lb.behind(found, "simulated", "model", "m:a")["run"].tolist() == ["s1"]


def test_stored_debates_and_councils_reach_the_board(store):
    skilled, weak = "simulated?skill=0.95", "simulated?skill=0.05&seed=1"
    for i, question in enumerate(("What is 17 multiplied by 24?", "What is 15% of 80?")):
        expected = ("408", "12")[i]
        for swap in (False, True):
            run_sync(arun_config({"protocol": "debate", "options": {
                "max_rounds": 1, "swap_sides": swap}, "seats": {
                "proponent": [{"name": "pro", "model": skilled}],
                "opponent": [{"name": "con", "model": weak}],
                "judge": [{"name": "judge", "model": "simulated"}]}}, question, store=store,
                expected=expected))
        run_sync(arun_config({"protocol": "council", "seats": {"members": [
            {"name": "x", "model": skilled}, {"name": "y", "model": weak},
            {"name": "z", "model": weak, "persona": "A sceptic."}]}}, question, store=store,
            expected=expected))
    found = lb.read(store)
    assert found.games["real"] == []  # every run here is simulated
    table = lb.board(found, "simulated", "model", bootstrap=30)
    assert set(table["player"]) == {skilled, weak}
    assert (table["low"] <= table["rating"]).all() and (table["rating"] <= table["high"]).all()
    assert table["runs"].max() <= 6 and table["games"].min() > 0
    personas = lb.board(found, "simulated", "persona", bootstrap=10)
    assert "A sceptic." in set(personas["player"])
    runs = lb.behind(found, "simulated", "model", skilled)
    assert set(runs["protocol"]) <= {"debate", "council"} and len(runs) == table.set_index(
        "player").loc[skilled, "runs"]


def test_unknown_board_is_refused():
    with pytest.raises(ValueError):
        lb.board(lb.Outcomes(), "pooled", "model")


def test_the_page_rates_text_only_and_drills_down(db_url):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest
    app = str(Path(__file__).resolve().parent.parent / "app.py")

    def open_page() -> AppTest:
        at = AppTest.from_file(app, default_timeout=60).run()
        return at.switch_page("pages/leaderboard.py").run()
    at = open_page()
    assert not at.exception, at.exception
    assert "No pairwise outcome stored yet" in at.info[0].value
    store = Store(db_url)
    hostile = "<b>boss</b> [link](http://x.test)"
    for swap in (False, True):
        run_sync(arun_config({"protocol": "debate", "options": {
            "max_rounds": 1, "swap_sides": swap}, "seats": {
            "proponent": [{"name": "pro", "model": "simulated?skill=0.95", "persona": hostile}],
            "opponent": [{"name": "con", "model": "simulated?skill=0.1&seed=2"}],
            "judge": [{"name": "judge", "model": "simulated"}]}}, "What is 17 multiplied by 24?",
            store=store, expected="408"))
    at = open_page()
    assert not at.exception, at.exception
    assert any("simulated" in c.value and "never pooled" in c.value for c in at.caption)
    table = at.dataframe[0].value
    assert set(table["player"]) == {"simulated?skill=0.95", "simulated?skill=0.1&seed=2"}
    assert {"rating [95% CI]", "games", "runs", "right side", "wrong side"} <= set(
        table.columns)
    at.radio(key="board-by").set_value("persona").run()
    table = at.dataframe[0].value
    assert hostile in set(table["player"])  # a cell of a data grid: text, never markup
    at.selectbox(key="board-player-simulated-persona").set_value(hostile).run()
    assert not at.exception, at.exception
    assert any(t.value.startswith(hostile + ":") for t in at.text)
    behind = at.dataframe[1].value
    assert len(behind) == 2 and set(behind["protocol"]) == {"debate"}
    assert sum(1 for link in at.get("page_link")) == 2
