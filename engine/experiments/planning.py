"""Experiment specs: cells, plans, configuration choices and the preflight cost check."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.access import LOCAL, Actor, require
from engine.cells import Cell
from engine.checks import require_int, require_name, require_text
from engine.experiments import arrangement
from engine.experiments.budget import budget_of, estimated_cost
from engine.llm.policy import SPEC_FIELDS
from engine.models import ConfigError
from engine.protocols.adversary import with_controls
from engine.protocols.baselines import CONSULTANCY_KIND as CONSULTANCY
from engine.protocols.baselines import KIND as EQUAL_COMPUTE
from engine.protocols.baselines import PLACEBO_KIND as PLACEBO
from engine.protocols.baselines import TOKENS_KIND as EQUAL_TOKENS
from engine.questions import files as qsets
from engine.questions.sets import question_set
from engine.reports.blind import blind_notes
from engine.store import strip_secrets
from engine.store.experiments import add_experiment

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry
    from engine.protocols import Resolved
    from engine.store import Store

DEFAULT_CONCURRENCY = 4
MAX_CONCURRENCY = 64
MAX_REPEATS = 100
MAX_RUNS = 20_000
MAX_CALLS = 20_000  # planned model calls an experiment may make without being confirmed
MEASURED = 200  # the newest runs an equal-tokens baseline is measured over
@dataclass(frozen=True)
class Plan:
    """A checked experiment spec and its preflight: runs, calls and tokens before it starts."""

    name: str
    source: str
    questions: list[dict[str, str | None]]
    configs: list[dict[str, Any]]
    repeats: int
    concurrency: int
    per_config: list[dict[str, Any]]
    baseline: str | None = None
    baselines: list[dict[str, Any]] = field(default_factory=list)
    order: str = "configured"  # or shuffled: each cell's own order seed (`order_seed_of`)
    sides: str = "one"  # or both: debates twice, sides swapped (`arrangement.with_swapped`)
    seed: int = 0
    side_pairs: list[dict[str, str]] = field(default_factory=list)
    budget_usd: float | None = None
    reference: str | None = None  # published figures to show beside (`reports.references`)
    # `configs` resolved once, by the preflight: the time estimate takes them as they are
    resolved: tuple[Resolved, ...] = field(default=(), compare=False, repr=False)

    @property
    def cost_usd(self) -> float | None:
        """The preflight's estimated cost in US dollars (None: some model is unpriced)."""
        costs = [p.get("cost_usd") for p in self.per_config]
        return None if any(c is None for c in costs) else float(sum(c for c in costs if c))

    @property
    def runs(self) -> int:
        return len(self.questions) * len(self.configs) * self.repeats

    @property
    def calls(self) -> int:
        return sum(p["calls"] for p in self.per_config)

    @property
    def tokens(self) -> int:
        return sum(p["tokens"] for p in self.per_config)

    @property
    def labels(self) -> list[str]:
        return [c["label"] for c in self.configs]

    def spec(self) -> dict[str, Any]:
        """What the experiments table stores (and `plan` reads back unchanged: the added
        baselines are among `configs`, and are not added twice)."""
        out = {key: getattr(self, key) for key in ("name", "source", "questions", "configs",
                                                   "repeats", "concurrency")}
        out.update({f.name: getattr(self, f.name) for f in fields(self)  # those not at default
                    if f.name in SETTINGS and getattr(self, f.name) not in (f.default, "")})
        tokens = [b for b in self.baselines if b.get("kind") == EQUAL_TOKENS]
        return {**out, **({"token_baselines": tokens} if tokens else {})}

    def order_seed_of(self, cell: Cell) -> int | None:
        """The order seed a cell's run presents its seats by: None unless `order: shuffled`,
        then one derived from the experiment's seed, the question and the repeat."""
        if self.order != "shuffled":
            return None
        return arrangement.cell_order_seed(self.seed, str(self.questions[cell.q]["question"]),
                                           cell.r)

    @property
    def shape(self) -> tuple[int, int, int]:
        """How many questions, configurations and repeats: a cell's indexes are below them."""
        return len(self.questions), len(self.configs), self.repeats

    def holds(self, cell: Cell) -> bool:
        """True when `cell` is one of the plan's cells."""
        return all(0 <= index < bound for index, bound in zip((cell.q, cell.c, cell.r),
                                                              self.shape))

    def cells(self) -> Iterator[Cell]:
        """Every cell, repeat-major: the first repeat of every question comes first, so a
        stopped experiment has covered the questions evenly. Within a repeat the placebo
        arms' cells come last: each reads its donor, a cell of the same repeat."""
        arms = set(self.placebo_of)
        for r in range(self.repeats):
            for placebo in (False, True):
                for q in range(len(self.questions)):
                    for c in range(len(self.configs)):
                        if (c in arms) == placebo:
                            yield Cell(q, c, r)

    @property
    def placebo_of(self) -> dict[int, int]:
        """Each placebo arm's configuration index -> its configuration's (a sides-swapped
        placebo arm's -> the swapped configuration's)."""
        index = {str(c["label"]): i for i, c in enumerate(self.configs)}
        out = {}
        for pair in self.baselines:
            if pair.get("kind") != PLACEBO:
                continue
            for suffix in ("", arrangement.SWAPPED):
                arm, of = (index.get(arrangement.swapped_label(pair[k]) if suffix else pair[k])
                           for k in ("label", "of"))
                if arm is not None and of is not None:
                    out[arm] = of
        return out

    def donor_of(self, cell: Cell) -> Cell | None:
        """The cell whose run a placebo cell's agents read (its configuration on the donor
        question, a seeded derangement of the set by the experiment's seed, same repeat);
        None for any other cell."""
        of = self.placebo_of.get(cell.c)
        if of is None:
            return None
        return Cell(arrangement.derangement(len(self.questions), self.seed)[cell.q], of, cell.r)

    @property
    def needs_confirmation(self) -> bool:
        """True when the plan makes more than `MAX_CALLS` calls (the user must confirm)."""
        return self.calls > MAX_CALLS

    @property
    def blind(self) -> list[str]:
        """Configurations the simulated model cannot tell apart, one sentence a group
        (`engine.reports.blind`): said before anyone reads their tie as a finding."""
        return blind_notes(self.resolved or self.configs)

    @property
    def budget_note(self) -> str:
        """A budget below the estimated cost, in words ("" when it is not)."""
        cost, budget = self.cost_usd, self.budget_usd
        if budget is None or cost is None or cost <= budget:
            return ""
        share = budget / cost if cost else 0.0
        return (f"The budget (${budget:,.2f}) is below the estimated cost (${cost:,.2f}): the "
                f"experiment will stop once it has spent it, after about {share:.0%} of its "
                "runs.")

    def preflight(self) -> dict[str, Any]:
        return {"runs": self.runs, "calls": self.calls, "tokens": self.tokens,
                "cost_usd": self.cost_usd, "budget_usd": self.budget_usd,
                "per_config": self.per_config, "baselines": self.baselines,
                "notes": [*self.blind, *[self.budget_note] * bool(self.budget_note)]}


