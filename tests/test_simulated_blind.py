"""Configurations the simulated model cannot tell apart are named before anyone reads their
tie as a finding: in the preflight (form and CLI) and beside the results."""
from __future__ import annotations

from engine import experiments as ex
from engine.protocols.personas import CAUTIOUS, CREATIVE, LITERAL
from engine.reports.blind import blind_groups, blind_notes

BOARD = [{"name": "cfo", "persona": "You are the CFO. Think in cash."},
         {"name": "cto", "persona": "You are the CTO. Think in systems."},
         {"name": "ceo", "persona": "You are the CEO."}]
SEED = [{"name": p.id, "persona": p.prompt} for p in (CAUTIOUS, CREATIVE, LITERAL)]


def panel(label: str, debaters: list[dict], **extra) -> dict:
    return {"protocol": "panel", "label": label, "seats": {"debaters": debaters}, **extra}


def test_personas_and_a_prompt_are_text_the_simulator_does_not_read():
    seeds = panel("seed personas", SEED)
    board = panel("board", BOARD, prompts={"rebuttal": "Hold firm. {question} {own_stance} "
                                                       "{flaw} {others}"})
    assert blind_groups([seeds, board]) == [["seed personas", "board"]]
    note = blind_notes([seeds, board])[0]
    assert note.startswith("seed personas and board differ only in what the simulated model "
                           "does not read")


def test_what_the_simulator_reads_tells_configurations_apart():
    seeds = panel("seed personas", SEED)
    stubborn = panel("stubborn", [{**s, "model": "simulated?conformity=0.05"} for s in SEED])
    four = panel("four", [*SEED, {"name": "ceo"}])
    real = panel("real", SEED, model="openai:gpt-4o-mini")
    rounds = {"protocol": "society", "label": "society", "options": {"rounds": 3}}
    assert blind_groups([seeds, stubborn, four, real, rounds]) == []
    assert blind_notes([seeds, real, panel("real board", BOARD, model="openai:gpt-4o-mini")]
                       ) == []  # on a real model the personas are read


def test_the_preflight_says_so_and_warns_of_a_budget_below_the_estimate(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")  # planned, never called
    spec = {"name": "board vs seed", "questions": "definite", "repeats": 1,
            "configs": [panel("seed personas", SEED), panel("board", BOARD)]}
    plan = ex.plan(spec, confirmed=True)
    notes = plan.preflight()["notes"]
    assert len(notes) == 1 and "seed personas and board" in notes[0]
    assert plan.budget_note == ""
    real = {**spec, "configs": [panel("board", BOARD, model="openai:gpt-4o-mini")],
            "budget_usd": 0.0001}
    priced = ex.plan(real, confirmed=True)
    assert priced.cost_usd and priced.cost_usd > 0.0001
    assert priced.budget_note.startswith("The budget ($0.00) is below the estimated cost")
    assert priced.preflight()["notes"] == [priced.budget_note]
