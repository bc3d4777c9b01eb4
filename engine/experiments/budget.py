"""Budgets: an experiment spec's `budget_usd` (US dollars; "Budget" on the Experiments form,
`--budget-usd` on the command line). Once what the experiment has spent reaches it, no new
cell starts; cells in flight finish, and the experiment ends `stopped` with the reason
`budget` (its error says "budget: ..."). The spend is read from the store, so the budget
holds across a pool of workers.

A cell starts only while the spend so far, plus what the cells in flight are expected to
cost, plus the new cell's own expected cost, stays within the budget. A cell is expected to
cost what cells of its own configuration have cost: the largest of its completed runs until
`ENOUGH` have completed, then their 95th percentile (the (n // ENOUGH + 1)-th largest of n:
one freak run in twenty, a retry storm, say, no longer sets the pace); before any has
completed, the preflight's estimate for it. Never less than one of its cells in flight has
spent already. A cheap configuration's runs never lower a dear one's expected cost, so
cells in flight are never all underestimated by a mean the cheap ones drag down.

When only the cells in flight stand in the way, the new cell waits for them to finish (their
real cost then replaces the estimate); when none is in flight and the new cell would pass
the budget, or the spend has reached it, the experiment stops. So the experiment ends below
the budget by less than one cell (the one that did not fit), and above it only by what cells
in flight cost beyond what their configuration was expected to cost: within one cell of the
dearest configuration. A call whose cost is unknown (an unpriced model, or usage the budget
cannot count) stops a budgeted experiment at once, rather than count as free; so does a
configuration whose cells have no expected cost at all.

The stop's message gives the spend when it stopped and the cells still in flight; once they
have ended it is rewritten with the final spend (`restated`). A pool's jobs take the
decision one at a time per experiment, counting the cells whose lock is held as in flight
(`engine.store.workers.budget_turn`).
"""
from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.models import ConfigError, is_simulated
from engine.store.experiments import (
    LabelCosts,
    SpendFigures,
    experiment_spend,
    experiment_spent,
    row,
    set_values,
)

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry
    from engine.protocols import Resolved
    from engine.store import Store

REASON = "budget"
MAX_BUDGET = 1_000_000.0  # US dollars; more is a typo
# Completed runs of a configuration before its expected cost is their 95th percentile
# rather than their largest: twenty is the fewest for which that percentile sets one aside.
ENOUGH = 20
SETTING = "Budget on the Experiments form, budget_usd in the spec"
EPSILON = 1e-9  # US dollars: sums of float costs that equal the budget fit it
UNCOUNTABLE = (", which a budget cannot count, so no new cell starts; price every model "
               "(PARLEY_PRICES, or the endpoint's price_input and price_output) and resume "
               "to go on")


