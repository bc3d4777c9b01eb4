"""Browser benchmark: how long each page takes to become usable in Chromium, on a fresh server
over 100,000 stored runs (`n` sets it).

The engine-side dashboard rows time the Python a page calls; a user waits for more (the
script run, the websocket, the figures drawn). Here `streamlit run app.py` starts on a free
loopback port over a store filled by `dashboard.make_fixture` plus one small experiment, and
Playwright drives Debian's Chromium to each page: the time from navigation until the page's
main content is drawn and Streamlit has finished the script run.

A new Chromium first lands on Home, as a user does (the default page): that landing pays the
browser's cold start (Streamlit's own frontend, fetched and compiled on an empty cache) and
whatever the server left for its first session (the session's settings and Home's queries).
For reference, the same landing is timed on a bare Streamlit page (one line of text, no Parley
code): the floor no change to Parley can move.
The server's start (until its health URL answers: Python's imports and the caches app.py warms
before it serves) is timed too. Then each page's first visit is timed twice: in a new Chromium
just after it landed on Home (the page's widget code never fetched by this browser: the worst
case), and with the pages opened in turn in one Chromium (a page then finds the widget code the
pages before it fetched); and the median of the next visits.
Needs Playwright for Python and /usr/bin/chromium; without them the row says so.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engine.bench.serving import free_port, served
from engine.bench.table import Row, fact

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
HEADING = "[data-testid='stMain'] [data-testid='stHeading']"
VIEWPORT: Any = {"width": 1400, "height": 1000}
WAIT_MS = 120_000  # how long a page may take to become usable before the bench gives up
IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"


def missing() -> str:
    """Why the benchmark cannot run here ("" when it can)."""
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} is not installed (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (pip install playwright)"
    return ""


BARE = "import streamlit as st\n\nst.title('A bare page')\n"


@contextmanager
def server(db_url: str, timeout: float = 120.0, script: str = "app.py") -> Iterator[str]:
    """`streamlit run app.py` (or `script`) on a free loopback port over `db_url`; yields
    its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with served([sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port),
                 "--server.address", "127.0.0.1", "--server.headless", "true",
                 "--browser.gatherUsageStats", "false"], f"{base}/_stcore/health",
                "streamlit", timeout, cwd=ROOT, env={**os.environ, "PARLEY_DB_URL": db_url}):
        yield base


def _ready(tab: Any, *shown: Any) -> None:
    """Wait until each of the `shown` locators is visible and Streamlit's script run ended."""
    for locator in shown:
        locator.first.wait_for(state="visible", timeout=WAIT_MS)
    tab.wait_for_function(IDLE, timeout=WAIT_MS)


def usable_after(tab: Any, url: str, marker: str) -> float:
    """Seconds from navigating to `url` until `marker` is visible and the script run ended."""
    start = time.perf_counter()
    tab.goto(url)
    _ready(tab, tab.locator(marker))
    return time.perf_counter() - start


def _fill(url: str, n: int) -> dict[str, str]:
    """The stored runs and one experiment; the ids the pages open."""
    from engine import experiments as ex
    from engine.bench.choice import busiest, cheapest, default_config
    from engine.bench.dashboard import make_fixture, with_turns
    from engine.store import Store
    turned = make_fixture(url, n)
    store = Store(url)
    detail, other = with_turns(store, turned, busiest().name)[:2]
    plan = ex.plan({"name": "browser bench", "questions": "definite", "repeats": 1,
                    "configs": [{**default_config(cheapest()), "label": "cheapest"},
                                {**default_config(busiest()), "label": "busiest"}]},
                   store)
    experiment = ex.create(store, plan)
    ex.run_experiment(store, experiment)
    store.close()
    return {"run": detail, "other": other, "experiment": experiment}


