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

import ipaddress
import json
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from engine.models import ConfigError

DEFAULT_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "ollama": None}
PROVIDER_URLS = {"openai": "OPENAI_BASE_URL", "ollama": "OLLAMA_HOST"}
ENDPOINTS_VAR = "PARLEY_ENDPOINTS"
ALLOW_VAR = "PARLEY_ALLOW_BASE_URLS"
KEY_HOME = ("keys go in the environment or .streamlit/secrets.toml (or the environment "
            "variable an endpoint's key_env names), never in a model spec")
REGISTER_HELP = (f"register it as an endpoint ({ENDPOINTS_VAR} in the environment or "
                 "[endpoints.NAME] in .streamlit/secrets.toml) and use ?endpoint=NAME")
URL_MAX = 1000
_IMPLICIT = ("provider", "cli", "code")  # registered by a setting or typed by the operator
_ENDPOINT_FIELDS = ("base_url", "key_env", "key", "provider")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SECRET_NAME = re.compile(r"(^|_)(api_?key|key|keys|token|secret|password|passwd|pwd|auth|"
                          r"authorization|bearer|credentials?|cookie)$")
_DEFAULT_PORTS = {"http": 80, "https": 443}
METADATA_HOSTS = ("metadata.google.internal", "metadata", "metadata.goog",
                  "instance-data", "instance-data.ec2.internal")
METADATA_ADDRESSES = (ipaddress.ip_address("169.254.169.254"),
                      ipaddress.ip_address("fd00:ec2::254"),
                      ipaddress.ip_address("100.100.100.200"))


def is_secret_name(name: Any) -> bool:
    """True for a parameter name that would carry a credential (`api_key`, `token` ...)."""
    key = re.sub(r"[^a-z0-9]+", "_", str(name).strip().lower()).strip("_")
    return bool(_SECRET_NAME.search(key))


def refuse_secret(where: str, name: str) -> None:
    """The one message for a credential found where data goes."""
    raise ConfigError(f"{where} carries a credential ({name}); {KEY_HOME}", "input")


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

    def __str__(self) -> str:
        return f"{self.name} ({self.provider}, {self.base_url})"


@dataclass(frozen=True)
class Route:
    """Where one model is called and with which key; `suffix` is what its spec records."""

    base_url: str | None
    key: str | None = field(repr=False, default=None)
    suffix: str = ""
    registered: bool = True


# ------------------------------------------------------------------ URLs
def check_url(url: Any, what: str = "base_url") -> str:
    """`url` normalised (scheme and host lower case, default port and trailing slash dropped),
    or a `ConfigError`: only http/https, a host, no credentials, no control characters."""
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"{what} must be an http or https URL, got {url!r}", "input")
    text = url.strip()
    if len(text) > URL_MAX:
        raise ConfigError(f"{what} is {len(text)} characters; the limit is {URL_MAX}", "limit")
    if any(ord(ch) < 33 or ord(ch) == 127 for ch in text):
        raise ConfigError(f"{what} {text[:80]!r} contains spaces or control characters",
                          "input")
    try:
        parts = urlsplit(text)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise ConfigError(f"{what} {text[:80]!r} is not a valid URL ({exc})", "input") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ConfigError(f"{what} {text[:80]!r}: only http and https URLs are allowed, got "
                          f"{scheme + ':' if scheme else 'no scheme'}", "input")
    if parts.username is not None or parts.password is not None:
        refuse_secret(f"{what} {scheme}://...@{host}", "user:password in the URL")
    if not host:
        raise ConfigError(f"{what} {text[:80]!r} has no host", "input")
    for name, _value in parse_qsl(parts.query, keep_blank_values=True):
        if is_secret_name(name):
            refuse_secret(f"{what} {scheme}://{host}", name)
    if parts.fragment:
        raise ConfigError(f"{what} {text[:80]!r} must not have a #fragment", "input")
    shown = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        shown += f":{port}"
    query = f"?{parts.query}" if parts.query else ""
    return f"{scheme}://{shown}{parts.path.rstrip('/')}{query}"


