"""`python -m engine fork RUN_ID --round K [--drop AGENT] [--edit INDEX=TEXT]`: fork a stored
run at round k (`engine.services.fork`) and print the new run beside its parent."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from engine.cli.commands import command
from engine.cli.runflags import endpoints_from_args, progress_line, store_from_args
from engine.text import say


def cmd_fork(args: argparse.Namespace) -> int:
    """Fork `args.run_id` at `args.round`; print the new run's id, its answer and the
    parent's, and the command that compares them."""
    from engine.access import cli_user
    from engine.protocols import get_protocol
    from engine.services.fork import fork
    store = store_from_args(args)
    result = fork(store, args.run_id, args.round, args.drop, args.edit,  # INDEX=TEXT each
                  warn=lambda text: say(f"warning: {text}", file=sys.stderr),
                  endpoints=endpoints_from_args(args), started_by=cli_user(),
                  on_event=lambda turn: say(progress_line(turn), file=sys.stderr))
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


def add_cli(sub: Any) -> None:
    """Add `fork` to the CLI's sub-commands."""
    fork = command(sub, "fork", "fork a stored run at round K: keep the turns before it, drop "
                   "an agent or edit a turn, run the rest", cmd_fork)
    fork.add_argument("run_id")
    fork.add_argument("--round", type=int, required=True, metavar="K",
                      help="the first round run again (the turns before it are kept)")
    fork.add_argument("--drop", metavar="AGENT", help="an agent to leave out of the fork")
    fork.add_argument("--edit", action="append", default=[], metavar="INDEX=TEXT",
                      help="replace kept turn INDEX's reply with TEXT; repeatable")
