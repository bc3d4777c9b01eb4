"""engine.reports.insights and engine.services.rerun on hand-made frames: every expected number worked by hand."""
from __future__ import annotations

import json
from datetime import UTC, date, datetime

import insights_frames as frames
import pandas as pd
import pytest
from plugins.reruns import rerun

from engine import REGISTRY, ConfigError, run_debate, run_peer_review
from engine.protocols import arun_config, run_sync
from engine.reports import insights
from engine.reports import runs as history
from engine.services.rerun import rerun_resolved
from engine.store import RunFilters
from engine.views import aggregate
from engine.views import ballots as ballot_report

NOW = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)


def runs_frame(*rows: dict) -> pd.DataFrame:
    """A frame shaped like `Store.runs()` (metrics, config and tags parsed)."""
    base = {"question": "Q", "expected": None, "config": {}, "label": None, "tags": [],
            "status": "completed", "error": "", "metrics": {}, "models": "simulated",
            "simulated": True, "correct": None, "calls": 1, "degraded": 0,
            "degraded_run": False, "lost": "", "tokens_in": 0,
            "tokens_out": 0, "latency": 0.0, "duration": 0.0, "created_at": NOW}
    return pd.DataFrame([{**base, "id": f"r{i}", **row} for i, row in enumerate(rows)])


# --------------------------------------------------------------------------- filters, history
def test_filters_become_bound_store_arguments():
    assert RunFilters().store_args() == {} and not RunFilters().active
    args = RunFilters(protocol="panel", label=" A ", search="", since=date(2026, 1, 2),
                      until=date(2026, 1, 3)).store_args()
    assert args == {"protocol": "panel", "label": "A",
                    "since": datetime(2026, 1, 2, tzinfo=UTC),
                    "until": datetime(2026, 1, 3, 23, 59, 59, 999999, tzinfo=UTC)}
    assert history.date_range(()) == (None, None)
    assert history.date_range((date(2026, 1, 2),)) == (date(2026, 1, 2), date(2026, 1, 2))
    assert history.date_range(date(2026, 1, 5)) == (date(2026, 1, 5), date(2026, 1, 5))


def test_choices_list_every_protocol_label_tag_and_model():
    got = history.choices_from(["debate", "mystery", "debate"], ["b", None, "a", ""],
                               [["x", "y"], [], ["y"]], ["simulated,openai:gpt", None,
                                                          "simulated"])
    assert got["label"] == ["a", "b"]
    assert got["tag"] == ["x", "y"]
    assert got["model"] == ["openai:gpt", "simulated"]
    assert got["protocol"][-1] == "mystery" and "panel" in got["protocol"]
    assert got["status"] == ["running", "completed", "failed", "interrupted"]


def test_history_table_is_plain_and_says_simulated():
    frame = runs_frame(
        {"protocol": "panel", "label": "L", "question": "How\nmuch?", "tokens_in": 10,
         "tokens_out": 5, "duration": 1.234,
         "metrics": {"winner": "0.05", "confidence_level": "medium", "ratio": 2 / 3,
                     "tied": False, "changed_outcome": True,
                     "outcome": "0.05 (medium, 67%), debate changed it"}},
        {"protocol": "debate", "simulated": False, "models": "openai:gpt-4o",
         "question": "x" * 200,
         "metrics": {"judge_confidence": 0.8, "high_confidence": True,
                     "outcome": "judge 0.80 (high)"}})
    table = history.history_table(frame)
    assert list(table.columns) == list(history.HISTORY_COLUMNS)
    first, second = table.iloc[0], table.iloc[1]
    assert first["outcome"] == "0.05 (medium, 67%), debate changed it"
    assert first["question"] == "How much?" and first["tokens"] == 15
    assert first["simulated"] == "all" and second["simulated"] == ""
    assert first["protocol"] == "Persona panel" and first["seconds"] == 1.23
    assert second["outcome"] == "judge 0.80 (high)"
    assert second["question"] == "x" * 200  # whole: issue 14 found the cut one unreadable


def is_simulated(simulated, models, config=None):
    return bool(history.simulated_text(simulated, models, config))


