"""Personas and roles declare simulated traits (stubbornness, accuracy, conformity) in the
library; a seat that plays one on the simulated model lives in the world they declare, shown
with its results, so choosing personas changes what the simulator does in a declared way."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import ConfigError
from engine.analysis.stats import wilson_interval
from engine.protocols import REGISTRY, arun_config, resolve_config, run_sync
from engine.reports.blind import blind_groups, config_worlds, unread_note
from engine.services import library, runform
from engine.simulated import with_traits, world_of
from engine.simulated.world import majority, same
from engine.views.blocks import worlds

MULE = {"name": "mule", "prompt": "You never change your mind.", "icon": "🐴",
        "traits": {"stubbornness": 0.8}}
OPEN = {"name": "open", "prompt": "You never change your mind."}  # same words, no traits


def society(store, *personas, label="society", model="simulated?conformity=0.5"):
    """A society configuration built as the Run page builds it, from library personas."""
    choices = {"agents": [{"persona": p} for p in personas]}
    return runform.build_config(store, "society", choices, model=model, label=label,
                                options={"rounds": 3})


def moves(config, questions):
    """Per seat: (times it joined the others' majority, times it stood off that majority),
    over `questions` runs of `config` with a numeric expected answer each."""
    counts: dict[str, list[int]] = {}
    for q in range(questions):
        result = run_sync(arun_config(config, f"q{q}", expected=str(10 + q), tags=[f"q{q}"]))
        rounds = REGISTRY[result.protocol].answers_by_round(result)
        for before, after in zip(rounds, rounds[1:], strict=False):
            for agent, now in after.items():
                common = majority([a for n, a in before.items() if n != agent and a])
                if common is None or same(common, before[agent]):
                    continue
                tally = counts.setdefault(agent, [0, 0])
                tally[0] += same(now, common)
                tally[1] += 1
    return counts


def test_a_persona_declares_traits_and_a_seat_on_it_lives_in_their_world(store):
    library.save_entry(store, "persona", MULE)
    library.save_entry(store, "persona", OPEN)
    library.save_entry(store, "role", {"name": "sage", "description": "Knows the answer.",
                                       "traits": {"accuracy": 0.95, "stubbornness": 0.5}})
    assert library.find(store, "persona", "mule")["traits"] == {"stubbornness": 0.8}
    seat = runform.seat(store, "agents", persona="mule", role="sage")
    assert seat["traits"] == {"stubbornness": 0.5, "accuracy": 0.95}  # the role's over it
    config = society(store, "mule", "open")
    stored = resolve_config(config).config.stored()["seats"]["agents"]
    assert world_of(stored[0]["model"]) == {**world_of("simulated?conformity=0.5"),
                                            "stubbornness": 0.8}
    assert stored[1]["model"] == "simulated?conformity=0.5" and "traits" not in stored[1]
    lines = worlds("", resolve_config(config).config.stored())
    assert lines == ["mule: skill 0.7 · conformity 0.5 · persuasion 0.4 · stubbornness 0.8 "
                     "· seed 0", "open: skill 0.7 · conformity 0.5 · persuasion 0.4 · seed 0"]
    assert config_worlds([config])[0].startswith("society, mule: skill 0.7")


def test_traits_reach_only_the_simulated_model_and_override_its_spec():
    assert with_traits("simulated?conformity=0.5&seed=2", {"conformity": 0.1,
                                                           "accuracy": 0.9}) == \
        "simulated?conformity=0.1&seed=2&skill=0.9"
    assert with_traits("openai:gpt-4o-mini", {"stubbornness": 1.0}) == "openai:gpt-4o-mini"
    assert with_traits("simulated", {}) == "simulated"


@pytest.mark.parametrize("traits, word", [({"wisdom": 0.5}, "wisdom"),
                                          ({"stubbornness": 1.5}, "stubbornness"),
                                          ({"accuracy": "lots"}, "accuracy"),
                                          ({"conformity": True}, "conformity"),
                                          ("stubborn", "traits")])
def test_a_bad_trait_is_refused_naming_it(store, traits, word):
    with pytest.raises(ConfigError, match=word):
        library.save_entry(store, "persona", {**MULE, "traits": traits})
    with pytest.raises(ConfigError, match=word):
        library.parse_yaml(f"personas:\n  - name: x\n    traits: {traits!r}\n".replace(
            "'", '"') if isinstance(traits, dict) else
            f"personas:\n  - name: x\n    traits: {traits}\n")


def test_traits_travel_through_the_library_yaml(store):
    library.import_yaml(store, "personas:\n  - name: mule\n    prompt: Hold firm.\n"
                               "    traits: {stubbornness: 0.8, conformity: 0.1}\n")
    assert library.find(store, "persona", "mule")["traits"] == {"stubbornness": 0.8,
                                                                "conformity": 0.1}
    assert "stubbornness: 0.8" in library.export_yaml(store)
    assert library.traits_text({"conformity": 0.1, "stubbornness": 0.8}) == \
        "stubbornness 0.8 · conformity 0.1"


def test_a_stubborn_persona_changes_its_mind_less_beyond_its_interval(store):
    """Two personas with the same words, one declaring stubbornness 0.8, in a society whose
    world has conformity 0.5: off the others' majority, the plain seat joins it about half the
    time and the stubborn one about 0.5 x (1 - 0.8) = 10% of the time; their Wilson intervals
    are apart (95%), and each holds its declared rate (within its 99% interval: two checks
    of a declared rate on seeded draws)."""
    for persona in (MULE, OPEN):
        library.save_entry(store, "persona", persona)
    counts = moves(society(store, "mule", "open", "open"), 120)
    stubborn, plain = counts["mule"], [a + b for a, b in zip(counts["open"], counts["open 2"],
                                                               strict=True)]
    s_low, s_high = wilson_interval(*stubborn)
    p_low, p_high = wilson_interval(*plain)
    assert stubborn[1] > 60 and plain[1] > 120, (stubborn, plain)
    assert s_high < p_low, (stubborn, plain)
    s_low, s_high = wilson_interval(*stubborn, z=2.576)
    p_low, p_high = wilson_interval(*plain, z=2.576)
    assert s_low <= 0.5 * (1 - 0.8) <= s_high and p_low <= 0.5 <= p_high, (stubborn, plain)


def test_personas_with_traits_are_not_a_blind_tie_and_words_alone_are(store):
    for persona in (MULE, OPEN, {"name": "other", "prompt": "Think in cash."}):
        library.save_entry(store, "persona", persona)
    words = society(store, "open", "open", label="words")
    other = society(store, "other", "other", label="other words")
    traits = society(store, "mule", "open", label="traits")
    assert blind_groups([words, other, traits]) == [["words", "other words"]]
    note = unread_note(words)
    assert note.startswith("The simulated model does not read personas' prompts, roles' words")
    assert "Declare traits on a persona" in note
    assert "It does read the declared traits of mule." in unread_note(traits)
    real = society(store, "open", "open", model="openai:gpt-4o-mini")
    assert unread_note(real) == ""


def test_per_persona_mind_changes_over_simulated_runs_carry_the_caveat(store):
    """Insights' Mind-change rate per persona over simulated panels says what it is: the
    simulator's draws, unless the personas declare traits."""
    from engine import run_panel
    from engine.protocols.personas import panel_seats
    from engine.reports import insights
    from engine.simulated.world import PERSONA_CAVEAT
    from engine.store import RunFilters
    run_panel("What is 6 * 7?", **panel_seats(), expected="42", store=store)
    section = next(iter(insights.report_from_store(store, RunFilters(), only=["panel"])))
    chart = next(c for c in section.charts if c.title.startswith("Mind-change rate per persona"))
    assert chart.caption.endswith(PERSONA_CAVEAT)
    assert "only the traits a persona declares" in PERSONA_CAVEAT


_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                       lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=12), inner, max_size=3), max_leaves=6)


