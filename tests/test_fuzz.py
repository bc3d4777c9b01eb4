"""Fuzzing the boundaries (issue 10, "Done when"): the reply parsers, the YAML loaders,
question files, the run import and whole protocol runs, driven by Hypothesis with hostile
input: deep nesting, huge numbers, lone surrogates, NUL and control characters, floods of
`{` and `VERDICT:`, alias bombs, random bytes decoded leniently. Every test asserts that no
exception escapes but `ConfigError` (or PyYAML's own error where the caller words it), that
nothing is half-written, and, through `deadline`, that each example stays within 10 seconds (a catastrophic blow-up, not a timing: the machine may be loaded).

`PARLEY_FUZZ_EXAMPLES=N` runs N examples per test (default 100: about 20 s; whole runs get
N/4). With N=2000 (16,000 parser, loader and file examples and 3,000 whole protocol runs, 9
minutes on the 2-core machine) none failed. The run import is fuzzed too, but its validation
is `engine/records.py`'s (merged separately): until then it is an expected failure (found
there: RecursionError on `[` x 2,000, ValueError past the int digit limit, TypeError on a list
as the id, IntegrityError on a missing question).

Failures found and fixed while building the bounds and this suite:
- `extract_json` quadratic (16 KB of `{`: 18-33 s) -> one linear pass; RecursionError on JSON
  nested thousands deep and ValueError on a 5,000-digit integer -> capped, a reason given;
  NaN and 1e999 accepted into stored JSON -> refused.
- `text_value` (panel and vote replies) exponential in list nesting: 60 levels never ended.
- The roundtable's `STANCE:` regex quadratic on a line of spaces (100,000: 24 s).
- `normalize_stance`: quadratic on nested brackets, ValueError past the int digit limit, and
  two different huge decimals both read as "inf".
- Question JSONL: RecursionError on a deeply nested line; lines split at U+2028 and U+0085.
- YAML: alias bombs, RecursionError past ~330 levels, ValueError from a timestamp in month 13,
  quadratic sexagesimal integers (`1:2:3:...`).
- A lone surrogate or NUL in a reply failed the run when stored.
- `parse_sections` read the first VERDICT block (a quoted one) instead of the reply's own.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import ConfigError, Seat, Store
from engine.analysis import is_approved, normalize_stance, parse_confidence, parse_sections, tally
from engine.analysis.answers import extract_answer
from engine.llm.replies import extract_json
from engine.protocols.roundtable import parse_stance
from engine.questions import files as qsets
from engine.services import library
from engine.store import records
from engine.text import clean_value
from engine.yamlfile import load_mapping, safe_load

EXAMPLES = int(os.environ.get("PARLEY_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=10000, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
LABELS = ("VERDICT", "REASONING", "PRO SUMMARY", "CON SUMMARY", "CONFIDENCE")

# ------------------------------------------------------------------ hostile text
ODD_CHARS = ["\x00", "\ud800", "\udfff", "\x1b", "\x07", "\x9b", "\u2028", "\x85", "\ufeff",
             "\u200b", "\r", "\t", "\\", '"', "'", "`", "\n"]
ODD = [*ODD_CHARS, "\x1b[31m", "\x1b]0;x\x07"]
TOKENS = ["{", "}", "[", "]", '"', ":", ",", "\\", '"stance"', '"answer"', '"x"', "1", "-0",
          "1e999", "NaN", "Infinity", "true", "null", " ", "\n", "```json", "```",
          "VERDICT:", "**VERDICT:**", "1. VERDICT:", "CONFIDENCE:", "0.9", "85%", "8.5/10",
          "REASONING:", "PRO SUMMARY:", "STANCE:", "approved: yes", "APPROVED:", "> ", "#",
          "*", "_", "(", ")", "$", "%", "one hundred", "twenty-five", ".05", "1,000", *ODD]


def floods() -> st.SearchStrategy[str]:
    unit = st.sampled_from(["{", "[", '"', "\\", "{}", "[1]", '{"a":', "VERDICT:\n",
                            "STANCE: a \n", "(", " ", "1", "one ", "\n", "**", "#", ":1"])
    return st.builds(lambda u, n: u * n, unit, st.integers(1, 40_000))


def nested() -> st.SearchStrategy[str]:
    def build(depth: int, core: str, open_: str) -> str:
        close = {"[": "]", "{": "}", '{"a":': "}", "(": ")"}[open_]
        return open_ * depth + core + close * depth
    return st.builds(build, st.integers(1, 6000), st.sampled_from(['"x"', "1", "", "{}"]),
                     st.sampled_from(["[", "{", '{"a":', "("]))


def soup() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(TOKENS), max_size=60).map("".join)


def decoded_bytes() -> st.SearchStrategy[str]:
    return st.binary(max_size=400).map(lambda b: b.decode("utf-8", "surrogateescape"))


def long_numbers() -> st.SearchStrategy[str]:
    """Integers past Python's 4,300-digit limit for int(text), bare and inside JSON."""
    return st.builds(lambda n, wrap: wrap.format("9" * n), st.integers(4000, 6000),
                     st.sampled_from(["{}", '{{"stance": {}}}', "CONFIDENCE: {}", "STANCE: {}"]))


