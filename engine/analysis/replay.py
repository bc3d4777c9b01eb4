"""What-if replay of stored runs: what a stop rule would have cost and saved had it
stopped each run's rounds early, from what the runs stored, with no model call.

A run is its answers by round (one mapping per round from agent to its raw answer, None
abstains: `engine.protocols.stored_rounds`), whether its own final answer was right (`correct`,
as stored: None when unscored), and the tokens and dollars its turns spent in each round. A
rule names the round it would have stopped after (`stop_round`); a run stopped after round r
answers with round r's plurality (`tally`: ties broken by the smallest answer, as every
protocol's tally; a round in which everyone abstained has no answer and scores wrong) and
saves the tokens and dollars of its turns in later rounds. A run the rule lets run to its last
round keeps its own answer and saves nothing. Turns without a round (a judge that speaks after
the rounds) are never counted as saved: the replay is conservative about savings.

The rules (`rules`):
- `agreement` ≥ t: stop after the first round whose plurality holds at least a share t of the
  answers given (abstentions left out, as `dynamics`' agreement), at least two answers given:
  a lone answer agrees with nobody, so a single agent's reflection never stops by it;
- `split`: debate only when round one splits: stop after round one when it is unanimous (at
  least two agents, none abstaining, one answer: `dynamics`' silent agreement);
- `uncaught`: stop when the leader cannot be caught. Any agent may change its answer in any
  round, so "cannot" needs a bound on how much can change; the rule takes a cautious one. After
  round r of N, let k be the most agents that changed (an answer to another, or to or from an
  abstention) between two consecutive rounds so far, and K = max(1, k): at least one agent is
  assumed able to move each round even when none has. In each remaining round at most K agents
  change, each change at worst moving a vote from the leader to the runner-up (the lead drops
  by 2; an abstainer joining the runner-up drops it by 1). The leader cannot be caught, not even
  tied, when its lead over the runner-up (0 votes when it has none) exceeds 2·K·(N − r). A lone
  agent is never safe (lead 1, never more than 2), so a single agent's reflection never stops.

`replay` adds the rules up over runs: the accuracy as run and with the rule over the scored
runs (each with its Wilson interval), the accuracy lost (as run minus with the rule, with
Newcombe's paired interval, since both are measured on the same runs), the runs the rule
broke (right as run, wrong when stopped) and fixed, the tokens saved out of the runs' total,
and the dollars saved: None (unknown, never 0) when a turn of a saved round had no price.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engine.analysis.answers import answers_match
from engine.analysis.rounds_dynamics import dynamics, normal_rounds, votes
from engine.analysis.stances import normalize_stance
from engine.analysis.stats import paired_difference_interval, wilson_interval

AGREEMENT_GRID = (0.5, 0.6, 2 / 3, 0.75, 0.8, 0.9, 1.0)
_EPSILON = 1e-9  # 2/3 of the answers meets a threshold of 2/3 however it was rounded
RULE_KINDS = ("agreement", "split", "uncaught")


@dataclass(frozen=True)
class Rule:
    """A stop rule: `kind` one of `RULE_KINDS`; `threshold` for `agreement`."""

    kind: str
    threshold: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in RULE_KINDS:
            raise ValueError(f"a stop rule is one of {', '.join(RULE_KINDS)}, got {self.kind!r}")
        if self.kind == "agreement" and (self.threshold is None or not 0 < self.threshold <= 1):
            raise ValueError(f"an agreement threshold lies in (0, 1], got {self.threshold!r}")

    @property
    def label(self) -> str:
        if self.kind == "agreement":
            return f"stop when agreement ≥ {self.threshold:.2f}"
        if self.kind == "split":
            return "debate only when round one splits"
        return "stop when the leader cannot be caught"


def rules(grid: Sequence[float] = AGREEMENT_GRID) -> list[Rule]:
    """Every rule: agreement at each threshold of `grid`, then the split and uncaught rules."""
    return [*(Rule("agreement", t) for t in grid), Rule("split"), Rule("uncaught")]


def _changed(before: Mapping[str, str | None], after: Mapping[str, str | None]) -> int:
    """Agents whose answer differs between two rounds (an abstention, or absence, included)."""
    return sum(1 for agent in set(before) | set(after) if before.get(agent) != after.get(agent))


def _uncaught(rounds: Sequence[Mapping[str, str | None]]) -> int:
    normal, counted = normal_rounds(rounds), votes(rounds)
    last = len(normal)
    most = 0
    for number in range(1, last):
        if number > 1:
            most = max(most, _changed(normal[number - 2], normal[number - 1]))
        given = list(counted[number - 1].values())  # most first
        lead = (given[0] - (given[1] if len(given) > 1 else 0)) if given else 0
        if lead > 2 * max(1, most) * (last - number):
            return number
    return last


def stop_round(rule: Rule, rounds: Sequence[Mapping[str, str | None]]) -> int:
    """The round (1-based) after which `rule` stops a run with these rounds: len(rounds) when
    it lets the run go to its end (0 for a run without rounds)."""
    last = len(rounds)
    if last <= 1:
        return last
    if rule.kind == "split":
        return 1 if dynamics(rounds[:1]).silent_agreement else last
    if rule.kind == "uncaught":
        return _uncaught(rounds)
    threshold = float(rule.threshold or 1.0)
    measured = dynamics(rounds)
    return next((number for number, (share, given) in enumerate(
        zip(measured.agreement, measured.answered, strict=True), 1)
        if given >= 2 and share >= threshold - _EPSILON), last)


def answer_after(rounds: Sequence[Mapping[str, str | None]], number: int) -> str | None:
    """Round `number`'s plurality (1-based; ties to the smallest answer, as `tally`), None
    when everyone abstained or there is no such round."""
    if not 1 <= number <= len(rounds):
        return None
    return next(iter(votes(rounds[number - 1:number])[0]), None)


@dataclass(frozen=True)
class StoredRun:
    """What the replay needs of one stored run: its answers by round, its expected answer,
    whether its own answer was right (None: unscored), and per round number the tokens (in
    plus out) and dollars its turns spent (`cost[r]` None: a turn of round r had no price);
    `total_tokens` counts every turn, those without a round too."""

    run_id: str
    rounds: Sequence[Mapping[str, str | None]]
    expected: str | None = None
    correct: bool | None = None
    tokens: Mapping[int, int] = field(default_factory=dict)
    cost: Mapping[int, float | None] = field(default_factory=dict)
    total_tokens: int = 0


@dataclass(frozen=True)
class Stopped:
    """One run under one rule: the round it stops after, whether that is before its last,
    whether it is right with the rule (None: unscored), and what it saves (`dollars` None:
    unknown)."""

    stop: int
    early: bool
    right: bool | None
    tokens: int
    dollars: float | None


def apply(rule: Rule, run: StoredRun) -> Stopped:
    """`rule` replayed on one run."""
    last = len(run.rounds)
    stop = stop_round(rule, run.rounds)
    early = stop < last
    scored = run.correct is not None and bool(normalize_stance(run.expected or ""))
    right: bool | None = None
    if scored:
        right = bool(answers_match(answer_after(run.rounds, stop), run.expected)) if early \
            else bool(run.correct)
    saved = [r for r in set(run.tokens) | set(run.cost) if r > stop] if early else []
    costs = [run.cost.get(r, 0.0) for r in saved]
    dollars = None if any(c is None for c in costs) else float(sum(c or 0.0 for c in costs))
    return Stopped(stop=stop, early=early, right=right,
                   tokens=sum(int(run.tokens.get(r, 0)) for r in saved), dollars=dollars)


@dataclass(frozen=True)
class Outcome:
    """One rule over many runs (see the module's docstring for each figure). Rates are None
    without scored runs; `dollars_saved` is None when any run's saved rounds had an unpriced
    turn (`unpriced` counts those runs)."""

    rule: Rule
    runs: int
    stopped: int
    scored: int
    right_as_run: int
    right_with_rule: int
    broken: int
    fixed: int
    accuracy_as_run: float | None
    as_run_low: float | None
    as_run_high: float | None
    accuracy_with_rule: float | None
    with_rule_low: float | None
    with_rule_high: float | None
    lost: float | None
    lost_low: float | None
    lost_high: float | None
    tokens: int
    tokens_saved: int
    dollars_saved: float | None
    unpriced: int

    @property
    def saved_share(self) -> float | None:
        """Tokens saved over the runs' tokens (None when they spent none)."""
        return self.tokens_saved / self.tokens if self.tokens else None


def outcome(rule: Rule, runs: Sequence[StoredRun]) -> Outcome:
    """`rule` replayed on every run of `runs`, added up."""
    both = only_run = only_rule = neither = 0
    stopped = tokens_saved = unpriced = 0
    dollars = 0.0
    for run in runs:
        got = apply(rule, run)
        stopped += got.early
        tokens_saved += got.tokens
        if got.dollars is None:
            unpriced += 1
        else:
            dollars += got.dollars
        if got.right is None:
            continue
        was = bool(run.correct)
        both += was and got.right
        only_run += was and not got.right
        only_rule += got.right and not was
        neither += not was and not got.right
    scored = both + only_run + only_rule + neither
    right_run, right_rule = both + only_run, both + only_rule
    as_run = wilson_interval(right_run, scored) if scored else (None, None)
    with_rule = wilson_interval(right_rule, scored) if scored else (None, None)
    lost = paired_difference_interval(both, only_run, only_rule, neither) if scored \
        else (None, None)
    return Outcome(
        rule=rule, runs=len(runs), stopped=stopped, scored=scored, right_as_run=right_run,
        right_with_rule=right_rule, broken=only_run, fixed=only_rule,
        accuracy_as_run=right_run / scored if scored else None,
        as_run_low=as_run[0], as_run_high=as_run[1],
        accuracy_with_rule=right_rule / scored if scored else None,
        with_rule_low=with_rule[0], with_rule_high=with_rule[1],
        lost=(right_run - right_rule) / scored if scored else None,
        lost_low=lost[0], lost_high=lost[1],
        tokens=sum(max(0, int(run.total_tokens)) for run in runs), tokens_saved=tokens_saved,
        dollars_saved=None if unpriced else dollars,
        unpriced=unpriced)


def replay(runs: Sequence[StoredRun], chosen: Sequence[Rule] | None = None) -> list[Outcome]:
    """Every rule of `chosen` (default `rules()`) replayed on `runs`, in the rules' order."""
    return [outcome(rule, runs) for rule in (rules() if chosen is None else chosen)]