def create(store: Store, experiment: Plan | Mapping[str, Any], actor: Actor = LOCAL) -> str:
    """Store an experiment (a `Plan`, or a spec to plan first) as `planned`; returns its id.
    `actor` must be allowed to run experiments (`engine.access`)."""
    require(actor, "run experiments")
    checked = experiment if isinstance(experiment, Plan) else plan(experiment, store)
    return add_experiment(store, checked.name, checked.spec(), checked.runs)


def resolve_configs(items: Any, store: Store | None = None) -> list[dict[str, Any]]:
    """Configurations from a spec: inline dicts (each with a `label`, or one is made from the
    protocol) or labels of configurations saved in the library."""
    if not isinstance(items, list) or not items:
        raise ConfigError("an experiment needs a list of configurations (inline mappings or "
                          "labels of saved configurations)", "input")
    out: list[dict[str, Any]] = []
    for number, item in enumerate(items, 1):
        if isinstance(item, str):
            if store is None:
                raise ConfigError(f"configuration {number} names the saved configuration "
                                  f"{item!r}, but no store was given", "input")
            config = store.saved_config(item)
        elif isinstance(item, Mapping):
            # a plain, private copy without keys: they come from the environment, never
            # from the experiments table (as for runs)
            config = strip_secrets(json.loads(json.dumps(dict(item))))
            config["label"] = str(config.get("label") or
                                  f"{config.get('protocol', 'config')}-{number}").strip()
            require_name(config["label"], f"configuration {number}'s label")
        else:
            raise ConfigError(f"configuration {number} must be a mapping or a saved label, "
                              f"got {type(item).__name__}", "input")
        out.append(config)
    labels = [c["label"] for c in out]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise ConfigError(f"two configurations are labelled {twice[0]!r}; labels must be unique "
                          "(results are compared by label)", "input")
    return out


