"""Structured output: a JSON phase asks the server to constrain decoding to its schema.

A phase that expects a JSON object declares its schema once (`json_schema`). For a model of an
OpenAI-compatible endpoint (`get_model` marks it with `parley_output`) the call asks for
`response_format` of type `json_schema` (constrained decoding: llama.cpp, vLLM, LM Studio and
OpenAI's own API honour it); an endpoint that refuses it (HTTP 400/422 naming the format) or
ignores it (a reply that is not the object asked for) falls back to json mode
(`{"type": "json_object"}`, with the schema beside it, which llama-cpp-python's server
constrains to), then to the prompted path (the prompt, the tolerant parse and one
re-ask, as for every other model). What works is detected once per endpoint (base URL and
model) and remembered by the registry that resolved the model (`engine.llm.capabilities`)
and in the run's store (`engine.store.support`), so later calls, and every other process on
that store, go straight to it.

The `structured` switch, per endpoint (registry field) and per seat (`?structured=`):
`auto` (detect, the default), `schema` or `json` (that mode only, no detection), `off`
(prompted only). Simulated models and other providers always take the prompted path.

Line formats (free text read by labelled lines) take a grammar instead: `engine.llm.lines`.

The format travels in `extra_body`, not as langchain's `response_format` argument: with that
argument langchain-openai reads the reply through the SDK's `parse`, which raises on a reply cut
at its token cap instead of returning the text, and the raw reply must reach the turn.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from engine.llm.capabilities import Capabilities
from engine.models import ConfigError

if TYPE_CHECKING:
    from engine.llm.limits import CallGate
    from engine.store import Store

SUPPORT_KIND = "structured"  # its rows in the store's endpoint_support

SWITCHES = ("auto", "schema", "json", "off")
CONSTRAINED, JSON_MODE, PROMPTED = "constrained", "json mode", "prompted"
_LADDER = (CONSTRAINED, JSON_MODE, PROMPTED)  # what detection tries, in order
_FORCED = {"schema": CONSTRAINED, "json": JSON_MODE, "off": PROMPTED}
OPENAI_HOST = "api.openai.com"
_REFUSAL_WORDS = ("response_format", "json_schema", "json_object", "schema", "format")

STRING: dict[str, Any] = {"type": "string"}
STANCE_CHARS = 40  # a stance: a short answer (at most 12 words) fits


def text(chars: int) -> dict[str, Any]:
    """A string of 1..`chars` characters with no quote, backslash or control character, as
    a `pattern` (which llama.cpp's and llama-cpp-python's schema grammars and vLLM enforce):
    a constrained small model can neither write an essay into it nor break the object with
    a raw line break (their plain strings allow one, and the reply then does not parse)."""
    return {"type": "string", "pattern": f'^[^"\\\\\\x00-\\x1f]{{1,{chars}}}$'}


STANCE_STRING = text(STANCE_CHARS)
# A sentence or two (an answer, a flaw, a position) and two or three (a reason): what the
# prompts ask for, bounded so that a proposal's object (about 450 characters) closes within
# a small cap (160 tokens) instead of being cut open.
SENTENCE, REASONS = text(160), text(240)
SENTENCES: dict[str, Any] = {"type": "array", "items": SENTENCE}
BOOLEAN: dict[str, Any] = {"type": "boolean"}


def one_of(*values: str) -> dict[str, Any]:
    """A string that must be one of `values`."""
    return {"type": "string", "enum": list(values)}


def array_of(properties: Mapping[str, Any]) -> dict[str, Any]:
    """A list of objects, each with exactly `properties`."""
    return {"type": "array", "items": _object(properties)}


def _object(properties: Mapping[str, Any]) -> dict[str, Any]:
    # Every key required and no other allowed: what OpenAI's strict mode accepts.
    return {"type": "object", "properties": dict(properties), "required": list(properties),
            "additionalProperties": False}


@dataclass(frozen=True)
class OutputSchema:
    """A JSON phase's reply shape: a name for the server and the object's JSON schema."""

    name: str
    schema: dict[str, Any] = field(hash=False)

    @property
    def keys(self) -> tuple[str, ...]:
        """The object's keys, in the order the prompt lists them."""
        return tuple(self.schema["properties"])

    def response_format(self, mode: str, host: str = "") -> dict[str, Any]:
        """The `response_format` a request to `host` carries in `mode` (constrained or json
        mode). OpenAI's own API gets plain strings (no `pattern`), which its strict mode
        takes for sure."""
        schema = _plain(self.schema) if host == OPENAI_HOST else self.schema
        if mode == CONSTRAINED:
            return {"type": "json_schema",
                    "json_schema": {"name": self.name, "schema": schema, "strict": True}}
        # json mode carries the schema too: llama-cpp-python's server, which refuses
        # json_schema, constrains json_object output to it; others ignore the extra field
        return {"type": "json_object", "schema": schema}

    def followed(self, obj: Mapping[str, Any] | None) -> bool:
        """True when a reply read as `obj` has every key asked for (a server that honours
        the format cannot answer otherwise)."""
        return obj is not None and all(key in obj for key in self.keys)


