"""The `pages/` folder and `st.navigation`: what `_shared._leave_pages_directory_mode` relies on.

DESIGN names the folder `pages/`, and Streamlit treats such a folder as the old file-per-page
app until some session has called `st.navigation`: a fresh server's first visit to `/runs`
would run pages/runs.py alone (no navigation, no page config). `_shared` turns Streamlit's
private class flag `PagesManager.uses_pages_directory` off; these tests pin that the flag still
exists, and that a first visit to a deep link on a fresh server gets the whole app.
"""
from __future__ import annotations

from plugins.browser import goto, settle
from streamlit.runtime.pages_manager import PagesManager


def test_streamlit_still_has_the_flag_the_workaround_resets():
    # A class attribute: None until Streamlit decides, then True/False for the whole process.
    assert "uses_pages_directory" in vars(PagesManager), (
        "Streamlit renamed PagesManager.uses_pages_directory: revisit "
        "pages/_shared._leave_pages_directory_mode (or rename pages/ and update DESIGN)")


def test_a_fresh_servers_first_visit_to_a_deep_link_gets_the_whole_app(app, page):  # noqa: F811
    base, _ = app
    goto(page, base, "/runs")  # the very first request this server serves
    # The first script run may draw the folder's file list; the rerun through app.py replaces
    # it with the app's navigation, on the same address.
    page.wait_for_function("() => (document.querySelector(\"[data-testid='stSidebarNav']\")"
                           " || {}).innerText?.includes('Personas & roles')")
    settle(page)
    nav = page.locator("[data-testid='stSidebarNav']").inner_text()
    for title in ("Home", "Run", "Runs", "Insights", "Personas & roles", "Experiments"):
        assert title in nav
    assert "shared" not in nav  # pages/_shared.py is not a page
    assert page.locator("h1").first.inner_text().strip().endswith("Runs")
    assert page.url.endswith("/runs")
