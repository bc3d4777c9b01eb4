"""The background-task runner: runs, re-runs, experiments and the demo complete and are stored,
stop as asked, start once, and two runners on two stores share nothing."""
from __future__ import annotations

import pytest
from waiting import wait_for

from engine import REGISTRY, ConfigError, Store
from engine import experiments as ex
from engine.questions import DEFINITE
from engine.reports import leaderboard as lb
from engine.reports import review
from engine.services.demo import STRONG, WEAK, demo_plan
from engine.services.live import TurnFeed
from engine.services.tasks import DEMO, TaskRunner

DEBATE = {"protocol": "debate", "model": "simulated", "options": {"max_rounds": 2}}
SLOW = {"protocol": "debate", "model": "simulated?latency=0.25", "options": {"max_rounds": 10}}
GENEROUS = 120.0  # seconds; only a hung run ever waits this long
QUESTIONS = [{"question": q.text, "expected": q.expected} for q in DEFINITE[:4]]


def test_a_run_completes_and_is_stored(store):
    tasks = TaskRunner(store)
    run_id = tasks.start_run(DEBATE, "Should we adopt tabs?", label="bg", tags=["t"], retries=0)
    assert store.exists(run_id)  # the row exists as soon as start returns
    assert tasks.wait(run_id, GENEROUS) == "completed"
    run = store.get(run_id)
    assert run["label"] == "bg" and run["tags"] == ["t"]
    assert len(run["turns"]) == 5 and run["result"]["verdict"]
    progress = tasks.progress(run_id)
    assert progress["status"] == "completed"
    assert progress["calls_done"] == progress["estimated_calls"] == 5
    assert progress["fraction"] == 1.0
    assert [t["idx"] for t in progress["turns"]] == [t["idx"] for t in run["turns"]]
    assert run_id not in tasks.live()


@pytest.mark.parametrize("protocol", list(REGISTRY))
def test_a_run_stores_its_configuration_as_a_direct_run_does(store, protocol):
    from engine.protocols import arun_config, run_sync
    config = {"protocol": protocol, "model": "simulated"}
    tasks = TaskRunner(store)
    background = tasks.start_run(config, "Same config?")
    tasks.wait(background, GENEROUS)
    direct = run_sync(arun_config(config, "Same config?", store=store)).run_id
    assert store.get(background)["config"] == store.get(direct)["config"]


def test_bad_configuration_raises_before_any_run(store):
    tasks = TaskRunner(store)
    with pytest.raises(ConfigError, match="max_rounds"):
        tasks.start_run({"protocol": "debate", "options": {"max_rounds": 0}}, "Q?")
    with pytest.raises(ConfigError, match="topic"):
        tasks.start_run(DEBATE, "   ")
    with pytest.raises(ConfigError, match="no option"):
        tasks.start_run({"protocol": "debate", "options": {"rounds": 2}}, "Q?")
    with pytest.raises(ConfigError, match="has no option 'colour'"):
        tasks.start_run(DEBATE, "Q?", colour="red")
    assert store.runs().empty  # a refused run leaves no row
    assert tasks.live() == []


def test_stop_interrupts_and_keeps_completed_turns(store):
    tasks = TaskRunner(store)
    run_id = tasks.start_run(SLOW, "Should we stop?")
    wait_for(lambda: len(store.turns(run_id)) >= 2)
    assert run_id in tasks.live()
    assert tasks.stop(run_id) is True
    assert tasks.wait(run_id, GENEROUS) == "interrupted"
    run = store.get(run_id)
    assert run["status"] == "interrupted"
    assert 2 <= len(run["turns"]) < 21  # what was done is kept; the rest never ran
    assert all(turn["reply"] for turn in run["turns"])
    assert tasks.task(run_id).error == ""  # it stopped as asked
    assert tasks.stop(run_id) is False  # nothing left to stop


