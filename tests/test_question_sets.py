"""Named question sets: the literature's sets rebuilt exactly, with provenance, in specs."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from engine import experiments as ex
from engine import question_set
from engine.models import ConfigError
from engine.questions import catalogue

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "engine" / "questions" / "gsm8k"


def test_arithmetic_is_du_et_al_generator_exactly():
    items = question_set("arithmetic")
    assert len(items) == 100
    assert [(i.question, i.expected) for i in items[:3]] == [
        ("What is the result of 12+15*21+0-3*27?", "246"),
        ("What is the result of 3+7*9+19-21*18?", "-293"),
        ("What is the result of 4+23*6+24-24*12?", "-122"),
    ]
    assert question_set("arithmetic") == items  # the same problems on every call


def test_arithmetic_leaves_numpy_global_state_alone():
    import numpy as np
    np.random.seed(7)
    before = np.random.get_state()[1].copy()
    question_set("arithmetic")
    assert (np.random.get_state()[1] == before).all()


def test_gsm8k_has_the_test_split_with_numeric_expected_answers():
    items = question_set("gsm8k")
    assert len(items) == 1319
    assert items[0].question.startswith("Janet\u2019s ducks lay 16 eggs per day.")
    assert items[0].expected == "18"
    assert all(i.expected and "," not in i.expected for i in items)
    for item in items:
        float(item.expected or "")  # every expected answer is a plain number


def test_gsm8k_100_is_du_et_al_seeded_subset():
    state = random.getstate()
    items = question_set("gsm8k-100")
    assert random.getstate() == state  # the global generator is untouched
    assert len(items) == 100
    assert items[0].question.startswith("Amber, Micah, and Ahito ran 52 miles in total.")
    assert items[0].expected == "16"
    assert items[-1].question.startswith("Jennifer's dog has 8 puppies, 3 of which have spots.")
    assert items[-1].expected == "35"
    # The recipe as Du et al. wrote it, on the shipped file as read.
    records = [json.loads(line) for line in
               (SHIPPED / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    random.seed(0)
    random.shuffle(records)
    random.setstate(state)
    assert [i.question for i in items] == [r["question"] for r in records[:100]]


def test_the_data_ships_with_its_licence_and_attribution():
    assert (SHIPPED / "test.jsonl").is_file()
    assert "MIT License" in (SHIPPED / "LICENSE").read_text(encoding="utf-8")
    assert "Cobbe et al. 2021" in (SHIPPED / "SOURCE.md").read_text(encoding="utf-8")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"engine.questions" = ["gsm8k/*", "mmlu_pro_math/*"]' in pyproject  # in the wheel
    mmlu = SHIPPED.parent / "mmlu_pro_math"
    assert (mmlu / "test.jsonl").is_file()
    assert "MIT License" in (mmlu / "LICENSE").read_text(encoding="utf-8")
    source = (mmlu / "SOURCE.md").read_text(encoding="utf-8")
    assert "arXiv 2406.01574" in source and "9791db8" in source


@pytest.mark.parametrize("name", ["definite", "open", "demo", "arithmetic", "gsm8k",
                                  "gsm8k-100", "mmlu-pro-math"])
def test_every_item_carries_its_set_provenance(name):
    items = question_set(name)
    assert items and all(i.source and i.licence for i in items)
    assert len({(i.source, i.licence) for i in items}) == 1


def test_catalogue_lists_source_licence_and_size():
    infos = {info.name: info for info in catalogue()}
    assert set(infos) == {"definite", "open", "demo", "arithmetic", "gsm8k", "gsm8k-100",
                          "mmlu-pro-math"}
    assert infos["mmlu-pro-math"].size == 150 and "MIT" in infos["mmlu-pro-math"].licence
    assert infos["gsm8k"].size == 1319 and "MIT" in infos["gsm8k"].licence
    assert "Cobbe" in infos["gsm8k"].source
    assert "2305.14325" in infos["arithmetic"].source and infos["arithmetic"].size == 100
    assert "2305.14325" in infos["gsm8k-100"].source and infos["gsm8k-100"].size == 100


def test_unknown_set_names_the_choices():
    with pytest.raises(ConfigError, match="choose one of .*gsm8k-100"):
        question_set("gsm9k")


def test_spec_naming_gsm8k_100_plans_100_cells():
    plan = ex.plan({"questions": "gsm8k-100", "configs": [{"protocol": "vote",
                                                            "label": "vote"}]})
    assert plan.runs == 100 and len(list(plan.cells())) == 100
    assert plan.source == "bundled:gsm8k-100"
    assert plan.questions[0] == {"question": question_set("gsm8k-100")[0].question,
                                 "expected": "16"}


def test_cli_lists_sets_with_source_licence_and_size(capsys):
    from engine.cli.main import main
    assert main(["sets"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\ngsm8k +1,319 questions  MIT \(OpenAI 2021\)", out)
    assert "Cobbe et al. 2021" in out and "arXiv 2305.14325" in out
    assert main(["sets", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["name"]: r["size"] for r in rows}["gsm8k-100"] == 100
    assert all(r["source"] and r["licence"] for r in rows)


def test_experiments_page_picker_names_size_source_and_licence(db_url):
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120.0)
    at.run()
    at.switch_page("pages/experiments.py").run()
    picker = at.selectbox(key="exp-set")
    assert "gsm8k-100 (100 questions)" in picker.options
    assert "gsm8k (1,319 questions)" in picker.options
    picker.select("gsm8k").run()
    assert not at.exception, at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "Cobbe et al" in captions and "MIT \\(OpenAI 2021\\)" in captions


def test_a_question_file_says_how_many_questions_it_gave():
    from engine.questions import files
    items = files.parse_questions(b"question,expected\nWhat is 2+2?,4\nWhy?,\n", "mine.csv")
    assert files.read_note(items, "mine.csv") == (
        "2 questions read from mine.csv, 1 with an expected answer (only those are scored).")
    one = files.parse_questions(b'{"question": "Is it?"}\n', "one.jsonl")
    assert files.read_note(one, "one.jsonl") == (
        "1 question read from one.jsonl, 0 with an expected answer.")
