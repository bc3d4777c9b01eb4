"""In a real browser: an experiment's baseline view with a regression and a fix, and a click
on a cell that opens its runs beside the baseline's in the compare view (issue 14, bullet 2).
Saves 15-baseline-view.png and 16-baseline-cell-compare.png to $PARLEY_SCREENSHOTS."""
from __future__ import annotations

from urllib.parse import unquote

from test_app_baseline import experiment
from test_browser import GENEROUS_MS, app, goto, open_tab, page, settle, shots  # noqa: F401

from engine import Store
from engine import experiments as ex
from engine.reports.baseline import baseline_matrix, matrix_counts


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
    from playwright.sync_api import expect  # here: the module is collected without Playwright
    grid = page.locator(".st-key-exp-baseline")
    grid.wait_for(timeout=GENEROUS_MS)
    grid.scroll_into_view_if_needed()
    settle(page)
    # Playwright's auto-waiting assertions: the metrics may be drawn a moment after the grid
    expect(main).to_contain_text("Fixed", timeout=GENEROUS_MS)
    expect(main).to_contain_text("Broke", timeout=GENEROUS_MS)
    page.screenshot(path=str(shots / "15-baseline-view.png"), full_page=True)

    box = grid.locator("[data-testid='stDataFrameResizable']").first.bounding_box()
    # the grid is a canvas: click the first question's cell in the last column (the panel)
    page.mouse.click(box["x"] + box["width"] - 30, box["y"] + 35 + 17)
    page.wait_for_url("**/compare?**", timeout=GENEROUS_MS)
    settle(page)
    main.get_by_text("Compare runs").first.wait_for()
    shown = unquote(page.url).split("compare=")[1].split(",")
    assert len(shown) == 4  # the baseline's two repeats and the cell's two, side by side
    page.screenshot(path=str(shots / "16-baseline-cell-compare.png"), full_page=True)
    assert page.dialogs == []
