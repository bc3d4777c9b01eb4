"""Who moved whom: `engine.analysis.influence` added up over the stored runs that
match the Insights filters, as a persona x persona and a model x model matrix.

Each agent of a run is mapped to its persona and its model spec from the run's stored
configuration (its seats by name). A cell (mover, moved) counts:
- `flips`: the flips credited to a mover of that persona (model) on a moved agent of that
  persona (model): `influence`, each flip credited to every agent that held the new answer
  in the round before;
- `opportunities`: the chances of such a credit: every pair of consecutive rounds and two
  distinct agents where the moved one answered in both rounds and the mover answered in the
  first with an answer other than the moved one's (so the moved one could have flipped to it).
  A credit is always an opportunity, so `rate` = flips / opportunities lies in [0, 1], with its
  95% Wilson interval;
- `runs`: how many runs gave the cell an opportunity, and `run_ids` which (the drill-down).
Agents of the same persona (model) are distinct agents: the diagonal counts one agent moving
another of its kind, never an agent moving itself.

Completed runs only; simulated and real runs are never pooled (`kind`: "both" gives each
kind its own matrices, the simulated ones labelled so).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from engine.analysis import influence
from engine.analysis.rounds_dynamics import normal_rounds
from engine.analysis.stats import wilson_interval
from engine.protocols.personas import CAUTIOUS, CREATIVE, CRITIC, JUDGE, LITERAL
from engine.reports.whatif import round_runs
from engine.simulated.world import PERSONA_CAVEAT
from engine.views import ballots
from engine.views.aggregate import SIMULATED_SUFFIX

if TYPE_CHECKING:
    from engine.store import RunFilters, Store

BY = ("persona", "model")
# what a persona x persona matrix over simulated runs is (`engine.reports.blind`)
SIMULATED_PERSONAS = PERSONA_CAVEAT
NO_PERSONA = ballots.NO_PERSONA
UNKNOWN = "(unknown seat)"
COLUMNS = ["kind", "by", "mover", "moved", "flips", "opportunities", "rate", "low", "high",
           "runs", "run_ids"]
_BUILT_IN = {p.prompt.strip(): p.id for p in (CAUTIOUS, CREATIVE, LITERAL, CRITIC, JUDGE)}


def persona_of(seat: Mapping[str, Any], names: Mapping[str, str] | None = None) -> str:
    """A seat's persona as the matrix names it (`engine.views.ballots.persona_of`, the
    built-in personas known by their prompts, and `names`: prompt -> name)."""
    return ballots.persona_of(seat, {**_BUILT_IN, **(names or {})})


def seat_map(config: Any, names: Mapping[str, str] | None = None
             ) -> dict[str, tuple[str, str]]:
    """Agent name -> (persona, model spec) from a stored configuration (any shape: what
    cannot be read maps nobody; `names` as `persona_of`). A seat without a model plays the
    configuration's."""
    if not isinstance(config, Mapping):
        return {}
    default = str(config.get("model") or "simulated")
    seats = config.get("seats")
    out: dict[str, tuple[str, str]] = {}
    if not isinstance(seats, Mapping):
        return out
    for slot, entries in seats.items():
        for entry in entries if isinstance(entries, list) else [entries]:
            if not isinstance(entry, Mapping):
                continue
            name = str(entry.get("name") or slot)
            out.setdefault(name, (persona_of(entry, names),
                                  str(entry.get("model") or default)))
    return out


def opportunities(rounds: Sequence[Mapping[str, str | None]]) -> dict[tuple[str, str], int]:
    """(mover, moved) -> the chances `moved` had to flip to `mover`'s answer (see the
    module's docstring); pairs with none are left out."""
    normal = normal_rounds(rounds)
    out: dict[tuple[str, str], int] = defaultdict(int)
    for before, after in zip(normal, normal[1:]):
        for moved, was in before.items():
            if was is None or after.get(moved) is None:
                continue
            for mover, held in before.items():
                if mover != moved and held is not None and held != was:
                    out[(mover, moved)] += 1
    return dict(out)


