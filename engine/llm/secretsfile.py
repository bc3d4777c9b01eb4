"""The operator's `.streamlit/secrets.toml`, read by the CLI as the app reads it.

The app gets its secrets from Streamlit (`st.secrets`); the CLI, the worker and the benches run
without Streamlit, so they read the same files here: `~/.streamlit/secrets.toml` first, then
`.streamlit/secrets.toml` in the current directory, whose top-level entries win (Streamlit's
order). What they hold (keys, `[endpoints.NAME]` tables, `PARLEY_DB_URL`) goes to the endpoint
registry and the store URL and is never printed: a file that cannot be read is named in a
one-line `ConfigError`, without its contents.
"""
from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.models import ConfigError

MAX_BYTES = 1_000_000  # a secrets file is a few lines; a larger one is a mistake


def setting(secrets: Any, name: str) -> Any:
    """`secrets.get(name)`, None without secrets or when they cannot be read (`st.secrets`
    raises on a missing file)."""
    try:
        return secrets.get(name) if secrets is not None else None
    except Exception:
        return None


def json_setting(environ: Mapping[str, Any], name: str, shape: str) -> Any:
    """The JSON value of the environment variable `name` (a table of endpoints, of prices);
    None when it is unset or blank, a `ConfigError` showing its `shape` when it is not JSON
    (or is JSON's null, which is no table either)."""
    raw = environ.get(name)
    if raw is None or not str(raw).strip():
        return None
    try:
        value = json.loads(str(raw))
    except (ValueError, RecursionError):
        value = None
    if value is None:
        raise ConfigError(f"{name} must be JSON: {shape}", "input")
    return value


def load_secrets(cwd: Path | None = None, home: Path | None = None) -> dict[str, Any]:
    """The merged secrets of the files that exist, the user's then the project's (whose
    entries win); {} when none does."""
    merged: dict[str, Any] = {}
    for folder in (home or Path.home(), cwd or Path.cwd()):
        path = folder / ".streamlit" / "secrets.toml"
        if path.is_file():
            merged.update(_read(path))
    return merged


def _read(path: Path) -> Mapping[str, Any]:
    try:
        if path.stat().st_size > MAX_BYTES:
            raise ConfigError(f"{path} is over {MAX_BYTES:,} bytes; a secrets file holds a "
                              "few settings", "input")
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        # The decoder's message names the line and column, never the value there.
        raise ConfigError(f"{path} is not valid TOML: {exc}", "input") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} cannot be read: {type(exc).__name__}", "input") from None