def test_another_runner_on_the_same_database_reads_and_stops_a_run(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    first = TaskRunner(Store(url))
    run_id = first.start_run(SLOW, "Does a refresh lose the run?")
    wait_for(lambda: len(first.store.turns(run_id)) >= 1)
    # Another process's view: a new store, a new runner, only the run id.
    second = TaskRunner(Store(url))
    progress = second.progress(run_id, "debate")
    assert progress["status"] == "running"
    assert progress["calls_done"] >= 1
    assert progress["estimated_calls"] == 0  # only the runner that started it knows
    assert progress["phase"] in progress["phases"]
    assert first.progress(run_id)["estimated_calls"] == 21
    assert run_id not in second.live() and run_id in first.live()
    assert second.stop(run_id) is True  # marked interrupted; the owner stops at its next turn
    assert first.wait(run_id, GENEROUS) == "interrupted"
    assert second.wait(run_id, GENEROUS) == "interrupted"
    assert first.task(run_id).error == ""


def test_two_runners_on_two_stores_are_independent(tmp_path):
    one, two = Store(f"sqlite:///{tmp_path / 'one.db'}"), Store(f"sqlite:///{tmp_path / 'two.db'}")
    first, second = TaskRunner(one), TaskRunner(two)
    run_id = first.start_run(SLOW, "Mine?")
    assert second.task(run_id) is None and second.live() == []
    assert run_id in first.live()
    assert second.stop(run_id) is False  # not a run of its store
    assert first.task(run_id).alive
    other = second.start_run(DEBATE, "Yours?")
    assert second.wait(other, GENEROUS) == "completed"
    assert first.task(other) is None and not one.exists(other)
    assert first.stop(run_id) is True
    assert first.wait(run_id, GENEROUS) == "interrupted"
    assert first._thread is not second._thread  # one loop per runner


def test_a_rerun_starts_the_stored_configuration(store):
    tasks = TaskRunner(store)
    first = tasks.start_run(DEBATE, "Again?", label="L", tags=["x"], expected="yes")
    tasks.wait(first, GENEROUS)
    old = store.get(first)
    again = tasks.start_rerun(old)
    assert again != first and tasks.wait(again, GENEROUS) == "completed"
    new = store.get(again)
    assert new["config"] == old["config"] and new["question"] == old["question"]
    assert (new["label"], new["tags"], new["expected"]) == ("L", [f"rerun-of:{first}", "x"],
                                                           "yes")


def test_a_rerun_without_seats_is_refused(store):
    tasks = TaskRunner(store)
    with pytest.raises(ConfigError, match="cannot be re-run"):
        tasks.start_rerun({"config": {"protocol": "debate", "seats": {}}, "question": "Q?"})
    assert store.runs().empty


def test_an_experiment_runs_once_and_stops_in_the_background(store):
    experiment_id = ex.create(store, {"questions": QUESTIONS, "repeats": 3, "concurrency": 1,
                                      "configs": [{"protocol": "vote", "label": "v",
                                                   "model": "simulated?latency=0.5"}]})
    tasks = TaskRunner(store)
    assert tasks.start_experiment(experiment_id) == experiment_id  # >= 6 s of work
    task = tasks.task(experiment_id)
    try:
        assert ex.get(store, experiment_id)["status"] == "running"
        with pytest.raises(ConfigError, match="already running"):
            ex.run_experiment(store, experiment_id)
        with pytest.raises(ConfigError, match="already running"):
            TaskRunner(store).start_experiment(experiment_id)  # another runner
        tasks.start_experiment(experiment_id)
        assert tasks.task(experiment_id) is task  # the same task, not a second one
        assert tasks.progress(experiment_id)["status"] == "running"
    finally:
        assert tasks.stop(experiment_id)
        assert task.done.wait(GENEROUS)
    assert tasks.wait(experiment_id) in ("stopped", "completed")
    assert ex.get(store, experiment_id)["status"] in ("stopped", "completed")
    assert "running" not in set(store.runs(experiment_id=experiment_id)["status"])
    assert tasks.stop(experiment_id) is False


def test_an_experiment_resumes_to_completion(store):
    experiment_id = ex.create(store, {"questions": QUESTIONS[:2], "configs": [
        {"protocol": "vote", "label": "v"}], "repeats": 1})
    tasks = TaskRunner(store)
    tasks.start_experiment(experiment_id)
    assert tasks.wait(experiment_id, GENEROUS) == "completed"
    assert ex.progress(store, experiment_id).done == 2


def test_the_demo_starts_once_and_makes_every_run(store):
    tasks = TaskRunner(store)
    assert tasks.start_demo() == DEMO
    task = tasks.task(DEMO)
    assert tasks.start_demo() == DEMO and tasks.task(DEMO) is task  # started once
    assert tasks.wait(DEMO, GENEROUS * 2) == "completed"
    progress = tasks.progress(DEMO)
    plan = demo_plan()
    assert progress["done"] == progress["total"] == len(plan)
    assert progress["errors"] == []
    demo = store.runs(tag="demo")
    assert len(demo) == len(plan) == len(progress["run_ids"])
    assert set(demo["protocol"]) == set(REGISTRY) and set(demo["status"]) == {"completed"}
    assert demo["simulated"].all() and "demo" in set(demo["label"])
    assert tasks.live() == []  # demo runs are the demo's, not listed as runs


def test_the_demo_gives_the_leaderboard_two_models_and_review_pairs(store):
    # Two simulated models answer the same questions: the Leaderboard rates each against the
    # other (debate verdicts, council rankings) and Review pairs answers of two labels.
    tasks = TaskRunner(store)
    tasks.start_demo()
    assert tasks.wait(DEMO, GENEROUS * 2) == "completed"
    board = lb.board(lb.read(store), "simulated", "model", bootstrap=20)
    assert set(board["player"]) == {STRONG, WEAK}
    assert (board["games"] > 0).all()
    pairs = review.queue(store.runs(status="completed", with_config=False))
    questions = {q for q in store.runs(tag="demo")["question"]}
    assert {p.question for p in pairs} == questions
    labels = {frozenset((store.get(p.run_a)["label"], store.get(p.run_b)["label"]))
              for p in pairs}
    assert frozenset(("demo: stronger model alone", "demo: weaker model alone")) in labels


def test_the_demo_stops_after_its_current_run(store):
    tasks = TaskRunner(store)
    tasks.start_demo()
    wait_for(lambda: tasks.progress(DEMO)["done"] >= 1)
    assert tasks.stop(DEMO) is True
    assert tasks.wait(DEMO, GENEROUS) == "interrupted"
    assert tasks.progress(DEMO)["done"] < len(demo_plan())
    assert "running" not in set(store.runs(tag="demo")["status"])


def test_a_running_run_can_be_deleted_and_its_task_ends_quietly(store):
    tasks = TaskRunner(store)
    run_id = tasks.start_run({"protocol": "panel", "model": "simulated?latency=1"}, "Deleted?")
    wait_for(lambda: not store.turns(run_id).empty)
    assert store.delete([run_id]) == 1
    task = tasks.task(run_id)
    assert task.done.wait(GENEROUS)
    assert task.error == ""  # it stopped as asked, not with a crash
    assert not store.exists(run_id) and store.runs().empty


def test_the_feed_reads_only_new_turns(store):
    tasks = TaskRunner(store)
    run_id = tasks.start_run(SLOW, "Only new turns?")
    feed = TurnFeed(store)
    wait_for(lambda: len(store.turns(run_id)) >= 2)
    first = feed.poll(run_id)
    assert first.state["status"] == "running" and first.new == len(first.turns) >= 2
    wait_for(lambda: len(store.turns(run_id)) > len(first.turns))
    second = feed.poll(run_id)
    assert second.new == len(second.turns) - len(first.turns) >= 1
    assert [t["idx"] for t in second.turns] == sorted({t["idx"] for t in second.turns})
    tasks.stop(run_id)
    tasks.wait(run_id, GENEROUS)
    last = feed.poll(run_id)
    assert last.state["status"] != "running"
    assert [t["idx"] for t in last.turns] == [t["idx"] for t in store.get(run_id)["turns"]]
    assert run_id not in feed._turns  # an ended run is forgotten
