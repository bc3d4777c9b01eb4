"""`python -m engine sets`: the named question sets with their source, licence and size, so a
spec's `questions: NAME` can be chosen knowing where the questions come from."""
from __future__ import annotations

import argparse
import json
from typing import Any

from engine.cli.commands import command


def cmd_sets(args: argparse.Namespace) -> int:
    """Print every named set: a table, or one JSON object per set with `--json`."""
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


def add_cli(sub: Any) -> None:
    """Add `sets` to the CLI's sub-commands."""
    listing = command(sub, "sets", "list the named question sets (source, licence, size)",
                      cmd_sets, db=None)
    listing.add_argument("--json", action="store_true", help="one JSON object per set")
