"""`get_model(spec)`: the only code that knows a vendor. Integration packages load lazily."""
from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from engine.checks import require_number
from engine.llm.lines import GRAMMARS
from engine.llm.prices import REPORTED_USAGE, Price, PriceTable
from engine.llm.structured import OPENAI_HOST, SWITCHES, check_switch
from engine.llm.urls import is_secret_name, refuse_secret
from engine.models import ConfigError, is_simulated
from engine.text import NAME_MAX

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry, Route

PROVIDERS = {
    # prefix: (package to pip install, module, class, environment variable holding the key)
    "openai": ("langchain-openai", "langchain_openai", "ChatOpenAI", "OPENAI_API_KEY"),
    "anthropic": ("langchain-anthropic", "langchain_anthropic", "ChatAnthropic",
                  "ANTHROPIC_API_KEY"),
    "ollama": ("langchain-ollama", "langchain_ollama", "ChatOllama", None),
}
DEFAULT_MAX_TOKENS = 1024  # a turn's output cap unless the seat or its endpoint sets one
_OWN_HOSTS = {"openai": OPENAI_HOST, "anthropic": "api.anthropic.com",
              "ollama": "localhost:11434"}
SPEC_HELP = ('use "simulated", "openai:MODEL" (openai:MODEL?endpoint=NAME for a registered '
             'OpenAI-compatible server), "anthropic:MODEL" or "ollama:MODEL"')