def test_a_run_on_simulated_models_is_simulated_even_with_a_failed_call():
    assert is_simulated(True, "")
    assert is_simulated(False, "simulated,simulated?fail=0.1")
    # a run is simulated when any seat is; a mixed one names its simulated seats
    assert is_simulated(False, "simulated,openai:gpt-4o")
    assert history.simulated_text(False, "simulated,openai:gpt-4o") == "mixed: simulated"
    config = {"model": "simulated", "seats": {
        "proponent": [{"name": "pro", "model": "simulated"}],
        "judge": [{"name": "judge", "model": "openai:gpt-4o"}],
        "critic": [{"name": "critic"}]}}
    assert history.simulated_text(False, "", config) == "mixed: pro, critic"
    assert history.simulated_text(True, "simulated", {"seats": {
        "judge": [{"name": "judge", "model": "simulated?skill=0.6"}]}}) == "all"
    assert history.simulated_text(False, "openai:gpt-4o") == ""
    assert history.simulated_text(False, "", {"model": "simulated", "seats": {
        "judge": "openai:gpt-4o", "proponent": "simulated", "opponent": ""}}) == \
        "mixed: proponent, opponent"
    assert not is_simulated(False, "")


@pytest.mark.parametrize("protocol", sorted(REGISTRY))
def test_the_outcome_line_is_the_protocols_own(protocol, store):
    """The runs table's outcome is what the protocol's `outcome` hook wrote at the end."""
    config = {"protocol": protocol}
    result = run_sync(arun_config(config, "Should we ship it or wait?", store=store))
    line = REGISTRY[protocol].outcome(result)
    assert line and REGISTRY[result.protocol].metrics(result)["outcome"] == line
    table = history.history(store, RunFilters()).table
    assert table.set_index("id").loc[result.run_id, "outcome"] == line
    assert history.outcome_text({"outcome": 3}) == "" and history.outcome_text(None) == ""


def test_history_is_one_bounded_page_and_choices_follow_the_newest_run(store):
    assert history.newest(store) is None and history.choices(store)["label"] == []
    assert history.choices(store)["protocol"][0] == "debate"
    for topic, label in (("one", "L"), ("two", "M"), ("three", "L")):
        run_debate(topic, proponent="simulated", opponent="simulated", judge="simulated",
                   max_rounds=1, store=store, label=label)
    everything = store.runs()
    assert history.newest(store) == everything["id"].iloc[0]
    found = history.choices(store)
    assert found["label"] == ["L", "M"] and found["tag"] == [] and found["model"] == \
        ["simulated"]
    page = history.history(store, RunFilters(), limit=2)
    assert list(page.table["id"]) == list(everything["id"][:2]) and page.more
    page = history.history(store, RunFilters(search="two"), limit=2)
    assert len(page.table) == 1 and not page.more and page.table["question"][0] == "two"


# --------------------------------------------------------------------------- one run
TURNS = [
    {"idx": 0, "seat": "a", "phase": "propose", "round": 1, "status": "ok", "latency": 1.0,
     "tokens_in": 10, "tokens_out": 4, "started_at": "2026-01-10T12:00:00+00:00",
     "finished_at": "2026-01-10T12:00:01+00:00", "warnings": [], "reply": "x",
     "messages": [{"role": "user", "content": "hi"}]},
    {"idx": 1, "seat": "b", "phase": "propose", "round": 1, "status": "degraded",
     "error": "TimeoutError: slow", "latency": 3.0, "tokens_in": 10, "tokens_out": 0,
     "started_at": "2026-01-10T12:00:00+00:00", "finished_at": "2026-01-10T12:00:03+00:00",
     "warnings": ["unreadable JSON"]},
    {"idx": 2, "seat": "a", "phase": "rebuttal", "round": 2, "status": "ok", "latency": 2.0,
     "tokens_in": 20, "tokens_out": 6, "started_at": "2026-01-10T12:00:03+00:00",
     "finished_at": "2026-01-10T12:00:05+00:00", "warnings": []},
]


