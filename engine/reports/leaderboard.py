"""A leaderboard across stored runs: Bradley-Terry ratings per model and per persona from the
pairwise outcomes the runs hold.

The outcomes, read from completed runs' stored results:
- a debate's verdict: the seat that argued the side the judge ruled for beats the other
  arguing seat (the judge is not a player). With `sides: both` the two runs of a swapped pair
  are two outcomes, one each way round, so a judge that rules by side cancels out.
- a council's rankings: each ranker's ordering, best first, gives every member it ranked
  above another a win over it (a ranker never ranks itself).
- a duel has no judge and no score: it gives no outcome, and the page says so.
A pair whose two seats are the same player (the same model, or the same persona, on both
seats) says nothing about that player and is left out of that board.

The fit (Hunter 2004's MM algorithm for the Bradley-Terry model): player i has a strength
p_i and beats j with probability p_i / (p_i + p_j). Each iteration sets
    p_i = (W_i + a) / (sum_j n_ij / (p_i + p_j) + 2a / (p_i + 1)),
with W_i the wins of i, n_ij the games between i and j, and a = `PRIOR` virtual games won
and lost against a fixed reference player of strength 1 (so a player who never lost keeps a
finite rating, and the scale is anchored). With a = 0 the strengths are scaled to a geometric
mean of 1 instead. A rating is on the Elo scale: 1000 + 400 log10 p (a 400-point gap: 10 to 1
odds; 1000 is the reference player).

Each rating has its n (games and runs) and a 95% interval: the 2.5th and 97.5th percentiles
over `BOOTSTRAP` refits on runs drawn with replacement (seeded; a run's outcomes stay
together), each drawn game's winner drawn again from the fitted odds (a parametric bootstrap
on resampled runs: a plain resample of runs that all went one way would repeat them and give
a zero-width interval, a certainty three games cannot give), widened where needed to hold the
point itself. A debate where exactly one side's
last argument gave the expected answer has a right side: each seat's win rate on the right
and on the wrong side is counted with its Wilson interval. Simulated runs (any seat played by
the simulated model) and real ones are rated on separate boards, never pooled.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from engine.views.aggregate import rate_text

if TYPE_CHECKING:
    from engine.store import Store

PRIOR = 1.0  # virtual wins and losses each player has against the reference player
BOOTSTRAP = 200
BASE, SCALE = 1000.0, 400.0
BY = ("model", "persona")
KINDS = ("real", "simulated")
NO_PERSONA = "(no persona)"
PERSONA_MAX = 60
COLUMNS = ["player", "rating", "low", "high", "games", "wins", "losses", "runs",
           "rating [95% CI]", "right side", "wrong side"]


@dataclass(frozen=True)
class Player:
    """A seat as the boards see it: its model spec and its persona."""

    model: str
    persona: str

    def key(self, by: str) -> str:
        return self.model if by == "model" else self.persona


@dataclass(frozen=True)
class Game:
    """One pairwise outcome: `winner` beat `loser` in run `run_id`."""

    run_id: str
    protocol: str
    winner: Player
    loser: Player


@dataclass(frozen=True)
class Side:
    """A debating seat in a debate with a right side: whether it argued the right side and
    whether it won."""

    run_id: str
    player: Player
    right: bool
    won: bool


@dataclass
class Outcomes:
    """What a set of stored runs holds for the boards, by kind (`real`, `simulated`)."""

    games: dict[str, list[Game]] = field(default_factory=lambda: {k: [] for k in KINDS})
    sides: dict[str, list[Side]] = field(default_factory=lambda: {k: [] for k in KINDS})
    runs: dict[str, dict[str, Mapping[str, Any]]] = field(
        default_factory=lambda: {k: {} for k in KINDS})  # run id -> the row behind it


# --------------------------------------------------------------------------- the fit
def fit(games: Sequence[tuple[str, str]], prior: float = PRIOR) -> dict[str, float]:
    """Bradley-Terry ratings (Elo scale) of every player in `games`, (winner, loser) pairs,
    by the MM iteration in the module's docstring (until no strength moves by a factor of
    more than 1 + 1e-10, at most 10,000 times). Empty for no games."""
    players = sorted({p for pair in games for p in pair})
    if not players:
        return {}
    index = {p: i for i, p in enumerate(players)}
    k = len(players)
    wins = np.zeros((k, k))
    for winner, loser in games:
        wins[index[winner], index[loser]] += 1
    played = wins + wins.T
    won = wins.sum(axis=1)
    strength = np.ones(k)
    for _ in range(10_000):
        denominator = (played / (strength[:, None] + strength[None, :])).sum(axis=1)
        denominator += 2 * prior / (strength + 1.0)
        new = (won + prior) / np.where(denominator > 0, denominator, 1.0)
        new = np.where(new > 0, new, 1e-300)
        if prior == 0:
            new = new / math.exp(float(np.log(new).mean()))
        done = float(np.max(np.abs(np.log(new) - np.log(strength)))) < 1e-10
        strength = new
        if done:
            break
    return {p: BASE + SCALE * math.log10(float(strength[index[p]])) for p in players}


def rated(games: Sequence[Game], by: str, *, prior: float = PRIOR, bootstrap: int = BOOTSTRAP,
          seed: int = 0) -> dict[str, dict[str, Any]]:
    """Per player (`by`: model or persona): its rating, its interval over `bootstrap` refits
    on resampled runs, and its games, wins, losses and run ids."""
    pairs = [(g.winner.key(by), g.loser.key(by), g.run_id) for g in games
             if g.winner.key(by) != g.loser.key(by)]
    point = fit([(w, lo) for w, lo, _ in pairs], prior)
    by_run: dict[str, list[tuple[str, str]]] = {}
    for winner, loser, run in pairs:
        by_run.setdefault(run, []).append((winner, loser))
    runs = sorted(by_run)
    draws: dict[str, list[float]] = {p: [] for p in point}
    rng = np.random.default_rng(seed)
    strength = {p: 10 ** ((r - BASE) / SCALE) for p, r in point.items()}
    for _ in range(bootstrap if runs else 0):
        picked = rng.integers(0, len(runs), len(runs))
        resampled = [pair for i in picked for pair in by_run[runs[i]]]
        # each game of the drawn runs is played again by the fitted model (the winner drawn
        # with its fitted odds), so that runs that all went one way still leave room for
        # the other: a plain resample of identical outcomes would give a zero-width interval
        again = rng.random(len(resampled))
        resampled = [(w, lo) if draw < strength[w] / (strength[w] + strength[lo]) else (lo, w)
                     for (w, lo), draw in zip(resampled, again, strict=True)]
        for player, rating in fit(resampled, prior).items():
            draws[player].append(rating)
    out: dict[str, dict[str, Any]] = {}
    for player, rating in point.items():
        low, high = np.percentile(draws[player], [2.5, 97.5]) if draws[player] else (rating,) * 2
        mine = [(w, run) for w, lo, run in pairs if player in (w, lo)]
        wins = sum(1 for w, _ in mine if w == player)
        out[player] = {"rating": rating, "low": min(float(low), rating),
                       "high": max(float(high), rating), "games": len(mine),
                       "wins": wins, "losses": len(mine) - wins,
                       "run_ids": sorted({run for _, run in mine})}
    return out


# --------------------------------------------------------------------------- reading runs
def _seat(entry: Mapping[str, Any]) -> Player:
    persona = str(entry.get("persona_name") or "").strip() or \
        " ".join(str(entry.get("persona") or "").split())[:PERSONA_MAX] or NO_PERSONA
    return Player(str(entry.get("model") or "?"), persona)


def _seats(config: Any) -> dict[str, Player]:
    """Seat name -> player, from a stored run's configuration (every slot)."""
    seats = (config or {}).get("seats") if isinstance(config, Mapping) else None
    out: dict[str, Player] = {}
    for entries in (seats or {}).values():
        for entry in entries if isinstance(entries, list) else [entries]:
            if isinstance(entry, Mapping) and entry.get("name"):
                out[str(entry["name"])] = _seat(entry)
    return out


