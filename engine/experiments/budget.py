"""Budgets: an experiment spec's `budget_usd` (US dollars). Once what the experiment has spent
reaches it, no new cell starts; cells in flight finish, and the experiment ends `stopped` with
the reason `budget` (its error says "budget: ..."). The spend is read from the store, so the
budget holds across a pool of workers.

A cell starts only while the spend so far, plus what the cells in flight are expected to
cost, plus the new cell's own expected cost, stays within the budget (a cell is expected to
cost the mean of the experiment's completed runs, else the preflight's estimate per run).
When only the cells in flight stand in the way, the new cell waits for them to finish (their
real cost then replaces the estimate); when none is in flight and one more cell would pass
the budget, or the spend has reached it, the experiment stops. So with many cells in flight
it does not overrun by all of them: it ends within about one cell's cost of the budget. A
pool's jobs take that decision one at a time per experiment, counting the cells whose lock
is held as in flight (`engine.store.workers.budget_turn`).
"""
from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.models import ConfigError
from engine.store.experiments import experiment_spend, row, set_values

REASON = "budget"
MAX_BUDGET = 1_000_000.0  # US dollars; more is a typo


def budget_of(value: Any) -> float | None:
    """The spec's `budget_usd`: a positive number of US dollars, or None when absent."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ConfigError(f"budget_usd must be a number of US dollars, got {value!r}", "input")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"budget_usd must be a number of US dollars, got {value!r}",
                          "input") from None
    if not math.isfinite(number) or number <= 0 or number > MAX_BUDGET:
        raise ConfigError(f"budget_usd must be more than 0 and at most {MAX_BUDGET:,.0f} US "
                          f"dollars, got {value!r}", "input")
    return number


@dataclass(frozen=True)
class Spend:
    """An experiment's spend: `spent` so far (US dollars), `running` cells in flight, and the
    expected cost of one cell (`per_cell`: measured, else the preflight's estimate)."""

    spent: float
    running: int
    per_cell: float

    def allows(self, budget: float) -> bool:
        """True when one more cell fits: spent + cells in flight + this one, each at
        `per_cell`, within `budget` (and nothing starts once the spend reaches it)."""
        return self.spent < budget and \
            self.spent + (self.running + 1) * self.per_cell <= budget + 1e-12

    def decide(self, budget: float) -> str:
        """`go` (one more cell fits), `wait` (it would fit once the cells in flight have
        finished and shown what they cost) or `stop` (the spend has reached the budget, or
        nothing is in flight and one more cell would pass it)."""
        if self.allows(budget):
            return "go"
        if self.spent < budget and self.running > 0:
            return "wait"
        return "stop"

    def reason(self, budget: float) -> str:
        """The stopped experiment's error: the reason `budget`, with the figures."""
        return (f"{REASON}: spent ${self.spent:,.4f} of the ${budget:,.4f} budget (about "
                f"${self.per_cell:,.4f} a cell), so no new cell starts; resume with a larger "
                "budget_usd to go on")


def spend(store: Any, experiment_id: str, estimate: float | None) -> Spend:
    """The experiment's `Spend` from the store; `estimate` is the preflight's cost per run
    (used until a run of the experiment has a known cost)."""
    return spend_of(experiment_spend(store, experiment_id), estimate)


def spend_of(figures: tuple[float, int, float | None], estimate: float | None) -> Spend:
    """A `Spend` from `experiment_spend`'s figures (spent, running, mean cost of a completed
    run) and the preflight's cost per run (used while the mean is unknown)."""
    spent, running, mean = figures
    per_cell = mean if mean is not None else (estimate or 0.0)
    return Spend(spent, running, per_cell)


class Gate:
    """The in-process runner's budget check before each cell (`wait_to_start`): True when
    the cell may start, after waiting for cells in flight where the budget needs their real
    cost first; False once the budget is spent (then it stays shut and `reason` says why).
    `flush` writes the turns held in a batch first, so the spend read is up to date."""

    POLL = 0.05  # seconds between looks while cells in flight decide it

    def __init__(self, store: Any, experiment_id: str, budget: float | None,
                 estimate: float | None, flush: Callable[[], Any] = lambda: None):
        self.store, self.experiment_id = store, experiment_id
        self.budget, self.estimate, self.flush = budget, estimate, flush
        self.reason = ""

    async def wait_to_start(self) -> bool:
        if self.budget is None:
            return True
        while not self.reason:
            self.flush()
            now = spend(self.store, self.experiment_id, self.estimate)
            decision = now.decide(self.budget)
            if decision == "go":
                return True
            if decision == "stop":
                self.reason = now.reason(self.budget)
                break
            await asyncio.sleep(self.POLL)
        return False


def set_budget(store: Any, experiment_id: str, budget: Any) -> float:
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


def seat_prices(config: Any, endpoints: Any = None) -> list[Any]:
    """Each seat's price (`engine.llm.prices.Price`), 0.0 for a simulated seat, None when
    unpriced: the models resolved as a run would resolve them."""
    from engine.config import RunConfig
    from engine.llm.prices import model_price
    from engine.llm.providers import resolve_model
    from engine.protocols import get_protocol, seats_from_config
    typed = RunConfig.parse(config)
    kwargs = seats_from_config(get_protocol(typed.protocol), typed)
    out: list[Any] = []
    for slot in get_protocol(typed.protocol).slots:
        seats = kwargs.get(slot.name)
        for seat in seats if isinstance(seats, list) else [seats]:
            if seat is None:
                continue
            model = resolve_model(seat.model, seat.temperature, endpoints)
            simulated = type(model).__name__ == "SimulatedChatModel"
            out.append(0.0 if simulated else model_price(model))
    return out


def estimated_cost(config: Any, runs: int, calls: int, store: Any = None,
                   endpoints: Any = None) -> float | None:
    """The preflight's cost of `runs` runs of `config` in US dollars: the mean cost of its
    completed runs in `store` (by label and protocol, when they have known costs), else its
    `calls` per run at about 500 tokens in and 100 out each, priced at the mean of its seats'
    prices. None (unknown) when a seat is unpriced; 0 when every seat is simulated."""
    prices = seat_prices(config, endpoints)
    if any(p is None for p in prices):
        return None
    if all(p == 0.0 for p in prices):
        return 0.0
    if store is not None and config.get("label"):
        done = store.runs(label=str(config["label"]), protocol=str(config.get("protocol")),
                          status="completed", limit=200, with_config=False)
        costs = done["cost_usd"].dropna() if "cost_usd" in done else done.iloc[0:0]
        if len(costs) and len(costs) == len(done):
            return float(costs.mean()) * runs
    per_in = sum(0.0 if p == 0.0 else p.input for p in prices) / len(prices)
    per_out = sum(0.0 if p == 0.0 else p.output for p in prices) / len(prices)
    tokens = 600 * calls
    return runs * (tokens * IN_SHARE * per_in + tokens * (1 - IN_SHARE) * per_out) / 1e6
