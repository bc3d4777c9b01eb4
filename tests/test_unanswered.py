"""Scoring when a configuration fails to answer (DESIGN 4; issue 39, bullet 5).

A run given an expected answer that produced no answer is wrong and `unanswered`, inside every
accuracy's denominator, with the count shown beside it; a reply declaring several different
answers declares none (a warning on its turn); a completed run none of whose decisive calls
gave a usable reply is `degraded_run`. The reply path is real HTTP to a loopback
OpenAI-compatible server (`openai_stub.SimulatedOpenAI`) whose replies a test rewrites.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from conftest import applied_migrations
from hypothesis import given, settings
from hypothesis import strategies as st
from openai_stub import SimulatedOpenAI, _Handler, loopback_only
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.analysis.answers import DECLARED_MAX, declared_answers, extract_answer, hedge
from engine.cli.main import main
from engine.protocols import REGISTRY, arun_config, run_sync
from engine.reports import insights
from engine.reports.experiments import report
from engine.reports.runs import history_table
from engine.store import RunFilters
from engine.store import Store as BareStore

APP = str(Path(__file__).resolve().parent.parent / "app.py")
HEDGE = "Let me work it out.\nANSWER: 41\nANSWER: 43\nANSWER: 42"  # the right one last
QUESTION, EXPECTED = "What is 40 plus 2?", "42"


class _Rewriting(_Handler):
    def _answer(self, number, body, content, usage):
        super()._answer(number, body, self.server.rewrite(body, content), usage)


class Rewriting(SimulatedOpenAI):
    """The simulated OpenAI-compatible server, each reply's text replaced by
    `rewrite(request body, the reply it would have sent)`."""

    def __init__(self, rewrite, **kw):
        super().__init__(**kw)
        self.RequestHandlerClass = _Rewriting
        self.rewrite = rewrite


@pytest.fixture(autouse=True)
def loopback(monkeypatch):
    loopback_only(monkeypatch, "OPENAI_API_KEY", "OPENAI_BASE_URL", "PARLEY_ENDPOINTS")


def prompt(body) -> str:
    return "\n".join(m["content"] for m in body["messages"])


def model(server, name: str = "m") -> str:
    return f"openai:{name}?grammar=off&base_url={server.base_url}"


def run(protocol: str, seats: dict, store: Store, **kw):
    return run_sync(arun_config({"protocol": protocol, "seats": seats}, QUESTION, store=store,
                                expected=EXPECTED, retries=0, timeout_per_call=60, **kw))


def seats_of(protocol: str, spec: str) -> dict:
    two = [{"name": "a", "model": spec}, {"name": "b", "model": spec}]
    return {"single": {"agent": [{"model": spec}]},
            "society": {"agents": two},
            "council": {"members": two, "chairman": [{"name": "chair", "model": spec}]},
            "vote": {"voters": [*two, {"name": "c", "model": spec}]}}[protocol]


# --------------------------------------------------------------------------- hedges
@pytest.mark.parametrize("protocol", ["single", "society", "council"])
def test_a_hedge_with_the_right_answer_last_is_wrong_unanswered_and_warned(protocol, store):
    """`ANSWER: 41 / 43 / 42` used to score right (the last line was read) in all three."""
    with Rewriting(lambda body, content: HEDGE) as server:
        result = run(protocol, seats_of(protocol, model(server)), store)
    assert result.final_answer() is None
    assert result.correct is False and result.unanswered
    hedged = [t for t in result.turns if t.phase != "rank"]  # a council's rankers are not asked
    assert hedged and all(
        any("3 different answers ('41', '43', '42')" in w for w in t.warnings) for t in hedged)
    row = store.get(result.run_id)
    assert row["correct"] is False and row["unanswered"] is True
    assert row["status"] == "completed" and row["degraded_run"]  # its answer is lost too
    if protocol == "society":
        assert result.confidence is not None and result.confidence.level != "high"


def test_a_reply_saying_one_answer_in_several_forms_is_no_hedge(store):
    reply = "It is 42.\n\\boxed{42}\nANSWER: $42.00\n> ANSWER: 41 (what the other agent said)"
    with Rewriting(lambda body, content: reply) as server:
        result = run("single", seats_of("single", model(server)), store)
    assert result.answer == "42" and result.correct is True and not result.unanswered
    assert result.turns[0].warnings == []


def test_a_ballot_whose_stance_hedges_abstains_and_a_vote_of_them_has_no_answer(store):
    ballot = json.dumps({"stance": "\\boxed{41} or \\boxed{42}", "answer": "one of them",
                         "reasoning": "unsure"})
    with Rewriting(lambda body, content: ballot) as server:
        result = run("vote", seats_of("vote", model(server)), store)
    assert result.tally.winner is None and result.tally.positions == 0
    assert all(any("2 different answers" in w for w in t.warnings) for t in result.turns)
    row = store.get(result.run_id)
    assert (row["correct"], row["unanswered"], row["degraded_run"]) == (False, True, True)
    assert row["lost"] == "every ballot"


# --------------------------------------------------------------------------- degraded runs
def test_a_vote_with_no_readable_ballot_is_degraded_and_unanswered(store):
    """Unreadable JSON, re-asked once: half the turns are ok, so the old rule (more than half
    degraded) stored it `completed`, not degraded, and unscored."""
    with Rewriting(lambda body, content: "I would rather explain in prose.") as server:
        result = run("vote", seats_of("vote", model(server)), store)
    row = store.get(result.run_id)
    assert row["status"] == "completed" and row["degraded_run"] and row["lost"] == "every ballot"
    assert row["correct"] is False and row["unanswered"] is True
    assert sum(t["status"] == "ok" for t in row["turns"]) * 2 == len(row["turns"])


def test_a_council_whose_chairman_returns_nothing_usable_is_degraded_and_unanswered(store):
    def reply(body, content):
        return "Hmm." if "chairman of a council" in prompt(body) else content
    with Rewriting(reply) as server:
        result = run("council", seats_of("council", model(server)), store)
    chair = [t for t in result.turns if t.phase == "chair"]
    assert len(chair) == 1 and chair[0].ok  # the call succeeded; it gave no answer
    row = store.get(result.run_id)
    assert row["status"] == "completed" and row["degraded_run"] and row["lost"] == "the chairman"
    assert row["correct"] is False and row["unanswered"] is True
    assert "no ANSWER line" in " ".join(result.warnings)


def test_a_run_that_answered_is_neither_degraded_nor_unanswered(store):
    with Rewriting(lambda body, content: "The sum is \\boxed{42}.") as server:
        result = run("single", seats_of("single", model(server)), store)
    row = store.get(result.run_id)
    assert (row["correct"], row["unanswered"], row["degraded_run"]) == (True, False, False)


def test_a_protocol_that_gives_no_answer_stays_unscored(store):
    """A duel of prose gives no short answer: nothing to score, not an unanswered run."""
    result = run_sync(arun_config({"protocol": "duel"}, QUESTION, store=store,
                                  expected=EXPECTED))
    assert result.correct is None and not result.unanswered
    assert store.get(result.run_id)["unanswered"] is False


# --------------------------------------------------------------------------- the experiment
QUESTIONS = [{"question": f"What is {i} plus {i}?", "expected": str(2 * i)} for i in range(8)]


def _experiment_reply(body, content):
    """`answers` answers 6 of 8 right (its voters agree); `unreadable` answers question 0
    right and sends prose instead of a ballot on the other 7."""
    i = int(re.search(r"What is (\d+) plus", prompt(body)).group(1))
    if body["model"] == "answers":
        value = 2 * i if i < 6 else 2 * i + 1
        return json.dumps({"stance": str(value), "answer": f"{value}.", "reasoning": "adding"})
    if i == 0:
        return json.dumps({"stance": "0", "answer": "0.", "reasoning": "adding"})
    return "I prefer to answer in prose, without any JSON."


@pytest.fixture
def failing_config(tmp_path, monkeypatch):
    """An experiment (stored in a fresh SQLite file, PARLEY_DB_URL) of the two: the store
    URL and the experiment's id."""
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    store = Store(url)
    with Rewriting(_experiment_reply) as server:
        configs = [{"protocol": "vote", "label": label, "retries": 0,
                    "model": f"openai:{label}?grammar=off", "base_url": server.base_url}
                   for label in ("answers", "unreadable")]
        experiment_id = ex.create(store, ex.plan({"name": "who answers", "repeats": 1,
                                                  "questions": QUESTIONS, "configs": configs},
                                                 store))
        assert ex.run_experiment(store, experiment_id).status == "completed"
    return url, experiment_id


