"""The Insights page (AppTest): charts with captions across protocols; a friendly empty state."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from apptest_helpers import charts as drawn, plain
from streamlit.testing.v1 import AppTest

from engine import REGISTRY, Store
from engine.protocols import arun_config, run_sync
from engine.questions import DEFINITE
from engine.reports.answers import TITLES
from engine.reports.insights import section_titles

ANSWERS = list(TITLES.values())  # the three answers the page opens on
PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "insights.py")


@pytest.fixture
def db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)  # the page's store is cached per URL
    return Store(url)


def store_runs(db: Store, protocols: tuple[str, ...]) -> None:
    """Two labelled runs of each protocol on the simulated model, with expected answers."""
    for protocol in protocols:
        for label, question in (("cheap", DEFINITE[0]), ("careful", DEFINITE[1])):
            run_sync(arun_config({"protocol": protocol, "model": "simulated"}, question.text,
                                 store=db, label=label, expected=question.expected))


def open_page(every_section: bool = False) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60).run()
    if every_section:  # the page opens with a few sections; the others are a click away
        at.pills(key="insights-sections").set_value(list(section_titles())).run()
    return at


def test_empty_store_shows_a_friendly_note(db):
    at = open_page()
    assert not at.exception, at.exception
    assert "No runs stored yet" in at.info[0].value
    assert not drawn(at)


def test_charts_and_captions_across_protocols(db):
    store_runs(db, ("debate", "peer-review", "panel", "vote", "roundtable", "duel"))
    at = open_page(every_section=True)
    assert not at.exception, at.exception
    charts = drawn(at)
    captions = [c.value for c in at.caption]
    assert len(charts) >= 18
    assert len(captions) >= len(charts)  # one caption under each chart
    headers = [h.value for h in at.subheader]
    assert headers[:4] == [*ANSWERS, "Overview"]  # then each protocol in registry order
    assert headers[4:4 + len(REGISTRY)] == [
        REGISTRY[name].title if name != "vote" else "Vote baseline" for name in REGISTRY]
    assert {"Vote baseline", "Debate", "Peer review", "Roundtable", "Duel", "Accuracy",
            "Tokens and latency"} <= set(headers)
    metrics = {plain(m.label): plain(m.value) for m in at.metric}
    assert metrics["Runs"] == "12" and metrics["Simulated"] == "12"
    # every protocol with a final answer: panel, vote, roundtable, and debate and peer review
    # (their ANSWER lines); a duel has no answer to score
    assert metrics["Scored runs"] == "10"
    assert "Mind-change rate" in metrics and "Mean judge confidence" in metrics


def test_protocols_without_runs_get_a_one_line_note_and_filters_apply(db):
    store_runs(db, ("debate", "peer-review"))
    at = open_page(every_section=True)
    assert not at.exception, at.exception
    notes = [c.value for c in at.caption if "runs match these filters" in c.value]
    # (the three answers say in their own words that nothing matched: no mind to change...)
    # every protocol but the two with runs (debate and peer review) has no runs to show
    assert len(notes) == len(REGISTRY) - 2
    everything = len(drawn(at))
    at.selectbox(key="insights_protocol").set_value("debate").run()
    assert not at.exception, at.exception
    assert 0 < len(drawn(at)) < everything
    assert {plain(m.label): plain(m.value) for m in at.metric}["Runs"] == "2"
    at.selectbox(key="insights_label").set_value("careful").run()
    assert {plain(m.label): plain(m.value) for m in at.metric}["Runs"] == "1"
    at.text_input(key="insights_search").input("no question says this").run()
    assert "No runs match these filters." in at.info[0].value


def test_insights_opens_with_a_few_sections_so_thousands_of_runs_draw_quickly(db):
    """Issue 14: Insights took 5.7-8.4 s to become usable; it now opens with the overview
    (and a protocol's own section when at most two protocols have runs),
    the other sections a click away, and each section is built once per change of the runs."""
    store_runs(db, ("debate", "peer-review", "panel", "vote"))
    at = open_page()
    assert not at.exception, at.exception
    assert [h.value for h in at.subheader] == [*ANSWERS, "Overview"]
    assert len(drawn(at)) == 1
    at.pills(key="insights-sections").set_value(["overview", "accuracy", "cost"]).run()
    assert [h.value for h in at.subheader] == [*ANSWERS, "Overview", "Accuracy",
                                               "Tokens and latency"]
    assert len(drawn(at)) == 6  # the cost section adds accuracy against cost and tokens
    at.pills(key="insights-sections").set_value(["overview", "panel"]).run()
    assert [h.value for h in at.subheader] == [*ANSWERS, "Overview", REGISTRY["panel"].title]
    at.pills(key="insights-sections").set_value([]).run()
    assert "Choose a section above." in at.info[0].value


def test_two_protocols_open_with_their_own_sections(db):
    store_runs(db, ("vote", "debate"))
    at = open_page()
    assert [h.value for h in at.subheader] == [
        *ANSWERS, "Overview", *[REGISTRY[n].title if n != "vote" else "Vote baseline"
                      for n in REGISTRY if n in ("vote", "debate")],
        ]


def test_insights_opens_on_the_three_answers_in_words(db):
    """Mind changes, how the votes fell and confidence against accuracy come first, each a
    table per label and protocol with its n and intervals, before the sections."""
    store_runs(db, ("panel", "society", "debate"))
    at = open_page()
    assert not at.exception, at.exception
    assert [h.value for h in at.subheader][:3] == ANSWERS
    minds, votes, confidence = (at.dataframe[n].value for n in range(3))
    assert list(minds.columns) == ["label", "protocol", "runs", "agents", "changed their mind",
                                   "persuaded", "misled",
                                   "few"]
    assert set(minds["protocol"]) == {REGISTRY["panel"].title, REGISTRY["society"].title}
    assert set(minds["label"]) == {"cheap", "careful"}
    assert all("%" in cell and "[" in cell for cell in minds["changed their mind"])
    assert all("n=" in cell for cell in minds["persuaded"])
    assert "winner's share" in votes.columns
    assert set(confidence["protocol"]) >= {REGISTRY["debate"].title}
    assert "round-one agreement" in confidence.columns
    # `few` greys a row over fewer than 5 runs; it is never shown as a column
    assert '"few"' not in at.dataframe[0].proto.column_order
    shown = json.loads(at.dataframe[0].proto.columns)
    assert shown["few"]["hidden"] is True
    captions = " ".join(c.value for c in at.caption)
    assert "agents in 4 runs" in captions and "runs ended in a vote" in captions


def test_a_new_run_is_counted_at_once_although_sections_are_cached(db):
    store_runs(db, ("vote",))
    at = open_page()
    assert {plain(m.label): plain(m.value) for m in at.metric}["Runs"] == "2"
    store_runs(db, ("vote",))
    at.run()
    assert {plain(m.label): plain(m.value) for m in at.metric}["Runs"] == "4"
