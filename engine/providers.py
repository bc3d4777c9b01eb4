"""`get_model(spec)`: the only code that knows a vendor. Integration packages load lazily."""
from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

from .models import ConfigError

PROVIDERS = {
    # prefix: (package to pip install, module, class, environment variable holding the key)
    "openai": ("langchain-openai", "langchain_openai", "ChatOpenAI", "OPENAI_API_KEY"),
    "anthropic": ("langchain-anthropic", "langchain_anthropic", "ChatAnthropic",
                  "ANTHROPIC_API_KEY"),
    "ollama": ("langchain-ollama", "langchain_ollama", "ChatOllama", None),
}
SPEC_HELP = ('use "simulated", "openai:MODEL" (with base_url for any OpenAI-compatible server), '
             '"anthropic:MODEL" or "ollama:MODEL"')


def parse_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """Split `"kind:model?k=v&..."` into (kind, model, params)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"model spec must be a non-empty string; {SPEC_HELP}", "no_model")
    head, _, query = spec.strip().partition("?")
    kind, _, name = head.partition(":")
    return kind.strip().lower(), name.strip(), dict(parse_qsl(query))


def get_model(spec: str = "simulated", *, secrets: Mapping[str, str] | None = None,
              **params: Any) -> Any:
    """Resolve a model spec to a langchain-core chat model.

    `secrets` (e.g. Streamlit's) is consulted after the environment for API keys; keys are
    handed to the client only, never recorded.
    """
    kind, name, query = parse_spec(spec)
    if kind == "simulated":
        from .simulated import SimulatedChatModel
        options = {**query, **params}
        return SimulatedChatModel.from_options(options, spec=spec if not params else None)
    if kind not in PROVIDERS:
        raise ConfigError(f"unknown model spec {spec!r}; {SPEC_HELP}", "no_model")
    if not name:
        raise ConfigError(f"model spec {spec!r} names no model; write {kind}:MODEL", "no_model")
    package, module_name, class_name, key_var = PROVIDERS[kind]
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise ConfigError(f"{kind}: models need the {package} package: pip install {package}",
                          "no_model") from None
    options: dict[str, Any] = {**query, **params}
    options.setdefault("max_retries", 0)  # Parley's guarded calls own retries
    if kind == "openai":
        base_url = options.pop("base_url", None) or os.environ.get("OPENAI_BASE_URL")
        if base_url:
            options["base_url"] = base_url
        key = options.pop("api_key", None) or _secret(key_var, secrets)
        if not key and base_url:
            key = "not-needed"  # local OpenAI-compatible servers accept any key
        if not key:
            raise ConfigError(f"openai:{name} needs an API key: set {key_var} in the environment "
                              "or .streamlit/secrets.toml, or give base_url for a local server",
                              "no_model")
        options["api_key"] = key
        if "http_async_client" not in options and "openai_proxy" not in options:
            options["http_async_client"] = _loop_safe_async_client()
    elif kind == "anthropic":
        key = options.pop("api_key", None) or _secret(key_var, secrets)
        if not key:
            raise ConfigError(f"anthropic:{name} needs an API key: set {key_var} in the "
                              "environment or .streamlit/secrets.toml", "no_model")
        options["api_key"] = key
    else:
        options.pop("max_retries", None)
        base_url = options.pop("base_url", None) or os.environ.get("OLLAMA_HOST")
        if base_url:
            options["base_url"] = base_url
    for numeric in ("temperature", "timeout"):
        if isinstance(options.get(numeric), str):
            options[numeric] = float(options[numeric])
    model = getattr(module, class_name)(model=name, **options)
    try:
        object.__setattr__(model, "parley_spec", f"{kind}:{name}")
    except Exception:  # some models forbid extra attributes; the spec then comes from the class
        pass
    return model


def _loop_safe_async_client() -> Any:
    """An async HTTP client for ChatOpenAI that keeps no idle connections.

    langchain-openai shares one cached async client per base URL, and every synchronous run is
    its own event loop (`asyncio.run`): a kept-alive connection from a finished run's loop
    fails the next run's first call with `RuntimeError: Event loop is closed`.
    """
    try:
        from langchain_openai._compat import httpx  # the flavour (httpx or httpx2) the SDK uses
    except ImportError:  # older langchain-openai: the SDK uses httpx
        import httpx
    openai = importlib.import_module("openai")
    return openai.DefaultAsyncHttpxClient(limits=httpx.Limits(max_keepalive_connections=0))


def _secret(name: str | None, secrets: Mapping[str, str] | None) -> str | None:
    if not name:
        return None
    value = os.environ.get(name)
    if not value and secrets is not None:
        try:
            value = secrets.get(name)
        except Exception:
            value = None
    return value or None


def resolve_model(model: Any, temperature: float | None = None) -> Any:
    """A seat's model as a chat model: spec strings go through `get_model`."""
    if model is None or (isinstance(model, str) and not model.strip()):
        raise ConfigError("every seat needs a model; " + SPEC_HELP, "no_model")
    if isinstance(model, str):
        params = {"temperature": temperature} if temperature is not None else {}
        if model.startswith("simulated"):
            params = {}
        return get_model(model, **params)
    if not hasattr(model, "ainvoke"):
        raise ConfigError(f"a seat's model must be a chat model or a spec string, got "
                          f"{type(model).__name__}", "no_model")
    return model


def providers_status(secrets: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Which providers are usable here: package installed, key present, base URL (no values)."""
    rows = [{"provider": "simulated", "package": "built in", "installed": True,
             "key": "not needed", "base_url": ""}]
    for kind, (package, module_name, _cls, key_var) in PROVIDERS.items():
        installed = importlib.util.find_spec(module_name) is not None
        key = "not needed" if key_var is None else (
            "present" if _secret(key_var, secrets) else f"missing ({key_var})")
        base = os.environ.get("OPENAI_BASE_URL" if kind == "openai" else
                              "OLLAMA_HOST" if kind == "ollama" else "", "")
        rows.append({"provider": kind, "package": package, "installed": installed,
                     "key": key, "base_url": base})
    return rows