def config_choices(store: Store, model: str = "simulated") -> dict[str, dict[str, Any]]:
    """What an experiment can compare: the saved configurations by label, then every
    protocol's defaults (labelled `PROTOCOL · defaults`, on `model`)."""
    from engine.protocols import REGISTRY
    out = {c["label"]: dict(c["config"]) for c in store.saved_configs()}
    for name in REGISTRY:
        label = f"{name} · defaults"
        out.setdefault(label, {"protocol": name, "label": label,
                               "model": (model or "").strip() or "simulated"})
    return out


def questions_of(spec: Mapping[str, Any], base_dir: str | Path | None = None
                 ) -> tuple[list[qsets.Item], str]:
    """A spec's questions and their source: `questions_file` (a CSV or JSONL file, relative
    to `base_dir`), `questions` naming a bundled set, or `questions` as a list (inline)."""
    given, path = spec.get("questions"), spec.get("questions_file")
    if (given is None) == (path is None):
        raise ConfigError("give exactly one of questions (a bundled set's name, or a list) "
                          "and questions_file (a CSV or JSONL file)", "input")
    if path is not None:
        return qsets.load_file(Path(base_dir or ".") / str(path)), \
            f"file:{Path(str(path)).name}"
    if isinstance(given, str):
        return question_set(given), f"bundled:{given.strip().lower()}"
    return qsets.from_records(given, "questions"), str(spec.get("source") or "inline")


