"""What a model call costs: prices in US dollars per million tokens, input and output.

The shipped defaults (`DEFAULTS`) are the providers' published list prices for standard
(not batch, not cached-input, not priority) usage, entered on 2026-12-05 from the pricing
pages each entry names. They were not fetched by code and prices change: check the page
before you rely on a figure, and override it when yours differ. They apply only to a model
called at its provider's own API; the same model name served by another base URL (vLLM, a
proxy, a local server) is unpriced unless the operator prices it.

A price is looked up in this order, the first that prices the model wins:

1. the registered endpoint the model is called through: its `price_input` and
   `price_output` (`engine.llm.endpoints`);
2. `PARLEY_PRICES` in the environment, JSON: `{"openai:gpt-4o-mini": {"input": 0.15,
   "output": 0.6}}`;
3. `[prices."SPEC"]` tables in `.streamlit/secrets.toml` (`input = 0.15`, `output = 0.6`);
4. the shipped defaults.

A spec is matched as the turn records it (`openai:m?endpoint=local`), then as
`provider:model`; a dated snapshot (`claude-sonnet-4-20250514`, `gpt-4o-2024-08-06`) or a
`-latest` alias takes its family's default. A model with no price is unpriced: its cost is
unknown (None), never 0. A simulated seat costs 0 (it is labelled simulated everywhere).
A bad price (negative, not a number, malformed JSON) is a `ConfigError` when the settings are
read, before any call.

A call's tokens are its server's reported usage, read once and checked (`read_usage`): each
count a whole number within what the call could use (`usage_bounds`), the report not all zero.
Anything else (negative, 10**30, NaN, text, a list, one side missing) is estimated from the
text instead, flagged `usage_estimated`, with a warning quoting what the server reported: a
good reply never fails for its usage, and a paid call is never a known $0.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.llm.secretsfile import json_setting, setting
from engine.llm.sizes import utf8_size
from engine.models import ConfigError

PRICES_VAR = "PARLEY_PRICES"
PER_TOKENS = 1_000_000
MAX_PRICE = 1_000_000.0  # dollars per million tokens; anything above is a typo
SPEC_MAX = 200
AS_OF = "2026-12-05"
OPENAI_PAGE = "https://openai.com/api/pricing"
ANTHROPIC_PAGE = "https://www.anthropic.com/pricing#api"
_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")
HELP = ('{"provider:model": {"input": DOLLARS, "output": DOLLARS}} in US dollars per million '
        "tokens")


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens in and out, and where the figures came from."""

    input: float
    output: float
    source: str = ""

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        """Dollars for one call: `(tokens_in * input + tokens_out * output) / 1e6`."""
        return (max(tokens_in, 0) * self.input + max(tokens_out, 0) * self.output) / PER_TOKENS


def _listed(page: str, table: Mapping[str, tuple[float, float]]) -> dict[str, Price]:
    source = f"list price read {AS_OF} from {page}"
    return {spec: Price(i, o, source) for spec, (i, o) in table.items()}


DEFAULTS: dict[str, Price] = {
    **_listed(OPENAI_PAGE, {
        "openai:gpt-4o": (2.50, 10.00), "openai:gpt-4o-2024-05-13": (5.00, 15.00),
        "openai:gpt-4o-mini": (0.15, 0.60), "openai:gpt-4.1": (2.00, 8.00),
        "openai:gpt-4.1-mini": (0.40, 1.60), "openai:gpt-4.1-nano": (0.10, 0.40),
        "openai:gpt-5": (1.25, 10.00), "openai:gpt-5-mini": (0.25, 2.00),
        "openai:gpt-5-nano": (0.05, 0.40), "openai:o1": (15.00, 60.00),
        "openai:o3": (2.00, 8.00), "openai:o3-mini": (1.10, 4.40),
        "openai:o4-mini": (1.10, 4.40), "openai:gpt-4-turbo": (10.00, 30.00),
        "openai:gpt-3.5-turbo": (0.50, 1.50)}),
    **_listed(ANTHROPIC_PAGE, {
        "anthropic:claude-3-haiku": (0.25, 1.25), "anthropic:claude-3-5-haiku": (0.80, 4.00),
        "anthropic:claude-haiku-4-5": (1.00, 5.00),
        "anthropic:claude-3-5-sonnet": (3.00, 15.00),
        "anthropic:claude-3-7-sonnet": (3.00, 15.00),
        "anthropic:claude-sonnet-4": (3.00, 15.00),
        "anthropic:claude-sonnet-4-0": (3.00, 15.00),
        "anthropic:claude-sonnet-4-5": (3.00, 15.00),
        "anthropic:claude-3-opus": (15.00, 75.00), "anthropic:claude-opus-4": (15.00, 75.00),
        "anthropic:claude-opus-4-0": (15.00, 75.00),
        "anthropic:claude-opus-4-1": (15.00, 75.00),
        "anthropic:claude-opus-4-5": (5.00, 25.00)}),
}


