"""Words, not identifiers, on every page: no column header, option, widget, metric or tab label
a person reads is a snake_case identifier (`mind_change_rate`, `max_rounds`), and no table cell
shows a raw `None`, `nan` or a JSON structure. Every page of app.py is opened (AppTest) over a
store with the whole demo (every protocol, two simulated models meeting in debates, a council
and alone), one finished experiment and a human judgement, and driven through its main states:
the Run page's form for every protocol and a finished run of each, every tab of a run's detail
for every protocol, a comparison, every view and section of Insights, every tab of an
experiment, the Leaderboard's boards and a rating's runs, Review's pair. Each state's whole
element tree is walked."""
from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from apptest_helpers import plain
from streamlit.testing.v1 import AppTest

from app import PAGES
from engine import Store
from engine import experiments as ex
from engine.protocols import REGISTRY, arun_config, run_sync
from engine.reports import vega
from engine.services.demo import demo_plan

APP = str(Path(__file__).resolve().parent.parent / "app.py")
IDENTIFIER = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
RAW = re.compile(r"^\s*(?:None|nan|NaN|NaT|<NA>|\{.*\}|\[\s*\{.*\}\s*\]|\[\s*\])\s*$", re.S)
RISK_OFFICER = "Names the single biggest risk in the proposal and says whether it is acceptable."
CFO = "You are a chief financial officer: you weigh every proposal by its cost and its risk."
OWNED: dict[str, str] = {}  # pages whose cases are expected to fail, with their owner


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('words') / 'parley.db'}"
    store = Store(url)
    for demo in demo_plan():
        run_sync(arun_config(demo.config, demo.question.text, store=store,
                             expected=demo.question.expected, tags=("demo",),
                             label=demo.config.label))
    # one run of each protocol whose every seat plays a custom persona and a custom role
    # (the Done-when walk of a new user): the run page and a run's detail are walked on these
    store.put_library("role", "risk_officer", {"description": RISK_OFFICER})
    for name, spec in REGISTRY.items():
        seats = {slot.name: [{"name": f"{slot.name} {i + 1}", "model": "simulated",
                              "persona": CFO, "persona_name": "cfo", "role": "risk_officer"}
                             for i in range(max(slot.minimum, len(slot.defaults), 1))]
                 if slot.many else {"name": slot.name, "model": "simulated", "persona": CFO,
                                    "persona_name": "cfo", "role": "risk_officer"}
                 for slot in spec.slots if not slot.optional}
        run_sync(arun_config({"protocol": name, "seats": seats}, "Should we ship it today?",
                             store=store, tags=("custom-seats",), label="custom seats"))
    custom = store.runs(tag="custom-seats", with_config=False)
    assert sorted(custom["protocol"]) == sorted(REGISTRY) and set(custom["status"]) == {
        "completed"}
    plan = ex.plan({"name": "words", "questions": ["What is 2+3?", "What is 4*5?"],
                    "configs": [{"protocol": "vote", "label": "vote"},
                                {"protocol": "society", "label": "society"}]},
                   confirmed=True)
    ex.run_experiment(store, ex.create(store, plan))
    runs = store.runs(tag="demo", with_config=False)
    first, second = runs[runs["question"] == runs["question"].iloc[0]]["id"].head(2)
    store.add_preference(first, second, rater="tester", choice="a", comment="clearer",
                         shown_left="a")
    return url


# --------------------------------------------------------------------------- the walk
def nodes(at: AppTest) -> Iterator[Any]:
    """Every node of the page's element tree, depth first."""
    stack = [at._tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(list(getattr(node, "children", {}).values())))


def frame_of(node: Any) -> pd.DataFrame | None:
    try:
        value = node.value
    except Exception:  # noqa: BLE001 - an element without a frame
        return None
    return value if isinstance(value, pd.DataFrame) else None


def shown_columns(node: Any, frame: pd.DataFrame) -> list[str]:
    """The headers a person reads: a column's configured label where the page gave one,
    hidden columns and columns left out of `column_order` skipped."""
    config: dict[str, Any] = {}
    proto = getattr(node, "proto", None)
    if proto is not None and getattr(proto, "columns", ""):
        config = json.loads(proto.columns)
    order = list(getattr(proto, "column_order", []) or [])
    out = []
    for column in frame.columns:
        parts = column if isinstance(column, tuple) else (column,)
        name = str(column if not isinstance(column, tuple) else parts[-1])
        settings = config.get(name, {}) if isinstance(config, dict) else {}
        if settings.get("hidden") or (order and name not in order):
            continue
        label = settings.get("label")
        out += [str(label)] if label else [str(p) for p in parts if str(p)]
    return out


