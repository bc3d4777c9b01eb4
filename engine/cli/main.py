"""Parley's command line: `python -m engine run PROTOCOL "QUESTION" ...`, runs, show, export, bench.

The commands that import their work when they run are here (run, runs, show, export, import,
delete, bench, sets, share, fork, gate, rejudge, and experiment approve); experiments and the
pool add theirs from `engine.cli.commands`.

Bad input exits with status 2 and one line that says what to change.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from engine.access import cli_user
from engine.cli import commands, runflags
from engine.cli.commands import command
from engine.cli.runflags import store_from_args
from engine.errors import ParleyError
from engine.models import ConfigError, RunStopped
from engine.redaction import redact_log_records
from engine.text import csv_cell, say

APP_URL_ENV = "PARLEY_APP_URL"  # where the app is served: the gate's Markdown run links start so
_JSON_UNSAFE = re.compile("[\x7f-\x9f\ud800-\udfff\u2028\u2029]")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        sys.stderr.write(f"error: {message} (see python -m engine --help)\n")
        raise SystemExit(2)


class _Protocols(str):
    """`run`'s help for its protocol argument, made when that help is shown: the registry
    loads every protocol, which `python -m engine --help` and every other command need not."""

    def __mod__(self, _params: Any) -> str:
        from engine.protocols import REGISTRY
        return f"one of {', '.join(REGISTRY)}"


MAX_BENCH_RUNS = 10_000_000  # a dashboard fixture of more would not fit a usual disk


def run_counts(text: str) -> tuple[int, ...]:
    """`bench --sizes`: whole numbers of runs separated by commas (`10000,100000,1000000`),
    each 1..MAX_BENCH_RUNS."""
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        counts = ()
    if not counts or not all(1 <= n <= MAX_BENCH_RUNS for n in counts):
        raise argparse.ArgumentTypeError(
            f"run counts 1..{MAX_BENCH_RUNS} separated by commas, such as "
            f"10000,100000,1000000; got {text!r}")
    return counts


def build_parser() -> argparse.ArgumentParser:  # noqa: PLR0915 - one statement an argument
    parser = _Parser(prog="python -m engine", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = command(sub, "run", "run a protocol on a question and store it", cmd_run)
    run.add_argument("protocol", help=_Protocols("one of the protocols"))
    run.add_argument("question", help="the question, topic or task")
    run.add_argument("--model", default="simulated", help="model spec for every seat")
    run.add_argument("--base-url", help="base URL of an OpenAI-compatible server (typed here, "
                     "it counts as registered: OPENAI_API_KEY goes to it)")
    run.add_argument("--seat", action="append", default=[], metavar="NAME=SPEC",
                     help="model for one seat (slot or seat name); repeatable")
    run.add_argument("--rounds", type=int, help="rounds (or iterations) for the protocol")
    run.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                     help="any protocol option, e.g. converge=agreed or first=b; repeatable")
    run.add_argument("--label", help="configuration label to compare runs by")
    run.add_argument("--order-seed", type=int, metavar="N",
                     help="present the seats to one another in an order drawn from N "
                          "(default: the configured order)")
    run.add_argument("--swap-sides", action="store_true",
                     help="a debate's proponent seat argues against, its opponent for")
    run.add_argument("--tag", action="append", default=[], help="tag the run; repeatable")
    run.add_argument("--expected", help="the expected answer, to score correctness")
    run.add_argument("--config", help="a saved configuration as a JSON or YAML file")
    run.add_argument("--json", action="store_true", help="print the whole result as JSON")
    runflags.add_policy_flags(run)

    runs = command(sub, "runs", "list stored runs", cmd_runs)
    for name in ("--protocol", "--label", "--status", "--tag"):  # filters, as Store.runs's
        runs.add_argument(name)
    runs.add_argument("--limit", type=int, default=20)
    runs.add_argument("--json", action="store_true")

    show = command(sub, "show", "show one run with its turns", cmd_show)
    show.add_argument("run_id")
    show.add_argument("--json", action="store_true")

    export = command(sub, "export", "export runs: one as JSON, several as JSONL, or CSV",
                     cmd_export)
    export.add_argument("run_ids", nargs="*", help="run ids (default: all)")
    export.add_argument("--format", choices=("json", "jsonl", "csv"), default=None)
    export.add_argument("--output", "-o", help="file to write (default: standard output)")

    command(sub, "import", "import runs from a JSON or JSONL export", cmd_import
            ).add_argument("path")

    remove = command(sub, "delete", "delete runs (an unreadable or stuck one too)", cmd_delete)
    remove.add_argument("run_ids", nargs="+", metavar="ID")
    remove.add_argument("--yes", "-y", action="store_true", help="do not ask")

    bench = command(sub, "bench", "print the benchmark table", cmd_bench, db=None)
    bench.add_argument("--quick", action="store_true", help="smaller counts, for a smoke test")
    bench.add_argument("--only", action="append", default=[], help="run only rows matching")
    bench.add_argument("--base-url", help="the OpenAI-compatible server local-model rows use "
                       "(default: SmolLM2 served here)")
    bench.add_argument("--db-url", help="PostgreSQL URL for the workers rows "
                       "(default PARLEY_TEST_PG_URL; without one they are not measured)")
    bench.add_argument("--json", action="store_true", help="the rows as JSON, each with its "
                       "section, command, time and load average (what the docs render)")
    bench.add_argument("--remark", default="", help="with --json: what else the machine was "
                       "doing, kept with every row")
    bench.add_argument("--sizes", type=run_counts, metavar="N,N,...",
                       help="the dashboard rows' stored-run counts, a set of rows each "
                       "(default 10000, 1000 with --quick), e.g. 10000,100000,1000000")
    commands.add_experiments(sub)  # the heavier modules add their own sub-commands

    command(sub, "sets", "list the named question sets (source, licence, size)", cmd_sets,
            db=None).add_argument("--json", action="store_true", help="one JSON object per set")

    share = command(sub, "share", "write a run or an experiment's results as one static HTML "
                    "file", cmd_share)
    share.add_argument("id", help="a run id (or, with --experiment, an experiment id)")
    share.add_argument("--experiment", action="store_true", help="ID is an experiment")
    share.add_argument("--runs", choices=("real", "simulated", "both"),
                       help="an experiment's runs to show (default: real when there are any)")
    share.add_argument("--out", "-o", help="the file to write (default parley-run-ID.html)")

    fork = command(sub, "fork", "fork a stored run at round K: keep the turns before it, drop "
                   "an agent or edit a turn, run the rest", cmd_fork)
    fork.add_argument("run_id")
    fork.add_argument("--round", type=int, required=True, metavar="K",
                      help="the first round run again (the turns before it are kept)")
    fork.add_argument("--drop", metavar="AGENT", help="an agent to leave out of the fork")
    fork.add_argument("--edit", action="append", default=[], metavar="INDEX=TEXT",
                      help="replace kept turn INDEX's reply with TEXT; repeatable")

    commands.add_workers(sub)

    gate = command(sub, "gate", "does a candidate experiment regress against the approved "
                   "baseline of its name? (exit 0 no, 1 yes)", cmd_gate)
    gate.add_argument("candidate", help="the candidate experiment's id")
    gate.add_argument("--baseline", metavar="EXPERIMENT",
                      help="compare with this experiment (default: the approved baseline "
                           "of the candidate's name)")
    gate.add_argument("--max-drop", type=float, default=0.05, metavar="FRACTION",
                      help="the largest drop (0..1) that is not a regression, for accuracy "
                           "and each health measure (default 0.05: five points)")
    gate.add_argument("--markdown", metavar="FILE",
                      help="also write the summary as Markdown, for a pull request comment")
    gate.add_argument("--app-url", metavar="URL",
                      help=f"where the app is served, for the Markdown's links to runs "
                           f"(default {APP_URL_ENV}; none: links relative to the app)")
    gate.add_argument("--json", action="store_true", help="print the result as JSON")

    rejudge = command(sub, "rejudge", "judge an experiment's judged runs again, from the "
                      "agents' final answers alone", cmd_rejudge)
    rejudge.add_argument("experiment_id", help="the experiment's id")
    rejudge.add_argument("--answers-only", action="store_true", required=True,
                         help="the judge reads the question and the agents' final answers, "
                              "not the transcript (one call per judged run)")
    rejudge.add_argument("--concurrency", type=int, default=4,
                         help="re-judge calls in flight (default 4)")
    rejudge.add_argument("--base-url", help="base URL of an OpenAI-compatible server for "
                                            "openai: seats (typed here, it counts as "
                                            "registered)")
    return parser


def _json_text(value: Any, **kw: Any) -> str:
    """JSON for the terminal: C0 controls are escaped by JSON itself; C1 controls (a terminal
    reads U+009B as CSI) and lone surrogates (unprintable) are escaped as `\\uXXXX` too, so
    the output parses to the same data."""
    return _escape_json(json.dumps(value, ensure_ascii=False, **kw))


def _escape_json(text: str) -> str:
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def cmd_run(args: argparse.Namespace) -> int:
    from engine.protocols import arun_config, get_protocol, run_sync
    from engine.reports.runs import score_text
    from engine.store import StoreWriteError
    from engine.views.blocks import cost_text, simulated_suffix, simulated_text
    spec = get_protocol(args.protocol)
    # the policy flags on top of the configuration, so the run's row says what the run used
    config = {**runflags.config_from_args(args), **runflags.policy_from_args(args)}
    endpoints = runflags.endpoints_from_args(args)
    store = store_from_args(args)
    progress = None if args.json else lambda turn: say(runflags.progress_line(turn),
                                                         file=sys.stderr)
    try:
        result = run_sync(arun_config(config, args.question, store=store, tags=args.tag,
                                      expected=args.expected, on_event=progress,
                                      endpoints=endpoints, started_by=cli_user()))
    except StoreWriteError:
        store.flush_pending()  # one more try to store the run `failed` before exiting
        if store.pending:
            print("the run's end could not be stored either; other processes will show it "
                  "as interrupted", file=sys.stderr)
        raise
    if args.json:
        print(_json_text(result.model_dump(mode="json"), indent=2))
    else:
        row = store.runs(ids=[result.run_id]).iloc[0]
        cost = cost_text(result.cost_usd, simulated_text(row["simulated"], row["models"],
                                                          row["config"]),
                         any(t.usage_estimated for t in result.turns))
        say(f"run {result.run_id}: {spec.title}{simulated_suffix(row)}, "
            f"{len(result.turns)} calls, "
            f"{sum(t.tokens_in + t.tokens_out for t in result.turns):,} tokens, cost {cost}, "
            f"{result.duration:.2f}s")
        say(spec.summary(result))
        if result.expected is not None:  # --expected: say whether the run got it
            score = score_text({"correct": result.correct, "unanswered": result.unanswered})
            answer = result.final_answer()
            say(f"expected {result.expected}: {score or 'not scored'}"
                + (f" (answered {answer})" if answer is not None else ""))
        if result.order:
            say(runflags.order_line(result))
        for warning in result.warnings:
            say(f"warning: {warning}")
    error, _lost = spec.assess(result)
    if error:  # stored `failed` (e.g. no model call succeeded): a script must see it
        sys.stderr.write(f"error: run {result.run_id} failed: {error.splitlines()[0]}\n")
        return 1
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from engine.reports.runs import score_word, status_text
    from engine.views.blocks import cost_text, simulation_columns, simulations
    frame = store_from_args(args).runs(protocol=args.protocol, label=args.label,
                                       status=args.status, tag=args.tag, limit=args.limit)
    if args.json:
        print(simulation_columns(frame).drop(columns=["config"]).to_json(
            orient="records", date_format="iso"))
        return 0
    if frame.empty:
        print("no runs stored yet")
        return 0
    kinds = [text for text, _seats in simulations(frame)]
    view = frame.assign(
        simulated=kinds, tokens=(frame["tokens_in"] + frame["tokens_out"]).astype(int),
        cost=[cost_text(c, k) for c, k in zip(frame["cost_usd"], kinds)],
        status=[status_text(s, d) for s, d in zip(frame["status"], frame["degraded_run"])],
        score=[score_word(c, u) for c, u in zip(frame["correct"], frame["unanswered"])],
        created_at=frame["created_at"].astype(str).str.slice(0, 19),
        question=frame["question"].str.slice(0, 50))
    say(view[["id", "protocol", "simulated", "status", "score", "label", "calls", "tokens",
              "cost", "created_at", "question"]].to_string(index=False))
    for run_id, why in zip(frame["id"], frame["unreadable"]):
        if why:
            say(f"unreadable: run {run_id} ({why}); delete it with "
                f"python -m engine delete {run_id}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from engine.reports.runs import run_cost_text, score_text, status_text
    from engine.views.blocks import simulated_suffix
    store = store_from_args(args)
    try:
        run = store.exported(args.run_id)  # with `simulated_seats`
    except KeyError:
        raise ConfigError(f"no run {args.run_id!r}; list them with python -m engine runs",
                          "input") from None
    if args.json:
        print(_json_text(run, indent=2, default=str))
        return 0
    say(f"run {run['id']} - {run['protocol']}{simulated_suffix(run)} - "
        f"{status_text(run['status'], run['degraded_run'])}" +
        (f" (lost: {run['lost']})" if run["lost"] else ""))
    if run.get("unreadable"):
        say(f"unreadable: {run['unreadable']}")
    say(f"question: {run['question']}")
    say(f"calls: {run['calls']}, tokens: {run['tokens_in']:,} in / {run['tokens_out']:,} "
        f"out, cost: {run_cost_text(run, run['turns'])}")
    if run["label"]:
        say(f"label: {run['label']}")
    if score_text(run):
        say(f"expected {run['expected']}: {score_text(run)}")
    for turn in run["turns"]:
        state = "" if turn["status"] == "ok" else f"  [degraded: {turn['error']}]"
        say(f"\n--- {turn['idx']} {turn['phase']} r{turn['round']} {turn['seat']}{state}")
        say(turn["reply"])
    if run["error"]:
        say(f"\nerror: {run['error']}")
    say(f"\nmetrics: {_json_text(run['metrics'])}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from engine.views.blocks import export_columns
    store = store_from_args(args)
    ids = args.run_ids or list(store.runs()["id"])
    for run_id in ids:
        if not store.exists(run_id):
            raise ConfigError(f"no run {run_id!r}; list them with python -m engine runs",
                              "input")
    fmt = args.format or ("json" if len(ids) == 1 else "jsonl")
    if fmt == "json":
        if len(ids) != 1:
            raise ConfigError("--format json exports exactly one run; use jsonl for several",
                              "input")
        text = store.export_run(ids[0]) + "\n"
    elif fmt == "jsonl":
        text = store.export_jsonl(ids)
    else:  # cells taken from model text never run as spreadsheet formulas
        text = export_columns(store.runs(ids=ids)).map(csv_cell).to_csv(index=False)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {len(ids)} run(s) to {args.output}", file=sys.stderr)
    else:  # on a terminal: the same data, with C1 controls and lone surrogates \u-escaped
        sys.stdout.write(text if fmt == "csv" else _escape_json(text))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from engine.store.records import MAX_IMPORT_BYTES
    try:
        size = os.path.getsize(args.path)
        if size > MAX_IMPORT_BYTES:
            raise ConfigError(f"import: {args.path} is {size / 1e6:.0f} MB; the limit is "
                              f"{MAX_IMPORT_BYTES / 1e6:.0f} MB (split it)", "limit")
        data = Path(args.path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"import: cannot read {args.path}: {exc.strerror}", "input") from None
    print(store_from_args(args).import_file(data, imported_by=cli_user()).summary())
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    store = store_from_args(args)
    ids = list(dict.fromkeys(args.run_ids))
    unknown = [run_id for run_id in ids if not store.exists(run_id)]
    if unknown:
        raise ConfigError(f"no run {unknown[0]!r}; nothing was deleted (list them with "
                          "python -m engine runs)", "input")
    if not args.yes:
        try:
            answer = input(f"Delete {len(ids)} run(s) and their turns? [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing deleted")
            return 1
    print(f"deleted {store.delete(ids)} run(s)")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Print the bench table, or with --json its rows as JSON: what the docs' tables are
    rendered from (`python -m engine.bench.docs`)."""
    from engine.bench import collect, format_table, to_json
    rows = collect(args.quick, args.only, args.base_url, args.db_url, args.remark, args.sizes)
    print(to_json(rows) if args.json else format_table(rows), flush=True)
    return 0


