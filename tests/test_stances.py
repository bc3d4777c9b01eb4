"""Stances, tallies, confidence and mind changes (seed 002): the deterministic Python."""
import json

import pytest
from pydantic import ValidationError

from engine import ConfigError
from engine.analysis import (Confidence, Tally, classify_changes, derive_confidence,
                             detect_mind_changes, normalize_stance, tally)


@pytest.mark.parametrize("raw, expected", [
    # the seed's case: these all tally together
    ("$0.05", "0.05"), ("0.05", "0.05"), (".05", "0.05"), ("0.050", "0.05"), ("$.05", "0.05"),
    # currency
    ("€12.50", "12.5"), ("£1.10", "1.1"), ("$1,000", "1000"), ("-$5", "-5"), ("$20", "20"),
    # percent: spelled one way, never turned into a fraction
    ("5%", "5%"), ("5 %", "5%"), ("5 percent", "5%"), ("5.0%", "5%"), ("25 per cent", "25%"),
    # number words
    ("five", "5"), ("Twenty-five", "25"), ("forty two", "42"), ("one hundred and five", "105"),
    ("a hundred", "100"), ("nineteen hundred", "1900"), ("zero", "0"),
    ("two thousand three hundred", "2300"),
    # words that only look like numbers, and runs that are not numbers, stay
    ("someone", "someone"), ("one-time payment", "one-time payment"), ("five five", "five five"),
    # %g formatting (twelve significant digits; whole numbers exact)
    ("100.00", "100"), ("0.30000000000000004", "0.3"), ("3.14159265358979", "3.14159265359"),
    ("12345678901234567890", "12345678901234567890"), ("-0.0", "0"), ("+5", "5"),
    ("−5", "-5"), ("1/6", "1/6"),
    # quotes, brackets, emphasis, trailing punctuation
    ('"0.05"', "0.05"), ("'Bootstrap'", "bootstrap"), ("“$0.05”", "0.05"), ("[0.05].", "0.05"),
    ("(hybrid)", "hybrid"), ("**Bootstrap**", "bootstrap"), ("`47`", "47"), ("47.", "47"),
    ("Venture capital!", "venture capital"),
    # whitespace and case
    ("  Venture   Capital  ", "venture capital"), ("\tRust\n", "rust"),
    # empty
    ("", ""), ("   ", ""), (None, ""), ('""', ""), ("[]", ""),
])
def test_normalize_stance_table(raw, expected):
    assert normalize_stance(raw) == expected


def test_normalize_is_idempotent():
    for raw in ("$0.05", "Twenty-five percent", "  (Hybrid). ", "1,234.500"):
        once = normalize_stance(raw)
        assert normalize_stance(once) == once


def test_tally_plurality_counts_and_ratio():
    t = tally({"a": "$0.05", "b": ".05", "c": "0.10"})
    assert t.ballots == {"a": "0.05", "b": "0.05", "c": "0.1"}
    assert t.counts == {"0.05": 2, "0.1": 1}
    assert (t.winner, t.winner_votes, t.total, t.tied) == ("0.05", 2, 3, False)
    assert t.ratio == pytest.approx(2 / 3)
    assert t.abstentions == []


def test_tally_tie_is_broken_by_the_smallest_stance_and_flagged():
    t = tally({"x": "venture capital", "y": "bootstrap", "z": "hybrid"})
    assert t.winner == "bootstrap" and t.tied and t.winner_votes == 1
    assert list(t.counts) == ["bootstrap", "hybrid", "venture capital"]
    two_two = tally({"a": "b", "b": "b", "c": "a", "d": "a"})
    assert two_two.winner == "a" and two_two.tied


def test_tally_abstentions_count_in_total_but_are_never_a_position():
    t = tally({"a": "yes", "b": None, "c": "  ", "d": "yes"})
    assert t.abstentions == ["b", "c"]
    assert t.ballots["b"] is None and t.ballots["c"] is None
    assert t.counts == {"yes": 2} and None not in t.counts and "" not in t.counts
    assert (t.total, t.winner_votes, t.positions) == (4, 2, 2)
    assert t.ratio == pytest.approx(0.5)