def parse_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """Split `"provider:model?k=v&..."` into (provider, model, params)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"model spec must be a non-empty string; {SPEC_HELP}", "no_model")
    head, _, query = spec.strip().partition("?")
    provider, _, name = head.partition(":")
    return provider.strip().lower(), name.strip(), dict(parse_qsl(query))


# What a spec string may set, per provider, and how each value is read. A spec is data (it
# may come from a file or a form), so anything else -- a key, a proxy, a client -- is refused.
# A range of whole numbers reads whole numbers only (`engine.checks.require_number`).
_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0), "top_p": (0.0, 1.0), "timeout": (0.001, 3600.0),
    "frequency_penalty": (-2.0, 2.0), "presence_penalty": (-2.0, 2.0),
    "max_tokens": (1, 1_000_000), "seed": (0, 2**63 - 1), "top_k": (1, 1_000_000),
    "num_ctx": (1, 10_000_000), "num_predict": (-2, 1_000_000)}
SPEC_PARAMS = {
    "openai": ("temperature", "top_p", "max_tokens", "timeout", "seed", "frequency_penalty",
               "presence_penalty"),
    "anthropic": ("temperature", "top_p", "top_k", "max_tokens", "timeout"),
    "ollama": ("temperature", "top_p", "top_k", "num_ctx", "num_predict", "seed"),
}
_ROUTING = ("base_url", "endpoint")


def check_spec_params(provider: str, query: Mapping[str, str], spec: str) -> dict[str, Any]:
    """The parameters of a spec string, each known for its provider and read as a number."""
    where = f"model spec {spec[:80]!r}: "
    allowed = SPEC_PARAMS.get(provider, ())
    switches = ("structured", "grammar") if provider == "openai" else ()
    out: dict[str, Any] = {}
    for name, raw in query.items():
        if name in _ROUTING:
            continue
        if name in switches:
            check_switch(raw, where, name, SWITCHES if name == "structured" else GRAMMARS)
            continue
        if name not in allowed:
            raise ConfigError(f"{where}{provider} models take no parameter {name!r}; parameters "
                              f"are {', '.join((*allowed, *switches, *_ROUTING))}", "input")
        out[name] = require_number(name, raw, _RANGES, where)
    return out


def get_model(spec: str = "simulated", *, endpoints: EndpointRegistry | None = None,  # noqa: C901, PLR0912
              secrets: Mapping[str, str] | None = None, **params: Any) -> Any:
    """Resolve a model spec to a langchain-core chat model.

    `endpoints` (an `engine.llm.endpoints.EndpointRegistry`) says where a key may go; None means
    the environment's (with `secrets` after it, e.g. Streamlit's), free base URLs allowed.
    A `base_url` keyword from Python code counts as the operator's; one inside the spec
    (`?base_url=URL`) is data and gets a server-side key only when it is a registered
    endpoint's URL; `?endpoint=NAME` names a registered endpoint. Keys go to the client only.
    """
    from engine.llm.endpoints import EndpointRegistry
    provider, name, query = parse_spec(spec)
    for key in query:  # a key in the spec is refused whatever the provider
        if is_secret_name(key):
            refuse_secret(f"model spec {provider}:{name}", key)
    if is_simulated(spec):
        from engine.simulated import SimulatedChatModel
        return SimulatedChatModel.from_options({**query, **params},
                                               spec=spec if not params else None)
    if provider not in PROVIDERS:
        raise ConfigError(f"unknown model spec {spec!r}; {SPEC_HELP}", "no_model")
    if not name:
        raise ConfigError(f"model spec {spec!r} names no model; write {provider}:MODEL", "no_model")
    options: dict[str, Any] = check_spec_params(provider, query, spec)
    for numeric in _RANGES:
        if numeric in params and params[numeric] is not None:
            params[numeric] = require_number(numeric, params[numeric], _RANGES)
    registry = endpoints if endpoints is not None else EndpointRegistry.from_settings(
        os.environ, secrets, allow_free_urls=True)
    endpoint = params.pop("endpoint", None) or query.get("endpoint")
    route = registry.route(provider, endpoint=endpoint, base_url=query.get("base_url"),
                           trusted_url=params.pop("base_url", None))
    package, module_name, class_name, key_var = PROVIDERS[provider]
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise ConfigError(f"{provider}: models need the {package} package: pip install {package}",
                          "no_model") from None
    options.update(params)
    if route.base_url:
        options["base_url"] = route.base_url
    policy = route.endpoint.policy() if route.endpoint is not None else {}
    cap = cap_output(provider, options, route.base_url,
                     policy.pop("max_tokens", DEFAULT_MAX_TOKENS))
    if provider == "ollama":
        options.pop("max_retries", None)
    else:
        options.setdefault("max_retries", 0)  # Parley's guarded calls own retries
        api_key = options.pop("api_key", None) or route.key
        if not api_key and route.base_url:
            api_key = "not-needed"  # local OpenAI-compatible servers accept any key
        if not api_key:
            raise ConfigError(f"{provider}:{name} needs an API key: set {key_var} "
                              "in the environment "
                              "or .streamlit/secrets.toml, or use a registered endpoint "
                              f"({provider}:MODEL?endpoint=NAME)", "no_model")
        options["api_key"] = api_key
        if provider == "openai" and not {"http_client", "http_async_client"} & options.keys():
            # Parley's own clients (engine.llm.transport): no redirect to another origin, and
            # a base URL that came with data reaches no link-local or metadata address,
            # whatever its name resolves to; a response is read up to a cap, and the reply
            # says where it was cut in a header (so the SDK hands the headers on). A proxy
            # from code goes into them. They are the endpoint's, kept by the registry and
            # shared by every model it resolves for that endpoint (one TLS context,
            # kept-alive connections pooled to its concurrency),
            # and they tell whether a failed call's request reached the server
            # (engine.llm.reach).
            from engine.llm.transport import shared_clients
            options["http_client"], options["http_async_client"] = shared_clients(
                registry.capabilities, route.base_url, guard=not route.registered,
                proxy=options.pop("openai_proxy", None), concurrency=policy.get("concurrency"),
                reply_cap=policy.get("max_reply_bytes"))
            options["include_response_headers"] = True
    chat_class = getattr(module, class_name)
    model = (reporting(chat_class) if provider == "openai" else chat_class)(model=name, **options)
    recorded = f"{provider}:{name}" + (f"?{route.suffix}" if route.suffix else "")
    host = server_name(route.base_url) or _OWN_HOSTS[provider]
    # What the guarded call reads: the endpoint's timeout, retries and concurrency (only
    # those the operator set), the gate its concurrency counts on, the host to name, and
    # the registry's capabilities (where its limits are kept when no store keeps them).
    # The output cap goes too: the limiter's estimate of a call counts it, and it bounds the
    # usage a reply may report (engine.llm.prices.read_usage).
    call = {**policy, "gate": route.endpoint.name if route.endpoint is not None else host,
            "host": host, "max_tokens": cap, "capabilities": registry.capabilities}
    attributes: list[tuple[str, Any]] = [("parley_spec", recorded), ("parley_call", call),
                                         ("parley_price", price_of(registry, route, recorded))]
    if provider == "openai":  # structured output (engine.llm.structured, engine.llm.lines): the
        endpoint = route.endpoint  # seat's switch wins; OpenAI's own API takes no grammar
        grammar = query.get("grammar") or (endpoint.grammar if endpoint is not None else "auto")
        attributes.append(("parley_output", {
            "structured": query.get("structured") or (
                endpoint.structured if endpoint is not None else "auto"),
            "grammar": "off" if own_api(provider, route.base_url) and grammar == "auto"
                else grammar,
            "endpoint": (route.base_url or _OWN_HOSTS[provider], name), "cap": cap,
            "capabilities": registry.capabilities}))  # where what it supports is learned
    for attribute, value in attributes:
        try:
            object.__setattr__(model, attribute, value)
        except Exception:  # some models forbid extra attributes: the defaults then apply
            pass
    return model


@functools.cache
def reporting(chat_class: type) -> type:
    """`chat_class` (langchain-openai's ChatOpenAI) keeping each reply's token usage as its
    server sent it, in `response_metadata[REPORTED_USAGE]`, for Parley to check once
    (`engine.llm.prices.read_usage`). langchain-openai does arithmetic on the raw `usage`
    (an object whose counts are strings, a list, a number where an object belongs: the
    call fails with a TypeError although the reply is good), so it gets only the counts that
    are whole numbers of 0 or more, which `usage_metadata` then holds."""
    base: Any = chat_class

    # any chat model class, known only at run time: Any to mypy
    class Reporting(base):  # type: ignore[misc]
        async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                             **kwargs: Any) -> Any:
            from engine.llm.transport import plain_client
            payload = self._get_request_payload(messages, stop=stop, **kwargs)
            plain = plain_client(self.root_async_client._client)
            if payload.get("stream") or "response_format" in payload or "extra_query" in \
                    payload or self.max_retries or self._use_responses_api(payload) or \
                    plain is None:
                return await super()._agenerate(messages, stop=stop, run_manager=run_manager,
                                                **kwargs)
            return await _lean_completion(self, payload, plain)

        def _create_chat_result(self, response: Any, generation_info: Any = None) -> Any:
            raw, response = _take_usage(response)
            result = super()._create_chat_result(response, generation_info)
            for generation in result.generations:
                meta = getattr(getattr(generation, "message", None), "response_metadata", None)
                if isinstance(meta, dict):
                    meta[REPORTED_USAGE] = raw
            return result

    Reporting.__name__ = Reporting.__qualname__ = chat_class.__name__
    Reporting.__doc__ = chat_class.__doc__
    return Reporting


async def _lean_completion(model: Any, payload: dict[str, Any], plain: Any) -> Any:
    """What langchain-openai's `_agenerate` does for a plain chat completion (no stream, no
    `response_format` argument, not the Responses API, no SDK retries), with the same request,
    reply and errors, sent straight over the aiohttp session of `plain` (the running loop's
    client of the endpoint, `engine.llm.transport.plain_client`; `post_plain`): no SDK
    transform of the messages, no httpx request or response, no typed copy of the reply,
    which together cost most of a call's CPU on a loaded machine. The URL, headers and
    timeout are the SDK's (`_request_frame`), the body `extra_body` merged and serialised as
    the SDK does; failures are the SDK's own classes (an httpx request or response made only
    for them); a reply of the usual shape is read as the dict, any other through the SDK's
    reading, so it fails as before."""
    from types import SimpleNamespace

    import multidict
    from langchain_openai.chat_models import base as lc
    from openai import APIConnectionError, APIError, APITimeoutError, BadRequestError
    from openai._base_client import FinalRequestOptions, _merge_mappings, make_request_options
    from openai._legacy_response import RAW_RESPONSE_HEADER, LegacyAPIResponse
    from openai._utils._json import openapi_dumps
    from openai.types.chat import ChatCompletion

    from engine.llm.transport import http_module, post_plain
    httpx, client = http_module(), model.root_async_client
    options = make_request_options(
        extra_headers={**(payload.pop("extra_headers", None) or {}), RAW_RESPONSE_HEADER: "true"},
        extra_body=payload.pop("extra_body", None), security={"bearer_auth": True},
        **({"timeout": payload.pop("timeout")} if "timeout" in payload else {}))
    extra = options.get("extra_json")
    body = openapi_dumps(_merge_mappings(payload, extra) if extra is not None else payload)
    url, headers, timeout = _request_frame(client, options)
    def request() -> Any:  # the httpx request the SDK's errors carry, made only for them
        return httpx.Request("POST", url, headers=headers, content=body)
    try:
        try:
            status, handed, content = await post_plain(plain, url, headers, body, timeout)
        except httpx.RequestError as exc:  # a time-out is one, as the SDK tells them apart
            raise (APITimeoutError if isinstance(exc, httpx.TimeoutException)
                   else APIConnectionError)(request=request()) from exc
        kept = multidict.CIMultiDict(handed)
        response: Any = _plain_completion(kept.get("content-type", ""), content) \
            if 200 <= status < 300 else None
        if response is None:
            made = httpx.Response(status, headers=handed, content=content, request=request())
            if not 200 <= status < 300:
                raise client._make_status_error_from_response(made) from None
            try:
                response = LegacyAPIResponse(
                    raw=made, cast_to=ChatCompletion, client=client, stream=False,
                    stream_cls=None, options=FinalRequestOptions.construct(
                        method="post", url="/chat/completions", json_data=payload,
                        **options)).parse()
            except Exception as exc:
                exc.response = made  # type: ignore[attr-defined]
                raise
    except BadRequestError as exc:
        lc._handle_openai_bad_request(exc)
        raise
    except APIError as exc:
        lc._handle_openai_api_error(exc)
        raise
    info: dict[str, Any] = {"headers": {key.lower(): ", ".join(kept.getall(key)) for key in
                                        kept}} if model.include_response_headers else {}
    lc._add_gateway_metadata(info, SimpleNamespace(headers=kept))
    return model._create_chat_result(response, info)


def _request_frame(client: Any, options: Mapping[str, Any]) -> tuple[
        str, list[tuple[str, str]], dict[str, Any]]:
    """(URL, headers, timeout extension) of a chat completion the SDK's `client` sends with
    `options`, as the SDK builds them (headers, bearer key, base URL joined): built by the SDK
    once per client and options, kept on the client (the key never leaves it)."""
    from openai._base_client import FinalRequestOptions
    framing = {name: value for name, value in options.items() if name != "extra_json"}
    key = repr(sorted(framing.items()))
    kept: dict[str, Any] = client.__dict__.setdefault("_parley_frames", {})
    frame = kept.get(key)
    if frame is None:
        if len(kept) >= 16:  # headers that change call by call: kept no more than a few
            kept.clear()
        request = client._build_request(FinalRequestOptions.construct(
            method="post", url="/chat/completions", json_data=None, **framing))
        frame = kept[key] = (str(request.url), [
            (name, value) for name, value in request.headers.multi_items()
            if name.lower() not in ("host", "content-length")], request.extensions["timeout"])
    return frame


def _plain_completion(content_type: str, content: bytes) -> dict[str, Any] | None:
    """A chat completion's JSON as a dict when it has the usual shape (a JSON object whose
    `choices` are objects each with a `message` object, and no `error`), else None."""
    if not content_type.split(";")[0].strip().endswith("json"):
        return None
    try:
        data: Any = json.loads(content)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    choices = data.get("choices")
    if not choices or not isinstance(choices, list) or data.get("error") or not all(
            isinstance(choice, dict) and isinstance(choice.get("message"), dict)
            for choice in choices):
        return None
    return dict(data)


_PLAIN_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")


def _take_usage(response: Any) -> tuple[Any, Any]:
    """(the `usage` a chat completion carries, as sent; the completion with only its plain
    counts left in `usage`, or none)."""
    if isinstance(response, dict):
        raw = response.get("usage")
    else:
        try:
            raw = response.model_dump(include={"usage"}, exclude_unset=True,
                                       warnings=False).get("usage")
        except Exception:  # a shape the SDK's model cannot dump: as if none was sent
            raw = None
    plain = {name: raw[name] for name in _PLAIN_COUNTS if isinstance(raw, dict) and
             type(raw.get(name)) is int and 0 <= raw[name] < 2 ** 63} or None
    if isinstance(response, dict):
        return raw, {**response, "usage": plain}
    try:
        return raw, response.model_copy(update={"usage": plain})
    except Exception:  # not a pydantic model after all: left as it came
        return raw, response


def price_of(registry: EndpointRegistry, route: Route, recorded: str) -> Price | None:
    """What a model costs (`engine.llm.prices`): its endpoint's price, else the operator's
    table, else the shipped default when it is called at its provider's own API."""
    if route.endpoint is not None and route.endpoint.price is not None:
        return route.endpoint.price
    table = getattr(registry, "prices", None) or PriceTable()
    return table.lookup(recorded, own_api=own_api(recorded.partition(":")[0], route.base_url))