def test_seat_usage_sums_per_seat():
    usage = history.seat_usage(TURNS).set_index("seat")
    assert usage.loc["a", "calls"] == 2 and usage.loc["a", "tokens_in"] == 30
    assert usage.loc["a", "tokens_out"] == 10 and usage.loc["a", "latency"] == 3.0
    assert usage.loc["a", "mean_latency"] == 1.5 and usage.loc["a", "degraded"] == 0
    assert usage.loc["b", "degraded"] == 1 and usage.loc["b", "calls"] == 1


def test_timeline_frame_keeps_concurrent_calls_overlapping():
    frame = history.timeline_frame(TURNS)
    assert list(frame["seat"]) == ["a", "b", "a"]
    assert frame["start"][0] == frame["start"][1]  # both proposals started together
    assert (frame["finish"][1] - frame["start"][1]).total_seconds() == 3.0
    assert history.timeline_frame([]).empty


def test_problems_name_degraded_turns_and_parse_warnings():
    run = {"status": "failed", "error": "RuntimeError: boom",
           "result": {"warnings": ["judge failed", "shown already"]}}

    class Warn:
        kind, body = "warning", "shown already"
    problems = history._problems(run, TURNS, [Warn()])
    assert problems == ["run failed: RuntimeError: boom",
                        "#1 b (propose, round 1) degraded: TimeoutError: slow",
                        "#1 b (propose, round 1) parse warning: unreadable JSON",
                        "judge failed"]


PANEL_RESULT = {
    "first_round": {"ballots": {"a": "1", "b": "2", "c": None}, "counts": {"1": 1, "2": 1},
                    "winner": "1"},
    "tally": {"ballots": {"a": "2", "b": "2", "c": "2"}, "counts": {"2": 3}, "winner": "2"},
    "confidence": {"level": "high", "ratio": 1.0, "reason": "unanimous"},
    "mind_changes": ["a"], "change_kinds": {"a": "persuaded", "b": "held"},
}


def test_a_panels_detail_has_both_tallies_and_the_stance_flow(store):
    result = run_sync(arun_config({"protocol": "panel"}, "What is 17 + 25?", store=store))
    detail = history.run_detail(store, result.run_id)
    assert [t[0] for t in detail.tallies] == ["Final vote", "Round-one vote"]
    assert detail.tallies[0][1:] == (dict(result.tally.counts), result.tally.winner)
    flows = detail.flows.to_dict("records")
    assert [f["seat"] for f in flows] == [p.persona for p in result.proposals]
    assert all(f["after"] == (result.tally.ballots[f["seat"]] or "(abstained)")
               for f in flows)
    links = ballot_report.flow_links(detail.flows)
    assert links["value"].sum() == len(flows)


# --------------------------------------------------------------------------- across runs
def test_flatten_prefixes_metrics_and_labels_the_unlabelled():
    flat = insights.flatten(runs_frame({"protocol": "duel", "label": "",
                                        "metrics": {"status": "converged"}},
                                       {"protocol": "debate", "label": "L",
                                        "tokens_in": 3, "tokens_out": 4}))
    assert list(flat["group"]) == ["(no label)", "L"]
    assert flat["m_status"][0] == "converged" and pd.isna(flat["m_status"][1])
    assert list(flat["tokens"]) == [0, 7] and list(flat["status"]) == ["completed"] * 2


def test_rate_counts_mean_and_spread_by_group():
    runs = pd.DataFrame({"group": ["A", "A", "A", "B", "B"],
                         "flag": [True, False, None, True, True],
                         "level": ["high", "low", "high", None, "low"],
                         "x": [1.0, 2.0, 3.0, 4.0, None]})
    rates = aggregate.rate_by(runs, "flag").set_index("group")
    assert rates.loc["A", "n"] == 2 and rates.loc["A", "rate"] == 0.5  # None left out
    assert rates.loc["B", "n"] == 2 and rates.loc["B", "rate"] == 1.0
    counts = aggregate.counts_by(runs, "level")
    assert counts.to_dict("records") == [{"group": "A", "value": "high", "count": 2},
                                         {"group": "A", "value": "low", "count": 1},
                                         {"group": "B", "value": "low", "count": 1}]
    means = aggregate.mean_by(runs, "x").set_index("group")
    assert means.loc["A", "mean"] == 2.0 and means.loc["B", "n"] == 1
    spread = aggregate.spread_by(runs, "x").set_index("group")
    assert spread.loc["A", ["min", "q1", "median", "q3", "max"]].tolist() == \
        [1.0, 1.5, 2.0, 2.5, 3.0]
    assert aggregate.rate_by(runs, "missing").empty


