"""In a real browser: a bar clicked on Insights opens the Runs page filtered to the runs
behind it (issue 14, bullet 3). Saves 14-drill-down-runs.png to $PARLEY_SCREENSHOTS."""
from __future__ import annotations

import re

import pytest
from plugins.browser import (
    MD_IMAGE,
    PAYLOAD,
    VEGA_BAR,
    click_bar,
    click_point,
    exactly_typed,
    expect,
    goto,
    group_bar,
    group_css,
    open_tab,
    rerun,
    settle,
    typed,
)

from engine import Store
from engine.protocols import arun_config, run_sync
from engine.questions import DEFINITE


@pytest.fixture
def app(shared_app):
    """The session's shared app server (this module's checks read only what it stored)."""
    return shared_app


def test_clicking_an_accuracy_bar_opens_its_runs(app, page, shots):  # noqa: F811
    base, db_url = app
    store = Store(db_url)
    labels = ("insights-cheap", "insights-careful")  # no other test stores these labels
    for label in labels:
        for question in DEFINITE[:2]:
            run_sync(arun_config({"protocol": "vote", "model": "simulated"}, question.text,
                                 store=store, label=label, expected=question.expected))
    goto(page, base, "/insights")
    main = page.locator("[data-testid='stMain']")
    # Insights opens with the overview; the accuracy section is a click away
    rerun(page, page.locator(".st-key-insights-sections button", has_text="Accuracy").click)
    main.get_by_text("Accuracy by label and protocol").first.wait_for()
    plot = page.locator("[data-testid='stVegaLiteChart']",
                        has_text="Accuracy by label and protocol").first
    # the first of this test's bars (the shared server's store holds other tests' labels too)
    bar = plot.locator(", ".join(group_css(label) for label in labels)).first
    bar.wait_for()
    label = bar.get_attribute("aria-label").split(";", 1)[0].removeprefix("group: ")
    assert label in labels, label
    click_bar(page, bar)
    page.wait_for_url("**/runs?**")
    settle(page)
    expect(page).to_have_url(re.compile(r"[?&]status=completed(&|$)"))
    expect(page).to_have_url(re.compile(rf"[?&]label={re.escape(label)}(&|$)"))
    expect(page.locator(".st-key-runs_label input").first).to_have_value(label)
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
    expect(bars.nth(1)).to_have_attribute("aria-label", re.compile("^group: careful;"))
    click_bar(page, bars.nth(1))
    expect(page.locator(".st-key-exp-drill-label input").first).to_have_value("careful")
    # and every question of it: the other select box says "all", never an empty box
    expect(page.locator(".st-key-exp-drill-q input").first).to_have_value("all")
    # the click opened the *Runs behind a cell* tab (only the open tab is drawn) on its runs
    expect(page.get_by_role("tab", name="Runs behind a cell")).to_have_attribute(
        "aria-selected", "true")
    # retries until the rerun has drawn the tab
    expect(page.locator("[data-testid='stMain'] [data-testid='stDataFrame']")).to_have_count(1)
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    page.screenshot(path=str(shots / "17-experiment-bar-to-runs.png"), full_page=True)


def test_a_hostile_label_in_a_vega_chart_is_text_and_its_bar_opens_its_runs(
        app, page, shots):  # noqa: F811
    """A configuration label with an HTML tag and a markdown image: the Vega-Lite bar, its
    description and its tooltip show it as typed (no image element, no request to the
    image's address, no dialog), and a click on its bar opens exactly its runs."""
    base, db_url = app
    store = Store(db_url)
    hostile = f"{PAYLOAD} {MD_IMAGE}"
    for question in DEFINITE[:2]:
        run_sync(arun_config({"protocol": "vote", "model": "simulated"}, question.text,
                             store=store, label=hostile, expected=question.expected))
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    goto(page, base, "/insights")
    rerun(page, page.locator(".st-key-insights-sections button", has_text="Accuracy").click)
    plot = page.locator("[data-testid='stVegaLiteChart']",
                        has_text="Accuracy by label and protocol").first
    plot.locator(VEGA_BAR).first.wait_for()
    bar = group_bar(plot, hostile).first  # the bar's description, as typed
    bar.wait_for()
    bar.hover()
    tooltip = page.locator("#vg-tooltip-element")
    tooltip.wait_for(state="visible")
    # escaped by Vega's tooltip: shown, not parsed
    expect(tooltip).to_contain_text(hostile, use_inner_text=True)
    expect(plot.locator("img")).to_have_count(0)
    expect(tooltip.locator("img")).to_have_count(0)
    page.screenshot(path=str(shots / "18-hostile-label-in-a-vega-chart.png"), full_page=True)
    click_bar(page, bar)
    page.wait_for_url("**/runs?**")
    settle(page)
    expect(page.locator(".st-key-runs_label input").first).to_have_value(hostile)
    page.locator("[data-testid='stMain']").get_by_text("2 run(s), newest first").wait_for()
    assert page.dialogs == [], page.dialogs
    assert not any(url.startswith("http://127.0.0.1:9/") for url in requests), requests


