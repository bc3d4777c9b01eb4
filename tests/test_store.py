"""The store: turns written as they complete, crashes, interrupted runs, filters, export/import,
secrets, migrations and WAL (DESIGN 4)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import applied_migrations
from langchain_core.messages import AIMessage
from plugins.processes import dead_pid
from sqlalchemy import inspect, text, update

from engine import ConfigError, Store, run_debate, run_peer_review
from engine.store.schema import RunRow

JUDGE_REPLY = "1. VERDICT: Pro\n2. REASONING: r\n3. PRO SUMMARY: p\n4. CON SUMMARY: c\n" \
              "5. CONFIDENCE: 0.9"


class Crash(BaseException):
    """Stands in for a process-level crash (not an ordinary model error)."""


def fakes(recording_model, pro=("p1", "p2", "p3")):
    return dict(proponent=recording_model(list(pro)), opponent=recording_model(["c"]),
                judge=recording_model([JUDGE_REPLY]))


# --------------------------------------------------------------------------- lifecycle
def test_turns_are_written_as_each_completes(store, recording_model):
    seen = []

    def on_event(turn):
        runs = store.runs()
        stored = store.turns()
        seen.append((len(stored), int(stored["idx"].iloc[-1]), stored["reply"].iloc[-1],
                     runs["status"].iloc[0]))
        assert turn.index == int(stored["idx"].iloc[-1])

    result = run_debate("Q?", **fakes(recording_model), max_rounds=2, retries=0, store=store,
                        on_event=on_event)
    assert seen == [(1, 0, "p1", "running"), (2, 1, "c", "running"), (3, 2, "p2", "running"),
                    (4, 3, "c", "running"), (5, 4, JUDGE_REPLY, "running")]
    row = store.get(result.run_id)
    assert row["status"] == "completed" and row["calls"] == 5
    assert row["finished_at"] is not None


def test_stored_turn_holds_prompt_reply_and_parsed_fields(store, recording_model):
    result = run_debate("Q-marker?", **fakes(recording_model), max_rounds=1, retries=0,
                        store=store)
    turns = store.get(result.run_id)["turns"]
    assert [t["phase"] for t in turns] == ["argument", "counter-argument", "judge"]
    assert "Q-marker?" in turns[0]["messages"][-1]["content"]
    assert turns[0]["messages"][-1]["role"] == "user"
    assert turns[0]["reply"] == "p1"
    assert turns[2]["parsed"] == {"verdict": "Pro", "confidence": 0.9}
    assert turns[2]["status"] == "ok" and turns[2]["seat"] == "judge"


def test_degraded_turn_is_stored_with_its_error(store, recording_model):
    seats = fakes(recording_model, pro=[ValueError("model broke")])
    result = run_debate("Q?", **seats, max_rounds=1, retries=0, store=store)
    frame = store.turns(result.run_id)
    frame = frame[frame["status"] == "degraded"]
    assert list(frame["seat"]) == ["proponent"]
    assert "model broke" in frame["error"].iloc[0]
    assert store.get(result.run_id)["degraded"] == 1


def test_exception_escaping_on_event_leaves_completed_turns_and_a_failed_run(store,
                                                                             recording_model):
    def on_event(turn):
        if turn.index == 2:
            raise RuntimeError("listener crashed")

    with pytest.raises(RuntimeError, match="listener crashed"):
        run_debate("Q?", **fakes(recording_model), max_rounds=3, retries=0, store=store,
                   on_event=on_event)
    runs = store.runs()
    assert len(runs) == 1
    run = store.get(runs["id"].iloc[0])
    assert run["status"] == "failed"
    assert "listener crashed" in run["error"]
    assert [t["idx"] for t in run["turns"]] == [0, 1, 2]  # the turn in hand was written
    assert run["calls"] == 3


class CrashingModel:
    """A duck-typed chat model (`ainvoke` only) whose second call dies with a BaseException.

    (langchain-core's BaseChatModel turns a non-Exception BaseException raised inside
    `_agenerate` into an AttributeError, so the crash is raised from `ainvoke` itself.)
    """

    def __init__(self):
        self.calls = 0

    async def ainvoke(self, messages):
        self.calls += 1
        if self.calls > 1:
            raise Crash("power cut")
        return AIMessage(content="p1")


def test_base_exception_from_a_model_leaves_completed_turns_and_a_failed_run(store,
                                                                             recording_model):
    seats = fakes(recording_model)
    seats["proponent"] = CrashingModel()
    with pytest.raises(Crash):
        run_debate("Q?", **seats, max_rounds=3, retries=0, store=store)
    run = store.get(store.runs()["id"].iloc[0])
    assert run["status"] == "failed" and run["status"] != "running"
    assert "Crash" in run["error"]
    assert [(t["idx"], t["reply"]) for t in run["turns"]] == [(0, "p1"), (1, "c")]


def test_run_left_running_by_a_dead_process_reads_as_interrupted(store):
    run_id = store.start_run("debate", "Left behind?")
    alive = store.start_run("debate", "Still going?")
    with store.engine.begin() as connection:
        connection.execute(update(RunRow).where(RunRow.id == run_id).values(pid=dead_pid()))
    statuses = dict(zip(store.runs()["id"], store.runs()["status"]))
    assert statuses == {run_id: "interrupted", alive: "running"}
    assert store.get(run_id)["status"] == "interrupted"
    assert store.get(run_id)["finished_at"] is not None


def test_another_store_on_the_same_file_sees_the_interrupted_run(store, tmp_path):
    run_id = store.start_run("debate", "Q?")
    with store.engine.begin() as connection:
        connection.execute(update(RunRow).where(RunRow.id == run_id).values(pid=dead_pid()))
    other = Store(str(store.engine.url))
    assert other.get(run_id)["status"] == "interrupted"


# --------------------------------------------------------------------------- reading and filters
@pytest.fixture
def three_runs(store, recording_model):
    debate = run_debate("Is 100% uptime realistic?", **fakes(recording_model), max_rounds=1,
                        retries=0, store=store, label="alpha", tags=["t1", "shared"])
    review = run_peer_review("Write notes", producer=recording_model(["d"]),
                             reviewer=recording_model(["APPROVED: yes"]), retries=0,
                             store=store, label="beta", tags=["t2", "shared"])
    def crash(turn):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        run_debate("Crashing debate?", **fakes(recording_model), max_rounds=1, retries=0,
                   store=store, label="alpha", on_event=crash)
    failed = [i for i in store.runs()["id"] if i not in (debate.run_id, review.run_id)][0]
    return {"debate": debate.run_id, "review": review.run_id, "failed": failed}


def test_runs_is_a_dataframe_newest_first(store, three_runs):
    frame = store.runs()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame["id"]) == [three_runs["failed"], three_runs["review"],
                                 three_runs["debate"]]
    for column in ("protocol", "question", "label", "tags", "status", "metrics", "config",
                   "calls", "tokens_in", "tokens_out", "created_at", "simulated"):
        assert column in frame.columns
    debate = frame.set_index("id").loc[three_runs["debate"]]
    assert debate["tags"] == ["shared", "t1"]
    assert debate["metrics"]["judge_confidence"] == pytest.approx(0.9)


@pytest.mark.parametrize("filters, expected", [
    ({"protocol": "debate"}, {"debate", "failed"}),
    ({"protocol": "peer-review"}, {"review"}),
    ({"label": "alpha"}, {"debate", "failed"}),
    ({"label": "beta"}, {"review"}),
    ({"tag": "t1"}, {"debate"}),
    ({"tag": "shared"}, {"debate", "review"}),
    ({"tag": "t"}, set()),                       # a tag matches whole, not as a prefix
    ({"status": "completed"}, {"debate", "review"}),
    ({"status": "failed"}, {"failed"}),
    ({"search": "uptime"}, {"debate"}),
    ({"search": "Crashing"}, {"failed"}),
    ({"protocol": "debate", "status": "completed"}, {"debate"}),
    ({"label": "alpha", "tag": "t2"}, set()),
])
def test_run_filters(store, three_runs, filters, expected):
    found = set(store.runs(**filters)["id"])
    assert found == {three_runs[name] for name in expected}


def test_search_by_run_id(store, three_runs):
    assert list(store.runs(search=three_runs["review"])["id"]) == [three_runs["review"]]


@pytest.mark.parametrize("hostile", ["'; DROP TABLE runs; --", "\" OR 1=1 --",
                                     "x' OR '1'='1", "); DELETE FROM turns; --"])
def test_sql_metacharacters_in_filters_are_harmless(store, three_runs, hostile):
    assert store.runs(search=hostile).empty
    assert store.runs(label=hostile).empty
    assert store.runs(tag=hostile).empty
    assert len(store.runs()) == 3
    assert len(store.turns()) == 3 + 2 + 1
    assert set(inspect(store.engine).get_table_names()) >= {"runs", "turns"}


def test_like_wildcards_in_filters_match_literally(store, three_runs, recording_model):
    assert list(store.runs(search="%")["id"]) == [three_runs["debate"]]  # "100%" only
    assert list(store.runs(search="100%")["id"]) == [three_runs["debate"]]
    assert store.runs(search="_").empty
    wild = run_peer_review("Tagged", producer=recording_model(["d"]),
                           reviewer=recording_model(["APPROVED: yes"]), retries=0,
                           store=store, tags=["a_b"])
    run_peer_review("Tagged too", producer=recording_model(["d"]),
                    reviewer=recording_model(["APPROVED: yes"]), retries=0, store=store,
                    tags=["axb"])
    assert list(store.runs(tag="a_b")["id"]) == [wild.run_id]


def test_turns_dataframe_and_filters(store, three_runs):
    frame = store.turns(three_runs["debate"])
    assert isinstance(frame, pd.DataFrame)
    assert list(frame["idx"]) == [0, 1, 2]
    assert "messages" not in frame.columns
    with_messages = store.turns(three_runs["debate"], with_messages=True)
    assert with_messages["messages"].iloc[0][-1]["role"] == "user"
    assert list(frame["seat"]) == ["proponent", "opponent", "judge"]
    both = store.turns([three_runs["debate"], three_runs["review"]])
    assert set(both["run_id"]) == {three_runs["debate"], three_runs["review"]}
    assert len(both) == 5


# --------------------------------------------------------------------------- export and import
def test_export_run_is_json_with_turns(store, three_runs):
    doc = json.loads(store.export_run(three_runs["debate"]))
    assert doc["id"] == three_runs["debate"] and doc["protocol"] == "debate"
    assert doc["status"] == "completed"
    assert len(doc["turns"]) == 3 and doc["turns"][0]["reply"] == "p1"
    assert doc["result"]["verdict"] == "Pro"


def test_export_jsonl_then_import_round_trips(store, three_runs, tmp_path):
    dump = store.export_jsonl()
    lines = [json.loads(line) for line in dump.splitlines()]
    assert {d["id"] for d in lines} == set(three_runs.values())
    fresh = Store(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert sorted(fresh.import_runs(dump)) == sorted(three_runs.values())
    for name, run_id in three_runs.items():
        before, after = store.get(run_id), fresh.get(run_id)
        for key in ("protocol", "question", "label", "tags", "status", "error", "result",
                    "metrics", "calls", "tokens_in", "created_at"):
            assert after[key] == before[key], (name, key)
        assert [(t["idx"], t["phase"], t["reply"], t["status"], t["parsed"], t["messages"])
                for t in after["turns"]] == \
            [(t["idx"], t["phase"], t["reply"], t["status"], t["parsed"], t["messages"])
             for t in before["turns"]]
    assert dict(zip(fresh.runs()["id"], fresh.runs()["status"])) == {
        three_runs["debate"]: "completed", three_runs["review"]: "completed",
        three_runs["failed"]: "failed"}


def test_import_single_json_export(store, three_runs, tmp_path):
    fresh = Store(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert fresh.import_runs(store.export_run(three_runs["review"])) == [three_runs["review"]]
    assert fresh.get(three_runs["review"])["result"]["approved"] is True


def test_importing_twice_skips_duplicates(store, three_runs, tmp_path):
    fresh = Store(f"sqlite:///{tmp_path / 'fresh.db'}")
    dump = store.export_jsonl()
    assert len(fresh.import_runs(dump)) == 3
    assert fresh.import_runs(dump) == []
    assert len(fresh.runs()) == 3 and len(fresh.turns()) == 6
    assert store.import_runs(dump) == []  # into the store it came from


def test_imported_running_run_becomes_interrupted(store, tmp_path):
    run_id = store.start_run("debate", "In flight?")
    fresh = Store(f"sqlite:///{tmp_path / 'fresh.db'}")
    fresh.import_runs(store.export_run(run_id))
    assert fresh.get(run_id)["status"] == "interrupted"


@pytest.mark.parametrize("data", ["not json at all", '{"foo": 1}', "[1, 2, 3]",
                                  '{"id": "x"}', '{"id": "a", "protocol": "debate"}\nnope'])
def test_malformed_import_raises_config_error(store, data):
    with pytest.raises(ConfigError) as info:
        store.import_runs(data)
    assert info.value.code == "input"
    assert store.runs().empty


def test_empty_import_imports_nothing(store):
    assert store.import_runs("   \n") == []


# --------------------------------------------------------------------------- secrets
def test_secrets_in_config_are_never_stored(store, recording_model, tmp_path):
    # A key where a configuration has no such key is refused before anything is stored ...
    for bad in ({"protocol": "debate", "api_key": "sk-TOP-SECRET-1"},
                {"protocol": "debate", "seats": {"proponent": [
                    {"name": "pro", "model": "openai:gpt-4o",
                     "openai_api_key": "sk-TOP-SECRET-2"}]}}):
        with pytest.raises(ConfigError) as refused:
            run_debate("Q?", **fakes(recording_model), max_rounds=1, retries=0, store=store,
                       config=bad)
        assert "SECRET" not in str(refused.value)
    assert store.runs().empty
    # ... and secrets nested in option values are stripped when the configuration is stored.
    config = {"protocol": "debate",
              "seats": {"proponent": [{"name": "pro", "model": "openai:gpt-4o"}]},
              "options": {"max_rounds": 1, "auth": {"password": "hunter2-SECRET",
                                                    "bearer_token": "tok-SECRET"}}}
    result = run_debate("Q?", **fakes(recording_model), max_rounds=1, retries=0, store=store,
                        config=config)
    stored = store.get(result.run_id)["config"]
    assert stored["seats"] == {"proponent": [{"name": "pro", "model": "openai:gpt-4o",
                                              "persona": "", "persona_name": "", "role": "",
                                              "temperature": None, "icon": ""}]}
    assert stored["options"] == {"max_rounds": 1, "auth": {}}
    store.engine.dispose()
    raw = b"".join(p.read_bytes() for p in Path(tmp_path).glob("parley.db*"))
    for secret in (b"sk-TOP-SECRET-1", b"sk-TOP-SECRET-2", b"hunter2-SECRET", b"tok-SECRET"):
        assert secret not in raw
    exported = store.export_run(result.run_id)
    assert "SECRET" not in exported


def test_default_config_records_seats_by_spec_without_keys(store, recording_model):
    seats = fakes(recording_model)
    seats["judge"] = "simulated"
    result = run_debate("Q?", **seats, max_rounds=1, retries=0, store=store)
    config = store.get(result.run_id)["config"]
    assert config["protocol"] == "debate"
    assert {slot: [s["name"] for s in seats] for slot, seats in config["seats"].items()} == {
        "proponent": ["proponent"], "opponent": ["opponent"], "judge": ["judge"]}
    assert config["seats"]["judge"][0]["model"] == "simulated"
    assert config["options"]["max_rounds"] == 1


def test_imported_config_is_stripped_too(store, tmp_path):
    doc = {"id": "abc123", "protocol": "debate", "question": "Q", "status": "completed",
           "config": {"api_key": "sk-IMPORTED-SECRET", "model": "simulated"}, "turns": []}
    store.import_runs(json.dumps(doc))
    assert store.get("abc123")["config"] == {"model": "simulated"}


# --------------------------------------------------------------------------- schema
def test_migrations_are_listed(store):
    assert applied_migrations(store) == ["0001_runs_and_turns", "0002_library"] or \
        applied_migrations(store)[:2] == ["0001_runs_and_turns", "0002_library"]


def test_database_with_only_the_first_migration_is_migrated_on_open(tmp_path,
                                                                    recording_model):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    old = Store(url)
    run = run_debate("Kept?", **fakes(recording_model), max_rounds=1, retries=0, store=old)
    with old.engine.begin() as connection:
        connection.execute(text("DELETE FROM schema_migrations WHERE name = '0002_library'"))
        connection.execute(text("DROP TABLE library"))
    old.engine.dispose()
    assert "library" not in inspect(old.engine).get_table_names()

    reopened = Store(url)
    assert "0002_library" in applied_migrations(reopened)
    assert applied_migrations(reopened)[:2] == ["0001_runs_and_turns", "0002_library"]
    assert "library" in inspect(reopened.engine).get_table_names()
    reopened.put_library("persona", "Cautious", {"persona": "Check twice."})
    assert reopened.library("persona")[0]["persona"] == "Check twice."
    assert reopened.get(run.run_id)["status"] == "completed"  # existing data survives
    assert reopened.migrate() == []  # nothing left to apply


def test_configurations_of_the_old_flat_shape_are_migrated_by_slot_once(tmp_path):
    """Migration 0004: stored seats as a flat list with `slot` keys become a RunConfig; a list
    without slots keeps no seats (the run says it cannot be re-run); metrics gain the outcome
    line; saved library configurations are normalised; the run can be re-run."""
    from engine.protocols import arun_config, run_sync
    from plugins.reruns import rerun

    from engine.services.rerun import rerun_resolved
    url = f"sqlite:///{tmp_path / 'old.db'}"
    old = Store(url)
    slotted = run_sync(arun_config({"protocol": "vote"}, "Q?", store=old))
    saved = run_sync(arun_config({"protocol": "debate", "options": {"max_rounds": 1}}, "D?",
                                 store=old))
    voters = old.get(slotted.run_id)["config"]["seats"]["voters"]
    flat = {"protocol": "vote", "options": {}, "prompts": {},
            "seats": [{"slot": "voters", **v} for v in voters]}
    with old.engine.begin() as connection:
        connection.execute(text("DELETE FROM schema_migrations WHERE name = '0004_configs_by_slot'"))
        connection.execute(update(RunRow).where(RunRow.id == slotted.run_id).values(
            config=json.dumps(flat), metrics=json.dumps({"winner": "x"})))
        connection.execute(update(RunRow).where(RunRow.id == saved.run_id).values(
            config=json.dumps({"protocol": "debate", "seats": [{"name": "a", "model": "m"}]})))
        connection.execute(text(
            "INSERT INTO library (kind, name, body, builtin, updated_at) VALUES "
            "('config', 'old one', :body, 0, '2026-01-01 00:00:00')"),
            {"body": json.dumps({"protocol": "debate", "seats": {"judge": {"model": "simulated"}}})})
    old.engine.dispose()

    reopened = Store(url)  # migrated, then back-filled by the protocols
    assert "0004_configs_by_slot" in applied_migrations(reopened)
    run = reopened.get(slotted.run_id)
    assert [v["name"] for v in run["config"]["seats"]["voters"]] == [v["name"] for v in voters]
    assert run["metrics"]["winner"] == slotted.tally.winner and run["metrics"]["outcome"]
    assert rerun_resolved(run["config"]).given.protocol == "vote"
    assert rerun(reopened, run)["id"] != slotted.run_id
    with pytest.raises(ConfigError, match="cannot be re-run"):
        rerun_resolved(reopened.get(saved.run_id)["config"])
    [body] = [r for r in reopened.library("config") if r["name"] == "old one"]
    assert body["seats"] == {"judge": [{"model": "simulated"}]}
    assert reopened.migrate() == []


def test_sqlite_runs_in_wal_mode(store):
    with store.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar().lower() == "wal"
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0


def test_save_stores_a_result_made_without_a_store(store, recording_model):
    result = run_debate("Saved later?", **fakes(recording_model), max_rounds=1, retries=0)
    assert result.run_id is None
    run_id = store.save(result, label="later", tags=["x"])
    row = store.get(run_id)
    assert row["status"] == "completed" and row["label"] == "later" and row["tags"] == ["x"]
    assert [t["reply"] for t in row["turns"]] == [t.reply for t in result.turns]
    assert store.save(result, label="relabelled") == run_id  # saving again relabels
    assert store.get(run_id)["label"] == "relabelled" and len(store.runs()) == 1
    assert row["metrics"]["outcome"]  # the metrics the run's protocol handed in


def test_a_result_no_run_finished_is_saved_from_the_protocols_side(store, recording_model):
    """The store layer computes no protocol's metrics: a result read back (no run finished
    it) is refused by the bare `engine.store.Store.save` unless its protocol's assessment
    is handed in, and saved with its protocol's by the public `engine.Store` (the store
    with the protocols' side attached, DESIGN 4's `store.save(result, label, tags)`)."""
    from engine.protocols import REGISTRY
    from engine.store import Store as BareStore
    done = store.get(run_debate("Read back?", **fakes(recording_model), max_rounds=1,
                                retries=0, store=store).run_id)
    result = REGISTRY["debate"].read_result(done["result"])
    result.protocol, result.run_id = "debate", None
    bare = BareStore(store.url)
    with pytest.raises(ValueError, match="assessment"):
        bare.save(result)
    spec = REGISTRY["debate"]
    again = bare.get(bare.save(result, label="copied",
                               assessed=(spec.metrics(result), *spec.assess(result))))
    result.run_id = None
    assert again["label"] == "copied" and again["metrics"]["outcome"] == \
        done["metrics"]["outcome"]
    public = store.get(store.save(result, label="public"))
    assert public["label"] == "public" and public["metrics"] == again["metrics"]


def test_the_public_store_checks_an_import_against_every_protocol(store, tmp_path,
                                                                   recording_model):
    """`engine.Store(url).import_runs(data)` needs no result types handed in: the public
    store checks a file's runs against every protocol's, as the bare store's callers must."""
    run_id = run_debate("Exported?", **fakes(recording_model), max_rounds=1, retries=0,
                        store=store).run_id
    other = Store(f"sqlite:///{tmp_path / 'other.db'}")
    assert other.import_runs(store.export_run(run_id)) == [run_id]
    with pytest.raises(ConfigError):
        other.import_runs(json.dumps({"id": "x", "protocol": "no-such-protocol"}))
