"""The placebo arm (DESIGN 2.13, the noise control of "The Cost of Consensus", arXiv
2605.00914): beside each configuration whose agents read each other, the same seats and
prompts, every peer message carried replaced by that peer's message of the same round on
another question of the set; reported as configuration minus placebo, paired, with tokens."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from engine import ConfigError, Seat, run_society
from engine import experiments as ex
from engine.cells import Cell
from engine.config import Donor, RunConfig
from engine.experiments import arrangement
from engine.experiments.planning import plan_of
from engine.llm.replies import extract_json
from engine.reports import controls
from engine.reports.experiments import runs_frame

PEERS = ["society", "panel", "roundtable", "council", "debate", "duel"]
SUMS = [(2, 3), (7, 8), (12, 30), (41, 1), (5, 5), (9, 9)]
QUESTIONS = [{"question": f"What is {a} plus {b}?", "expected": str(a + b)} for a, b in SUMS]


def _prompts(store, run_id, seat, number):
    turns = store.turns(run_id, with_messages=True)
    row = turns[(turns["seat"] == seat) & (turns["round"] == number)].iloc[0]
    return "\n".join(m["content"] for m in row["messages"])


def test_the_donor_message_replaces_the_peer_message_in_the_stored_prompts(
        store, recording_model):
    """Scripted rounds, counted by hand: in round two each agent's prompt carries the other
    agent's round-one message from the donor run, never the one it gave on this question."""
    donor_a = recording_model(["DONOR-A-1 ANSWER: 11", "DONOR-A-2 ANSWER: 11"])
    donor_b = recording_model(["DONOR-B-1 ANSWER: 12", "DONOR-B-2 ANSWER: 12"])
    given = run_society("What is 5 plus 6?", agents=[Seat("a", donor_a), Seat("b", donor_b)],
                        rounds=2, store=store)
    turns = store.turns(given.run_id)
    messages = {(s, p, int(r)): t for s, p, r, t in zip(
        turns["seat"], turns["phase"], turns["round"], turns["reply"], strict=True)}
    assert messages[("b", "answer", 1)] == "DONOR-B-1 ANSWER: 12"

    own_a = recording_model(["OWN-A-1 ANSWER: 7", "OWN-A-2 ANSWER: 7"])
    own_b = recording_model(["OWN-B-1 ANSWER: 7", "OWN-B-2 ANSWER: 7"])
    result = run_society("What is 3 plus 4?", agents=[Seat("a", own_a), Seat("b", own_b)],
                         rounds=2, store=store, expected="7",
                         donor=Donor("What is 5 plus 6?", given.run_id, messages))
    seen_by_a, seen_by_b = _prompts(store, result.run_id, "a", 2), _prompts(
        store, result.run_id, "b", 2)
    assert "DONOR-B-1" in seen_by_a and "OWN-B-1" not in seen_by_a
    assert "DONOR-A-1" in seen_by_b and "OWN-A-1" not in seen_by_b
    # its own round-one reply stays its own, and round one is untouched
    assert "OWN-A-1" in seen_by_a and "DONOR-A-1" not in seen_by_a
    assert "DONOR" not in _prompts(store, result.run_id, "a", 1)
    # the models received exactly that, and the run records its donor
    assert "DONOR-B-1" in "\n".join(c for _, c in own_a.received[-1])
    metrics = store.get(result.run_id)["metrics"]
    assert metrics["donor_question"] == "What is 5 plus 6?"
    assert metrics["donor_run"] == given.run_id
    assert "donor_question" not in store.get(given.run_id)["metrics"]


def test_a_peer_the_donor_lacks_is_carried_as_nothing_said(store, recording_model):
    own_a = recording_model(["OWN-A-1 ANSWER: 7", "OWN-A-2 ANSWER: 7"])
    own_b = recording_model(["OWN-B-1 ANSWER: 7", "OWN-B-2 ANSWER: 7"])
    result = run_society("What is 3 plus 4?", agents=[Seat("a", own_a), Seat("b", own_b)],
                         rounds=2, store=store, donor=Donor("another", "none", {}))
    seen = _prompts(store, result.run_id, "a", 2)
    assert "OWN-B-1" not in seen and "(no answer)" in seen or "OWN-B-1" not in seen