def _address(host: str) -> Any:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if re.fullmatch(r"[0-9a-fA-Fx.]+", host):  # 2852039166, 0xa9fea9fe, 0251.0376.0251.0376
        try:
            return ipaddress.ip_address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def risky_host(url: str) -> str:
    """Why a normalised URL's host may not be called unregistered ("" when it may): a
    link-local address or a cloud metadata service."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host in METADATA_HOSTS:
        return f"{host} is a cloud metadata service"
    address = _address(host.split("%")[0])
    if address is None:
        return ""
    mapped = getattr(address, "ipv4_mapped", None)
    for candidate in (address, mapped):
        if candidate is None:
            continue
        if candidate in METADATA_ADDRESSES:
            return f"{candidate} is a cloud metadata address"
        if candidate.is_link_local:
            return f"{candidate} is a link-local address"
    return ""


def with_base_url(spec: str, url: str) -> str:
    """`spec` with `?base_url=URL` added (unless it names its own base_url or endpoint)."""
    head, _, query = spec.partition("?")
    names = {k for k, _ in parse_qsl(query, keep_blank_values=True)}
    if names & {"base_url", "endpoint"}:
        return spec
    joined = "&".join(p for p in (query, f"base_url={quote(url, safe=':/[]')}") if p)
    return f"{head}?{joined}"


# ------------------------------------------------------------------ the registry
def free_urls_allowed(environ: Mapping[str, Any], secrets: Mapping[str, Any] | None) -> bool:
    """The app's switch: `PARLEY_ALLOW_BASE_URLS=1` (environment or secrets) allows base URLs
    that are not registered (still never with a server-side key)."""
    value = environ.get(ALLOW_VAR)
    if value is None and secrets is not None:
        value = _get(secrets, ALLOW_VAR)
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _get(mapping: Any, name: str) -> Any:
    try:
        return mapping.get(name)
    except Exception:  # st.secrets and friends may raise on a missing file
        return None


class EndpointRegistry:
    """The endpoints this process (or app session) may call, and the key rule."""

    def __init__(self, endpoints: Iterable[Endpoint] = (), *, allow_free_urls: bool = True,
                 environ: Mapping[str, Any] | None = None,
                 secrets: Mapping[str, Any] | None = None):
        self._endpoints: dict[str, Endpoint] = {}
        self.allow_free_urls = bool(allow_free_urls)
        self._environ = environ if environ is not None else {}
        self._secrets = secrets
        for endpoint in endpoints:
            self.add(endpoint)

    def __repr__(self) -> str:  # names and URLs only: never a key
        return (f"EndpointRegistry({', '.join(map(str, self._endpoints.values())) or 'empty'}; "
                f"free URLs {'on' if self.allow_free_urls else 'off'})")

    @classmethod
    def from_settings(cls, environ: Mapping[str, Any], secrets: Mapping[str, Any] | None = None,
                      allow_free_urls: bool = True) -> EndpointRegistry:
        """Endpoints from `PARLEY_ENDPOINTS` (JSON), `[endpoints.NAME]` in secrets, and the
        providers' own URLs (`OPENAI_BASE_URL`, `OLLAMA_HOST`)."""
        registry = cls(allow_free_urls=allow_free_urls, environ=environ, secrets=secrets)
        raw = environ.get(ENDPOINTS_VAR)
        if raw and str(raw).strip():
            try:
                table = json.loads(raw)
            except ValueError:
                raise ConfigError(f"{ENDPOINTS_VAR} must be JSON: "
                                  '{"NAME": {"base_url": "...", "key_env": "VAR"}}',
                                  "input") from None
            for name, entry in _table(table, ENDPOINTS_VAR).items():
                if isinstance(entry, Mapping) and "key" in entry:
                    raise ConfigError(f"{ENDPOINTS_VAR} endpoint {name!r} holds a key; use "
                                      "key_env (a variable's name), or key in "
                                      ".streamlit/secrets.toml", "input")
                registry.add(_endpoint(name, entry, "environment"))
        table = _get(secrets, "endpoints") if secrets is not None else None
        if table is not None:
            for name, entry in _table(table, "[endpoints] in secrets.toml").items():
                registry.add(_endpoint(name, entry, "secrets"))
        for provider, var in PROVIDER_URLS.items():
            url = environ.get(var) or (_get(secrets, var) if secrets is not None else None)
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
        if not value and self._secrets is not None:
            value = _get(self._secrets, name)
        return str(value) if value else None

    def key_for(self, endpoint: Endpoint) -> str | None:
        """The key an endpoint receives: its own `key`, its `key_env`, or (for a provider URL,
        the CLI's or a code's base_url) the provider's key variable."""
        if endpoint.key:
            return endpoint.key
        var = endpoint.key_env or (DEFAULT_KEYS.get(endpoint.provider)
                                   if endpoint.origin in _IMPLICIT else None)
        value = self.secret(var)
        if value is None and endpoint.key_env and endpoint.origin not in _IMPLICIT:
            raise ConfigError(f"endpoint {endpoint.name!r} needs its key: set "
                              f"{endpoint.key_env} in the environment or "
                              ".streamlit/secrets.toml", "no_model")
        return value

    def key_home(self, endpoint: Endpoint) -> str:
        """Where an endpoint's key lives, for a page (never the value)."""
        if endpoint.key:
            return f"secrets.toml [endpoints.{endpoint.name}] key"
        var = endpoint.key_env or (DEFAULT_KEYS.get(endpoint.provider)
                                   if endpoint.origin in _IMPLICIT else None)
        if not var:
            return "no key"
        return f"{var} ({'present' if self.secret(var) else 'missing'})"

    def describe(self) -> list[dict[str, str]]:
        """One row per endpoint: name, provider, URL, who registered it, where its key lives."""
        return [{"name": e.name, "provider": e.provider, "base_url": e.base_url,
                 "registered by": e.origin, "key": self.key_home(e)}
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
            return Route(named.base_url, self.key_for(named), f"endpoint={named.name}")
        if trusted_url:
            url = check_url(trusted_url)
            found = self.by_url(url, provider)
            key = self.key_for(found) if found is not None else self.secret(
                DEFAULT_KEYS.get(provider))
            return Route(url, key, _url_suffix(url))
        if base_url:
            url = check_url(base_url)
            found = self.by_url(url, provider)
            if found is not None:
                return Route(url, self.key_for(found), _url_suffix(url))
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
            return Route(own.base_url, self.key_for(own), "")
        return Route(None, self.secret(DEFAULT_KEYS.get(provider)), "")


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
    unknown = sorted(str(k) for k in entry if k not in _ENDPOINT_FIELDS)
    if unknown:
        raise ConfigError(f"{where} has no field {unknown[0]!r}; fields are "
                          f"{', '.join(_ENDPOINT_FIELDS)}", "input")
    provider = str(entry.get("provider") or "openai").strip().lower()
    if provider not in DEFAULT_KEYS:
        raise ConfigError(f"{where}: provider must be one of {', '.join(DEFAULT_KEYS)}",
                          "input")
    key_env, key = entry.get("key_env"), entry.get("key")
    if key_env and key:
        raise ConfigError(f"{where}: give key_env or key, not both", "input")
    if key_env is not None and (not isinstance(key_env, str) or not key_env.strip()):
        raise ConfigError(f"{where}: key_env names an environment variable", "input")
    return Endpoint(name, check_url(entry.get("base_url"), f"{where} base_url"), provider,
                    key_env.strip() if key_env else None, str(key) if key else None, origin)