def test_side_by_side_puts_protocols_next_to_each_other_per_label():
    runs = pd.DataFrame({"group": ["A", "A", "A", "B"],
                         "protocol": ["panel", "panel", "vote", "vote"],
                         "correct": [True, False, True, False]})
    frame, spec = frames.side_by_side(runs, "correct")
    assert spec == {"y": ["Persona panel rate", "Vote (baseline) rate"],
                    "n": ["Persona panel n", "Vote (baseline) n"],
                    "names": ["Persona panel", "Vote (baseline)"],
                    "colors": [REGISTRY["panel"].color, REGISTRY["vote"].color]}
    rows = frame.set_index("group")
    assert rows.loc["A", "Persona panel rate"] == 0.5 and rows.loc["A", "Persona panel n"] == 2
    assert rows.loc["A", "Vote (baseline) rate"] == 1.0
    assert pd.isna(rows.loc["B", "Persona panel rate"]) and rows.loc["B", "Persona panel n"] == 0
    assert rows.loc["B", "Vote (baseline) rate"] == 0.0


def test_mind_change_rate_per_label_is_changes_over_debaters():
    panels = insights.flatten(runs_frame(
        {"protocol": "panel", "label": "A",
         "metrics": {"debaters": 3, "mind_changes": 1, "claimed_changes": 0}},
        {"protocol": "panel", "label": "A",
         "metrics": {"debaters": 3, "mind_changes": 2, "claimed_changes": 3}},
        {"protocol": "panel", "label": "B",
         "metrics": {"debaters": 4, "mind_changes": 0, "claimed_changes": 1}}))
    rates = ballot_report.mind_change_by_label(panels).set_index("group")
    assert rates.loc["A", "n"] == 6 and rates.loc["A", "changes"] == 3
    assert rates.loc["A", "rate"] == 0.5 and rates.loc["A", "claimed"] == 0.5
    assert rates.loc["B", "rate"] == 0.0 and rates.loc["B", "claimed"] == 0.25


def panel_runs() -> pd.DataFrame:
    other = {"first_round": {"ballots": {"a": "x", "b": "x", "c": "y"},
                             "counts": {"x": 2, "y": 1}, "winner": "x"},
             "tally": {"ballots": {"a": "x", "b": "x", "c": "x"}, "counts": {"x": 3},
                       "winner": "x"}, "mind_changes": ["c"]}
    frame = runs_frame({"protocol": "panel", "label": "A", "expected": "$2"},
                       {"protocol": "panel", "label": None})
    frame["result"] = [PANEL_RESULT, other]
    return frame


def test_ballots_per_persona_and_flows_across_panels():
    ballots = ballot_report.ballots_frame(panel_runs())
    assert len(ballots) == 6
    assert list(ballots["changed"]) == [True, False, False, False, False, True]
    per_seat = ballot_report.mind_change_rates(ballots, "seat").set_index("seat")
    assert per_seat["rate"].to_dict() == {"a": 0.5, "b": 0.0, "c": 0.5}
    per_label = ballot_report.mind_change_rates(ballots, "group").set_index("group")
    assert per_label.loc["A", "changes"] == 1 and per_label.loc["(no label)", "n"] == 3

    links = ballot_report.plurality_flow_links(ballots).set_index(["source", "target"])["value"]
    # run 1: a with the plurality ("1") ends with the answer ("2"); b against -> with;
    # c abstained -> with. run 2: a, b with -> with; c against -> with.
    assert links.to_dict() == {
        ("with the round-one plurality", "with the final answer"): 3,
        ("against the round-one plurality", "with the final answer"): 2,
        ("(abstained)", "with the final answer"): 1}
    right = ballot_report.correctness_flow_links(ballots).set_index(["source", "target"])["value"]
    # Only run 1 has an expected answer ("$2" reads "2"): a wrong -> right, b right -> right.
    assert right.to_dict() == {("wrong first", "right finally"): 1,
                               ("right first", "right finally"): 1,
                               ("(abstained) first", "right finally"): 1}