def test_planning_adds_a_placebo_arm_beside_each_protocol_whose_agents_read_each_other():
    configs = [{"label": p, "protocol": p, "model": "simulated"}
               for p in [*PEERS, "vote", "single", "peer-review"]]
    plan = ex.plan({"questions": QUESTIONS, "baseline": "placebo", "configs": configs})
    labels = [c["label"] for c in plan.configs]
    assert [label for label in labels if label.endswith(" · placebo")] == [
        f"{p} · placebo" for p in PEERS]
    for p in PEERS:  # the same seats, options and prompts
        mine, arm = (next(c for c in plan.configs if c["label"] == label)
                     for label in (p, f"{p} · placebo"))
        assert {k: v for k, v in RunConfig.parse(arm).stored().items() if k != "label"} == \
            {k: v for k, v in RunConfig.parse(mine).stored().items() if k != "label"}
    assert {pair["kind"] for pair in plan.baselines} == {"placebo"}
    # planned again from the stored spec: paired, not added twice
    again = plan_of(plan.spec())
    assert [c["label"] for c in again.configs] == labels
    assert again.placebo_of == plan.placebo_of


def test_the_donors_are_a_seeded_derangement_and_the_placebo_cells_come_after_them():
    plan = ex.plan({"questions": QUESTIONS, "baseline": "placebo", "repeats": 2, "seed": 7,
                    "configs": [{"label": "s", "protocol": "society", "model": "simulated"}]})
    donors = arrangement.derangement(len(QUESTIONS), 7)
    assert sorted(donors) == list(range(len(QUESTIONS)))
    assert all(d != q for q, d in enumerate(donors))
    assert donors == arrangement.derangement(len(QUESTIONS), 7)
    assert donors != arrangement.derangement(len(QUESTIONS), 8)
    assert plan.donor_of(Cell(2, 1, 1)) == Cell(donors[2], 0, 1)
    assert plan.donor_of(Cell(2, 0, 1)) is None
    order = list(plan.cells())
    assert len(order) == plan.runs == len(set(order))
    for index, cell in enumerate(order):
        donor = plan.donor_of(cell)
        if donor is not None:
            assert order.index(donor) < index


def test_a_consultancy_reads_no_peer_so_it_has_no_placebo_arm():
    plan = ex.plan({"questions": QUESTIONS, "baseline": ["placebo", "consultancy"],
                    "configs": [{"label": "d", "protocol": "debate", "model": "simulated"}]})
    assert [c["label"] for c in plan.configs] == [
        "d", "d · placebo", "d · consultancy", "d · consultancy · sides swapped"]
    assert [p["label"] for p in plan.baselines if p["kind"] == "placebo"] == ["d · placebo"]


def test_a_placebo_needs_two_questions():
    with pytest.raises(ConfigError, match="two or more questions"):
        ex.plan({"questions": QUESTIONS[:1], "baseline": "placebo",
                 "configs": [{"label": "s", "protocol": "society", "model": "simulated"}]})


def test_on_the_simulated_model_the_placebo_tokens_per_run_are_within_15_percent(store):
    """Every protocol that shows peers: its placebo arm spends within 15% of its tokens per
    run, each placebo run read the same configuration's run on another question of the set."""
    spec = {"name": "placebo", "questions": QUESTIONS, "baseline": "placebo",
            "configs": [{"label": p, "protocol": p, "model": "simulated"} for p in PEERS]}
    experiment_id = ex.create(store, ex.plan(spec, store))
    assert ex.run_experiment(store, experiment_id).status == "completed"
    found = controls.placebo(store, experiment_id)
    assert [p.label for p in found] == PEERS
    for pair in found:
        assert pair.runs == pair.placebo_runs == len(QUESTIONS)
        assert abs(pair.ratio - 1) <= 0.15, (pair.label, pair.ratio)
    frame = runs_frame(store, experiment_id)
    arms = frame[frame["label"].str.endswith(" · placebo")]
    asked = {q["question"] for q in QUESTIONS}
    for run_id, question in zip(arms["id"], arms["question"], strict=True):
        metrics = store.get(run_id)["metrics"]
        assert metrics["donor_question"] in asked and metrics["donor_question"] != question
        donor = store.get(metrics["donor_run"])
        assert donor["question"] == metrics["donor_question"]
        assert donor["label"] + " · placebo" == store.get(run_id)["label"]


