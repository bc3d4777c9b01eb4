"""Who moved whom (issue 29, engine/reports/influence.py): the persona x persona and model x
model matrices worked out by hand on scripted rounds, opportunities against credits under
Hypothesis, the drill-down to the runs behind a cell, simulated and real runs kept apart
(real ones over the loopback OpenAI-compatible stub), the heatmap spec and the Insights view."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from engine import Store
from engine.analysis import influence as credits
from engine.analysis.stats import wilson_interval
from engine.protocols import arun_config, run_sync
from engine.protocols.personas import CAUTIOUS
from engine.reports import influence, vega
from engine.store import RunFilters

ROUNDS = [{"a": "1", "b": "2", "c": "2"},
          {"a": "2", "b": "2", "c": "2"},   # a moved to b's and c's answer
          {"a": "2", "b": "1", "c": "2"}]   # b moved to an answer nobody held: no credit
CONFIG = {"model": "m1", "seats": {"agents": [
    {"name": "a", "persona": CAUTIOUS.prompt},   # a built-in persona's prompt: its name
    {"name": "b", "persona_name": "X", "model": "m2"},
    {"name": "c", "persona_name": "X"}]}}


def _frame(*rows: tuple[str, list, dict, bool]) -> pd.DataFrame:
    return pd.DataFrame([{"id": i, "simulated": sim, "rounds": r, "config": c}
                         for i, r, c, sim in rows])


def test_opportunities_by_hand():
    # round 1 -> 2: a (was 1) could move to b's or c's 2; b and c (were 2) to a's 1.
    # round 2 -> 3: everyone held 2: no chance to move to anybody else's answer.
    assert influence.opportunities(ROUNDS) == {("b", "a"): 1, ("c", "a"): 1,
                                               ("a", "b"): 1, ("a", "c"): 1}
    assert credits(ROUNDS) == {("b", "a"): 1, ("c", "a"): 1}
    # an abstention in either round is no chance to move
    assert influence.opportunities([{"a": "1", "b": None}, {"a": "2", "b": "1"}]) == {}
    assert influence.opportunities([{"a": "1", "b": "2"}, {"a": None, "b": "1"}]) == {
        ("a", "b"): 1}
    assert influence.opportunities([{"a": "1", "b": "2"}]) == {}


def test_matrices_by_hand():
    table = influence.matrices(_frame(("r1", ROUNDS, CONFIG, False)))
    persona = influence.block(table, "real", "persona").set_index(["mover", "moved"])
    assert persona.loc[("X", "cautious"), ["flips", "opportunities"]].tolist() == [2, 2]
    assert persona.loc[("cautious", "X"), ["flips", "opportunities"]].tolist() == [0, 2]
    assert len(persona) == 2
    model = influence.block(table, "real", "model").set_index(["mover", "moved"])
    assert model.loc[("m2", "m1"), ["flips", "opportunities"]].tolist() == [1, 1]  # b -> a
    assert model.loc[("m1", "m1"), ["flips", "opportunities"]].tolist() == [1, 2]  # c->a, a->c
    assert model.loc[("m1", "m2"), ["flips", "opportunities"]].tolist() == [0, 1]  # a -> b
    cell = model.loc[("m1", "m1")]
    assert (cell["rate"], cell["low"], cell["high"]) == (0.5, *wilson_interval(1, 2))
    assert cell["runs"] == 1 and cell["run_ids"] == ["r1"]
    assert influence.block(table, "simulated", "model").empty


def test_cells_add_up_over_runs_and_drill_down():
    again = [{"a": "2", "b": "1", "c": "1"}, {"a": "1", "b": "1", "c": "1"}]
    table = influence.matrices(_frame(("r1", ROUNDS, CONFIG, False),
                                      ("r2", again, CONFIG, False),
                                      ("s1", ROUNDS, CONFIG, True)))
    persona = influence.block(table, "real", "persona")
    hit = persona.set_index(["mover", "moved"]).loc[("X", "cautious")]
    assert (hit["flips"], hit["opportunities"], hit["runs"]) == (4, 4, 2)
    assert influence.cell_runs(persona, "X", "cautious") == ["r1", "r2"]
    assert influence.cell_runs(persona, "nobody", "X") == []
    simulated = influence.block(table, "simulated", "persona")  # never pooled with real ones
    assert influence.cell_runs(simulated, "X", "cautious") == ["s1"]
    assert influence.title("simulated", "model", True).endswith("(simulated)")
    assert not influence.title("real", "model", True).endswith("(simulated)")


def test_seats_without_a_persona_or_unreadable_configs():
    assert influence.persona_of({}) == influence.NO_PERSONA
    assert influence.persona_of({"persona": "  You are   terse. " * 10}).endswith("…")
    assert len(influence.persona_of({"persona": "x" * 100})) == 40
    assert influence.seat_map("not a config") == {}
    assert influence.seat_map({"seats": {"agents": ["junk", {"name": "a"}]}}) == {
        "a": (influence.NO_PERSONA, "simulated")}
    table = influence.matrices(_frame(("r1", ROUNDS, None, False)))
    assert set(table["mover"]) == {influence.UNKNOWN}


AGENTS = ("a", "b", "c", "d")


@st.composite
def round_tables(draw):
    agents = AGENTS[:draw(st.integers(1, 4))]
    return [{a: draw(st.one_of(st.none(), st.sampled_from(["1", "2", "3"]))) for a in agents}
            for _ in range(draw(st.integers(0, 5)))]


@settings(max_examples=300, deadline=None)
@given(round_tables())
def test_every_credit_is_an_opportunity(rounds):
    chances = influence.opportunities(rounds)
    for pair, n in credits(rounds).items():
        assert pair[0] != pair[1] and 0 < n <= chances.get(pair, 0)
    table = influence.matrices(_frame(("r", rounds, {"seats": {"agents": [
        {"name": a, "model": f"m{a}"} for a in AGENTS]}}, False)))
    assert (table["flips"] <= table["opportunities"]).all()
    model = influence.block(table, "real", "model")
    assert model["flips"].sum() == sum(credits(rounds).values())
    assert model["opportunities"].sum() == sum(chances.values())


def test_the_heatmap_spec():
    table = influence.matrices(_frame(("r1", ROUNDS, CONFIG, False)))
    cells = influence.block(table, "real", "model")
    spec = vega.heatmap(influence.heat(cells), "Who moved whom")
    assert vega.clickable(spec)
    values = {(v["group"], v["series"]): v for v in spec["data"]["values"]}
    assert values[("m1", "m1")]["text"] == "1/2" and values[("m1", "m1")]["few"]
    assert values[("m2", "m1")]["rate"] == 1.0
    assert vega.picked({"selection": {vega.PICK: [{"group": "m2", "series": "m1"}]}}) == (
        "m2", "m1")
    shown = influence.shown(cells)
    assert list(shown.columns) == ["mover", "moved", "flips / opportunities",
                                   "rate [95% CI]", "runs"]
    assert "n" not in shown.columns and "1 / 2" in set(shown["flips / opportunities"])


SKEPTIC, FOLLOWER = "You doubt every claim.", "You go with the group."


def _society(store: Store, model: str, question: str, expected: str) -> str:
    if not store.library("persona"):  # the library names the Skeptic; the Follower is unnamed
        store.put_library("persona", "Skeptic", {"prompt": SKEPTIC})
    config = {"protocol": "society", "options": {"rounds": 3}, "seats": {"agents": [
        {"name": "ann", "persona": SKEPTIC, "model": model},
        {"name": "bob", "persona": FOLLOWER, "model": model},
        {"name": "cy", "persona": FOLLOWER, "model": model}]}}
    return str(run_sync(arun_config(config, question, store=store, expected=expected)).run_id)


def test_stored_runs_real_and_simulated_apart(stub_endpoint, tmp_path):
    store = Store(f"sqlite:///{tmp_path}/s.db")
    sims = [_society(store, "simulated?conformity=0.9", f"What is {n} * 3?", str(3 * n))
            for n in range(6)]
    real = [_society(store, "openai:stub-model?endpoint=stub", f"What is {n} + 7?", str(n + 7))
            for n in range(3)]
    both = influence.from_store(store, RunFilters(), "both")
    assert set(both["kind"]) <= {"real", "simulated"} and "simulated" in set(both["kind"])
    for kind, ids in (("simulated", sims), ("real", real)):
        mine = influence.block(both, kind, "persona")
        assert set().union(*mine["run_ids"]) <= set(ids)
        # the cells add up to the runs' own credits and chances
        flips = chances = 0
        for run_id in ids:
            from engine.protocols import stored_rounds
            rounds = stored_rounds(store.get(run_id))
            flips += sum(credits(rounds).values())
            chances += sum(influence.opportunities(rounds).values())
        assert (mine["flips"].sum(), mine["opportunities"].sum()) == (flips, chances)
        assert set(mine["mover"]) | set(mine["moved"]) <= {"Skeptic", FOLLOWER}
    assert influence.block(both, "real", "model")["mover"].eq(
        "openai:stub-model?endpoint=stub").all()
    only_real = influence.from_store(store, RunFilters(), "real")
    assert set(only_real["kind"]) <= {"real"}


def test_the_insights_view(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    monkeypatch.setenv("PARLEY_DB_URL", url)
    store = Store(url)
    ids = [_society(store, "simulated?conformity=0.9", f"What is {n} * 5?", str(5 * n))
           for n in range(6)]
    table = influence.from_store(store, RunFilters(), "simulated")
    persona = influence.block(table, "simulated", "persona")
    assert not persona.empty
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"),
                           default_timeout=120).run()
    at.switch_page("pages/insights.py").run()  # through app.py's navigation: links resolve
    assert not at.exception, at.exception
    at.segmented_control(key="insights-view").set_value("moved").run()
    assert not at.exception, at.exception
    shown = at.dataframe[0].value
    assert list(shown["mover"]) == list(persona["mover"])
    # persona by persona over simulated runs is the world's draws, and says so
    assert [w.value for w in at.warning] == [influence.SIMULATED_PERSONAS]
    first = f"{persona.iloc[0]['mover']} → {persona.iloc[0]['moved']}"
    at.selectbox(key="influence-cell-simulated-persona").set_value(first).run()
    assert not at.exception, at.exception
    behind = persona.iloc[0]["run_ids"]
    assert any(f"{len(behind)} run" in m.value for m in at.markdown)
    assert set(behind) <= set(ids)
    at.segmented_control(key="influence-by").set_value("model").run()
    assert list(at.dataframe[0].value["mover"]) == ["simulated?conformity=0.9"]
    assert not at.warning  # model by model: the world's parameters are what it reads