def test_report_skips_protocols_without_runs_with_a_note():
    runs = insights.flatten(runs_frame(
        {"protocol": "debate", "label": "A",
         "metrics": {"judge_confidence": 0.9, "high_confidence": True}},
        {"protocol": "debate", "label": "A",
         "metrics": {"judge_confidence": 0.5, "high_confidence": False}},
        {"protocol": "peer-review", "label": "B", "correct": True,
         "metrics": {"approved": True, "iterations_used": 2}},
        {"protocol": "debate", "status": "failed"}))
    sections = {s.key: s for s in frames.report(runs)}
    assert sections["panel"].note and not sections["panel"].charts
    assert sections["duel"].note == "No completed duel runs match these filters."
    assert dict(sections["overview"].metrics) == {"Runs": "4", "Completed": "3",
                                                  "Degraded": "0", "Failed": "1",
                                                  "Interrupted": "0", "Simulated": "4"}
    debate = sections["debate"]
    assert dict(debate.metrics)["Mean judge confidence"] == "0.70"
    high = debate.charts[1].data.set_index("group")
    assert high.loc["A", "rate"] == 0.5 and high.loc["A", "n"] == 2
    review = sections["peer-review"].charts[1].data
    assert review.to_dict("records") == [{"group": "B", "value": "approved after 2",
                                          "count": 1}]
    accuracy = sections["accuracy"].charts[0]
    assert accuracy.data.to_dict("records") == [{"group": "B", "Peer review rate": 1.0,
                                                 "Peer review n": 1}]
    assert accuracy.spec["names"] == ["Peer review"]
    assert all(c.caption for s in sections.values() for c in s.charts)
    assert frames.report(insights.flatten(runs_frame().iloc[0:0])) == []


# --------------------------------------------------------------------------- re-run
def test_rerun_config_reads_the_stored_configuration_as_it_was_stored(store):
    first = run_sync(arun_config({"protocol": "panel", "prompts": {
        "critique": "Judge these: {proposals} for {question}"}}, "Q?", store=store))
    stored = store.get(first.run_id)["config"]
    config = rerun_resolved(stored).given
    assert config.stored() == stored
    assert [s.name for s in config.seats["debaters"]] == [p.persona for p in first.proposals]
    assert config.prompts == {"critique": "Judge these: {proposals} for {question}"}


def test_a_run_saved_without_its_configuration_cannot_be_rerun_and_says_why():
    with pytest.raises(ConfigError, match="cannot be re-run"):
        rerun_resolved({"protocol": "debate", "seats": {}})
    with pytest.raises(ConfigError, match="no option 'speed'"):
        rerun_resolved({"protocol": "debate", "seats": {"judge": [{"name": "j"}]},
                      "options": {"speed": 3}})
    with pytest.raises(ConfigError, match="no seat 'referee'"):
        rerun_resolved({"protocol": "debate", "seats": {"referee": [{"name": "r"}]}})


def test_rerun_stores_a_new_run_with_the_same_configuration(store):
    first = run_peer_review("Write a haiku", producer="simulated", reviewer="simulated",
                            max_iterations=2, store=store, label="poems", tags=["t"])
    new, old = rerun(store, store.get(first.run_id)), store.get(first.run_id)
    assert new["id"] != first.run_id
    assert new["question"] == old["question"] and new["label"] == "poems"
    assert new["tags"] == [f"rerun-of:{first.run_id}", "t"]
    assert json.dumps(new["config"], sort_keys=True) == json.dumps(old["config"],
                                                                   sort_keys=True)
