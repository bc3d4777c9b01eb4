"""In a real browser: a bar clicked on Insights opens the Runs page filtered to the runs
behind it (issue 14, bullet 3). Saves 14-drill-down-runs.png to $PARLEY_SCREENSHOTS."""
from __future__ import annotations

from test_browser import (  # noqa: F401
    GENEROUS_MS,
    MD_IMAGE,
    PAYLOAD,
    VEGA_BAR,
    app,
    click_bar,
    click_point,
    goto,
    open_tab,
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
    # and every question of it: the other select box says "all", never an empty box
    assert page.locator(".st-key-exp-drill-q input").first.input_value() == "all"
    # the click opened the *Runs behind a cell* tab (only the open tab is drawn) on its runs
    assert page.get_by_role("tab", name="Runs behind a cell").get_attribute(
        "aria-selected") == "true"
    from playwright.sync_api import expect  # retries until the rerun has drawn the tab
    expect(page.locator("[data-testid='stMain'] [data-testid='stDataFrame']")).to_have_count(
        1, timeout=GENEROUS_MS)
    assert page.locator("[data-testid='stException']").count() == 0
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
    page.locator(".st-key-insights-sections button", has_text="Accuracy").click()
    settle(page)
    plot = page.locator("[data-testid='stVegaLiteChart']",
                        has_text="Accuracy by label and protocol").first
    bars = plot.locator(VEGA_BAR)
    bars.first.wait_for()
    groups = vega_groups(bars)
    assert hostile in groups, groups  # the bar's description, as typed
    index = groups.index(hostile)
    bars.nth(index).hover()
    tooltip = page.locator("#vg-tooltip-element")
    tooltip.wait_for(state="visible")
    assert hostile in tooltip.inner_text()  # escaped by Vega's tooltip: shown, not parsed
    assert plot.locator("img").count() == 0 and tooltip.locator("img").count() == 0
    page.screenshot(path=str(shots / "18-hostile-label-in-a-vega-chart.png"), full_page=True)
    click_bar(page, bars, index)
    page.wait_for_url("**/runs?**", timeout=GENEROUS_MS)
    settle(page)
    assert page.locator(".st-key-runs_label input").first.input_value() == hostile
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
    tables.nth(3).wait_for()
    assert tables.count() == 4  # accuracy, calibration, mind changes, cost
    for number in range(4):
        table = tables.nth(number)
        first = table.locator("tbody tr").first.locator("th, td").first.inner_text()
        # as typed (with an invisible word joiner that keeps the address from becoming a
        # link: `pages._shared.md`): not parsed, not escaped twice
        assert first.replace("\u2060", "") == hostile, (number, first)
        assert table.locator("img").count() == 0
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
        pill.click()
        settle(page)
    chart = page.locator("[data-testid='stPlotlyChart'] .js-plotly-plot").filter(
        has_text="society-points: round-1 majority vote").first
    chart.wait_for(timeout=GENEROUS_MS)
    chart.scroll_into_view_if_needed()
    settle(page)
    legend = chart.locator(".legend").text_content() or ""
    assert "society-points" in legend, legend
    traces = chart.locator(".scatterlayer .trace")
    names = [traces.nth(i).locator(".points path").count() for i in range(traces.count())]
    line = next(i for i, n in enumerate(names) if n)  # the first line with markers
    click_point(page, chart, traces.nth(line).locator(".points path").first)
    page.wait_for_url("**/runs?**", timeout=GENEROUS_MS)
    settle(page)
    assert "protocol=society" in page.url and "status=completed" in page.url, page.url
    label = page.locator(".st-key-runs_label input").first.input_value()
    assert label and f"label={label}" in page.url
    assert page.locator("[data-testid='stException']").count() == 0
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
    chart.wait_for(timeout=GENEROUS_MS)
    settle(page)
    # the traces: the diagonal, then each configuration and signal in `calibrations` order
    number = result.calibrations.index(cal)
    click_point(page, chart, chart.locator(".scatterlayer .trace").nth(1 + number).locator(
        ".points path").first)
    settle(page)
    assert page.get_by_role("tab", name="Runs behind a cell").get_attribute(
        "aria-selected") == "true"
    main = page.locator("[data-testid='stMain']")
    note = main.get_by_text("reliability diagram").first
    note.wait_for(timeout=GENEROUS_MS)
    first = cal["bins"][0]
    assert f"({first['count']} run(s))" in note.inner_text().replace("\u2060", "")
    assert page.locator(".st-key-exp-drill-label input").first.input_value() == "cal-vote"
    assert page.locator("[data-testid='stException']").count() == 0
    main.locator("[data-testid='stDataFrame'] canvas").first.wait_for(timeout=GENEROUS_MS)
    page.wait_for_timeout(500)  # the grid draws on its canvas after it appears
    page.screenshot(path=str(shots / "23-calibration-point-to-runs.png"), full_page=True)
    page.locator(".st-key-exp-drill-bin-clear button").click()  # all its runs again
    settle(page)
    assert main.get_by_text("reliability diagram").count() == 0
