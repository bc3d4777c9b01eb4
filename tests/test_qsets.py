"""Question sets: bundled ones by name; uploaded CSV / JSONL, bad rows rejected by number."""
import json

import pytest

from engine.models import ConfigError
from engine.questions.files import Item, from_records, load_file, parse_questions
from engine.questions.sets import catalogue, question_set
from engine.questions import QUESTION_SETS


def test_bundled_sets_by_name():
    sizes = {info.name: info.size for info in catalogue()}
    assert set(QUESTION_SETS) <= set(sizes)  # the own sets, beside the literature's
    definite = question_set("definite")
    assert len(definite) == sizes["definite"] and all(i.expected for i in definite)
    assert all(i.expected is None for i in question_set("open"))
    with pytest.raises(ConfigError, match="choose one of"):
        question_set("nope")


def test_csv_with_optional_expected_multiline_and_blank_lines():
    data = ('\ufeffQuestion , Expected,notes\n'
            'What is 2+2?,4,easy\n'
            '\n'
            '"Two\nlines?",,\n'
            'Open one?\n')
    items = parse_questions(data.encode(), "qs.csv")
    assert items == [Item("What is 2+2?", "4"), Item("Two\nlines?", None),
                     Item("Open one?", None)]


def test_csv_bad_rows_are_named_by_line():
    data = ('question,expected\n'    # 1
            'ok?,1\n'                # 2
            ',2\n'                   # 3 missing / empty question
            '"   ",3\n'              # 4 whitespace only
            'nul\x00byte?,4\n'       # 5 NUL byte
            'a,b,c\n'                # 6 too many fields
            'fine?,6\n')             # 7
    with pytest.raises(ConfigError) as err:
        parse_questions(data.encode(), "qs.csv")
    message = str(err.value)
    assert "4 bad rows (rows 3, 4, 5, 6" in message
    assert "row 3: empty question" in message and "row 5: NUL byte" in message
    assert "row 6: has 3 fields" in message
    assert "\n" not in message  # one line for the CLI


@pytest.mark.parametrize("header, needle", [
    ("question,Question\n", "more than once"),
    ("text,answer\n", "needs a `question` column"),
])
def test_csv_header_problems(header, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_questions((header + "x,y\n").encode(), "qs.csv")


def test_jsonl_reads_and_converts_numbers():
    lines = [json.dumps({"question": "What is 6 x 7?", "expected": 42}),
             "",
             json.dumps({"question": "Open?", "expected": None})]
    assert parse_questions("\n".join(lines), "qs.jsonl") == [
        Item("What is 6 x 7?", "42"), Item("Open?", None)]


def test_jsonl_bad_rows_are_named_by_line():
    lines = ['{"question": "fine?"}',                 # 1
             '{"question": "broken"',                 # 2 invalid JSON
             '["a list"]',                            # 3 not an object
             '{"question": 7}',                       # 4 non-string
             '{"expected": "x"}',                     # 5 missing question
             '{"question": "q", "question": "r"}',    # 6 duplicate key
             '{"question": "q", "expected": [1]}',    # 7 bad expected
             '{"question": ""}']                      # 8 empty
    with pytest.raises(ConfigError) as err:
        parse_questions("\n".join(lines).encode(), "qs.jsonl")
    message = str(err.value)
    assert "7 bad rows (rows 2, 3, 4, 5, 6, 7, 8" in message
    for needle in ("row 2: invalid JSON", "row 3: is a JSON list", "row 4: question is a number",
                   "row 5: missing question", "row 6: the key 'question' appears twice",
                   "row 7: expected is a list", "row 8: empty question"):
        assert needle in message


def test_file_level_problems(tmp_path):
    with pytest.raises(ConfigError, match="must be .csv or .jsonl"):
        parse_questions(b"question\nx\n", "qs.txt")
    with pytest.raises(ConfigError, match="not UTF-8"):
        parse_questions(b"question\n\xff\n", "qs.csv")
    with pytest.raises(ConfigError, match="is empty"):
        parse_questions(b"", "qs.csv")
    with pytest.raises(ConfigError, match="has no questions"):
        parse_questions(b"question\n", "qs.csv")
    with pytest.raises(ConfigError, match="cannot read"):
        load_file(tmp_path / "missing.csv")
    path = tmp_path / "ok.jsonl"
    path.write_text('{"question": "Q?", "expected": "A"}\n', encoding="utf-8")
    assert load_file(path) == [Item("Q?", "A")]


def test_inline_records():
    assert from_records(["a?", {"question": "b?", "expected": 3}]) == [
        Item("a?", None), Item("b?", "3")]
    with pytest.raises(ConfigError, match=r"items 2, 3.*item 2: is a number.*item 3: unknown"):
        from_records(["a?", 5, {"q": "x"}])
