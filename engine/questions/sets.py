"""The registry of named question sets, each with its provenance (source, licence).

One registry serves `question_set`, experiment specs (`questions: NAME`), the Experiments
page's picker and `python -m engine sets`, so a set added here appears everywhere at once.
The literature's sets are rebuilt exactly as the papers built them: `arithmetic` by Du et
al.'s generator, `gsm8k` from the test split shipped in `engine/questions/gsm8k/`, and
`gsm8k-100` as Du et al.'s seeded shuffle of it, `mmlu-pro-math` as the LLM-council
governance study's 150 MMLU-Pro math questions (shipped in `engine/questions/mmlu_pro_math/`).
"""
from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from engine.models import ConfigError
from engine.questions.bundled import DEFINITE, DEMO, OPEN, Question
from engine.questions.files import Item

PARLEY = "Parley's own bundled questions"
PARLEY_LICENCE = "MIT (Parley)"
DU = "Du et al. 2023, arXiv 2305.14325"
GSM8K = "GSM8K test split, Cobbe et al. 2021, arXiv 2110.14168 (openai/grade-school-math)"
GSM8K_LICENCE = "MIT (OpenAI 2021)"
MMLU_PRO = ("MMLU-Pro test split, math category, Wang et al. 2024, arXiv 2406.01574 "
            "(TIGER-Lab/MMLU-Pro); the first 150, as andybhall/llm-council-governance ran them")
MMLU_PRO_LICENCE = "MIT (TIGER-Lab 2024)"
LETTERS = "ABCDEFGHIJ"
MMLU_PRO_ASK = ("This is a challenging question requiring careful reasoning. Think through it "
                "step by step.\nChoose the best answer from the options above. Your answer "
                "should be a single letter (A through J).")


@dataclass(frozen=True)
class SetInfo:
    """A named set's provenance and size, as the app and the CLI list it."""

    name: str
    source: str
    licence: str
    size: int


@dataclass(frozen=True)
class _Entry:
    source: str
    licence: str
    load: Callable[[], list[tuple[str, str | None]]]


def _own(questions: list[Question]) -> Callable[[], list[tuple[str, str | None]]]:
    return lambda: [(q.text, q.expected) for q in questions]


@cache
def _arithmetic() -> list[tuple[str, str | None]]:
    """Du et al.'s arithmetic problems: numpy's legacy generator seeded 0 (their
    `np.random.seed(0)`, here a private `RandomState(0)` drawing the same numbers without
    touching numpy's global state), six integers in [0, 30) per problem, 100 problems."""
    import numpy as np

    rng = np.random.RandomState(0)
    problems: list[tuple[str, str | None]] = []
    for _ in range(100):
        a, b, c, d, e, f = (int(x) for x in rng.randint(0, 30, size=6))
        problems.append((f"What is the result of {a}+{b}*{c}+{d}-{e}*{f}?",
                         str(a + b * c + d - e * f)))
    return problems


def _records(folder: str) -> list[dict[str, Any]]:
    """The records of the shipped `engine/questions/FOLDER/test.jsonl`, in file order."""
    text = resources.files("engine.questions").joinpath(folder, "test.jsonl").read_text(
        encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@cache
def _gsm8k() -> list[tuple[str, str | None]]:
    """The 1,319 GSM8K test problems in file order; expected is the number after `####`."""
    return [(record["question"], record["answer"].rsplit("####", 1)[1].strip().replace(",", ""))
            for record in _records("gsm8k")]


@cache
def _gsm8k_100() -> list[tuple[str, str | None]]:
    """Du et al.'s GSM8K subset: `random.seed(0)`, shuffle the test list as read, first 100
    (a private `random.Random(0)` gives the same order and leaves the global one alone)."""
    problems = list(_gsm8k())
    random.Random(0).shuffle(problems)
    return problems[:100]


@cache
def _mmlu_pro_math() -> list[tuple[str, str | None]]:
    """The 150 MMLU-Pro math questions shipped in `engine/questions/mmlu_pro_math/`, asked
    as the governance study asked them (the question, its lettered options, the request for
    one letter); expected is the answer's letter."""
    problems: list[tuple[str, str | None]] = []
    for record in _records("mmlu_pro_math"):
        options = "\n".join(f"{letter}. {option}" for letter, option in
                             zip(LETTERS, record["options"], strict=False))
        problems.append((f"{record['question']}\n\n{options}\n\n{MMLU_PRO_ASK}",
                         LETTERS[int(record["answer_index"])]))
    return problems


SETS: dict[str, _Entry] = {
    "definite": _Entry(PARLEY, PARLEY_LICENCE, _own(DEFINITE)),
    "open": _Entry(PARLEY, PARLEY_LICENCE, _own(OPEN)),
    "demo": _Entry(PARLEY, PARLEY_LICENCE, _own(DEMO)),
    "arithmetic": _Entry(f"{DU}, their arithmetic generator (np.random.seed(0))",
                         PARLEY_LICENCE, _arithmetic),
    "gsm8k": _Entry(GSM8K, GSM8K_LICENCE, _gsm8k),
    "gsm8k-100": _Entry(f"{GSM8K}; the subset of {DU} (random.seed(0), shuffle, first 100)",
                        GSM8K_LICENCE, _gsm8k_100),
    "mmlu-pro-math": _Entry(MMLU_PRO, MMLU_PRO_LICENCE, _mmlu_pro_math),
}


def question_set(name: str) -> list[Item]:
    """A named question set's items, each carrying the set's source and licence."""
    key = (name or "").strip().lower()
    if key not in SETS:
        raise ConfigError(f"no bundled question set {name!r}; choose one of "
                          f"{', '.join(SETS)}", "input")
    entry = SETS[key]
    return [Item(question, expected, entry.source, entry.licence)
            for question, expected in entry.load()]


def catalogue() -> list[SetInfo]:
    """Every named set with its source, licence and size, in the registry's order."""
    return [SetInfo(name, entry.source, entry.licence, len(entry.load()))
            for name, entry in SETS.items()]
