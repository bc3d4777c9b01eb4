"""Issue 15, line formats: every phase read by labelled lines declares a grammar, sent where the
server applies one. `grammar=auto` probes each endpoint once (a grammar forcing a sentinel);
a server that answers the sentinel gets the grammars, one that ignores or refuses the field
gets none, and a probe that fails is asked again by the next call. Each grammar allows only
replies its protocol's parser reads in full.

Every model call here goes over HTTP to the loopback test server (`openai_stub`).
"""
from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai_stub import ENDPOINT_SETTINGS, SimulatedOpenAI, loopback_only

from engine.analysis.sections import parse_answer
from engine.llm.endpoints import EndpointRegistry
from engine.llm.lines import PROBE_GRAMMAR, PROBE_TOKENS, SHORT_WORDS, LineFormat
from engine.llm.providers import DEFAULT_MAX_TOKENS
from engine.protocols import REGISTRY, arun_config, run_sync
from engine.protocols.council import ANSWER_LINE as COUNCIL_LINE
from engine.protocols.debate import JUDGE_FORMAT, _read_judge
from engine.protocols.peer_review import DRAFT_FORMAT, REVIEW_FORMAT, _read_review
from engine.protocols.roundtable import STANCE_LINE, parse_stance
from engine.protocols.society import FINAL_LINE, read_answer

QUESTION = "What is 6 x 7?"
# The phases each protocol reads by a line format, and the format (peer review's draft: a run
# with an expected answer asks for an ANSWER line).
PHASES = {
    "roundtable": {"turn": STANCE_LINE},
    "debate": {"judge": JUDGE_FORMAT},
    "peer-review": {"review": REVIEW_FORMAT, "draft": DRAFT_FORMAT},
    "society": {"answer": FINAL_LINE, "revise": FINAL_LINE},
    "single": {"answer": FINAL_LINE, "reflect": FINAL_LINE},
    "council": {"answer": COUNCIL_LINE, "chair": COUNCIL_LINE},  # its ranking goes without one
}


@pytest.fixture(autouse=True)
def loopback_env(monkeypatch):
    loopback_only(monkeypatch, *ENDPOINT_SETTINGS)


def run(protocol: str, stub: SimulatedOpenAI, model: str = "openai:smol",
        timeout_per_call: float | None = None, endpoints=None, **options):
    """One run; runs given one registry (`endpoints`) share what it learns of the server."""
    config = {"protocol": protocol, "model": model, "base_url": stub.base_url,
              "options": options, "timeout_per_call": timeout_per_call}
    return run_sync(arun_config(config, QUESTION, expected="42", endpoints=endpoints))


def probes(stub: SimulatedOpenAI) -> list[dict]:
    return [r for r in stub.requests if r["body"].get("grammar") == PROBE_GRAMMAR]


def asked(turn) -> str:
    return json.dumps([{"content": m["content"], "role": m["role"]} for m in turn.messages])


def by_messages(stub: SimulatedOpenAI) -> dict[str, str | None]:
    return {json.dumps([{"content": m["content"], "role": m["role"]}
                        for m in r["body"]["messages"]]): r["body"].get("grammar")
            for r in stub.requests if r["body"].get("grammar") != PROBE_GRAMMAR}


# ------------------------------------------------------------------ detection
def test_a_server_that_applies_the_probe_gets_each_phase_its_grammar():
    registry = EndpointRegistry()
    with SimulatedOpenAI(grammar="honour") as stub:
        results = {protocol: run(protocol, stub, endpoints=registry) for protocol in PHASES}
        bodies = by_messages(stub)
        probed = probes(stub)
    # one probe for the endpoint under the registry, the first request, small and forcing
    # the sentinel
    assert len(probed) == 1 and stub.requests[0]["body"]["grammar"] == PROBE_GRAMMAR
    assert probed[0]["body"]["max_tokens"] == PROBE_TOKENS
    for protocol, phases in PHASES.items():
        result = results[protocol]
        assert result.turns and all(t.ok for t in result.turns), protocol
        for turn in result.turns:
            line = phases.get(turn.phase)
            expected = line.grammar(DEFAULT_MAX_TOKENS) if line is not None else None
            assert bodies[asked(turn)] == expected, (protocol, turn.phase)
            assert turn.output_mode == ("grammar" if line is not None else ""), \
                (protocol, turn.phase)
        assert any(t.output_mode == "grammar" for t in result.turns), protocol
    assert '"STANCE: "' in STANCE_LINE.grammar() and '"5. CONFIDENCE: "' in \
        JUDGE_FORMAT.grammar()


