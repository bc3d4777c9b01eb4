"""In a real browser at 1280 px: Insights opens on the three answers, a row of which opens the
Runs list on the runs behind it, and the Runs list shows each run's outcome, confidence and
mind changes in its first screenful. Saves 50-insights-three-answers.png and
51-runs-first-screenful.png to $PARLEY_SCREENSHOTS.

A server of this module's own (`app`): the first answers table then holds this module's
label alone, so its first row is known.
"""
from __future__ import annotations

import re

from plugins.browser import expect, goto, rerun, settle

from engine import Store
from engine.protocols import arun_config, run_sync
from engine.questions import DEFINITE
from engine.reports.answers import TITLES

WIDE = {"width": 1280, "height": 900}


def test_a_row_of_the_three_answers_opens_its_runs(app, page, shots):  # noqa: F811
    base, db_url = app
    store = Store(db_url)
    for question in DEFINITE[:3]:
        run_sync(arun_config({"protocol": "society", "model": "simulated",
                              "options": {"rounds": 2}}, question.text, store=store,
                             label="three-answers", expected=question.expected))
    page.set_viewport_size(WIDE)
    goto(page, base, "/insights")
    main = page.locator("[data-testid='stMain']")
    headers = main.locator("[data-testid='stHeading'] h3")
    expect(headers.first).to_have_text(TITLES["minds"])
    expect(headers.nth(1)).to_have_text(TITLES["votes"])
    expect(headers.nth(2)).to_have_text(TITLES["confidence"])
    grids = main.locator("[data-testid='stDataFrame']")
    expected = [["label", "protocol", "runs", "agents", "changed their mind",
                 "persuaded", "misled"],
                ["label", "protocol", "runs", "winner's share", "unanimous", "tied",
                 "winner right"],
                ["label", "protocol", "confidence", "runs", "accuracy",
                 "round-one agreement"]]
    for number, columns in enumerate(expected):
        table = grids.nth(number)
        table.locator("[role='gridcell']").first.wait_for(state="attached")
        # every column of each table is drawn at 1280 px (glide draws the ones in view only)
        names = [h.inner_text() for h in table.locator("[role='columnheader']").all()]
        assert names == columns, (number, names)
        box = table.bounding_box()
        assert box["x"] + box["width"] <= WIDE["width"]
    grid = grids.first
    settle(page)
    page.screenshot(path=str(shots / "50-insights-three-answers.png"))
    box = grid.bounding_box()
    # the grid is a canvas: the first row's selection box, left of its label
    rerun(page, lambda: page.mouse.click(box["x"] + 18, box["y"] + 35 + 17))
    page.wait_for_url("**/runs?**")
    settle(page)
    for key, value in (("protocol", "society"), ("label", "three-answers"),
                       ("status", "completed"), ("model", "simulated")):
        expect(page).to_have_url(re.compile(rf"[?&]{key}={value}(&|$)"))
    main.get_by_text("3 run(s), newest first").wait_for()
    expect(page.locator("[data-testid='stException']")).to_have_count(0)


def test_the_runs_list_shows_the_answers_in_its_first_screenful(app, page, shots):  # noqa: F811
    base, db_url = app
    store = Store(db_url)
    run_sync(arun_config({"protocol": "panel", "model": "simulated"}, DEFINITE[0].text,
                         store=store, label="a-rather-long-label-name",
                         expected=DEFINITE[0].expected))
    page.set_viewport_size(WIDE)
    goto(page, base, "/runs")
    grid = page.locator("[data-testid='stMain'] [data-testid='stDataFrame']").first
    grid.locator("[role='gridcell']").first.wait_for(state="attached")
    settle(page)
    # glide draws only the columns in view, in its canvas and in the accessible table beside
    # it: the answers are among them, the wide question is not
    names = [h.inner_text() for h in grid.locator("[role='columnheader']").all()]
    for name in ("outcome", "confidence", "mind changes", "correct"):
        assert name in names, names
    assert "question" not in names, names
    grid_box = grid.bounding_box()
    assert grid_box["x"] + grid_box["width"] <= WIDE["width"]
    page.screenshot(path=str(shots / "51-runs-first-screenful.png"))