def plan(spec: Mapping[str, Any], store: Store | None = None, base_dir: str | Path | None = None, *,
         endpoints: EndpointRegistry | None = None, confirmed: bool = False) -> Plan:
    """Check an experiment spec and count what it will cost, before anything runs.

    `spec` keys: `questions` (a bundled set's name, or a list of strings / `{question,
    expected}` mappings) or `questions_file` (a CSV / JSONL path, relative to `base_dir`);
    `configs` (inline configurations or saved labels); `repeats` (default 1); `concurrency`
    (runs in flight, default 4); `timeout_per_call` and `retries` (the call policy of every
    configuration that sets none); `baseline` (`equal-compute`: beside each configuration, the
    vote with as many calls, see `with_baselines`; `equal-tokens`: the vote whose tokens per
    run come closest to the configuration's measured mean in `store`, see `token_baselines`;
    or both, as a list); `name`. Every seat's model resolves
    under `endpoints` (an `EndpointRegistry`; None: the environment's). More than
    `MAX_CALLS` planned calls are refused unless `confirmed`. Raises `ConfigError` naming
    what to change.
    """
    if not isinstance(spec, Mapping):
        raise ConfigError("an experiment spec must be a mapping", "input")
    known = {"name", "questions", "questions_file", "configs", "repeats", "concurrency",
             "baseline", "source", "token_baselines", "order", "sides", "seed",
             "budget_usd", "reference", *SPEC_FIELDS}
    unknown = sorted(str(k) for k in spec if k not in known)
    if unknown:
        raise ConfigError(f"an experiment spec has no key {unknown[0]!r}; keys are "
                          f"{', '.join(sorted(known - {'source'}))}", "input")
    items, source = questions_of(spec, base_dir)
    for number, item in enumerate(items, 1):  # as each run would check it, before any runs
        try:
            require_text(item.question, "the question")
        except ConfigError as exc:
            raise ConfigError(f"question {number}: {exc}", exc.code) from None
    repeats = require_int(spec.get("repeats", 1), "repeats", 1, MAX_REPEATS)
    concurrency = require_int(spec.get("concurrency", DEFAULT_CONCURRENCY), "concurrency", 1,
                         MAX_CONCURRENCY)
    settings = settings_of(spec)
    baseline, sides = settings["baseline"], settings["sides"]
    configs = with_controls(with_policy(resolve_configs(spec.get("configs"), store), spec))
    configs, baselines = _with_arms(configs, baseline or "", spec, store, sides, len(items))
    side_pairs: list[dict[str, str]] = []
    if sides == "both":
        configs, side_pairs = arrangement.with_swapped(configs)
    per_config, resolved = _costs(configs, len(items) * repeats, check=True,
                                  endpoints=endpoints, baselines=baselines if baseline else None,
                                  store=store)
    name = str(spec.get("name") or "").strip() or \
        f"{source.split(':')[-1]} x {len(configs)} configuration{'s' * (len(configs) > 1)}"
    result = Plan(name[:200], source, [i.as_dict() for i in items], configs, repeats,
                  concurrency, per_config, baselines=baselines, side_pairs=side_pairs,
                  resolved=resolved, **settings)
    if result.budget_usd is not None and result.cost_usd is None:
        unpriced = [row["label"] for row in per_config if row.get("cost_usd") is None]
        raise ConfigError(f"budget_usd needs a price for every model, and {unpriced[0]!r} "
                          "has a model with none (its spend could not be counted): set "
                          "PARLEY_PRICES, [prices] in secrets.toml or the endpoint's "
                          "price_input/price_output", "input")
    if result.runs > MAX_RUNS:
        raise ConfigError(f"this experiment plans {result.runs} runs; the limit is {MAX_RUNS} "
                          "(use fewer questions, configurations or repeats)", "limit")
    if result.needs_confirmation and not confirmed:
        raise ConfigError(f"this experiment plans {result.calls:,} model calls; more than "
                          f"{MAX_CALLS:,} must be confirmed (experiment run --yes, or the "
                          "confirm box on the Experiments page)", "limit")
    return result


