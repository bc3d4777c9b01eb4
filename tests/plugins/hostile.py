"""What the hostile-input tests of the pages share: the payloads, a store whose every stored
string carries one (`hostile`, a fixture), and the checks that a page shows them as text."""
from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from apptest_helpers import plain
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

from engine import Seat, Store, run_debate, run_vote
from engine.services import library

APP = str(Path(__file__).resolve().parents[2] / "app.py")
GENEROUS = 120.0
IMAGE = "![x](http://127.0.0.1:9/x.png)"  # Chromium loaded this external image
LINK = "[link](http://x)"
TAG = "<img src=x onerror=alert(1)>"
PAYLOADS = (IMAGE, LINK, TAG, ":red[x]", "$$x$$")
RUN_ID = IMAGE  # 30 characters: fits the id column
LABEL = f"{LINK} {TAG} :red[x] $$x$$"
PERSONA = TAG
SEATS = (LINK, "$$x$$", ":red[x]")
QUESTION = f"{IMAGE} {TAG} $$x$$ :red[x] — what is 2+2?"
# Only these elements parse markdown; st.text, data frames and select options show text.
_MARKDOWN = ("markdown", "caption", "title", "header", "subheader", "info", "warning", "error",
             "success", "toast")
_LABELLED = ("button", "expander", "tabs", "checkbox", "toggle", "text_input", "text_area",
             "number_input", "selectbox", "multiselect", "radio", "download_button",
             "page_link", "date_input", "segmented_control", "form_submit_button")


def markdown_texts(at: AppTest) -> list[tuple[str, str]]:
    """Every string on the page that Streamlit renders as markdown, with its element kind."""
    found = [(kind, str(e.value)) for kind in _MARKDOWN for e in getattr(at, kind)]
    for metric in at.metric:
        found += [("metric label", str(metric.label)), ("metric value", str(metric.value))]
    for kind in _LABELLED:
        found += [(f"{kind} label", str(getattr(e, "label", "") or "")) for e in getattr(at, kind)]
    found += [("radio option", str(o)) for r in at.radio for o in r.options]
    found += [("progress text", p.proto.text) for p in at.get("progress")]
    for table in at.table:  # st.table renders every cell and header as markdown
        styled = table.proto.arrow_data.styler.display_values
        frame = convert_arrow_bytes_to_pandas_df(styled) if styled else table.value
        found += [("table cell", str(v)) for v in frame.to_numpy().ravel()]
        found += [("table header", str(c)) for c in frame.columns]
    return found


def assert_inert(at: AppTest) -> str:
    """No hostile payload appears unescaped in any markdown; returns all of it read back as
    typed (`plain`), so a test can check the payloads were shown, not dropped."""
    assert not at.exception, at.exception
    for kind, text in markdown_texts(at):
        for payload in PAYLOADS:
            assert not re.search(r"(?<!\\)" + re.escape(payload), text), (kind, text)
    return "\n".join(plain(text) for _, text in markdown_texts(at))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def figure_texts(figure) -> list[str]:
    return list(_strings(json.loads(figure.to_json() if hasattr(figure, "to_json")
                                    else figure)))


def assert_chart_text(specs, shown: bool = True) -> None:
    """Plotly reads a few HTML tags in labels: no raw `<` may reach a figure, and (`shown`)
    the hostile label is there, escaped."""
    texts = [t for spec in specs for t in figure_texts(spec)]
    assert not any("<img" in t for t in texts), [t for t in texts if "<img" in t][:3]
    assert not shown or any("&lt;img src=x onerror=alert(1)&gt;" in t for t in texts)


def assert_vega_text(specs) -> None:
    """Vega draws text as text (SVG text nodes; its tooltips escape HTML): the hostile label
    is in the chart as typed, never escaped (the reader would see "&lt;"), and no mark links
    anywhere (`href`)."""
    specs = list(specs)
    texts = [t for spec in specs for t in figure_texts(spec)]
    assert any(TAG in t for t in texts), texts[:20]
    assert not any("&lt;" in t for t in texts), [t for t in texts if "&lt;" in t][:3]
    assert not any('"href"' in spec for spec in specs)


def open_page(page: str, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=GENEROUS)
    at.query_params.update(query)
    at.run()
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def rename_run(db_url: str, old: str, new: str) -> None:
    """Give a stored run another id, as an import by an older Parley could have stored it."""
    with sqlite3.connect(db_url.removeprefix("sqlite:///")) as connection:
        connection.execute("UPDATE turns SET run_id = ? WHERE run_id = ?", (new, old))
        connection.execute("UPDATE runs SET id = ? WHERE id = ?", (new, old))


@pytest.fixture
def hostile(db_url, recording_model):
    """A store whose run id, label, tags, seat, persona and configuration names, question and
    a stance are all hostile."""
    store = Store(db_url)
    library.save_entry(store, "persona", {"name": PERSONA, "prompt": "Be brief."})
    library.save_config(store, {"protocol": "vote", "model": "simulated"}, LABEL)
    liar = recording_model(fn=lambda convo: json.dumps(
        {"stance": f"x {TAG}", "answer": TAG, "reasoning": LINK}))
    vote = run_vote(QUESTION, voters=[Seat(SEATS[0]), Seat(SEATS[1]), Seat(SEATS[2], liar)],
                    store=store, label=LABEL, tags=[":red[x]", TAG], expected="4")
    rename_run(db_url, vote.run_id, RUN_ID)
    debate = run_debate(QUESTION, proponent="simulated", opponent="simulated",
                        judge="simulated", max_rounds=1, store=store, label=IMAGE)
    return {"store": store, "vote": RUN_ID, "debate": debate.run_id}
