"""In a real browser: the Runs page's "Search transcripts" box narrows the table to the runs
whose question, replies or answer hold the words, and shows where each matched with a
snippet, as text. Saves the screenshot 12-search-transcripts to $PARLEY_SCREENSHOTS (or a
temporary folder).
"""
from __future__ import annotations

from test_browser import PAYLOAD, app, commit, field, goto, page, settle, shots  # noqa: F401
from test_search import fixture_runs, stored

from engine import Store

# True once a cell of the grid holds the text (the grid redraws after the script run ends).
CELLS_SHOW = ("t => [...document.querySelectorAll(\"[data-testid='stDataFrame'] "
              "[role='gridcell']\")].some(c => c.textContent.includes(t))")


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
    settle(page)
    page.get_by_text("2 run(s), newest first").wait_for()
    # The grid is drawn on a canvas: its cells are read from the accessible (hidden) table
    # the grid keeps beside it.
    cells = main.locator("[data-testid='stDataFrame'] [role='gridcell']")
    page.wait_for_function(CELLS_SHOW, arg="«durability»")
    shown = " ".join(cells.all_text_contents())
    for run_id in (runs["reply"], hostile):
        assert run_id in shown, shown
    assert runs["question"] not in shown, shown
    assert "Ada, opening, round 1" in shown and "«durability»" in shown
    assert page.locator("img[src='x']").count() == 0
    page.screenshot(path=str(shots / "12-search-transcripts.png"), full_page=True)

    commit(field(page, "runs_transcript"), '"quokka benchmark"')
    settle(page)
    page.get_by_text("1 run(s), newest first").wait_for()
    commit(field(page, "runs_transcript"), 'NEAR( "quokka')
    settle(page)
    page.get_by_text("No runs match these filters.").wait_for()
    commit(field(page, "runs_transcript"), '" * - ()')  # no term: no filter
    settle(page)
    page.get_by_text("5 run(s), newest first").wait_for()
    assert page.dialogs == [], page.dialogs
    assert page.locator("[data-testid='stException']").count() == 0
