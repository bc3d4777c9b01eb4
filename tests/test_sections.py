"""Seed 000's judge-reply parsing: labelled sections and the confidence number (DESIGN 2.1)."""
from __future__ import annotations

import pytest

from engine.analysis import parse_confidence, parse_sections, read_confidence
from engine.analysis.sections import parse_answer

LABELS = ("VERDICT", "REASONING", "PRO SUMMARY", "CON SUMMARY", "CONFIDENCE")


# --------------------------------------------------------------------------- parse_sections
def test_numbered_with_dot():
    text = ("1. VERDICT: The proponent wins\n2. REASONING: Better evidence\n"
            "3. PRO SUMMARY: Cheaper\n4. CON SUMMARY: Riskier\n5. CONFIDENCE: 0.8")
    assert parse_sections(text, LABELS) == {
        "VERDICT": "The proponent wins", "REASONING": "Better evidence",
        "PRO SUMMARY": "Cheaper", "CON SUMMARY": "Riskier", "CONFIDENCE": "0.8"}


def test_numbered_with_parenthesis():
    text = "1) VERDICT: Con\n2) REASONING: Sharper rebuttals\n5) CONFIDENCE: 60%"
    assert parse_sections(text, LABELS) == {"VERDICT": "Con",
                                            "REASONING": "Sharper rebuttals",
                                            "CONFIDENCE": "60%"}


def test_unnumbered_labels():
    text = "VERDICT: Pro\nREASONING: Because"
    assert parse_sections(text, LABELS) == {"VERDICT": "Pro", "REASONING": "Because"}


@pytest.mark.parametrize("line", [
    "**VERDICT:** Pro wins",
    "**VERDICT**: Pro wins",
    "1. **VERDICT:** Pro wins",
    "__VERDICT__: Pro wins",
    "*VERDICT:* Pro wins",
    "### VERDICT: Pro wins",
])
def test_markdown_emphasis_and_headings(line):
    sections = parse_sections(line + "\n**CONFIDENCE:** 0.9", LABELS)
    assert sections["VERDICT"] == "Pro wins"
    assert sections["CONFIDENCE"] == "0.9"


def test_labels_match_case_insensitively_and_keep_canonical_names():
    text = "verdict: pro\nReasoning: solid\nPro Summary: a\ncon summary: b\nConfidence: high"
    assert parse_sections(text, LABELS) == {"VERDICT": "pro", "REASONING": "solid",
                                            "PRO SUMMARY": "a", "CON SUMMARY": "b",
                                            "CONFIDENCE": "high"}


def test_multiword_label_tolerates_extra_spaces():
    assert parse_sections("PRO   SUMMARY: cheap", LABELS) == {"PRO SUMMARY": "cheap"}


def test_text_runs_up_to_the_next_label_over_several_lines():
    text = ("1. VERDICT: Pro\n\n2. REASONING: First line.\nSecond line.\n\n- a bullet\n"
            "3. PRO SUMMARY: p\n5. CONFIDENCE: 0.7")
    sections = parse_sections(text, LABELS)
    assert sections["REASONING"] == "First line.\nSecond line.\n\n- a bullet"
    assert sections["VERDICT"] == "Pro"
    assert sections["PRO SUMMARY"] == "p"


def test_missing_labels_are_absent_not_empty():
    sections = parse_sections("VERDICT: Pro\nCONFIDENCE: 0.5", LABELS)
    assert set(sections) == {"VERDICT", "CONFIDENCE"}
    assert "REASONING" not in sections


def test_label_only_counts_at_the_start_of_a_line():
    text = "VERDICT: The verdict: pro. REASONING: inline is not a label"
    assert parse_sections(text, LABELS) == {
        "VERDICT": "The verdict: pro. REASONING: inline is not a label"}


def test_preamble_before_first_label_is_ignored():
    text = "Here is my evaluation.\n\nVERDICT: Con\nREASONING: r"
    assert parse_sections(text, LABELS) == {"VERDICT": "Con", "REASONING": "r"}