def test_a_hostile_label_in_an_experiments_summary_tables_is_text(app, page, shots):  # noqa: F811
    """The summary's tables are st.table, which renders markdown: a configuration label with
    an HTML tag and a markdown image shows as typed in every one of them, with no image
    element, no request to the image's address and no dialog."""
    from engine import experiments as ex
    base, db_url = app
    store = Store(db_url)
    hostile = f"{PAYLOAD} {MD_IMAGE}"
    plan = ex.plan({"name": "hostile summary", "questions": "definite", "repeats": 1,
                    "configs": [{"label": hostile, "protocol": "vote", "model": "simulated"},
                                {"label": "plain", "protocol": "vote", "model": "simulated"}]},
                   store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    goto(page, base, f"/experiments?experiment={experiment_id}")
    tables = page.locator("[data-testid='stMain'] [data-testid='stTable']")
    expect(tables).to_have_count(2)  # the answer, and how each configuration reached it
    for number in range(2):
        table = tables.nth(number)
        first = table.locator("tbody tr").first.locator("th, td").first
        # as typed (with an invisible word joiner that keeps the address from becoming a
        # link: `pages._shared.md`): not parsed, not escaped twice
        expect(first, f"table {number}").to_have_text(exactly_typed(hostile),
                                                      use_inner_text=True)
        expect(table.locator("img")).to_have_count(0)
    page.locator(".st-key-exp-accuracy path[aria-roledescription='bar']").first.wait_for()
    page.screenshot(path=str(shots / "20-hostile-label-in-the-summary-tables.png"),
                    full_page=True)
    assert page.dialogs == [], page.dialogs
    assert not any(url.startswith("http://127.0.0.1:9/") for url in requests), requests


def test_a_point_of_the_societys_lines_by_round_opens_its_runs(app, page, shots):  # noqa: F811
    """Points drill down too: a click on a point of the society's accuracy by round (one line
    per label, plotly) opens the Runs page on that label's completed society runs."""
    base, db_url = app
    store = Store(db_url)
    for question in DEFINITE[:2]:
        run_sync(arun_config({"protocol": "society", "model": "simulated",
                              "options": {"rounds": 2}}, question.text, store=store,
                             label="society-points", expected=question.expected))
    goto(page, base, "/insights")
    pill = page.locator(".st-key-insights-sections button", has_text="Society of minds")
    if pill.get_attribute("aria-pressed") != "true":  # open by default when it has runs
        rerun(page, pill.click)
    chart = page.locator("[data-testid='stPlotlyChart'] .js-plotly-plot").filter(
        has_text="society-points: round-1 majority vote").first
    chart.wait_for()
    chart.scroll_into_view_if_needed()
    settle(page)
    expect(chart.locator(".legend")).to_contain_text("society-points")
    # this test's line (the shared server's store holds other tests' society runs too): the
    # traces are drawn in the order of the figure's data, each line with its markers
    names = chart.evaluate("plot => plot.data.map(trace => trace.name)")
    line = names.index("society-points")
    point = chart.locator(".scatterlayer .trace").nth(line).locator(".points path").first
    point.wait_for()
    click_point(page, chart, point)
    page.wait_for_url("**/runs?**")
    settle(page)
    for key, value in (("protocol", "society"), ("status", "completed"),
                       ("label", "society-points")):
        expect(page).to_have_url(re.compile(rf"[?&]{key}={value}(&|$)"))
    expect(page.locator(".st-key-runs_label input").first).to_have_value("society-points")
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    page.screenshot(path=str(shots / "22-society-point-to-runs.png"), full_page=True)


def test_a_point_of_the_reliability_diagram_lists_the_runs_in_its_bin(app, page, shots):  # noqa: F811
    """A click on a point of an experiment's reliability diagram opens *Runs behind a cell*
    on exactly the runs counted in that bin (its configuration, its signal, its confidence)."""
    from engine import experiments as ex
    base, db_url = app
    store = Store(db_url)
    plan = ex.plan({"name": "calibration points", "questions": "definite", "repeats": 1,
                    "configs": [{"label": "cal-vote", "protocol": "vote",
                                 "model": "simulated"}]}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    result = ex.report(store, experiment_id)
    cal = next(c for c in result.calibrations if c["bins"])
    goto(page, base, f"/experiments?experiment={experiment_id}")
    open_tab(page, "Calibration")
    chart = page.locator("[data-testid='stPlotlyChart'] .js-plotly-plot").filter(
        has_text="perfect calibration").first
    chart.wait_for()
    settle(page)
    # the traces: the diagonal, then each configuration and signal in `calibrations` order
    number = result.calibrations.index(cal)
    click_point(page, chart, chart.locator(".scatterlayer .trace").nth(1 + number).locator(
        ".points path").first)
    expect(page.get_by_role("tab", name="Runs behind a cell")).to_have_attribute(
        "aria-selected", "true")
    main = page.locator("[data-testid='stMain']")
    note = main.get_by_text("reliability diagram").first
    note.wait_for()
    first = cal["bins"][0]
    expect(note).to_contain_text(typed(f"({first['count']} run(s))"), use_inner_text=True)
    expect(page.locator(".st-key-exp-drill-label input").first).to_have_value("cal-vote")
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    # the grid is drawn once its cells are (the canvas, and the accessible table beside it)
    grid = main.locator("[data-testid='stDataFrame']").first
    grid.locator("canvas").first.wait_for()
    grid.locator("[role='gridcell']").first.wait_for(state="attached")
    settle(page)
    page.screenshot(path=str(shots / "23-calibration-point-to-runs.png"), full_page=True)
    # all its runs again: the bin's note leaves once the run the click asks for is drawn (an
    # immediate count raced that run on a loaded machine)
    rerun(page, page.locator(".st-key-exp-drill-bin-clear button").click)
    expect(main.get_by_text("reliability diagram")).to_have_count(0)
