"""The docs' benchmark tables, rendered from measured results, never typed (as cog does).

`docs/data/bench.json` holds rows written by `python -m engine bench --json`: each with its
section, figure, unit and target, and where and when it was measured (the command, the UTC
time, the section's wall time, the load average before and after, the CPUs, the commit, a
remark). A docs page asks for a section's table with a pair of comments:

    <!-- bench SECTION -->
    (rendered here)
    <!-- /bench -->

`SECTION` is a section of `engine.bench.table.SECTIONS`, or `sections` for the overview of
every section (measured or not). A section the file holds no rows of is rendered as a sentence
saying it is not in this measurement and how to measure it, never as an old figure.

    python -m engine.bench.docs                    rewrite the pages from docs/data/bench.json
    python -m engine.bench.docs --check            exit 1 naming each page that differs
    python -m engine.bench.docs --merge NEW.json   NEW's sections replace the file's, then rewrite
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.bench.table import SECTIONS, command, to_json

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
DATA = DOCS / "data" / "bench.json"
OVERVIEW = "sections"
BLOCK = re.compile(r"(<!-- bench (?P<section>[\w-]+) -->\n)(?P<body>.*?)(<!-- /bench -->)",
                   re.S)
Row = dict[str, Any]


def load(path: Path = DATA) -> list[Row]:
    """The rows of a file `python -m engine bench --json` wrote."""
    document = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict) or document.get("format") != 1:
        raise ValueError(f"{path}: not a `python -m engine bench --json` document (format 1)")
    return list(document["rows"])


def merge(old: list[Row], new: list[Row]) -> list[Row]:
    """`old` with every section `new` measured replaced by `new`'s rows, in table order."""
    fresh = {row["section"] for row in new}
    rows = [row for row in old if row["section"] not in fresh] + new
    order = {name: i for i, name in enumerate(SECTIONS)}
    return sorted(rows, key=lambda row: order.get(row["section"], len(order)))


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _figure(value: Any) -> str:
    if value is None:
        return "not measured"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _when(row: Row) -> str:
    return row["measured_at"].replace("T", " ").replace("+00:00", " UTC")


def _caption(row: Row) -> str:
    """Where and when a section was measured, from its first row."""
    before, after = row["load_before"], row["load_after"]
    commit = f", a checkout at commit `{row['commit']}`" if row.get("commit") else ""
    text = (f"Measured {_when(row)} by `{row['command']}` in {row['seconds']:g} s on "
            f"{row['cpus']} CPUs{commit}; load average (1, 5, 15 min, as `uptime` prints it) "
            f"{before[0]:g}, {before[1]:g}, {before[2]:g} before and "
            f"{after[0]:g}, {after[1]:g}, {after[2]:g} after.")
    if row.get("remark"):
        text += f" Remark: {row['remark']}."
    return text


def _missing(section: str) -> str:
    return (f"**Not in this measurement**: `docs/data/bench.json` holds no `{section}` rows. "
            f"Measure them with `python -m engine bench --json --only {section} > new.json` "
            "and `python -m engine.bench.docs --merge new.json`.\n")


def render_section(section: str, rows: list[Row]) -> str:
    """The caption and table of one section's rows (or the sentence saying there are none)."""
    mine = [row for row in rows if row["section"] == section]
    if not mine:
        return _missing(section)
    lines = [_caption(mine[0]), "", "| benchmark | value | unit | target |", "|---|---|---|---|"]
    for row in mine:
        name = row["name"] + (f" [{row['note']}]" if row.get("note") else "")
        lines.append(f"| {_cell(name)} | {_figure(row['value'])} | {_cell(row['unit'])} "
                     f"| {_cell(row.get('target', ''))} |")
    return "\n".join(lines) + "\n"


def render_overview(rows: list[Row]) -> str:
    """One line per section of the bench: when it was measured, its wall time and load, or
    that it is not in this measurement."""
    lines = ["| section | rows | measured (UTC) | wall | load average before → after (1 min) "
             "| command |", "|---|---|---|---|---|---|"]
    for section in SECTIONS:
        mine = [row for row in rows if row["section"] == section]
        if mine:
            first = mine[0]
            lines.append(f"| {section} | {len(mine)} | {_when(first).removesuffix(' UTC')} "
                         f"| {first['seconds']:g} s | {first['load_before'][0]:g} → "
                         f"{first['load_after'][0]:g} | `{first['command']}` |")
        else:
            lines.append(f"| {section} | — | not in this measurement | — | — "
                         f"| `{command(section)}` |")
    return "\n".join(lines) + "\n"


def render(text: str, rows: list[Row]) -> str:
    """`text` (a docs page) with every bench block rendered afresh from `rows`."""
    def block(match: re.Match[str]) -> str:
        section = match["section"]
        if section == OVERVIEW:
            body = render_overview(rows)
        elif section in SECTIONS:
            body = render_section(section, rows)
        else:
            raise ValueError(f"<!-- bench {section} -->: no such section; one of "
                             f"{OVERVIEW}, {', '.join(SECTIONS)}")
        return f"{match[1]}\n{body}\n{match[4]}"
    return BLOCK.sub(block, text)


def pages(docs: Path = DOCS) -> list[Path]:
    """The docs pages that hold a bench block."""
    return sorted(p for p in docs.rglob("*.md") if BLOCK.search(p.read_text(encoding="utf-8")))


def stale(rows: list[Row], docs: Path = DOCS) -> list[Path]:
    """The pages whose bench blocks differ from what `rows` render."""
    return [page for page in pages(docs)
            if render(text := page.read_text(encoding="utf-8"), rows) != text]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.docs",
                                     description="render the docs' benchmark tables")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a "
                        "page differs from what the data renders")
    parser.add_argument("--merge", metavar="NEW.json", action="append", default=[],
                        help="a `bench --json` file whose sections replace the data's")
    parser.add_argument("--data", type=Path, default=DATA, help=f"default {DATA}")
    args = parser.parse_args(argv)
    rows = load(args.data) if args.data.exists() else []
    if args.merge:
        for path in args.merge:
            rows = merge(rows, load(Path(path)))
        args.data.parent.mkdir(parents=True, exist_ok=True)
        args.data.write_text(to_json(rows) + "\n", encoding="utf-8")
    if args.check:
        differ = stale(rows)
        for page in differ:
            print(f"{page.relative_to(ROOT)}: its bench tables differ from {args.data.name}; "
                  "run python -m engine.bench.docs", file=sys.stderr)
        return 1 if differ else 0
    for page in stale(rows):
        page.write_text(render(page.read_text(encoding="utf-8"), rows), encoding="utf-8")
        print(f"rewrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
