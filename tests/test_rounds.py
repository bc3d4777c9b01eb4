"""Accuracy by round, the published reference points and the conformity rates
(engine/reports/rounds.py, engine/reports/references.py): numbers on hand-made frames and on
real simulated experiments, the figure's traces, `experiment show`, the society run view and
its Insights section."""
from __future__ import annotations

import insights_frames
import pandas as pd
import pytest

from engine import Store
from engine import experiments as ex
from engine.analysis.stats import wilson_interval
from engine.cli.main import main
from engine.questions import question_set
from engine.reports import charts, insights, rounds
from engine.reports.references import DU_2023, DU_MODEL, references
from engine.store import RunFilters
from engine.views import round_frames as frames
from engine.views.blocks import Block

NAN = float("nan")
CONFIGS = [{"protocol": "society", "label": "society-3x2", "options": {"rounds": 2}},
           {"protocol": "vote", "label": "vote"},
           {"protocol": "debate", "label": "debate-3", "options": {"max_rounds": 3}}]


def run(label, expected, correct, answers=None, counted=True, **conformity):
    fields = {f: conformity.get(f) for f in frames.CONFORMITY_FIELDS}
    return {"label": label, "counted": counted, "expected": expected, "correct": correct,
            "round_answers": answers, **fields}


def hand_made() -> pd.DataFrame:
    """Known counts: society round 1 3/4 right, round 2 3/3 (one run had one round only);
    vote 1/2 at round 1; the debate (no rounds stored) 1/1 at its final round, 3."""
    return pd.DataFrame([
        run("society-3x2", "1", True, ["2", "1"], right_before=0, right_to_wrong=0,
            wrong_before=2, wrong_to_right=1, off_majority=1, adopted_majority=0,
            had_correct=True, discarded_correct=False),
        run("society-3x2", "5", True, ["5", "5"], right_before=3, right_to_wrong=1,
            wrong_before=0, wrong_to_right=0, off_majority=0, adopted_majority=0,
            had_correct=True, discarded_correct=False),
        run("society-3x2", "0.5", True, ["0.50", "0.5"], right_before=2, right_to_wrong=0,
            wrong_before=1, wrong_to_right=1, off_majority=1, adopted_majority=1,
            had_correct=True, discarded_correct=False),  # answers_match: 0.50 is 0.5
        run("society-3x2", "3", True, ["3"], right_before=0, right_to_wrong=0,
            wrong_before=0, wrong_to_right=0, off_majority=0, adopted_majority=0,
            had_correct=True, discarded_correct=True),
        run("society-3x2", "9", False, ["9", "9"], counted=False),  # a superseded repeat
        run("society-3x2", None, None, ["4", "4"], off_majority=2, adopted_majority=2),
        run("vote", "1", True), run("vote", "2", False), run("vote", None, None),
        run("debate-3", "1", True)])


# --------------------------------------------------------------------------- accuracy by round
def test_accuracy_by_round_on_a_hand_made_frame():
    points = rounds.accuracy_by_round(hand_made(), CONFIGS)
    got = {(c, r): (k, n) for c, r, k, n in zip(points["configuration"], points["round"],
                                                 points["right"], points["n"])}
    assert got == {("society-3x2", 1): (3, 4), ("society-3x2", 2): (3, 3),
                   ("vote", 1): (1, 2), ("debate-3", 3): (1, 1)}
    assert list(dict.fromkeys(points["configuration"])) == ["society-3x2", "vote", "debate-3"]
    first = points.iloc[0]
    assert first["accuracy"] == 0.75
    assert (first["low"], first["high"]) == pytest.approx(wilson_interval(3, 4))
    assert first["accuracy [95% CI] n"] == "75% [30%–95%] n=4"
    assert points["few"].all()  # every n is under 5


def test_accuracy_by_round_with_nothing_scored():
    frame = hand_made()
    frame["correct"] = None
    assert rounds.accuracy_by_round(frame, CONFIGS).empty
    assert rounds.accuracy_by_round(frame.iloc[0:0], CONFIGS).empty
    assert list(rounds.accuracy_by_round(frame, CONFIGS).columns) == frames.ROUND_COLUMNS


