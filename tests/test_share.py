"""Share: a run or an experiment's results as one static HTML file (issue 14, bullet 5).

The file carries plotly.js inline and everything a user or a model wrote as escaped text; in
Chromium, opened from disk, its charts draw and it asks the network for nothing. Saves the
screenshot 13-static-html-run.png to $PARLEY_SCREENSHOTS (or a temporary folder).
"""
from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from plugins.browser import ARGS, CHROMIUM, _browser_missing, goto, settle

from engine import Store
from engine import experiments as ex
from engine.cli.main import main
from engine.protocols import arun_config, run_sync
from engine.reports.experiments import report
from engine.reports.runs import run_detail
from engine.reports.share import experiment_html, run_html

HOSTILE = "</pre><script>alert('q')</script><img src=x onerror=alert(1)>"


class Tags(HTMLParser):
    """The tags and the text of a document, as a browser's parser reads them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parsed(document: str) -> Tags:
    tags = Tags()
    tags.feed(document)
    return tags


def hostile_run(store: Store) -> str:
    result = run_sync(arun_config(
        {"protocol": "panel", "model": "simulated", "label": HOSTILE}, f"Is 2+2 four? {HOSTILE}",
        store=store, expected="yes"))
    return result.run_id


def test_a_run_exports_as_one_document_with_its_charts_and_hostile_text_as_text(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    document = run_html(run_detail(store, hostile_run(store)))
    tags = parsed(document)
    assert document.startswith("<!DOCTYPE html>")
    assert [t for t, _ in tags.tags].count("img") == 0  # the payload is no element
    assert not [a for _, a in tags.tags if any(k.startswith("on") for k in a)]
    scripts = [a for t, a in tags.tags if t == "script"]
    assert all("src" not in a for a in scripts)  # plotly.js is inline: no fetch
    assert not [a for _, a in tags.tags if str(a.get("src") or a.get("href") or "").startswith(
        ("http:", "https:", "//"))]  # no element loads anything from a network
    assert HOSTILE in html.unescape("".join(tags.text))  # shown, as characters
    assert document.count('class="plotly-graph-div"') >= 2  # tallies and the mind-change flow
    assert "Simulated: every seat" in document
    assert "Transcript" in document and "critique" in document


def test_an_experiment_exports_its_summary_figures_and_questions(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    plan = ex.plan({"name": HOSTILE, "questions": "definite",
                    "configs": [{"label": "vote", "protocol": "vote", "model": "simulated"}],
                    "repeats": 1}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    document = experiment_html(report(store, experiment_id))
    tags = parsed(document)
    assert [t for t, _ in tags.tags].count("img") == 0
    text = html.unescape("".join(tags.text))
    assert f"Experiment: {HOSTILE}" in text
    assert re.search(r"\d+% \[\d+%–\d+%\] n=\d+", text)  # the rate with its interval and n
    assert document.count('class="plotly-graph-div"') >= 1
    assert "Simulated" in text


def test_the_cli_writes_the_file_and_names_a_missing_id(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    run_id = hostile_run(Store(url))
    out = tmp_path / "run.html"
    assert main(["share", run_id, "--out", str(out), "--db", url]) == 0
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert main(["share", "nope", "--out", str(out), "--db", url]) == 1
    assert "no run 'nope'" in capsys.readouterr().err


@pytest.mark.browser
def test_the_file_opens_from_disk_in_chromium_and_draws_offline(tmp_path, shots):  # noqa: F811
    import pytest
    missing = _browser_missing()
    if missing:
        import os
        if os.environ.get("PARLEY_REQUIRE_BROWSER") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    path = tmp_path / "run.html"
    path.write_text(run_html(run_detail(store, hostile_run(store))), encoding="utf-8")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        tab = browser.new_page(viewport={"width": 1300, "height": 1600})
        requests: list[str] = []
        dialogs: list[str] = []
        tab.on("request", lambda request: requests.append(request.url))
        tab.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        tab.goto(path.as_uri())
        tab.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=60_000)
        drawn = tab.locator(".js-plotly-plot").count()
        tab.screenshot(path=str(shots / "13-static-html-run.png"), full_page=True)
        body = tab.locator("body").inner_text()
        browser.close()
    assert drawn >= 2
    assert dialogs == []
    assert [u for u in requests if not u.startswith(("file:", "data:", "blob:"))] == []
    assert "<script>alert('q')</script>" in body


def test_a_comparison_exports_its_answers_diff_and_aligned_transcripts(tmp_path):
    from engine.reports import compare
    from engine.reports.share import comparison_html
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    first, second = hostile_run(store), hostile_run(store)
    found = compare.load(store, [first, second])
    document = comparison_html(found.runs)
    tags = parsed(document)
    assert [t for t, _ in tags.tags].count("img") == 0
    text = html.unescape("".join(tags.text))
    assert f"Compare runs: {first}, {second}" in text
    assert "How the runs ended" in text and "aligned by phase and round" in text
    assert HOSTILE in text


def test_the_pages_offer_the_html_download(tmp_path, monkeypatch):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    store = Store(url)
    first, second = hostile_run(store), hostile_run(store)
    pages = Path(__file__).resolve().parent.parent / "pages"
    at = AppTest.from_file(str(pages / "runs.py"), default_timeout=60)
    at.query_params["run"] = first
    at.run()
    assert not at.exception, at.exception
    assert at.get("download_button")  # JSON export and the HTML share
    at = AppTest.from_file(str(pages.parent / "app.py"), default_timeout=120)
    at.query_params["compare"] = f"{first},{second}"
    at.switch_page("pages/compare.py")
    at.run()
    assert not at.exception, at.exception
    assert at.get("download_button")


def _download(tab: Any, button: Any) -> Any:
    """The file a click on `button` downloads. A click that lands while the page reruns (a
    loaded machine) can be lost with the element it hit; the click is then made again, up to
    three times, each waiting 40 s for the file (the server builds it on request)."""
    for attempt in range(3):
        try:
            with tab.expect_download(timeout=40_000) as download:
                button.click()
            return download.value
        except PlaywrightTimeout:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def test_the_run_page_downloads_the_html_that_opens_from_disk(app, page, shots, tmp_path):  # noqa: F811
    """As a user does it: the run detail's Share as HTML button, the file saved, then opened
    from disk in the same browser. Saves 19-downloaded-html.png."""
    base, db_url = app
    run_id = hostile_run(Store(db_url))
    goto(page, base, f"/runs?run={run_id}")
    button = page.get_by_role("button", name="⬇️ Share as HTML")
    button.wait_for()
    settle(page)
    got = _download(page, button)
    saved = tmp_path / got.suggested_filename
    got.save_as(saved)
    assert saved.name == f"parley-run-{run_id}.html"
    page.goto(saved.as_uri())
    page.locator(".js-plotly-plot .main-svg").first.wait_for()
    assert "<script>alert('q')</script>" in page.locator("body").inner_text()
    page.screenshot(path=str(shots / "19-downloaded-html.png"))
    assert page.dialogs == []