@contextmanager
def _tab(playwright: Any, home: str = "") -> Iterator[Any]:
    """A page of a new Chromium (empty cache), landed on `home`'s Home page first when given."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    try:
        tab = browser.new_page(viewport=VIEWPORT)
        if home:
            usable_after(tab, home + "/", HEADING)
        yield tab
    finally:
        browser.close()


def landing(playwright: Any, url: str, marker: str, home: str = "") -> float:
    """Seconds until `marker` is usable at `url` in a new Chromium (empty cache), its first
    page; or, with `home`, once it landed on that server's Home (a page's widget code never
    fetched by this browser before: the worst first visit)."""
    with _tab(playwright, home) as tab:
        return usable_after(tab, url, marker)


def bare_landing(playwright: Any) -> float:
    """`landing` on a fresh server of a bare Streamlit page (no Parley code)."""
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "bare.py"
        script.write_text(BARE)
        with server(f"sqlite:///{Path(folder) / 'unused.db'}", script=str(script)) as base:
            return landing(playwright, base + "/", HEADING)


# A chart drawn: a bar of a Vega-Lite chart (the Insights and accuracy bars) or a plotly plot.
CHART = "[data-testid='stVegaLiteChart'] path[aria-roledescription='bar'], .js-plotly-plot"
# (sidebar link, the page's title, marker of its main content): the pages a click opens.
CLICKED = (("Runs", "Runs", "[data-testid='stDataFrame']"),
           ("Insights", "Insights", CHART),
           ("Experiments", "Experiments", CHART))


def clicked_after(tab: Any, link: str, title: str, marker: str) -> float:
    """Seconds from a click on `link` in the sidebar (no page load: the session reruns with
    the other page) until that page's title and `marker` are drawn and the script run ended."""
    start = time.perf_counter()
    tab.locator("[data-testid='stSidebarNav']").get_by_text(link, exact=True).click()
    main = tab.locator("[data-testid='stMain']")
    _ready(tab, main.locator("h1", has_text=title), main.locator(marker))
    return time.perf_counter() - start


def in_app(playwright: Any, base: str, repeats: int) -> list[tuple[str, float, float]]:
    """(link, first click, median of `repeats` more) per `CLICKED` page: a new Chromium lands
    on Home and moves by the sidebar, back to Home between two clicks, as a user does."""
    found = []
    with _tab(playwright, base) as tab:
        for link, title, marker in CLICKED:
            times = []
            for _ in range(repeats + 1):
                times.append(clicked_after(tab, link, title, marker))
                clicked_after(tab, "Home", "Parley", "[data-testid='stDataFrame']")
            found.append((link, times[0], statistics.median(times[1:])))
    return found


def pages(ids: dict[str, str]) -> list[tuple[str, str, str]]:
    """(name, path, marker of its main content) of every page the benchmark opens."""
    return [("Runs", "/runs", "[data-testid='stDataFrame']"),
            ("Run detail", f"/runs?run={ids['run']}", "[data-testid='stTabs']"),
            ("Insights", "/insights", CHART),
            ("Experiment results", f"/experiments?experiment={ids['experiment']}", CHART),
            ("Compare two runs", f"/compare?compare={ids['run']},{ids['other']}", HEADING)]


def bench_browser(n: int = 100_000, repeats: int = 3) -> list[Row]:
    """Rows: per page, the first visit on a fresh server and the median of `repeats` more."""
    why = missing()
    if why:
        return [fact("browser: page ready times", float("nan"), "s", note=f"not run: {why}")]
    from playwright.sync_api import sync_playwright
    size = f"{n:,} runs"
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'browser.db'}"
        ids = _fill(url, n)
        with sync_playwright() as playwright:
            bare = bare_landing(playwright)
            started = time.perf_counter()
            with server(url) as base:
                ready = time.perf_counter() - started
                home = landing(playwright, base + "/", HEADING)
                rows += [fact(f"browser: server start until it answers (imports, caches warmed; "
                              f"{size})", round(ready, 2), "s"),
                         fact(f"browser: Home usable, landing: the first page of a new Chromium "
                              f"on a fresh server ({size})", round(home, 2), "s", "< 2 s"),
                         fact("browser: the same landing on a bare Streamlit page (one title, no "
                              "Parley code): the floor", round(bare, 2), "s")]
                listed = pages(ids)
                alone = {name: landing(playwright, base + path, marker, base)
                         for name, path, marker in listed}
                with _tab(playwright, base) as tab:  # this browser lands on Home too
                    for name, path, marker in listed:
                        first = usable_after(tab, base + path, marker)
                        again = statistics.median(usable_after(tab, base + path, marker)
                                                  for _ in range(repeats))
                        rows += [fact(f"browser: {name} usable, first visit in a new Chromium "
                                      f"just after landing on Home ({size})",
                                      round(alone[name], 2), "s", "< 2 s"),
                                 fact(f"browser: {name} usable, first visit with the pages "
                                      "opened in turn in one Chromium", round(first, 2), "s",
                                      "< 2 s"),
                                 fact(f"browser: {name} usable, again (median of {repeats})",
                                      round(again, 2), "s", "< 2 s (1 s goal)")]
                for link, first, again in in_app(playwright, base, repeats):
                    rows += [fact(f"browser: {link} usable after a click in the sidebar (no "
                                  "page load), first time in this Chromium", round(first, 2),
                                  "s", "< 2 s"),
                             fact(f"browser: {link} usable after a click in the sidebar, again "
                                  f"(median of {repeats})", round(again, 2), "s",
                                  "< 2 s (1 s goal)")]
    return rows
