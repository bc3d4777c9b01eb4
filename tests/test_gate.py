"""The gate (`python -m engine gate`, DESIGN 2.14) and approved baselines (`experiment
approve`): an A/A pair passes, a conforming candidate fails on majority adoption, a candidate
missing a question fails naming it, and the exit status says which (0 pass, 1 regression, 2 bad
input)."""
from __future__ import annotations

import json

import pytest

import engine.experiments as ex
from engine import Store
from engine.access import Actor, NotAllowed, Role
from engine.analysis import stats
from engine.cli import main
from engine.models import ConfigError
from engine.questions.sets import question_set
from engine.reports.gate import accuracy_difference, gate, markdown
from engine.store.approvals import approve, baseline_of, history

QUESTIONS = [q.as_dict() for q in question_set("arithmetic")[:24]]


def spec(seed: int, conformity: float | None = None, questions=QUESTIONS, name="gated"):
    """A simulated society of three agents, two rounds, on `questions`; the simulated
    model's world parameters (its `seed`, and `conformity`: the chance an agent moves to the
    majority it sees) declared in the model spec, so shown with every result."""
    model = f"simulated?seed={seed}" + (f"&conformity={conformity}" if conformity else "")
    return {"name": name, "questions": questions, "repeats": 1,
            "configs": [{"protocol": "society", "label": "society", "model": model,
                         "options": {"rounds": 2}}]}


def run(store: Store, body) -> str:
    experiment_id = ex.create(store, body)
    ex.run_experiment(store, experiment_id)
    return experiment_id


def test_an_a_a_pair_passes_in_at_least_19_of_20_seed_pairs(store):
    """The same configuration run twice with other seeds: the gate's false alarms are rare
    (a regression needs a drop beyond `max_drop` AND an interval that excludes zero)."""
    outcomes = []
    for seed in range(20):
        baseline, candidate = run(store, spec(seed)), run(store, spec(seed + 1000))
        result = gate(store, candidate, baseline)
        assert [row["measure"] for row in result.rows] == [
            "accuracy", "majority adoption", "agreement inflation"]
        outcomes.append(result.passed)
    assert sum(outcomes) >= 19, outcomes


def test_a_candidate_that_always_agrees_with_the_majority_fails_on_majority_adoption(store):
    """The candidate's agents move to the majority they see every time (`conformity=1` in
    the simulated model's spec: its declared trait); accuracy is not what fails."""
    baseline, candidate = run(store, spec(1)), run(store, spec(2, conformity=1.0))
    result = gate(store, candidate, baseline)
    assert not result.passed and result.exit_status == 1
    adoption = [r for r in result.rows if r["measure"] == "majority adoption"][0]
    assert adoption["regression"] and adoption["candidate"] == 1.0
    assert adoption["low"] > 0.05
    assert not [r for r in result.rows if r["measure"] == "accuracy"][0]["regression"]
    assert any(line.startswith("society (simulated): majority adoption 100%")
               for line in result.regressions), result.regressions


def test_a_candidate_missing_one_question_fails_naming_it(store, capsys):
    baseline = run(store, spec(1))
    candidate = run(store, spec(1, questions=QUESTIONS[:5] + QUESTIONS[6:]))
    result = gate(store, candidate, baseline)
    missing = QUESTIONS[5]["question"]
    named = [line for line in result.regressions if "missing from the candidate" in line]
    assert len(named) == 1 and repr(" ".join(missing.split())[:79]) in named[0] or \
        missing in named[0], named
    assert any("question set version" in line for line in result.regressions)
    assert main(["gate", candidate, "--baseline", baseline, "--db", store.url]) == 1
    out = capsys.readouterr().out
    assert "regression: society (simulated): question" in out


def test_failed_cells_of_the_candidate_fail(store):
    baseline = run(store, spec(1, questions=QUESTIONS[:4]))
    broken = spec(1, questions=QUESTIONS[:4])
    broken["configs"][0]["model"] = "simulated?seed=1&fail=1"  # every call fails
    candidate = run(store, broken)
    result = gate(store, candidate, baseline)
    assert any("failed cell" in line for line in result.regressions), result.regressions


