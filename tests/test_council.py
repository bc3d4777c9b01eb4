"""The council (DESIGN 2.9, karpathy/llm-council): three stages, anonymous rankings, the Borda
count with its tie-breaks, unreadable rankings abstaining, failures, the order seed, the CLI,
and a fuzz of the FINAL RANKING parser."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from plugins.council_members import Q, member, prompts_of
from protocol_contract import ProtocolContract

from engine import ConfigError, CouncilResult, Seat, arun_council, run_council
from engine import experiments as ex
from engine.analysis.sections import parse_answer
from engine.protocols import REGISTRY, estimate
from engine.protocols.council_result import (
    aggregate,
    borda,
    draw_labels,
    label_of,
    mean_ranks,
    read_ranking,
    top_confidence,
)
from engine.reports.runs import result_blocks
from engine.simulated.world import same

ROOT = Path(__file__).resolve().parent.parent


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


# --------------------------------------------------------------------------- anonymity
def test_no_ranking_prompt_holds_its_own_answer_nor_any_name_persona_or_model(recording_model):
    tokens = ["tok-amber-1", "tok-birch-2", "tok-cedar-3", "tok-dune-4"]
    names = ["Zephyrine", "Quillon", "Marrowby", "Ostrakon"]
    personas = [f"You are PERSONA-MARK-{i}, a careful analyst." for i in range(4)]
    models = [member(recording_model, t, prefs=list(tokens)) for t in tokens]
    chair_model = member(recording_model, "tok-chair")
    seats = [Seat(n, m, persona=p) for n, m, p in zip(names, models, personas, strict=True)]
    chair = Seat("Presidente", chair_model, persona="CHAIR-PERSONA-MARK")
    result = run_council(Q, members=seats, chairman=chair, expected="4")
    assert len(result.turns) == 2 * 4 + 1
    specs = {t.model for t in result.turns} | {"RecordingModel"}
    ranking_prompts = []
    for i, model in enumerate(models):
        prompts = prompts_of(model)
        assert len(prompts) == 1
        prompt = prompts[0]
        ranking_prompts.append(prompt)
        assert tokens[i] not in prompt  # never its own answer
        assert all(t in prompt for j, t in enumerate(tokens) if j != i)  # every other one
        for forbidden in [*names, "Presidente", *personas, "PERSONA-MARK", *specs]:
            assert forbidden not in prompt, forbidden
    # the turn log says the same of what was sent: no system prompt, no persona
    for turn in (t for t in result.turns if t.phase == "rank"):
        assert [m["role"] for m in turn.messages] == ["user"]
        assert not any(p in m["content"] for m in turn.messages for p in personas)
    # every ranker ranked the three others, and no one ranked itself
    assert set(result.rankings) == set(names)
    for ranker, ranked in result.rankings.items():
        assert ranker not in ranked and sorted(ranked) == sorted(set(names) - {ranker})
        assert list(result.labels[ranker]) == ["Response A", "Response B", "Response C"]
    assert result.answer == "4" and result.correct is True


def test_the_chairman_sees_every_answer_under_a_label_and_the_aggregate_ranking(
        recording_model):
    tokens = ["tok-a", "tok-b", "tok-c"]
    models = [member(recording_model, t, prefs=["tok-b", "tok-c", "tok-a"]) for t in tokens]
    chair_model = member(recording_model, "tok-chair", chair="All weighed.\nANSWER: four")
    seats = [Seat(f"m{i}", m) for i, m in enumerate(models)]
    result = run_council(Q, members=seats, chairman=Seat("chief", chair_model))
    (prompt,) = prompts_of(chair_model, "chairman")
    assert all(t in prompt for t in tokens) and "m0" not in prompt and "m1" not in prompt
    label_b = next(label for label, seat in result.chair_labels.items() if seat == "m1")
    assert f"1. {label_b} (" in prompt
    assert result.top == "m1" and result.answer == "four"
    assert result.final_text == "All weighed.\nANSWER: four"


# --------------------------------------------------------------------------- Borda count
def test_borda_on_scripted_rankings(recording_model):
    m = [member(recording_model, "t0", prefs=["t1", "t2"]),
         member(recording_model, "t1", prefs=["t2", "t0"]),
         member(recording_model, "t2", prefs=["t1", "t0"])]
    result = run_council(Q, members=[Seat(f"m{i}", x) for i, x in enumerate(m)],
                         chairman="simulated")
    assert result.rankings == {"m0": ["m1", "m2"], "m1": ["m2", "m0"], "m2": ["m1", "m0"]}
    assert result.borda == {"m0": 0, "m1": 2, "m2": 1}
    assert result.top == "m1" and result.aggregate == ["m1", "m2", "m0"]
    c = result.confidence
    assert c is not None and c.level == "medium" and c.ratio == pytest.approx(2 / 3)
    # labels de-anonymise the rankings
    for ranker, ranked in result.rankings.items():
        assert set(result.labels[ranker].values()) == set(ranked)
    metrics = REGISTRY[result.protocol].metrics(result)
    assert metrics["top"] == "m1" and metrics["consensus"] == pytest.approx(0.6667)
    assert metrics["first_answer"] == "4" and metrics["members"] == 3
    assert metrics["rankings_read"] == 3 and metrics["top_points"] == 2


def test_borda_arithmetic_and_its_tie_breaks():
    rankings = {"r1": ["a", "b", "c"], "r2": ["b"], "r3": ["c", "a"]}
    # a: 2 (r1) + 0 (r3); b: 1 (r1) + 0 (r2, who ranked one); c: 0 (r1) + 1 (r3)
    assert borda(rankings, ["a", "b", "c", "d"]) == {"a": 2, "b": 1, "c": 1, "d": 0}
    # b and c tie on 1 point: b's mean rank (2 + 1) / 2 beats c's (3 + 1) / 2
    assert aggregate(rankings, ["a", "b", "c", "d"]) == ["a", "b", "c"]
    assert mean_ranks(rankings) == {"a": 1.5, "b": 1.5, "c": 2.0}
    # equal points and equal mean rank: the earlier seat
    even = {"r1": ["a", "b"], "r2": ["b", "a"]}
    assert aggregate(even, ["a", "b"]) == ["a", "b"]
    assert aggregate(even, ["b", "a"]) == ["b", "a"]
    assert aggregate({}, ["a", "b"]) == [] and top_confidence({}, None).level == "low"
    assert top_confidence(even, "a").ratio == 0.5 and top_confidence(even, "a").level == "low"
    assert top_confidence({"r": ["a"], "s": ["a", "b"]}, "a").level == "high"


@pytest.mark.parametrize("reply, read", [
    ("FINAL RANKING:\n1. Response B\n2. Response A", ["Response B", "Response A"]),
    ("FINAL RANKING:\n1. Response B\n2. Response B\n3. Response A",
     ["Response B", "Response A"]),  # a label named twice counts once, at its first place
    ("FINAL RANKING:\n1. Response Z\n2. Response A", ["Response A"]),  # Z was not shown
    ("FINAL RANKING:\n1. Response A\n2. Response B\n\nOn reflection:\n**Final ranking:**\n"
     "1. response b\n2. response a", ["Response B", "Response A"]),  # the last block
    ("Response A is better than Response B.", None),  # no block: abstains
    ("FINAL RANKING:\n1. the first one", None),  # a block naming no label: abstains
    ("", None),
])
def test_the_final_ranking_block_is_read(reply, read):
    assert read_ranking(reply, ["Response A", "Response B"]) == read


def test_an_unreadable_ranking_abstains_with_a_warning(recording_model):
    m = [member(recording_model, "t0", ranking="Both are fine, I cannot choose."),
         member(recording_model, "t1", prefs=["t0", "t2"]),
         member(recording_model, "t2",
                ranking="FINAL RANKING:\n1. Response B\n1. Response B\n2. Response A")]
    result = run_council(Q, members=[Seat(f"m{i}", x) for i, x in enumerate(m)],
                         chairman="simulated")
    assert "m0" not in result.rankings and set(result.rankings) == {"m1", "m2"}
    assert len(result.rankings["m2"]) == 2  # named twice, counted once
    assert any("ranker m0" in w and "abstains" in w for w in result.warnings)
    (turn,) = [t for t in result.turns if t.phase == "rank" and t.seat == "m0"]
    assert turn.ok and any("FINAL RANKING" in w for w in turn.warnings)
    assert sum(result.borda.values()) == 1 + 1  # two rankers of two answers, 1 + 0 each
    assert len(result.labels) == 3  # every ranker's labels are kept for audit


# --------------------------------------------------------------------------- calls, failures
@pytest.mark.parametrize("n", [2, 5, 8])
def test_calls_are_twice_the_members_plus_one(n):
    result = run_council(Q, members=["simulated"] * n, chairman="simulated", expected="4")
    assert len(result.turns) == 2 * n + 1
    assert [t.phase for t in result.turns].count("rank") == n
    assert estimate({"protocol": "council", "seats": {
        "members": [{"name": f"m{i}"} for i in range(n)]}}) == {
        "calls": 2 * n + 1, "waves": 3, "tokens": (2 * n + 1) * 600}
    assert all(len(shown) == n - 1 for shown in result.labels.values())


def test_members_answer_and_rank_concurrently_in_three_waves():
    from engine.simulated.model import SimulatedChatModel
    seats = [Seat(f"s{i}", SimulatedChatModel(parley_spec="simulated?latency=0.2",
                                              latency=0.2)) for i in range(4)]
    result = asyncio.run(arun_council(Q, members=seats, chairman="simulated?latency=0.2"))
    assert len(result.turns) == 9 and result.duration < 1.5  # one after another: 1.8 s
    phases = [t.phase for t in result.turns]
    assert phases == ["answer"] * 4 + ["rank"] * 4 + ["chair"]


@pytest.mark.parametrize("kw", [{"members": ["simulated"]}, {"members": ["simulated"] * 9},
                                {"members": ["simulated"] * 3, "seed": -1}])
def test_limits_are_refused_before_any_call(kw):
    with pytest.raises(ConfigError):
        run_council(Q, chairman="simulated", **kw)


def test_a_failing_member_is_not_shown_for_ranking(recording_model):
    broken = recording_model([RuntimeError("down"), "FINAL RANKING:\n1. Response A"])
    m = [broken, member(recording_model, "t1", prefs=["t2", "t0"]),
         member(recording_model, "t2", prefs=["t1", "t0"])]
    result = run_council(Q, members=[Seat(f"m{i}", x) for i, x in enumerate(m)],
                         chairman="simulated", retries=0)
    assert len(result.turns) == 7 and "m0" not in result.answers
    assert all("m0" not in shown.values() for shown in result.labels.values())
    assert result.labels["m1"] == {"Response A": "m2"}
    assert result.rankings["m0"] in (["m1"], ["m2"])  # it still ranks the others
    assert any("member m0: failed" in w for w in result.warnings)
    (failed,) = [t for t in result.turns if t.phase == "answer" and t.seat == "m0"]
    assert not failed.ok and "down" in failed.error and failed.reply == ""


def test_a_ranker_whose_call_fails_abstains(recording_model):
    m = [recording_model(["Reasoning t0.\nANSWER: 4", RuntimeError("rank down")]),
         member(recording_model, "t1", prefs=["t0", "t2"]),
         member(recording_model, "t2", prefs=["t0", "t1"])]
    result = run_council(Q, members=[Seat(f"m{i}", x) for i, x in enumerate(m)],
                         chairman="simulated", retries=0)
    assert "m0" in result.answers and "m0" not in result.rankings
    assert any(w.startswith("ranker m0: failed (") and "abstains" in w
               for w in result.warnings)
    assert result.top == "m0" and result.borda == {"m0": 2, "m1": 0, "m2": 0}
    assert result.confidence is not None and result.confidence.level == "high"


def test_a_failing_chairman_gives_no_answer(recording_model, store):
    result = run_council(Q, members=["simulated"] * 3,
                         chairman=recording_model([RuntimeError("chair down")]),
                         expected="4", retries=0, store=store)
    assert result.answer == "" and result.final_text == ""
    assert result.correct is False and result.unanswered  # DESIGN 4: no answer is wrong
    assert result.top is not None  # the ranking stands without the chairman
    assert any("chairman failed" in w for w in result.warnings)
    assert REGISTRY["council"].lost(result) == ["the chairman"]
    run = store.get(result.run_id)
    assert run["status"] == "completed" and run["degraded_run"] and run["unanswered"]


def test_a_member_without_an_answer_line_is_ranked_as_written(recording_model):
    m = [recording_model(["Just prose, tok-prose.", "FINAL RANKING:\n1. Response A"]),
         member(recording_model, "t1", prefs=["tok-prose", "t2"]),
         member(recording_model, "t2", prefs=["tok-prose", "t1"])]
    result = run_council(Q, members=[Seat(f"m{i}", x) for i, x in enumerate(m)],
                         chairman="simulated")
    assert result.answers["m0"] == "Just prose, tok-prose." and result.top == "m0"
    (turn,) = [t for t in result.turns if t.phase == "answer" and t.seat == "m0"]
    assert turn.ok and any("no ANSWER line" in w for w in turn.warnings)


def test_a_chairman_without_an_answer_line_leaves_the_run_unanswered(recording_model, store):
    """DESIGN 4: the chairman returned nothing usable, so the council has no answer: wrong,
    unanswered, and a degraded run (its decisive call gave nothing)."""
    result = run_council(Q, members=["simulated"] * 2, expected="4", store=store,
                         chairman=recording_model(["I would rather not say."]))
    assert result.final_text == "I would rather not say." and result.answer == ""
    assert result.correct is False and result.unanswered
    run = store.get(result.run_id)
    assert run["status"] == "completed" and run["degraded_run"] and run["lost"] == "the chairman"
    assert run["correct"] is False and run["unanswered"] is True


# --------------------------------------------------------------------------- order, seed
def test_the_order_seed_is_reproducible_and_seed_draws_the_labels():
    def labels(**kw):
        r = run_council(Q, members=[Seat(f"m{i}") for i in range(5)], chairman="simulated",
                        **kw)
        return r.order, r.labels

    assert labels(order_seed=3) == labels(order_seed=3)
    assert labels(seed=2) == labels(seed=2)
    assert labels()[0] == [f"m{i}" for i in range(5)]
    orders = {tuple(labels(order_seed=s)[0]) for s in range(6)}
    assert len(orders) > 1
    drawn = {json.dumps(labels(seed=s)[1], sort_keys=True) for s in range(6)}
    assert len(drawn) > 1
    # the labels are drawn per ranker: not every ranker sees the others in one order
    _, one = labels(seed=0)
    assert len({tuple(shown.values())[:1] for shown in one.values()}) > 1


def test_draw_labels_is_stable_across_processes():
    code = ("from engine.protocols.council_result import draw_labels;"
            "print(draw_labels(['a','b','c','d'], 7, 2))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONHASHSEED": str(h)}).stdout
            for h in (1, 2)}
    assert runs == {str(draw_labels(["a", "b", "c", "d"], 7, 2)) + "\n"}


# --------------------------------------------------------------------------- the simulated model
def test_the_simulated_council_ranks_its_own_answer_first_and_chairs_the_top():
    result = run_council(Q, members=[Seat(f"m{i}", f"simulated?seed={i}&skill=0.5")
                                     for i in range(6)],
                         chairman="simulated", expected="4")
    briefs = {seat: parse_answer(text) for seat, text in result.answers.items()}
    for ranker, ranked in result.rankings.items():
        mine = briefs[ranker]
        agree = [same(briefs[s], mine) for s in ranked]
        assert agree == sorted(agree, reverse=True)  # its own answer's equals come first
    assert result.answer == briefs[result.top]
    assert result.correct == (result.answer == "4")


# --------------------------------------------------------------------------- CLI, experiments
def test_the_cli_runs_a_council(tmp_path):
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    done = subprocess.run([sys.executable, "-m", "engine", "run", "council", "What is 2+2?",
                           "--db", db], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PARLEY_DB_URL": db})
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert "Council" in first and "7 calls" in first and "(simulated)" in first
    assert "top:" in done.stdout


def test_an_experiment_runs_councils(store):
    plan = ex.plan({"questions": [{"question": Q, "expected": "4"}], "repeats": 2,
                    "configs": [{"protocol": "council", "label": "council"}]}, store)
    assert plan.calls == 2 * 7
    experiment_id = ex.create(store, plan)
    state = ex.run_experiment(store, experiment_id)
    assert state.status == "completed" and state.done == 2
    runs = store.runs(experiment_id=experiment_id)
    assert int(runs["calls"].sum()) == 14 and set(runs["protocol"]) == {"council"}
    assert result_blocks(store.get(runs["id"].iloc[0]))


# --------------------------------------------------------------------------- fuzz
LABELS = [label_of(i) for i in range(7)]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400), st.integers(1, 7))
def test_fuzz_the_parser_never_invents_a_label(text, n):
    read = read_ranking(text, LABELS[:n])
    assert read is None or (read and len(read) == len(set(read))
                            and set(read) <= set(LABELS[:n]))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_fuzz_a_ranking_written_with_noise_reads_back(data):
    n = data.draw(st.integers(1, 7))
    order = data.draw(st.permutations(LABELS[:n]))
    noise = st.text(alphabet=st.characters(blacklist_characters="\x00", codec="utf-8"),
                    max_size=30).filter(lambda t: "response" not in t.lower()
                                        and "ranking" not in t.lower())
    repeat = data.draw(st.lists(st.sampled_from(order), max_size=3))
    earlier = data.draw(st.permutations(LABELS[:n]))
    text = (data.draw(noise) + "\nFINAL RANKING:\n" + "\n".join(earlier) + "\n"
            + data.draw(noise) + "\nfinal ranking:\n"
            + "\n".join(f"{k}. {label} {data.draw(noise).replace(chr(10), ' ')}"
                        for k, label in enumerate([*order, *repeat], 1)))
    assert read_ranking(text, LABELS[:n]) == list(order)
