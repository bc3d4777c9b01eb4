"""engine.reports.compare: which runs a comparison names, the configuration diff, transcripts
aligned by (phase, round), answers side by side and the text diff, on stored and hand-made runs."""
from __future__ import annotations

import json

import pytest

from plugins.reruns import rerun

from engine import Store
from engine.protocols import arun_config, run_sync
from engine.reports import compare
from engine.services.rerun import original_of, rerun_options

HOSTILE = "<script>alert('x')</script> **bold** [link](http://evil.example) <img src=x>"
QUESTION = "A bat and a ball cost $1.10 in total. The bat costs $1.00 more. The ball?"


@pytest.fixture
def store(tmp_path):
    return Store(f"sqlite:///{tmp_path / 'parley.db'}")


def society(store: Store, rounds: int, label: str = "society") -> dict:
    result = run_sync(arun_config({"protocol": "society", "model": "simulated",
                                   "options": {"rounds": rounds}}, QUESTION, store=store,
                                  label=label, expected="$0.05"))
    return store.get(result.run_id)


def turn(seat: str, phase: str, number: int, reply: str, **parsed) -> dict:
    return {"seat": seat, "phase": phase, "round": number, "reply": reply, "parsed": parsed,
            "status": "ok", "error": ""}


def made(run_id: str, turns: list[dict], **fields) -> dict:
    return {"id": run_id, "protocol": "panel", "question": "Q?", "config": {}, "turns": turns,
            "metrics": {}, "status": "completed", **fields}


def test_parse_ids_keeps_order_drops_blanks_and_repeats():
    assert compare.parse_ids("b, a,,b , c") == ["b", "a", "c"]
    assert compare.parse_ids(["a,b", "c", "a"]) == ["a", "b", "c"]
    assert compare.parse_ids(None) == [] and compare.parse_ids(" , ") == []


def test_the_diff_marks_exactly_the_differing_keys():
    seat = {"name": "a", "model": "simulated", "persona": ""}
    first = {"id": "r1", "label": "x", "expected": "4", "config": {
        "protocol": "vote", "seats": {"voters": [seat, dict(seat, name="b")]},
        "options": {}, "prompts": {}, "label": None, "model": "simulated"}}
    second = {"id": "r2", "label": "y", "expected": "4", "config": {
        "protocol": "vote", "seats": {"voters": [seat, dict(seat, name="b",
                                                            model="simulated?skill=0.2")]},
        "options": {}, "prompts": {"propose": "Say {question}"}, "label": None,
        "model": "simulated"}}
    frame = compare.config_diff([first, second])
    differing = set(frame.loc[frame["differs"], "key"])
    assert differing == {"seats.voters[1].model", "prompts", "prompts.propose", "run.label"}
    same = frame.set_index("key").loc["seats.voters[0].model"]
    assert not same["differs"] and list(same.iloc[1:]) == ["simulated", "simulated"]
    absent = frame.set_index("key").loc["prompts.propose"]
    assert list(absent.iloc[1:]) == [compare.ABSENT, "Say {question}"]
    assert list(frame.columns) == ["key", "differs", *compare.column_names([first, second])]
    assert compare.config_diff([first, first])["differs"].sum() == 0


def test_a_two_round_society_aligns_with_a_one_round_society(store):
    two, one = society(store, 2, "two rounds"), society(store, 1, "one round")
    frame = compare.aligned_transcript([two, one])
    names = compare.column_names([two, one])
    assert list(zip(frame["phase"], frame["round"])) == [("answer", 1), ("revise", 2)]
    assert frame.iloc[1][names[1]] == compare.ABSENT  # the 1-round run has no round 2
    assert frame.iloc[1][names[0]].count("agent ") == 3
    assert all(frame.iloc[0][name].count("stance 0.05") == 3 for name in names)
    diff = compare.config_diff([two, one])
    assert set(diff.loc[diff["differs"], "key"]) == {"options.rounds", "run.label"}
    answers = compare.answers([two, one]).set_index("measure")
    assert answers.loc["answer"].iloc[1:].tolist() == ["0.05", "0.05"]
    assert not answers.loc["answer", "differs"] and answers.loc["calls", "differs"]


