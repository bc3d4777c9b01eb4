"""`python -m engine rejudge EXPERIMENT --answers-only`: every judged run of an experiment
judged again from the agents' final positions alone (DESIGN 2.13,
`engine.experiments.rejudge`), then the judge's accuracy both ways beside the consultancy
baseline's."""
from __future__ import annotations

import argparse
from typing import Any

from engine.access import cli_user
from engine.cli.commands import command
from engine.cli.runflags import endpoints_from_args, store_from_args
from engine.models import ConfigError
from engine.text import say


def cmd_rejudge(args: argparse.Namespace) -> int:
    """Re-judge the experiment's judged runs from their final answers; print what was done
    and the comparison (per kind of run, never pooled)."""
    if not args.answers_only:
        raise ConfigError("rejudge needs --answers-only (the only re-judge there is: the "
                          "judge reads the agents' final answers alone)", "input")
    # loaded when the command runs, not whenever the CLI starts (as `gate` does)
    from engine.experiments.rejudge import rejudge
    from engine.reports.controls import answers_only, answers_only_text
    store = store_from_args(args)
    done = rejudge(store, args.experiment_id, endpoints=endpoints_from_args(args),
                   started_by=cli_user(), concurrency=args.concurrency)
    say(f"experiment {args.experiment_id}: {done.made} run(s) judged again from their final "
        f"answers alone ({done.failed} failed), {done.already} judged before, "
        f"{done.unjudged} with no judge reading a transcript")
    for kind in ("real", "simulated"):
        text = answers_only_text(answers_only(store, args.experiment_id, kind))
        if text:
            say(text)
    return 1 if done.failed and done.failed == done.made else 0


def add_cli(sub: Any) -> None:
    """Add `rejudge` to the CLI's sub-commands."""
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
