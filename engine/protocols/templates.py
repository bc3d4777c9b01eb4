"""Named prompt templates with `{placeholder}` slots, overridable per run.

Only `{name}` with a word inside is a placeholder, so JSON examples in a template (`{"stance":
...}`) need no escaping. An override is checked before any call: an unknown template name or a
placeholder the template may not use is a `ConfigError` that lists what is allowed.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from engine.models import ConfigError

TEMPLATE_MAX = 20_000
_SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Template:
    """A default prompt, the placeholders it may use, and those an override must keep.

    `required` names the placeholders that carry the run's content into this prompt (the
    question, the transcript, the proposals ...): an override without one of them would send
    the model a prompt that no longer holds what it is asked about.
    """

    text: str
    placeholders: tuple[str, ...]
    help: str = ""
    required: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = set(_SLOT.findall(self.text)) - set(self.placeholders)
        if unknown:
            raise ValueError(f"template uses undeclared placeholders {sorted(unknown)}")
        missing = [p for p in self.required if p not in _SLOT.findall(self.text)]
        if missing:
            raise ValueError(f"template requires {missing} but does not use them")


def placeholders_in(text: str) -> list[str]:
    return list(dict.fromkeys(_SLOT.findall(text)))


def check_prompts(protocol: str, defaults: Mapping[str, Template],
                  prompts: Mapping[str, str] | None) -> dict[str, str]:
    """Validate per-run overrides against a protocol's templates; returns them as a dict."""
    if prompts is not None and not isinstance(prompts, Mapping):
        raise ConfigError(f"prompts must map template names to text, got "
                          f"{type(prompts).__name__}", "input")
    prompts = dict(prompts or {})
    for name, text in prompts.items():
        if name not in defaults:
            raise ConfigError(f"{protocol} has no prompt template {name!r}; templates are "
                              f"{', '.join(sorted(defaults))}", "input")
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"prompt template {name!r} must be non-empty text", "input")
        if "\x00" in text or len(text) > TEMPLATE_MAX:
            raise ConfigError(f"prompt template {name!r} must be at most {TEMPLATE_MAX:,} "
                              "characters without NUL bytes", "limit")
        allowed = defaults[name].placeholders
        used = placeholders_in(text)
        unknown = [p for p in used if p not in allowed]
        if unknown:
            raise ConfigError(f"prompt template {name!r} may use "
                              f"{', '.join('{' + p + '}' for p in allowed) or 'no placeholders'}"
                              f"; got {{{unknown[0]}}}", "input")
        dropped = [p for p in defaults[name].required if p not in used]
        if dropped:
            raise ConfigError(f"prompt template {name!r} must keep "
                              f"{', '.join('{' + p + '}' for p in dropped)}: it carries what "
                              "the model is asked about", "input")
    return prompts


def render(defaults: Mapping[str, Template], prompts: Mapping[str, str], name: str, /,
           **values: object) -> str:
    """Fill template `name` (the override if given, else the default) with `values`."""
    text = prompts.get(name) or defaults[name].text
    return _SLOT.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0),
                     text)
