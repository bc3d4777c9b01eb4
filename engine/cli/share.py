"""`python -m engine share`: one static HTML file (charts included, no server needed) of a run
or of an experiment's results, for a colleague without Parley."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from engine.cli.commands import command
from engine.cli.runflags import store_from_args


def cmd_share(args: argparse.Namespace) -> int:
    """Write the HTML of `args.id` (a run, or with --experiment an experiment) to --out."""
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


def add_cli(sub: Any) -> None:
    """Add `share` to the CLI's sub-commands."""
    share = command(sub, "share", "write a run or an experiment's results as one static HTML "
                    "file", cmd_share)
    share.add_argument("id", help="a run id (or, with --experiment, an experiment id)")
    share.add_argument("--experiment", action="store_true", help="ID is an experiment")
    share.add_argument("--runs", choices=("real", "simulated", "both"),
                       help="an experiment's runs to show (default: real when there are any)")
    share.add_argument("--out", "-o", help="the file to write (default parley-run-ID.html)")