def cmd_sets(args: argparse.Namespace) -> int:
    """Print every named question set with its source, licence and size (a table, or one
    JSON object per set with `--json`), so a spec's `questions: NAME` can be chosen knowing
    where the questions come from."""
    from engine.questions import catalogue
    infos = catalogue()
    if args.json:
        for info in infos:
            print(json.dumps({"name": info.name, "size": info.size, "source": info.source,
                              "licence": info.licence}))
        return 0
    width = max(len(info.name) for info in infos)
    for info in infos:
        print(f"{info.name:<{width}}  {info.size:>5,} questions  {info.licence}")
        print(f"{'':<{width}}  source: {info.source}")
    print("\nuse one in an experiment spec as `questions: NAME`")
    return 0


def cmd_share(args: argparse.Namespace) -> int:
    """Write one static HTML file (charts included, no server needed) of `args.id`, a run or
    with --experiment an experiment's results, to --out: for a colleague without Parley."""
    from engine.reports import share
    from engine.reports.controls import ANSWERS_ONLY_TAG
    from engine.reports.experiments import report
    from engine.reports.runs import run_detail
    store = store_from_args(args)
    what = "experiment" if args.experiment else "run"
    try:
        document = share.experiment_html(
            report(store, args.id, args.runs), preferences=store.preferences(),
            judged=store.runs(experiment_id=args.id, tag=ANSWERS_ONLY_TAG),
        ) if args.experiment else share.run_html(run_detail(store, args.id))
    except KeyError:
        sys.stderr.write(f"error: there is no {what} {args.id!r}\n")
        return 1
    out = Path(args.out or f"parley-{what}-{args.id}.html")
    out.write_text(document, encoding="utf-8")
    print(f"wrote {out} ({len(document.encode()) / 1e6:.1f} MB; opens from disk, charts "
          "included)")
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    """Fork `args.run_id` at `args.round` (`engine.services.fork`: keep the turns before it,
    drop an agent or edit a turn, run the rest); print the new run's id, its answer and the
    parent's, and where to compare them."""
    from engine.protocols import get_protocol
    from engine.services.fork import fork
    store = store_from_args(args)
    result = fork(store, args.run_id, args.round, args.drop, args.edit,  # INDEX=TEXT each
                  warn=lambda text: say(f"warning: {text}", file=sys.stderr),
                  endpoints=runflags.endpoints_from_args(args), started_by=cli_user(),
                  on_event=lambda turn: say(runflags.progress_line(turn), file=sys.stderr))
    spec = get_protocol(result.protocol)
    parent = store.get(args.run_id)
    kept = sum(1 for t in result.turns if any(w.startswith("kept from run")
                                              for w in t.warnings))
    say(f"run {result.run_id}: a fork of {args.run_id} at round {args.round} ({kept} turn(s) "
        f"kept, {len(result.turns) - kept} call(s) made)")
    say(f"fork:     {spec.outcome(result)}")
    say(f"original: {parent['metrics'].get('outcome', '') or '(no outcome)'}")
    print(f"compare them on the Compare page: /compare?compare={args.run_id},{result.run_id}")
    return 0


