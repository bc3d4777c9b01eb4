"""Words, not identifiers, on every page: no column header, option or widget label a person
reads is a snake_case identifier (`mind_change_rate`, `max_rounds`), and no table cell shows a
raw `None` or a JSON structure. Every page of app.py is opened (AppTest) over a store with one
run of every protocol and one finished experiment, its tree walked."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app import PAGES
from engine import experiments as ex
from engine import Store
from engine.protocols import REGISTRY, arun_config, run_sync
from engine.services.demo import demo_config

APP = str(Path(__file__).resolve().parent.parent / "app.py")
IDENTIFIER = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
RAW = re.compile(r"^\s*(?:None|nan|NaN|\{.*\}|\[\s*\{.*\}\s*\])\s*$", re.S)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('words') / 'parley.db'}"
    store = Store(url)
    for name in REGISTRY:
        run_sync(arun_config(demo_config(name), "Should the team ship on Friday?",
                             store=store, expected="yes", tags=("demo",)))
    plan = ex.plan({"name": "words", "questions": ["What is 2+3?", "What is 4*5?"],
                    "configs": [{"protocol": "vote", "label": "vote"},
                                {"protocol": "society", "label": "society"}]},
                   confirmed=True)
    ex.run_experiment(store, ex.create(store, plan))
    return url


def labels_of(at: AppTest) -> list[tuple[str, str]]:
    """(where, text) of every label and option a person reads on the page."""
    out: list[tuple[str, str]] = []
    for kind in ("selectbox", "multiselect", "radio", "segmented_control", "text_input",
                 "number_input", "checkbox", "toggle", "text_area", "slider", "select_slider",
                 "button", "date_input"):
        for widget in at.get(kind):
            label = getattr(widget, "label", "")
            out.append((f"{kind} label", str(label)))
            options = getattr(widget, "options", None) or []
            out += [(f"{kind} {label!r} option", str(o)) for o in options]
    for metric in at.get("metric"):
        out.append(("metric", str(metric.label)))
    for frame in [*at.dataframe, *at.get("table")]:
        value = frame.value
        if isinstance(value, pd.DataFrame):
            out += [("column", str(c)) for c in value.columns]
    return out


def cells_of(at: AppTest) -> list[tuple[str, Any]]:
    out = []
    for frame in [*at.dataframe, *at.get("table")]:
        value = frame.value
        if isinstance(value, pd.DataFrame):
            for column in value.columns:
                for cell in value[column].tolist():
                    if isinstance(cell, str):
                        out.append((str(column), cell))
    return out


@pytest.mark.parametrize("page", [path for path, _title, _icon in PAGES])
def test_no_identifier_and_nothing_raw_on_the_page(url: str, page: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_DB_URL", url)
    at = AppTest.from_file(APP, default_timeout=180).run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    if page == "pages/experiments.py":  # its results, under the experiment picked
        at.selectbox(key="exp-pick").set_value(ex.list_experiments(Store(url))["id"].iloc[0])
        at.run()
        assert at.get("table"), "the experiment's results were not shown"
    named = [(where, text) for where, text in labels_of(at) if IDENTIFIER.fullmatch(text)]
    assert named == [], f"{page}: identifiers where words belong: {named}"
    raw = [(column, cell[:60]) for column, cell in cells_of(at) if RAW.match(cell)]
    assert raw == [], f"{page}: raw values in cells: {raw[:10]}"