KEYS = ["stance", "answer", "reasoning", "assessments", "persona", "verdict", "flaw",
        "overall", "changed_mind", "key_points", "agreement_level", "dominant_position",
        "dissenting_views", "rationale", "confidence", "a", "cautious", "creative", "literal"]


def json_replies() -> st.SearchStrategy[str]:
    """JSON the protocols ask for, with hostile values and shapes, in a fence or prose."""
    chars = st.one_of(st.characters(), st.sampled_from(ODD_CHARS))
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30),
                       st.floats(allow_nan=False, allow_infinity=False),
                       st.text(chars, max_size=30), st.sampled_from(
                           ["sound", "flawed", "SOUND.", "strong", "none", "cautious", "4"]))
    values = st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)), max_leaves=25)
    objects = st.dictionaries(st.sampled_from(KEYS), values, max_size=7).map(json.dumps)
    return st.builds(lambda body, before, after: f"{before}{body}{after}", objects,
                     st.sampled_from(["", "Sure:\n```json\n", "I think {x} ", '["']),
                     st.sampled_from(["", "\n```", " {note}", "\nSTANCE: 4"]))


def hostile_text() -> st.SearchStrategy[str]:
    chars = st.one_of(st.characters(), st.sampled_from(ODD_CHARS))
    return st.one_of(st.text(chars, max_size=200), soup(), floods(), nested(), long_numbers(),
                     decoded_bytes(), json_replies(),
                     st.lists(st.one_of(soup(), floods(), nested(), json_replies()),
                              max_size=4).map("".join))


