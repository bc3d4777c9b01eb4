"""Named prompt templates with `{placeholder}` slots, overridable per run.

Only `{name}` with a word inside is a placeholder, so JSON examples in a template (`{"stance":
...}`) need no escaping. An override is checked before any call: an unknown template name or a
placeholder the template may not use is a `ConfigError` that lists what is allowed.
`stance_problem` reads the templates the other way round: a stance that echoes one of their
placeholders ("your short canonical stance") is no position.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
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
        used = list(dict.fromkeys(_SLOT.findall(text)))
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


# --------------------------------------------------------------------------- template echoes
# Where a template describes what to write instead of asking it: a JSON example's value, an
# angle-bracket placeholder, a format line's description, a clause addressed to the model.
_ECHO_SOURCES = (
    re.compile(r'"\w+"\s*:\s*"([^"{}]+)"'),
    re.compile(r"<([^<>{}\n]+)>"),
    re.compile(r"^[ \t]*(?:\d+[.)][ \t]*)?[A-Z][A-Z ]*[A-Z]:[ \t]*([^{}\n]+)$", re.M),
    re.compile(r"\byour\b[^.,;:!?\n\"{}<>()]*", re.I),
)
STANCE_WORDS_MAX = 12  # a stance is a short answer; longer is an essay, not a position


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def echo_phrases(texts: Iterable[str]) -> frozenset[str]:
    """The placeholder phrases of template texts, as lowercase words joined by spaces (at
    least two words: one word is an answer as often as a placeholder)."""
    found = set()
    for text in texts:
        for pattern in _ECHO_SOURCES:
            for match in pattern.finditer(text):
                words = _words(match.group(1) if pattern.groups else match.group(0))
                if len(words) >= 2:
                    found.add(" ".join(words))
    return frozenset(found)


def stance_problem(stance: str | None, phrases: Iterable[str]) -> str:
    """Why a stance is no position ("" when it is one): it echoes the prompt's own
    placeholder text (`phrases`: the run's templates', `echo_phrases`), or it is longer than
    a short answer (`STANCE_WORDS_MAX` words). Such a stance abstains; the turn says why."""
    words = _words(stance or "")
    if not words:
        text = (stance or "").strip()
        if text and not any(c.isalnum() for c in text):  # "...", "<>": the format's marks
            return f"the stance {text[:80]!r} has no word, so it abstains"
        return ""
    text, unique, padded = " ".join(words), set(words), f" {' '.join(words)} "
    # the cheap tests first: every stance is screened against the run template phrases
    for phrase in phrases:
        if text == phrase or (len(words) >= 3 and padded in f" {phrase} ") or (
                phrase.startswith("your ") and phrase.count(" ") >= 2
                and f" {phrase} " in padded) or (
                words[0] == "your" and len(unique & set(phrase.split())) >= 0.75 * len(unique)):
            return (f"the stance {(stance or '').strip()[:80]!r} echoes the prompt's own text "
                    f"({phrase!r}), so it abstains")
    if len(words) > STANCE_WORDS_MAX:
        return (f"the stance has {len(words)} words, more than a short answer "
                f"({STANCE_WORDS_MAX}), so it abstains")
    return ""