def _plain(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {key: _plain(value) for key, value in schema.items() if key != "pattern"}
    if isinstance(schema, list):
        return [_plain(value) for value in schema]
    return schema


def json_schema(name: str, properties: Mapping[str, Any]) -> OutputSchema:
    """A phase's schema: an object with exactly `properties` (name -> JSON schema)."""
    return OutputSchema(name, _object(properties))


def check_switch(value: Any, where: str, name: str = "structured",
                 allowed: Sequence[str] = SWITCHES) -> str:
    """A `structured` (or `grammar`) value checked: one of `allowed` (`ConfigError` naming
    `where`)."""
    text = str(value).strip().lower() if isinstance(value, str) else ""
    if text not in allowed:
        raise ConfigError(f"{where}{name} must be one of {', '.join(allowed)}, got "
                          f"{value!r}", "input")
    return text


# ------------------------------------------------------------------ what each endpoint supports
def _kept(known: str, mode: str) -> bool:
    """Never an upgrade: a mode once found refused stays refused."""
    return _LADDER.index(mode) <= _LADDER.index(known)


def refused(exc: BaseException) -> bool:
    """True for a server's refusal of the requested format: HTTP 400 or 422 naming it, or a
    500 naming `response_format` (llama-cpp-python's server fails its request validation
    that way on `json_schema`)."""
    status = getattr(exc, "status_code", None)
    text = str(exc).lower()
    if status == 500:
        return "response_format" in text
    return status in (400, 422) and any(word in text for word in _REFUSAL_WORDS)


def _next(mode: str) -> str:
    return _LADDER[_LADDER.index(mode) + 1]


# ------------------------------------------------------------------ one JSON call
class MarkedOutput:
    """What `get_model` marked on an OpenAI-compatible model (`parley_output`) for its
    structured output: the seat's `switch` (under `switch_name`), its `endpoint` (base URL
    and model), and the `capabilities` of the registry that resolved it, where what the
    endpoint supports is learned."""

    def __init__(self, model: Any, store: Store | None, switch_name: str):
        self.marked: Mapping[str, Any] = getattr(model, "parley_output", None) or {}
        self.store = store
        self.capabilities: Capabilities = self.marked.get("capabilities") or Capabilities()
        self.switch = str(self.marked.get(switch_name) or "off")
        host, name = self.marked.get("endpoint") or ("", "")
        self.endpoint = (str(host), str(name))


async def generate(model: Any, messages: Sequence[Any], **body: Any) -> Any:
    """`model.ainvoke(messages)`: the reply's message; `body`'s fields (a response format, a
    grammar) are added to the request's body. A chat model `get_model` resolved for an
    OpenAI-compatible endpoint (`parley_output`) is called through its own `_agenerate`
    when nothing in the process watches or caches its calls (no LangChain callback, tracer,
    cache or rate limiter is set up): langchain-core's run around a call (its callback
    managers, config and run ids) cost more CPU than Parley's own work on it."""
    fields = {"extra_body": {**(model.extra_body or {}), **body}} if body else {}
    if _unwatched(model):
        return await _generated(model, messages, **fields)
    return await (model.bind(**fields) if fields else model).ainvoke(messages)


async def _generated(model: Any, messages: Sequence[Any], **fields: Any) -> Any:
    """The message `model._agenerate` replies with, carrying in its `response_metadata` what
    `ainvoke` puts there: the generation's info (such as the response headers) and the
    result's `llm_output`."""
    result = await model._agenerate(list(messages), **fields)
    for generation in result.generations:
        info = {key: value for key, value in (generation.generation_info or {}).items()
                if key != "lc_gateway_metadata"}
        generation.message.response_metadata = {**info, **generation.message.response_metadata}
    message = result.generations[0].message
    if len(result.generations) == 1 and result.llm_output is not None:
        message.response_metadata = {**result.llm_output, **message.response_metadata}
    return message


# `_unwatched` by model id, once a run (`runmodels.open_run`; None outside one): a run's
# watchers are set up before it starts, and langchain-core's answer cost a lean call most.
WATCHED: ContextVar[dict[int, tuple[Any, bool]] | None] = ContextVar("parley_watched",
                                                                    default=None)


def _unwatched(model: Any) -> bool:
    """True for a model of Parley's OpenAI-compatible endpoints that no LangChain callback,
    tracer (LangSmith's environment included), cache or rate limiter would see a call of."""
    if getattr(model, "parley_output", None) is None:
        return False
    memo = WATCHED.get()
    if memo is None:
        return _nothing_watches(model)
    found = memo.get(id(model))
    if found is None or found[0] is not model:  # the entry holds the model its id keys
        found = memo[id(model)] = (model, _nothing_watches(model))
    return found[1]


def _nothing_watches(model: Any) -> bool:
    from langchain_core.callbacks.manager import AsyncCallbackManager
    from langchain_core.globals import get_llm_cache
    from langchain_core.language_models.chat_models import BaseChatModel
    if not isinstance(model, BaseChatModel) or model.rate_limiter is not None or \
            model.output_version not in (None, "v0") or \
            (model.cache is not False and (model.cache is not None or get_llm_cache())):
        return False
    return not AsyncCallbackManager.configure(None, model.callbacks, model.verbose, None,
                                              model.tags, None, model.metadata).handlers


class StructuredOutput(MarkedOutput):
    """The output path of one JSON call (`RunContext.call_json`) for one seat's model.

    `wrap(model)` is what the guarded call invokes; `mode` is the path the last request took
    ("constrained", "json mode" or "prompted"), recorded on the turn. What detection learns
    goes to the capabilities of the registry that resolved the model and to `store` (the
    run's), for every process.
    """

    def __init__(self, model: Any, schema: OutputSchema | None, store: Store | None = None):
        super().__init__(model, store, "structured")
        self.schema = schema
        self.switch = self.switch if schema is not None else "off"
        self.host = urlsplit(self.endpoint[0]).hostname or self.endpoint[0]  # or a bare host
        self.mode = self.start()

    def start(self) -> str:
        """The mode the next request takes: the forced one, else the detected one, else the
        top of the ladder (detection)."""
        if self.switch != "auto":
            return _FORCED[self.switch]
        return self.supported() or CONSTRAINED

    def supported(self) -> str | None:
        """The mode known for this call's endpoint, or None while unknown."""
        return self.capabilities.known(SUPPORT_KIND, self.endpoint)

    def _remember(self, mode: str) -> None:
        self.capabilities.learn(SUPPORT_KIND, self.endpoint, mode, self.store, keep=_kept)

    async def prepare(self, gate: CallGate | None = None, timeout: float | None = None) -> None:
        """Before the call is admitted by its endpoint's limits (`gate`, unused here): while
        another call of this event loop detects the endpoint's mode, wait for its answer. A
        call admitted first and then kept waiting would send with every other waiting call at
        once when detection ends, past the rate the limits admitted them at."""
        if self.switch != "auto" or self.supported() is not None:
            return
        lock = self.capabilities.detecting(SUPPORT_KIND, self.endpoint)
        if lock.locked():  # held by the call detecting it
            async with lock:
                pass

    def wrap(self, model: Any) -> Any:
        """The model the guarded call invokes: the seat's own for the prompted path."""
        if self.start() == PROMPTED:
            self.mode = PROMPTED
            return model
        return FormattedModel(self, model)

    def ignored(self, reply: str, obj: Mapping[str, Any] | None) -> bool:
        """After `reply`, read as `obj`: True (and the endpoint's mode stepped down, when
        detecting) when the server ignored the format it was asked for. An object cut short
        (at the output cap) was not ignored: it starts as one."""
        if self.mode == PROMPTED or self.schema is None:
            return False
        if obj is None:
            ignored = not reply.lstrip().startswith("{")
        else:
            ignored = self.mode == CONSTRAINED and not self.schema.followed(obj)
        if ignored and self.switch == "auto":
            self._remember(_next(self.mode))
        return ignored

    async def invoke(self, model: Any, messages: Sequence[Any]) -> Any:
        """One request down the ladder: a refusal of the format steps down (remembered when
        detecting); any other error is the call's, for the guarded call to retry or record.

        While an endpoint's mode is unknown, one call detects it (its own request is the
        probe) and the calls that start meanwhile wait for the answer, then send at once,
        concurrently: only the detecting request holds the endpoint's lock. A mode another
        process stored is read first, and nothing is detected."""
        if self.switch != "auto" or self.supported() is not None:
            return await self._send(model, messages, self.start())
        async with self.capabilities.detecting(SUPPORT_KIND, self.endpoint):
            if self.capabilities.recall(SUPPORT_KIND, self.endpoint, self.store,
                                        _LADDER) is None:  # this call detects
                return await self._descend(model, messages, CONSTRAINED)
        return await self._descend(model, messages, self.start())  # learned meanwhile

    async def _descend(self, model: Any, messages: Sequence[Any], mode: str) -> Any:
        """Send in `mode`, stepping down the ladder at each refusal of the format (each step
        remembered); the prompted path takes what is left."""
        while mode != PROMPTED:
            try:
                reply = await self._send(model, messages, mode)
            except Exception as exc:
                if not refused(exc):
                    raise
                mode = _next(mode)
                self._remember(mode)
                continue
            self._remember(mode)
            return reply
        return await self._send(model, messages, PROMPTED)

    async def _send(self, model: Any, messages: Sequence[Any], mode: str) -> Any:
        self.mode = mode
        if mode == PROMPTED or self.schema is None:
            return await generate(model, messages)
        return await generate(model, messages,
                              response_format=self.schema.response_format(mode, self.host))


class FormattedModel:
    """A seat's chat model whose requests ask for structured output (`output.invoke`: a
    `StructuredOutput`, or a line format's `LineOutput`). Everything the guarded call reads
    besides `ainvoke` (its call policy, its type) is the seat's model's."""

    def __init__(self, output: Any, model: Any):
        self._output, self._model = output, model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    async def ainvoke(self, messages: Sequence[Any], config: Any = None) -> Any:
        return await self._output.invoke(self._model, messages)
