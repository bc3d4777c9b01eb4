"""The council through the registry everywhere a protocol is read: the Run page, Insights,
the run and comparison exports, Compare (issue 30, bullet 1). The CLI and experiments are in
tests/test_council.py."""
from __future__ import annotations

import html
from pathlib import Path

from apptest_helpers import chart_specs, plain, poll
from streamlit.testing.v1 import AppTest

from engine import Store
from engine.protocols import arun_config, run_sync
from engine.reports import compare
from engine.reports.runs import result_blocks, run_detail
from engine.reports.share import comparison_html, run_html

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "What is 17 + 25?"


def council_run(store: Store, label: str = "council") -> str:
    result = run_sync(arun_config({"protocol": "council", "model": "simulated"}, QUESTION,
                                  store=store, label=label, expected="42"))
    assert result.run_id
    return result.run_id


def test_the_run_page_runs_a_council_and_shows_its_borda_count(db_url):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.switch_page("pages/run.py").run()
    at.selectbox(key="run-0-protocol").select("council").run()
    at.text_area(key="run-0-question").input(QUESTION).run()
    at.text_input(key="run-0-model").input("simulated").run()
    assert not at.error, [e.value for e in at.error]
    assert "Preflight" in at.info[-1].value and "7" in at.info[-1].value  # 2 x 3 + 1 calls
    at.button(key="run-start").click().run()
    run_id = at.session_state["run_page_run"]
    poll(at, lambda a: bool(a.success))
    run = Store(db_url).get(run_id)
    assert run["protocol"] == "council" and run["status"] == "completed"
    assert len(at.chat_message) == len(run["turns"]) == 7
    metrics = {plain(m.label) for m in at.metric} | {plain(c.value) for c in at.caption}
    assert {"Answer", "Top-ranked member", "Rankings read"} <= metrics
    tables = [t.value for t in at.dataframe] + [t.value for t in at.table]
    assert any("points" in getattr(t, "columns", []) for t in tables)


def test_insights_has_a_council_section(db_url):
    store = Store(db_url)
    council_run(store)
    at = AppTest.from_file(str(ROOT / "pages" / "insights.py"), default_timeout=60).run()
    # one protocol with runs: the page opens with its own section
    assert not at.exception, at.exception
    assert "Council" in [h.value for h in at.subheader]
    metrics = {plain(m.label): plain(m.value) for m in at.metric}
    assert metrics["Councils"] == "1"  # drawn: a section with a `note` shows only the note
    assert any("agreement on the top-ranked member" in spec for spec in chart_specs(at))


def test_a_council_exports_and_compares(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    first, second = council_run(store, "a"), council_run(store, "b")
    text = html.unescape(run_html(run_detail(store, first)))
    assert "Borda count" in text and "Top-ranked member" in text
    assert {b.title for b in result_blocks(store.get(first))} >= {"Borda count", "Rankings"}
    found = compare.load(store, [first, second])
    answers = compare.answers(found.runs)
    runs = [c for c in answers.columns if "Council (llm-council)" in c]
    assert len(runs) == 2  # one column per run, titled by the registry
    assert {answers.set_index("measure").loc["answer", c] for c in runs} == {"42"}
    document = html.unescape(comparison_html(found.runs))
    assert f"Compare runs: {first}, {second}" in document
    assert "rank" in document and "chair" in document  # the phases of the aligned transcript
