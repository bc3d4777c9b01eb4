"""A real browser (Playwright + Debian's Chromium) clicks through the app.

It starts `streamlit run app.py` on a free loopback port with a temporary database, creates a
persona whose name is an HTML payload (it must render as text and open no dialog), runs a
panel on the simulated model through the Run page, opens it on Runs, opens Insights, then
runs an experiment on the Experiments page (the bundled demo set under the panel's and the
vote's defaults, on the simulated model) through to its results and reliability diagram, and
saves a screenshot of each step to $PARLEY_SCREENSHOTS (or a temporary folder).

What every browser test shares is the pytest plugin `tests/plugins/browser.py`.

Skipped when /usr/bin/chromium or Playwright is missing, unless PARLEY_REQUIRE_BROWSER=1.
"""
from __future__ import annotations

import re

from plugins.browser import (
    MD_IMAGE,
    PAYLOAD,
    PROTOCOL,
    ROOT,
    VEGA_BAR,
    commit,
    expect,
    field,
    goto,
    open_tab,
    rerun,
    settle,
    shown_as_text,
)

from engine import REGISTRY, Store


def test_the_run_counter_reads_streamlits_message_numbers():
    """WATCH_RUNS reads Streamlit's websocket messages by their protobuf numbers: if an
    upgrade renumbers them, every `settle` would wait its whole timeout; this says why."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    assert BackMsg.DESCRIPTOR.fields_by_name["rerun_script"].number == 11
    assert ForwardMsg.DESCRIPTOR.fields_by_name["script_finished"].number == 6
    assert ForwardMsg.ScriptFinishedStatus.Value("FINISHED_EARLY_FOR_RERUN") == 2


def test_click_through_the_app(shared_app, page, shots):
    base, db_url = shared_app
    store = Store(db_url)
    taken = []

    def shot(name: str) -> None:
        settle(page)
        page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
        taken.append(name)

    # Personas: an HTML payload as a name is shown as text, and nothing runs.
    # The first visit goes straight to a page (a bookmark; in a whole run this is the shared
    # server's first page): it must still get app.py's navigation, not Streamlit's
    # file-per-page fallback (tests/test_pages_directory.py pins that on a fresh server).
    goto(page, base, "/personas")
    expect(page.locator("[data-testid='stSidebarNav']")).to_contain_text("Personas & roles")
    page.get_by_text("New persona").first.click()
    commit(field(page, "new-persona-name"), PAYLOAD, in_form=True)
    commit(field(page, "new-persona-prompt", "textarea"), "You answer in riddles.",
           in_form=True)
    rerun(page, page.locator(".st-key-create-persona button").click)
    page.get_by_text(f"Created the persona {PAYLOAD}.").wait_for()
    page.locator("[data-testid='stExpander']").get_by_text(PAYLOAD).first.wait_for()
    expect(page.locator("img[src='x']")).to_have_count(0)
    assert page.dialogs == []
    assert store.library("persona") and any(p["name"] == PAYLOAD
                                            for p in store.library("persona"))
    shot("01-personas-html-name-as-text")

    # Home: providers and demo runs.
    goto(page, base, "/")
    page.get_by_text("Model providers").wait_for()
    shot("02-home")
    rerun(page, page.locator(".st-key-demo_run button").click)
    page.get_by_text("demo runs (simulated)").wait_for()
    assert len(store.runs(tag="demo")) > 0

    # Run: the protocol on the simulated model, watched until its result shows.
    goto(page, base, "/run")
    title = REGISTRY[PROTOCOL].title
    page.locator(".st-key-run-0-protocol button[aria-label='Open']").click()
    rerun(page, page.get_by_role("option",
                                 name=title, exact=True).click)
    commit(field(page, "run-0-question", "textarea"),
           "Should an early-stage software startup bootstrap or raise venture capital?")
    page.get_by_text("Preflight:").wait_for()
    # A visit to another page keeps the half-filled form.
    nav = page.locator("[data-testid='stSidebarNav']")
    rerun(page, nav.get_by_role("link", name="Home").click)
    page.get_by_text("Model providers").wait_for()
    rerun(page, nav.get_by_role("link", name="Run", exact=True).click)
    page.get_by_text("Preflight:").wait_for()
    expect(field(page, "run-0-question", "textarea")).to_have_value(re.compile("^Should an"))
    commit(field(page, "run-0-label"), MD_IMAGE)
    shot("03-run-configured")
    page.locator(".st-key-run-start button").click()
    page.get_by_text("Completed in").wait_for()
    page.get_by_text("made by the offline simulated model").wait_for()
    page.wait_for_url(re.compile(r"[?&]run=[^&]+"))
    run_id = page.evaluate("() => new URLSearchParams(location.search).get('run')")
    assert run_id and store.get(run_id)["status"] == "completed"
    assert store.get(run_id)["protocol"] == PROTOCOL
    assert store.get(run_id)["label"] == MD_IMAGE
    shown_as_text(page, f"label: {MD_IMAGE}")
    settle(page)
    expect(page.locator("img[src*='127.0.0.1:9']")).to_have_count(0)
    expect(page.locator("[data-testid='stMain'] a[href*='127.0.0.1:9']")).to_have_count(0)
    shot("04-run-result")

    # Refresh: the run is still there, read back from the store.
    page.reload()
    page.get_by_text("Completed in").wait_for()

    # Runs: the run's detail page, from the Run page's link.
    if (ROOT / "pages" / "runs.py").exists():
        rerun(page, page.get_by_text("Open this run on the Runs page").click)
        page.wait_for_url(f"**/runs?run={run_id}*")
        settle(page)
        page.get_by_text(run_id).first.wait_for()
        shown_as_text(page, MD_IMAGE)
        expect(page.locator("img[src*='127.0.0.1:9']")).to_have_count(0)
        expect(page.locator("[data-testid='stMain'] a[href*='127.0.0.1:9']")).to_have_count(0)
        shot("05-runs-detail")

    # Insights, with the demo runs and this one.
    if (ROOT / "pages" / "insights.py").exists():
        goto(page, base, "/insights")
        page.locator("[data-testid='stMain']").wait_for()
        shot("06-insights")

    assert page.dialogs == [], page.dialogs
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    print(f"screenshots in {shots}: {', '.join(taken)}")


# The experiment: two protocols' defaults on the simulated model over the smallest bundled set.
EXPERIMENT_SET = "demo"
EXPERIMENT_CONFIGS = ("panel · defaults", "vote · defaults")
EXPERIMENT_MS = 180_000  # the simulated model finishes in seconds; this only bounds a hang


def pick(page, key: str, option: str, multiselect: bool = False) -> None:
    """Choose `option` in the Streamlit selectbox (or, `multiselect`, multiselect) with this
    key, and wait for the script run the choice asks for."""
    page.locator(f".st-key-{key} button[aria-label='Open']").click()
    rerun(page, page.get_by_role("option", name=option, exact=True).click)
    if multiselect:  # a multiselect's list stays open after a choice
        page.keyboard.press("Escape")
        expect(page.get_by_role("listbox")).to_have_count(0)


def test_experiment_two_configurations_to_calibration(shared_app, page, shots):
    from engine import experiments as ex
    from engine.questions import catalogue
    base, db_url = shared_app
    store = Store(db_url)

    goto(page, base, "/experiments")
    page.get_by_role("heading", name="Experiments").wait_for()
    # The form sits in an expander that is collapsed once experiments exist. Read its state
    # from <details open> once the run has finished, not from what is visible: mid-rerun the
    # form is briefly hidden, and clicking then would close an open expander.
    expander = page.locator("[data-testid='stExpander']").filter(has_text="New experiment")
    expander.first.wait_for()
    settle(page)
    if expander.first.locator("details").first.get_attribute("open") is None:
        rerun(page, expander.first.locator("summary").first.click)
    page.locator(".st-key-exp-set button[aria-label='Open']").wait_for(state="visible")
    sizes = {info.name: info.size for info in catalogue()}
    pick(page, "exp-set", f"{EXPERIMENT_SET} ({sizes[EXPERIMENT_SET]} questions)")
    for label in EXPERIMENT_CONFIGS:
        pick(page, "exp-configs", label, multiselect=True)
    chosen = page.locator(".st-key-exp-configs [data-tag]")
    expect(chosen).to_have_count(2)

    # The preflight: every question under each configuration, once.
    runs_metric = page.locator("[data-testid='stMetric']").filter(
        has=page.get_by_text("Runs", exact=True))
    runs_metric.wait_for()
    planned = sizes[EXPERIMENT_SET] * len(EXPERIMENT_CONFIGS)
    # The metric updates on the rerun the last pick starts: wait for it, then check it.
    expect(runs_metric.get_by_test_id("stMetricValue")).to_have_text(str(planned))
    page.screenshot(path=str(shots / "07-experiment-configured.png"), full_page=True)

    page.locator(".st-key-exp-start button").click()
    page.wait_for_url("**/experiments?experiment=*")
    experiment_id = page.evaluate(
        "() => new URLSearchParams(location.search).get('experiment')")
    assert experiment_id
    # The progress fragment reruns the whole page once the experiment is no longer running;
    # that rerun drops the Stop button, so its results are the final ones. (For a moment both
    # the fragment's progress bar and the rerun's say so: either will do.)
    page.get_by_text(f"{planned}/{planned} runs · completed").first.wait_for(
        timeout=EXPERIMENT_MS)
    page.locator(".st-key-exp-stop").wait_for(state="detached", timeout=EXPERIMENT_MS)
    settle(page)
    assert ex.progress(store, experiment_id).status == "completed"

    main = page.locator("[data-testid='stMain']")
    main.get_by_role("heading", name="Which configuration is better, and how sure?").wait_for()
    # The per-configuration results name both configurations: in the summary tables, and
    # in the accuracy chart's bars (Vega-Lite's SVG) under them, in this order.
    tables = main.locator("[data-testid='stTable']")
    for label in EXPERIMENT_CONFIGS:
        expect(tables.first).to_contain_text(label, use_inner_text=True)
    accuracy = main.locator(".st-key-exp-accuracy [data-testid='stVegaLiteChart']")
    bars = accuracy.locator(VEGA_BAR)
    expect(bars).to_have_count(len(EXPERIMENT_CONFIGS))
    for number, label in enumerate(EXPERIMENT_CONFIGS):
        expect(bars.nth(number)).to_have_attribute(
            "aria-label", re.compile(f"^group: {re.escape(label)};"))

    # Streamlit scrolls inside its main section, so a full-page screenshot is one viewport:
    # grow the viewport to the page's height for this one, from the progress bar to the end.
    tall = page.evaluate("() => Math.max(...[...document.querySelectorAll("
                         "'[data-testid=stMain], [data-testid=stAppViewContainer]')]"
                         ".map(e => e.scrollHeight))")
    viewport = page.viewport_size
    page.set_viewport_size({"width": viewport["width"],
                            "height": max(viewport["height"], min(int(tall) + 100, 8000))})
    try:
        settle(page)
        accuracy.wait_for()
        page.screenshot(path=str(shots / "07-experiment-results.png"), full_page=True)
    finally:
        page.set_viewport_size(viewport)

    # The results draw one tab at a time: the reliability diagram under "Calibration", with
    # the diagonal and each signal's ECE and Brier in its legend.
    open_tab(page, "Calibration")
    main.get_by_text("a calibrated signal follows the diagonal").wait_for()
    charts = main.locator("[data-testid='stPlotlyChart'] .js-plotly-plot")
    reliability = charts.filter(has_text="perfect calibration")
    reliability.wait_for()
    # the Summary tab's chart leaves the page when the rerun ends: wait for it, then count
    expect(charts).to_have_count(1, timeout=EXPERIMENT_MS)
    legend = reliability.locator(".legend")  # SVG: its text content, no inner text
    for text in (*EXPERIMENT_CONFIGS, "ECE", "Brier"):
        expect(legend).to_contain_text(text)
    expect(reliability).to_contain_text("share correct")  # the y axis: accuracy per bin

    # The paired comparison sentence, with its sign test.
    open_tab(page, "Paired comparison")
    main.get_by_role("heading", name="Paired comparison").wait_for()
    a, b = EXPERIMENT_CONFIGS
    sentence = main.get_by_text(f"{a} was right more often than {b}")
    sentence.wait_for()
    expect(sentence).to_contain_text("sign test", use_inner_text=True)
    main.locator(".st-key-exp-csv button").wait_for()
    assert page.dialogs == [], page.dialogs
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    print(f"experiment screenshots in {shots}: 07-experiment-configured, "
          "07-experiment-results")
