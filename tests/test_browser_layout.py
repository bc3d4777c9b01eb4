"""In a real browser at 1280 px: no metric tile's label, value or delta is cut off ("compl…",
"$0 (si…"), nor a button's label ("All 56 demo runs are s…"). A server of this module's own
(the `app` fixture of tests/test_browser.py) over a store with the whole demo: Home, the Run
page's form and a finished run of every protocol, a run's detail of every protocol, Compare,
Personas, Review and the Leaderboard. The Insights page, the Runs list and the Experiments
page are other branches' (their own layout tests)."""
from __future__ import annotations

from typing import Any

import pytest
from plugins.browser import settle

from engine import Store
from engine.protocols import REGISTRY, arun_config, run_sync
from engine.services.demo import demo_plan

WIDTH = 1280
# Every element of a metric tile's label, value and delta, and of a button on the page, whose
# text is wider than its box (an ellipsis or a clip): what a person sees cut off.
CUT = """() => [...document.querySelectorAll(
    "[data-testid='stMetricLabel'], [data-testid='stMetricValue'], "
    + "[data-testid='stMetricDelta'], "
    + "[data-testid='stMain'] [data-testid='stButton'] button")]
  .flatMap(tile => [tile, ...tile.querySelectorAll('*')])
  .filter(e => !(e instanceof SVGElement) && e.clientWidth > 0
          && e.scrollWidth > e.clientWidth + 1)
  .map(e => ({text: e.innerText, scroll: e.scrollWidth, client: e.clientWidth}))"""
TILES = "() => document.querySelectorAll(\"[data-testid='stMetric']\").length"


@pytest.fixture(scope="module")
def addresses(app) -> list[str]:  # noqa: F811
    """The stored demo (every protocol; two models meeting) and the pages to visit."""
    _base, db_url = app
    store = Store(db_url)
    for demo in demo_plan():
        run_sync(arun_config(demo.config, demo.question.text, store=store,
                             expected=demo.question.expected, tags=("demo",),
                             label=demo.config.label))
    runs = store.runs(tag="demo", with_config=False)
    ids = {p: str(runs[runs["protocol"] == p]["id"].iloc[0]) for p in REGISTRY}
    same = runs[runs["question"] == runs["question"].iloc[0]]["id"].head(3)
    return ["/", "/run", *[f"/run?run={i}" for i in ids.values()],
            *[f"/runs?run={i}" for i in ids.values()], f"/compare?compare={','.join(same)}",
            "/personas", "/review", "/leaderboard"]


def test_no_metric_tile_nor_button_is_cut_off_at_1280_px(app, page, addresses):  # noqa: F811
    base, _ = app
    page.set_viewport_size({"width": WIDTH, "height": 900})
    cut: dict[str, Any] = {}
    tiles = 0
    for address in addresses:
        page.goto(base + address)
        page.locator("[data-testid='stMain'] h1").first.wait_for()
        settle(page)
        tiles += page.evaluate(TILES)
        found = page.evaluate(CUT)
        if found:
            cut[address] = found
    assert tiles > 0, "no metric tile was drawn: the check checked nothing"
    assert cut == {}, f"metric tiles cut off at {WIDTH} px: {cut}"
