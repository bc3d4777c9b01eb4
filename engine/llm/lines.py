"""Line formats: free-text replies read by their labelled lines, constrained by a grammar.

A phase whose reply is read by labelled lines (`STANCE: ...`, the debate judge's five sections
and `ANSWER:`, a reviewer's `APPROVED:`) declares its format once as a `LineFormat`: optional
free prose first, then its sections in the order the prompt gives, each a kind of value (a
line of text, a short answer, a number in 0..1, yes or no). The format's GBNF grammar (the
`grammar` field of llama.cpp's server and llama-cpp-python's) makes a reply that the
protocol's tolerant parser reads in full: a short answer is at most `SHORT_WORDS` words (the
length past which a stance abstains), a number is one, and the text sections share a budget
of `CHARS_PER_TOKEN` characters per token of the seat's output cap, so that where the cap
allows it the whole reply ends before the cap cuts it.

The `grammar` switch, per endpoint (registry field) and per seat (`?grammar=`): `auto` (the
default for OpenAI-compatible servers other than api.openai.com, `off` there) detects once
per endpoint (base URL and model), its answer kept by the registry that resolved the model
(`engine.llm.capabilities`) and in the run's store (`engine.store.support`, read by every
other process), with a probe request whose grammar
forces a sentinel: the exact sentinel back means the server applies the grammar, a refusal (HTTP
4xx) or any other text means it does not, and a probe that fails (time-out, connection) is
not remembered, its call going without a grammar. `gbnf` sends the grammar without a probe;
`off` never sends one. A turn whose request carried a grammar records the path "grammar";
any other free-text turn records "".
"""
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import HumanMessage

from engine.llm.capabilities import Capabilities
from engine.llm.prices import read_usage
from engine.llm.structured import FormattedModel, MarkedOutput, generate
from engine.models import RunStopped

if TYPE_CHECKING:
    from engine.llm.limits import CallGate
    from engine.store import Store

SUPPORT_KIND = "grammar"  # its rows in the store's endpoint_support

GRAMMARS = ("auto", "off", "gbnf")
GRAMMAR = "grammar"
SHORT_WORDS = 12  # a short answer's words: longer is an essay, not a position (templates.py)
WORD_CHARS = 16  # a word of a short answer: a name, a number
CHARS_PER_TOKEN = 3  # a margin under English text's 4 characters per token
TEXT_MIN, TEXT_MAX = 40, 1200  # a text section's budget in characters, whatever the cap
LEAD_SHARE = 3  # free prose before the sections weighs as much as three text sections

# The kinds of value a section holds, as GBNF (`{n}`: the section's budget in characters).
_KINDS = {
    "text": '[^ \\t\\n] [^\\n]{{0,{n}}}',
    "short": "short",
    "unit": '("0" ("." [0-9] [0-9]?)? | "1" (".0" "0"?)?)',
    "yes-no": '("yes" | "no")',
}
# A short answer: at most SHORT_WORDS runs of letters and digits (what the abstain rule counts
# as words), joined by one or two other characters.
_SHORT = (f'short ::= [^a-zA-Z0-9\\n]{{0,2}} word ([^a-zA-Z0-9\\n]{{1,2}} word)'
          f'{{0,{SHORT_WORDS - 1}}} [^a-zA-Z0-9\\n]{{0,2}}\n'
          f'word ::= [a-zA-Z0-9]{{1,{WORD_CHARS}}}\n')
SHORT_CHARS = 80  # what a short answer takes of the budget: 12 words of typical length


@dataclass(frozen=True)
class Line:
    """One labelled line: `LABEL: value` (`label` "" for an unlabelled last line), numbered
    as the prompt numbers it (`number` 0: not numbered), its value of kind `kind` ("text",
    "short", "unit", "yes-no")."""

    label: str
    kind: str = "text"
    number: int = 0

    @property
    def head(self) -> str:
        """What the line starts with: its number and label."""
        number = f"{self.number}. " if self.number else ""
        return f"{number}{self.label}: " if self.label else ""