def storable(value) -> bool:
    """No lone surrogate or NUL anywhere in a JSON-like value (what the store keeps)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return "\x00" not in text and not any("\ud800" <= ch <= "\udfff" for ch in text)


# ------------------------------------------------------------------ reply parsers
@FUZZ
@given(st.one_of(hostile_text(), st.lists(st.sampled_from(
    ["\\boxed{", "}", "{", "\\frac", "\\text{", "answer is ", "Final answer:", "$", "-", "0.50",
     "1,000", "(B)", "yes", "no", "I don't know", " ", "\n", "%", "/", "."]),
    max_size=400).map("".join)))
def test_answer_extraction_never_raises_and_answers_with_text_or_abstains(text):
    answer = extract_answer(text)
    assert answer is None or (isinstance(answer, str) and answer.strip() == answer and answer)


@FUZZ
@given(hostile_text())
def test_extract_json_never_raises_and_returns_storable_objects(text):
    obj, why = extract_json(text)
    if obj is None:
        assert isinstance(why, str) and why
    else:
        assert isinstance(obj, dict) and why == ""
        assert storable(obj)
        json.dumps(obj, allow_nan=False)  # finite numbers only: PostgreSQL's JSON has no NaN


@FUZZ
@given(st.lists(st.dictionaries(st.text(max_size=5), st.one_of(
    st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
    st.lists(st.integers(), max_size=3)), max_size=4), min_size=1, max_size=4), soup())
def test_extract_json_reads_the_last_top_level_object(objects, noise):
    """Objects written one after the other, with prose between: the last one is read."""
    prose = noise.replace("{", "(").replace("[", "(").replace("}", ")").replace("]", ")")
    text = prose.join(json.dumps(o) for o in objects)
    obj, _ = extract_json(text)
    assert obj == clean_value(json.loads(json.dumps(objects[-1])))  # NUL kept as U+FFFD


@FUZZ
@given(hostile_text(), st.lists(st.sampled_from(LABELS), min_size=1, max_size=5, unique=True))
def test_parse_sections_never_raises(text, labels):
    sections = parse_sections(text, labels)
    assert set(sections) <= set(labels)
    assert all(isinstance(v, str) for v in sections.values())


@FUZZ
@given(hostile_text())
def test_confidence_approval_and_stance_readers_never_raise(text):
    value = parse_confidence(text)
    assert isinstance(value, float) and 0.0 <= value <= 1.0 and not math.isnan(value)
    assert isinstance(is_approved(text), bool)
    fields, warnings = parse_stance(text)
    assert fields["stance"] is None or (fields["stance"] and "\n" not in fields["stance"])
    assert isinstance(warnings, list)
    assert isinstance(normalize_stance(text), str)


@FUZZ
@given(st.dictionaries(st.text(max_size=8), st.one_of(st.none(), hostile_text()),
                       min_size=1, max_size=8))
def test_tally_counts_every_ballot(ballots):
    result = tally(ballots)
    assert result.total == len(ballots)
    assert sum(result.counts.values()) + len(result.abstentions) == result.total
    assert (result.winner is None) == (not result.counts)
    assert 0.0 <= result.ratio <= 1.0


# ------------------------------------------------------------------ stored JSON values
def json_like() -> st.SearchStrategy[object]:
    """What the engine may hand a store column: JSON and beyond it (huge and non-finite
    numbers, odd characters, keys that are not text, tuples, sets, objects), nested up to
    past the store's depth bound."""
    chars = st.one_of(st.characters(), st.sampled_from([*ODD_CHARS, "{", "[", '"', "\\"]))
    texts = st.one_of(st.text(chars, max_size=30), st.sampled_from(
        ["null", "true", "1234567890123456789", "\\u0000", '"null": ']))
    keys = st.one_of(texts, st.booleans(), st.none(), st.integers(), st.floats())
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(2 ** 62, 2 ** 70),
                       st.floats(), texts, st.sets(st.integers(), max_size=2),
                       st.builds(object))
    tree = st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(keys, inner, max_size=4)), max_leaves=20)
    deep = st.tuples(st.integers(55, 70), st.booleans(), tree).map(
        lambda t: [_wrap(t[2], t[0], t[1])])
    return st.one_of(tree, deep)


def _wrap(value: object, depth: int, in_dicts: bool) -> object:
    for _ in range(depth):
        value = {"k": value} if in_dicts else [value]
    return value


@FUZZ
@given(json_like())
def test_a_stored_json_value_is_what_the_walk_makes_of_it(value):
    """`records.dumps` encodes a value that is JSON already as it is, and walks the rest
    (`records.storable`): either way what is read back is the walked value (two keys of one
    text, such as 0 and "0", are written twice and read as the last, as the walk keeps)."""
    walked = json.dumps(records.storable(value), ensure_ascii=False, allow_nan=False)
    assert json.loads(records.dumps(value)) == json.loads(walked)


# ------------------------------------------------------------------ YAML and question files
def yaml_text() -> st.SearchStrategy[str]:
    scalars = st.sampled_from(["a", "1", "2001-13-45", "1:2:3", "0x1F", "!!binary ZZZ", "~",
                               "'q'", '"\\ud800"', '"\\0"', "9" * 200, ".inf", "&a x", "*a",
                               "<<: *a", "!!python/object:os.system x", "? [a]", "- ", "|",
                               ">", "%YAML 1.1", "---", "...", "{", "[", "]", "}", ",", ":",
                               "&b [*a, *a, *a, *a]", "&c [*b, *b, *b, *b]", "\t", "\x00"])
    lines = st.lists(st.tuples(st.integers(0, 6), scalars, st.sampled_from(["", ": ", ": - "]),
                               scalars).map(lambda t: "  " * t[0] + t[1] + t[2] + t[3]),
                     max_size=20).map("\n".join)
    bomb = st.integers(2, 12).map(lambda n: "k0: &k0 [x, x, x, x, x, x, x, x]\n" + "".join(
        f"k{i}: &k{i} [{', '.join([f'*k{i - 1}'] * 8)}]\n" for i in range(1, n)))
    deep = st.integers(1, 3000).map(lambda d: "x: " + "[" * d + "]" * d)
    chain = st.integers(1, 200).map(lambda n: "".join(
        f"a{i}: &a{i} [{f'*a{i - 1}' if i else 1}]\n" for i in range(n)))
    return st.one_of(lines, bomb, deep, chain, hostile_text())


