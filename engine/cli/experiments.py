"""The `experiment run | resume | show | list | stop` commands and their terminal output."""
from __future__ import annotations

import asyncio
import gc
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from engine.access import cli_user
from engine.cli.commands import entry
from engine.cli.runflags import (
    endpoints_from_args,
    policy_from_args,
    progress_line,
    store_from_args,
)
from engine.cli.workers import ending, run_on_pool
from engine.errors import UNEXPLAINED
from engine.experiments.headline import headline
from engine.experiments.planning import (
    EQUAL_COMPUTE,
    EQUAL_TOKENS,
    PLACEBO,
    baseline_kind,
    create,
    override_model,
    plan,
    questions_of,
    time_preflight,
)
from engine.experiments.runner import arun_experiment, pending_cells
from engine.llm.policy import CallPolicy
from engine.llm.transport import releasing
from engine.models import ConfigError, Turn
from engine.reports.blind import blind_notes, config_worlds
from engine.reports.experiments import compare, report, to_csv
from engine.store.experiments import Progress, list_experiments, set_unchanged
from engine.store.workers import require_postgres
from engine.text import say, terminal_safe
from engine.views.aggregate import SIMULATED_SUFFIX
from engine.yamlfile import load_mapping

if TYPE_CHECKING:
    from engine.llm.endpoints import EndpointRegistry
    from engine.store import Store


def first_questions(spec: dict[str, Any], limit: int, base_dir: Path) -> dict[str, Any]:
    """The spec with only its first `limit` questions (`--limit`: try a preset on a few
    questions before paying for all of them), written inline. Its source stays the set's,
    so the published numbers for that set are still shown beside it; its name says "first N"."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"--limit must be a whole number of at least 1, got {limit!r}",
                          "input")
    given, path = spec.get("questions"), spec.get("questions_file")
    if isinstance(given, list) and path is None:
        return {**spec, "questions": given[:limit]}
    if not isinstance(given, str) and (given is None) == (path is None):
        return spec  # neither or both, or not a set's name nor a list: `plan` says so
    items, source = questions_of(spec, base_dir)
    rest = {key: value for key, value in spec.items() if key != "questions_file"}
    name = str(spec.get("name") or "").strip() or source.split(":")[-1]
    return {**rest, "questions": [item.as_dict() for item in items[:limit]], "source": source,
            "name": f"{name} (first {min(limit, len(items))} questions)"}


class _Bar:
    """Progress on standard error: one line rewritten in place on a terminal, else a line
    per tenth of the way (so logs stay short). The line counts the turns by final status
    (ok, degraded by kind) and their retries; each degraded turn also gets a line of its
    own (`runflags.progress_line`)."""

    def __init__(self, stream: Any, quiet: bool = False):
        self.stream, self.quiet = stream, quiet
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.last_tenth = -1
        self.width = 0
        self.ok, self.retries = 0, 0
        self.degraded: dict[str, int] = {}

    def turn(self, turn: Turn) -> None:
        """Count one finished turn; a degraded one is shown as it ends."""
        self.retries += max(0, turn.attempts - 1)
        if turn.ok:
            self.ok += 1
            return
        failure = turn.failure or UNEXPLAINED
        self.degraded[failure] = self.degraded.get(failure, 0) + 1
        if not self.quiet:
            self.stream.write(("\n" if self.tty and self.width else "") +
                              terminal_safe(progress_line(turn)) +
                              "\n")
            self.width = 0

    def turns_text(self) -> str:
        kinds = ", ".join(f"{n} {failure}" for failure, n in sorted(self.degraded.items()))
        return (f"turns {self.ok} ok, {sum(self.degraded.values())} degraded"
                + (f" ({kinds})" if kinds else "") + f", {self.retries} retries")

    def __call__(self, state: Progress) -> None:
        if self.quiet:
            return
        text = f"{state.line()}; {self.turns_text()}"
        if self.tty:
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
        else:
            tenth = int(state.fraction * 10)
            if tenth == self.last_tenth:
                return
            self.last_tenth = tenth
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the progress with the turns' final tally on a line of its own."""
        if self.quiet:
            return
        self.stream.write(("\n" if self.tty and self.width else "") + self.turns_text() + "\n")
        self.stream.flush()


