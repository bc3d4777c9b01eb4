"""Is the consensus earned? (issue 29): every measure of `engine.reports.consensus` on scripted
rounds against hand-computed values, a fuzz over random round tables, the council's round of
answers, the report read from a store, and the simulated world: measured conformity and
persuasion against its declared parameters, and a symmetric world's flat curve."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import update

from engine import CouncilResult, Store
from engine.analysis import votes
from engine.analysis.consensus_stats import auarc, mean_interval, odds_ratio, selective_curve
from engine.analysis.stats import wilson_interval
from engine.protocols import REGISTRY
from engine.protocols.panel import run_panel
from engine.protocols.society import run_society
from engine.reports import consensus
from engine.simulated.world import majority, same
from engine.store import RunFilters
from engine.store.schema import RunRow


# --------------------------------------------------------------------------- the arithmetic
def test_mean_interval_by_hand():
    got = mean_interval([0.5, 0.0, 0.25, 0.25])
    assert got.value == pytest.approx(0.25) and got.n == 4
    half = 1.959963984540054 * math.sqrt(0.125 / 3) / 2
    assert (got.low, got.high) == pytest.approx((0.25 - half, 0.25 + half))
    assert (got.low, got.high) == pytest.approx((0.05, 0.45), abs=1e-3)
    one = mean_interval([0.3])
    assert one.value == 0.3 and math.isnan(one.low) and math.isnan(one.high)
    assert math.isnan(mean_interval([]).value)


def test_fix_break_odds_ratio_by_hand():
    got = odds_ratio(6, 2)
    assert got.value == pytest.approx(3.0) and got.n == 8
    assert (got.low, got.high) == pytest.approx((0.6055, 14.864), rel=1e-3)
    # a zero count: Haldane-Anscombe adds 0.5 to both
    zero = odds_ratio(4, 0)
    assert zero.value == pytest.approx(9.0)
    se = math.sqrt(1 / 4.5 + 1 / 0.5)
    assert zero.low == pytest.approx(9 * math.exp(-1.959963984540054 * se))
    assert (zero.low, zero.high) == pytest.approx((0.4846, 167.16), rel=1e-3)
    assert math.isnan(odds_ratio(0, 0).value)
    with pytest.raises(ValueError):
        odds_ratio(-1, 2)


def test_auarc_and_the_selective_curve_by_hand():
    by_hand = (1 + 1 / 2 + 2 / 3 + 2 / 4) / 4
    assert auarc([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]) == pytest.approx(by_hand)
    # a tie counts at its mean accuracy, whatever order it is listed in
    assert auarc([0.9, 0.9, 0.5], [1, 0, 1]) == pytest.approx((0.5 + 0.5 + 2 / 3) / 3)
    assert auarc([0.9, 0.9, 0.5], [0, 1, 1]) == auarc([0.9, 0.9, 0.5], [1, 0, 1])
    assert auarc([0.2, 0.4], [1, 1]) == 1.0 and math.isnan(auarc([], []))
    curve = selective_curve([0.9, 0.8, 0.8, 0.5], [1, 1, 0, 0])
    assert [(p["coverage"], p["n"], p["right"]) for p in curve] == [
        (0.25, 1, 1), (0.75, 3, 2), (1.0, 4, 2)]
    assert (curve[1]["low"], curve[1]["high"]) == wilson_interval(2, 3)


# --------------------------------------------------------------------------- scripted rounds
# config A, four runs of three agents and two rounds, worked out by hand:
#   run  round 1        round 2   final  expected  round-1 plurality  first/final share
#   1    x x y          x x x     x      x         x (right)          2/3 / 1
#   2    x y y          y y y     y      x         y (wrong)          2/3 / 1
#   3    x y z          y y z     y      y         x (tie: smallest)  1/3 / 2/3   a fix
#   4    x x y          y y y     y      x         x (right)          1/3 / 1     a break
SCRIPT = [
    ([["x", "x", "y"], ["x", "x", "x"]], "x", "x", 0.9),
    ([["x", "y", "y"], ["y", "y", "y"]], "y", "x", 0.9),
    ([["x", "y", "z"], ["y", "y", "z"]], "y", "y", 0.6),
    ([["x", "x", "y"], ["y", "y", "y"]], "y", "x", 0.6),
]


def _frame(script, group="A", simulated=False, judge=True):
    rows = []
    for number, (rounds, answer, expected, confidence) in enumerate(script):
        mapped = [dict(zip("abc", r, strict=False)) for r in rounds]
        rows.append({"id": f"{group}{simulated}{number}", "group": group, "protocol": "society",
                     "simulated": simulated, "correct": same(answer, expected),
                     "expected": expected, "answer": answer,
                     "judge": confidence if judge else None, "consensus": None,
                     "round_votes": votes(mapped)})
    return pd.DataFrame(rows)


def test_every_measure_on_scripted_rounds():
    measures = consensus.run_measures(_frame(SCRIPT))
    assert measures["inflation"].tolist() == pytest.approx([1 / 3] * 4)
    assert measures["first_share"].tolist() == pytest.approx([2 / 3, 2 / 3, 1 / 3, 1 / 3])
    assert measures["final_share"].tolist() == pytest.approx([1, 1, 2 / 3, 1])
    assert measures["first_right"].tolist() == [True, False, False, True]
    row = consensus.configurations(measures).iloc[0]
    assert row["configuration"] == "A" and row["runs"] == 4 and row["multi_round"] == 4
    assert (row["inflation"], row["inflation_low"], row["inflation_high"]) == pytest.approx(
        (1 / 3, 1 / 3, 1 / 3))
    assert row["accuracy"] == 0.5 and row["first_accuracy"] == 0.5
    # paired gain: differences (0, 0, +1, -1): mean 0, s² = 2/3, half-width 1.96·√(2/3/4)
    half = 1.959963984540054 * math.sqrt(2 / 3 / 4)
    assert (row["gain"], row["gain_low"], row["gain_high"]) == pytest.approx((0, -half, half))
    # agreement rose by the same third in all four runs, accuracy did not: four runs and an
    # interval of zero width are no evidence, so no verdict (five or more, a real interval)
    assert not row["manufactured"] and row["too_few"]
    assert (row["fixes"], row["breaks"]) == (1, 1)
    assert row["fix_break_or"] == pytest.approx(1.0)
    assert (row["or_low"], row["or_high"]) == pytest.approx(
        (math.exp(-1.959963984540054 * math.sqrt(2)), math.exp(1.959963984540054 * math.sqrt(2))))
    # ECE: round one's shares 2/3, 2/3 (right, wrong) and 1/3, 1/3 (right, wrong): gaps 1/6
    assert row["first_share_ece"] == pytest.approx(1 / 6)
    # final: three runs at 1.0 with one right (gap 2/3), one at 2/3 right (gap 1/3)
    assert row["final_share_ece"] == pytest.approx(3 / 4 * 2 / 3 + 1 / 4 * 1 / 3)
    assert row["stated_ece"] == pytest.approx(0.5 * 0.4 + 0.5 * 0.1)
    assert row["final_share_auarc"] == pytest.approx((1 / 3 * 3 + 2 / 4) / 4)
    assert row["first_share_auarc"] == pytest.approx(0.5)
    assert row["stated_n"] == row["first_share_n"] == row["final_share_n"] == 4
    assert consensus.flag_text(row).startswith("Too few runs for a verdict")
    # the three curves are drawn on the same runs, each with its ECE
    curves = consensus.calibrations(measures, "A")
    assert [c["signal"] for c in curves] == list(consensus.SOURCES.values())
    assert [c["n"] for c in curves] == [4, 4, 4]
    assert curves[1]["ece"] == pytest.approx(row["final_share_ece"])
    points = consensus.selective(measures, "A")
    assert points[points["source"] == "final vote share"]["coverage"].tolist() == [0.75, 1.0]


def test_no_flag_without_inflation_and_simulated_runs_kept_apart():
    unanimous = [([["x", "x", "x"], ["x", "x", "x"]], "x", "x", 0.9)] * 3
    frame = pd.concat([_frame(SCRIPT), _frame(SCRIPT, simulated=True),
                       _frame(unanimous, group="B", judge=False)], ignore_index=True)
    table = consensus.configurations(consensus.run_measures(frame), order=["B", "A"])
    assert table["configuration"].tolist() == ["B", "A", "A (simulated)"]
    assert table["simulated"].tolist() == [False, False, True]
    b = table.iloc[0]
    assert b["inflation"] == 0 and not b["manufactured"] and b["runs"] == 3
    assert b["stated_n"] == 0 and b["first_share_n"] == 3
    assert math.isnan(b["fix_break_or"])  # nothing fixed, nothing broken: nothing to say
    assert table.iloc[1]["runs"] == table.iloc[2]["runs"] == 4  # never pooled
    shown = consensus.table_view(table)
    assert shown["simulated"].tolist() == ["", "", "simulated"]
    assert shown["manufactured consensus"].tolist() == ["too few runs (under 5)"] * 3


def test_a_stated_confidence_that_is_the_final_vote_share_is_not_drawn_twice():
    frame = _frame(SCRIPT, judge=False)
    frame["consensus"] = [1.0, 1.0, 2 / 3, 1.0]  # a society's consensus: the final share
    measures = consensus.run_measures(frame)
    assert [c["signal"] for c in consensus.calibrations(measures, "A")] == [
        "round-one vote share", "final vote share"]
    assert consensus.configurations(measures).iloc[0]["stated_n"] == 0


@pytest.mark.parametrize("stored", [None, [], "x", [{"x": "2"}], [{"x": True}], [["x"]],
                                    [{"x": -1}], {"x": 1}, [{3: 1}]])
def test_damaged_round_votes_are_missing_never_trusted(stored):
    assert consensus.clean_votes(stored) is None
    frame = _frame(SCRIPT[:1]).assign(round_votes=[stored])
    assert consensus.run_measures(frame).empty


_answer = st.one_of(st.none(), st.sampled_from(["x", "y", "z", "", "  ", "X!", "<b>x</b>"]))
_round = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), _answer, max_size=4)
_run = st.tuples(st.lists(_round, min_size=1, max_size=4), st.one_of(st.none(), _answer),
                 st.one_of(st.none(), _answer),
                 st.one_of(st.none(), st.floats(min_value=0, max_value=1)))


@settings(max_examples=60, deadline=None)
@given(st.lists(_run, min_size=1, max_size=8))
def test_random_round_tables_never_crash_and_stay_in_range(runs):
    rows = [{"id": str(i), "group": "g" if i % 2 else "h", "protocol": "society",
             "simulated": bool(i % 3 == 0), "correct": None if expected is None else
             same(answer, expected), "expected": expected, "answer": answer,
             "judge": judge, "consensus": None, "round_votes": votes(rounds)}
            for i, (rounds, answer, expected, judge) in enumerate(runs)]
    measures = consensus.run_measures(pd.DataFrame(rows))
    assert len(measures) == len(runs)
    for column in ("agreement_first", "agreement_final", "first_share", "final_share"):
        values = measures[column].dropna()
        assert ((values >= 0) & (values <= 1)).all()
    inflation = measures["inflation"].dropna()
    assert ((inflation >= -1) & (inflation <= 1)).all()
    table = consensus.configurations(measures)
    assert table["runs"].sum() == len(runs)
    for row in table.to_dict("records"):
        consensus.flag_text(row)
        for key in consensus.SOURCES:
            assert row[f"{key}_n"] <= row["runs"]
            if row[f"{key}_n"]:
                assert 0 <= row[f"{key}_ece"] <= 1 and 0 <= row[f"{key}_auarc"] <= 1
    consensus.table_view(table)
    for name in table["configuration"]:
        consensus.calibrations(measures, name)
        consensus.selective(measures, name)


# --------------------------------------------------------------------------- the council
def test_a_council_gives_one_round_its_members_own_answers():
    result = CouncilResult(protocol="council", question="q",
                           answers={"m1": "so\nANSWER: 4", "m2": "four, no line"},
                           borda={"m1": 1, "m2": 0, "m3": 0})
    spec = REGISTRY[result.protocol]
    assert spec.answers_by_round(result) == [{"m1": "4", "m2": None, "m3": None}]
    assert spec.metrics(result)["round_votes"] == [{"4": 1}]


# --------------------------------------------------------------------------- from the store
def test_the_report_reads_stored_votes_and_works_out_old_runs_once(tmp_path):
    db = Store(f"sqlite:///{tmp_path / 'c.db'}")
    for q in range(6):
        run_society(f"What is {q}+{q}?", agents=[f"simulated?seed={q}"] * 3, rounds=2,
                    store=db, expected=str(2 * q), label="society")
    fresh = consensus.from_store(db, RunFilters(), "simulated")
    assert fresh.simulated == "all" and fresh.configurations == ["society (simulated)"]
    assert int(fresh.table.iloc[0]["runs"]) == 6
    assert consensus.from_store(db, RunFilters(), "real").table.empty  # never pooled
    # a run stored before metrics kept round_votes: worked out from its stored result
    runs = db.runs(with_config=False)
    with db.engine.begin() as connection:
        for run_id, metrics in zip(runs["id"], runs["metrics"], strict=True):
            connection.execute(update(RunRow).where(RunRow.id == run_id).values(
                metrics=json.dumps({k: v for k, v in metrics.items() if k != "round_votes"})))
    assert all("round_votes" not in m for m in db.runs(with_config=False)["metrics"])
    old = consensus.from_store(db, RunFilters(), "simulated")
    pd.testing.assert_frame_equal(old.table, fresh.table)


# --------------------------------------------------------------------------- the simulated world
def test_measured_conformity_in_a_society_agrees_with_the_declared_parameter():
    """Society shows each agent the others' answers and no verdict, so the simulated world's
    only move is conformity: an agent off the others' majority joins it with probability
    `conformity`, and no agent moves elsewhere."""
    moved = chances = elsewhere = 0
    for q in range(150):
        result = run_society(f"q{q}", agents=[f"simulated?conformity=0.3&seed={q}"] * 5,
                             rounds=3, expected=str(10 + q))
        rounds = REGISTRY[result.protocol].answers_by_round(result)
        for before, after in zip(rounds, rounds[1:], strict=False):
            for agent, now in after.items():
                own = before[agent]
                common = majority([a for n, a in before.items() if n != agent and a])
                if common is None or same(common, own):
                    elsewhere += not same(now, own)
                    continue
                chances += 1
                moved += same(now, common)
                elsewhere += not same(now, own) and not same(now, common)
    low, high = wilson_interval(moved, chances)
    assert chances > 300 and elsewhere == 0
    assert low <= 0.3 <= high, (moved, chances)
    assert not low <= 0.6 <= high  # the measure can tell another world apart


def test_measured_persuasion_in_a_panel_agrees_with_the_declared_parameter():
    """In a panel the critic's verdict is what persuasion answers to: with conformity 0, a
    debater told `flawed` or `unsupported` moves with probability `persuasion`, and a
    debater told `sound` never moves."""
    spec = "simulated?conformity=0&persuasion=0.4&seed={q}"
    moved = chances = unprompted = 0
    for q in range(150):
        model = spec.format(q=q)
        result = run_panel(f"q{q}", debaters=[model] * 3, critic=model, judge=model,
                           expected=str(10 + q))
        before, after = REGISTRY[result.protocol].answers_by_round(result)
        for agent, now in after.items():
            note = result.critique.for_persona(agent)
            if note is None or not before[agent]:
                continue
            if note.verdict in ("flawed", "unsupported"):
                chances += 1
                moved += not same(now, before[agent])
            else:
                unprompted += not same(now, before[agent])
    low, high = wilson_interval(moved, chances)
    assert chances > 150 and unprompted == 0
    assert low <= 0.4 <= high, (moved, chances)
    assert not low <= 0.7 <= high


def _share_right_by_round(model: str, runs: int = 120) -> list[list[float]]:
    out: list[list[float]] = []
    for q in range(runs):
        result = run_society(f"q{q}", agents=[model.format(q=q)] * 5, rounds=3,
                             expected=str(10 + q))
        out.append([sum(same(a, str(10 + q)) for a in r.values()) / len(r)
                    for r in REGISTRY[result.protocol].answers_by_round(result)])
    return out


def test_a_symmetric_world_gives_a_flat_accuracy_by_round_curve():
    """Imitation copies a random other agent's answer, right or wrong alike (the voter model):
    the expected share of right answers is a martingale ("Debate or Vote"), so each
    round-to-round difference of the mean share right has an interval that holds 0. The same
    questions in a conforming world (agents join the majority, which is more often right)
    rise: the test can fail."""
    flat = _share_right_by_round("simulated?skill=0.6&conformity=0&persuasion=0&imitation=0.6"
                                 "&seed={q}")
    rising = _share_right_by_round("simulated?skill=0.6&conformity=0.6&persuasion=0&seed={q}")
    moves = 0
    for k in (1, 2):
        step = mean_interval([run[k] - run[k - 1] for run in flat])
        assert step.low <= 0 <= step.high, (k, step)
        moves += sum(run[k] != run[k - 1] for run in flat)
        up = mean_interval([run[k] - run[k - 1] for run in rising])
        if k == 1:
            assert up.low > 0, up
    assert moves > 60  # agents did move: flat because the moves cancel, not for want of them


def test_a_verdict_needs_five_runs_and_a_real_interval_and_says_when_accuracy_fell():
    """Manufactured consensus over enough runs with a real interval; a label whose accuracy
    fell says so, never 'Not flagged'."""
    rose = [([("1", "1", "2"), ("1", "1", "1")], "1", "1", 0.9),  # inflation 1/3, right
            ([("1", "2", "3"), ("1", "1", "1")], "1", "2", 0.9),  # inflation 2/3, wrong
            ([("1", "1", "2"), ("2", "2", "2")], "2", "1", 0.9),  # right -> wrong
            ([("2", "2", "1"), ("1", "1", "1")], "1", "1", 0.9),  # wrong -> right
            ([("1", "1", "2"), ("1", "1", "1")], "1", "1", 0.9),
            ([("1", "2", "3"), ("1", "1", "1")], "1", "1", 0.9)]
    row = consensus.configurations(consensus.run_measures(_frame(rose))).iloc[0]
    assert row["multi_round"] == 6 and row["inflation_low"] > 0
    assert row["inflation_high"] > row["inflation_low"] and row["gain_low"] <= 0
    assert row["manufactured"]
    assert consensus.flag_text(row).startswith("Manufactured consensus")
    fell = [([("1", "1", "1"), ("2", "2", "2")], "2", "1", 0.9)] * 5 + [
        ([("1", "1", "2"), ("2", "2", "2")], "2", "1", 0.9)]
    row = consensus.configurations(consensus.run_measures(_frame(fell))).iloc[0]
    assert row["accuracy_fell"] and row["gain_high"] < 0
    assert consensus.flag_text(row).startswith("Accuracy fell: accuracy 100% in round one")


def test_the_same_rise_in_every_run_is_no_interval_and_no_verdict():
    """Six runs whose agreement rose by the same third: an interval of rounding error (its
    width about 1e-17, not 0) is no evidence; it read 'Manufactured consensus'."""
    same = [([("1", "1", "2"), ("1", "1", "1")], "1", "1", 0.9),
            ([("2", "2", "1"), ("2", "2", "2")], "2", "1", 0.9)] * 3
    row = consensus.configurations(consensus.run_measures(_frame(same))).iloc[0]
    assert row["multi_round"] == 6 and row["inflation"] == pytest.approx(1 / 3)
    assert row["inflation_high"] - row["inflation_low"] < 1e-9
    assert not row["manufactured"] and row["too_few"]
    assert consensus.flag_text(row).startswith("Too few runs for a verdict")
