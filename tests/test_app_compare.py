"""The Compare page (AppTest, through app.py's navigation): `?compare=ID,ID` reopens a
comparison and names a missing run, the Runs page's picker and a re-run's "Compare with
original" open it, the simulated runs are labelled and hostile text stays text."""
from __future__ import annotations

from pathlib import Path

import pytest
from apptest_helpers import plain
from plugins.hostile import RUN_ID, TAG, assert_inert
from plugins.reruns import rerun
from streamlit.testing.v1 import AppTest

from engine import Store
from engine.protocols import arun_config, run_sync

APP = str(Path(__file__).resolve().parent.parent / "app.py")
HOSTILE = "<script>alert('x')</script> **bold** [link](http://evil.example)"


@pytest.fixture
def db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)  # the page's store is cached per URL
    return Store(url)


def stored(db: Store, rounds: int, label: str, question: str = "What is 6 * 7?") -> str:
    return run_sync(arun_config({"protocol": "society", "model": "simulated",
                                 "options": {"rounds": rounds}}, question, store=db,
                                label=label, expected="42")).run_id


def open_app(page: str, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(page)
    at.query_params.update(query)
    at.run()
    assert not at.exception, at.exception
    return at


def shown(at: AppTest) -> str:
    kinds = ("markdown", "caption", "text", "warning", "error", "info", "success", "code")
    return "\n".join(plain(str(e.value)) for kind in kinds for e in getattr(at, kind))


def table(at: AppTest, first_column: str):
    """The page's data frame whose first column is `first_column` ("key": the configuration
    diff, "measure": the answers, "seat": the stances)."""
    return next(frame.value for frame in at.dataframe if frame.value.columns[0] == first_column)


def on_compare_page(at: AppTest, *run_ids: str) -> None:
    assert not at.exception, at.exception
    assert at.title[0].value.endswith("Compare runs")
    assert [t.label for t in at.tabs] == ["Answers", "Configuration", "Transcripts"]
    heading = at.dataframe[0].value
    assert [run.rsplit(" · ", 1)[1] for run in heading["run"]] == list(run_ids)


def test_a_compare_url_reopens_the_comparison_and_names_a_missing_run(db):
    two, one = stored(db, 2, "two rounds"), stored(db, 1, "one round")
    at = open_app("pages/compare.py", compare=f"{two},gone123,{one}")
    on_compare_page(at, two, one)
    assert any("Run gone123 could not be shown" in plain(w.value) for w in at.warning)
    text = shown(at)
    assert "simulated" in text and "made by the offline simulated model" in text
    assert "What is 6 * 7?" in text and "the same in every run" in text
    config = table(at, "key")
    assert set(config["key"]) == {"options.rounds", "run.label"}  # only what differs
    assert "revise · round 2" in text and "—" in [t.value for t in at.text]
    assert table(at, "seat")["seat"].tolist() == ["agent 1", "agent 2", "agent 3"]
    assert any(c.value.startswith("--- 1 · ") for c in at.code)


def test_a_compare_url_without_runs_says_how_to_pick_them(db):
    at = open_app("pages/compare.py")
    assert "Pick two or more runs" in at.info[0].value
    at = open_app("pages/compare.py", compare="nope1,nope2")
    assert len(at.warning) == 2 and "None of the named runs" in at.info[0].value


def test_the_runs_page_picker_opens_the_comparison(db):
    first, second = stored(db, 1, "a"), stored(db, 2, "b")
    at = open_app("pages/runs.py")
    assert at.button(key="runs_compare_go").disabled
    at.multiselect(key="runs_compare").select(first).select(second).run()
    at.button(key="runs_compare_go").click().run()
    assert at.query_params["compare"] in (f"{first},{second}", [f"{first},{second}"])
    on_compare_page(at, first, second)


def test_a_rerun_compares_with_its_original(db):
    first = stored(db, 1, "original")
    again = rerun(db, db.get(first))["id"]
    at = open_app("pages/runs.py", run=first)
    assert not [b for b in at.button if b.key == "runs_compare_original"]
    at = open_app("pages/runs.py", run=again)
    at.button(key="runs_compare_original").click().run()
    on_compare_page(at, first, again)


def test_hostile_text_in_a_comparison_stays_text(db):
    one = stored(db, 1, HOSTILE[:60], question=HOSTILE)
    two = stored(db, 1, "plain", question="plain?")
    at = open_app("pages/compare.py", compare=f"{one},{two}")
    on_compare_page(at, one, two)
    assert "different questions" in at.warning[0].value
    markdown = "\n".join(str(e.value) for e in at.markdown)
    assert "<script>" not in markdown and "**bold**" not in markdown
    assert at.dataframe[0].value["question"].iloc[0] == HOSTILE
    labels = table(at, "key").set_index("key").loc["run.label"]
    assert HOSTILE[:60] in labels.tolist()


def test_a_comparison_of_hostile_runs_is_inert(hostile):
    """Issue 10's hostile run (its id, label, seats, question and a stance are markdown, HTML
    and directives) compared with a plain one: nothing reaches markdown unescaped."""
    at = open_app("pages/compare.py", compare=f"{hostile['vote']},{hostile['debate']}")
    on_compare_page(at, hostile["vote"], hostile["debate"])
    shown = assert_inert(at)
    assert hostile["vote"] in shown  # the simulated caption names it, escaped
    for tab in ("Configuration", "Transcripts"):
        assert tab in [t.label for t in at.tabs]
    assert any(TAG in t.value for t in at.text)  # the liar's stance, as text
    assert any(RUN_ID in c.value for c in at.code)  # the diff's header, as code