def _frame(rows):
    return pd.DataFrame([{"label": label, "q": q, "correct": right, "tokens": tokens,
                          "counted": True, "simulated": False}
                         for label, q, right, tokens in rows])


def test_configuration_minus_placebo_equals_a_hand_count():
    # q0-q3: A right on 0, 1, 2; its placebo right on 0 only; q3 the placebo did not score
    frame = _frame([("A", 0, True, 100), ("A", 1, True, 120), ("A", 2, True, 80),
                    ("A", 3, False, 100), ("A · placebo", 0, True, 90),
                    ("A · placebo", 1, False, 110), ("A · placebo", 2, False, 100),
                    ("A · placebo", 3, None, 100)])
    [found] = controls.placebo_from(frame, "real", [("A", "A · placebo")])
    assert found.questions == 3  # the questions both scored
    assert found.accuracy == 1.0 and math.isclose(found.placebo, 1 / 3)
    assert math.isclose(found.difference, 2 / 3)
    assert found.low <= found.difference <= found.high
    assert found.tokens == 100 and found.placebo_tokens == 100 and found.ratio == 1.0
    row = controls.placebo_rows([found]).iloc[0]
    assert row["minus placebo (points)"] == "+66.7" and row["95% interval"].startswith("[")
    assert row["token ratio"] == "1.00x"
    text = controls.placebo_text([found])
    assert "A: +66.7 points" in text and "100.0% against 33.3%" in text
    assert "tokens per run 100 against 100 for the placebo, 1.00x" in text