# ------------------------------------------------------------------ reading prices
def price_value(raw: Any, where: str) -> float:
    """One price in dollars per million tokens, checked: a finite number in 0..MAX_PRICE."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw) \
            or not 0 <= raw <= MAX_PRICE:
        shown = repr(raw) if isinstance(raw, (int, float, str)) else type(raw).__name__
        raise ConfigError(f"{where} must be a number of US dollars per million tokens in "
                          f"0..{MAX_PRICE:,.0f}, got {shown[:40]}", "input")
    return float(raw)


def _entry(spec: Any, entry: Any, where: str) -> tuple[str, Price]:
    if not isinstance(spec, str) or not spec.strip() or len(spec) > SPEC_MAX:
        raise ConfigError(f"{where}: a price is keyed by a model spec such as "
                          f"openai:gpt-4o-mini (1..{SPEC_MAX} characters)", "input")
    name = spec.strip()
    if not isinstance(entry, Mapping) or set(entry) != {"input", "output"}:
        raise ConfigError(f"{where}: {name[:80]!r} must give exactly input and output; "
                          f"write {HELP}", "input")
    return name, Price(price_value(entry["input"], f"{where}: {name[:80]!r} input"),
                       price_value(entry["output"], f"{where}: {name[:80]!r} output"), where)


def read_prices(table: Any, where: str) -> dict[str, Price]:
    """A price table (`{spec: {"input": X, "output": Y}}`) checked into `Price`s."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must map model specs to prices: {HELP}", "input")
    return dict(_entry(spec, entry, where) for spec, entry in table.items())


class PriceTable:
    """The prices the operator set (environment, then secrets) over the shipped defaults."""

    def __init__(self, overrides: Sequence[Mapping[str, Price]] = ()):
        self.overrides = [dict(o) for o in overrides]

    @classmethod
    def from_settings(cls, environ: Mapping[str, Any], secrets: Any = None) -> PriceTable:
        """`PARLEY_PRICES` (JSON) then `[prices."SPEC"]` in secrets, over the defaults."""
        tables = ((json_setting(environ, PRICES_VAR, HELP), PRICES_VAR),
                  (setting(secrets, "prices"), "[prices] in secrets.toml"))
        return cls([read_prices(table, where) for table, where in tables if table is not None])

    def lookup(self, spec: str, *, own_api: bool = True) -> Price | None:
        """The price of the model `spec` records (None: unpriced). The shipped defaults
        count only for a model called at its provider's own API (`own_api`)."""
        names = spec_names(spec)
        for layer in [*self.overrides, *([DEFAULTS] if own_api else [])]:
            found = next((layer[n] for n in names if n in layer), None)
            if found is not None:
                return found
        return None


def spec_names(spec: str) -> list[str]:
    """The names a spec is priced under, most specific first: as recorded, without its
    query, and its family without a snapshot date or `-latest`."""
    head = spec.strip().partition("?")[0]
    provider, _, model = head.partition(":")
    bare = f"{provider.strip().lower()}:{model.strip()}"
    return list(dict.fromkeys([spec.strip(), head, bare, _SNAPSHOT.sub("", bare)]))


# ------------------------------------------------------------------ a call's usage and cost
REPORTED_USAGE = "parley_usage"  # a reply's response_metadata key: the usage its server sent
USAGE_ALLOWANCE = 10_000  # tokens a server may add of its own: a chat template, its own
# system prompt, hidden reasoning
USAGE_MAX = 10_000_000  # no count above this is believed: far past any model's context
UNKNOWN_CAP = 100_000  # the output bound of a model whose output cap Parley did not set
_MISSING = object()


@dataclass(frozen=True)
class Usage:
    """A call's tokens in and out. `estimated`: from the text (`estimate_usage`), because the
    server reported none or reported figures that are not believed; `warning` then says
    what it reported and why it was not believed ("" otherwise)."""

    tokens_in: int
    tokens_out: int
    estimated: bool = False
    warning: str = ""


def estimate_usage(messages: Sequence[Mapping[str, str]], reply: str) -> tuple[int, int]:
    """Tokens in and out of a call whose provider reported none: about four characters a
    token (`engine.llm.limits.estimate_tokens`' rule), at least one each way."""
    sent = sum(len(str(m.get("content", ""))) for m in messages)
    return max(1, math.ceil(sent / 4)), (max(1, math.ceil(len(reply) / 4)) if reply else 0)


