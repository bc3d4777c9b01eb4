"""URLs and credential names: what a base URL may be, and which names carry a secret.

`check_url` normalises an operator's or a spec's base URL and refuses what must never be
called (other schemes, credentials in the URL, a key in its query); `risky_host` names the
hosts that are called only when registered (link-local and cloud metadata addresses), as the
URL spells them, and `risky_address` the addresses, which `engine.llm.transport` checks again
on what a name resolves to when it connects.
"""
from __future__ import annotations

import ipaddress
import re
import socket
import unicodedata
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from engine.models import ConfigError

KEY_HOME = ("keys go in the environment or .streamlit/secrets.toml (or the environment "
            "variable an endpoint's key_env names), never in a model spec")
URL_MAX = 1000
_SECRET_NAME = re.compile(r"(^|_)(api_?key|key|keys|token|secret|password|passwd|pwd|auth|"
                          r"authorization|bearer|credentials?|cookie)$")
_DEFAULT_PORTS = {"http": 80, "https": 443}
METADATA_HOSTS = ("metadata.google.internal", "metadata", "metadata.goog",
                  "instance-data", "instance-data.ec2.internal")
METADATA_ADDRESSES = (ipaddress.ip_address("169.254.169.254"),
                      ipaddress.ip_address("fd00:ec2::254"),
                      ipaddress.ip_address("100.100.100.200"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # IPv6 that a NAT64 gateway sends to IPv4


def is_secret_name(name: Any) -> bool:
    """True for a parameter name that would carry a credential (`api_key`, `token` ...)."""
    key = re.sub(r"[^a-z0-9]+", "_", str(name).strip().lower()).strip("_")
    return bool(_SECRET_NAME.search(key))


def refuse_secret(where: str, name: str) -> None:
    """The one message for a credential found where data goes."""
    raise ConfigError(f"{where} carries a credential ({name}); {KEY_HOME}", "input")


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
    scheme, host = parts.scheme.lower(), spelled_host(host)
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


def spelled_host(host: str | None) -> str:
    """A host as a resolver reads it: IDNA maps full-width characters and the ideographic
    full stops (U+3002, U+FF0E, U+FF61) to ASCII, so `169。254。169。254` is 169.254.169.254."""
    return unicodedata.normalize("NFKC", host or "").replace("\u3002", ".")


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
    host = spelled_host(urlsplit(url).hostname).rstrip(".").lower()
    if host in METADATA_HOSTS:
        return f"{host} is a cloud metadata service"
    address = _address(host.split("%")[0])
    return risky_address(address) if address is not None else ""


def risky_address(address: Any) -> str:
    """Why an IP address may not be reached unregistered ("" when it may): link-local or a
    cloud metadata address, also when IPv4 comes wrapped in IPv6 (mapped, 6to4, NAT64)."""
    if isinstance(address, str):
        try:
            address = ipaddress.ip_address(address.split("%")[0])
        except ValueError:
            return ""
    candidates = [address]
    if address.version == 6:
        candidates += [address.ipv4_mapped, address.sixtofour]
        if address in _NAT64:
            candidates.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    for candidate in candidates:
        if candidate is None:
            continue
        if candidate in METADATA_ADDRESSES:
            return f"{candidate} is a cloud metadata address"
        if candidate.is_link_local:
            return f"{candidate} is a link-local address"
    return ""