def cmd_rejudge(args: argparse.Namespace) -> int:
    """`rejudge EXPERIMENT --answers-only`: every judged run of the experiment judged again
    from the agents' final positions alone (`engine.experiments.rejudge`); print what was
    done, then the judge's accuracy both ways beside the consultancy baseline's, per kind of
    run, never pooled."""
    from engine.experiments.rejudge import rejudge
    from engine.reports.controls import answers_only, answers_only_text
    store = store_from_args(args)
    done = rejudge(store, args.experiment_id, endpoints=runflags.endpoints_from_args(args),
                   started_by=cli_user(), concurrency=args.concurrency)
    say(f"experiment {args.experiment_id}: {done.made} run(s) judged again from their final "
        f"answers alone ({done.failed} failed), {done.already} judged before, "
        f"{done.unjudged} with no judge reading a transcript")
    for kind in ("real", "simulated"):
        text = answers_only_text(answers_only(store, args.experiment_id, kind))
        if text:
            say(text)
    return 1 if done.failed and done.failed == done.made else 0


def cmd_approve(args: argparse.Namespace) -> int:
    """Approve the experiment as its name's baseline, approved by the CLI's user."""
    from engine.store.approvals import approve, history
    store = store_from_args(args)
    approval = approve(store, args.experiment_id, cli_user())
    say(f"experiment {args.experiment_id} is the approved baseline of "
        f"{approval['name']!r} (approved by {approval['approved_by']})")
    earlier = history(store, approval["name"]).iloc[1:]
    if not earlier.empty:
        say("earlier baselines: " + ", ".join(
            f"{row['experiment']} ({row['approved by'] or 'not recorded'}, "
            f"{str(row['approved at'])[:19]})" for _, row in earlier.iterrows()))
    return 0