def usage_bounds(messages: Sequence[Mapping[str, str]], reply: str, cap: int = 0
                 ) -> tuple[int, int]:
    """The most tokens in and out a reported usage may claim for this call: twice the UTF-8
    bytes of what was sent (no tokenizer makes more tokens than bytes; four characters a
    token is the estimate, so this is eight times it or more), and twice the larger of the
    output cap and the reply's bytes, each plus `USAGE_ALLOWANCE`, never above `USAGE_MAX`.
    `cap` 0: the cap is unknown (a model not made by `get_model`), `UNKNOWN_CAP` then."""
    sent = sum(utf8_size(str(m.get("content", ""))) for m in messages)
    out = max(cap if cap > 0 else UNKNOWN_CAP, utf8_size(reply))
    return (min(USAGE_MAX, 2 * sent + USAGE_ALLOWANCE),
            min(USAGE_MAX, 2 * out + USAGE_ALLOWANCE))


def reported_usage(message: Any) -> tuple[Any, Any, Any] | None:
    """(input count, output count, the whole report) as a reply's server sent them, each
    count possibly any JSON value or missing; None when it reported no usage. `get_model`'s
    OpenAI models keep the server's `usage` as sent (`REPORTED_USAGE`); other models give
    langchain's `usage_metadata`."""
    meta = getattr(message, "response_metadata", None)
    if isinstance(meta, Mapping) and REPORTED_USAGE in meta:
        raw, names = meta[REPORTED_USAGE], ("prompt_tokens", "completion_tokens")
    else:
        raw, names = getattr(message, "usage_metadata", None), ("input_tokens", "output_tokens")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        return _MISSING, _MISSING, raw
    return raw.get(names[0], _MISSING), raw.get(names[1], _MISSING), raw


def count_problem(value: Any, most: int) -> str:
    """Why one reported count is not believed ("" when it is): it must be a whole number (not
    a float, a string or a boolean), 0..`most`."""
    if value is _MISSING or value is None:
        return "missing"
    if isinstance(value, bool) or not isinstance(value, int):
        return f"not a whole number: {shown_value(value, 40)}"
    if value < 0:
        return f"negative: {shown_value(value, 40)}"
    if value > most:
        return f"{shown_value(value, 40)} is more than this call could use ({most:,})"
    return ""


def shown_value(value: Any, limit: int = 200) -> str:
    """A reported JSON value as short text for a warning (never raises)."""
    try:
        text = json.dumps(value, default=repr, ensure_ascii=False)
    except Exception:  # a value JSON cannot write (a 5,000-digit number, a deep nest)
        text = type(value).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def read_usage(message: Any, messages: Sequence[Mapping[str, str]], reply: str,
               cap: int = 0) -> Usage:
    """A reply's tokens in and out, read once and checked: the reported usage when each
    count is a whole number in 0..its bound (`usage_bounds`, from the prompt, the reply and
    the output `cap`) and the report is not all zero (nor no output for a reply with text);
    otherwise an estimate from the text (`estimate_usage`), flagged, with a warning that says
    what the server reported. None of this fails the call: a good reply stays good."""
    reported = reported_usage(message)
    if reported is None:
        return Usage(*estimate_usage(messages, reply), estimated=True)
    raw_in, raw_out, whole = reported
    most_in, most_out = usage_bounds(messages, reply, cap)
    if not isinstance(whole, Mapping):
        why = "not an object"
    else:
        problems = [f"{side} {problem}" for side, problem in (
            ("input", count_problem(raw_in, most_in)),
            ("output", count_problem(raw_out, most_out))) if problem]
        why = "; ".join(problems)
        if not why and raw_in == raw_out == 0:
            why = "all zero"
        elif not why and raw_out == 0 and reply.strip():
            why = "no output tokens for a reply with text"
    if not why:
        return Usage(int(raw_in), int(raw_out))
    return Usage(*estimate_usage(messages, reply), estimated=True,
                 warning=f"the server's token usage was not believed ({why}): it reported "
                         f"{shown_value(whole)}; the tokens are estimated from the text")


def call_cost(price: Price | None, tokens_in: int, tokens_out: int, *,
              simulated: bool) -> float | None:
    """A call's cost in US dollars: 0 for the simulated model, None when unpriced."""
    if simulated:
        return 0.0
    return None if price is None else price.cost(tokens_in, tokens_out)


def model_price(model: Any) -> Price | None:
    """The price `get_model` attached to a chat model (None: unpriced, or not made by
    `get_model`)."""
    price = getattr(model, "parley_price", None)
    return price if isinstance(price, Price) else None
