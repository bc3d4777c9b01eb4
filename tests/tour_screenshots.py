"""The tour's screenshots (docs/tour.md): `python tests/tour_screenshots.py [--out DIR]`.

It starts `streamlit run app.py` on a free loopback port over a new SQLite store, opens Home in
Chromium, presses the demo button and waits for the demo to finish, runs one small experiment
(two configurations on four demo questions, through the Python API, as the Experiments page's
form would), and saves every page, a run's detail and a comparison at 1280 and 1920 px wide
to DIR/<width>/NN-name.png (docs/images/tour by default): the whole page, grown to its
height. It is not a test (pytest collects `test_*` files only) and the docs build does not run
it; run it again after a change to a page, and look at the images.
Needs Playwright for Python and /usr/bin/chromium.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from plugins.browser import new_context  # noqa: E402
from plugins.browser import settle as script_runs_done  # noqa: E402

from engine import Store  # noqa: E402
from engine import experiments as ex  # noqa: E402
from engine.bench.browser import ARGS, CHROMIUM, missing, server  # noqa: E402
from engine.questions import DEMO  # noqa: E402

WIDTHS = (1280, 1920)
HEIGHT = 900
TALLEST = 12_000  # px; a longer page is cut there (Chromium's screenshots have a limit)
WAIT_MS = 180_000
MAIN = "[data-testid='stMain']"


# Everything drawn: no skeleton left, every visible plotly chart, Vega-Lite chart and table
# drawn (those in a tab not open are not drawn until it opens).
DRAWN = """() => !document.querySelector("[data-testid='stSkeleton']")
  && [...document.querySelectorAll("[data-testid='stPlotlyChart']")]
       .filter(c => c.checkVisibility()).every(c => c.querySelector('.main-svg'))
  && [...document.querySelectorAll("[data-testid='stVegaLiteChart']")]
       .filter(c => c.checkVisibility()).every(c => c.querySelector('svg, canvas'))
  && [...document.querySelectorAll("[data-testid='stDataFrame']")]
       .filter(c => c.checkVisibility()).every(c => c.querySelector('canvas'))"""


def settle(tab: Any) -> None:
    """Wait until the script run ended, the page's figures and tables are drawn and nothing
    moves."""
    tab.locator(f"{MAIN} h1").first.wait_for(state="visible", timeout=WAIT_MS)
    script_runs_done(tab)  # every script run the page asked for (the browser tests' wait)
    tab.wait_for_load_state("networkidle", timeout=WAIT_MS)
    tab.wait_for_function(DRAWN, timeout=WAIT_MS)
    time.sleep(1.5)  # plotly and Vega finish drawing after their elements appear
    script_runs_done(tab)


def shoot(tab: Any, path: Path, width: int) -> None:
    """The whole page: Streamlit scrolls inside its main section, so the viewport grows to
    the page's height first."""
    tall = tab.evaluate("() => Math.max(...[...document.querySelectorAll("
                        "'[data-testid=stMain], [data-testid=stAppViewContainer]')]"
                        ".map(e => e.scrollHeight))")
    tab.set_viewport_size({"width": width, "height": max(HEIGHT, min(int(tall) + 40, TALLEST))})
    time.sleep(1.0)  # charts and tables follow the new size
    tab.wait_for_function(DRAWN, timeout=WAIT_MS)
    path.parent.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(path), full_page=True)
    tab.set_viewport_size({"width": width, "height": HEIGHT})


def run_demo(tab: Any, base: str) -> None:
    """Home's demo button, pressed as a user does; returns when the demo said it is done."""
    tab.goto(base + "/")
    settle(tab)
    tab.locator(".st-key-demo_run button").click()
    tab.get_by_text("demo runs (simulated)").wait_for(timeout=WAIT_MS)
    settle(tab)


def run_experiment(store: Store) -> str:
    """A small experiment over the demo questions: a vote against a society of minds."""
    plan = ex.plan({"name": "Vote or deliberate?",
                    "questions": [{"question": q.text, "expected": q.expected} for q in DEMO],
                    "configs": [{"protocol": "vote", "label": "vote"},
                                {"protocol": "society", "label": "society of minds"}],
                    "repeats": 2}, confirmed=True)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    return str(experiment_id)


def views(store: Store, experiment_id: str) -> list[tuple[str, str]]:
    """(file name, address) of every page the tour shows, in the navigation's order."""
    runs = store.runs(tag="demo", with_config=False)
    panel = runs[runs["protocol"] == "panel"]["id"].iloc[0]
    question = runs[runs["protocol"] == "panel"]["question"].iloc[0]
    same = runs[(runs["question"] == question)
                & runs["protocol"].isin(["panel", "vote", "society"])]["id"]
    return [("01-home", "/"), ("02-run", "/run"), ("03-run-finished", f"/run?run={panel}"),
            ("04-runs", "/runs"), ("05-run-detail", f"/runs?run={panel}"),
            ("06-insights", "/insights"), ("07-personas", "/personas"),
            ("08-experiments", f"/experiments?experiment={experiment_id}"),
            ("09-compare", f"/compare?compare={','.join(same)}"),
            ("10-review", "/review"), ("11-leaderboard", "/leaderboard")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "images" / "tour"))
    args = parser.parse_args()
    if missing():
        print(f"cannot take screenshots: {missing()}", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright
    out = Path(args.out)
    with tempfile.TemporaryDirectory() as folder:
        db_url = f"sqlite:///{folder}/parley.db"
        store = Store(db_url)
        with server(db_url, timeout=WAIT_MS / 1000) as base, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            tab = new_context(browser).new_page()  # it counts the page's script runs
            tab.set_viewport_size({"width": WIDTHS[0], "height": HEIGHT})
            tab.set_default_timeout(WAIT_MS)
            run_demo(tab, base)
            experiment_id = run_experiment(store)
            for width in WIDTHS:
                tab.set_viewport_size({"width": width, "height": HEIGHT})
                for name, address in views(store, experiment_id):
                    tab.goto(base + address)
                    settle(tab)
                    shoot(tab, out / str(width) / f"{name}.png", width)
                    print(f"{width}/{name}.png", flush=True)
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
