"""Keys never travel through an error message: what records a failure (a turn's error and
warnings, a run's or an experiment's error, an export, a log line) passes `redact` first.

A server (or a proxy before it) may answer a refused call with the key it was sent
("Incorrect API key provided: sk-..."), and an exception's text may carry a header. Two
rules, applied together:

- every configured key is replaced wherever it appears: the values of the environment's
  variables whose names say they hold a secret (`OPENAI_API_KEY`, `PARLEY_TEST_TOKEN` ...),
  and the keys the caller hands in (a model's own `SecretStr` fields, see `model_secrets`);
- anything shaped like a key is replaced too, configured or not: the common providers'
  prefixes (`sk-`, `sk-ant-`, `AIza`, `ghp_`, `hf_`, `xai-`, `gsk_`, `AKIA`), JWTs, a
  `Bearer`/`Basic` credential, and the value after `api_key=`, `token:`, `password=` ...

What replaces them is `[redacted]`, so a reader still sees that a key was there.
"""
from __future__ import annotations

import functools
import logging
import os
import re
import traceback
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET = 8  # shorter values (`1`, `true`, `none`) would redact ordinary words
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)
_SHAPES = re.compile(r"""
    (?<![A-Za-z0-9])(?:sk|pk|rk)-[A-Za-z0-9_\-]{12,}      # OpenAI, Anthropic, most proxies
  | (?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{30,}               # Google
  | (?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{30,}            # GitHub
  | (?<![A-Za-z0-9])(?:hf|gsk)_[A-Za-z0-9]{20,}           # Hugging Face, Groq
  | (?<![A-Za-z0-9])xai-[A-Za-z0-9]{20,}                  # xAI
  | (?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9\-]{10,}         # Slack
  | (?<![A-Za-z0-9])AKIA[0-9A-Z]{16}(?![A-Za-z0-9])       # AWS access key id
  | (?<![A-Za-z0-9])eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}  # a JWT
""", re.X)
_CREDENTIAL = re.compile(r"(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=\-]{8,}")
_ASSIGNED = re.compile(r"""(?ix)
    ( (?:api[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token|client[_-]?secret
        |secret|password|passwd|token|x-api-key)
      ["']?\s*[:=]\s*["']? )
    ( (?!\[redacted\])[^\s"'&,;}\]]{6,} )""")


def _names_secret(name: str) -> bool:
    """True for a name that says its value is a secret (`key_env` names where one lives)."""
    return bool(_SECRET_NAME.search(name)) and not name.lower().endswith("_env")


_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def variable_name(text: Any) -> bool:
    """True when `text` reads as a variable's name and not as a credential pasted where a
    name belongs (`key_env = "sk-..."`): letters, digits and `_`, not starting with a digit,
    nothing `redact` would hide, and not random-looking (upper and lower case letters mixed
    with digits, or 20 characters or more with digits and no `_`, as unprefixed keys are).
    A page shows a settings value of this kind only when this says yes."""
    if not isinstance(text, str) or not _VARIABLE.fullmatch(text):
        return False
    if redact(text) != text:  # a configured key, or anything shaped like one
        return False
    digits = any(c.isdigit() for c in text)
    mixed = any(c.isupper() for c in text) and any(c.islower() for c in text)
    return not (digits and mixed) and not (digits and len(text) >= 20 and "_" not in text)


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the variables whose names say they hold a secret (at least
    `MIN_SECRET` characters), longest first."""
    if environ is None:
        return _process_secrets()
    found = {value.strip() for name, value in environ.items()
             if _names_secret(name) and isinstance(value, str)}
    return sorted((v for v in found if len(v) >= MIN_SECRET), key=len, reverse=True)


def _process_secrets() -> list[str]:
    """The process environment's secrets (`environment_secrets`), worked out again only
    when the environment changed: every model call redacts its reply and error, and
    decoding and matching every variable's name each time cost more than the rest of the
    redaction. `os.environ._data` is the mapping a change of `os.environ` (or `putenv`
    through it) updates, so its items are exactly the environment."""
    raw = getattr(os.environ, "_data", None)
    if not isinstance(raw, dict):
        return environment_secrets(dict(os.environ))
    return list(_secrets_of(tuple(raw.items())))


@functools.lru_cache(maxsize=1)
def _secrets_of(items: tuple[tuple[Any, Any], ...]) -> tuple[str, ...]:
    """`environment_secrets` of the environment whose raw items are `items` (a pure
    function of them, remembered for the last environment seen)."""
    env = os.environ
    return tuple(environment_secrets({env.decodekey(k): env.decodevalue(v)
                                      for k, v in items}))


def model_secrets(model: Any) -> list[str]:
    """The secret values a chat model holds (pydantic `SecretStr` fields such as
    ChatOpenAI's `openai_api_key`), for redacting what its calls' errors say."""
    out = []
    for value in (getattr(model, "__dict__", None) or {}).values():
        reveal = getattr(value, "get_secret_value", None)
        if callable(reveal):
            secret = reveal()
            if isinstance(secret, str) and len(secret.strip()) >= MIN_SECRET:
                out.append(secret.strip())
    return out


def redact(text: str, secrets: Iterable[str] = (), *, environ: Mapping[str, str] | None = None,
           shapes: bool = True) -> str:
    """`text` with every configured key (`secrets` and the environment's) replaced by
    `[redacted]`, and, with `shapes`, anything shaped like a key too."""
    if not isinstance(text, str) or not text:
        return text
    known = sorted({s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET}
                   | set(environment_secrets(environ)), key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, REDACTED)
    if shapes:
        text = _SHAPES.sub(REDACTED, text)
        text = _CREDENTIAL.sub(lambda m: m.group(1) + REDACTED, text)
        text = _ASSIGNED.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def secret_values(value: Any, secret: bool = False) -> list[str]:
    """The values under secret-naming keys (`key`, `api_key`, `OPENAI_API_KEY`, `token` ...)
    anywhere in a settings mapping such as Streamlit's secrets."""
    if isinstance(value, Mapping):
        return [found for key, inner in value.items()
                for found in secret_values(inner, secret or _names_secret(str(key)))]
    if isinstance(value, str):
        return [value.strip()] if secret and len(value.strip()) >= MIN_SECRET else []
    return []


def redact_log_records(secrets: Iterable[str] = ()) -> None:
    """Make every log record this process writes from now on redact its message and its
    traceback (`redact`, with `secrets` besides the environment's), whichever library logs
    it: for the entry points (the CLI, the worker, the app), never called by the engine
    itself. A second call only adds its `secrets`."""
    previous = logging.getLogRecordFactory()
    given = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET}
    known: set[str] | None = getattr(previous, "parley_secrets", None)
    if known is not None:
        known.update(given)
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string is the handler's to report, as before
            return record
        cleaned = redact(message, given)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[0] is not None:
            text = "".join(traceback.format_exception(*record.exc_info))
            record.exc_text = redact(text, given).rstrip("\n")
        return record

    factory.parley_secrets = given  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
