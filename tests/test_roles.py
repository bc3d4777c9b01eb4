"""A seat's role reaches the model (DESIGN 2): the library's description for a name, a
built-in role's own line, else the text given; the seeds' prompts are unchanged when no role
is set. The per-protocol check (every stored prompt of the seat) is in
`tests/protocol_contract.py`; these are the rules behind it."""
from __future__ import annotations

from engine import Seat
from engine.config import RunConfig
from engine.protocols import arun_config, run_sync
from engine.protocols.panel import run_panel
from engine.protocols.personas import ROLES, panel_seats
from engine.protocols import REGISTRY
from engine.protocols.roles import describe, library_roles, role_lines, set_roles
from engine.protocols.roundtable import run_roundtable
from engine.services import library

QUESTION = "Should the team ship on Friday?"


def prompts(result) -> list[tuple[str, str, str]]:
    return [(t.seat, t.phase, "\n".join(m["content"] for m in t.messages))
            for t in sorted(result.turns, key=lambda t: (t.seat, t.phase, t.round))]


def test_a_name_reads_the_library_then_the_built_in_then_itself():
    shipped = library.builtin_entries()["role"]
    stored = [*shipped, {"name": "risk_officer", "description": "Names the biggest risk.\n"
                         "Says if it is acceptable."}]
    known = library_roles(stored, REGISTRY.values())
    assert set(known) == {"risk_officer"}  # the built-ins as shipped add nothing of their own
    assert describe("risk_officer", known) == "Names the biggest risk. Says if it is acceptable."
    assert describe("Risk_Officer", known) == describe("risk_officer", known)
    assert describe("Devil's advocate", known) == ROLES["devil_advocate"].description
    assert describe("an auditor of the numbers", known) == "an auditor of the numbers"
    edited = [{**row, "description": "Checks the sums only."} if row["name"] == "verifier"
              else row for row in shipped]
    assert describe("verifier", library_roles(edited)) == "Checks the sums only."
    # A run knows its own protocol's shipped roles: another's, unknown to it, read as edited.
    duel = [row for row in shipped if row["description"].startswith("Duel:")]
    assert duel and set(library_roles(duel, [REGISTRY["duel"]])) == set()
    assert set(library_roles(duel)) == {row["name"] for row in duel}


def test_a_slot_s_own_role_is_no_role_set():
    critic = Seat("critic", role="critic")
    debater = Seat("cfo", role="verifier")
    assert set_roles([(critic, "critic"), (debater, "debater")]) == [debater]
    assert role_lines([debater], {}) == {"cfo": "Your role: " + ROLES["verifier"].description}


def test_without_a_role_the_panel_s_prompts_are_as_they_were(store):
    library.ensure_seeded(store)  # the built-in roles in the library change nothing either
    plain = run_panel(QUESTION, **panel_seats())
    stored = run_panel(QUESTION, **panel_seats(), store=store)
    assert prompts(plain) == prompts(stored)
    assert not any("Your role:" in text for _, _, text in prompts(plain))


def test_a_role_on_a_panel_debater_changes_only_its_system_prompt(store):
    library.save_entry(store, "role", {"name": "risk_officer",
                                       "description": "Names the single biggest risk."})
    seats = panel_seats()
    plain = run_panel(QUESTION, **seats, store=store)
    seats["debaters"][0] = seats["debaters"][0].model_copy(update={"role": "risk_officer"})
    roled = run_panel(QUESTION, **seats, store=store)
    for (seat, phase, before), (_, _, after) in zip(prompts(plain), prompts(roled),
                                                   strict=True):
        if seat == "cautious" and phase in ("propose", "rebuttal"):
            assert after == before.replace(
                seats["debaters"][0].persona,
                seats["debaters"][0].persona + "\n\nYour role: Names the single biggest risk.",
                1)
        elif seat not in ("critic", "judge"):  # whose prompts quote the debaters' replies
            assert after == before


def test_a_roundtable_agent_gets_the_library_s_words_in_its_own_system_prompt(store):
    library.ensure_seeded(store)
    library.save_entry(store, "role", {"name": "risk_officer",
                                       "description": "Names the single biggest risk."})
    result = run_roundtable(QUESTION, agents=[Seat("Ada", role="risk_officer"),
                                              Seat("Bo", role="critic")], store=store)
    ada = next(t for t in result.turns if t.seat == "Ada")
    assert ada.messages[0]["content"].startswith("You are Ada, Names the single biggest risk.")
    bo = next(t for t in result.turns if t.seat == "Bo")
    assert bo.messages[0]["content"].startswith("You are Bo, the critic: find the weakest")


def test_a_configuration_from_the_run_form_carries_the_role_to_the_model(store):
    """The Run page's seat (a library role by name) through `arun_config`, as the app runs."""
    from engine.services import runform
    library.save_entry(store, "role", {"name": "risk_officer",
                                       "description": "Names the single biggest risk."})
    choices = runform.slot_choices(store, "debate")
    choices["judge"][0] = {**choices["judge"][0], "role": "risk_officer"}
    config = runform.build_config(store, "debate", choices, model="simulated")
    assert RunConfig.parse(config).seats["judge"][0].role == "risk_officer"
    result = run_sync(arun_config(config, QUESTION, store=store, retries=0))
    stored = store.get(result.run_id)
    judged = [t for t in stored["turns"] if t["phase"] == "judge"]
    assert judged and all("Your role: Names the single biggest risk." in t["messages"][0][
        "content"] for t in judged)


def test_a_yes_no_question_gets_yes_or_no_from_the_simulated_model():
    """The simulator reads a question's form only: a yes/no question is answered yes or no,
    never 'option A/B/C' (any other question without an expected answer still is)."""
    from engine.analysis import normalize_stance
    for seed in range(5):
        result = run_panel(QUESTION, **panel_seats(f"simulated?seed={seed}"))
        stances = {normalize_stance(r.stance) for r in result.rebuttals if r.usable}
        stances |= {normalize_stance(p.stance) for p in result.proposals if p.usable}
        assert stances and stances <= {"yes", "no"}, stances
    other = run_panel("Which colour should the logo be?", **panel_seats())
    assert all(p.stance.startswith("option") for p in other.proposals if p.usable)
