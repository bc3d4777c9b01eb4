"""Reading a YAML (or JSON) file that must hold a mapping, with errors that say what to fix."""
from __future__ import annotations

from typing import Any

from .models import ConfigError


def load_mapping(path: str, *, what: str = "", expected: str = "") -> dict[str, Any]:
    """The mapping in the YAML/JSON file at `path`, or a one-line `ConfigError`.

    `what` prefixes messages (e.g. "--config: "); `expected` names the keys it should hold.
    """
    import yaml
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise ConfigError(f"{what}cannot read {path}: {exc.strerror}", "input") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{what}{path} is not valid JSON or YAML{where}", "input") from None
    if not isinstance(data, dict):
        hint = f" ({expected})" if expected else ""
        raise ConfigError(f"{what}{path} must hold a mapping{hint}", "input")
    return data