def labels_of(at: AppTest) -> list[tuple[str, str]]:
    """(where, text) of every label, option, tab, metric and column header on the page."""
    out: list[tuple[str, str]] = []
    for node in nodes(at):
        proto = getattr(node, "proto", None)
        kind = str(getattr(node, "type", type(node).__name__))
        fields = {f.name for f in proto.DESCRIPTOR.fields} if hasattr(
            proto, "DESCRIPTOR") else set()
        if "label" in fields and isinstance(proto.label, str) and proto.label:
            out.append((f"{kind} label", proto.label))
        if "options" in fields:
            for option in proto.options:
                text = option if isinstance(option, str) else getattr(option, "content", "")
                out.append((f"{kind} {getattr(proto, 'label', '')!r} option", str(text)))
        if "tab" in fields and proto.HasField("tab"):
            out.append(("tab", proto.tab.label))
        if "expandable" in fields and proto.HasField("expandable"):
            out.append(("expander", proto.expandable.label))
        if kind in ("dataframe", "table", "arrow_table", "arrow_data_frame"):
            frame = frame_of(node)
            if frame is not None:
                out += [(f"{kind} column", c) for c in shown_columns(node, frame)]
    return out


def cells_of(at: AppTest) -> list[tuple[str, Any]]:
    """(column, cell) of every table cell that is text or a structure, and of every missing
    value a table shows as "None" (no `placeholder`)."""
    out: list[tuple[str, Any]] = []
    for node in nodes(at):
        if str(getattr(node, "type", "")) not in ("dataframe", "table", "arrow_table",
                                                  "arrow_data_frame"):
            continue
        frame = frame_of(node)
        if frame is None:
            continue
        # a missing value shows as "None" unless the table says what to show instead
        placeholder = str(getattr(node.proto, "placeholder", "") or "")
        for column in frame.columns:
            for cell in frame[column].tolist():
                if isinstance(cell, (str, dict, list, tuple)):
                    out.append((str(column), cell))
                elif not placeholder and cell is not pd.NaT and pd.api.types.is_scalar(
                        cell) and pd.isna(cell):
                    out.append((str(column), "None"))
                elif cell is pd.NaT and not placeholder:
                    out.append((str(column), "None"))
    return out


def problems(at: AppTest) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    named = sorted({(where, text) for where, text in labels_of(at)
                    if IDENTIFIER.fullmatch(text.strip())})
    raw = sorted({(column, str(cell)[:60]) for column, cell in cells_of(at)
                  if not isinstance(cell, str) or RAW.match(cell)})
    return named, raw


# --------------------------------------------------------------------------- the states
Steps = Callable[[AppTest, Store], list[tuple[str, Callable[[AppTest], None]]]]


@dataclass
class State:
    """One state of one page: the query it opens with (`query`, from the store), then the
    states to walk from there (`then`: a name and a step each)."""

    name: str
    page: str
    query: Callable[[Store], dict[str, str]] = lambda store: {}
    then: Steps = lambda at, store: []


def one_of_each(store: Store) -> dict[str, str]:
    """The id of one stored demo run per protocol."""
    runs = store.runs(tag="demo", with_config=False)
    return {p: str(runs[runs["protocol"] == p]["id"].iloc[0]) for p in REGISTRY}


def set_key(key: str, value: Any) -> Callable[[AppTest], None]:
    def step(at: AppTest) -> None:
        at.session_state[key] = value
    return step


def run_form_states(at: AppTest, store: Store) -> list[tuple[str, Callable[[AppTest], None]]]:
    box = next(s for s in at.selectbox if s.label == "Protocol")
    return [(name, lambda a, name=name: a.selectbox(key=box.key).set_value(name))
            for name in REGISTRY]


def tabs_of(key: str) -> Callable[[AppTest, Store], list[tuple[str, Callable[[AppTest], None]]]]:
    def states(at: AppTest, store: Store) -> list[tuple[str, Callable[[AppTest], None]]]:
        return [(tab.label, set_key(key, tab.label)) for tab in at.tabs]
    return states


def leaderboard_states(at: AppTest, store: Store) -> list[tuple[str, Callable[[AppTest], None]]]:
    def pick(by: str) -> Callable[[AppTest], None]:
        def step(a: AppTest) -> None:
            a.radio(key="board-by").set_value(by)
            a.run()
            box = next(s for s in a.selectbox if s.label.startswith("Runs behind"))
            if box.options:
                box.set_value(box.options[0])
        return step
    return [(f"by {by}, a rating's runs", pick(by)) for by in ("model", "persona")]


def insights_states(at: AppTest, store: Store) -> list[tuple[str, Callable[[AppTest], None]]]:
    def view(name: str, sections: bool = False) -> Callable[[AppTest], None]:
        def step(a: AppTest) -> None:
            a.session_state["insights-kind"] = "both"
            a.session_state["insights-view"] = name
            if sections:
                from engine.reports import insights
                a.session_state["insights-sections"] = list(insights.section_titles())
        return step
    return [("every section", view("sections", True)), ("who moved whom", view("moved")),
            ("what if", view("whatif"))]


