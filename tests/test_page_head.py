"""What every page's HTML carries (`pages/_page_head.py`, issue 14's page-ready times): the
prefetch of the pages' widget and chart code (which files, the HTML it edits) and where the
server is; checked on its own, on a real server and in Chromium."""
from __future__ import annotations

import asyncio
import gzip
import os
import urllib.request
from pathlib import Path

import pytest

from engine.bench.browser import ARGS, CHROMIUM, server
from engine.bench.browser import missing as browser_missing
from pages import _page_head as _prefetch
from pages._page_head import PageHead, chunks, inject, links, locate

GENEROUS = 120.0


# ------------------------------------------------------------------ which files
def test_the_list_holds_vega_and_the_inputs_and_nothing_index_html_loads():
    names = chunks()
    assert any(n.startswith("embed.") for n in names)  # Vega itself, 0.8 MB
    for entry in _prefetch.ENTRIES:  # each kind is in this Streamlit's build (an upgrade
        assert any(n.startswith(entry + ".") for n in names), entry  # that renames one fails)
    assert not any(n.startswith("PlotlyChart.") for n in names)  # left to its pages
    folder = _prefetch.STATIC / "static" / "js"
    assert all((folder / n).is_file() for n in names)
    booted = set(_prefetch.BOOT.findall((_prefetch.STATIC / "index.html").read_text()))
    assert booted and not booted & set(names)


def build(tmp_path: Path, files: dict[str, str], index: str) -> Path:
    folder = tmp_path / "static" / "js"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    (tmp_path / "index.html").write_text(index)
    return tmp_path


def test_the_closure_follows_static_dynamic_and_preload_references_but_not_index(tmp_path):
    static = build(tmp_path, {
        "index.A1.js": 'import("./Other.O1.js");',
        "boot.B1.js": "",
        "Chart.C1.js": 'import{a}from"./dep.D1.js";import"./boot.B1.js";'
                       'e(()=>import(`./lazy.L1.js`));',
        "dep.D1.js": 'import"./Chart.C1.js";',  # a cycle ends
        "lazy.L1.js": 'const m=["./deep.E1.js"];',
        "deep.E1.js": "",
        "Other.O1.js": "",  # only index.html's code names it
        "Chartist.X1.js": "",  # a name that merely starts alike
    }, '<script src="./static/js/index.A1.js"></script>'
       '<link rel="modulepreload" href="./static/js/boot.B1.js">')
    assert chunks(static, ("Chart",)) == ("Chart.C1.js", "deep.E1.js", "dep.D1.js",
                                          "lazy.L1.js")
    assert chunks(static, ("Missing",)) == ()
    assert chunks(tmp_path / "no-such-build", ("Chart",)) == ()


def test_links_and_injection():
    tags = links(("a.1.js", "b.2.js"))
    assert tags == (b'<link rel="prefetch" crossorigin href="./static/js/a.1.js">'
                    b'<link rel="prefetch" crossorigin href="./static/js/b.2.js">')
    html = b"<html><head><title>t</title></head><body></body></html>"
    assert inject(html, tags) == html.replace(b"</head>", tags + b"</head>")
    assert inject(b"<p>no head</p>", tags) == b"<p>no head</p>"
    assert inject(html, b"") == html


def test_the_locating_script_names_the_pages_and_nothing_else():
    script = locate(("runs", "insights"))
    assert script.startswith(b"<script>") and script.endswith(b"</script>")
    assert b'["insights", "runs"]' in script and b"BACKEND_BASE_URL" in script
    assert b"!window.__streamlit" in script  # a host's own setting wins
    assert locate(()) == b""
    assert b"</script>" not in locate(("a</script><script>alert(1)",))[:-9]


# ------------------------------------------------------------------ the middleware
def call(app, method: str = "GET", kind: str = "http") -> list[dict]:
    """The messages `app` sends for one request."""
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(app({"type": kind, "method": method, "path": "/"}, receive, send))
    return sent


def responder(status: int, content_type: bytes, parts: list[bytes], encoding: bytes = b""):
    async def app(scope, receive, send):
        headers = [(b"content-type", content_type),
                   (b"content-length", str(sum(map(len, parts))).encode())]
        if encoding:
            headers.append((b"content-encoding", encoding))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        for number, part in enumerate(parts):
            await send({"type": "http.response.body", "body": part,
                        "more_body": number < len(parts) - 1})
    return app


PAGE = b"<!DOCTYPE html><html><head><title>Streamlit</title></head><body></body></html>"


def body(sent: list[dict]) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def length(sent: list[dict]) -> int:
    return int(dict(sent[0]["headers"])[b"content-length"])


def test_an_html_page_in_parts_gets_the_links_and_its_new_length():
    sent = call(PageHead(responder(200, b"text/html; charset=utf-8", [PAGE[:30], PAGE[30:]]),
                         names=("x.1.js",)))
    edited = body(sent)
    assert edited == PAGE.replace(b"</head>", links(("x.1.js",)) + b"</head>")
    assert length(sent) == len(edited)


def test_the_pages_script_comes_before_the_links():
    sent = call(PageHead(responder(200, b"text/html", [PAGE]), pages=("runs",),
                         names=("x.1.js",)))
    assert body(sent) == PAGE.replace(
        b"</head>", locate(("runs",)) + links(("x.1.js",)) + b"</head>")


