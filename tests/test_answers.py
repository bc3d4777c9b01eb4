"""Answer extraction on replies real models write: boxed, last number, letters, yes/no, stance,
and none at all (an abstention, never a guess)."""
from __future__ import annotations

import pytest

from engine.analysis import extract_answer

NUMBERS = [
    ("Let's compute: 12+15*21+0-3*27 = 12+315+0-81 = 246. So the answer is \\boxed{246}.",
     "246"),
    ("After reviewing the other agents' answers (246 and 264), I agree: \\boxed{246}", "246"),
    ("First try \\boxed{246}; on reflection the total is still \\boxed{246}.", "246"),
    ("3 + 63 + 19 - 378 = -293\n\nFinal answer: -293", "-293"),
    ("The result is \u2212122.", "-122"),
    ("x = -5", "-5"),
    ("The answer is \\boxed{-7}", "-7"),
    ("Janet sells 16 - 3 - 4 = 9 eggs at $2 each, so she earns 9 * 2 = $18.\n#### 18", "18"),
    ("She makes $18 every day at the farmers' market.", "18"),
    ("\\boxed{\\$18}", "18"),
    ("\\boxed{18 \\text{ dollars}}", "18"),
    ("The total is $1,234.50.", "1234.5"),
    ("The answer is 1,000,000.", "1000000"),
    ("The ball costs $0.50", "0.5"),
    ("0.50", "0.5"),
    ("The answer is 18.00.", "18"),
    ("It covers 40 km per hour.", "40"),
    ("The train travels at 40mph.", "40"),
    ("The answer is 25%.", "25"),
    ("\\boxed{\\frac{1}{6}}", "1/6"),
    ("The probability is 1/6.", "1/6"),
    ("A farmer had 17 sheep; all but 9 ran away, so 9 are left.", "9"),
    ("First 5, then 7, so the answer is 12 apples. I'm 90% sure.", "12"),
]

LETTERS = [
    ("The answer is (B).", "B"),
    ("B", "B"),
    ("**C**", "C"),
    ("Answer: D) because the others fail", "D"),
    ("I would pick option c here.", "C"),
    ("\\boxed{B}", "B"),
    ("Having weighed them all, (A) is the only consistent choice.", "A"),
]

YES_NO = [
    ("Yes, the statement holds.", "yes"),
    ("No.", "no"),
    ("**Yes**", "yes"),
    ("Final answer: no, it does not follow.", "no"),
]

STANCES = [
    ("Bootstrap.", "bootstrap"),
    ("Final answer: Emily", "emily"),
    ("The answer is neither, since survivors are not buried.", "neither"),
    ("STANCE: Modular monolith first\nREASONS: less risk", "modular monolith first"),
    ("\\boxed{second}", "second"),
]

NONE = [
    (None, None),
    ("", None),
    ("   \n  ", None),
    ("I don't know.", None),
    ("No one can say for sure.", None),
    ("I cannot determine this from the information given.", None),
    ("Final answer: unknown", None),
    ("\\boxed{}", None),
    # DESIGN 4: two different declared answers are a hedge, which declares none
    ("First try \\boxed{250}; on reflection the correct total is \\boxed{246}.", None),
    ("ANSWER: 41\nANSWER: 43\nANSWER: 42", None),
]


@pytest.mark.parametrize(("reply", "expected"), NUMBERS + LETTERS + YES_NO + STANCES + NONE)
def test_extract_answer(reply, expected):
    assert extract_answer(reply) == expected


@pytest.mark.parametrize(("reply", "expected"), [
    ("$18", "18"), ("18 dollars", "18"), ("18.0", "18"), ("-293", "-293"), ("$7,000", "7000")])
def test_expected_answers_read_the_same_way(reply, expected):
    assert extract_answer(reply) == expected
