"""The sub-commands of experiments and the pool, as argparse parsers: light to import, so
that `python -m engine --help` never loads what a command runs. Each command's handler is
named "module:function" and imported when it is called (`engine.cli.main.main`), with the
collector still off, as the rest of start-up."""
from __future__ import annotations

import gc
from typing import Any

from engine.cli.runflags import add_policy_flags


def entry() -> bool:
    """Whether this is a `python -m engine` process (`engine.__main__` started it with the
    cyclic garbage collector off, and `started` froze what start-up made), rather than the
    CLI called from code (tests), whose collector is left as it is."""
    return gc.get_freeze_count() > 0 or not gc.isenabled()


def started() -> None:
    """The end of a CLI process's start-up. Imports make only what lives as long as the
    process (modules, classes, pydantic and SQLAlchemy schemas), yet the collector scanned it
    all again and again while it grew (an eighth of `experiment run`'s CPU went to it): once
    start-up is over, what exists is frozen out of its scans (`gc.freeze`) and it runs again
    for what the command makes. Does nothing outside a `python -m engine` process."""
    if entry():
        gc.freeze()
        gc.enable()


DB_HELP = "database URL (default PARLEY_DB_URL or data/parley.db)"


def command(sub: Any, name: str, help: str, handler: Any, db: str | None = DB_HELP) -> Any:
    """A sub-command's parser: its `--db` (unless `db` is None) and its handler set (a function,
    or "module:function" for one imported when the command runs)."""
    parser = sub.add_parser(name, help=help)
    if db is not None:
        parser.add_argument("--db", help=db)
    parser.set_defaults(handler=handler)
    return parser


def add_experiments(sub: Any) -> None:
    """Add `experiment run | resume | show | list | stop | approve` to the CLI's
    sub-commands."""
    parser = sub.add_parser("experiment", help="question set x configurations x repeats")
    inner = parser.add_subparsers(dest="experiment_command", required=True,
                                  parser_class=type(parser))
    run = command(inner, "run", "plan, store and run an experiment from a YAML spec",
                  "engine.cli.experiments:cmd_run")
    run.add_argument("spec", help="YAML: questions (set name or list) or questions_file, "
                                  "configs (mappings or saved labels), repeats, concurrency")
    run.add_argument("--repeats", type=int, help="override the spec's repeats")
    run.add_argument("--concurrency", type=int, help="override the spec's concurrency")
    add_policy_flags(run)
    run.add_argument("--equal-compute", action="store_true",
                     help="beside each configuration, add a vote with as many samples as it "
                          "makes calls (the spec's baseline: equal-compute)")
    run.add_argument("--equal-tokens", action="store_true",
                     help="beside each configuration, add a vote whose tokens per run come "
                          "closest to its measured mean (the spec's baseline: equal-tokens)")
    run.add_argument("--placebo", action="store_true",
                     help="beside each configuration whose agents read each other, add its "
                          "placebo arm: each agent reads the others' messages on another "
                          "question (the spec's baseline: placebo)")
    run.add_argument("--model", help="model spec for every seat of every configuration, "
                                     "judges too (e.g. openai:MODEL): a preset on your model")
    run.add_argument("--limit", type=int, metavar="N",
                     help="only the first N questions (try a spec cheaply first)")
    run.add_argument("--dry-run", action="store_true", help="print the preflight only")
    run.add_argument("--yes", action="store_true",
                     help="confirm an experiment that plans more than 20,000 model calls")
    resume = command(inner, "resume", "run the cells of an experiment not yet done",
                     "engine.cli.experiments:cmd_resume")
    resume.add_argument("experiment_id")
    for starting in (run, resume):
        starting.add_argument("--workers", action="store_true",
                              help="queue the cells for the pool of workers (PostgreSQL "
                                   "store; start workers with python -m engine worker) and "
                                   "return")
        starting.add_argument("--wait", action="store_true",
                              help="with --workers: follow the progress until the experiment "
                                   "ends")
        starting.add_argument("--quiet", action="store_true", help="no progress line")
        starting.add_argument("--budget-usd", type=float, metavar="DOLLARS",
                              help="stop starting cells once the experiment has spent this "
                                   "many US dollars (the spec's budget_usd; on resume, a new "
                                   "budget for the rest)")
        starting.add_argument("--base-url", help="base URL of an OpenAI-compatible server for "
                              "openai: seats (typed here, it counts as registered: "
                              "OPENAI_API_KEY goes to it)")
    show = command(inner, "show", "an experiment's results table",
                   "engine.cli.experiments:cmd_show")
    show.add_argument("experiment_id")
    show.add_argument("--compare", nargs=2, metavar=("A", "B"),
                      help="paired comparison of two configuration labels")
    show.add_argument("--csv", help="also write one line per run to this CSV file")
    command(inner, "list", "list experiments", "engine.cli.experiments:cmd_list")
    command(inner, "stop", "stop an experiment the pool of workers runs",
            "engine.cli.workers:cmd_stop").add_argument("experiment_id")
    command(inner, "approve", "make an experiment the approved baseline of its name (the "
            "gate compares with it)", "engine.cli.main:cmd_approve").add_argument("experiment_id")


def add_workers(sub: Any) -> None:
    """Add `worker`, `workers` and `experiment-stop` to the CLI's sub-commands."""
    pool_db = "database URL (default PARLEY_DB_URL)"
    worker = command(sub, "worker", "serve the pool of workers (PostgreSQL store)",
                     "engine.cli.workers:cmd_worker", pool_db)
    worker.add_argument("--concurrency", type=int, default=4,
                        help="cells run at once by this worker (default 4)")
    worker.add_argument("--endpoint", action="append", default=[], metavar="NAME",
                        help="serve only this endpoint's queue (repeatable; default all)")
    worker.add_argument("--heartbeat", type=float, default=10.0, metavar="SECONDS",
                        help="seconds between heartbeats; a worker silent for three is "
                             "stalled and its cells go to another (default 10)")
    worker.add_argument("--base-url", help="base URL of an OpenAI-compatible server for "
                        "openai: seats (counts as registered, as for experiment run)")
    command(sub, "workers", "the pool: workers, queues, throughput, ETA",
            "engine.cli.workers:cmd_workers", pool_db)