@settings(max_examples=200, deadline=None)
@given(traits=_VALUES | st.dictionaries(st.sampled_from(["stubbornness", "accuracy",
                                                         "conformity", "x"]), _VALUES))
def test_hostile_traits_and_adversaries_are_refused_in_one_clear_error(traits):
    """Whatever a YAML file or a spec carries as traits or an adversary: accepted as rates in
    0..1 (and a mapping naming a seat) or refused with a `ConfigError`, never a crash."""
    from engine.config import check_adversary
    try:
        entry = library.clean_entry("persona", {"name": "x", "traits": traits})
    except ConfigError:
        pass
    else:
        assert all(0 <= v <= 1 for v in entry.get("traits", {}).values())
    try:
        check_adversary(traits)
    except ConfigError:
        pass


@pytest.mark.parametrize("protocol", ["society", "vote", "roundtable", "council", "single",
                                      "panel"])
def test_a_yes_no_question_gets_yes_or_no_in_every_protocol_that_answers(protocol):
    """Without an expected answer, a yes/no question is answered yes or no by every simulated
    seat of a protocol that gives an answer, never 'option A/B/C'."""
    from engine.analysis import normalize_stance
    finals = set()
    for seed in range(4):
        config = {"protocol": protocol, "model": f"simulated?seed={seed}"}
        result = run_sync(arun_config(config, "Should we ship the release on Friday?"))
        hook = REGISTRY[protocol].answers_by_round  # None: a protocol without rounds
        rounds = hook(result) if hook else []
        said = {normalize_stance(a) for answers in rounds for a in answers.values() if a}
        assert said <= {"yes", "no"}, (protocol, said)
        finals.add(normalize_stance(result.final_answer() or ""))
    assert finals <= {"yes", "no"} and finals, (protocol, finals)