def test_a_server_that_ignores_the_field_gets_no_grammar_after_the_probe():
    registry = EndpointRegistry()
    with SimulatedOpenAI() as stub:  # it answers as if the field were not there
        results = [run(protocol, stub, endpoints=registry) for protocol in PHASES]
        assert len(probes(stub)) == 1
        assert set(by_messages(stub).values()) == {None}
    for result in results:
        assert result.turns and all(t.ok for t in result.turns)
        assert {t.output_mode for t in result.turns} == {""}


def test_a_server_that_refuses_the_field_still_completes_every_protocol():
    registry = EndpointRegistry()
    with SimulatedOpenAI(grammar="refuse") as stub:
        results = {protocol: run(protocol, stub, endpoints=registry) for protocol in REGISTRY}
        refused = [r for r in stub.requests if "grammar" in r["body"]]
    assert len(refused) == 1 and refused[0]["body"]["grammar"] == PROBE_GRAMMAR
    for protocol, result in results.items():
        assert result.turns and all(t.ok for t in result.turns), protocol
        assert {t.output_mode for t in result.turns} <= {"", "constrained"}, protocol


def test_concurrent_callers_wait_for_the_one_probe():
    """A society's agents speak at once: one probe, whose answer all of them take."""
    with SimulatedOpenAI(grammar="honour", grammar_delay=0.3) as stub:
        result = run("society", stub)
        assert len(probes(stub)) == 1
    assert {t.output_mode for t in result.turns} == {"grammar"}


def test_a_probe_that_times_out_is_asked_again_by_a_later_call():
    with SimulatedOpenAI(grammar="honour", grammar_delay=1.5) as stub:
        slow = run("single", stub, rounds=2, timeout_per_call=0.5)
        assert len(probes(stub)) == 2  # each call asked; neither answer was remembered
        assert {t.output_mode for t in slow.turns} == {""}
        assert all(t.ok for t in slow.turns)
        stub.grammar_delay = 0.0
        quick = run("single", stub, rounds=2, timeout_per_call=0.5)
        assert len(probes(stub)) == 3  # answered now, and remembered
    assert [t.output_mode for t in quick.turns] == ["grammar", "grammar"]


def test_gbnf_sends_without_a_probe_and_openai_itself_gets_none(monkeypatch):
    with SimulatedOpenAI() as stub:
        result = run("roundtable", stub, model="openai:smol?grammar=gbnf")
        assert not probes(stub)
    assert {t.output_mode for t in result.turns} == {"grammar"}
    from engine import get_model
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert get_model("openai:gpt-4o-mini").parley_output["grammar"] == "off"
    local = get_model("openai:smol?base_url=http://127.0.0.1:9/v1&max_tokens=160")
    assert local.parley_output["grammar"] == "auto" and local.parley_output["cap"] == 160


# ------------------------------------------------------------------ grammar and parser agree
_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|(\[(?:[^\]\\]|\\.)*\])|([a-z][a-z0-9-]*)'
                    r'|(\{\d+,\d+\})|([()|?*+]))')


def to_regex(grammar: str) -> str:
    """The regular expression equal to one of these grammars (no rule refers to itself)."""
    rules = dict(line.split(" ::= ", 1) for line in grammar.strip().splitlines())

    def convert(body: str) -> str:
        out, at = [], 0
        while at < len(body.rstrip()):
            m = _TOKEN.match(body, at)
            assert m, body[at:]
            at = m.end()
            literal, chars, name, times, symbol = m.groups()
            if literal is not None:
                text = literal.encode().decode("unicode_escape")
                out.append(re.escape(text))
            elif chars is not None:
                out.append(chars)
            elif name is not None:
                out.append(f"(?:{convert(rules[name])})")
            elif times is not None:
                out.append(times)
            else:
                out.append("(?:" if symbol == "(" else symbol)
        return "".join(out)

    return convert(rules["root"])