@FUZZ
@given(yaml_text())
def test_yaml_loaders_raise_only_config_or_yaml_errors(text):
    try:
        safe_load(text)
    except (ConfigError, yaml.YAMLError):
        pass
    try:
        library.parse_yaml(text)
    except ConfigError:
        pass


@FUZZ
@given(yaml_text())
def test_load_mapping_raises_only_config_errors(text):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spec.yaml"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))  # lone surrogates: bad UTF-8
        try:
            assert isinstance(load_mapping(str(path)), dict)
        except ConfigError as exc:
            assert "\n" not in str(exc)


def question_file() -> st.SearchStrategy[tuple[bytes | str, str]]:
    csv_rows = st.lists(st.lists(hostile_text().map(lambda t: t[:300]), max_size=3).map(
        lambda cells: ",".join(cells)), max_size=8).map(lambda rows: "question,expected\n" +
                                                         "\n".join(rows))
    jsonl_rows = st.lists(st.one_of(
        st.dictionaries(st.sampled_from(["question", "expected", "x"]),
                        st.one_of(hostile_text().map(lambda t: t[:300]), st.integers(),
                                  st.none(), st.booleans()), max_size=3).map(json.dumps),
        hostile_text().map(lambda t: t[:500])), max_size=8).map("\n".join)
    return st.one_of(
        st.tuples(st.one_of(csv_rows, hostile_text()), st.just("q.csv")),
        st.tuples(st.one_of(jsonl_rows, hostile_text()), st.just("q.jsonl")),
        st.tuples(st.binary(max_size=300), st.sampled_from(["q.csv", "q.jsonl"])))


@FUZZ
@given(question_file())
def test_question_files_raise_only_config_errors(upload):
    data, name = upload
    try:
        items = qsets.parse_questions(data, name)
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    assert items and all(i.question.strip() and storable(i.as_dict()) for i in items)


# ------------------------------------------------------------------ the run import
def import_text() -> st.SearchStrategy[str]:
    good = {"id": "r1", "protocol": "vote", "question": "q", "status": "completed",
            "created_at": "2026-01-01T00:00:00+00:00", "tags": [], "config": {},
            "turns": [{"idx": 0, "phase": "propose", "seat": "a", "status": "ok",
                       "reply": "x", "started_at": "2026-01-01T00:00:00+00:00",
                       "finished_at": "2026-01-01T00:00:01+00:00"}]}
    values = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                       hostile_text().map(lambda t: t[:200]), st.just([]), st.just({}),
                       st.just("9" * 5000), st.lists(st.text(max_size=3), max_size=3))
    mutated = st.builds(
        lambda key, value, turn_key, turn_value: json.dumps({
            **good, key: value, "turns": [{**good["turns"][0], turn_key: turn_value}]},
            default=str),
        st.sampled_from(sorted(good) + ["extra"]), values,
        st.sampled_from(sorted(good["turns"][0]) + ["parsed", "messages"]), values)
    return st.one_of(mutated, hostile_text(), st.lists(mutated, max_size=3).map("\n".join))


@FUZZ
@given(text=import_text())
def test_import_runs_imports_or_refuses_whole(text):
    store = _import_store()
    before = (len(store.runs()), len(store.turns()))
    try:
        store.import_runs(text)
    except ConfigError as exc:
        assert (len(store.runs()), len(store.turns())) == before  # nothing half-written
        assert "\n" not in str(exc)
        return
    store.runs()  # whatever was imported can be listed and read back
    for run_id in store.runs()["id"]:
        store.get(run_id)