def test_no_labels_or_empty_text():
    assert parse_sections("Just prose, no sections.", LABELS) == {}
    assert parse_sections("", LABELS) == {}
    assert parse_sections("VERDICT: x", []) == {}


def test_the_last_block_wins_a_repeated_first_label():
    # issue 10: what precedes the last VERDICT is taken as quoted (it was "first" before)
    assert parse_sections("VERDICT: first\nVERDICT: second", LABELS) == {"VERDICT": "second"}


# --------------------------------------------------------------------------- parse_answer
@pytest.mark.parametrize("text, answer", [
    ("ANSWER: 0.05", "0.05"),
    ("5. CONFIDENCE: 0.8\nANSWER: $0.05", "$0.05"),
    ("answer: yes", "yes"),                       # case-insensitive, like every label
    ("**ANSWER:** **0.05**", "0.05"),             # markdown emphasis
    ("6) Answer: `42`", "42"),                    # numbering, backticks
    ("ANSWER:\n\n  move to microservices \n", "move to microservices"),  # on the next line
    ("ANSWER: 0.10\nVERDICT: x\nANSWER: 0.05", "0.05"),  # the last line wins
    ("> ANSWER: 0.10\nANSWER: 0.05 \nThanks.", "0.05"),
])
def test_parse_answer_reads_the_last_answer_line(text, answer):
    assert parse_answer(text) == answer


@pytest.mark.parametrize("text", [
    "", "no answer here", "The answer: 0.05 (inline, not a line of its own)",
    "FINAL ANSWER: 3", "ANSWER:", "ANSWERS: 3",
])
def test_parse_answer_without_an_answer_line_is_empty(text):
    assert parse_answer(text) == ""


def test_parse_answer_is_linear_on_a_huge_reply():
    import time
    text = "ANSWER: x\n" * 100_000 + "1" * 100_000 + "\nANSWER: last"
    began = time.monotonic()
    assert parse_answer(text) == "last"
    # quadratic reading of 1.1 MB takes minutes; 10 s leaves room for a loaded machine
    assert time.monotonic() - began < 10.0


# --------------------------------------------------------------------------- parse_confidence
@pytest.mark.parametrize("text, expected", [
    ("0.85", 0.85),
    ("85%", 0.85),
    ("85 %", 0.85),
    ("85", 0.85),          # a bare number in (1, 100] is a percent
    ("8.5/10", 0.85),
    ("8.5 / 10", 0.85),
    ("4/5", 0.8),
    ("high", 0.8),
    ("HIGH", 0.8),
    ("medium", 0.5),
    ("low", 0.2),
    ("Low - the arguments were close", 0.2),
    ("0.85 (fairly sure)", 0.85),
    ("**0.9**", 0.9),
    ("1", 1.0),            # 1 itself is not in (1, 100]: a plain fraction
    ("1.0", 1.0),
    ("0", 0.0),
    ("100", 1.0),
    ("1.7", 0.017),        # DESIGN 2.1's rule read literally: 1 < x <= 100 is a percent
    ("150", 1.0),          # clamped
    ("150%", 1.0),
    ("12/10", 1.0),        # clamped
    ("-0.5", 0.0),         # clamped
    ("-50", 0.0),
])
def test_parse_confidence(text, expected):
    assert parse_confidence(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["garbage", "", "   ", "very sure", "n/a", "about 0.8",
                                  "5/0"])
def test_unreadable_confidence_is_zero_and_flagged(text):
    assert parse_confidence(text) == 0.0
    value, readable = read_confidence(text)
    assert value == 0.0 and readable is False


@pytest.mark.parametrize("text", ["0.85", "85%", "8.5/10", "high", "150", "-3"])
def test_readable_confidence_is_flagged_readable(text):
    assert read_confidence(text)[1] is True


@pytest.mark.parametrize("text", ["0.85", "85", "8.5/10", "medium", "150", "-2", "junk"])
def test_confidence_is_always_within_zero_and_one(text):
    assert 0.0 <= parse_confidence(text) <= 1.0