def cmd_gate(args: argparse.Namespace) -> int:
    """Compare the candidate with its baseline; exit 0 on no regression, 1 on a regression
    (each named on a line), 2 on bad input (`ConfigError`, which `main` turns into 2)."""
    from engine.reports.gate import gate, markdown, summary_text
    from engine.store.approvals import baseline_of
    from engine.store.experiments import get
    store = store_from_args(args)
    candidate = get(store, args.candidate)
    baseline = args.baseline
    if baseline is None:
        approved = baseline_of(store, candidate["name"])
        if approved is None:
            raise ConfigError(f"experiment name {candidate['name']!r} has no approved "
                              "baseline: approve one (python -m engine experiment approve "
                              "EXPERIMENT) or give --baseline EXPERIMENT", "input")
        baseline = str(approved["experiment"])
    result = gate(store, args.candidate, baseline, args.max_drop)
    if args.markdown:
        Path(args.markdown).write_text(
            markdown(result, args.app_url or os.environ.get(APP_URL_ENV, "")), encoding="utf-8")
    if args.json:
        print(json.dumps(result.as_dict(), ensure_ascii=False, default=str))
    else:
        say(summary_text(result))
    if not result.passed:  # to PARLEY_NOTIFY_URL when set; a failed POST is only logged
        from engine.llm.notify import notify
        from engine.reports.gate import notice
        notify(notice(result))
    return result.exit_status


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that a run in flight is stored `interrupted`."""


def _on_sigterm(_signum: int, _frame: Any) -> None:
    raise Terminated()


def main(argv: Sequence[str] | None = None) -> int:
    redact_log_records()  # no key reaches a log line, whoever logs it
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = args.handler  # a function, or "module:function" (`commands.command`)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    try:
        if isinstance(handler, str):  # its module imported now, the collector still off
            module, _, name = handler.partition(":")
            handler = getattr(importlib.import_module(module), name)
        commands.started()
        return int(handler(args))
    except ConfigError as exc:
        sys.stderr.write(f"error: {str(exc).splitlines()[0]}\n")
        return 2
    except KeyboardInterrupt as exc:
        sys.stderr.write("terminated\n" if isinstance(exc, Terminated) else "interrupted\n")
        return 143 if isinstance(exc, Terminated) else 130
    except RunStopped as exc:
        sys.stderr.write(f"stopped: {exc}\n")
        return 1
    except ParleyError as exc:  # a store that cannot be written, an action the role may not take
        sys.stderr.write(f"error: {exc}\n")
        return 1
    finally:
        if previous is not None:  # main() called from code (tests) leaves SIGTERM as it was
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    raise SystemExit(main())