def run_outcome(row: Mapping[str, Any]) -> tuple[list[Game], list[Side]]:
    """A stored run's games and side records, read through its protocol's registry entry
    (`pairwise`, `right_sides`); none for a protocol without pairwise outcomes, or a result
    that cannot be read. A seat the configuration does not list is left out."""
    from engine.protocols import REGISTRY
    spec = REGISTRY.get(str(row.get("protocol") or ""))
    if spec is None or spec.pairwise is None:
        return [], []
    result = spec.read_result(row.get("result"))
    if result is None:
        return [], []
    run_id, seats = str(row.get("id")), _seats(row.get("config"))
    games = [Game(run_id, spec.name, seats[w], seats[lo]) for w, lo in spec.pairwise(result)
             if w in seats and lo in seats]
    right = spec.right_sides(result) if spec.right_sides is not None and games else None
    winners = {w for w, _ in spec.pairwise(result)}
    sides = [Side(run_id, seats[seat], ok, seat in winners)
             for seat, ok in (right or {}).items() if seat in seats]
    return games, sides


def outcomes(rows: Iterable[Mapping[str, Any]]) -> Outcomes:
    """The games and side records of stored runs (rows of `Store.runs(with_result=True)`),
    split into real and simulated runs."""
    found = Outcomes()
    for row in rows:
        if row.get("status") != "completed" or not isinstance(row.get("result"), Mapping):
            continue
        kind = "simulated" if bool(row.get("simulated")) else "real"
        games, sides = run_outcome(row)
        if games:
            found.games[kind] += games
            found.sides[kind] += sides
            found.runs[kind][str(row.get("id"))] = row
    return found