def own_api(provider: str, base_url: str | None) -> bool:
    """Whether a `provider` model at `base_url` is called at its provider's own API."""
    return not base_url or urlsplit(base_url).hostname == _OWN_HOSTS.get(provider)


def server_name(url: str | None) -> str:
    """`scheme://host:port` of a base URL, for a message: never a path's query or a key."""
    if not url:
        return ""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


def cap_output(provider: str, options: dict[str, Any], base_url: str | None, default: int) -> int:
    """Bound a turn's output, in the field the server reads; the cap comes back.

    The seat's own `max_tokens` (or Ollama's `num_predict`) wins; else `default` (the
    endpoint's cap, or `DEFAULT_MAX_TOKENS`). langchain-openai sends `max_tokens` as
    `max_completion_tokens`, which OpenAI's API reads and OpenAI-compatible servers such as
    llama.cpp's ignore, so a server that is not api.openai.com gets `max_tokens` in the
    request body itself.
    """
    if provider == "ollama":
        return int(options.setdefault("num_predict", default))
    cap = int(options.pop("max_tokens", None) or default)
    if provider == "openai" and not own_api(provider, base_url):
        options["extra_body"] = {**(options.get("extra_body") or {}), "max_tokens": cap}
    else:
        options["max_tokens"] = cap
    return cap


