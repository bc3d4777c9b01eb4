"""In a real browser: the rough edges a new user hit that only a browser shows (issue 14).

Each test is named after its edge. A fresh server per module (the `app` fixture of
tests/test_browser.py), so the first test sees the server's very first page load.
"""
from __future__ import annotations

from test_browser import app, page, settle  # noqa: F401  (fixtures: a fresh server per module)

# Every text the sidebar's page list ever shows, recorded from the first byte of the page.
WATCH_NAV = """
window.__navSeen = [];
new MutationObserver(() => {
  for (const nav of document.querySelectorAll("[data-testid='stSidebarNav']")) {
    const text = nav.innerText.trim();
    if (text && window.__navSeen[window.__navSeen.length - 1] !== text) {
      window.__navSeen.push(text);
    }
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""
TITLES = ("Home", "Run", "Runs", "Insights", "Personas & roles", "Experiments")


def test_first_load_of_a_fresh_server_never_flashes_the_raw_page_list(app, page):  # noqa: F811
    base, _ = app
    page.add_init_script(WATCH_NAV)
    page.goto(base + "/")
    page.get_by_text("Model providers").wait_for()
    settle(page)
    page.wait_for_timeout(500)
    seen = page.evaluate("() => window.__navSeen")
    # A later visitor's first load (a new session, a deep link) shows no file list either.
    later = page.context.browser.new_page()
    later.add_init_script(WATCH_NAV)
    later.goto(base + "/runs")
    later.locator("[data-testid='stSidebarNav']").get_by_text("Personas & roles").wait_for()
    settle(later)
    seen += later.evaluate("() => window.__navSeen")
    later.close()
    assert seen, "the app's page list never showed"
    for text in seen:  # only ever the app's own titles, never Streamlit's file list
        assert "Personas & roles" in text, seen


def test_home_demo_count_is_fresh_after_storing(app, page):  # noqa: F811
    from engine import Store
    from engine.services.demo import demo_plan
    base, db_url = app
    page.goto(base + "/")
    page.get_by_text("Model providers").wait_for()
    settle(page)
    page.locator(".st-key-demo_run button").click()
    page.get_by_text("demo runs (simulated)").wait_for()
    settle(page)
    planned = len(demo_plan())
    assert len(Store(db_url).runs(tag="demo")) == planned
    main = page.locator("[data-testid='stMain']").inner_text()
    assert f"{planned} demo runs are stored now" in main, main
    # Pressed again: the page says they are stored, and stores nothing more.
    page.locator(".st-key-demo_run button").click()
    page.get_by_text("already stored").wait_for()
    assert len(Store(db_url).runs(tag="demo")) == planned