def budget_of(value: Any) -> float | None:
    """The spec's `budget_usd`: a positive number of US dollars, or None when absent."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        number = math.nan
    if math.isnan(number):  # a truth value, text or NaN: not a number of dollars
        raise ConfigError(f"budget_usd must be a number of US dollars, got {value!r}", "input")
    if not 0 < number <= MAX_BUDGET:
        raise ConfigError(f"budget_usd must be more than 0 and at most {MAX_BUDGET:,.0f} US "
                          f"dollars, got {value!r}", "input")
    return number


def estimates_of(plan: Any) -> dict[str, float | None]:
    """The preflight's estimated cost of one run of each configuration of `plan`
    (`engine.experiments.planning.Plan`), by label; None where a model is unpriced."""
    out: dict[str, float | None] = {}
    for entry in plan.per_config:
        cost, runs = entry.get("cost_usd"), entry.get("runs") or 0
        out[str(entry["label"])] = None if cost is None else (cost / runs if runs else 0.0)
    return out


def expected_costs(figures: SpendFigures, estimates: Mapping[str, float | None]
                   ) -> dict[str, float | None]:
    """A cell's expected cost by configuration label (see the module's docstring): its
    completed runs' ranked cost (`SpendFigures.labels`), else the preflight's `estimates`
    (None: unknown), and never less than one of its runs in flight has spent so far."""
    out: dict[str, float | None] = {}
    for label in {*estimates, *figures.labels}:
        costs = figures.labels.get(label, LabelCosts())
        base = costs.ranked if costs.completed else estimates.get(label)
        out[label] = None if base is None else max(base, costs.running_most)
    return out


def _dollars(value: float) -> str:
    return f"${value:,.4f}"


@dataclass(frozen=True)
class Spend:
    """An experiment's spend as a budget decides on it: `spent` so far (US dollars), the
    `expected` cost of a cell by configuration label (None: unknown), the label of each cell
    in flight, and how many calls since its start cost an unknown amount."""

    spent: float
    expected: Mapping[str, float | None]
    in_flight: tuple[str, ...] = ()
    unknown: int = 0

    @property
    def committed(self) -> float | None:
        """The spend so far plus the expected cost of every cell in flight (None when one
        of those is unknown). A cell in flight counts whole, whatever it spent already: the
        safe side."""
        costs = [self.expected.get(label) for label in self.in_flight]
        if any(cost is None for cost in costs):
            return None
        return self.spent + sum(cost for cost in costs if cost is not None)

    def _unknown(self, label: str) -> str:
        """Why nothing can be counted ("" when everything can)."""
        if self.unknown:
            return (f"{self.unknown} call(s) cost an unknown amount (a model with no price "
                    f"here, or usage the endpoint reported in no usable form){UNCOUNTABLE}")
        return next((f"a cell of {name!r} has no expected cost (none has completed, and a "
                     f"model of it has no price here){UNCOUNTABLE}"
                     for name in (label, *self.in_flight) if self.expected.get(name) is None), "")

    def decide(self, budget: float, label: str) -> str:
        """`go` (a cell of configuration `label` fits beside the cells in flight), `wait`
        (it would fit once cells in flight have finished and shown what they cost) or
        `stop` (a cost is unknown, the spend has reached the budget, or nothing is in
        flight and the cell would pass it)."""
        committed, cost = self.committed, self.expected.get(label)
        if self._unknown(label) or committed is None or cost is None \
                or self.spent >= budget:
            return "stop"
        if committed + cost <= budget + EPSILON:
            return "go"
        return "wait" if self.in_flight else "stop"

    def reason(self, budget: float, label: str) -> str:
        """The stopped experiment's error: the reason `budget`, the spend, the cells still in
        flight, and why no cell of `label` starts (`restated` rewrites the spend)."""
        why = self._unknown(label)
        if not why:
            cost = self.expected.get(label) or 0.0
            why = ("the spend has reached it, so no new cell starts" if self.spent >= budget
                   else f"one more cell of {label!r} (about {_dollars(cost)}) would pass "
                   "it, so no new cell starts")
            why += ("; resume with a larger Budget (experiment resume --budget-usd) to go "
                    "on")
        return f"{head(self.spent, budget, len(self.in_flight))} ({SETTING}): {why}"


def head(spent: float, budget: float, in_flight: int) -> str:
    """A budget stop's message up to its setting: the spend, and the cells in flight."""
    flight = f" so far, with {in_flight} cell(s) in flight to finish" if in_flight else ""
    return f"{REASON}: spent {_dollars(spent)} of the {_dollars(budget)} budget{flight}"


_HEAD = re.compile(r"^budget: spent \$[0-9,]+\.[0-9]+ of the \$([0-9,]+\.[0-9]+) budget"
                   r"(?: so far, with [0-9]+ cell\(s\) in flight to finish)?(?= \()")


def restated(error: str, spent: float, in_flight: int) -> str:
    """A budget stop's message (`Spend.reason`) with the spend and the cells in flight as
    they are now: once none is in flight, the final spend. Any other error is returned as
    it is."""
    found = _HEAD.match(error)
    if found is None:
        return error
    budget = float(found.group(1).replace(",", ""))
    return head(spent, budget, in_flight) + error[found.end():]


def spend(figures: SpendFigures, estimates: Mapping[str, float | None],
          in_flight: Iterable[str] = ()) -> Spend:
    """The experiment's `Spend` from its stored figures (`experiment_spend`, read with
    `ENOUGH`), with `estimates` (`estimates_of`) and the labels of the cells in flight."""
    return Spend(figures.spent, expected_costs(figures, estimates), tuple(in_flight),
                 figures.unknown)