def test_a_failing_configuration_ranks_below_the_answering_one(failing_config):
    url, experiment_id = failing_config
    summary = report(Store(url), experiment_id).summary.set_index("configuration")
    answers, unreadable = summary.loc["answers"], summary.loc["unreadable"]
    assert (answers["scored"], answers["correct"], answers["unanswered"]) == (8, 6, 0)
    assert (unreadable["scored"], unreadable["correct"], unreadable["unanswered"]) == (8, 1, 7)
    assert answers["accuracy"] == pytest.approx(6 / 8)
    assert unreadable["accuracy"] == pytest.approx(1 / 8)  # was 100% (1 scored of 8)
    assert unreadable["degraded"] == 7 and answers["degraded"] == 0
    assert unreadable["accuracy [95% CI] n"].endswith("n=8")
    assert not unreadable["few"]
    questions = report(Store(url), experiment_id).questions
    assert questions["unreadable"].tolist()[1] == "0/1 right, 1 unanswered"


def test_experiment_show_prints_the_unanswered_count(failing_config, capsys):
    url, experiment_id = failing_config
    capsys.readouterr()
    assert main(["experiment", "show", experiment_id, "--db", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("configuration"))
    header, rows = lines[at], lines[at + 1:at + 3]  # the summary table's two rows
    end = header.index("unanswered") + len("unanswered")  # its values are aligned right
    shown = {row.split()[0]: row[:end].rsplit(None, 1)[-1] for row in rows}
    assert shown == {"answers": "0", "unreadable": "7"}
    assert "12% [2%–47%] n=8" in rows[1] and "75% [41%–93%] n=8" in rows[0]


def test_the_shared_html_shows_the_unanswered_count(failing_config, tmp_path):
    url, experiment_id = failing_config
    out = tmp_path / "shared.html"
    assert main(["share", experiment_id, "--experiment", "--out", str(out), "--db", url]) == 0
    document = out.read_text(encoding="utf-8")
    head = re.search(r"<h2>Summary</h2>\s*<table><thead><tr>(.*?)</tr>", document).group(1)
    columns = re.findall(r"<th>(.*?)</th>", head)
    assert "unanswered" in columns
    rows = re.findall(r"<tr>(<td>.*?)</tr>", document.split("<h2>Summary</h2>", 1)[1])
    cells = {re.findall(r"<td>(.*?)</td>", r)[0]: re.findall(r"<td>(.*?)</td>", r)
             for r in rows[:2]}
    assert cells["unreadable"][columns.index("unanswered")] == "7"
    assert cells["answers"][columns.index("unanswered")] == "0"


def test_the_experiments_page_shows_the_unanswered_count(failing_config):
    url, experiment_id = failing_config
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/experiments.py")
    at.query_params["experiment"] = experiment_id
    at.run()
    assert not at.exception, at.exception
    summary = next(t.value for t in [*at.table, *at.dataframe]
                   if {"configuration", "unanswered"} <= set(t.value.columns)
                   and any(str(c).startswith("accuracy") for c in t.value.columns))
    shown = dict(zip(summary["configuration"].map(str), summary["unanswered"].map(str),
                     strict=True))
    assert {k.replace("\\", ""): v for k, v in shown.items()} == {"answers": "0",
                                                                  "unreadable": "7"}


# --------------------------------------------------------------------------- every table
def test_insights_accuracy_counts_unanswered_runs_as_wrong_and_says_how_many(store):
    with Rewriting(lambda body, content: HEDGE) as server:
        run("single", seats_of("single", model(server)), store)
    with Rewriting(lambda body, content: "\\boxed{42}") as server:
        run("single", seats_of("single", model(server)), store)
    for section in (insights.report_from_store(store, RunFilters(), only=["accuracy"])[0],
                    insights.accuracy_of(insights.load_summary(store, RunFilters()))):
        metrics = dict(section.metrics)
        assert metrics["Scored runs"] == "2" and metrics["Unanswered"] == "1"
        assert metrics["Correct"].startswith("50% ")
        assert section.table["unanswered"].tolist() == [1]


def test_the_runs_table_and_the_cli_say_unanswered(store, capsys, tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with Rewriting(lambda body, content: HEDGE) as server:
        capsys.readouterr()
        assert main(["run", "single", QUESTION, "--model", model(server), "--expected",
                     EXPECTED, "--db", url]) == 0
    printed = capsys.readouterr().out
    assert f"expected {EXPECTED}: wrong: unanswered (it gave no answer)" in printed
    assert "warning: round 1: several different answers declared" in printed
    assert main(["runs", "--db", url]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert "score" in listed[0].split() and "unanswered" in listed[1].split()
    stored = Store(url)
    table = history_table(stored.runs())
    assert table["unanswered"].tolist() == [True] and table["correct"].tolist() == [False]
    assert main(["show", stored.runs()["id"].iloc[0], "--db", url]) == 0
    assert f"expected {EXPECTED}: wrong: unanswered" in capsys.readouterr().out


# --------------------------------------------------------------------------- migration 0023
def test_migration_0023_scores_older_unanswered_runs(backend):
    """A run stored before the flag, given an expected answer and left with no answer
    (`correct` NULL), is scored wrong and unanswered; an answered, an unscored (no expected
    answer) and a duel run are left as they were."""
    made = {}
    for name, protocol, expected in (("silent", "vote", "42"), ("answered", "vote", "42"),
                                     ("open", "vote", None), ("duel", "duel", "42")):
        result = run_sync(arun_config({"protocol": protocol}, QUESTION, store=backend,
                                      expected=expected))
        made[name] = result.run_id
    with backend.engine.begin() as connection:  # as 0017 left the silent run
        connection.execute(text("UPDATE runs SET correct = NULL WHERE id = :i"),
                           {"i": made["silent"]})
        connection.execute(text("DROP INDEX IF EXISTS ix_runs_summary"))
        connection.execute(text("ALTER TABLE runs DROP COLUMN unanswered"))
        connection.execute(text("DELETE FROM schema_migrations WHERE name = '0023_unanswered'"))
    backend.engine.dispose()
    reopened = Store(backend.url)  # migrated, then back-filled by the protocols
    assert reopened.migrate() == []
    rows = {name: reopened.get(run_id) for name, run_id in made.items()}
    assert (rows["silent"]["correct"], rows["silent"]["unanswered"]) == (False, True)
    assert rows["answered"]["unanswered"] is False and rows["answered"]["correct"] is not None
    assert (rows["open"]["correct"], rows["open"]["unanswered"]) == (None, False)
    assert (rows["duel"]["correct"], rows["duel"]["unanswered"]) == (None, False)
    summary = reopened.run_summary()
    assert int(summary["unanswered"].sum()) == 1


def test_the_store_alone_leaves_the_back_fill_to_the_protocols(backend, tmp_path):
    """The store knows no protocol: reopened by the store alone, migration 0023 adds its
    column and notes its back-fill, and the old unscored run stays as it was; the protocols'
    side does the back-fill once (`Store.backfill` given the registry), and a new database notes none."""
    silent = run_sync(arun_config({"protocol": "vote"}, QUESTION, store=backend,
                                  expected="42")).run_id
    with backend.engine.begin() as connection:  # as 0017 left it
        connection.execute(text("UPDATE runs SET correct = NULL WHERE id = :i"), {"i": silent})
        connection.execute(text("DROP INDEX IF EXISTS ix_runs_summary"))
        connection.execute(text("ALTER TABLE runs DROP COLUMN unanswered"))
        connection.execute(text("DELETE FROM schema_migrations WHERE name = '0023_unanswered'"))
    backend.engine.dispose()
    alone = BareStore(backend.url)  # the store layer alone (the public Store back-fills)
    assert "0023_unanswered" in applied_migrations(alone)
    assert (alone.get(silent)["correct"], alone.get(silent)["unanswered"]) == (None, False)
    assert alone.backfill(REGISTRY) == ["0023_unanswered"]
    assert (alone.get(silent)["correct"], alone.get(silent)["unanswered"]) == (False, True)
    assert alone.backfill(REGISTRY) == []  # done once
    fresh = BareStore(f"sqlite:///{tmp_path / 'fresh.db'}")
    run_sync(arun_config({"protocol": "vote"}, QUESTION, store=fresh, expected="42"))
    assert fresh.backfill(REGISTRY) == []


# --------------------------------------------------------------------------- the reading
@pytest.mark.parametrize(("reply", "declared"), [
    ("ANSWER: 41\nANSWER: 43\nANSWER: 42", ["41", "43", "42"]),
    ("\\boxed{41} first, then \\boxed{42}", ["41", "42"]),
    ("STANCE: adopt\nSTANCE: reject", ["adopt", "reject"]),
    ("ANSWER: $42\n\\boxed{42.00}\nFinal answer: 42", ["42.00"]),  # one answer, 3 ways
    ("> ANSWER: 41\nANSWER: 42", ["42"]),  # a quoted line is someone else's
    ("ANSWER:\n42\nANSWER: 42", ["42"]),  # a label alone takes the next line
    ("ANSWER: not sure\nANSWER: 42", ["42"]),  # a declaration of no answer is none
    ("The answer is 41, no, 42.", []),  # prose declares nothing
])
def test_declared_answers(reply, declared):
    assert declared_answers(reply) == declared
    assert bool(hedge(reply)) == (len(declared) > 1)
    if len(declared) > 1:
        assert extract_answer(reply) is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["ANSWER: ", "STANCE: ", "\\boxed{", "}", "> ", "\n", "41",
                                 "42", "$42", "42.0", "x", "{", "FINAL ANSWER:", " ", "1."]),
                max_size=40))
def test_any_reply_is_read_without_error_and_a_hedge_names_its_answers(parts):
    reply = "".join(parts)
    found = declared_answers(reply)
    assert len(found) <= DECLARED_MAX and len(set(found)) == len(found)
    why = hedge(reply)
    assert bool(why) == (len(found) > 1)
    if why:
        assert extract_answer(reply) is None
        assert all(repr(value[:40]) in why for value in found[:DECLARED_MAX - 1])


@pytest.mark.parametrize("reply", [
    "ANSWER: x\n" * 100_000, "\\boxed{" * 100_000, "\\boxed{\\boxed{" * 50_000,
    "".join(f"ANSWER: {i}\n" for i in range(50_000)), "ANSWER:\n" * 100_000])
def test_a_huge_reply_is_read_in_linear_time(reply):
    began = time.monotonic()
    hedge(reply)
    extract_answer(reply)
    # a quadratic reading of these takes minutes; 10 s leaves room for a loaded machine
    assert time.monotonic() - began < 10.0