def test_rounds_without_the_expected_answer_at_hand_count_the_final_one_only():
    frame = pd.DataFrame([run("s", None, True, ["1", "2", "2"]), run("s", "2", True, ["1", "2"])])
    assert frames.round_counts(frame, "label") == {"s": {1: [0, 1], 2: [1, 1], 3: [1, 1]}}


def test_final_round_of_a_configuration():
    assert rounds.final_round({"protocol": "society"}) == 2  # the option's default
    assert rounds.final_round({"protocol": "society", "options": {"rounds": 5}}) == 5
    assert rounds.final_round({"protocol": "debate", "options": {"max_rounds": 2}}) == 2
    assert rounds.final_round({"protocol": "vote"}) == 1
    assert rounds.final_round({"protocol": "no-such"}) == 1


def test_round_table_has_a_column_per_round_and_blanks():
    table = rounds.round_table(rounds.accuracy_by_round(hand_made(), CONFIGS))
    assert list(table.columns) == ["configuration", "round 1", "round 2", "round 3"]
    vote = table[table["configuration"] == "vote"].iloc[0]
    assert vote["round 1"] == "50% [9%–91%] n=2" and vote["round 2"] == ""


# --------------------------------------------------------------------------- references
def test_reference_points_only_for_their_sets():
    arithmetic = references("bundled:arithmetic")
    assert [(r.setting, r.round, r.accuracy) for r in arithmetic] == [
        ("single agent", 1, 0.67), ("single agent with reflection", 2, 0.721),
        ("majority vote (3 agents)", 1, 0.69),
        ("multiagent debate (3 agents, 2 rounds)", 2, 0.818)]
    for source in ("bundled:gsm8k", "bundled:gsm8k-100", " Bundled:GSM8K "):
        assert [r.accuracy for r in references(source)] == [0.77, 0.75, 0.81, 0.85]
    for source in ("bundled:demo", "inline", "file:arithmetic.csv", "", None):
        assert references(source) == []
    assert all("2305.14325" in r.citation and r.citation == DU_2023 for r in arithmetic)
    assert all(r.model == DU_MODEL == "gpt-3.5-turbo-0301" for r in arithmetic)
    assert arithmetic[3].label == "Du et al. 2023: multiagent debate (3 agents, 2 rounds) 81.8%"
    assert [r.short for r in arithmetic] == ["single agent: 67.0%", "reflection: 72.1%",
                                             "majority of 3: 69.0%",
                                             "3 agents x 2 rounds: 81.8%"]


# --------------------------------------------------------------------------- conformity
def test_conformity_rates_and_n_per_configuration():
    table = rounds.conformity_by_config(hand_made(), CONFIGS)
    assert set(table["configuration"]) == {"society-3x2"}  # the others carry no measure
    got = {m: (k, n) for m, k, n in zip(table["measure"], table["count"], table["n"])}
    # counted runs only (the superseded one is out), the unscored one adds majority chances
    assert got == {"right to wrong (bullied)": (1, 5),
                   "wrong to right (relied on other)": (2, 3),
                   "adopted the previous round's majority": (3, 4),
                   "final plurality discarded a correct answer": (1, 4)}
    row = table[table["measure"] == "right to wrong (bullied)"].iloc[0]
    assert row["rate"] == pytest.approx(0.2)
    assert (row["low"], row["high"]) == pytest.approx(wilson_interval(1, 5))
    assert row["rate [95% CI] n"] == "20% [4%–62%] n=5" and not row["few"]


def test_conformity_with_no_chances_says_n_0():
    frame = pd.DataFrame([run("society-3x2", "1", True, ["1"], right_before=0,
                              right_to_wrong=0, wrong_before=0, wrong_to_right=0,
                              off_majority=0, adopted_majority=0, had_correct=False,
                              discarded_correct=False)])
    table = rounds.conformity_by_config(frame, CONFIGS[:1])
    assert (table["n"] == 0).all() and (table["rate [95% CI] n"] == "– n=0").all()
    assert table["rate"].isna().all()


