"""The lexical agreement floor (seed 003): its arithmetic, its levels, and what it gets wrong."""
import pytest

from engine.analysis.agreement import LEVELS, THRESHOLD, Agreement, jaccard, overlap_agreement, tokens


def words(prefix: str, count: int) -> list[str]:
    """`count` distinct letter-only tokens that are not stop words: prefixaa, prefixab, ..."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [prefix + letters[i // 26] + letters[i % 26] for i in range(count)]


def test_tokens_are_lowercase_letter_runs_of_three_or_more_minus_stop_words():
    assert tokens("The Plan, a PLAN; plans & 42 x-ray it's NOT") == {"plan", "plans", "ray"}
    assert tokens("STANCE: adopt") == {"adopt"}  # the label every turn ends with is no content
    assert tokens("") == frozenset() and tokens(None) == frozenset()


def test_jaccard_of_two_empty_sets_is_zero():
    assert jaccard(frozenset(), frozenset()) == 0.0
    assert jaccard(frozenset({"a"}), frozenset({"a", "b"})) == 0.5


def test_seed_example_reads_strong():
    floor = overlap_agreement({
        "Ada": "Adopt the migration plan: the migration plan reduces downtime.",
        "Bo": "The migration plan reduces downtime, so adopt the migration plan."})
    assert isinstance(floor, Agreement)
    assert (floor.level, floor.voters, floor.overlap_fraction) == ("strong", 2, 1.0)
    assert floor.dominant == ["Ada", "Bo"] and floor.dissent == []
    assert floor.pairs[0].similarity == 1.0 and floor.pairs[0].agree


def test_threshold_is_inclusive_at_exactly_0_35():
    shared = words("shared", 7)
    at = overlap_agreement({"a": " ".join(shared + words("left", 6)),
                            "b": " ".join(shared + words("right", 7))})
    assert at.pairs[0].similarity == pytest.approx(7 / 20) and 7 / 20 == THRESHOLD
    assert at.level == "strong"
    below = overlap_agreement({"a": " ".join(shared + words("left", 7)),
                               "b": " ".join(shared + words("right", 7))})  # 7/21
    assert not below.pairs[0].agree and below.level == "none"


def test_empty_texts_are_ignored_and_counted():
    floor = overlap_agreement({"a": "adopt the plan", "b": "", "c": None, "d": "  \n"})
    assert floor.voters == 1 and floor.ignored_turns == 3
    assert floor.level == "none" and floor.dominant == []


@pytest.mark.parametrize("texts", [{}, {"solo": "adopt the migration plan"}])
def test_zero_or_one_voter_is_none(texts):
    floor = overlap_agreement(texts)
    assert floor.level == "none" and floor.voters == len(texts)
    assert floor.overlap_fraction == 0.0 and floor.dominant == []


A = "adopt migration plan downtime"
B = "hire contractors budget overrun"
C = "delay launch marketing review"
D = "rewrite frontend framework choice"


@pytest.mark.parametrize("texts, level, dominant, fraction", [
    ({"a": A, "b": A, "c": A}, "strong", ["a", "b", "c"], 1.0),
    ({"a": A, "b": A, "c": B}, "moderate", ["a", "b"], 2 / 3),  # exactly 2/3 is moderate
    ({"a": A, "b": A, "c": A, "d": A, "e": B, "f": C}, "moderate", ["a", "b", "c", "d"], 4 / 6),
    ({"a": A, "b": A, "c": B, "d": C}, "weak", ["a", "b"], 0.5),
    ({"a": A, "b": B, "c": C}, "none", [], 0.0),
])
def test_levels(texts, level, dominant, fraction):
    floor = overlap_agreement(texts)
    assert floor.level == level and floor.level in LEVELS
    assert floor.dominant == dominant
    assert floor.overlap_fraction == pytest.approx(fraction)
    assert floor.dissent == [n for n in texts if n not in dominant]
    assert floor.dissent_texts == {n: texts[n] for n in floor.dissent}
    assert len(floor.pairs) == len(texts) * (len(texts) - 1) // 2


def test_a_tie_in_group_size_goes_to_the_group_with_the_earliest_voter():
    floor = overlap_agreement({"a": A, "b": B, "c": B, "d": A})
    assert floor.groups == [["a", "d"], ["b", "c"]]
    assert floor.dominant == ["a", "d"] and floor.dissent == ["b", "c"]
    assert floor.level == "weak"


def test_groups_chain_by_single_linkage():
    # a~b and b~c (3 of 7 tokens each), but a and c share 1 of 9: still one group of three.
    floor = overlap_agreement({"a": "alpha bravo charlie delta echo",
                               "b": "charlie delta echo foxtrot golf",
                               "c": "echo foxtrot golf hotel india"})
    agree = {(p.a, p.b): p.agree for p in floor.pairs}
    assert agree == {("a", "b"): True, ("a", "c"): False, ("b", "c"): True}
    assert floor.level == "strong" and floor.dominant == ["a", "b", "c"]


def test_text_without_content_words_votes_but_agrees_with_nobody():
    floor = overlap_agreement({"a": "It is so.", "b": "It is so."})
    assert floor.voters == 2 and floor.level == "none"


# ----------------------------------------------------------------- documented blind spots
def test_blind_spot_paraphrase_is_missed():
    """Same meaning, different words: the floor reads no agreement (a miss)."""
    floor = overlap_agreement({"cfo": "We should cut costs right now.",
                               "cto": "Reduce spending immediately."})
    assert floor.level == "none"
    assert "paraphrase" in overlap_agreement.__doc__


def test_blind_spot_opposing_stances_that_share_topic_words_read_as_agreement():
    """Opposite positions on one topic: the floor reads strong agreement (a false one)."""
    floor = overlap_agreement({
        "pro": "Adopt the migration plan: the migration plan reduces downtime.",
        "con": "Do not adopt the migration plan: the migration plan does not reduce downtime."})
    assert floor.level == "strong" and floor.dominant == ["pro", "con"]
    negated = overlap_agreement({"pro": "adopt the migration plan",
                                 "con": "do not adopt the migration plan"})
    assert negated.pairs[0].similarity == 1.0  # `not` is a stop word
    assert "opposing stances" in overlap_agreement.__doc__


def test_importable_from_analysis():
    from engine.analysis import Agreement as A2, overlap_agreement as oa
    assert oa is overlap_agreement and A2 is Agreement