def test_tally_everyone_abstains():
    t = tally({"a": None, "b": ""})
    assert t.winner is None and t.winner_votes == 0 and t.ratio == 0.0 and not t.tied
    assert t.counts == {} and t.abstentions == ["a", "b"]
    c = derive_confidence(t)
    assert c.level == "low" and c.ratio == 0.0 and "abstained" in c.reason


@pytest.mark.parametrize("empty", [{}, [], ()])
def test_tally_of_nothing_is_a_config_error(empty):
    with pytest.raises(ConfigError) as err:
        tally(empty)
    assert err.value.code == "input"


def test_tally_accepts_pairs_and_bare_stances():
    assert tally([("a", "x"), ("b", "x")]).ballots == {"a": "x", "b": "x"}
    assert tally(["x", None, "y"]).ballots == {"1": "x", "2": None, "3": "y"}
    with pytest.raises(ConfigError):
        tally("x")


@pytest.mark.parametrize("stances, level, ratio", [
    (["x", "x", "y", "z"], "low", 0.5),        # plurality but no strict majority
    (["x", "x", "x", "y"], "medium", 0.75),    # strict majority
    (["x", "x", "x", "x"], "high", 1.0),       # unanimous
    (["x", "x", "y", "y"], "low", 0.5),        # 2-2 tie
    (["x", "y", "z"], "low", 1 / 3),           # the seed's 1/1/1 spread
    (["x", "x", "y"], "medium", 2 / 3),
    (["x", "x", None], "medium", 2 / 3),       # an abstention rules out "unanimous"
    (["x", None], "low", 0.5),                 # 1 of 2 is not a strict majority
    (["x"], "high", 1.0),
])
def test_confidence_boundaries(stances, level, ratio):
    c = derive_confidence(tally(stances))
    assert c.level == level
    assert c.ratio == pytest.approx(ratio)
    assert c.reason == {"high": "unanimous", "medium": "a majority",
                        "low": "split — no majority; flagged"}[level]


def test_tally_and_confidence_are_frozen_and_json_serialisable():
    t = tally({"a": "$0.05", "b": None})
    c = derive_confidence(t)
    again = Tally.model_validate_json(t.model_dump_json())
    assert again == t and Confidence.model_validate(json.loads(c.model_dump_json())) == c
    with pytest.raises(ValidationError):
        t.winner = "other"


def test_mind_changes_are_measured_on_normalised_stances():
    before = {"cautious": "$0.05", "creative": "$0.10", "literal": "0.05"}
    after = {"literal": "Five cents", "creative": "0.05", "cautious": "0.05"}
    # $0.05 -> 0.05 is a rewrite, not a change; the order is `after`'s
    assert detect_mind_changes(before, after) == ["literal", "creative"]
    assert detect_mind_changes({"a": "$0.05"}, {"a": "0.05"}) == []


def test_mind_changes_ignore_missing_and_abstaining_seats():
    before = {"a": "x", "b": None, "c": "x"}
    after = {"a": None, "b": "y", "c": "y", "d": "z"}
    assert detect_mind_changes(before, after) == ["c"]


def test_classify_changes_against_a_known_answer():
    before = {"p": "$0.10", "m": "0.05", "s": "0.10", "h": "$0.05", "x": None}
    after = {"p": ".05", "m": "0.1", "s": "0.2", "h": "0.05", "x": "0.05"}
    assert classify_changes(before, after, "$0.05") == {
        "p": "persuaded", "m": "misled", "s": "switched", "h": "held"}
    with pytest.raises(ConfigError):
        classify_changes(before, after, "  ")


def test_short_stances_are_remembered_and_long_ones_read_afresh():
    """A run reads each stance several times: a short one is normalised once and remembered
    (a memo of a pure function, bounded in entries and in each text's length); a long one
    gives the same form and is never kept."""
    from engine.analysis.stances import MEMO_CHARS, _normalized
    _normalized.cache_clear()
    assert [normalize_stance(s) for s in ("$0.05", "$0.05", "0.050")] == ["0.05"] * 3
    assert _normalized.cache_info().hits == 1 and _normalized.cache_info().currsize == 2
    long = "Forty-two, " * MEMO_CHARS
    assert normalize_stance(long) == ("42, " * MEMO_CHARS).strip(" ,")
    assert _normalized.cache_info().currsize == 2 and _normalized.cache_info().maxsize == 4096