def test_experiment_show_and_the_html_report_give_the_placebo(db_url, capsys):
    from engine import Store
    from engine.cli.main import main
    from engine.reports import share
    from engine.reports.experiments import report
    store = Store(db_url)
    spec = {"name": "placebo", "questions": QUESTIONS[:3], "baseline": "placebo",
            "configs": [{"label": "s", "protocol": "society", "model": "simulated"}]}
    experiment_id = ex.create(store, ex.plan(spec, store))
    assert ex.run_experiment(store, experiment_id).status == "completed"
    assert main(["experiment", "show", experiment_id, "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "Simulated: Placebo (peers' messages from another question" in out
    assert "  s: " in out and "for the placebo" in out
    assert "differ only in what the simulated model does not read" not in out
    document = share.experiment_html(report(store, experiment_id))
    assert "Placebo: peers talking about another question" in document
    assert "minus placebo (points)" in document


def _carried(text):
    """What of a reply another agent's prompt carries: a JSON reply's reasoning (the panel
    shows proposals field by field), else the reply itself."""
    obj = extract_json(text)[0]
    return str(obj.get("reasoning") or "") if obj else text.strip()


@pytest.mark.parametrize("protocol", PEERS)
def test_every_protocol_carries_the_donors_messages_where_it_carried_its_own(store, protocol):
    """On the simulated model: wherever a configuration's prompt carried another seat's
    message, its placebo run's prompt (same seat, phase and round) carries that seat's
    message of the donor run instead, and not the one of its own question."""
    spec = {"name": protocol, "questions": QUESTIONS[:2], "baseline": "placebo",
            "configs": [{"label": "c", "protocol": protocol, "model": "simulated",
                         **({"options": {"rounds": 2}} if protocol == "roundtable" else {})}]}
    experiment_id = ex.create(store, ex.plan(spec, store))
    assert ex.run_experiment(store, experiment_id).status == "completed"
    frame = runs_frame(store, experiment_id)
    run = {(label, q): run_id for label, q, run_id in zip(
        frame["label"], frame["q"], frame["id"], strict=True)}

    def turns(run_id):
        table = store.turns(run_id, with_messages=True)
        return {(s, p, int(r)): (reply, "\n".join(m["content"] for m in messages), int(i))
                for s, p, r, reply, messages, i in zip(
                    table["seat"], table["phase"], table["round"], table["reply"],
                    table["messages"], table["idx"], strict=True)}
    checked = 0
    for q in (0, 1):
        own, donor = turns(run[("c", q)]), turns(run[("c", 1 - q)])
        arm = turns(run[("c · placebo", q)])
        assert store.get(run[("c · placebo", q)])["metrics"]["donor_question"] == \
            QUESTIONS[1 - q]["question"]
        for reader, (_, prompt, at) in own.items():
            for speaker, (reply, _, spoke) in own.items():
                said = _carried(reply or "")
                if speaker[0] == reader[0] or spoke >= at or len(said) < 8 or \
                        said not in prompt or any(said == _carried(r or "") for (seat, _, _), (
                            r, _, _) in own.items() if seat != speaker[0]):
                    continue  # not carried, or another seat's words too
                if reader[1] in ("judge", "synthesis", "chair"):
                    continue  # a final reader reads the run's own agents
                heard = _carried(donor[speaker][0])
                if heard == said:
                    continue  # the two questions drew the same words
                assert heard in arm[reader][1], (reader, speaker)
                mine = [_carried(r or "") for (seat, _, _), (r, _, _) in arm.items()
                        if seat == reader[0]]  # the reader's own words may match its peer's
                if not any(said in text for text in [heard, *mine]):
                    assert said not in arm[reader][1], (reader, speaker)
                checked += 1
    assert checked > 0


def test_the_experiments_page_shows_the_placebo(db_url):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from engine import Store
    store = Store(db_url)
    spec = {"name": "placebo", "questions": QUESTIONS[:3], "baseline": "placebo",
            "configs": [{"label": "s", "protocol": "society", "model": "simulated"}]}
    experiment_id = ex.create(store, ex.plan(spec, store))
    assert ex.run_experiment(store, experiment_id).status == "completed"
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"),
                           default_timeout=60)
    at.run()
    at.switch_page("pages/experiments.py")
    at.query_params["experiment"] = experiment_id
    at.session_state["exp-tab"] = "Which protocol when?"  # as a click on the tab
    at.run()
    assert not at.exception, at.exception
    assert "Placebo: peers talking about another question" in [s.value for s in at.subheader]
    table = next(d.value for d in at.dataframe if "placebo accuracy" in d.value.columns)
    expected = controls.placebo_rows(controls.placebo(store, experiment_id))
    assert table.to_dict("records") == expected.to_dict("records")
    assert table["configuration"].tolist() == ["s"]


def test_the_cost_of_consensus_preset_sets_debate_against_its_placebo_and_their_figures(
        tmp_path, capsys):
    """The preset on its first questions: debate, its placebo arm, a single agent and a vote
    on the bundled GSM8K; experiment show gives debate minus placebo and the paper's
    figures, labelled as theirs."""
    from pathlib import Path

    from engine import Store
    from engine.cli.main import main
    from engine.reports.references import FINDINGS
    preset = Path(__file__).resolve().parent.parent / "presets" / "cost-of-consensus.yaml"
    db = f"sqlite:///{tmp_path / 'p.db'}"
    assert main(["experiment", "run", str(preset), "--limit", "3", "--quiet",
                 "--db", db]) == 0
    experiment_id = ex.list_experiments(Store(db))["id"].iloc[0]
    capsys.readouterr()
    assert main(["experiment", "show", experiment_id, "--db", db]) == 0
    out = capsys.readouterr().out
    assert "  debate-3x3: " in out and "for the placebo" in out
    line = next(x for x in out.splitlines() if x.startswith("Published figures, theirs"))
    assert "arXiv 2605.00914" in line
    assert all(f"{f.measure} {f.value}" in line for f in FINDINGS["cost-of-consensus"])
    assert "modal adoption (agents taking the majority's answer) up to 85.5%" in line
