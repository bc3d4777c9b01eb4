"""Position effects (DESIGN 2.10): outcome by position and a debate judge's position
consistency, checked against hand-computed counts; the simulated world's declared
`position_bias` measured by the report (and no effect measured without one); the page."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine import Store
from engine import experiments as ex
from engine.analysis.stats import wilson_interval
from engine.reports import positions as pos
from engine.simulated import world_of
from engine.views.blocks import worlds

APP = str(Path(__file__).resolve().parent.parent / "app.py")

RUNS = [  # a debate configuration and its swapped twin, two questions, hand-made
    {"label": "d", "q": 0, "repeat": 0, "order": ["P", "O"], "carried": ["P"], "winner": "P",
     "seat_for": "P", "seat_against": "O"},
    {"label": "d", "q": 1, "repeat": 0, "order": ["O", "P"], "carried": ["P"], "winner": "P",
     "seat_for": "P", "seat_against": "O"},
    {"label": "d", "q": 2, "repeat": 0, "order": ["P", "O"], "carried": None, "winner": None,
     "seat_for": "P", "seat_against": "O"},  # a failed judge: no outcome, left out of n
    {"label": "d · sides swapped", "q": 0, "repeat": 0, "order": ["O", "P"],
     "carried": ["O"], "winner": "O", "seat_for": "O", "seat_against": "P"},
    {"label": "d · sides swapped", "q": 1, "repeat": 0, "order": ["P", "O"],
     "carried": ["P"], "winner": "P", "seat_for": "O", "seat_against": "P"},
    {"label": "v", "q": 0, "repeat": 0, "order": ["a", "b", "c"], "carried": ["a", "c"]},
    {"label": "v", "q": 1, "repeat": 0, "order": ["c", "a", "b"], "carried": ["c"]},
    {"label": "old", "q": 0, "repeat": 0},  # stored before orders were recorded
]


def row(table, label, position):
    found = table[(table["configuration"] == label) & (table["position"] == position)]
    assert len(found) == 1, (label, position)
    return found.iloc[0]


@pytest.mark.parametrize("label, position, wins, n", [
    ("d", "presented 1st", 1, 2),  # P first and won; O first and lost
    ("d", "presented 2nd", 1, 2),
    ("d", "argued for", 2, 2),
    ("d", "argued against", 0, 2),
    ("d · sides swapped", "presented 1st", 2, 2),
    ("d · sides swapped", "argued for", 1, 2),
    ("v", "presented 1st", 2, 2),  # a then c: both carried
    ("v", "presented 2nd", 0, 2),  # b, a
    ("v", "presented 3rd", 1, 2),  # c, b
])
def test_outcome_by_position_matches_hand_counts(label, position, wins, n):
    table = pos.by_position(RUNS)
    found = row(table, label, position)
    assert (found["carried"], found["n"]) == (wins, n)
    assert found["rate"] == pytest.approx(wins / n)
    assert (found["low"], found["high"]) == pytest.approx(wilson_interval(wins, n))
    assert found["rate [95% CI] n"].endswith(f"n={n}")
    assert "old" not in set(table["configuration"])


def test_consistency_over_swapped_pairs_matches_hand_counts():
    pairs = [{"label": "d", "swapped": "d · sides swapped"}]
    table = pos.consistency(RUNS, pairs)
    assert len(table) == 1
    found = table.iloc[0]
    # q0: P then O (different seats); q1: P both ways; q2: no verdict, so no pair
    assert (found["pairs"], found["consistent"]) == (2, 1)
    assert found["share"] == 0.5
    assert (found["low"], found["high"]) == pytest.approx(wilson_interval(1, 2))
    assert pos.consistency(RUNS, []).empty
    assert pos.consistency(RUNS[:3], pairs).empty  # no twin runs yet: nothing invented


def test_no_data_says_so():
    nothing = pos.Positions(pos.by_position([]), pos.consistency([], []), 0)
    assert nothing.positions_note == pos.NO_POSITIONS
    assert nothing.consistency_note.startswith("no swapped pairs yet")
    assert pos.ordinal(1) == "1st" and pos.ordinal(12) == "12th" and pos.ordinal(23) == "23rd"


def test_side_pairs_come_from_a_stored_spec():
    spec = {"sides": "both", "configs": [{"label": "d"}, {"label": "v"},
                                          {"label": "d · sides swapped"}]}
    assert pos.side_pairs(spec) == [{"label": "d", "swapped": "d · sides swapped"}]
    assert pos.side_pairs({**spec, "sides": "one"}) == []


# --------------------------------------------------------------------------- the simulated world
def test_position_bias_is_a_declared_parameter_shown_when_set():
    assert "position_bias" not in world_of("simulated")  # default 0: the world as it was
    assert world_of("simulated?position_bias=0.6")["position_bias"] == 0.6
    assert worlds("simulated?position_bias=0.6") == [
        "skill 0.7 · conformity 0.3 · persuasion 0.4 · position_bias 0.6 · seed 0"]
    from engine import ConfigError, get_model
    with pytest.raises(ConfigError, match="position_bias is a rate"):
        get_model("simulated?position_bias=2")


QUESTIONS = [{"question": f"What is {n} plus 1?", "expected": str(n + 1)} for n in range(30)]


def measured(store: Store, bias: float) -> pos.Positions:
    judge = f"simulated?position_bias={bias}" if bias else "simulated"
    plan = ex.plan({"questions": QUESTIONS, "repeats": 4, "order": "shuffled",
                    "sides": "both", "seed": 3, "concurrency": 8, "configs": [
                        {"protocol": "debate", "label": f"debate {bias}",
                         "options": {"max_rounds": 1},
                         "seats": {"judge": [{"name": "judge", "model": judge}]}}]})
    experiment_id = ex.create(store, plan)
    assert ex.run_experiment(store, experiment_id).status == "completed"
    report = ex.report(store, experiment_id)
    return pos.positions(store, experiment_id, report.runs, report.experiment["spec"])


@pytest.mark.parametrize("bias", [0.6, 0.0])
def test_the_report_measures_a_declared_position_bias_and_none_without(tmp_path, bias):
    found = measured(Store(f"sqlite:///{tmp_path / 'b.db'}"), bias)
    first = found.by_position[found.by_position["position"] == "presented 1st"]
    wins, n = int(first["carried"].sum()), int(first["n"].sum())
    assert n == 30 * 4 * 2  # every judged debate, both ways
    low, high = wilson_interval(wins, n)
    if bias:  # about 0.6 + 0.4 / 2 = 0.8: the interval excludes no effect (0.5)
        assert low > 0.5 and wins / n == pytest.approx(0.8, abs=0.08)
    else:
        assert low <= 0.5 <= high
    pairs = found.consistency.iloc[0]
    assert pairs["pairs"] == 30 * 4
    if bias:  # a judge led by position credits the seat it saw first, whichever side
        assert pairs["share"] < 0.9


# --------------------------------------------------------------------------- the page
def test_the_results_page_shows_positions_and_says_when_there_are_no_pairs(db_url):
    store = Store(db_url)
    one_sided = ex.create(store, {"questions": QUESTIONS[:3], "order": "shuffled",
                                  "configs": [{"protocol": "vote", "label": "<b>v</b>"}]})
    ex.run_experiment(store, one_sided)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/experiments.py").run()
    at.session_state["exp-tab"] = "Positions"
    at.run()
    assert not at.exception, at.exception
    table = next(d.value for d in at.dataframe if "position" in d.value.columns)
    assert set(table["configuration"]) == {"<b>v</b>"}  # a label as text, never HTML
    assert int(table["n"].iloc[0]) == 3
    assert any("no swapped pairs yet" in i.value for i in at.info)
    assert len(at.get("plotly_chart")) == 1


def test_experiment_show_prints_the_position_effects(tmp_path, capsys):
    from engine.cli.main import main
    db = f"sqlite:///{tmp_path / 'show.db'}"
    store = Store(db)
    experiment_id = ex.create(store, {"questions": QUESTIONS[:3], "sides": "both",
                                      "configs": [{"protocol": "debate", "label": "d",
                                                   "options": {"max_rounds": 1}}]})
    ex.run_experiment(store, experiment_id)
    capsys.readouterr()
    assert main(["experiment", "show", experiment_id, "--db", db]) == 0
    out = capsys.readouterr().out
    assert "d (simulated) · presented 1st:" in out and "n=3" in out  # kept apart from real
    assert "d (simulated) / d · sides swapped (simulated):" in out


def test_the_figures_carry_n_and_show_labels_as_text():
    table = pos.by_position([{**run, "label": "<i>x</i>"} for run in RUNS[:2]])
    fig = pos.position_figure(table)
    assert fig.data[0].name == "&lt;i&gt;x&lt;/i&gt;"
    assert list(fig.data[0].text) == ["n=2", "n=2", "n=2", "n=2"]
    pairs = pos.consistency(RUNS, [{"label": "d", "swapped": "d · sides swapped"}])
    assert list(pos.consistency_figure(pairs).data[0].text) == ["n=2"]