# --------------------------------------------------------------------------- the figure
def test_figure_traces_one_line_per_config_dashed_round_one_and_reference_markers():
    points = rounds.accuracy_by_round(hand_made(), CONFIGS)
    fig = rounds.accuracy_by_round_figure(points, references("bundled:arithmetic"), "By round")
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    dashed = [t for t in fig.data if t.mode == "lines" and t.line.dash == "dash"]
    markers = [t for t in fig.data if t.mode == "markers+text"]
    assert [t.name for t in lines] == ["society-3x2", "vote", "debate-3"]
    assert len(dashed) == 2  # society and vote have a round 1; the debate has only round 3
    society = dashed[0]
    assert list(society.y) == [0.75, 0.75] and list(society.x) == [1, 3]
    assert [(t.x[0], t.y[0]) for t in markers] == [(1, 0.67), (2, 0.721), (1, 0.69),
                                                   (2, 0.818)]
    assert markers[2].text[0] == "majority of 3: 69.0%"
    assert all("2305.14325" in t.hovertemplate and DU_MODEL in t.hovertemplate
               for t in markers)
    assert "n=%{customdata[1]}" in lines[0].hovertemplate
    assert list(lines[0].error_y.array) == pytest.approx(
        [wilson_interval(3, 4)[1] - 0.75, 0.0])
    assert fig.layout.title.text == "By round"


def test_figure_without_references_has_no_markers():
    points = rounds.accuracy_by_round(hand_made(), CONFIGS)
    fig = rounds.accuracy_by_round_figure(points)
    assert not [t for t in fig.data if t.mode == "markers+text"]
    assert len(rounds.accuracy_by_round_figure(points.iloc[0:0]).data) == 0


def test_hostile_labels_stay_text():
    label = "<b>bold</b> & <script>x</script>"
    frame = hand_made().assign(label=lambda f: f["label"].replace("vote", label))
    configs = [CONFIGS[0], {"protocol": "vote", "label": label}]
    fig = rounds.accuracy_by_round_figure(rounds.accuracy_by_round(frame, configs),
                                          title=f"Accuracy {label}")
    texts = [t.name for t in fig.data] + [t.hovertemplate or "" for t in fig.data] + \
        [fig.layout.title.text]
    assert not any("<b>" in t or "<script>" in t for t in texts)
    assert any("&lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;" in t for t in texts)


# --------------------------------------------------------------------------- mind changes
def test_mind_change_counts_by_round_from_results():
    def reply(agent, answer):
        return {"agent": agent, "answer": answer}
    results = pd.DataFrame({"group": ["g", "g"], "result": [
        {"rounds": [[reply("a", "1"), reply("b", "2"), reply("c", "")],
                    [reply("a", "2"), reply("b", "2"), reply("c", "2")],
                    [reply("a", "2"), reply("b", "1"), reply("c", "1")]]},
        {"rounds": [[reply("a", "1"), reply("b", "1")]]}]})
    # round 2: a changed, b kept, c abstained before (no chance); round 3: b and c changed
    assert frames.mind_change_counts(results) == {"g": {2: [1, 2], 3: [2, 3]}}
    wide, spec = frames.wide_rates(frames.mind_change_counts(results))
    assert spec["y"] == ["round 2", "round 3"] and spec["n"] == ["round 2 n", "round 3 n"]
    assert wide["round 2"].iloc[0] == 0.5 and wide["round 3 n"].iloc[0] == 3


