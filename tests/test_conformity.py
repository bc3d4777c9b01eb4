"""Conformity measures (engine/analysis/conformity.py) on hand-made rounds with known counts:
right-to-wrong and wrong-to-right flips over their chances, adoption of the previous round's
plurality, a final plurality discarding a correct answer; without an expected answer, with
abstentions, with one agent."""
from __future__ import annotations

from engine.analysis.conformity import Conformity, conformity
from engine.analysis.stances import tally


def test_three_agents_two_rounds_every_count_by_hand():
    # round 1: a right ("1"), b and c wrong ("2", the plurality)
    # round 2: a conforms to "2" (right to wrong, adopts the majority), b stays wrong,
    #          c moves to "1" (wrong to right); the final plurality "2" discards a's answer
    rounds = [{"a": "1", "b": "2", "c": "2"}, {"a": "2", "b": "2", "c": "1"}]
    got = conformity(rounds, "1", "2")
    assert got == Conformity(right_before=1, right_to_wrong=1, wrong_before=2,
                             wrong_to_right=1, off_majority=1, adopted_majority=1,
                             had_correct=True, discarded_correct=True)


def test_three_rounds_sum_over_both_transitions():
    rounds = [{"a": "7", "b": "3", "c": "3"},   # plurality 3; a off it
              {"a": "3", "b": "3", "c": "7"},   # a adopts 3; c leaves it; plurality 3
              {"a": "3", "b": "7", "c": "7"}]   # c (off 3) stays 7; b leaves 3
    got = conformity(rounds, "7", "7")
    # 1->2: a right->wrong, b wrong->wrong, c wrong->right
    # 2->3: a wrong->wrong, b wrong->right, c right->right
    assert (got.right_before, got.right_to_wrong) == (2, 1)
    assert (got.wrong_before, got.wrong_to_right) == (4, 2)
    assert (got.off_majority, got.adopted_majority) == (2, 1)  # a (adopted), c (did not)
    assert got.had_correct is True and got.discarded_correct is False


def test_the_final_plurality_keeping_the_right_answer_discards_nothing():
    rounds = [{"a": "5", "b": "6"}, {"a": "5", "b": "5"}]
    got = conformity(rounds, "5", "5")
    assert got.had_correct is True and got.discarded_correct is False
    assert (got.right_before, got.right_to_wrong, got.wrong_before, got.wrong_to_right) == \
        (1, 0, 1, 1)


def test_nobody_right_has_nothing_to_discard():
    got = conformity([{"a": "2", "b": "3"}, {"a": "3", "b": "3"}], "9", "3")
    assert got.had_correct is False and got.discarded_correct is False
    assert (got.right_before, got.wrong_before, got.wrong_to_right) == (0, 2, 0)


def test_answers_are_scored_with_answers_match():
    # "0.50" is 0.5 and "$1,000" is 1000 (the one scoring rule), so these are right answers
    got = conformity([{"a": "0.50", "b": "3"}, {"a": "0.5", "b": "0.5"}], "0.5", "0.5")
    assert (got.right_before, got.right_to_wrong, got.wrong_before, got.wrong_to_right) == \
        (1, 0, 1, 1)
    assert conformity([{"a": "$1,000"}], "1000", "$1,000").had_correct is True


def test_no_expected_answer_leaves_right_and_wrong_unknown():
    rounds = [{"a": "1", "b": "2", "c": "2"}, {"a": "2", "b": "2", "c": "1"}]
    for expected in (None, "", "   "):
        got = conformity(rounds, expected, "2")
        assert got.right_before is None and got.right_to_wrong is None
        assert got.wrong_before is None and got.wrong_to_right is None
        assert got.had_correct is None and got.discarded_correct is None
        # adoption of the majority needs no expected answer
        assert (got.off_majority, got.adopted_majority) == (1, 1)


def test_an_abstention_gives_no_chance_on_either_side():
    rounds = [{"a": "1", "b": None, "c": "2", "d": "2"},
              {"a": "", "b": "1", "c": "1", "d": "2"}]
    got = conformity(rounds, "1", "1")
    # a abstains in round 2, b in round 1: only c (wrong -> right) and d (wrong -> wrong)
    assert (got.right_before, got.right_to_wrong) == (0, 0)
    assert (got.wrong_before, got.wrong_to_right) == (2, 1)
    assert (got.off_majority, got.adopted_majority) == (0, 0)  # c and d held the plurality
    assert got.had_correct is True and got.discarded_correct is False


def test_an_abstention_never_counts_as_right_or_as_a_given_answer():
    got = conformity([{"a": None, "b": ""}, {"a": "", "b": None}], "1", None)
    assert got == Conformity(right_before=0, right_to_wrong=0, wrong_before=0,
                             wrong_to_right=0, had_correct=False, discarded_correct=False)


def test_a_round_where_everyone_abstained_has_no_majority_to_adopt():
    got = conformity([{"a": None, "b": None}, {"a": "4", "b": "4"}], None, "4")
    assert (got.off_majority, got.adopted_majority) == (0, 0)


def test_an_agent_missing_from_the_next_round_gives_no_chance():
    got = conformity([{"a": "1", "b": "2", "c": "2"}, {"b": "1", "c": "2"}], "1", "1")
    assert (got.right_before, got.wrong_before, got.wrong_to_right) == (0, 2, 1)
    assert got.off_majority == 0  # a, the one off the plurality, gave no round-2 answer


def test_a_tied_round_uses_the_tallys_plurality():
    before = {"a": "1", "b": "2"}
    winner = tally(before).winner
    got = conformity([before, {"a": winner, "b": winner}], None, winner)
    assert (got.off_majority, got.adopted_majority) == (1, 1)


def test_one_agent():
    got = conformity([{"a": "1"}, {"a": "2"}, {"a": "2"}], "2", "2")
    # it always holds its round's plurality, so never off the majority
    assert (got.off_majority, got.adopted_majority) == (0, 0)
    assert (got.right_before, got.right_to_wrong) == (1, 0)
    assert (got.wrong_before, got.wrong_to_right) == (1, 1)
    assert got.had_correct is True and got.discarded_correct is False
    flipped = conformity([{"a": "2"}, {"a": "1"}], "2", "1")
    assert (flipped.right_before, flipped.right_to_wrong) == (1, 1)
    assert flipped.discarded_correct is True


def test_one_round_has_no_transitions():
    got = conformity([{"a": "3", "b": "4", "c": "4"}], "3", "4")
    assert got == Conformity(right_before=0, right_to_wrong=0, wrong_before=0,
                             wrong_to_right=0, had_correct=True, discarded_correct=True)


def test_no_rounds_at_all():
    assert conformity([], None, None) == Conformity()
    got = conformity([], "1", None)
    assert got.had_correct is False and got.discarded_correct is False
    assert got.right_before == 0 and got.off_majority == 0


def test_counts_never_exceed_their_chances():
    rounds = [{"a": "1", "b": "2", "c": "3", "d": None},
              {"a": "2", "b": "2", "c": "1", "d": "1"},
              {"a": "1", "b": "1", "c": "1", "d": "2"}]
    got = conformity(rounds, "1", "1")
    assert 0 <= got.right_to_wrong <= got.right_before
    assert 0 <= got.wrong_to_right <= got.wrong_before
    assert 0 <= got.adopted_majority <= got.off_majority
    # every agent answering in consecutive rounds is one chance, right or wrong
    assert got.right_before + got.wrong_before == 3 + 4