def read(store: Store) -> Outcomes:
    """The outcomes of the store's completed runs of every protocol whose runs hold pairwise
    outcomes (a `pairwise` hook)."""
    from engine.protocols import REGISTRY
    rows: list[Mapping[str, Any]] = []
    for protocol in [name for name, spec in REGISTRY.items() if spec.pairwise is not None]:
        frame = store.runs(protocol=protocol, status="completed", with_result=True)
        rows += [{str(key): value for key, value in row.items()}
                 for row in frame.to_dict("records")]
    return outcomes(rows)


# --------------------------------------------------------------------------- the boards
def _side_text(sides: Sequence[Side], by: str, player: str, right: bool) -> str:
    mine = [s for s in sides if s.player.key(by) == player and s.right == right]
    return rate_text(sum(s.won for s in mine), len(mine))


def board(found: Outcomes, kind: str, by: str, *, bootstrap: int = BOOTSTRAP,
          seed: int = 0) -> pd.DataFrame:
    """One board (`kind`: real or simulated; `by`: model or persona), best first, in
    `COLUMNS` plus `run_ids` (the runs behind each rating, for the drill-down)."""
    if kind not in KINDS or by not in BY:
        raise ValueError(f"kind must be one of {KINDS} and by one of {BY}")
    ratings = rated(found.games[kind], by, bootstrap=bootstrap, seed=seed)
    rows = [{"player": player, "rating": round(r["rating"], 1), "low": round(r["low"], 1),
             "high": round(r["high"], 1), "games": r["games"], "wins": r["wins"],
             "losses": r["losses"], "runs": len(r["run_ids"]),
             "rating [95% CI]": f"{r['rating']:.0f} [{r['low']:.0f}–{r['high']:.0f}]",
             "right side": _side_text(found.sides[kind], by, player, True),
             "wrong side": _side_text(found.sides[kind], by, player, False),
             "run_ids": r["run_ids"]}
            for player, r in ratings.items()]
    frame = pd.DataFrame(rows, columns=[*COLUMNS, "run_ids"])
    return frame.sort_values(["rating", "player"], ascending=[False, True]
                             ).reset_index(drop=True)


def behind(found: Outcomes, kind: str, by: str, player: str) -> pd.DataFrame:
    """The runs behind one player's rating: each run's id, protocol, label, question, and the
    player's wins and losses in it."""
    tally: dict[str, list[int]] = {}
    for game in found.games[kind]:
        w, lo = game.winner.key(by), game.loser.key(by)
        if w == lo or player not in (w, lo):
            continue
        tally.setdefault(game.run_id, [0, 0])[0 if w == player else 1] += 1
    rows = []
    for run_id, (wins, losses) in tally.items():
        row = found.runs[kind].get(run_id, {})
        rows.append({"run": run_id, "protocol": str(row.get("protocol") or ""),
                     "label": str(row.get("label") or ""),
                     "question": str(row.get("question") or ""),
                     "wins": wins, "losses": losses,
                     "created": row.get("created_at")})
    frame = pd.DataFrame(rows, columns=["run", "protocol", "label", "question", "wins",
                                        "losses", "created"])
    return frame.sort_values("created", ascending=False, na_position="last"
                             ).reset_index(drop=True)
