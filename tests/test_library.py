"""The library: built-in personas and roles, editing, YAML round trips, saved configurations."""
from __future__ import annotations

import pytest

from engine import ConfigError, prompt_templates
from engine.protocols import REGISTRY, arun_config, check_config, run_sync
from engine.protocols.personas import PERSONAS, ROLES
from engine.services import library, runform


def names(store, kind):
    return [entry["name"] for entry in library.entries(store, kind)]


def test_seeded_once_with_the_seeds_personas_and_roles(store):
    personas = {p["name"]: p for p in library.entries(store, "persona")}
    assert {"cautious", "creative", "literal", "critic", "judge"} <= set(personas)
    assert personas["cautious"]["icon"] == "🛡️"
    assert personas["cautious"]["prompt"] == PERSONAS["cautious"].prompt
    assert all(p["builtin"] for p in personas.values())
    roles = set(names(store, "role"))
    assert set(ROLES) <= roles  # proposer, critic, devil_advocate, synthesiser, verifier
    assert {"proposer", "critic", "devil_advocate", "synthesiser", "verifier"} <= roles
    if "duel" in REGISTRY:
        assert {"optimist arguing in favor", "skeptic arguing against"} <= roles
    # Deleting a built-in is final: opening the library again does not put it back.
    cautious = personas["cautious"]
    library.delete_entry(store, cautious["id"])
    assert "cautious" not in names(store, "persona")
    assert library.ensure_seeded(store) is False


def test_create_edit_duplicate_delete(store):
    new_id = library.save_entry(store, "persona", {"name": " skeptic ", "icon": "🤨",
                                                   "prompt": "Doubt everything."})
    assert "skeptic" in names(store, "persona")
    library.save_entry(store, "persona", {"name": "skeptic", "icon": "🤨",
                                          "prompt": "Doubt most things."}, item_id=new_id)
    assert library.find(store, "persona", "skeptic")["prompt"] == "Doubt most things."
    copy_id = library.duplicate_entry(store, "persona", new_id)
    second = library.duplicate_entry(store, "persona", new_id)
    assert library.find(store, "persona", "skeptic (copy)")["id"] == copy_id
    assert library.find(store, "persona", "skeptic (copy 2)")["id"] == second
    library.delete_entry(store, copy_id)
    assert "skeptic (copy)" not in names(store, "persona")
    with pytest.raises(ConfigError, match="needs a name"):
        library.save_entry(store, "persona", {"name": "  "})
    with pytest.raises(ConfigError, match="already exists"):
        library.save_entry(store, "persona", {"name": "skeptic"})
    with pytest.raises(ConfigError, match="unknown field 'colour'"):
        library.save_entry(store, "role", {"name": "x", "colour": "red"})


def test_yaml_round_trip_and_malformed_yaml_stores_nothing(store, tmp_path):
    library.save_entry(store, "role", {"name": "auditor", "description": "checks sums"})
    text = library.export_yaml(store)
    assert "auditor" in text and "cautious" in text
    from engine import Store
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    counts = library.import_yaml(other, text)
    assert counts["role"] == len(names(store, "role"))
    assert library.find(other, "role", "auditor")["description"] == "checks sums"

    before = {kind: names(other, kind) for kind in library.KINDS}
    bad = [
        ("personas:\n  - name: a\n   icon: [\n", "malformed at line"),
        ("- just\n- a list\n", "must be a mapping"),
        ("people:\n  - name: x\n", "unknown section 'people'"),
        ("personas:\n  - name: ok\n  - icon: 🤖\n", "personas item 2: a persona needs a name"),
        ("personas:\n  - name: twin\n  - name: twin\n", "'twin' appears twice"),
        ("configurations:\n  - name: c\n    protocol: nope\n", "unknown protocol 'nope'"),
        ("", "empty"),
    ]
    for source, message in bad:
        with pytest.raises(ConfigError, match=message) as info:
            library.import_yaml(other, "personas:\n  - name: fresh\n" + source
                                if message == "'twin' appears twice" else source)
        assert "nothing was imported" in str(info.value)
    assert {kind: names(other, kind) for kind in library.KINDS} == before


def test_saved_configuration_runs_as_saved(store):
    protocol = "debate"
    choices = runform.slot_choices(store, protocol)
    choices["proponent"][0].update(persona="creative", role="proposer")
    defaults = {name: t["template"] for name, t in prompt_templates(protocol).items()}
    prompts = runform.prompt_overrides(protocol, {**defaults,
                                                  "judge": defaults["judge"] + "\nBe brief."})
    assert list(prompts) == ["judge"]  # unchanged templates are not overrides
    config = runform.build_config(store, protocol, choices, options={"max_rounds": 1},
                                  prompts=prompts, label="brief judge").stored()
    assert config["seats"]["proponent"][0]["persona"] == PERSONAS["creative"].prompt
    assert config["seats"]["proponent"][0]["icon"] == "💡"
    assert check_config(config).estimate() == {"calls": 3, "waves": 3, "tokens": 1800}
    library.save_config(store, config)
    loaded = store.saved_config("brief judge")
    assert loaded == config
    assert [c["label"] for c in store.saved_configs()] == ["brief judge"]
    # Picking it up again gives the same choices back (persona by name, not by text).
    again = runform.slot_choices(store, protocol, loaded)
    assert again["proponent"][0]["persona"] == "creative"
    result = run_sync(arun_config(loaded, "Is a short judge better?", store=store))
    run = store.get(result.run_id)
    assert run["status"] == "completed" and run["label"] == "brief judge"
    judge_turn = run["turns"][-1]
    assert judge_turn["messages"][-1]["content"].endswith("Be brief.")


def test_prompt_placeholders_are_checked_before_a_run(store):
    config = {"protocol": "debate", "prompts": {"judge": "Rule on {topic} using {secret}"}}
    with pytest.raises(ConfigError, match=r"may use \{topic\}, \{transcript\}; got \{secret\}"):
        check_config(config)
    with pytest.raises(ConfigError, match="no prompt template 'nope'"):
        check_config({"protocol": "debate", "prompts": {"nope": "x"}})
    with pytest.raises(ConfigError, match="needs a label"):
        library.save_config(store, {"protocol": "debate"})
    with pytest.raises(ConfigError, match="unknown model spec"):
        check_config({"protocol": "debate", "model": "nonsense:model"})


def test_every_registered_protocol_builds_a_valid_default_configuration(store):
    for name in REGISTRY:
        config = runform.build_config(store, name, runform.slot_choices(store, name))
        assert check_config(config).estimate()["calls"] > 0
        assert library.check_config(config).simulated