def resolve_model(model: Any, temperature: float | None = None,
                  endpoints: EndpointRegistry | None = None) -> Any:
    """A seat's model as a chat model: spec strings go through `get_model` (with the
    registry `endpoints`, see `get_model`)."""
    if isinstance(model, str):
        if len(model) > NAME_MAX or "\x00" in model:
            raise ConfigError(f"a model spec may have at most {NAME_MAX} characters and no "
                              f"NUL, got {len(model)} characters", "limit")
        params: dict[str, Any] = {"temperature": temperature} \
            if temperature is not None and not is_simulated(model) else {}
        return get_model(model, endpoints=endpoints, **params)
    if not hasattr(model, "ainvoke"):
        raise ConfigError(f"a seat's model must be a chat model or a spec string, got "
                          f"{type(model).__name__}", "no_model")
    return model


def providers_status(endpoints: EndpointRegistry | None = None,
                     secrets: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Which providers are usable here: package installed, key present, the provider's own
    base URL (never a key's value). `endpoints` defaults to the environment's registry."""
    from engine.llm.endpoints import EndpointRegistry
    registry = endpoints if endpoints is not None else EndpointRegistry.from_settings(
        os.environ, secrets)
    rows = [{"provider": "simulated", "package": "built in", "installed": True,
             "key": "not needed", "base_url": ""}]
    for provider, (package, module_name, _cls, key_var) in PROVIDERS.items():
        installed = importlib.util.find_spec(module_name) is not None
        key = "not needed" if key_var is None else (
            "present" if registry.secret(key_var) else f"missing ({key_var})")
        own = registry.provider_url(provider)
        rows.append({"provider": provider, "package": package, "installed": installed,
                     "key": key, "base_url": own.base_url if own is not None else ""})
    return rows