def matrices(runs: pd.DataFrame, names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """`round_runs`' rows (with their `config`) added up into cells (`COLUMNS`), one block per
    kind ("real", "simulated") and per `by` ("persona", "model"); `names` as `persona_of`."""
    cells: dict[tuple[str, str, str, str], list[Any]] = {}
    for row in runs.to_dict("records"):
        kind = "simulated" if row["simulated"] else "real"
        seats = seat_map(row.get("config"), names)
        credited = influence(row["rounds"])
        for (mover, moved), chances in opportunities(row["rounds"]).items():
            a, b = seats.get(mover, (UNKNOWN, UNKNOWN)), seats.get(moved, (UNKNOWN, UNKNOWN))
            for index, by in enumerate(BY):
                cell = cells.setdefault((kind, by, a[index], b[index]), [0, 0, set()])
                cell[0] += credited.get((mover, moved), 0)
                cell[1] += chances
                cell[2].add(str(row["id"]))
    out = []
    for (kind, by, mover, moved), (flips, chances, ids) in sorted(cells.items()):
        low, high = wilson_interval(flips, chances)
        out.append({"kind": kind, "by": by, "mover": mover, "moved": moved, "flips": flips,
                    "opportunities": chances, "rate": flips / chances, "low": low,
                    "high": high, "runs": len(ids), "run_ids": sorted(ids)})
    return pd.DataFrame(out, columns=COLUMNS)


def from_store(store: Store, filters: RunFilters | None = None, kind: str = "real") -> pd.DataFrame:
    """`matrices` over the completed runs matching `filters` of `kind` (real, simulated, both):
    their rounds and configurations read in one query per 5,000 runs; a seat's persona named
    as the library names its prompt."""
    names = {str(entry.get("prompt") or "").strip(): str(entry["name"])
             for entry in store.library("persona") if str(entry.get("prompt") or "").strip()}
    return matrices(round_runs(store, filters, kind, with_config=True), names)


def block(table: pd.DataFrame, kind: str, by: str) -> pd.DataFrame:
    """One matrix's cells: `kind` and `by` of `matrices`."""
    return table[(table["kind"] == kind) & (table["by"] == by)].reset_index(drop=True)


def title(kind: str, by: str, both: bool) -> str:
    """A matrix's title; the simulated one labelled so when both kinds are shown."""
    name = f"Who moved whom, {by} × {by}"
    return name + (SIMULATED_SUFFIX if kind == "simulated" and both else "")


def shown(cells: pd.DataFrame) -> pd.DataFrame:
    """A matrix's cells as its table shows them: the rate as text with its interval and n."""
    return pd.DataFrame({
        "mover": cells["mover"], "moved": cells["moved"],
        "flips / opportunities": [f"{f} / {o}" for f, o in zip(
            cells["flips"], cells["opportunities"], strict=True)],
        "rate [95% CI]": [f"{r:.0%} [{lo:.0%}–{hi:.0%}]" for r, lo, hi in zip(
            cells["rate"], cells["low"], cells["high"], strict=True)],
        "runs": cells["runs"]})


def heat(cells: pd.DataFrame) -> pd.DataFrame:
    """A matrix's cells as `vega.heatmap` takes them (mover as group, moved as series)."""
    return pd.DataFrame({"group": cells["mover"], "series": cells["moved"],
                         "rate": cells["rate"], "low": cells["low"], "high": cells["high"],
                         "count": cells["flips"], "n": cells["opportunities"],
                         "runs": cells["runs"]})


def cell_runs(cells: pd.DataFrame, mover: str, moved: str) -> list[str]:
    """The ids of the runs behind one cell (none when there is no such cell)."""
    hit = cells[(cells["mover"] == mover) & (cells["moved"] == moved)]
    return list(hit.iloc[0]["run_ids"]) if not hit.empty else []