def _run_cli(store: Store, experiment_id: str, quiet: bool, endpoints: EndpointRegistry) -> int:
    import signal
    import sys
    stop_event = threading.Event()
    bar = _Bar(sys.stderr, quiet)

    async def go() -> Progress:
        loop = asyncio.get_running_loop()
        try:  # Ctrl-C stops cleanly: runs in flight end `interrupted`, a resume redoes them
            loop.add_signal_handler(signal.SIGINT, stop_event.set)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
        return await arun_experiment(store, experiment_id, stop_event=stop_event,
                                     on_progress=bar, on_turn=bar.turn,
                                     endpoints=endpoints, started_by=cli_user())

    if entry():  # what planning loaded (the model's client library) lives as long, too
        gc.freeze()
    try:
        state = asyncio.run(releasing(go()))
    finally:
        bar.close()
    say(headline(report(store, experiment_id, "both")).text())  # the results table
    return ending(experiment_id, state)


def spec_from_args(args: Any) -> dict[str, Any]:
    """The spec file with the flags that override it: repeats, concurrency, the call
    policy (on every configuration too), the baselines and the budget."""
    spec = load_mapping(args.spec, expected="questions, configs, repeats, concurrency")
    for key in ("repeats", "concurrency"):
        if getattr(args, key) is not None:
            spec[key] = getattr(args, key)
    for key, value in policy_from_args(args).items():  # the flags win over the spec's
        spec[key] = value
        for config in spec.get("configs") or []:
            if isinstance(config, dict):
                config[key] = value
    placebo = bool(getattr(args, "placebo", False))
    if args.equal_compute or args.equal_tokens or placebo:
        given = baseline_kind(spec.get("baseline")) or ""
        spec["baseline"] = baseline_kind([*given.split(","),
                                          *[EQUAL_COMPUTE] * args.equal_compute,
                                          *[EQUAL_TOKENS] * args.equal_tokens,
                                          *[PLACEBO] * placebo])
    if args.budget_usd is not None:
        spec["budget_usd"] = args.budget_usd
    return spec


def cmd_run(args: Any) -> int:
    """`experiment run SPEC.yaml`: plan, print the preflight, store and run. `--model` and
    `--base-url` put every seat on one model (`override_model`); the base URL is registered
    for this process as `run --base-url` registers it, so only it receives the key."""
    spec = spec_from_args(args)
    store = store_from_args(args)
    if args.workers:
        require_postgres(store)  # before anything is stored
    if args.limit is not None:
        spec = first_questions(spec, args.limit, Path(args.spec).parent)
    if args.model or args.base_url:
        spec = override_model(spec, args.model, args.base_url, store)
    endpoints = endpoints_from_args(args)
    checked = plan(spec, store, base_dir=Path(args.spec).parent, endpoints=endpoints,
                   confirmed=args.yes or args.dry_run)
    say(f"{checked.name}: {len(checked.questions)} questions x {len(checked.configs)} "
         f"configurations x {checked.repeats} repeats = {checked.runs} runs, "
         f"{checked.calls} calls, ~{checked.tokens:,} tokens (estimate); "
         f"{checked.concurrency} at a time")
    say(f"  cost: {cost_text(checked.cost_usd)} (estimate)"
        + (f"; budget ${checked.budget_usd:,.4f}" if checked.budget_usd is not None else ""))
    for item in checked.per_config:
        note = f" - {item['note']}" if item.get("note") else ""
        say(f"  {item['label']} ({item['protocol']}): {item['calls_per_run']} calls per "
            f"run, {cost_text(item.get('cost_usd'))}{note}")
    if args.model or args.base_url:
        say(f"  every seat of every configuration: {args.model or 'its own model'}"
            + (f" at {args.base_url}" if args.base_url else "") + " (--model/--base-url)")
    for note in checked.preflight()["notes"]:  # the simulator's blind spots, a low budget
        say(f"note: {note}")
    timed = time_preflight(checked, store, endpoints)
    say(f"  time: {timed['text']}")
    for line in timed["notes"]:
        say(f"note: {line}")
    if args.dry_run:
        return 0
    experiment_id = create(store, checked)
    say(f"experiment {experiment_id}")
    if args.workers:
        return run_on_pool(store, experiment_id, args.wait, args.quiet)
    return _run_cli(store, experiment_id, args.quiet, endpoints)


def cost_text(value: float | None) -> str:
    """Dollars for a terminal; "unknown (unpriced model)" when not known."""
    return "unknown (a model has no price)" if value is None else f"${value:,.4f}"