def replies(line: LineFormat) -> st.SearchStrategy[str]:
    """Replies the grammar allows, in printable ASCII with tabs and line breaks (a few
    non-ASCII letters lower-case to ASCII ones, "İ" to "i" and a combining dot, so the
    abstain rule's word count can exceed the grammar's on them)."""
    alphabet = st.characters(min_codepoint=9, max_codepoint=126,
                             exclude_categories=("Cc",), include_characters="\t\n")
    return st.from_regex(re.compile(to_regex(line.grammar(160)), re.S), fullmatch=True,
                         alphabet=alphabet)


def words(text: str) -> int:
    return len(re.findall(r"[a-z0-9]+", text.lower()))


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(replies(JUDGE_FORMAT))
def test_the_judge_grammar_allows_only_replies_read_in_full(reply):
    sections, (_, readable), answer = _read_judge(reply)
    assert set(sections) >= {"VERDICT", "REASONING", "PRO SUMMARY", "CON SUMMARY"}
    assert readable and answer and words(answer) <= SHORT_WORDS


@FUZZ
@given(replies(REVIEW_FORMAT))
def test_the_review_grammar_allows_only_replies_read_in_full(reply):
    sections, approved = _read_review(reply)
    assert set(sections) == {"APPROVED", "FEEDBACK", "STRENGTHS"}
    assert approved == (sections["APPROVED"] == "yes")


@FUZZ
@given(replies(STANCE_LINE))
def test_the_stance_grammar_ends_in_a_short_stance(reply):
    fields, warnings = parse_stance(reply)
    assert not any("no STANCE line" in w or "more than a short answer" in w for w in warnings)
    assert fields["stance"] is not None or warnings


@FUZZ
@given(replies(DRAFT_FORMAT))
def test_the_draft_grammar_ends_in_a_short_answer(reply):
    answer = parse_answer(reply)
    assert answer and words(answer) <= SHORT_WORDS


@FUZZ
@given(replies(FINAL_LINE))
def test_the_final_line_grammar_ends_in_a_short_line(reply):
    assert words(reply.rsplit("\n", 2)[-2 if reply.endswith("\n") else -1]) <= SHORT_WORDS


@pytest.mark.parametrize("line, reply", [
    (JUDGE_FORMAT, "1. VERDICT: The proponent argued better.\n2. REASONING: 6 x 7 is 42.\n"
                   "3. PRO SUMMARY: It is 42.\n4. CON SUMMARY: It is not.\n"
                   "5. CONFIDENCE: 0.85\nANSWER: 42\n"),
    (REVIEW_FORMAT, "APPROVED: yes\nFEEDBACK: none\nSTRENGTHS: correct"),
    (STANCE_LINE, "Six sevens make forty-two.\nSTANCE: 42"),
    (DRAFT_FORMAT, "The product is 42.\nANSWER: 42"),
    (FINAL_LINE, "Six times seven is 42.\nThe answer is \\boxed{42}."),
])
def test_typical_replies_are_allowed_and_read(line, reply):
    assert re.fullmatch(to_regex(line.grammar(160)), reply, re.S)
    if line is JUDGE_FORMAT:
        sections, (confidence, readable), answer = _read_judge(reply)
        assert len(sections) == 6 and confidence == 0.85 and answer == "42"
    elif line is REVIEW_FORMAT:
        assert _read_review(reply)[1] is True
    elif line is STANCE_LINE:
        assert parse_stance(reply) == ({"stance": "42"}, [])
    elif line is DRAFT_FORMAT:
        assert parse_answer(reply) == "42"
    else:
        assert read_answer(reply) == "42"


def test_sections_share_the_seat_cap():
    """The text sections get what the cap leaves (3 characters a token), within bounds."""
    assert JUDGE_FORMAT.budget(160) < JUDGE_FORMAT.budget(1024) <= 1200
    assert JUDGE_FORMAT.budget(10) == 40
    assert "{0,77}" in JUDGE_FORMAT.grammar(160)