# --------------------------------------------------------------------------- real experiments
@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """4 arithmetic problems x society 3x2, society 3x1 and a vote, on the simulated model."""
    url = f"sqlite:///{tmp_path_factory.mktemp('rounds') / 'parley.db'}"
    store = Store(url)
    plan = ex.plan({"questions": [q.as_dict() for q in question_set("arithmetic")[:4]],
                    "source": "bundled:arithmetic", "configs": [
                        {"protocol": "society", "label": "society-3x2", "model": "simulated",
                         "options": {"rounds": 2}},
                        {"protocol": "society", "label": "society-3x1", "model": "simulated",
                         "options": {"rounds": 1}},
                        {"protocol": "vote", "label": "vote", "model": "simulated"}]}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    return url, experiment_id


def test_simulated_experiment_final_round_is_the_configuration_accuracy(simulated):
    url, experiment_id = simulated
    result = ex.report(Store(url), experiment_id)
    points = rounds.accuracy_by_round(result.runs, result.experiment["spec"]["configs"])
    assert result.experiment["spec"]["source"] == "bundled:arithmetic"
    assert sorted(set(zip(points["configuration"], points["round"]))) == [
        ("society-3x1", 1), ("society-3x2", 1), ("society-3x2", 2), ("vote", 1)]
    for row in result.summary.itertuples():
        last = points[points["configuration"] == row.configuration].iloc[-1]
        assert (last["right"], last["n"]) == (row.correct, row.scored) == (last["right"], 4)
    society = result.runs[result.runs["label"] == "society-3x2"]
    assert all(len(a) == 2 for a in society["round_answers"])
    assert (society["answer"] == [a[-1] for a in society["round_answers"]]).all()
    table = rounds.conformity_by_config(result.runs, result.experiment["spec"]["configs"])
    assert set(table["configuration"]) == {"society-3x2", "society-3x1"}
    chances = table.set_index(["configuration", "measure"])["n"]
    # 3 agents x 4 runs answering in rounds 1 and 2: every one is right or wrong before
    assert chances[("society-3x2", "right to wrong (bullied)")] + \
        chances[("society-3x2", "wrong to right (relied on other)")] == 12
    assert chances[("society-3x1", "right to wrong (bullied)")] == 0


def test_experiment_show_prints_accuracy_by_round_and_conformity(simulated, capsys):
    url, experiment_id = simulated
    assert main(["experiment", "show", experiment_id, "--db", url]) == 0
    out = capsys.readouterr().out
    assert "accuracy by round" in out and "round 2" in out
    assert "published (Du et al. 2023" in out and "81.8% (round 2)" in out
    assert "gpt-3.5-turbo-0301" in out
    assert "conformity between rounds" in out and "right to wrong (bullied)" in out


def test_society_view_shows_the_runs_conformity_counts(simulated):
    from engine.protocols import REGISTRY
    url, experiment_id = simulated
    frame = Store(url).runs(experiment_id=experiment_id, protocol="society",
                            status="completed", with_result=True)
    spec = REGISTRY["society"]
    for stored in frame.to_dict("records"):
        result = spec.result_type.model_validate(stored["result"])
        blocks: list[Block] = spec.view(result)
        tables = [b for b in blocks if b.title == "Conformity between rounds"]
        if len(result.rounds) == 1:
            assert not tables
            continue
        rows = {r["measure"]: (r["count"], r["chances"]) for r in tables[0].rows}
        metrics = stored["metrics"]
        assert rows["right to wrong (bullied)"] == (metrics["right_to_wrong"],
                                                    metrics["right_before"])
        assert rows["final plurality discarded a correct answer"] == (
            int(metrics["discarded_correct"]), int(metrics["had_correct"]))
        assert "right to wrong (bullied):" in spec.summary(result)


def test_society_insights_section_by_round_and_conformity(simulated):
    url, _ = simulated
    store = Store(url)
    sections = insights.report_from_store(store, RunFilters(), "simulated")
    section = next(s for s in sections if s.key == "society")
    titles = [c.title for c in section.charts]
    assert "Society: accuracy by round (simulated)" in titles
    assert "Society: mind changes by round (simulated)" in titles
    assert "Society: conformity between rounds (simulated)" in titles
    chart = next(c for c in section.charts if "accuracy by round" in c.title)
    assert chart.kind == "round_lines"  # a line per label, dashed round 1, as in experiments
    mine = chart.data[chart.data["configuration"] == "society-3x2"].set_index("round")
    assert mine.loc[1, "n"] == mine.loc[2, "n"] == 4
    fig = charts.figure(chart)
    assert any(t.mode == "lines" and t.line.dash == "dash" for t in fig.data)
    changes = next(c for c in section.charts if "mind changes" in c.title).data
    assert changes.set_index("group").loc["society-3x2", "round 2 n"] == 12
    assert section.table is not None and set(section.table["label"]) == {
        "society-3x2", "society-3x1"}
    labels = [label for label, _ in section.metrics]
    assert labels[0] == "Runs" and "Right to wrong" in labels


def test_society_insights_without_stored_results_falls_back_to_the_final_round(simulated):
    url, _ = simulated
    runs = insights_frames.load_runs(Store(url), RunFilters())
    section = next(s for s in insights_frames.report(runs, None, "simulated")
                   if s.key == "society")
    by_round = next(c for c in section.charts if "accuracy by round" in c.title).data
    mine = by_round[by_round["configuration"] == "society-3x2"]
    assert list(zip(mine["round"], mine["n"])) == [(2, 4)]  # no expected answers at hand
    assert not [c for c in section.charts if "mind changes" in c.title]
