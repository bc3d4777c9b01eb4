"""What-if replay (issue 29, engine/analysis/replay.py and engine/reports/whatif.py): stop rules
on scripted rounds with every stop, answer and saving worked out by hand; Hypothesis over
random round tables (the bounds, the monotone thresholds, the uncaught rule's safety claim);
Newcombe's paired interval; and the replay of stored runs, read with one query per kind of
value whatever the number of runs."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import event, text

from engine import Store
from engine.analysis.replay import (
    AGREEMENT_GRID,
    Rule,
    StoredRun,
    answer_after,
    apply,
    outcome,
    replay,
    rules,
    stop_round,
)
from engine.analysis.stats import paired_difference_interval, wilson_interval
from engine.protocols import arun_config, run_sync
from engine.reports import whatif
from engine.store import RunFilters

A = [{"a": "4", "b": "4", "c": "5"},   # agreement 2/3
     {"a": "4", "b": "4", "c": "4"},   # unanimous: c moved
     {"a": "4", "b": "4", "c": "4"}]
B = [{"a": "5", "b": "5", "c": "5"},   # unanimous and wrong
     {"a": "5", "b": "4", "c": "5"},
     {"a": "4", "b": "4", "c": "5"}]   # the run ends right
RUN_A = StoredRun("A", A, "4", True, {1: 100, 2: 200, 3: 300}, {1: 0.01, 2: 0.02, 3: 0.03}, 600)
RUN_B = StoredRun("B", B, "4", True, {1: 10, 2: 20, 3: 30}, {1: 0.0, 2: 0.0, 3: None}, 70)


def test_stop_rounds_by_hand():
    assert [stop_round(Rule("agreement", t), A) for t in (0.5, 2 / 3, 0.75, 1.0)] == [1, 1, 2, 2]
    assert stop_round(Rule("agreement", 0.7), B) == 1
    assert stop_round(Rule("split"), A) == 3 and stop_round(Rule("split"), B) == 1
    # uncaught, N = 3. A: round 1 lead 1 <= 2*1*2; round 2: one agent moved (K = 1), lead 3 >
    # 2*1*1. B: round 1 lead 3 <= 4; round 2 lead 1 <= 2: it runs to its end.
    assert stop_round(Rule("uncaught"), A) == 2
    assert stop_round(Rule("uncaught"), B) == 3


def test_uncaught_bound_grows_with_the_most_agents_that_moved():
    # five agents, four rounds: two moved between rounds 1 and 2, so K = 2 from round 2 on
    rounds = [{"a": "1", "b": "1", "c": "1", "d": "2", "e": "2"},
              {"a": "1", "b": "1", "c": "1", "d": "1", "e": "1"},
              {"a": "1", "b": "1", "c": "1", "d": "1", "e": "1"},
              {"a": "1", "b": "1", "c": "1", "d": "1", "e": "1"}]
    # round 2: lead 5 > 2*2*2 = 8? no; round 3: most still 2 (nobody moved), 5 > 2*2*1 = 4: stop
    assert stop_round(Rule("uncaught"), rounds) == 3
    # five agents, two rounds, unanimous at once: lead 5 > 2*1*1 with K at least 1
    assert stop_round(Rule("uncaught"), rounds[1:3]) == 1
    # an abstention, then an answer, is a change too
    moved = [{"a": "1", "b": None, "c": "1"}, {"a": "1", "b": "1", "c": "1"},
             {"a": "1", "b": "1", "c": "1"}, {"a": "1", "b": "1", "c": "1"}]
    assert stop_round(Rule("uncaught"), moved) == 3  # round 2: 3 > 2*1*2 no; round 3: 3 > 2


def test_a_lone_agent_never_stops():
    lone = [{"agent": "4"}, {"agent": "4"}, {"agent": "4"}]
    assert {stop_round(rule, lone) for rule in rules()} == {3}


def test_no_rounds_and_one_round():
    assert {stop_round(rule, []) for rule in rules()} == {0}
    assert {stop_round(rule, A[:1]) for rule in rules()} == {1}


def test_answer_after_is_the_tally_plurality():
    assert answer_after([{"a": "3", "b": "2"}], 1) == "2"  # a tie: the smallest answer
    assert answer_after([{"a": None, "b": ""}], 1) is None
    assert answer_after(A, 4) is None and answer_after(A, 0) is None
    assert answer_after([{"a": "\\boxed{7}", "b": "7", "c": "8"}], 1) == "7"


def test_apply_by_hand():
    got = apply(Rule("agreement", 0.6), RUN_A)
    assert (got.stop, got.early, got.right, got.tokens) == (1, True, True, 500)
    assert got.dollars == pytest.approx(0.05)
    got = apply(Rule("agreement", 0.6), RUN_B)
    assert (got.stop, got.early, got.right, got.tokens, got.dollars) == (1, True, False, 50, None)
    kept = apply(Rule("split"), RUN_A)  # runs to its end: its own answer, nothing saved
    assert (kept.stop, kept.early, kept.right, kept.tokens, kept.dollars) == (3, False, True, 0,
                                                                              0.0)


def test_outcome_by_hand():
    o = outcome(Rule("agreement", 0.6), [RUN_A, RUN_B])
    assert (o.runs, o.stopped, o.scored, o.right_as_run, o.right_with_rule) == (2, 2, 2, 2, 1)
    assert (o.broken, o.fixed, o.lost) == (1, 0, 0.5)
    assert (o.tokens, o.tokens_saved) == (670, 550)
    assert o.saved_share == pytest.approx(550 / 670)
    assert o.dollars_saved is None and o.unpriced == 1  # B's round 3 had no price: unknown
    assert (o.as_run_low, o.as_run_high) == wilson_interval(2, 2)
    assert (o.with_rule_low, o.with_rule_high) == wilson_interval(1, 2)
    assert (o.lost_low, o.lost_high) == paired_difference_interval(1, 1, 0, 0)
    u = outcome(Rule("uncaught"), [RUN_A, RUN_B])
    assert (u.stopped, u.right_with_rule, u.lost, u.tokens_saved) == (1, 2, 0.0, 300)
    assert u.dollars_saved == pytest.approx(0.03) and u.unpriced == 0


def test_unscored_runs_save_but_are_not_scored():
    unscored = StoredRun("C", A, None, None, {1: 1, 2: 2, 3: 3}, {}, 6)
    o = outcome(Rule("agreement", 0.5), [unscored])
    assert (o.scored, o.accuracy_as_run, o.lost, o.tokens_saved) == (0, None, None, 5)
    assert o.dollars_saved == 0.0  # no cost recorded for its rounds: nothing priced to save


def test_rule_checks():
    with pytest.raises(ValueError):
        Rule("never")
    with pytest.raises(ValueError):
        Rule("agreement", 0.0)
    with pytest.raises(ValueError):
        Rule("agreement")
    assert [r.label for r in rules((0.5,))] == [
        "stop when agreement ≥ 0.50", "debate only when round one splits",
        "stop when the leader cannot be caught"]
    assert len(replay([RUN_A])) == len(AGREEMENT_GRID) + 2


def test_paired_difference_interval():
    low, high = paired_difference_interval(6, 3, 0, 1)
    assert (round(low, 4), round(high, 4)) == (0.0022, 0.5646)
    assert paired_difference_interval(0, 0, 0, 0) == (-1.0, 1.0)
    # no correlation (phi = 0): Newcombe's interval for independent rates
    both, a, b, neither = 2, 2, 2, 2  # phi = (4 - 4) / ... = 0
    la, ua = wilson_interval(4, 8)
    lb, ub = wilson_interval(4, 8)
    low, high = paired_difference_interval(both, a, b, neither)
    assert low == pytest.approx(-math.hypot(0.5 - la, ub - 0.5))
    assert high == pytest.approx(math.hypot(ua - 0.5, 0.5 - lb))
    with pytest.raises(ValueError):
        paired_difference_interval(-1, 0, 0, 0)


@given(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
def test_paired_interval_holds_its_estimate(both, only_a, only_b, neither):
    low, high = paired_difference_interval(both, only_a, only_b, neither)
    n = both + only_a + only_b + neither
    assert -1.0 <= low <= high <= 1.0
    if n:
        assert low - 1e-12 <= (only_a - only_b) / n <= high + 1e-12


AGENTS = ("a", "b", "c", "d", "e")
ANSWERS = st.one_of(st.none(), st.sampled_from(["1", "2", "3"]))


@st.composite
def round_tables(draw, min_rounds=1):
    agents = AGENTS[:draw(st.integers(1, 5))]
    count = draw(st.integers(min_rounds, 5))
    return [{a: draw(ANSWERS) for a in agents} for _ in range(count)]


@settings(max_examples=300, deadline=None)
@given(round_tables())
def test_stops_lie_within_the_run_and_thresholds_are_monotone(rounds):
    for rule in rules():
        assert 1 <= stop_round(rule, rounds) <= len(rounds)
    stops = [stop_round(Rule("agreement", t), rounds) for t in AGREEMENT_GRID]
    assert stops == sorted(stops)


@settings(max_examples=300, deadline=None)
@given(round_tables(min_rounds=2), st.data())
def test_the_uncaught_leader_stays_ahead_under_its_bound(rounds, data):
    """Whenever the rule stops at r, any continuation in which no more agents change per round
    than its bound K keeps the leader strictly ahead at the end."""
    stop = stop_round(Rule("uncaught"), rounds)
    last = len(rounds)
    if stop == last:
        return
    moved = [sum(1 for a in rounds[i] if rounds[i][a] != rounds[i + 1][a])
             for i in range(stop - 1)]
    bound = max([1, *moved])
    leader = answer_after(rounds, stop)
    current = dict(rounds[stop - 1])
    for _ in range(last - stop):
        who = data.draw(st.lists(st.sampled_from(sorted(current)), max_size=bound, unique=True))
        for agent in who:
            current[agent] = data.draw(ANSWERS)
    votes = sorted(((sum(1 for v in current.values() if v == x), x) for x in
                    {v for v in current.values() if v is not None}), reverse=True)
    assert votes and votes[0][1] == leader
    assert len(votes) == 1 or votes[0][0] > votes[1][0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(round_tables(), st.booleans(), st.lists(st.one_of(
    st.none(), st.floats(0, 1)), min_size=5, max_size=5)), min_size=1, max_size=6))
def test_outcome_invariants(table):
    runs = []
    for i, (rounds, right, costs) in enumerate(table):
        tokens = {r: 10 * r for r in range(1, len(rounds) + 1)}
        runs.append(StoredRun(str(i), rounds, "1", right, tokens,
                              {r: costs[r - 1] for r in tokens}, sum(tokens.values()) + 5))
    for o in replay(runs):
        assert o.right_as_run - o.right_with_rule == o.broken - o.fixed
        assert 0 <= o.tokens_saved <= o.tokens and o.stopped <= o.runs
        assert o.lost_low is not None and o.lost_high is not None and o.lost is not None
        assert o.lost_low - 1e-12 <= o.lost <= o.lost_high + 1e-12
        if not o.stopped:
            assert o.tokens_saved == 0 and o.lost == 0 and o.dollars_saved == 0.0
        assert (o.dollars_saved is None) == (o.unpriced > 0)


# --------------------------------------------------------------------------- stored runs
def _run(store: Store, protocol: str, question: str, expected: str, label: str | None = None,
         **options) -> str:
    result = run_sync(arun_config({"protocol": protocol, "options": options, "label": label},
                                  question, store=store, expected=expected))
    return str(result.run_id)


def _stored(store: Store) -> list[str]:
    ids = []
    for n in range(4):
        ids.append(_run(store, "society", f"What is {n} + {n}?", str(2 * n), "society",
                        rounds=3))
        ids.append(_run(store, "single", f"What is {n} + 1?", str(n + 1), "single", rounds=2))
    return ids


def test_round_spend_adds_up_the_turns(store):
    ids = _stored(store)
    spend = store.round_spend(ids)
    turns = store.turns(ids)
    for run_id in ids:
        mine = turns[turns["run_id"] == run_id]
        got = spend[spend["run_id"] == run_id].set_index("round")
        for number, part in mine.groupby("round"):
            assert got.loc[number, "tokens"] == int((part["tokens_in"] + part["tokens_out"]).sum())
            assert got.loc[number, "unpriced"] == 0


def test_what_if_on_stored_runs_by_hand(store):
    ids = _stored(store)
    runs = whatif.round_runs(store, RunFilters(), "simulated")
    assert set(runs["id"]) == set(ids) and set(runs["group"]) == {"society", "single"}
    stored = {r.run_id: r for r in whatif.stored_runs(store, runs)}
    rule = Rule("agreement", 0.5)
    for run_id in ids:
        run = store.get(run_id)
        got = apply(rule, stored[run_id])
        saved = sum(t["tokens_in"] + t["tokens_out"] for t in run["turns"]
                    if t["round"] > got.stop)
        assert got.tokens == saved
        assert stored[run_id].total_tokens == run["tokens_in"] + run["tokens_out"]
        assert stored[run_id].correct == run["correct"]
    table = whatif.what_if_from_store(store, RunFilters(), "simulated", [rule])
    assert list(table["group"]) == [whatif.ALL, "single", "society"]
    single = table[table["group"] == "single"].iloc[0]
    assert single["stopped early"] == 0 and single["tokens saved"].startswith("0 of")
    assert table[table["group"] == whatif.ALL].iloc[0]["runs"] == 8
    # real runs only: none here
    assert whatif.what_if_from_store(store, RunFilters(), "real").empty
    assert whatif.round_runs(store, RunFilters(status="failed"), "simulated").empty


def test_an_unpriced_saved_turn_makes_the_dollars_unknown(store):
    _stored(store)
    rule, society = Rule("agreement", 0.5), RunFilters(protocol="society")
    before = whatif.what_if_from_store(store, society, "simulated", [rule]).iloc[0]
    assert before["dollars saved"] == "$0.0000"  # the simulated model is priced at 0
    stops = {r.run_id: apply(rule, r) for r in whatif.stored_runs(
        store, whatif.round_runs(store, society, "simulated"))}
    early = sorted(run_id for run_id, got in stops.items() if got.stop < 3)
    late = sorted(run_id for run_id, got in stops.items() if got.stop == 3)
    assert early, "some society run agrees by round 2"
    with store.engine.begin() as connection:
        for run_id in [early[0], *late]:
            connection.execute(text("UPDATE turns SET cost_usd = NULL WHERE run_id = :r AND "
                                    "round = 3"), {"r": run_id})
    after = whatif.what_if_from_store(store, society, "simulated", [rule]).iloc[0]
    assert after["dollars saved"] == "unknown (1 run(s) unpriced)"  # the late ones save nothing


def test_both_kinds_stay_apart(store, monkeypatch):
    _stored(store)
    runs = whatif.round_runs(store, RunFilters(), "both")
    assert set(runs["group"]) == {"society (simulated)", "single (simulated)"}
    table = whatif.what_if_from_store(store, RunFilters(), "both", [Rule("split")])
    assert whatif.ALL in set(table["group"])  # one kind present: no suffix needed on the pool


def test_one_query_per_kind_of_value_whatever_the_number_of_runs(tmp_path):
    counts = []
    for many in (1, 6):
        store = Store(f"sqlite:///{tmp_path}/q{many}.db")
        for n in range(many):
            _run(store, "society", f"What is {n} + 2?", str(n + 2), rounds=2)
        statements: list[str] = []
        event.listen(store.engine, "before_cursor_execute",
                     lambda *args, seen=statements: seen.append(args[2]))
        table = whatif.what_if_from_store(store, RunFilters(), "simulated")
        assert not table.empty
        counts.append(len(statements))
    assert counts[0] == counts[1] <= 4


def test_the_chart_is_plain_data(store):
    _stored(store)
    table = whatif.what_if_from_store(store, RunFilters(), "simulated")
    spec = whatif.chart(table, whatif.ALL, "What if")
    values = spec["data"]["values"]
    assert {v["rule"] for v in values} >= {"split", "uncaught"}
    agreement = [v for v in values if v["family"] == "agreement"]
    assert agreement[0]["rule"].startswith("≥ 0.50")
    assert len(values) <= len(AGREEMENT_GRID) + 2
    assert all(0 <= v["saved"] <= 1 and v["n"] == 8 for v in values)
    # thresholds that land on one point are one point, labelled with their range
    rows = table[table["group"] == whatif.ALL]
    points = {(r["saved"], r["rate"], r["low"], r["high"])
              for r in rows[rows["kind"] == "agreement"].to_dict("records")}
    assert len(agreement) == len(points)
    assert spec["layer"][-1]["data"]["values"][0]["as_run"] == pytest.approx(
        table.iloc[0]["as run"])


def test_equal_thresholds_merge_into_one_labelled_point():
    same = {"saved": 0.5, "accuracy": 0.4, "low": 0.1, "high": 0.6, "family": "agreement"}
    values = [{**same, "rule": f"≥ {t}", "name": f"stop when agreement ≥ {t}"}
              for t in ("0.75", "0.80", "0.90")]
    values.append({**same, "saved": 0.2, "rule": "≥ 1.00", "name": "x"})
    values.append({**same, "family": "split", "rule": "split", "name": "y"})
    got = whatif._merged(values)
    assert [v["rule"] for v in got] == ["≥ 0.75…0.90", "≥ 1.00", "split"]
    assert got[0]["name"] == "stop when agreement ≥ 0.75 to ≥ 0.90"


def test_the_insights_what_if_view(tmp_path, monkeypatch):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    _stored(Store(url))
    page = str(Path(__file__).resolve().parent.parent / "pages" / "insights.py")
    at = AppTest.from_file(page, default_timeout=60).run()
    assert not at.exception, at.exception
    at.segmented_control(key="insights-view").set_value("whatif").run()
    assert not at.exception, at.exception
    assert [m.value for m in at.metric][:2] == ["8", "8"]
    shown = at.dataframe[0].value
    assert list(shown["rule"])[-2:] == ["debate only when round one splits",
                                        "stop when the leader cannot be caught"]
    assert all("n=8" in text for text in shown["accuracy with rule"])
    at.selectbox(key="whatif-group").set_value("single").run()
    assert set(at.dataframe[0].value["stopped early"]) == {0}


def test_an_experiments_what_if_tab(tmp_path, monkeypatch):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from engine import experiments as ex
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    store = Store(url)
    _stored(store)  # runs outside the experiment: not replayed in its tab
    questions = [{"question": f"What is {n} + 5?", "expected": str(n + 5)} for n in range(3)]
    plan = ex.plan({"name": "rounds", "questions": questions, "configs": [
        {"protocol": "society", "label": "society x3", "options": {"rounds": 3}},
        {"protocol": "vote", "label": "vote"}]}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"),
                           default_timeout=120).run()
    at.switch_page("pages/experiments.py")
    at.query_params["experiment"] = experiment_id
    at.run()
    at.session_state["exp-tab"] = "What if"
    at.run()
    assert not at.exception, at.exception
    shown = at.dataframe[-1].value
    assert list(shown["runs"].unique()) == [3]  # the experiment's three society runs only
    assert all("n=3" in text for text in shown["accuracy with rule"])


def test_the_reads_on_both_backends(backend):
    """`round_spend` (grouped in SQL) and `run_results(with_config=True)` on SQLite and
    PostgreSQL: the replay and the influence matrix read the same on both."""
    from engine.reports import influence
    ids = _stored(backend)
    spend = backend.round_spend(ids)
    assert set(spend["round"]) == {1, 2, 3} and (spend["unpriced"] == 0).all()
    society = [i for i in ids if backend.get(i)["protocol"] == "society"]
    mine = spend[spend["run_id"] == society[0]]
    assert len(mine) == 3 and int(mine["tokens"].sum()) == sum(
        t["tokens_in"] + t["tokens_out"] for t in backend.get(society[0])["turns"])
    stored = backend.run_results(ids, with_config=True)
    assert all(isinstance(c, dict) and c.get("seats") for c in stored["config"])
    table = whatif.what_if_from_store(backend, RunFilters(), "simulated", [Rule("split")])
    assert table.iloc[0]["runs"] == 8
    cells = influence.from_store(backend, RunFilters(protocol="society"), "simulated")
    assert set(cells["kind"]) <= {"simulated"}
