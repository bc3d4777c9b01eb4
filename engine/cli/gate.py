"""`python -m engine gate` (does a candidate experiment regress against its approved
baseline?) and `python -m engine experiment approve` (make one the approved baseline of its
name)."""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from engine.access import cli_user
from engine.cli.commands import command
from engine.cli.runflags import store_from_args
from engine.models import ConfigError
from engine.text import say

APP_URL_ENV = "PARLEY_APP_URL"  # where the app is served: the Markdown's run links start so


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


def add_cli(sub: Any) -> None:
    """Add `gate` to the CLI's sub-commands."""
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