def test_the_cli_gates_against_the_approved_baseline_and_writes_markdown(store, tmp_path,
                                                                          capsys):
    first, second = run(store, spec(1)), run(store, spec(2))
    assert main(["gate", second, "--db", store.url]) == 2  # no approved baseline yet
    assert "no approved baseline" in capsys.readouterr().err
    assert main(["experiment", "approve", first, "--db", store.url]) == 0
    assert f"experiment {first} is the approved baseline" in capsys.readouterr().out
    assert baseline_of(store, "gated")["experiment"] == first
    comment = tmp_path / "comment.md"
    assert main(["gate", second, "--db", store.url, "--markdown", str(comment), "--json",
                 "--app-url", "https://parley.example"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["passed"] and printed["baseline"]["id"] == first
    text = comment.read_text(encoding="utf-8")
    assert "| society (simulated) | accuracy |" in text and "✅ pass" in text
    conforming = run(store, spec(3, conformity=1.0))
    assert main(["gate", conforming, "--db", store.url, "--markdown", str(comment),
                 "--app-url", "https://parley.example"]) == 1
    text = comment.read_text(encoding="utf-8")
    assert "❌ regression" in text and "majority adoption" in text
    for bad in (["gate", "nope", "--db", store.url],
                ["gate", second, "--baseline", second, "--db", store.url],
                ["gate", second, "--max-drop", "2", "--db", store.url]):
        assert main(bad) == 2, bad


def test_markdown_links_back_to_the_runs_whose_accuracy_fell(store):
    baseline = run(store, spec(1))
    worse = spec(1)
    worse["configs"][0]["model"] = "simulated?seed=1&skill=0.05"
    candidate = run(store, worse)
    result = gate(store, candidate, baseline)
    assert any("accuracy" in line for line in result.regressions), result.regressions
    text = markdown(result, "https://parley.example/")
    assert "](https://parley.example/runs?run=" in text
    assert result.moved["society (simulated)"][0] in text


def test_approvals_keep_history_refuse_failed_cells_and_viewers(store):
    first, second = run(store, spec(1, questions=QUESTIONS[:3])), run(
        store, spec(2, questions=QUESTIONS[:3]))
    approve(store, first, "ann@example.com")
    approve(store, second, "bob@example.com")
    found = history(store, "gated")
    assert list(found["experiment"]) == [second, first]
    assert list(found["current"]) == [True, False]
    assert list(found["approved by"]) == ["bob@example.com", "ann@example.com"]
    broken = spec(1, questions=QUESTIONS[:3])
    broken["configs"][0]["model"] = "simulated?fail=1"
    failed = run(store, broken)
    with pytest.raises(ConfigError, match="failed"):
        approve(store, failed)
    with pytest.raises(NotAllowed):
        approve(store, first, actor=Actor("val@example.com", Role.VIEWER))
    assert baseline_of(store, "gated")["experiment"] == second


def test_a_simulated_configuration_is_never_compared_with_a_real_one():
    """The baseline's configuration is simulated, the candidate's real: labelled apart, so
    the gate says they are not compared instead of comparing them."""
    from engine.reports.gate import _kind_note
    assert "never compared" in _kind_note("vote (simulated)", ["vote"])
    assert "never compared" in _kind_note("vote", ["vote (simulated)"])
    assert "missing from the candidate" in _kind_note("vote", ["panel"])


def test_paired_accuracy_uses_newcombes_interval_with_one_run_a_side():
    base = {"a": [1.0], "b": [1.0], "c": [0.0], "d": [1.0]}
    cand = {"a": [1.0], "b": [0.0], "c": [0.0], "d": [1.0]}
    b, a, change, low, high = accuracy_difference(base, cand, list(base))
    assert (b, a, change) == (0.75, 0.5, -0.25)
    assert (low, high) == stats.paired_difference_interval(2, 0, 1, 1)


def test_the_independent_difference_interval_is_square_and_add():
    low, high = stats.independent_difference_interval(0.5, 0.3, 0.7, 0.2, 0.1, 0.35)
    assert low == pytest.approx(0.05) and high == pytest.approx(0.3 + 0.05 ** 0.5)