def _with_arms(configs: list[dict[str, Any]], baseline: str, spec: Mapping[str, Any],
               store: Store | None, sides: str, questions: int
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The configurations with the arms `baseline` asks for beside them, and the pairings."""
    baselines: list[dict[str, Any]] = []
    for arm in (k for k in KINDS if k in baseline):
        if arm == PLACEBO and questions < 2:
            raise ConfigError("baseline: placebo needs two or more questions (each placebo "
                              "run reads its peers' messages on another question)", "input")
        configs, pairs = token_baselines(configs, store, spec.get("token_baselines")) \
            if arm == EQUAL_TOKENS else _beside(configs, _arm(arm, swap=sides != "both"))
        baselines += pairs
    return configs, baselines


def _reference(value: Any) -> str | None:
    """The spec's `reference`: the name of published figures to overlay (text), or None."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > 100:
        raise ConfigError(f"reference must be the name of published figures, got {value!r}",
                          "input")
    return value.strip().lower() or None


def with_policy(configs: list[dict[str, Any]], spec: Mapping[str, Any]
                ) -> list[dict[str, Any]]:
    """The spec's call policy (`engine.llm.policy.SPEC_FIELDS`) on every configuration that
    sets none of its own; each is checked with its configuration."""
    given = {key: spec[key] for key in SPEC_FIELDS if spec.get(key) is not None}
    return [{**given, **config} for config in configs]


def baseline_kind(value: Any) -> str | None:
    """The spec's `baseline` value: `equal-compute`, `equal-tokens`, both (a list, or the two
    joined by a comma; kept as "equal-compute, equal-tokens"), or None when absent (`none`)."""
    given = value if isinstance(value, list | tuple) else \
        value.split(",") if isinstance(value, str) else [value]
    kinds = set()
    for item in given:
        text = item.strip().lower() if isinstance(item, str) else item
        if text in (None, "", "none"):
            continue
        if text not in KINDS:
            raise ConfigError(f"baseline must be {EQUAL_COMPUTE!r}, {EQUAL_TOKENS!r}, "
                              f"{CONSULTANCY!r}, {PLACEBO!r}, a list of them or none, got "
                              f"{value!r}", "input")
        kinds.add(text)
    return ", ".join(k for k in KINDS if k in kinds) or None


KINDS = (EQUAL_COMPUTE, EQUAL_TOKENS, CONSULTANCY, PLACEBO)
# The settings a spec may give and a `Plan` keeps (its `spec` stores those not at their
# default), each with the function that reads and checks it.
SETTINGS: dict[str, Callable[[Any], Any]] = {
    "baseline": baseline_kind, "order": arrangement.order_kind,
    "sides": arrangement.sides_kind, "seed": arrangement.spec_seed, "budget_usd": budget_of,
    "reference": _reference}


def settings_of(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A spec's `SETTINGS`, each read and checked (absent: its default)."""
    return {key: read(spec.get(key)) for key, read in SETTINGS.items()}


Paired = tuple[dict[str, Any], list[dict[str, Any]]]  # a pairing, the configurations it adds


def _beside(configs: Sequence[Mapping[str, Any]], make: Callable[[dict[str, Any]],
            Paired | None]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The configurations with what `make` adds beside each one (not beside a sides-swapped
    twin: it shares its original's) right after it, and the pairings. What is already among
    the configurations (a stored spec planned again) is paired, not added twice."""
    labels = {str(c["label"]) for c in configs}
    swapped = arrangement.twins(configs)
    out: list[dict[str, Any]] = []
    pairs: list[dict[str, Any]] = []
    for config in configs:
        out.append(dict(config))
        if config["label"] in swapped:
            continue
        try:
            made = make(dict(config))
        except ConfigError as exc:
            raise ConfigError(f"configuration {config['label']!r}: {exc}", exc.code) from None
        if made is None:
            continue
        pair, added = made
        pairs.append(pair)
        if pair["label"] not in labels:
            labels.update(str(c["label"]) for c in added)
            out += added
    return out, pairs


def _arm(arm: str, swap: bool = True) -> Callable[[dict[str, Any]], Paired | None]:
    """What `_beside` adds for baseline `arm` (`engine.protocols.baselines`): for
    equal-compute, a vote of as many samples as the configuration makes calls, on the same
    models; for consultancy, a debate's consultancy baseline and, with `swap` (the spec does
    not say `sides: both`, which would add it), its sides-swapped twin, so the judge reads
    each side alone in turn; for placebo, the arm of a protocol that shows agents each
    other's messages."""
    from engine.protocols.baselines import consultancy, equal_compute, placebo

    def make(config: dict[str, Any]) -> Paired | None:
        if arm == EQUAL_COMPUTE:
            baseline = equal_compute(config)
            return None if baseline is None else (baseline.as_dict(), [baseline.config])
        pair = (consultancy if arm == CONSULTANCY else placebo)(config)
        if pair is None:
            return None
        added = [pair.pop("config")]
        return pair, arrangement.with_swapped(added)[0] if swap and arm == CONSULTANCY \
            else added
    return make


def _costs(configs: Sequence[Mapping[str, Any]], runs: int, check: bool = False,
           endpoints: EndpointRegistry | None = None,
           baselines: Sequence[Mapping[str, Any]] | None = None,
           store: Store | None = None) -> tuple[list[dict[str, Any]], tuple[Resolved, ...]]:
    """Per configuration: its `runs`, calls per run (`Resolved.estimate`, what it makes when
    nothing fails), calls and tokens in all, and the estimated cost in US dollars
    (`budget.estimated_cost`: measured in `store` where it can be; None when unpriced); and
    the configurations resolved, once each. `check` also validates prompt overrides and
    resolves every seat's model (under `endpoints`), for a spec that was never run. Given
    `baselines` (the plan has them), each row also has a `note`: on a baseline, what it
    matches and, when the vote's limits bind, that it is not equal compute."""
    notes = {b["label"]: b["note"] for b in baselines or ()}
    from engine.protocols import check_config, resolve_config
    out, resolved = [], []
    for config in configs:
        try:
            one = check_config(config, endpoints) if check else resolve_config(dict(config))
        except ConfigError as exc:
            raise ConfigError(f"configuration {config['label']!r}: {exc}", exc.code) from None
        cost = one.estimate()
        try:
            dollars = estimated_cost(one, runs, cost["calls"], store, endpoints)
        except ConfigError:  # a stored spec whose model no longer resolves: unknown
            dollars = None
        resolved.append(one)
        out.append({"label": config["label"], "protocol": config["protocol"], "runs": runs,
                    "calls_per_run": cost["calls"], "calls": runs * cost["calls"],
                    "tokens": runs * cost["tokens"], "cost_usd": dollars,
                    **({"note": notes.get(config["label"], "")} if baselines is not None
                       else {})})
    return out, tuple(resolved)


def plan_of(spec: Mapping[str, Any]) -> Plan:
    """A stored spec back as a `Plan` (its configs were checked when it was created; its
    baselines are among them, and are paired again here)."""
    settings, baselines = settings_of(spec), baselines_of(spec)
    pairs = arrangement.with_swapped(spec["configs"])[1] if settings["sides"] == "both" else []
    per_config, resolved = _costs(spec["configs"], len(spec["questions"]) * spec["repeats"],
                                  baselines=baselines if settings["baseline"] else None)
    return Plan(spec["name"], spec["source"], spec["questions"], spec["configs"],
                spec["repeats"], spec["concurrency"], per_config, baselines=baselines,
                side_pairs=pairs, resolved=resolved, **settings)


def baselines_of(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A stored spec's pairings of configuration and baseline: the equal-compute ones paired
    again (`with_baselines`), the equal-tokens ones as they were planned (their sample counts
    came from what the store held then); empty when the experiment has none."""
    arms = baseline_kind(spec.get("baseline"))
    if not arms:
        return []
    pairs = [pair for arm in (EQUAL_COMPUTE, CONSULTANCY, PLACEBO) if arm in arms
             for pair in _beside(spec["configs"], _arm(arm))[1]]
    return pairs + [dict(b) for b in spec.get("token_baselines") or ()
                    if isinstance(b, Mapping)]


def _measured(store: Store | None, per_call: bool, **filters: Any) -> tuple[float | None, int]:
    """Mean tokens of the newest `MEASURED` completed runs matching `filters` that made a
    call: per run, or per call (`per_call`); and how many runs that is ((None, 0): none)."""
    if store is None:
        return None, 0
    runs = store.runs(status="completed", limit=MEASURED, with_config=False, **filters)
    runs = runs[runs["calls"] > 0]
    if runs.empty:
        return None, 0
    tokens = runs["tokens_in"] + runs["tokens_out"]
    mean = tokens.sum() / runs["calls"].sum() if per_call else tokens.mean()
    return float(mean), len(runs)


def token_baselines(configs: Sequence[Mapping[str, Any]], store: Store | None,
                    planned: Any = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The configurations with each one's equal-tokens baseline after it
    (`engine.protocols.baselines.equal_tokens`, measured in `store`), and the pairings
    (`_beside`).

    `planned`: the pairings a stored spec already holds (`token_baselines`): those are kept as
    they are, so planning a stored experiment again never changes its cells.
    """
    from engine.config import RunConfig
    from engine.protocols import resolve_config
    from engine.protocols.baselines import SAMPLER, equal_tokens
    kept = {str(b.get("of")): dict(b) for b in planned or () if isinstance(b, Mapping)}
    arms = {str(b.get("label")) for b in kept.values()}  # the baselines' own labels

    def make(config: dict[str, Any]) -> Paired | None:
        label = str(config["label"])
        if config.get("protocol") == SAMPLER or label in arms:
            return None
        pair = kept.get(label)
        if pair is None:
            typed = RunConfig.parse(config)
            model = next(s.model for slot in resolve_config(typed).config.seats.values()
                         for s in slot)
            # the configuration's tokens per run, and one vote sample's per call
            tokens, runs = _measured(store, False, label=label, protocol=typed.protocol)
            per_sample, sample_runs = _measured(store, True, protocol=SAMPLER, model=model)
            baseline = equal_tokens(typed, tokens=tokens, runs=runs, per_sample=per_sample,
                                    sample_runs=sample_runs)
            if baseline is None:
                return None
            pair = baseline.as_dict()
        arms.add(str(pair["label"]))
        return pair, [dict(pair["config"])]
    return _beside(configs, make)


def override_model(spec: Mapping[str, Any], model: str | None, base_url: str | None = None,
                   store: Store | None = None) -> dict[str, Any]:
    """A copy of an experiment spec with every seat of every configuration on `model`: each
    slot's seats (agents, judges, reviewers, synthesisers alike) and the configuration's
    default model, so the slots a configuration leaves to their defaults take it too. Seats
    keep their names, personas, roles and temperatures; `model` None keeps every model.

    `base_url`, when given, becomes every configuration's base URL (used by `openai:` seats,
    as `run --base-url` is); with a new `model`, a base URL the spec carried is dropped, since
    it belonged to the models replaced. Configurations the spec names by label are read from
    `store` and written inline. This is how a paper preset runs on a model of one's own.
    """
    from engine.config import RunConfig
    if model is not None:
        model = require_text(model, "the model")
    configs = []
    for config in resolve_configs(spec.get("configs"), store):
        changed = dict(config)
        if model is not None:
            typed = RunConfig.parse(config)
            changed.pop("base_url", None)
            changed.update(model=model, seats={
                slot: [{**seat.model_dump(exclude_defaults=True), "model": model}
                       for seat in given] for slot, given in typed.seats.items()})
        if base_url:
            changed["base_url"] = base_url
        configs.append(changed)
    return {**spec, "configs": configs}


def endpoint_notes(checked: Plan, endpoints: EndpointRegistry | None = None) -> list[str]:
    """Preflight notes: each registered endpoint a seat is called through (as a run routes
    it, `engine.reports.timing.endpoint_of`) whose `concurrency` is below the runs the plan
    keeps in flight (its calls then queue behind one another, and a per-call timeout counts
    the queue too)."""
    from engine.reports.timing import endpoint_of, seat_models
    seen: dict[str, int] = {}
    for model in seat_models(checked.resolved or checked.configs):
        found = endpoint_of(model, endpoints)
        if found is not None and found.concurrency is not None:
            seen[found.name] = found.concurrency
    return [f"endpoint {name} serves {limit} call(s) at a time and this experiment runs "
            f"{checked.concurrency} runs at once: calls queue for it (set concurrency to "
            f"{limit} or raise the endpoint's)" for name, limit in seen.items()
            if limit < checked.concurrency]


def time_preflight(checked: Plan, store: Store | None = None,
                   endpoints: EndpointRegistry | None = None) -> dict[str, Any]:
    """How long the plan takes, from each seat model's measured latency in `store` (a
    simulated seat's declared one), or that a model has no measurement yet
    (`engine.reports.timing.time_estimate`): `{"seconds", "text", "notes"}`, the notes
    being every endpoint that serves fewer calls at once than the plan asks of it."""
    from engine.reports.timing import time_estimate
    timed = time_estimate(checked.resolved or checked.configs,
                          runs=len(checked.questions) * checked.repeats,
                          runs_at_once=checked.concurrency, store=store, endpoints=endpoints)
    return {**timed, "notes": [*endpoint_notes(checked, endpoints), *timed["notes"]]}