@dataclass(frozen=True)
class LineFormat:
    """A reply of free prose (when `lead`) followed by `sections`, one line each, in order."""

    name: str
    sections: tuple[Line, ...]
    lead: bool = False

    def budget(self, cap: int | None) -> int:
        """Characters for each text section (the lead counts as `LEAD_SHARE` of them): what
        `cap` tokens leave after the fixed parts, shared out, within TEXT_MIN..TEXT_MAX
        (TEXT_MAX without a cap)."""
        texts = sum(s.kind == "text" for s in self.sections) + (LEAD_SHARE if self.lead else 0)
        if not texts:
            return 0
        fixed = sum(len(s.head) + 1 + (SHORT_CHARS if s.kind == "short" else 0)
                    for s in self.sections)
        room = cap * CHARS_PER_TOKEN - fixed if cap else TEXT_MAX * texts
        return max(TEXT_MIN, min(TEXT_MAX, room // texts))

    def grammar(self, cap: int | None = None) -> str:
        """The GBNF grammar for a seat whose output cap is `cap` tokens (None: no cap)."""
        each = self.budget(cap)
        lines = [f'"{_gbnf_text(s.head)}" ' + _KINDS[s.kind].format(n=each - 1)
                 for s in self.sections]
        root = ' "\\n" '.join(lines) + ' "\\n"?'
        rules = []
        if self.lead:
            root = 'lead "\\n" ' + root
            rules.append(f'lead ::= [^ \\t\\n] [^\\x00]{{0,{each * LEAD_SHARE - 1}}}\n')
        if any(s.kind == "short" for s in self.sections):
            rules.append(_SHORT)
        return f"root ::= {root}\n" + "".join(rules)


def _gbnf_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def line_format(name: str, *sections: str | Line, lead: bool = False) -> LineFormat:
    """A format from its sections in order: a bare label is a line of text."""
    return LineFormat(name, tuple(s if isinstance(s, Line) else Line(s)
                                  for s in sections), lead)


# ------------------------------------------------------------------ which endpoints apply one
SENTINEL = "parley-grammar-probe-ok"
PROBE_GRAMMAR = f'root ::= "{SENTINEL}"\n'
PROBE_MESSAGES = ({"role": "user", "content": "Reply with one word: OK."},)
PROBE_TOKENS = 24  # the sentinel is a dozen tokens on any tokenizer
_ANSWERS = ("yes", "no")  # its values in the capabilities and the store


def _refusal(exc: BaseException) -> bool:
    """An HTTP 4xx other than a rate limit: the server refuses the field."""
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and 400 <= status < 500 and status != 429


def _known(capabilities: Capabilities, endpoint: tuple[str, str],
           store: Store | None = None) -> bool | None:
    """Whether `endpoint` applies a grammar, as `capabilities` know it (else as a process
    stored it in `store`); None while unknown."""
    known = capabilities.recall(SUPPORT_KIND, endpoint, store, _ANSWERS)
    return None if known is None else known == "yes"


async def probe(model: Any, endpoint: tuple[str, str], gate: CallGate, timeout: float | None,
                capabilities: Capabilities, store: Store | None = None) -> bool:
    """Whether `endpoint` applies a grammar: known to `capabilities` (the registry's) or to
    another process through `store`, else asked once (concurrent callers wait for the one
    probe, then go on without sending it) through the endpoint's `gate` within `timeout`,
    the answer kept in both. A probe that fails is not remembered: False for this call,
    asked again by the next."""
    known = _known(capabilities, endpoint)
    if known is not None:
        return known
    async with capabilities.detecting(SUPPORT_KIND, endpoint):
        known = _known(capabilities, endpoint, store)
        if known is not None:
            return known
        messages = [HumanMessage(content=m["content"]) for m in PROBE_MESSAGES]
        tokens = 0
        try:
            await gate.acquire(PROBE_MESSAGES, within=timeout or None)
            try:
                message = await asyncio.wait_for(generate(
                    model, messages, grammar=PROBE_GRAMMAR, max_tokens=PROBE_TOKENS),
                    timeout or None)
                usage = read_usage(message, PROBE_MESSAGES, str(message.content), PROBE_TOKENS)
                tokens = usage.tokens_in + usage.tokens_out
            finally:
                gate.release(tokens)
        except (asyncio.CancelledError, RunStopped):
            raise
        except Exception as exc:  # a refusal is an answer; anything else is asked again
            gate.refused(exc)
            if _refusal(exc):
                capabilities.learn(SUPPORT_KIND, endpoint, "no", store)
            return False
        found = isinstance(message.content, str) and message.content.strip() == SENTINEL
        capabilities.learn(SUPPORT_KIND, endpoint, "yes" if found else "no", store)
        return found


class LineOutput(MarkedOutput):
    """The output path of one free-text call read by a line format: the format's grammar
    for a model whose endpoint applies one (`mode` "grammar" once a request carried it),
    else the seat's model as it is (`mode` ""). The probe's answer goes to the capabilities
    of the registry that resolved the model and to `store` (the run's), for every process."""

    def __init__(self, model: Any, line: LineFormat, store: Store | None = None):
        super().__init__(model, store, "grammar")
        self.line, self.model = line, model
        self.cap = self.marked.get("cap")
        self.send = self.switch == "gbnf"
        self.mode = ""

    async def prepare(self, gate: CallGate, timeout: float | None) -> None:
        """Before the call's attempts: with `auto`, whether the endpoint applies a grammar
        (`probe`, through the call's `gate` and `timeout`)."""
        if self.switch == "auto":
            self.send = await probe(self.model, self.endpoint, gate, timeout,
                                    self.capabilities, self.store)

    def wrap(self, model: Any) -> Any:
        """The model the guarded call invokes."""
        return FormattedModel(self, model) if self.switch in ("auto", "gbnf") else model

    async def invoke(self, model: Any, messages: Sequence[Any]) -> Any:
        """One request, carrying the grammar in its body when the endpoint applies one."""
        if not self.send:
            return await generate(model, messages)
        self.mode = GRAMMAR
        return await generate(model, messages, grammar=self.line.grammar(self.cap))
