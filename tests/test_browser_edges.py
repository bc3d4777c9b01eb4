"""In a real browser: the rough edges a new user hit that only a browser shows (issue 14).

Each test is named after its edge. A server of this module's own (the `app` fixture of
tests/test_browser.py), not the session's shared one: the first test sees the server's very
first page load, and the second needs a store where no demo runs were stored yet.
"""
from __future__ import annotations

from plugins.browser import expect, new_page, rerun, settle

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
    nav = page.locator("[data-testid='stSidebarNav']")
    for title in TITLES:  # the whole page list is drawn, and the script run has ended
        expect(nav).to_contain_text(title)
    seen = page.evaluate("() => window.__navSeen")
    # A later visitor's first load (a new session, a deep link) shows no file list either.
    later = new_page(page.context.browser)
    try:
        later.add_init_script(WATCH_NAV)
        later.goto(base + "/runs")
        nav = later.locator("[data-testid='stSidebarNav']")
        nav.get_by_text("Personas & roles").wait_for()
        settle(later)
        for title in TITLES:
            expect(nav).to_contain_text(title)
        seen += later.evaluate("() => window.__navSeen")
    finally:
        later.context.close()
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
    rerun(page, page.locator(".st-key-demo_run button").click)
    page.get_by_text("demo runs (simulated)").wait_for()
    planned = len(demo_plan())
    assert len(Store(db_url).runs(tag="demo")) == planned
    expect(page.locator("[data-testid='stMain']")).to_contain_text(
        f"{planned} demo runs are stored now", use_inner_text=True)
    # Pressed again: the page says they are stored, and stores nothing more.
    rerun(page, page.locator(".st-key-demo_run button").click)
    page.get_by_text("already stored").wait_for()
    assert len(Store(db_url).runs(tag="demo")) == planned


def test_a_visit_asks_nothing_of_any_host_but_the_apps_own(app, page):  # noqa: F811
    # The dashboard works offline and tells no third party who looks at it: a page's
    # favicon given as a Material icon made the browser fetch it from fonts.gstatic.com on
    # every visit (an emoji favicon is drawn inline).
    from urllib.parse import urlsplit

    from plugins.browser import goto
    base, _ = app
    outside: list[str] = []

    def note(request) -> None:
        if urlsplit(request.url).scheme in ("http", "https", "ws", "wss") and \
                urlsplit(request.url).hostname not in ("127.0.0.1", "localhost"):
            outside.append(request.url)
    page.on("request", note)
    from app import URL_PATHS
    for path in ("", *URL_PATHS):  # every page
        goto(page, base, "/" + path)
    page.wait_for_timeout(500)  # a favicon is asked for after the script run that sets it
    assert outside == [], outside