@dataclass
class BudgetGate:
    """The in-process runner's budget: `enter(label)` before each cell of configuration
    `label` (True when it may start, after waiting for cells in flight where the budget
    needs their real cost first; False once the budget stopped the experiment: then it
    stays shut and `reason` says why), `leave(label)` when it has ended. `flush` writes the
    turns held in a batch first, so the spend read is up to date; `final_reason` is the
    stop's message with the final spend, once every cell has ended."""

    store: Store
    experiment_id: str
    budget: float | None
    estimates: Mapping[str, float | None]
    flush: Callable[[], Any] = lambda: None
    reason: str = ""
    in_flight: list[str] = field(default_factory=list)
    ended: int = 0  # cells that have left: a waiting cell looks again when one does

    POLL = 0.05  # seconds between looks at `ended` while cells in flight decide it
    AGAIN = 1.0  # seconds: a waiting cell reads the spend again even when none has ended

    async def enter(self, label: str) -> bool:
        if self.budget is None:
            self.in_flight.append(label)
            return True
        while not self.reason:
            self.flush()
            now = spend(experiment_spend(self.store, self.experiment_id, ENOUGH),
                        self.estimates, self.in_flight)
            decision = now.decide(self.budget, label)
            if decision == "go":
                self.in_flight.append(label)  # no await since the read: nothing else decided
                return True
            if decision == "stop":
                self.reason = now.reason(self.budget, label)
                break
            seen, until = self.ended, time.monotonic() + self.AGAIN
            while self.ended == seen and not self.reason and time.monotonic() < until:
                await asyncio.sleep(self.POLL)
        return False

    def leave(self, label: str) -> None:
        self.in_flight.remove(label)
        self.ended += 1

    def final_reason(self) -> str:
        """The stop's message ("" when the budget did not stop it) with the spend read now."""
        if not self.reason:
            return ""
        self.flush()
        return restated(self.reason, experiment_spent(self.store, self.experiment_id),
                        len(self.in_flight))


def set_budget(store: Store, experiment_id: str, budget: Any) -> float:
    """Give a stored experiment a new `budget_usd` (to resume one its budget stopped):
    checked as the spec's is; refused while the experiment runs."""
    value = budget_of(budget)
    if value is None:
        raise ConfigError("give a budget in US dollars", "input")
    found = row(store, experiment_id)
    if found["status"] == "running":
        raise ConfigError(f"experiment {experiment_id} is running; stop it before changing "
                          "its budget", "input")
    set_values(store, experiment_id, spec=json.dumps({**found["spec"], "budget_usd": value},
                                                     ensure_ascii=False))
    return value


IN_SHARE = 5 / 6  # of the preflight's 600 tokens a call: about 500 in, 100 out


def seat_prices(resolved: Resolved, endpoints: EndpointRegistry | None = None) -> list[Any]:
    """Each seat's price (`engine.llm.prices.Price`), 0.0 for a simulated seat, None when
    unpriced: the models resolved as a run would resolve them."""
    from engine.llm.prices import model_price
    from engine.llm.providers import resolve_model
    from engine.protocols.base import seated
    out: list[Any] = []
    for _, seat in seated(resolved.seats):
        model = resolve_model(seat.model, seat.temperature, endpoints)
        out.append(0.0 if is_simulated(seat.spec) else model_price(model))
    return out


def estimated_cost(resolved: Resolved, runs: int, calls: int, store: Store | None = None,
                   endpoints: EndpointRegistry | None = None) -> float | None:
    """The preflight's cost of `runs` runs of `config` in US dollars: the mean cost of its
    completed runs in `store` (by label and protocol, when they have known costs), else its
    `calls` per run at about 500 tokens in and 100 out each, priced at the mean of its seats'
    prices. None (unknown) when a seat is unpriced; 0 when every seat is simulated."""
    prices = seat_prices(resolved, endpoints)
    config = resolved.given
    if any(p is None for p in prices):
        return None
    if all(p == 0.0 for p in prices):
        return 0.0
    if store is not None and config.label:
        done = store.runs(label=config.label, protocol=config.protocol,
                          status="completed", limit=200, with_config=False)
        costs = done["cost_usd"].dropna() if "cost_usd" in done else None
        if costs is not None and len(costs) and len(costs) == len(done):
            return float(costs.mean()) * runs
    per_in = sum(0.0 if p == 0.0 else p.input for p in prices) / len(prices)
    per_out = sum(0.0 if p == 0.0 else p.output for p in prices) / len(prices)
    tokens = 600 * calls
    return runs * (tokens * IN_SHARE * per_in + tokens * (1 - IN_SHARE) * per_out) / 1e6
