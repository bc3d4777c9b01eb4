"""In a real browser: a bar clicked on Insights opens the Runs page filtered to the runs
behind it (issue 14, bullet 3). Saves 14-drill-down-runs.png to $PARLEY_SCREENSHOTS."""
from __future__ import annotations

from test_browser import (  # noqa: F401
    GENEROUS_MS,
    VEGA_BAR,
    app,
    click_bar,
    goto,
    page,
    settle,
    shots,
    vega_groups,
)

from engine import Store
from engine.protocols import arun_config, run_sync
from engine.questions import DEFINITE


def test_clicking_an_accuracy_bar_opens_its_runs(app, page, shots):  # noqa: F811
    base, db_url = app
    store = Store(db_url)
    for label in ("cheap", "careful"):
        for question in DEFINITE[:2]:
            run_sync(arun_config({"protocol": "vote", "model": "simulated"}, question.text,
                                 store=store, label=label, expected=question.expected))
    goto(page, base, "/insights")
    main = page.locator("[data-testid='stMain']")
    # Insights opens with the overview; the accuracy section is a click away
    page.locator(".st-key-insights-sections button", has_text="Accuracy").click()
    settle(page)
    main.get_by_text("Accuracy by label and protocol").first.wait_for()
    settle(page)
    plot = page.locator("[data-testid='stVegaLiteChart']",
                        has_text="Accuracy by label and protocol")
    bars = plot.first.locator(VEGA_BAR)
    bars.first.wait_for()
    click_bar(page, bars, 0)
    page.wait_for_url("**/runs?**", timeout=GENEROUS_MS)
    settle(page)
    assert "label=" in page.url and "status=completed" in page.url
    label = page.locator(".st-key-runs_label input").first.input_value()
    assert label in ("cheap", "careful") and f"label={label}" in page.url
    main.get_by_text("2 run(s), newest first").wait_for()  # that label's two vote runs
    page.screenshot(path=str(shots / "14-drill-down-runs.png"), full_page=True)
    assert page.dialogs == []


def test_clicking_an_experiment_accuracy_bar_lists_its_runs(app, page, shots):  # noqa: F811
    from engine import experiments as ex
    base, db_url = app
    store = Store(db_url)
    plan = ex.plan({"name": "drill", "questions": "definite", "repeats": 1, "configs": [
        {"label": "cheap", "protocol": "vote", "model": "simulated"},
        {"label": "careful", "protocol": "panel", "model": "simulated"}]}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    goto(page, base, f"/experiments?experiment={experiment_id}")
    bars = page.locator(".st-key-exp-accuracy [data-testid='stVegaLiteChart']").locator(VEGA_BAR)
    bars.nth(1).wait_for()
    settle(page)
    assert vega_groups(bars)[1] == "careful"
    click_bar(page, bars, 1)
    settle(page)
    chosen = page.locator(".st-key-exp-drill-label input").first
    page.wait_for_function("e => e.value === 'careful'", arg=chosen.element_handle(),
                           timeout=GENEROUS_MS)
    # the click opened the *Runs behind a cell* tab (only the open tab is drawn) on its runs
    assert page.get_by_role("tab", name="Runs behind a cell").get_attribute(
        "aria-selected") == "true"
    from playwright.sync_api import expect  # retries until the rerun has drawn the tab
    expect(page.locator("[data-testid='stMain'] [data-testid='stDataFrame']")).to_have_count(
        1, timeout=GENEROUS_MS)
    assert page.locator("[data-testid='stException']").count() == 0
    page.screenshot(path=str(shots / "17-experiment-bar-to-runs.png"), full_page=True)
