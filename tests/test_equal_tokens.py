"""Equal tokens (issue 28, bullet 4; DESIGN 2.11): beside each configuration, the vote whose
tokens per run come closest to the configuration's measured mean, the ratio it achieves in
its label, in the plan, the spec, the CLI, the results and the Experiments page."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from apptest_helpers import open_new_experiment
from streamlit.testing.v1 import AppTest

from engine import experiments as ex
from engine.cli.main import main
from engine.models import ConfigError
from engine.protocols.baselines import equal_tokens
from engine.protocols.vote import MAX_VOTERS, MIN_VOTERS
from engine.questions import DEFINITE

APP = str(Path(__file__).resolve().parent.parent / "app.py")
QUESTIONS = [{"question": q.text, "expected": q.expected} for q in DEFINITE[:3]]
DEBATE = {"protocol": "debate", "label": "debate"}


def _run(store, spec):
    plan = ex.plan(spec, store)
    ex.run_experiment(store, ex.create(store, plan))
    return plan


def _closest(tokens, per_sample):
    return min(range(MIN_VOTERS, MAX_VOTERS + 1), key=lambda n: (abs(n * per_sample - tokens), n))


def test_with_nothing_measured_the_estimate_is_used_and_the_label_says_so(store):
    plan = ex.plan({"questions": QUESTIONS, "configs": [DEBATE], "baseline": "equal-tokens"},
                   store)
    (pair,) = plan.baselines
    assert pair["kind"] == "equal-tokens" and pair["runs"] == 0 and pair["sample_runs"] == 0
    # the preflight's estimate: 7 calls of 600 tokens, one sample one call of 600
    assert pair["tokens"] == 4200 and pair["per_sample"] == 600 and pair["samples"] == 7
    assert plan.labels == ["debate", "debate · equal-tokens vote (7 samples, 1.00x tokens, "
                                     "estimated)"]
    assert "no run of it measured yet" in pair["note"] and "estimated" in pair["note"]
    assert plan.spec()["token_baselines"] == plan.baselines


def test_the_sample_count_comes_from_the_stores_measured_tokens(store):
    _run(store, {"questions": QUESTIONS, "configs": [DEBATE], "baseline": "equal-compute"})
    runs = store.runs(status="completed")
    debates, votes = runs[runs["protocol"] == "debate"], runs[runs["protocol"] == "vote"]
    tokens = (debates["tokens_in"] + debates["tokens_out"]).mean()
    per_sample = (votes["tokens_in"] + votes["tokens_out"]).sum() / votes["calls"].sum()
    plan = ex.plan({"questions": QUESTIONS, "configs": [DEBATE], "baseline": "equal-tokens"},
                   store)
    (pair,) = plan.baselines
    samples = _closest(tokens, per_sample)
    assert (pair["runs"], pair["sample_runs"]) == (len(debates), len(votes)) == (3, 3)
    assert pair["tokens"] == pytest.approx(tokens, abs=0.1)
    assert pair["per_sample"] == pytest.approx(per_sample, abs=0.1)
    assert pair["samples"] == samples and pair["equal"]
    ratio = samples * per_sample / tokens
    assert pair["label"] == f"debate · equal-tokens vote ({samples} samples, {ratio:.2f}x tokens)"
    assert "measured over 3 stored votes" in pair["note"]
    assert "debate's mean over 3 stored runs" in pair["note"]
    vote = next(c for c in plan.configs if c["label"] == pair["label"])
    assert vote["protocol"] == "vote" and len(vote["seats"]["voters"]) == samples


def test_the_closest_count_wins_and_a_binding_limit_is_named():
    near = equal_tokens(DEBATE, tokens=1000, runs=4, per_sample=240, sample_runs=2)
    assert near.samples == 4 and near.ratio == pytest.approx(0.96) and near.equal
    assert "(4 samples, 0.96x tokens)" in near.label
    huge = equal_tokens(DEBATE, tokens=10**7, runs=4, per_sample=100, sample_runs=2)
    assert huge.samples == MAX_VOTERS and not huge.equal
    assert huge.note.startswith("NOT equal tokens")
    tiny = equal_tokens(DEBATE, tokens=10, runs=4, per_sample=100, sample_runs=2)
    assert tiny.samples == MIN_VOTERS and tiny.ratio == pytest.approx(20.0)
    assert equal_tokens({"protocol": "vote", "label": "v"}) is None  # its own baseline


def test_planning_a_stored_spec_again_keeps_its_cells(store):
    plan = ex.plan({"questions": QUESTIONS, "configs": [DEBATE], "baseline": "equal-tokens"},
                   store)
    _run(store, {"questions": QUESTIONS, "configs": [DEBATE], "baseline": "equal-compute"})
    again = ex.plan(plan.spec(), store)  # the store now measures something else
    assert again.labels == plan.labels and again.baselines == plan.baselines
    assert ex.baselines_of(plan.spec()) == plan.baselines


def test_both_baselines_side_by_side_and_bad_values_refused(store):
    plan = ex.plan({"questions": QUESTIONS, "configs": [DEBATE],
                    "baseline": ["equal-compute", "equal-tokens"]}, store)
    assert plan.baseline == "equal-compute, equal-tokens"
    assert [p["kind"] for p in plan.baselines] == ["equal-compute", "equal-tokens"]
    assert len(plan.labels) == 3
    assert ex.plan(plan.spec(), store).labels == plan.labels
    for bad in ("equal", ["equal-tokens", 3], "tokens"):
        with pytest.raises(ConfigError, match="baseline must be 'equal-compute', "
                                              "'equal-tokens', 'consultancy', 'placebo', a list "
                                              "of them or none"):
            ex.plan({"questions": QUESTIONS, "configs": [DEBATE], "baseline": bad}, store)


def test_cli_flag_plans_it_and_the_summary_states_the_ratio_achieved(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    spec = tmp_path / "spec.yaml"
    spec.write_text("questions: demo\nconfigs:\n  - {label: d, protocol: debate}\n",
                    encoding="utf-8")
    assert main(["experiment", "run", str(spec), "--db", url, "--dry-run",
                 "--equal-tokens"]) == 0
    assert "d · equal-tokens vote (7 samples, 1.00x tokens, estimated)" in \
        capsys.readouterr().out
    assert main(["experiment", "run", str(spec), "--db", url, "--quiet",
                 "--equal-tokens"]) == 0
    out = capsys.readouterr().out
    found = re.search(r"achieved (\d+\.\d\d)x d(?: \(simulated\))?'s tokens per run in this "
                      r"experiment \(([\d,]+) against ([\d,]+); planned 1\.00x\)", out)
    assert found, out
    mine, theirs = (float(found.group(i).replace(",", "")) for i in (2, 3))
    assert float(found.group(1)) == pytest.approx(mine / theirs, abs=0.006)


def test_the_checkbox_adds_the_baseline_to_the_preflight(db_url):
    at = AppTest.from_file(APP, default_timeout=120.0)
    at.run()
    at.switch_page("pages/experiments.py").run()
    open_new_experiment(at)
    at.selectbox(key="exp-set").select("demo").run()
    at.multiselect(key="exp-configs").select("debate · defaults").run()
    at.checkbox(key="exp-equal-tokens").check().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    table = next(d.value for d in at.dataframe if "calls_per_run" in d.value.columns)
    assert list(table["label"]) == [
        "debate · defaults",
        "debate · defaults · equal-tokens vote (7 samples, 1.00x tokens, estimated)"]
