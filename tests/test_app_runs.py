"""The Runs page (AppTest): filters narrow the history; `?run=ID` shows the run in detail."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine import Store, run_debate, run_peer_review, run_vote
from apptest_helpers import plain
from engine.services.tasks import TaskRunner
from engine.protocols.panel import run_panel

PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "runs.py")
HOSTILE = "<script>alert('x')</script> **bold** [link](http://evil.example)"


@pytest.fixture
def db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)  # the page's store is cached per URL
    return Store(url)


@pytest.fixture
def stored(db, recording_model):
    """A debate with a failing call, a peer review and a panel, on fakes and the simulated
    model."""
    pro = recording_model(["For: " + HOSTILE, RuntimeError("provider down")])
    con = recording_model(["Against, round one", "Against, round two"])
    judge = recording_model(["1. VERDICT: pro\n2. REASONING: clear\n5. CONFIDENCE: 0.8"])
    debate = run_debate("Should <b>cities</b> ban cars?", proponent=pro, opponent=con,
                        judge=judge, max_rounds=2, retries=0, store=db, label="alpha",
                        tags=["nightly"])
    review = run_peer_review("Write a haiku about tea", producer="simulated",
                             reviewer="simulated", store=db, label="beta")
    panel = run_panel("A bat and a ball cost $1.10 in total. The bat costs $1.00 more than "
                      "the ball. How much does the ball cost?", debaters=[
                          "simulated", "simulated", "simulated"],
                      critic="simulated", judge="simulated", store=db, label="beta",
                      expected="$0.05")
    return {"debate": debate, "review": review, "panel": panel}


def open_page(run_id: str | None = None) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    if run_id:
        at.query_params["run"] = run_id
    return at.run()


def open_tab(at: AppTest, name: str) -> AppTest:
    """Switch the run's detail to tab `name`, as a click on it does (only the open tab is
    drawn)."""
    at.session_state["runs_tab"] = name
    at.run()
    assert not at.exception, at.exception
    return at


def history_ids(at: AppTest) -> list[str]:
    return list(at.dataframe[0].value["id"])



def shown(at: AppTest) -> str:
    kinds = ("markdown", "caption", "text", "warning", "error", "info", "success", "metric")
    return "\n".join(plain(str(e.value)) for kind in kinds for e in getattr(at, kind))


def test_empty_store_says_how_to_start(db):
    at = open_page()
    assert not at.exception, at.exception
    assert "No runs stored yet" in at.info[0].value


def test_filters_narrow_the_history(db, stored):
    at = open_page()
    assert not at.exception, at.exception
    everything = {r.run_id for r in stored.values()}
    assert set(history_ids(at)) == everything
    assert "all" in set(at.dataframe[0].value["simulated"])

    at.selectbox(key="runs_protocol").set_value("debate").run()
    assert history_ids(at) == [stored["debate"].run_id]
    at.selectbox(key="runs_protocol").set_value("").run()
    at.selectbox(key="runs_label").set_value("beta").run()
    assert set(history_ids(at)) == {stored["review"].run_id, stored["panel"].run_id}
    at.selectbox(key="runs_label").set_value("").run()
    at.selectbox(key="runs_tag").set_value("nightly").run()
    assert history_ids(at) == [stored["debate"].run_id]
    at.selectbox(key="runs_tag").set_value("").run()
    at.text_input(key="runs_search").input("haiku").run()
    assert history_ids(at) == [stored["review"].run_id]
    at.text_input(key="runs_search").input("").run()
    at.selectbox(key="runs_model").set_value("simulated").run()
    assert set(history_ids(at)) == {stored["review"].run_id, stored["panel"].run_id}
    at.selectbox(key="runs_model").set_value("").run()
    at.selectbox(key="runs_status").set_value("failed").run()
    assert "No runs match" in at.info[0].value
    at.selectbox(key="runs_status").set_value("").run()
    at.date_input(key="runs_dates").set_value((date_of(db), date_of(db))).run()
    assert set(history_ids(at)) == everything
    assert not at.exception, at.exception


def date_of(db: Store):
    return db.runs()["created_at"].iloc[0].date()


def param(at: AppTest, name: str) -> str:
    value = at.query_params[name]
    return value[0] if isinstance(value, list) else value


def test_open_by_id_sets_the_url(db, stored):
    at = open_page()
    at.text_input(key="runs_open_id").input(stored["review"].run_id)
    next(b for b in at.button if b.label == "Open").click().run()
    assert not at.exception, at.exception
    assert param(at, "run") == stored["review"].run_id
    assert plain(at.title[0].value) == f"Peer review · run {stored['review'].run_id}"


def test_detail_shows_transcript_blocks_timeline_and_problems(db, stored):
    debate = stored["debate"]
    at = open_page(debate.run_id)
    assert not at.exception, at.exception
    assert plain(at.title[0].value) == f"Debate · run {debate.run_id}"
    text = shown(at)
    assert any("provider down" in plain(w.value) for w in at.warning)  # the problems list
    # The protocol's own blocks (verdict text, judge confidence metric), on the open tab.
    assert "pro" in [e.value for e in at.text]
    assert "Judge confidence" in text and "0.80 (high)" in text
    # Only the open tab is drawn: the transcript is a click away.
    assert not any(e.label.startswith("Prompt messages sent") for e in at.expander)
    open_tab(at, "Transcript")
    text = shown(at)
    # Every turn, its reply as plain text (st.text), the failed call's error plainly.
    replies = [e.value for e in at.text]
    assert "For: " + HOSTILE in replies and "Against, round two" in replies
    assert any("degraded: RuntimeError: provider down" in plain(e.value) for e in at.error)
    # Prompt messages sent, in expanders, read when one is opened: the opponent's round-two
    # prompt holds the debate's own text for the failed argument.
    prompts = [e for e in at.expander if e.label.startswith("Prompt messages sent")]
    assert len(prompts) == len(debate.turns)
    assert "Error: Unable to generate argument." not in text  # no prompt read yet
    for turn in debate.turns:
        at.session_state[f"runs_prompts_{turn.index}"] = True
    at.run()
    assert not at.exception, at.exception
    assert "Error: Unable to generate argument." in shown(at)
    # Phase timeline and usage charts.
    open_tab(at, "Timeline & usage")
    charts = at.get("plotly_chart")
    assert len(charts) >= 2
    # Text from models never becomes HTML or markdown.
    for element in at.markdown:
        assert "<script>" not in element.value and "](http" not in element.value
    assert at.download_button[0].label.startswith("⬇️ Export JSON")


def test_detail_of_a_panel_has_tally_flows_and_confidence(db, stored):
    panel = stored["panel"]
    at = open_page(panel.run_id)
    assert not at.exception, at.exception
    text = shown(at)
    assert "simulated" in text
    level = panel.confidence.level
    assert f"**Outcome:** {panel.tally.winner} ({level}," in text
    # The confidence with its reason comes from the panel's own view blocks.
    assert f"{level.upper()}: {panel.confidence.reason}" in text
    assert len(at.get("vega_lite_chart")) >= 2  # two tallies (Vega-Lite bars)
    assert len(at.get("plotly_chart")) >= 1  # and the flows (a plotly Sankey)
    assert [h.value for h in at.subheader if h.value in ("Tally", "Mind changes")] == \
        ["Tally", "Mind changes"]
    open_tab(at, "Timeline & usage")
    assert len(at.get("plotly_chart")) >= 2  # timeline and usage


def test_unknown_run_says_so(db, stored):
    at = open_page("nope")
    assert not at.exception, at.exception
    assert "no run" in at.error[0].value


def test_delete_asks_first_then_removes_the_run(db, stored):
    review = stored["review"].run_id
    at = open_page(review)
    at.button(key="runs_delete_ask").click().run()
    assert db.exists(review)
    assert any("cannot be undone" in w.value for w in at.warning)
    at.button(key="runs_delete_no").click().run()
    assert db.exists(review) and not any("cannot be undone" in w.value for w in at.warning)
    at.button(key="runs_delete_ask").click().run()
    at.button(key="runs_delete_yes").click().run()
    assert not at.exception, at.exception
    assert not db.exists(review)
    assert "run" not in at.query_params
    assert any(f"Deleted run {review}" in plain(s.value) for s in at.success)


def test_rerun_starts_the_same_configuration(db, stored):
    review = stored["review"]
    at = open_page(review.run_id)
    at.button(key="runs_rerun").click().run()
    assert not at.exception, at.exception
    new_id = param(at, "run")
    assert new_id != review.run_id
    assert TaskRunner(db).wait(new_id, timeout=60) == "completed"
    old, new = db.get(review.run_id), db.get(new_id)
    assert new["config"] == old["config"] and new["question"] == old["question"]
    assert new["label"] == "beta"


def test_a_simulated_run_shows_the_world_it_was_made_in(db):
    vote = run_vote("How much does the ball cost?", voters=[
        "simulated?skill=0.5&seed=2", "simulated?skill=0.5&seed=2", "simulated"],
        store=db, expected="0.05")
    text = shown(open_page(vote.run_id))
    assert "only truth is the run's expected answer" in text
    # two worlds: each line names the seats that lived in it
    seats = [s["name"] for s in db.get(vote.run_id)["config"]["seats"]["voters"]]
    assert (f"simulated world: {seats[0]}, {seats[1]}: skill 0.5 · conformity 0.3 · "
            "persuasion 0.4 · seed 2") in text
    assert f"simulated world: {seats[2]}: skill 0.7 · conformity 0.3 · persuasion 0.4 · " \
        "seed 0" in text


def test_the_runs_list_opens_on_outcome_confidence_and_mind_changes(tmp_path, monkeypatch):
    """The answers an analyst reads first come before the wide question column: the
    outcome, the confidence and the measured mind changes, sortable numbers."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from engine import Store
    from engine.protocols.panel import run_panel
    from engine.protocols.personas import panel_seats
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    result = run_panel("What is 17 * 3?", **panel_seats(), expected="51", store=Store(url))
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"),
                           default_timeout=120).run()
    at.switch_page("pages/runs.py").run()
    assert not at.exception, at.exception
    table = at.dataframe[0]
    order = list(table.proto.column_order)
    # right after the run and its label, so that all four fit at 1280 px
    # (tests/test_browser_answers.py looks in a browser)
    assert order[:6] == ["open", "label", "outcome", "confidence", "mind changes", "correct"]
    assert order.index("outcome") < order.index("confidence") < order.index(
        "mind changes") < order.index("question")
    row = table.value.iloc[0]
    assert row["confidence"] == result.confidence.level
    assert row["mind changes"] == len(result.mind_changes)