def test_a_configuration_nested_800_deep_still_diffs():
    """A database written outside Parley may hold a configuration nested far deeper than
    Parley writes one (it bounds its own at 64 levels); the diff reads it as before."""
    deep = json.loads("[" * 800 + "1" + "]" * 800)
    frame = compare.config_diff([{"id": "a", "config": {"options": deep}}, {"id": "b"}])
    assert frame["key"].tolist() == ["options" + "[0]" * 800, "run.label", "run.expected"]
    assert frame["differs"].tolist() == [True, False, False]


def test_mind_changes_are_marked_on_the_seat_that_changed():
    run = made("m1", [turn("ann", "propose", 1, "x", stance="$0.10"),
                      turn("bob", "propose", 1, "y", stance="0.05"),
                      turn("critic", "critique", 1, "long prose", assessments=[]),
                      turn("ann", "rebuttal", 2, "z", stance="$0.05"),
                      turn("bob", "rebuttal", 2, "w", stance="0.05")])
    marks = compare.marked_turns(run)
    assert [(m["seat"], m["stance"], m["changed_from"]) for m in marks] == [
        ("ann", "0.1", None), ("bob", "0.05", None), ("critic", None, None),
        ("ann", "0.05", "0.1"), ("bob", "0.05", None)]
    frame = compare.aligned_transcript([run])
    assert frame["changes"].tolist() == [0, 0, 1]
    other = made("m2", [turn("bob", "propose", 1, "v", stance="7")])
    stances = compare.seat_stances([run, other]).set_index("seat")
    names = compare.column_names([run, other])
    assert stances[names[0]].to_dict() == {"ann": "0.1 → 0.05 (1 change)", "bob": "0.05"}
    assert stances[names[1]].to_dict() == {"ann": compare.ABSENT, "bob": "7"}  # no critic
    assert "CHANGED MIND (0.1 → 0.05)" in frame.iloc[2][compare.column_names([run])[0]]


def test_hostile_text_stays_text():
    first = made("h1", [turn(HOSTILE, "propose", 1, HOSTILE)], label=HOSTILE,
                 question=HOSTILE, metrics={"answer": HOSTILE})
    second = made("h2", [turn("b", "propose", 1, "plain")], label="plain")
    names = compare.column_names([first, second])
    cell = compare.aligned_transcript([first, second]).iloc[0][names[0]]
    assert HOSTILE in cell and cell.startswith(HOSTILE)
    diff = compare.config_diff([first, second]).set_index("key").loc["run.label"]
    assert diff[names[0]] == HOSTILE
    assert compare.headline([first, second])["question"].iloc[0] == HOSTILE
    (_, text), = compare.closing_diffs([first, second])
    assert f"-answer: {HOSTILE}" in text.splitlines() and f"-{HOSTILE}" in text.splitlines()


def test_a_json_reply_reads_as_its_fields_and_anything_else_as_it_came():
    assert compare.readable('{"stance": "$0.05", "why": ["a", 1]}') == \
        'stance: $0.05\nwhy: ["a", 1]'
    for reply in ("{broken", "plain prose", "[1, 2]", "{}", HOSTILE):
        assert compare.readable(reply) == reply


def test_text_diff_is_empty_for_equal_texts_and_marks_lines():
    assert compare.text_diff("a\nb", "a\nb") == ""
    lines = compare.text_diff("a\nb", "a\nc", "one", "two").splitlines()
    assert lines[:2] == ["--- one", "+++ two"] and "-b" in lines and "+c" in lines


def test_a_missing_id_is_reported_and_the_rest_are_compared(store):
    run = society(store, 1)
    found = compare.load(store, ["nope", run["id"]])
    assert [r["id"] for r in found.runs] == [run["id"]]
    assert found.missing == [("nope", "there is no such run in this database")]
    many = compare.load(store, [run["id"]] + [f"x{i}" for i in range(compare.MAX_RUNS + 2)])
    assert many.dropped == 3 and len(many.missing) == compare.MAX_RUNS - 1


def test_a_rerun_names_its_original_and_only_its_original(store):
    first = society(store, 1)
    again = rerun(store, first)
    assert original_of(again) == first["id"] and original_of(first) is None
    assert rerun_options(again)["tags"] == [f"rerun-of:{again['id']}"]  # not the grandparent
