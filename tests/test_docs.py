"""The README stays a page and the docs site holds the rest: the README under 20 KB with its two
commands first, every page it or mkdocs.yml names present, and every benchmark table in the docs
exactly what `engine.bench.docs` renders from the measured `docs/data/bench.json` (never typed).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from engine.bench import docs
from engine.bench.table import SECTIONS, to_json
from engine.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = sorted((ROOT / "docs").rglob("*.md"))
COMMANDS = ("python -m pip install -r requirements.txt && python -m streamlit run app.py",
            "python -m pip install -r requirements-dev.txt && python -m pytest -q")


def test_the_readme_is_under_20_kb():
    size = len(README.encode("utf-8"))
    assert size < 20_000, f"README.md is {size:,} bytes: move a section into docs/"


def test_the_two_commands_come_first_each_in_its_own_block():
    headings = re.findall(r"^## (.+)$", README, re.M)
    assert headings[0] == "Two commands for a fresh machine"
    first = README.split("\n## ")[1]
    blocks = re.findall(r"```bash\n(.*?)\n```", first, re.S)
    assert blocks == list(COMMANDS)


def _nav_files(nav: list) -> list[str]:
    files: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        files += _nav_files(value) if isinstance(value, list) else [value]
    return files


def test_every_page_the_readme_and_the_nav_name_exists_and_every_page_is_in_the_nav():
    linked = re.findall(r"\]\((docs/[^)#\s]+)", README)
    assert linked, "the README links its docs pages"
    for link in linked:
        assert (ROOT / link).is_file(), f"README.md links {link}, which does not exist"
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_files(config["nav"])
    for page in nav:
        assert (ROOT / "docs" / page).is_file(), f"mkdocs.yml names {page}, which does not exist"
    assert sorted(nav) == sorted(str(p.relative_to(ROOT / "docs")) for p in PAGES)
    assert {link.removeprefix("docs/") for link in linked} <= set(nav)


def test_links_between_pages_name_pages_that_exist():
    for page in PAGES:
        for link in re.findall(r"\]\(([\w./-]+\.md)(?:#[\w-]+)?\)", page.read_text("utf-8")):
            assert (page.parent / link).is_file(), f"{page.name} links {link}"


def test_every_command_the_docs_show_is_one_the_cli_has():
    known = set(build_parser()._subparsers._group_actions[0].choices)  # noqa: SLF001
    texts = [README, *(p.read_text("utf-8") for p in PAGES)]
    used = {m for text in texts for m in re.findall(r"python -m engine ([a-z][\w-]*)", text)}
    assert used and used <= known, sorted(used - known)
    sections = {m for text in texts for m in re.findall(r"bench[^\n`]*?--only ([a-z-]+)", text)}
    assert sections and sections <= set(SECTIONS), sorted(sections - set(SECTIONS))


# ---------------------------------------------------------------- the generated tables
ROWS = docs.load()


def test_every_bench_table_in_the_docs_is_what_the_measured_data_renders():
    stale = [str(page.relative_to(ROOT)) for page in docs.stale(ROWS)]
    assert not stale, f"{stale}: run python -m engine.bench.docs"


def test_the_check_fails_when_a_figure_is_typed_into_a_table():
    page = ROOT / "docs" / "benchmarks.md"
    text = page.read_text(encoding="utf-8")
    row = next(r for r in ROWS if r["section"] == "throughput")
    figure = docs._figure(row["value"])  # noqa: SLF001
    typed = text.replace(f"| {figure} |", f"| {figure}1 |", 1)
    assert typed != text and docs.render(typed, ROWS) == text


def test_every_bench_section_has_a_table_in_the_docs():
    blocks = {m["section"] for page in docs.pages() for m in docs.BLOCK.finditer(
        page.read_text(encoding="utf-8"))}
    assert set(SECTIONS) | {docs.OVERVIEW} <= blocks


def test_no_benchmark_table_is_typed_outside_a_generated_block():
    for page in PAGES:
        outside = docs.BLOCK.sub("", page.read_text(encoding="utf-8"))
        assert "| benchmark | value |" not in outside, page.name


def test_every_measured_row_says_where_and_when_it_was_measured():
    assert ROWS
    for row in ROWS:
        assert row["section"] in SECTIONS
        assert row["command"].startswith(f"python -m engine bench --only {row['section']}")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", row["measured_at"])
        assert len(row["load_before"]) == len(row["load_after"]) == 3
        assert row["cpus"] >= 1 and row["seconds"] >= 0
        assert {"name", "value", "unit", "target"} <= set(row)


def test_a_section_missing_from_the_data_says_so_and_shows_no_figure():
    text = docs.render_section("workers", [r for r in ROWS if r["section"] != "workers"])
    assert "Not in this measurement" in text and "|" not in text


def test_merge_replaces_only_the_sections_measured_again():
    again = [{**r, "value": 0} for r in ROWS if r["section"] == "live"]
    merged = docs.merge(ROWS, again)
    assert len(merged) == len(ROWS)
    assert [r["value"] for r in merged if r["section"] == "live"] == [0] * len(again)
    assert [r for r in merged if r["section"] != "live"] == \
        [r for r in ROWS if r["section"] != "live"]


def test_bench_json_prints_rows_with_section_command_time_and_load(capsys):
    assert main(["bench", "--quick", "--only", "live", "--json", "--remark", "a test"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows and {r["section"] for r in rows} == {"live"}
    assert all(r["command"] == "python -m engine bench --only live --quick"
               and r["remark"] == "a test" and len(r["load_before"]) == 3 for r in rows)
    assert docs.render_section("live", rows).count("\n| ") == len(rows) + 1


def test_a_figure_that_could_not_be_measured_is_null_not_nan():
    text = to_json([{"section": "browser", "name": "x", "value": float("nan"), "unit": "s"}])
    assert "NaN" not in text and json.loads(text)["rows"][0]["value"] is None
    unmeasured = {**ROWS[0], "section": "browser", "value": None}
    assert "| not measured |" in docs.render_section("browser", [unmeasured])