def cmd_resume(args: Any) -> int:
    from engine.experiments.budget import set_budget
    store = store_from_args(args)
    set_unchanged(store, args.experiment_id)  # before a new budget or the pool hears of it
    if args.budget_usd is not None:
        set_budget(store, args.experiment_id, args.budget_usd)
        say(f"experiment {args.experiment_id}: budget ${args.budget_usd:,.4f}")
    left = pending_cells(store, args.experiment_id)
    say(f"experiment {args.experiment_id}: {len(left)} run(s) left")
    if args.workers:
        require_postgres(store)
        return run_on_pool(store, args.experiment_id, args.wait, args.quiet)
    return _run_cli(store, args.experiment_id, args.quiet, endpoints_from_args(args))


def _simulated_notes(configs: list[dict[str, Any]]) -> None:
    """What the simulated numbers of an experiment show: each configuration's world, and the
    configurations the simulator cannot tell apart."""
    for world in config_worlds(configs):
        say(f"simulated world of {world}")
    for note in blind_notes(configs):
        say(f"note: {note}")


def _hijack(store: Store, experiment_id: str) -> str:
    """A planted adversary's hijack rate by seat position, beside its placebo persona ("" when
    no configuration plants one)."""
    from engine.reports import hijack
    table = hijack.for_experiment(store, experiment_id)
    return "" if table.empty else "\n".join([hijack.ABOUT, *(f"  {line}" for line in
                                                            hijack.lines(table))])


def cmd_show(args: Any) -> int:
    store = store_from_args(args)
    result = report(store, args.experiment_id, "both")  # simulated and real kept apart
    state, experiment = result.progress, result.experiment
    simulated = result.runs["simulated"] if not result.runs.empty else pd.Series(dtype=bool)
    say(f"experiment {experiment['id']}: {experiment['name']} - {state.status}, "
         f"{state.done}/{state.total} runs" + (f", {state.failed} failed" if state.failed
                                                else "")
         + (" (simulated)" if len(simulated) and simulated.all() else
            " (simulated and real runs, kept apart)" if simulated.any() else "")
         + (f"; started by {experiment['started_by']}" if experiment.get("started_by")
            else ""))
    say(f"question set {experiment['spec'].get('source', '')}, version "
        f"{experiment.get('set_version') or 'unknown'}")
    if state.error:
        say(f"note: {state.error}")
    if simulated.any():
        _simulated_notes(experiment["spec"]["configs"])
    for config in experiment["spec"]["configs"]:  # the call policy its runs and resume use
        policy = CallPolicy.read(config).given()
        if policy:
            say(f"call policy of {config['label']}: "
                + ", ".join(f"{k} {v:g}" for k, v in policy.items()))
    if args.compare:
        a, b = (label if label in result.labels or label + SIMULATED_SUFFIX not in
                result.labels else label + SIMULATED_SUFFIX for label in args.compare)
        for label in (a, b):
            if label not in result.labels:
                raise ConfigError(f"no configuration {label!r} in this experiment; it has "
                                  f"{', '.join(result.labels)}", "input")
        say(compare(result.runs, a, b)["sentence"])
    else:
        from engine.reports import human
        from engine.reports.controls import controls_text
        from engine.reports.positions import positions, positions_text
        from engine.reports.references import published, published_note
        from engine.reports.rounds import rounds_text
        spec = result.experiment["spec"]
        theirs = published_note(published(spec))  # beside the accuracy, as the page's diamonds
        sections = [headline(result).text(), theirs[:1].upper() + theirs[1:],
                    rounds_text(result.runs, spec),
                    controls_text(store, args.experiment_id),  # headroom, dropped seats
                    _hijack(store, args.experiment_id),
                    human.majority_text(result.runs, store.preferences(), spec["questions"],
                                        result.labels)]
        if spec.get("order") == "shuffled" or spec.get("sides") == "both":
            sections.append(positions_text(positions(store, args.experiment_id, result.runs,
                                                     spec)))
        for section in sections:
            if section:
                say(section)
    if args.csv:
        Path(args.csv).write_text(to_csv(result.runs, experiment.get("set_version") or ""),
                                  encoding="utf-8")
        say(f"wrote {len(result.runs)} runs to {args.csv}")
    return 0


def cmd_list(args: Any) -> int:
    frame = list_experiments(store_from_args(args))
    if frame.empty:
        say("no experiments yet; start one with python -m engine experiment run SPEC.yaml")
        return 0
    frame["created"] = frame["created"].astype(str).str.slice(0, 19)
    say(frame.to_string(index=False))
    return 0