def forged_cells() -> st.SearchStrategy[list[dict]]:
    """Runs a stranger's file might carry to forge or shadow an experiment's cells: the
    experiment's own id or another, cell tags in and out of its plan (and hostile
    spellings of them: unicode digits, signs, spaces, extra parts), any status."""
    numbers = st.one_of(st.integers(0, 3), st.integers(-5, 10**12).map(str),
                        st.sampled_from(["\u00b2", "\u0663", "01", " 1", "1 ", "+1", "", "x"]))
    cell = st.builds(lambda q, c, r, extra: f"cell:{q}:{c}:{r}{extra}", numbers, numbers,
                     numbers, st.sampled_from(["", ":0", ":", "\x00"]))
    run = st.fixed_dictionaries({
        "experiment": st.sampled_from(["mine", "other", None]),
        "tags": st.lists(st.one_of(cell, st.sampled_from(["superseded", "demo", "cell"])),
                         max_size=4),
        "status": st.sampled_from(["completed", "failed", "running", "interrupted"])})
    return st.lists(run, min_size=1, max_size=4)


@FUZZ
@given(runs=forged_cells())
def test_imported_runs_never_enter_an_experiments_accounting(runs):
    from engine.experiments import create, plan
    from engine.experiments.runner import pending_cells
    from engine.store.experiments import list_experiments, progress
    store = _import_store()
    experiment_id = create(store, plan({"questions": ["a?", "b?"], "configs": [
        {"protocol": "vote", "label": "v"}], "repeats": 2}, store))
    lines = [json.dumps({
        "id": f"f{os.urandom(6).hex()}", "protocol": "vote", "question": "a?",
        "status": r["status"], "tags": r["tags"], "label": "v",
        "experiment_id": {"mine": experiment_id, "other": "elsewhere"}.get(r["experiment"]),
        "created_at": "2026-01-01T00:00:00+00:00", "turns": []}) for r in runs]
    try:
        imported = store.import_runs("\n".join(lines))
    except ConfigError:
        return  # a refused file writes nothing (test_import_runs_imports_or_refuses_whole)
    assert imported
    state = progress(store, experiment_id)
    assert (state.done, state.failed, state.interrupted, state.running) == (0, 0, 0, 0)
    assert len(pending_cells(store, experiment_id)) == 4
    listed = list_experiments(store)
    assert int(listed.loc[listed["id"] == experiment_id, "done"].iloc[0]) == 0
    assert store.runs(experiment_id=experiment_id).empty
    for run_id in imported:
        assert store.get(run_id)["experiment_id"] is None


_STORES: dict[int, Store] = {}


def _import_store() -> Store:
    """One store for the whole import fuzz (a new SQLite file per example is slow)."""
    if os.getpid() not in _STORES:
        _STORES[os.getpid()] = Store(f"sqlite:///{tempfile.mkdtemp()}/fuzz.db")
    return _STORES[os.getpid()]


# ------------------------------------------------------------------ whole runs
def _model(reply: str):
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    return FakeMessagesListChatModel(responses=[AIMessage(content=reply)] * 200)


PROTOCOLS = {
    "vote": lambda m, s: __import__("engine").run_vote(
        "q?", voters=[Seat("a"), Seat("b"), Seat("x", m)], store=s),
    "panel": lambda m, s: __import__("engine").run_panel(
        "q?", debaters=[Seat("a"), Seat("b"), Seat("x", m)], critic=m, judge=m, store=s),
    "roundtable": lambda m, s: __import__("engine").run_roundtable(
        "q?", agents=[Seat("a"), Seat("x", m)], judge=m, store=s),
    "debate": lambda m, s: __import__("engine").run_debate(
        "q?", proponent=m, opponent="simulated", judge=m, max_rounds=1, store=s),
    "peer-review": lambda m, s: __import__("engine").run_peer_review(
        "q?", producer=m, reviewer=m, max_iterations=2, store=s),
    "duel": lambda m, s: __import__("engine").run_duel(
        "q?", a=Seat("a", m), b=Seat("b"), rounds=2, converge="agreed", store=s),
}


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
@settings(max_examples=max(5, EXAMPLES // 4), deadline=5000, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(reply=hostile_text())
def test_any_reply_degrades_only_its_own_turn(protocol, reply, tmp_path_factory):
    store = _import_store()
    result = PROTOCOLS[protocol](_model(reply), store)
    row = store.get(result.run_id)
    # A run is failed only when no model call succeeded (an empty reply in every seat).
    assert row["status"] == ("completed" if any(t.ok for t in result.turns) else "failed"), \
        row.get("error")
    assert len(row["turns"]) == len(result.turns)
    for turn in result.turns:
        assert storable(turn.reply) and storable(turn.parsed)
        assert turn.status == "ok" or turn.error
