"""In a real browser: an experiment's baseline view with a regression and a fix, and a click
on a cell that opens its runs beside the baseline's in the compare view (issue 14, bullet 2).
Saves 15-baseline-view.png and 16-baseline-cell-compare.png to $PARLEY_SCREENSHOTS."""
from __future__ import annotations

import re

import pytest
from plugins.baselines import experiment
from plugins.browser import expect, goto, open_tab, rerun, settle

from engine import Store
from engine import experiments as ex
from engine.reports.baseline import baseline_matrix, matrix_counts


@pytest.fixture
def app(shared_app):
    """The session's shared app server (this module's checks read only what it stored)."""
    return shared_app


def test_a_baseline_view_with_a_regression_and_a_fix_opens_a_cell(app, page, shots):  # noqa: F811
    base, db_url = app
    experiment_id = experiment(db_url)
    store = Store(db_url)
    spec = ex.get(store, experiment_id)["spec"]
    counts = matrix_counts(baseline_matrix(ex.runs_frame(store, experiment_id), spec, "vote"))
    assert counts["fixed"] > 0 and counts["broke"] > 0  # a regression and a fix to show

    goto(page, base, f"/experiments?experiment={experiment_id}")
    main = page.locator("[data-testid='stMain']")
    open_tab(page, "Questions")
    grid = page.locator(".st-key-exp-baseline")
    grid.wait_for()
    grid.scroll_into_view_if_needed()
    settle(page)
    # Playwright's auto-waiting assertions: the metrics may be drawn a moment after the grid
    expect(main).to_contain_text("Fixed")
    expect(main).to_contain_text("Broke")
    page.screenshot(path=str(shots / "15-baseline-view.png"), full_page=True)

    cells = grid.locator("[data-testid='stDataFrameResizable']").first
    cells.locator("[role='gridcell']").first.wait_for(state="attached")  # the grid is drawn
    box = cells.bounding_box()
    # the grid is a canvas: click the first question's cell in the last column (the panel)
    rerun(page, lambda: page.mouse.click(box["x"] + box["width"] - 30, box["y"] + 35 + 17))
    page.wait_for_url("**/compare?**")
    settle(page)
    main.get_by_text("Compare runs").first.wait_for()
    # the baseline's two repeats and the cell's two, side by side
    run_id = r"[^,&%]+"
    expect(page).to_have_url(re.compile(
        rf"[?&]compare={run_id}((,|%2C){run_id}){{3}}(&|$)", re.IGNORECASE))
    page.screenshot(path=str(shots / "16-baseline-cell-compare.png"), full_page=True)
    assert page.dialogs == []
