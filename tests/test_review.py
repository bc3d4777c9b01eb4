"""The Review page (AppTest, through app.py's navigation): the queue pairs runs of one
question and kind under two configurations, nothing that names a configuration reaches the
page, the side each run was shown on is the side recorded, and progress counts the pairs."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from apptest_helpers import everything, plain
from streamlit.testing.v1 import AppTest

from engine import Store, run_debate, run_vote
from engine.models import Seat
from engine.reports import review

APP = str(Path(__file__).resolve().parent.parent / "app.py")
QUESTION = "Which plan is better for the town?"
PERSONA = "You are a cautious economist who distrusts every forecast."


@pytest.fixture
def db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    return Store(url)


def debate(db, label, seed, question=QUESTION):
    spec = f"simulated?seed={seed}"
    return run_debate(question, proponent=Seat("Athena", spec, persona=PERSONA),
                      opponent=Seat("Boreas", spec), judge=Seat("Cassius", spec),
                      max_rounds=1, store=db, label=label).run_id


def vote(db, label, seed, question=QUESTION):
    spec = f"simulated?seed={seed}"
    return run_vote(question, voters=[Seat("Delphi", spec), Seat("Eos", spec)], store=db,
                    label=label).run_id


def open_review() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/review.py")
    at.run()
    assert not at.exception, at.exception
    return at


def page_text(at: AppTest) -> str:
    kinds = ("title", "subheader", "markdown", "caption", "text", "warning", "error", "info",
             "success", "code")
    parts = [str(e.value) for kind in kinds for e in getattr(at, kind)]
    parts += [str(b.label) for b in at.button] + [str(t.label) for t in at.text_area]
    parts += [str(p.proto.text) for p in at.get("progress")]
    return plain("\n".join(parts))


def answers_shown(at: AppTest) -> tuple[str, str]:
    behind = {str(t.value) for e in at.expander for t in e.text}  # the reasoning, collapsed
    texts = [str(t.value) for t in at.text if str(t.value) not in behind]
    return texts[1], texts[2]  # the question, then A (left) and B (right)


def test_each_answer_has_its_reasoning_collapsed_and_the_page_says_where_judgements_go(db):
    a, b = debate(db, "alpha-config", 3), vote(db, "beta-config", 7)
    at = open_review()
    reasons = {e.label: [str(t.value) for t in e.text] for e in at.expander}
    assert set(reasons) == {"The reasoning behind A", "The reasoning behind B"}
    assert all(not e.proto.expanded for e in at.expander)  # collapsed until opened
    hide = review.names(db.get(a)) | review.names(db.get(b))
    wanted = {review.blinded(review.reasoning(db.get(i)), hide) for i in (a, b)}
    assert {texts[0] for texts in reasons.values()} == wanted
    assert db.get(a)["result"]["reasoning"] in {review.reasoning(db.get(a))}  # the judge's
    assert "Insights" in page_text(at) and "with the two runs" in page_text(at)


def test_the_queue_pairs_one_question_and_kind_under_two_configurations(db):
    a = debate(db, "alpha-config", 3)
    b = vote(db, "beta-config", 7)
    debate(db, "alpha-config", 4, question="Another question?")  # alone on its question
    real_like = db.runs()
    pairs = review.queue(real_like)
    assert [(p.run_a, p.run_b) for p in pairs] == [(a, b)]
    newer = debate(db, "alpha-config", 5)  # the newest run of a configuration stands for it
    assert [(p.run_a, p.run_b) for p in review.queue(db.runs())] == [(newer, b)]
    # a simulated run is never paired with a real one
    runs = db.runs()
    runs.loc[runs["id"] == b, "simulated"] = False
    assert review.queue(runs) == []


def test_the_page_shows_no_name_of_either_configuration(db):
    a, b = debate(db, "alpha-config", 3), vote(db, "beta-config", 7)
    at = open_review()
    shown = page_text(at)
    assert "Pair 1 of 1" in shown and "0 of 1 pairs judged" in shown
    hidden = {"alpha-config", "beta-config", "debate", "vote", "Athena", "Boreas", "Cassius",
              "Delphi", "Eos", "proponent", "opponent", "judge", "voters", "seed=3", "seed=7",
              "simulated?seed", PERSONA, a, b}
    for run_id in (a, b):
        run = db.get(run_id)
        hidden |= {t["seat"] for t in run["turns"]} | {t["model"] for t in run["turns"]}
        hidden.add(run["models"])
    leaked = sorted(n for n in hidden if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", shown,
                                                   re.IGNORECASE))
    assert leaked == [], leaked
    assert QUESTION in shown
    # the answers themselves are there, as text
    left, right = answers_shown(at)
    assert {left, right} == {review.blinded(review.final_answer(db.get(i)),
                                            review.names(db.get(a)) | review.names(db.get(b)))
                             for i in (a, b)}


def test_a_seat_name_inside_an_answer_is_hidden():
    run = {"label": "alpha", "protocol": "debate", "models": "openai:gpt-x",
           "config": {"seats": {"judge": [{"name": "Athena", "model": "openai:gpt-x"}]}},
           "turns": [{"seat": "Athena", "model": "openai:gpt-x"}]}
    text = "ATHENA wins; openai:gpt-x agrees, the judge says Athenaeum is fine (alpha)."
    assert review.blinded(text, review.names(run)) == \
        "[hidden] wins; [hidden] agrees, the [hidden] says Athenaeum is fine ([hidden])."


@pytest.mark.parametrize("button, expected", [(0, "left"), (1, "right"), (2, "tie")])
def test_the_side_shown_is_the_side_recorded(db, button, expected):
    a, b = debate(db, "alpha-config", 3), vote(db, "beta-config", 7)
    answer = {i: review.blinded(review.final_answer(db.get(i)),
                                review.names(db.get(a)) | review.names(db.get(b)))
              for i in (a, b)}
    at = open_review()
    left, right = answers_shown(at)
    drawn = at.session_state["review_draws"][f"{a}:{b}"]
    left_run = a if drawn == "a" else b
    assert answer[left_run] == left  # what was drawn is what was shown on the left
    at.text_area[0].input("the left one cites its sources")
    at.button[button].click()
    at.run()
    assert not at.exception, at.exception
    prefs = db.preferences()
    assert len(prefs) == 1
    row = prefs.iloc[0]
    assert (row["run_a"], row["run_b"], row["shown_left"]) == (a, b, drawn)
    assert row["comment"] == "the left one cites its sources"
    # one name per person: without sign-in the rater is "local", as a page run's started_by
    # (it used to be the server's operating-system user)
    assert row["rater"] == "local"
    winner = {"a": a, "b": b}.get(row["choice"])
    if expected == "tie":
        assert row["choice"] == "tie"
    else:
        assert winner == (left_run if expected == "left" else ({a, b} - {left_run}).pop())
    assert "1 of 1 pairs judged" in page_text(at) and "All 1 pairs judged" in page_text(at)


def test_both_sides_are_drawn_and_progress_counts(db):
    """Over several pairs both sides come up on the left, and the queue moves on."""
    ids = [debate(db, f"config-{n}", n) for n in range(4)]  # 6 pairs on one question
    at = open_review()
    total = 6
    for done in range(total):
        assert f"{done} of {total} pairs judged" in page_text(at)
        at.button[2].click()
        at.run()
        assert not at.exception, at.exception
    assert f"All {total} pairs judged" in page_text(at)
    prefs = db.preferences()
    assert len(prefs) == total and set(prefs["choice"]) == {"tie"}
    assert set(prefs["run_a"]) | set(prefs["run_b"]) == set(ids)
    assert set(prefs["shown_left"]) <= {"a", "b"}
    if len(set(prefs["shown_left"])) == 1:
        pytest.skip("all six draws fell on one side (p = 1/32)")


def test_a_run_and_a_turn_are_rated_from_its_detail(db):
    run_id = debate(db, "alpha-config", 3)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/runs.py")
    at.query_params["run"] = run_id
    at.run()
    assert not at.exception, at.exception
    at.radio(key=f"rate-score-{run_id}").set_value(5)
    at.text_area(key=f"rate-comment-{run_id}").input("<b>clear</b> verdict")
    at.button[[b.label for b in at.button].index("Save rating")].click()
    at.run()
    assert not at.exception, at.exception
    at.selectbox(key=f"rate-target-{run_id}").set_value(1)
    at.radio(key=f"rate-score-{run_id}").set_value(2)
    at.button[[b.label for b in at.button].index("Save rating")].click()
    at.run()
    ratings = db.ratings()
    assert list(ratings["score"]) == [5, 2]
    assert ratings["turn"].isna().tolist() == [True, False]
    assert ratings["turn"].iloc[1] == db.get(run_id)["turns"][0]["idx"]
    assert ratings["comment"].iloc[0] == "<b>clear</b> verdict"
    table = next(f.value for f in at.dataframe if "score" in f.value.columns)
    assert list(table["score"]) == [5, 2] and list(table["turn"])[0] == "the whole run"


def test_hostile_question_and_answers_stay_text(db):
    hostile = "<img src=x onerror=alert(1)> **bold** [link](http://evil.example)"
    debate(db, "alpha-config", 3, question=hostile)
    vote(db, "beta-config", 7, question=hostile)
    at = open_review()
    assert hostile in [str(t.value) for t in at.text]  # st.text: never markdown or HTML
    assert not any("<img" in str(m.value) for m in at.markdown)


def test_no_run_id_and_no_configuration_order_reaches_the_page(db):
    """The widget keys used to be `review-a-<run_a>:<run_b>`, `run_a` the label sorting
    first: the page's HTML named both runs, in the configurations' order."""
    a, b = debate(db, "alpha-config", 3), vote(db, "beta-config", 7)
    at = open_review()
    sent = everything(at)
    assert "Pair 1 of 1" in sent
    assert a not in sent and b not in sent
    keys = [str(w.key) for w in [*at.button, *at.text_area]]
    assert all(a not in k and b not in k for k in keys), keys
    again = open_review()  # another session: other keys
    assert {str(w.key) for w in again.button}.isdisjoint(keys)


def test_the_page_says_where_a_judgement_goes(db):
    debate(db, "alpha-config", 3), vote(db, "beta-config", 7)
    shown = page_text(open_review())
    assert "stored in this database under your name (local)" in shown
    assert "human win rate by configuration" in shown and "Cohen's kappa" in shown
    assert "replaces your earlier one" in shown


@pytest.mark.parametrize("text, leaked", [
    ("As gpt-4o-mini, I would say 42.", "gpt-4o-mini"),
    ("As GPT-4o mini, I would say 42.", "GPT"),
    ("I am Claude, made by Anthropic. The answer is 42.", "Claude"),
    ("I am Claude, made by Anthropic. The answer is 42.", "Anthropic"),
    ("Served by the lab endpoint: 42.", "lab"),
    ("claude-3-5-sonnet says 42", "claude-3-5-sonnet"),
    ("Gemini, Llama, Mistral and Qwen agree: 42.", "Qwen"),
])
def test_a_model_naming_itself_is_hidden(text, leaked):
    runs = [{"label": "x", "protocol": "vote", "models": "openai:gpt-4o-mini?endpoint=lab",
             "config": {}, "turns": []},
            {"label": "y", "protocol": "vote",
             "models": "anthropic:claude-3-5-sonnet-20241022", "config": {}, "turns": []}]
    hide = review.names(runs[0]) | review.names(runs[1])
    shown = review.blinded(text, hide)
    assert not re.search(rf"(?<!\w){re.escape(leaked)}(?!\w)", shown, re.IGNORECASE), shown
    assert "42" in shown
