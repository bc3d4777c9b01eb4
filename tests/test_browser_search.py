"""In a real browser: the Runs page's "Search transcripts" box narrows the table to the runs
whose question, replies or answer hold the words, and shows where each matched with a
snippet, as text. Saves the screenshot 12-search-transcripts to $PARLEY_SCREENSHOTS (or a
temporary folder).

A server of this module's own (`app`), not the session's shared one: its last check counts
every stored run.
"""
from __future__ import annotations

import re

from plugins.browser import PAYLOAD, commit, expect, field, goto
from plugins.search_runs import fixture_runs, stored

from engine import Store


def holding(cells, text: str):
    """The cells whose text holds `text` (case and all)."""
    return cells.filter(has_text=re.compile(re.escape(text)))


def test_search_a_transcript_from_the_runs_page(app, page, shots):  # noqa: F811
    base, db_url = app
    store = Store(db_url)
    runs = fixture_runs(store)
    hostile = stored(store, "What does the page do with markup?",
                     [("Eve", "vote", 0, f"The durability of {PAYLOAD} is not markup.")])
    main = page.locator("[data-testid='stMain']")

    goto(page, base, "/runs")
    field(page, "runs_transcript").wait_for()
    commit(field(page, "runs_transcript"), "durability")
    page.get_by_text("2 run(s), newest first").wait_for()
    # The grid is drawn on a canvas: its cells are read from the accessible (hidden) table
    # the grid keeps beside it (redrawn after the script run ends: each check retries).
    cells = main.locator("[data-testid='stDataFrame'] [role='gridcell']")
    for text in ("«durability»", runs["reply"], hostile, "Ada, opening, round 1"):
        expect(holding(cells, text).first, text).to_be_attached()
    expect(holding(cells, runs["question"])).to_have_count(0)
    expect(page.locator("img[src='x']")).to_have_count(0)
    page.screenshot(path=str(shots / "12-search-transcripts.png"), full_page=True)

    commit(field(page, "runs_transcript"), '"quokka benchmark"')
    page.get_by_text("1 run(s), newest first").wait_for()
    commit(field(page, "runs_transcript"), 'NEAR( "quokka')
    page.get_by_text("No runs match these filters.").wait_for()
    commit(field(page, "runs_transcript"), '" * - ()')  # no term: no filter
    page.get_by_text("5 run(s), newest first").wait_for()
    assert page.dialogs == [], page.dialogs
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
