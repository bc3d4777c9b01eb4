"""Layout the AppTest tree can check: every chart's title is printed once (by the chart, not
again by a heading or bold line above it), and a tally is sized to its votes. What only a
browser shows (metric tiles that fit at 1280 px) is in tests/test_browser_layout.py."""
from __future__ import annotations

import json
import re

import pytest
from apptest_helpers import plain
from streamlit.testing.v1 import AppTest
from test_words import APP, STATES, url  # noqa: F401 - `url` is the shared store fixture

from engine import Store
from engine.reports import vega

MINE = [s for s in STATES if s.page not in ("pages/insights.py", "pages/experiments.py")
        and s.name != "runs list"]


def chart_titles(at: AppTest) -> list[str]:
    """The titles the page's charts print themselves (Vega-Lite and plotly)."""
    out = []
    for chart in at.get("vega_lite_chart"):
        title = json.loads(chart.proto.spec).get("title")
        out.append(title.get("text") if isinstance(title, dict) else title)
    for chart in at.get("plotly_chart"):
        title = json.loads(chart.proto.spec).get("layout", {}).get("title", {})
        out.append(title.get("text") if isinstance(title, dict) else title)
    return [str(t) for t in out if t]


def headings(at: AppTest) -> list[str]:
    """The page's headings and lines of bold or plain markdown, read as typed."""
    texts = [h.value for h in [*at.title, *at.header, *at.subheader, *at.markdown]]
    return [plain(re.sub(r"\*\*", "", str(t))).strip() for t in texts]


@pytest.mark.parametrize("name", [pytest.param(s.name, id=s.name) for s in MINE])
def test_every_chart_title_is_printed_once(url: str, name: str,  # noqa: F811
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_DB_URL", url)
    store = Store(url)
    state = next(s for s in STATES if s.name == name)
    at = AppTest.from_file(APP, default_timeout=180).run()
    at.switch_page(state.page)
    at.query_params.update(state.query(store))
    at.run()
    twice = []
    for step_name, step in [("opened", lambda a: None), *state.then(at, store)]:
        step(at)
        at.run()
        assert not at.exception, at.exception
        shown = set(headings(at))
        twice += [(step_name, t) for t in chart_titles(at) if t in shown]
    assert twice == [], f"{name}: chart titles printed twice: {twice}"


def test_a_tally_is_sized_to_its_votes():
    two = vega.tally({"yes": 2, "no": 1}, winner="yes", title="Final vote")
    nine = vega.tally({"yes": 9, "no": 3}, winner="yes")
    many = vega.tally({"yes": 40, "no": 3}, winner="yes")
    assert two["height"] < nine["height"] <= many["height"] == vega.TALLY_HEIGHT
    assert two["height"] <= 100  # two votes: not the 280 px of a full chart
    assert two["autosize"] == {"type": "pad"} and two["width"]["step"] >= 48  # per bar
