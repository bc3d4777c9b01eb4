"""Endpoints: where a model may be called, and which server-side key may go there.

The operator registers endpoints in one place: the environment (`PARLEY_ENDPOINTS`, JSON) or
`.streamlit/secrets.toml` (`[endpoints.NAME]` tables). `OPENAI_BASE_URL` / `OLLAMA_HOST` count
as that provider's own URL, and the CLI's `--base-url` registers itself. The rule:

- a key from the environment or secrets goes only to its provider's own API or to a
  registered endpoint;
- a base URL that arrives with data (a spec typed in the app, a library YAML, an experiment
  spec, an imported run) is called without any server-side key, and only when free URLs are
  allowed (`allow_free_urls`; the app turns it on with `PARLEY_ALLOW_BASE_URLS=1`);
- only `http` and `https`; link-local and cloud metadata addresses only when registered;
- a key written into a spec string is refused.

No key value is ever part of a repr, a description or a stored spec.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote

from engine.checks import require_number
from engine.llm.capabilities import Capabilities
from engine.llm.lines import GRAMMARS
from engine.llm.prices import Price, PriceTable, price_value
from engine.llm.secretsfile import json_setting, setting
from engine.llm.sizes import MAX_REPLY_CAP
from engine.llm.structured import check_switch
from engine.llm.urls import check_url, risky_host
from engine.models import ConfigError, known_keys
from engine.redaction import variable_name

DEFAULT_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "ollama": None}
PROVIDER_URLS = {"openai": "OPENAI_BASE_URL", "ollama": "OLLAMA_HOST"}
ENDPOINTS_VAR = "PARLEY_ENDPOINTS"
ALLOW_VAR = "PARLEY_ALLOW_BASE_URLS"
REGISTER_HELP = (f"register it as an endpoint ({ENDPOINTS_VAR} in the environment or "
                 "[endpoints.NAME] in .streamlit/secrets.toml) and use ?endpoint=NAME")
_IMPLICIT = ("provider", "cli", "code")  # registered by a setting or typed by the operator
# An endpoint's call policy: the output cap per turn, the per-call timeout in seconds, the
# retries after a transient failure, the calls in flight at once, the requests and the tokens
# per minute, and the bytes of a reply the store keeps (`engine.llm.sizes`; name: (low,
# high)). rpm, tpm and concurrency are limits every process calling the endpoint shares when
# the store is PostgreSQL (engine.llm.limits).
POLICY_FIELDS: dict[str, tuple[float, float]] = {
    "max_tokens": (1, 1_000_000), "timeout": (0.001, 3600.0), "retries": (0, 10),
    "concurrency": (1, 1000), "rpm": (1, 1_000_000), "tpm": (1, 1_000_000_000),
    "max_reply_bytes": (1024, MAX_REPLY_CAP)}
_ENDPOINT_FIELDS = ("base_url", "key_env", "key", "provider", *POLICY_FIELDS, "structured",
                    "grammar", "price_input", "price_output")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

@dataclass(frozen=True)
class Endpoint:
    """A base URL the operator registered, and where its key lives (the key is never shown).

    `key_env` names an environment variable (or a top-level secret) holding the key; `key`
    comes only from `.streamlit/secrets.toml`. `origin` says who registered it: `environment`,
    `secrets`, `provider` (OPENAI_BASE_URL / OLLAMA_HOST), `cli` (--base-url) or `code` (a
    `base_url` keyword). The implicit ones take the provider's own key variable.
    """

    name: str
    base_url: str
    provider: str = "openai"
    key_env: str | None = None
    key: str | None = field(default=None, repr=False, compare=False)
    origin: str = "environment"
    max_tokens: int | None = None
    timeout: float | None = None
    retries: int | None = None
    concurrency: int | None = None
    rpm: int | None = None
    tpm: int | None = None
    max_reply_bytes: int | None = None  # bytes of a reply stored (engine.llm.sizes.REPLY_CAP)
    structured: str = "auto"  # structured output: auto, schema, json or off (structured.py)
    grammar: str = "auto"  # line-format grammars: auto (probed), off or gbnf (lines.py)
    price: Price | None = None  # dollars per million tokens (price_input, price_output)

    def policy(self) -> dict[str, Any]:
        """The call policy the operator set on this endpoint (only the fields given)."""
        return {name: getattr(self, name) for name in POLICY_FIELDS
                if getattr(self, name) is not None}

    def __str__(self) -> str:
        return f"{self.name} ({self.provider}, {self.base_url})"


@dataclass(frozen=True)
class Route:
    """Where one model is called and with which key; `suffix` is what its spec records."""

    base_url: str | None
    key: str | None = field(repr=False, default=None)
    suffix: str = ""
    registered: bool = True
    endpoint: Endpoint | None = None  # the registered endpoint called, with its call policy


def with_base_url(spec: str, url: str) -> str:
    """`spec` with `?base_url=URL` added (unless it names its own base_url or endpoint)."""
    head, _, query = spec.partition("?")
    names = {k for k, _ in parse_qsl(query, keep_blank_values=True)}
    if names & {"base_url", "endpoint"}:
        return spec
    joined = "&".join(p for p in (query, _url_suffix(url)) if p)
    return f"{head}?{joined}"


# ------------------------------------------------------------------ the registry
def free_urls_allowed(environ: Mapping[str, Any], secrets: Mapping[str, Any] | None) -> bool:
    """The app's switch: `PARLEY_ALLOW_BASE_URLS=1` (environment or secrets) allows base URLs
    that are not registered (still never with a server-side key)."""
    value = environ.get(ALLOW_VAR)
    if value is None:
        value = setting(secrets, ALLOW_VAR)
    return str(value).strip().lower() in ("1", "true", "yes", "on")


class EndpointRegistry:
    """The endpoints this process (or app session) may call, and the key rule; its
    `capabilities` are what it has learned each endpoint supports and the HTTP clients that
    reach them, shared by every model it resolves (`engine.llm.capabilities`)."""

    def __init__(self, endpoints: Iterable[Endpoint] = (), *, allow_free_urls: bool = True,
                 environ: Mapping[str, Any] | None = None,
                 secrets: Mapping[str, Any] | None = None, prices: PriceTable | None = None):
        self._endpoints: dict[str, Endpoint] = {}
        self.allow_free_urls = bool(allow_free_urls)
        self._environ = environ if environ is not None else {}
        self._secrets = secrets
        # the operator's prices over the list prices (engine.llm.prices; `from_settings`
        # reads them): a registry made without them knows the list prices only
        self.prices = prices if prices is not None else PriceTable()
        self.capabilities = Capabilities()
        for endpoint in endpoints:
            self.add(endpoint)

    def __repr__(self) -> str:  # names and URLs only: never a key
        return (f"EndpointRegistry({', '.join(map(str, self._endpoints.values())) or 'empty'}; "
                f"free URLs {'on' if self.allow_free_urls else 'off'})")

    @classmethod
    def from_settings(cls, environ: Mapping[str, Any], secrets: Mapping[str, Any] | None = None,
                      allow_free_urls: bool = True) -> EndpointRegistry:
        """Endpoints from `PARLEY_ENDPOINTS` (JSON), `[endpoints.NAME]` in secrets, and the
        providers' own URLs (`OPENAI_BASE_URL`, `OLLAMA_HOST`); prices from `PARLEY_PRICES`
        and `[prices."SPEC"]` (`engine.llm.prices`)."""
        registry = cls(allow_free_urls=allow_free_urls, environ=environ, secrets=secrets,
                       prices=PriceTable.from_settings(environ, secrets))
        table = json_setting(environ, ENDPOINTS_VAR,
                             '{"NAME": {"base_url": "...", "key_env": "VAR"}}')
        if table is not None:
            for name, entry in _table(table, ENDPOINTS_VAR).items():
                if isinstance(entry, Mapping) and "key" in entry:
                    raise ConfigError(f"{ENDPOINTS_VAR} endpoint {name!r} holds a key; use "
                                      "key_env (a variable's name), or key in "
                                      ".streamlit/secrets.toml", "input")
                registry.add(_endpoint(name, entry, "environment"))
        table = setting(secrets, "endpoints")
        if table is not None:
            for name, entry in _table(table, "[endpoints] in secrets.toml").items():
                registry.add(_endpoint(name, entry, "secrets"))
        for provider, var in PROVIDER_URLS.items():
            url = environ.get(var) or setting(secrets, var)
            if url and str(url).strip():
                registry.add(Endpoint(f"{provider}-default", check_url(str(url), var),
                                      provider, origin="provider"))
        return registry

    # -------------------------------------------------------------- contents
    def add(self, endpoint: Endpoint) -> Endpoint:
        """Add one endpoint; a second endpoint with the same name is a `ConfigError`."""
        if endpoint.name in self._endpoints:
            raise ConfigError(f"endpoint {endpoint.name!r} is registered twice", "input")
        self._endpoints[endpoint.name] = endpoint
        return endpoint

    def register(self, url: str, name: str = "cli", provider: str = "openai") -> Endpoint:
        """Register a base URL the operator typed (the CLI's `--base-url`)."""
        clean = check_url(url, "--base-url" if name == "cli" else "base_url")
        found = self.by_url(clean, provider)
        if found is not None:
            return found
        unique, number = name, 2
        while unique in self._endpoints:
            unique, number = f"{name}-{number}", number + 1
        return self.add(Endpoint(unique, clean, provider, origin="cli"))

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        """Every registered endpoint, the providers' own URLs included."""
        return tuple(self._endpoints.values())

    def names(self, provider: str | None = None) -> list[str]:
        """Registered names (of one provider), excluding the providers' own URLs."""
        return [e.name for e in self._endpoints.values() if e.origin != "provider"
                and (provider is None or e.provider == provider)]

    def get(self, name: str) -> Endpoint:
        """The endpoint called `name`, or a `ConfigError` listing the registered ones."""
        if name in self._endpoints:
            return self._endpoints[name]
        known = ", ".join(self.names()) or "none are registered"
        raise ConfigError(f"no endpoint named {name!r} (registered: {known}); "
                          f"{REGISTER_HELP}", "input")

    def by_url(self, url: str, provider: str) -> Endpoint | None:
        """The registered endpoint of `provider` at `url` (normalised), if any."""
        return next((e for e in self._endpoints.values()
                     if e.provider == provider and e.base_url == url), None)

    def provider_url(self, provider: str) -> Endpoint | None:
        """The provider's own URL set by the operator (`OPENAI_BASE_URL`, `OLLAMA_HOST`)."""
        return next((e for e in self._endpoints.values()
                     if e.provider == provider and e.origin == "provider"), None)

    def secret(self, name: str | None) -> str | None:
        """A setting's value: the environment first, then the secrets (never recorded)."""
        if not name:
            return None
        value = self._environ.get(name)
        if not value:
            value = setting(self._secrets, name)
        return str(value) if value else None

    def key_for(self, endpoint: Endpoint) -> str | None:
        """The key an endpoint receives: its own `key`, else the value of its key variable."""
        if endpoint.key:
            return endpoint.key
        value = self.secret(_key_variable(endpoint))
        if value is None and endpoint.key_env and endpoint.origin not in _IMPLICIT:
            raise ConfigError(f"endpoint {endpoint.name!r} needs its key: set "
                              f"{_shown_variable(endpoint.key_env)} in the environment or "
                              ".streamlit/secrets.toml", "no_model")
        return value

    def key_home(self, endpoint: Endpoint) -> str:
        """Where an endpoint's key lives, for a page (never the value)."""
        if endpoint.key:
            return f"secrets.toml [endpoints.{endpoint.name}] key"
        var = _key_variable(endpoint)
        if not var:
            return "no key"
        return f"{_shown_variable(var)} ({'present' if self.secret(var) else 'missing'})"

    def describe(self) -> list[dict[str, str]]:
        """One row per endpoint: name, provider, URL, who registered it, where its key lives,
        and the call policy it sets (output cap, timeout, retries, concurrency, requests and
        tokens per minute), and its price in US dollars when it sets one."""
        return [{"name": e.name, "provider": e.provider, "base_url": e.base_url,
                 "registered by": e.origin, "key": self.key_home(e),
                 "call policy": ", ".join(f"{k} {v:g}" for k, v in e.policy().items())
                 or "defaults",
                 "price": f"${e.price.input:g} in / ${e.price.output:g} out per million tokens"
                 if e.price is not None else "by model"}
                for e in self._endpoints.values()]

    # -------------------------------------------------------------- the rule
    def route(self, provider: str, *, endpoint: str | None = None,
              base_url: str | None = None, trusted_url: str | None = None) -> Route:
        """Where a `provider` model is called and with which key.

        `endpoint` names a registered endpoint; `base_url` came with data (a spec string) and
        gets a key only when it is a registered endpoint's URL; `trusted_url` was given by
        the operator's own code (a `base_url` keyword) and counts as registered.
        """
        if endpoint is not None:
            if base_url or trusted_url:
                raise ConfigError("give a model either ?endpoint=NAME or a base_url, not both",
                                  "input")
            named = self.get(str(endpoint).strip())
            if named.provider != provider:
                raise ConfigError(f"endpoint {named.name!r} serves {named.provider} models, "
                                  f"not {provider}", "input")
            return Route(named.base_url, self.key_for(named), f"endpoint={named.name}",
                         endpoint=named)
        if trusted_url or base_url:
            url = check_url(trusted_url or base_url)
            found = self.by_url(url, provider)
            if found is not None or trusted_url:  # the operator's URL takes the provider's key
                key = self.key_for(found) if found is not None else self.secret(
                    DEFAULT_KEYS.get(provider))
                return Route(url, key, _url_suffix(url), endpoint=found)
            if not self.allow_free_urls:
                names = ", ".join(self.names(provider)) or "none are registered"
                raise ConfigError(f"base_url {url} is not a registered endpoint, and this app "
                                  f"calls only registered ones (registered: {names}); "
                                  f"{REGISTER_HELP}", "input")
            reason = risky_host(url)
            if reason:
                raise ConfigError(f"base_url {url} is refused: {reason}; {REGISTER_HELP} if "
                                  "it is really meant", "input")
            return Route(url, None, _url_suffix(url), registered=False)
        own = self.provider_url(provider)
        if own is not None:
            return Route(own.base_url, self.key_for(own), "", endpoint=own)
        return Route(None, self.secret(DEFAULT_KEYS.get(provider)), "")


def registry_or_environment(endpoints: EndpointRegistry | None) -> EndpointRegistry | None:
    """`endpoints` when given, else a registry of the environment's settings, made once for
    a run or an experiment so that its seats share what it learns of each endpoint and its
    clients (None when the environment's endpoint table is broken: resolving a real model
    then says why, and a simulated run goes on)."""
    if endpoints is not None:
        return endpoints
    try:
        return EndpointRegistry.from_settings(os.environ)
    except ConfigError:
        return None


def _key_variable(endpoint: Endpoint) -> str | None:
    """The variable holding an endpoint's key: its `key_env`, or (for a provider URL, the
    CLI's or a code's base_url) the provider's own key variable."""
    return endpoint.key_env or (DEFAULT_KEYS.get(endpoint.provider)
                                if endpoint.origin in _IMPLICIT else None)


def _url_suffix(url: str) -> str:
    return f"base_url={quote(url, safe=':/[]')}"


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must map endpoint names to tables with base_url", "input")
    return {str(k): v for k, v in value.items()}


def _endpoint(name: str, entry: Any, origin: str) -> Endpoint:
    where = f"endpoint {name!r} ({'secrets.toml' if origin == 'secrets' else ENDPOINTS_VAR})"
    if not _NAME.fullmatch(name):
        raise ConfigError(f"{where}: a name is 1..64 letters, digits, '.', '_' or '-'", "input")
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where} must be a table with base_url", "input")
    known_keys(entry, _ENDPOINT_FIELDS, where, "field")
    provider = str(entry.get("provider") or "openai").strip().lower()
    if provider not in DEFAULT_KEYS:
        raise ConfigError(f"{where}: provider must be one of {', '.join(DEFAULT_KEYS)}",
                          "input")
    key_env, key = entry.get("key_env"), entry.get("key")
    if key_env and key:
        raise ConfigError(f"{where}: give key_env or key, not both", "input")
    if key_env is not None and (not isinstance(key_env, str) or not key_env.strip()):
        raise ConfigError(f"{where}: key_env names an environment variable", "input")
    policy: dict[str, Any] = {name: require_number(name, entry[name], POLICY_FIELDS,
                                                   f"{where}: ", text=False)
                              for name in POLICY_FIELDS if entry.get(name) is not None}
    structured = check_switch(entry.get("structured", "auto"), f"{where}: ")
    grammar = check_switch(entry.get("grammar", "auto"), f"{where}: ", "grammar", GRAMMARS)
    return Endpoint(name, check_url(entry.get("base_url"), f"{where} base_url"), provider,
                    key_env.strip() if key_env else None, str(key) if key else None, origin,
                    **policy, structured=structured, grammar=grammar,
                    price=_endpoint_price(entry, where, name))


def _endpoint_price(entry: Mapping[str, Any], where: str, name: str) -> Price | None:
    """An endpoint's `price_input` and `price_output` (both or neither), checked."""
    given = [name for name in ("price_input", "price_output") if entry.get(name) is not None]
    if not given:
        return None
    if len(given) == 1:
        raise ConfigError(f"{where}: give both price_input and price_output (US dollars per "
                          "million tokens), not one", "input")
    return Price(price_value(entry["price_input"], f"{where}: price_input"),
                 price_value(entry["price_output"], f"{where}: price_output"),
                 f"endpoint {name}")


def _shown_variable(name: str) -> str:
    """An endpoint's `key_env` as a page or an error may show it: the name when it reads as
    one (`engine.redaction.variable_name`), else a note that it is hidden (a key pasted
    where its variable's name belongs is never echoed)."""
    return name if variable_name(name) else "the variable its key_env names (hidden: it " \
        "does not read as a variable's name; a key itself belongs in key)"