def test_a_gzipped_page_is_edited_inside_its_encoding():
    sent = call(PageHead(responder(200, b"text/html", [gzip.compress(PAGE)], b"gzip"),
                         names=("x.1.js",)))
    assert gzip.decompress(body(sent)) == PAGE.replace(b"</head>",
                                                        links(("x.1.js",)) + b"</head>")
    assert length(sent) == len(body(sent))


def test_a_body_that_is_not_the_gzip_it_claims_goes_out_as_it_came():
    sent = call(PageHead(responder(200, b"text/html", [b"not gzip"], b"gzip"),
                         names=("x.1.js",)))
    assert body(sent) == b"not gzip" and length(sent) == 8


@pytest.mark.parametrize("status, content_type, method", [
    (200, b"application/javascript", "GET"),  # a file of the build
    (200, b"application/json", "GET"),
    (304, b"text/html", "GET"),  # the browser's copy is current: no body to edit
    (200, b"text/html", "POST"),
])
def test_anything_else_passes_untouched(status, content_type, method):
    app = responder(status, content_type, [PAGE])
    assert call(PageHead(app, names=("x.1.js",)), method) == call(app, method)


def test_no_files_to_name_leaves_every_page_alone():
    app = responder(200, b"text/html", [PAGE])
    assert call(PageHead(app, names=())) == call(app)


def test_a_websocket_passes_through():
    seen = []

    async def app(scope, receive, send):
        seen.append(scope["type"])

    call(PageHead(app, names=("x.1.js",)), kind="websocket")
    assert seen == ["websocket"]


# ------------------------------------------------------------------ a real server
@pytest.fixture(scope="module")
def served(tmp_path_factory):
    db_url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'parley.db'}"
    try:
        with server(db_url, timeout=GENEROUS) as base:
            yield base
    except RuntimeError as exc:
        pytest.fail(str(exc))


def test_every_page_served_names_the_files_and_each_one_is_served_immutable(served):
    import app
    names = chunks()
    assert set(app.URL_PATHS) == {"run", "runs", "insights", "personas", "experiments",
                                  "compare", "review", "leaderboard"}
    for path in ("/", "/experiments?experiment=x", "/insights"):
        with urllib.request.urlopen(served + path, timeout=GENEROUS) as answer:
            html = answer.read()
        tags = locate(app.URL_PATHS) + links(names)
        assert tags in html, path
        assert html.index(tags) < html.index(b"</head>")
    for name in names[:5] + tuple(n for n in names if n.startswith("embed.")):
        with urllib.request.urlopen(f"{served}/static/js/{name}", timeout=GENEROUS) as answer:
            assert answer.status == 200
            assert "immutable" in answer.headers["Cache-Control"]


@pytest.mark.browser
def test_chromium_has_vega_in_its_cache_after_landing_on_home(served):
    """A new Chromium lands on Home; without drawing any chart it holds Vega (and the chart
    element's code) in its HTTP cache, so the first chart on another page reads it from
    there (`cache: "only-if-cached"` fails for anything not cached)."""
    why = browser_missing()
    if why:
        if os.environ.get("PARLEY_REQUIRE_BROWSER") == "1":
            pytest.fail(f"PARLEY_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright
    wanted = [n for n in chunks() if n.startswith(("embed.", "ArrowVegaLiteChart."))]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            tab = browser.new_page()
            tab.goto(served + "/")
            tab.locator("[data-testid='stMain'] [data-testid='stHeading']").first.wait_for(
                timeout=GENEROUS * 1000)
            for name in wanted:
                tab.wait_for_function(
                    """name => performance.getEntriesByType('resource').some(
                         r => r.name.endsWith('/static/js/' + name) && r.responseEnd > 0)""",
                    arg=name, timeout=GENEROUS * 1000)
                cached = tab.evaluate(
                    """name => fetch('./static/js/' + name,
                                     {cache: 'only-if-cached', mode: 'same-origin'})
                         .then(r => r.status, () => 'not cached')""", name)
                assert cached == 200, (name, cached)
            drawn = tab.locator("[data-testid='stVegaLiteChart']").count()
            assert drawn == 0  # Home drew no chart: the prefetch put them there
        finally:
            browser.close()


@pytest.mark.browser
def test_a_page_opened_by_its_address_asks_the_server_once(served):
    """Opened at /runs, Streamlit's frontend asks /_stcore/health at once, never
    /runs/_stcore/health first (a 404, then 100 ms or more of waiting), and the page works."""
    why = browser_missing()
    if why:
        if os.environ.get("PARLEY_REQUIRE_BROWSER") == "1":
            pytest.fail(f"PARLEY_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            tab = browser.new_page()
            asked: list[str] = []
            tab.on("request", lambda r: asked.append(r.url.removeprefix(served)))
            for path, title in (("/runs", "Runs"), ("/experiments/", "Experiments")):
                asked.clear()
                tab.goto(served + path)
                tab.locator("[data-testid='stMain'] h1", has_text=title).first.wait_for(
                    timeout=GENEROUS * 1000)
                probes = [url for url in asked if url.endswith("/_stcore/health")]
                assert probes == ["/_stcore/health"], (path, probes)
            tab.goto(served + "/")  # Home: Streamlit's own single probe, as before
            tab.locator("[data-testid='stMain'] h1", has_text="Parley").first.wait_for(
                timeout=GENEROUS * 1000)
        finally:
            browser.close()
