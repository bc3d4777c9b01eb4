"""In a real browser at 1280 px: an experiment's page opens on the answer, its views in four
group tabs that fit the width (no tab list scrolls sideways), tiles whose text is not cut,
a click on a cell of the question-by-configuration matrix lists that cell's runs, and a
click on a question opens every configuration's runs on it in the compare view.
Saves 50-experiment-answer.png to $PARLEY_SCREENSHOTS."""
from __future__ import annotations

import re

import pytest
from plugins.browser import expect, goto, open_tab, rerun, settle
from plugins.experiment_answer import scripted_experiment

from pages._experiment_results import GROUPS

NARROW = {"width": 1280, "height": 1000}
# the elements whose content is cut when it is wider than they are
OVERFLOWING = """(selector) => [...document.querySelectorAll(selector)]
    .filter(e => e.getClientRects().length && e.scrollWidth > e.clientWidth + 1)
    .map(e => e.innerText)"""
WIDER_TABLES = """() => [
    ...document.querySelectorAll("[data-testid='stMain'] [data-testid='stTable']")]
    .filter(box => box.getClientRects().length && [...box.querySelectorAll('table')].some(
        t => t.getBoundingClientRect().right > box.getBoundingClientRect().right + 1))
    .map(box => box.innerText.slice(0, 80))"""



@pytest.fixture
def app(shared_app):
    """The session's shared app server."""
    return shared_app

def test_the_answer_first_tabs_that_fit_and_a_cell_that_opens_its_runs(app, page, shots):  # noqa: F811
    base, db_url = app
    experiment_id = scripted_experiment(db_url)
    page.set_viewport_size(NARROW)
    goto(page, base, f"/experiments?experiment={experiment_id}")
    main = page.locator("[data-testid='stMain']")
    main.get_by_role("heading", name="Which configuration is better, and how sure?").wait_for()
    main.get_by_text("was right more often than B").first.wait_for()
    matrix = page.locator(".st-key-exp-matrix")
    matrix.wait_for()
    settle(page)
    for group in GROUPS:  # every group's tab, and its views' tabs, fit at 1280 px
        open_tab(page, group)
        assert page.evaluate(OVERFLOWING, "[role='tablist']") == [], group
        open_tab(page, GROUPS[group][-1])
        assert page.evaluate(OVERFLOWING, "[role='tablist']") == [], group
    # the progress tiles above the results: no label or value cut
    assert page.evaluate(OVERFLOWING, "[data-testid='stMetricValue'] div, "
                                      "[data-testid='stMetricLabel'] p") == []

    open_tab(page, "Summary")
    matrix.wait_for()
    matrix.scroll_into_view_if_needed()
    settle(page)
    page.screenshot(path=str(shots / "50-experiment-answer.png"), full_page=True)
    # the two headline tables fit the column: no table wider than the box that holds it
    assert page.evaluate(WIDER_TABLES) == []
    cells = matrix.locator("[data-testid='stDataFrameResizable']").first
    cells.locator("[role='gridcell']").first.wait_for(state="attached")  # the grid is drawn
    box = cells.bounding_box()
    # the grid is a canvas: click the first question's cell in the last column (B)
    rerun(page, lambda: page.mouse.click(box["x"] + box["width"] - 30, box["y"] + 35 + 17))
    runs = page.get_by_role("tab", name="Runs behind a cell", exact=True)
    expect(runs).to_have_attribute("aria-selected", "true")
    settle(page)
    # the runs of B on question 0 listed: the click chose that configuration and question
    page.locator("[data-testid='stMain'] [data-testid='stDataFrame']").first.wait_for()
    expect(page.locator(".st-key-exp-drill-label input").first).to_have_value("B")
    expect(page.locator(".st-key-exp-drill-q input").first).to_have_value("0: What is 2 + 2?")

    # a click on a question opens every configuration's runs on it side by side
    open_tab(page, "Summary")
    matrix.wait_for()
    matrix.scroll_into_view_if_needed()
    settle(page)
    cells = matrix.locator("[data-testid='stDataFrameResizable']").first
    cells.locator("[role='gridcell']").first.wait_for(state="attached")
    box = cells.bounding_box()
    # the question column starts after the narrow "#" one: a quarter of the way across
    rerun(page, lambda: page.mouse.click(box["x"] + box["width"] * 0.25, box["y"] + 35 + 17))
    page.wait_for_url("**/compare?**")
    settle(page)
    # A's two runs of 2 + 2 and B's two, side by side
    run_id = r"[^,&%]+"
    expect(page).to_have_url(re.compile(
        rf"[?&]compare={run_id}((,|%2C){run_id}){{3}}(&|$)", re.IGNORECASE))
    assert page.dialogs == []