def experiment_states(at: AppTest, store: Store) -> list[tuple[str, Callable[[AppTest], None]]]:
    at.selectbox(key="exp-pick").set_value(ex.list_experiments(store)["id"].iloc[0]).run()
    return [(tab.label, set_key("exp-tab", tab.label)) for tab in at.tabs]


def compare_query(store: Store) -> dict[str, str]:
    runs = store.runs(tag="demo", with_config=False)
    same = runs[runs["question"] == runs["question"].iloc[0]]
    return {"compare": ",".join(same["id"].head(3))}


def run_of(protocol: str) -> Callable[[Store], dict[str, str]]:
    """A finished run of `protocol` whose seats play a custom persona and role."""
    def query(store: Store) -> dict[str, str]:
        runs = store.runs(tag="custom-seats", protocol=protocol, with_config=False)
        return {"run": str(runs["id"].iloc[0])}
    return query


STATES = [State("home", "pages/home.py"),
          State("run form, every protocol", "pages/run.py", then=run_form_states),
          State("runs list", "pages/runs.py"),
          State("insights", "pages/insights.py", then=insights_states),
          State("personas", "pages/personas.py", then=tabs_of("library-tab")),
          State("experiment", "pages/experiments.py", then=experiment_states),
          State("compare", "pages/compare.py", query=compare_query),
          State("review", "pages/review.py"),
          State("leaderboard", "pages/leaderboard.py", then=leaderboard_states),
          *[State(f"run page, a finished {p}", "pages/run.py", query=run_of(p))
            for p in REGISTRY],
          *[State(f"run detail, {p}", "pages/runs.py", query=run_of(p),
                  then=tabs_of("runs_tab")) for p in REGISTRY]]


def cases() -> list[Any]:
    """The states as test cases; the Insights page's, the Runs list's and the experiment's
    are expected to fail until the branch that owns them is merged (not strictly: a pass is
    welcome). A run's detail, on the Runs page too, is not theirs."""
    out = []
    for state in STATES:
        owner = OWNED.get(state.page) if not state.name.startswith("run detail") else None
        marks = [pytest.mark.xfail(strict=False, reason=f"owned by the {owner} branch")
                 ] if owner else []
        out.append(pytest.param(state.name, id=state.name, marks=marks))
    return out


def test_every_page_of_the_app_is_walked() -> None:
    assert {s.page for s in STATES} == {path for path, _title, _icon in PAGES}


@pytest.mark.parametrize("name", cases())
def test_no_identifier_and_nothing_raw_in_any_state(url: str, name: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_DB_URL", url)
    store = Store(url)
    state = next(s for s in STATES if s.name == name)
    at = AppTest.from_file(APP, default_timeout=180).run()
    at.switch_page(state.page)
    at.query_params.update(state.query(store))
    at.run()
    assert not at.exception, at.exception
    found: dict[str, tuple[list, list]] = {"opened": problems(at)}
    for step_name, step in state.then(at, store):
        step(at)
        at.run()
        assert not at.exception, f"{step_name}: {at.exception}"
        found[step_name] = problems(at)
    bad = {where: p for where, p in found.items() if p[0] or p[1]}
    assert bad == {}, "\n".join(
        f"{name} / {where}: identifiers {named}; raw cells {raw[:8]}"
        for where, (named, raw) in bad.items())


# --------------------------------------------------------------------------- the HTML
HEADER = re.compile(r"<th[^>]*>(.*?)</th>", re.S)
CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.S)


def html_problems(page: str) -> tuple[list[str], list[str]]:
    """The headers of an exported page's tables that are identifiers, and its raw cells."""
    headers = [html.unescape(h).strip() for h in HEADER.findall(page)]
    cells = [html.unescape(c).strip() for c in CELL.findall(page)]
    return ([h for h in headers if IDENTIFIER.fullmatch(h)],
            sorted({c[:60] for c in cells if RAW.match(c)}))


def exported(store: Store, what: str) -> str:
    from engine.reports import compare, share
    from engine.reports import runs as history
    if what == "comparison":
        ids = compare_query(store)["compare"].split(",")
        return share.comparison_html(compare.load(store, ids).runs)
    if what == "experiment":
        found = ex.list_experiments(store)["id"].iloc[0]
        return share.experiment_html(ex.report(store, found), preferences=store.preferences())
    return share.run_html(history.run_detail(store, run_of(what)(store)["run"]))


@pytest.mark.parametrize("what", [*REGISTRY, "comparison", "experiment"])
def test_no_identifier_and_nothing_raw_in_the_exported_html(url: str, what: str) -> None:
    named, raw = html_problems(exported(Store(url), what))
    assert (named, raw) == ([], []), f"{what}: identifiers {named}; raw cells {raw[:8]}"


# Layout the AppTest tree can check: every chart's title is printed once (by the chart, not
# again by a heading or bold line above it), and a tally is sized to its votes. What only a
# browser shows (metric tiles that fit at 1280 px) is in tests/test_browser_layout.py.
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
