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
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


def prices_from_json(raw: str, where: str = PRICES_VAR) -> dict[str, Price]:
    """`PARLEY_PRICES`' JSON text read into prices (`ConfigError` when it is not JSON)."""
    try:
        table = json.loads(raw)
    except (ValueError, RecursionError):
        raise ConfigError(f"{where} must be JSON: {HELP}", "input") from None
    return read_prices(table, where)


class PriceTable:
    """The prices the operator set (environment, then secrets) over the shipped defaults."""

    def __init__(self, overrides: Sequence[Mapping[str, Price]] = (),
                 defaults: Mapping[str, Price] | None = None):
        self.overrides = [dict(o) for o in overrides]
        self.defaults = dict(DEFAULTS if defaults is None else defaults)

    @classmethod
    def from_settings(cls, environ: Mapping[str, Any], secrets: Any = None) -> PriceTable:
        """`PARLEY_PRICES` (JSON) then `[prices."SPEC"]` in secrets, over the defaults."""
        layers = []
        raw = environ.get(PRICES_VAR)
        if raw is not None and str(raw).strip():
            layers.append(prices_from_json(str(raw)))
        table = _get(secrets, "prices")
        if table is not None:
            layers.append(read_prices(table, "[prices] in secrets.toml"))
        return cls(layers)

    def lookup(self, spec: str, *, own_api: bool = True) -> Price | None:
        """The price of the model `spec` records (None: unpriced). The shipped defaults
        count only for a model called at its provider's own API (`own_api`)."""
        names = spec_names(spec)
        for layer in self.overrides:
            found = next((layer[n] for n in names if n in layer), None)
            if found is not None:
                return found
        if not own_api:
            return None
        return next((self.defaults[n] for n in names if n in self.defaults), None)


def spec_names(spec: str) -> list[str]:
    """The names a spec is priced under, most specific first: as recorded, without its
    query, and its family without a snapshot date or `-latest`."""
    head = spec.strip().partition("?")[0]
    kind, _, model = head.partition(":")
    bare = f"{kind.strip().lower()}:{model.strip()}"
    return list(dict.fromkeys([spec.strip(), head, bare, _SNAPSHOT.sub("", bare)]))


def _get(mapping: Any, name: str) -> Any:
    try:
        return mapping.get(name) if mapping is not None else None
    except Exception:  # st.secrets and friends may raise on a missing file
        return None


# ------------------------------------------------------------------ a call's usage and cost
def estimate_usage(messages: Sequence[Mapping[str, str]], reply: str) -> tuple[int, int]:
    """Tokens in and out of a call whose provider reported none: about four characters a
    token (`engine.llm.limits.estimate_tokens`' rule), at least one each way."""
    sent = sum(len(str(m.get("content", ""))) for m in messages)
    return max(1, math.ceil(sent / 4)), (max(1, math.ceil(len(reply) / 4)) if reply else 0)


def read_usage(message: Any, messages: Sequence[Mapping[str, str]], reply: str
               ) -> tuple[int, int, bool]:
    """(tokens in, tokens out, estimated) of a reply: its `usage_metadata` when the provider
    reported one, else an estimate from the text (`estimated` True)."""
    usage = getattr(message, "usage_metadata", None) or {}
    if "input_tokens" in usage or "output_tokens" in usage:
        return (int(usage.get("input_tokens", 0) or 0),
                int(usage.get("output_tokens", 0) or 0), False)
    tokens_in, tokens_out = estimate_usage(messages, reply)
    return tokens_in, tokens_out, True


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
