"""Issue 10, "YAML alias bombs": every YAML Parley reads is bounded in size, alias expansion and
nesting, and uploaded question files in size; each refusal is one line naming where."""
from __future__ import annotations

import time

import pytest
import yaml

from engine import ConfigError, Store

from engine.services import library

from engine.questions import files as qsets
from engine.cli.main import main as cli_main
from engine.yamlfile import (MAX_ALIAS_NODES, MAX_CHARS, MAX_DEPTH, load_mapping, safe_load)

# Under 400 bytes that expand to 9**9 (387 million) strings: the finding's "billion laughs".
BOMB = "".join(
    [f"a: &a [{', '.join(['lol'] * 9)}]\n"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n"
       for i in range(8)])
# The same blow-up through merge keys, which PyYAML copies pair by pair.
MERGE_BOMB = "a0: &a0 {x: 1, y: 2}\n" + "".join(
    f"a{i}: &a{i} {{<<: [{', '.join([f'*a{i - 1}'] * 4)}], k{i}: v}}\n" for i in range(1, 30))
DEEP = "[" * 1000 + "]" * 1000
DEEP_MAPPING = "".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v\n"
# Aliases that nest deeper than the text does: each level one alias inside the last.
ALIAS_CHAIN = "".join(f"a{i}: &a{i} [{f'*a{i - 1}' if i else 1}]\n" for i in range(120))


def _refused(call) -> ConfigError:
    started = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        call()
    assert time.perf_counter() - started < 10  # generous: it was 51 s and 1.7 GB
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return caught.value


@pytest.mark.parametrize("text, words", [
    (BOMB, ["aliases expand", f"{MAX_ALIAS_NODES:,}", "line 5"]),  # the first too big
    (MERGE_BOMB, ["aliases expand", "line"]),
    (DEEP, [f"deeper than {MAX_DEPTH} levels", "line 1, column"]),
    (DEEP_MAPPING, [f"deeper than {MAX_DEPTH} levels", "line"]),
    (ALIAS_CHAIN, ["aliases nest deeper", "line"]),
    ("a: &a [*a]\n", ["refers to a node that contains it", "line 1"]),
    ("n: " + "1" * 5000 + "\n", ["number has 5,000 characters", "line 1, column 4"]),
    ("n: 1" + ":1" * 100_000 + "\n", ["number has", "line 1"]),
    ("x: " + "y" * (MAX_CHARS + 1), [f"{MAX_CHARS:,}"]),
], ids=["bomb", "merge-bomb", "deep-flow", "deep-block", "alias-chain", "cycle", "long-int",
        "sexagesimal", "size"])
def test_yaml_alias_bombs_and_deep_nesting_are_refused_by_the_bounded_loader(text, words):
    error = _refused(lambda: safe_load(text))
    assert error.code == "limit"
    for word in words:
        assert word in str(error), str(error)


def test_yaml_alias_bombs_in_a_library_import_store_nothing(store: Store):
    library.ensure_seeded(store)
    before = library.export_yaml(store)
    for text in (BOMB, "personas:\n" + DEEP, MERGE_BOMB):
        error = _refused(lambda: library.import_yaml(store, text))
        assert "nothing was imported" in str(error)
    assert library.export_yaml(store) == before


def test_yaml_alias_bombs_in_a_run_config_and_an_experiment_spec_exit_2(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    for number, text in enumerate((BOMB, DEEP, ALIAS_CHAIN)):
        path = tmp_path / f"bad{number}.yaml"
        path.write_text(text, encoding="utf-8")
        for argv in (["run", "debate", "q", "--config", str(path)],
                     ["experiment", "run", str(path), "--dry-run"]):
            started = time.perf_counter()
            assert cli_main([*argv, "--db", url]) == 2
            assert time.perf_counter() - started < 10
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and str(path) in err and "line" in err, err
    assert Store(url).runs().empty


def test_a_yaml_file_too_large_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"x: " + b"y" * (4 * MAX_CHARS + 10))
    error = _refused(lambda: load_mapping(str(path), what="--config: "))
    assert error.code == "limit" and "bytes" in str(error) and str(error).startswith("--config")


def test_malformed_yaml_still_names_line_and_column(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("a: 1\nb: [unclosed\n", encoding="utf-8")
    error = _refused(lambda: load_mapping(str(path)))
    assert error.code == "input" and "line 3" in str(error)
    with pytest.raises(yaml.YAMLError) as caught:  # a value PyYAML cannot build: its place
        safe_load("when: 2001-13-45\n")
    assert "month must be in 1..12" in str(caught.value) and caught.value.problem_mark.line == 0


def test_ordinary_aliases_merges_and_json_still_load():
    text = ("defaults: &d {model: simulated, temperature: 0.2}\n"
            "seats:\n  judge: {<<: *d, persona: fair}\n  critic: *d\n")
    assert safe_load(text) == {
        "defaults": {"model": "simulated", "temperature": 0.2},
        "seats": {"judge": {"model": "simulated", "temperature": 0.2, "persona": "fair"},
                  "critic": {"model": "simulated", "temperature": 0.2}}}
    nested = "[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH
    assert safe_load(nested) is not None  # exactly at the cap
    assert safe_load('{"protocol": "vote", "options": {"timeout": 5}}')["options"] == {
        "timeout": 5}
    assert safe_load("") is None
    # aliases up to the cap are fine: 99 references to a 100-node list is 9,900 extra nodes
    shared = "a: &a [" + ", ".join(["x"] * 99) + "]\nb: [" + ", ".join(["*a"] * 99) + "]\n"
    assert len(safe_load(shared)["b"]) == 99


def test_uploaded_question_files_are_size_capped(tmp_path):
    big = b"question\n" + b"What is 2+2?\n" * (qsets.MAX_FILE_BYTES // 13 + 1)
    for name in ("q.csv", "q.jsonl"):
        error = _refused(lambda: qsets.parse_questions(big, name))
        assert error.code == "limit" and "20 MB" in str(error) and name in str(error)
    path = tmp_path / "q.csv"
    path.write_bytes(big)
    assert "20 MB" in str(_refused(lambda: qsets.load_file(path)))


def test_question_jsonl_hostile_lines_are_named_not_raised():
    lines = ['{"question": ' + "[" * 100_000 + "]" * 100_000 + "}",
             '{"question": "ok", "expected": ' + "9" * 5000 + "}",
             '{"question": "a\u2028b", "expected": "c\u0085d"}',
             '{"question": "\u200b\u200b"}']
    error = _refused(lambda: qsets.parse_questions("\n".join(lines), "q.jsonl"))
    message = str(error)
    assert "3 bad rows" in message and "rows 1, 2, 4" in message
    assert "nested too deeply" in message and "visible" in message
    # U+2028 inside a JSON string is one line, not two; a lone surrogate is made storable
    items = qsets.parse_questions('{"question": "a\u2028b \\ud800"}\n', "q.jsonl")
    assert items[0].question == "a\u2028b \ufffd"
