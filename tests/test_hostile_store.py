"""Hostile data never bricks the store (issue 10, "One imported record can make the whole store
unreadable"): every record entering the store is checked against one schema (refused with its
line, nothing of the file written); a row that cannot be read shows as unreadable, with its
id, and can be deleted; a newer database is refused at open; a read-only one can be read.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from engine import ConfigError, Store, run_debate, run_panel
from engine.reports import insights
from engine.reports import runs as history
from engine.services.tasks import TaskRunner
from engine.store import RunFilters, records
from engine.text import NAME_MAX

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def exported(tmp_path) -> dict:
    """A sound export of a completed debate (the record the hostile ones are made from)."""
    source = Store(f"sqlite:///{tmp_path / 'source.db'}")
    result = run_debate("Is the plan sound?", proponent="simulated", opponent="simulated",
                        judge="simulated", max_rounds=1, store=source, label="base",
                        tags=["x"])
    return json.loads(source.export_run(result.run_id))


def nothing_stored(store: Store) -> bool:
    return store.runs().empty and store.turns().empty


# --------------------------------------------------------------------------- import
def test_one_imported_record_can_no_longer_make_the_whole_store_unreadable(store, exported,
                                                                          tmp_path):
    """The finding: a run whose `tags` is a string imported with exit 0, and afterwards Runs,
    run detail, Insights and the CLI all failed. Now it is refused by line, nothing written."""
    good = dict(exported, id="good1")
    bad = dict(exported, id="bad1", tags="a string")
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        store.import_runs(path.read_text(encoding="utf-8"))
    assert "line 2" in str(info.value) and "tags" in str(info.value)
    assert "nothing was imported" in str(info.value)
    assert nothing_stored(store)  # not even the good first line
    done = cli("import", str(path), "--db", str(store.engine.url))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "line 2" in done.stderr and nothing_stored(store)
    assert store.import_runs(json.dumps(good)) == ["good1"]  # the good record alone imports
    assert cli("runs", "--db", str(store.engine.url)).returncode == 0


def _deep(n: int) -> str:
    return "[" * n + "]" * n


HOSTILE = [  # (what, change to a sound record, words the refusal must hold)
    ("tags a string", {"tags": "a string"}, "tags"),
    ("tags not text", {"tags": [1, 2]}, "tags"),
    ("unknown status", {"status": "exploded"}, "status"),
    ("count as text", {"calls": "5"}, "calls"),
    ("count beyond INTEGER", {"calls": 10 ** 12}, "calls"),
    ("negative tokens", {"tokens_in": -1}, "tokens_in"),
    ("a boolean count", {"calls": True}, "calls"),
    ("not a time", {"created_at": "yesterday"}, "created_at"),
    ("a time as a number", {"created_at": 1700000000}, "created_at"),
    ("label over 200", {"label": "L" * (NAME_MAX + 1)}, "label"),
    ("id with spaces", {"id": "a b"}, "id"),
    ("id too long", {"id": "x" * 33}, "id"),
    ("id with a lone surrogate", {"id": "ab\ud800"}, "id"),
    ("protocol with markup", {"protocol": "<b>debate</b>"}, "protocol"),
    ("config a list", {"config": [1, 2]}, "config"),
    ("result a string", {"result": "done"}, "result"),
    ("result of another shape", {"result": {"verdict": {"x": 1}}}, "result"),
    ("metrics nested", {"metrics": {"winner": {"a": 1}}}, "metrics"),
    ("round votes not counts", {"metrics": {"round_votes": [{"4": "many"}]}}, "round_votes"),
    ("round votes negative", {"metrics": {"round_votes": [{"4": -1}]}}, "round_votes"),
    ("round votes a mapping", {"metrics": {"round_votes": {"4": 2}}}, "round_votes"),
    ("round votes deeper", {"metrics": {"round_votes": [{"4": [1]}]}}, "round_votes"),
    ("question missing", {"question": None}, "question"),
    ("experiment id malformed", {"experiment_id": "../../etc"}, "experiment_id"),
    ("turns a string", {"turns": "many"}, "turns"),
    ("exported unreadable", {"unreadable": "tags is text"}, "unreadable"),
]
TURN_HOSTILE = [
    ("turn status", {"status": "great"}, "status"),
    ("seat over 200", {"seat": "S" * (NAME_MAX + 1)}, "seat"),
    ("phase over 40", {"phase": "p" * 41}, "phase"),
    ("model over 200", {"model": "m" * (NAME_MAX + 1)}, "model"),
    ("messages of objects", {"messages": [{"role": "user", "content": {"a": 1}}]}, "messages"),
    ("parsed a list", {"parsed": [1]}, "parsed"),
    ("latency as text", {"latency": "fast"}, "latency"),
    ("warnings a string", {"warnings": "oops"}, "warnings"),
    ("index negative", {"idx": -1}, "idx"),
]


@pytest.mark.parametrize("what, change, words", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_malformed_records_are_refused_with_their_line_and_nothing_is_written(
        store, exported, what, change, words):
    """The finding's "other malformed records give tracebacks": each is one line now."""
    doc = {**exported, **change}
    if change.get("question", "") is None:
        del doc["question"]
    lines = [json.dumps(dict(exported, id="fine1")), json.dumps(doc)]
    with pytest.raises(ConfigError) as info:
        store.import_runs("\n".join(lines))
    message = str(info.value)
    assert info.value.code == "input" and "line 2" in message and words in message, message
    assert "\n" not in message
    assert nothing_stored(store)


@pytest.mark.parametrize("what, change, words", TURN_HOSTILE, ids=[h[0] for h in TURN_HOSTILE])
def test_malformed_turns_are_refused_with_their_record(store, exported, what, change, words):
    turns = [dict(t) for t in exported["turns"]]
    turns[1].update(change)
    with pytest.raises(ConfigError) as info:
        store.import_runs(json.dumps(dict(exported, turns=turns)))
    assert "record 1" in str(info.value) and words in str(info.value), str(info.value)
    assert nothing_stored(store)


@pytest.mark.parametrize("payload, words", [
    ('{"id": "a", "protocol": "debate", "question": "q", "status": "completed", '
     '"latency": NaN}', "latency"),
    ('{"id": "a", "protocol": "debate", "question": "q", "status": "completed", '
     '"result": {"x": Infinity}}', "result"),
    ('{"id": "a", "protocol": "debate", "question": "q", "status": "completed", '
     '"config": {"x": ' + "1" * 5000 + '}}', "line 1"),
    ('{"id": "a", "protocol": "debate", "question": "q", "status": "completed", '
     '"config": {"x": ' + _deep(100_000) + '}}', "line 1"),
    ('{"id": "a", "protocol": "debate", "question": "q", "status": "completed", '
     '"config": {"x": ' + _deep(70) + '}}', "nested deeper"),
    ("[1, 2, 3]", "not a Parley run export"),
    ('{"id": "a", "protocol": "debate", "question": "q", "status": "completed"}\n{"id": ',
     "line 2"),
])
def test_hostile_json_is_refused_in_one_line(store, payload, words):
    with pytest.raises(ConfigError) as info:
        store.import_runs(payload)
    assert words in str(info.value) and "\n" not in str(info.value), str(info.value)
    assert nothing_stored(store)


def test_duplicate_turn_indexes_are_refused(store, exported):
    turns = [dict(t) for t in exported["turns"]]
    turns[1]["idx"] = turns[0]["idx"]
    with pytest.raises(ConfigError, match="appears twice"):
        store.import_runs(json.dumps(dict(exported, turns=turns)))
    assert nothing_stored(store)


def test_jsonl_is_split_on_newline_only(store, exported):
    """U+2028, U+2029, NEL and form feed are line breaks to `str.splitlines`, not to JSONL: a
    reply holding them imports intact."""
    turns = [dict(t) for t in exported["turns"]]
    odd = "one\u2028two\u2029three\x85four\x0cfive\x1cend"
    turns[0]["reply"] = odd
    data = json.dumps(dict(exported, id="odd1", turns=turns), ensure_ascii=False) + "\n" + \
        json.dumps(dict(exported, id="odd2"), ensure_ascii=False) + "\n"
    assert sorted(store.import_runs(data)) == ["odd1", "odd2"]
    assert store.get("odd1")["turns"][0]["reply"] == odd


def test_crlf_jsonl_and_bytes_import(store, exported):
    data = (json.dumps(dict(exported, id="crlf1")) + "\r\n" +
            json.dumps(dict(exported, id="crlf2")) + "\r\n").encode("utf-8")
    assert sorted(store.import_runs(data)) == ["crlf1", "crlf2"]
    with pytest.raises(ConfigError, match="not UTF-8"):
        store.import_runs(b"\xff\xfe{}")


def test_text_people_and_models_wrote_is_kept_cleaned_on_import(store, exported):
    turns = [dict(t) for t in exported["turns"]]
    turns[0]["reply"] = "lone \ud800 and nul \x00 here"
    turns[0]["messages"] = [{"role": "user", "content": "ask \udfff"}]
    doc = dict(exported, question="Q \x00?", turns=turns, error="bad \ud83d")
    store.import_runs(json.dumps(doc))  # json escapes the surrogates as \\ud800 ...
    run = store.get(doc["id"])
    assert run["turns"][0]["reply"] == "lone \ufffd and nul \ufffd here"
    assert run["turns"][0]["messages"] == [{"role": "user", "content": "ask \ufffd"}]
    assert run["question"] == "Q \ufffd?" and run["error"] == "bad \ufffd"
    assert not run["unreadable"]


def test_import_size_caps(store, exported, tmp_path, monkeypatch):
    many = dict(exported, turns=[{"idx": i, "phase": "p", "seat": "s", "status": "ok"}
                                 for i in range(records.MAX_TURNS + 1)])
    with pytest.raises(ConfigError, match="turns"):
        store.import_runs(json.dumps(many))
    monkeypatch.setattr(records, "MAX_IMPORT_BYTES", 1000)
    with pytest.raises(ConfigError) as info:
        store.import_runs(json.dumps(exported))
    assert info.value.code == "limit" and "limit" in str(info.value)
    assert nothing_stored(store)


def test_cli_refuses_an_import_file_over_the_size_cap_before_reading_it(store, tmp_path):
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as handle:  # sparse: 201 MB on paper, nothing on disk
        handle.truncate(records.MAX_IMPORT_BYTES + 1)
    done = cli("import", str(path), "--db", str(store.engine.url))
    assert done.returncode == 2 and "the limit is 200 MB" in done.stderr
    assert nothing_stored(store)


def test_every_protocols_export_passes_the_schema(tmp_path):
    """The schema refuses what is malformed, never what Parley itself wrote."""
    source = Store(f"sqlite:///{tmp_path / 'all.db'}")
    from engine.protocols import REGISTRY, arun_config, run_sync
    for name in REGISTRY:
        run_sync(arun_config({"protocol": name, "model": "simulated"}, "Is 2+2 four?",
                             store=source, expected="yes"))
    target = Store(f"sqlite:///{tmp_path / 'copy.db'}")
    assert len(target.import_runs(source.export_jsonl())) == len(REGISTRY)
    assert set(target.runs()["unreadable"]) == {""}


# --------------------------------------------------------------------------- both backends
def test_a_lone_surrogate_or_nul_in_a_reply_is_stored_as_replacement_on_both_backends(
        backend, recording_model):  # noqa: F811
    """The finding: a lone surrogate failed the run when stored; NUL failed on PostgreSQL."""
    hostile = "pro \ud800 and \x00 end"
    result = run_debate("Q?", proponent=recording_model([hostile]),
                        opponent=recording_model(["con"]),
                        judge=recording_model(["VERDICT: pro \x00\nCONFIDENCE: 0.5"]),
                        max_rounds=1, retries=0, store=backend)
    run = backend.get(result.run_id)
    assert run["status"] == "completed", run["error"]
    assert run["turns"][0]["reply"] == "pro \ufffd and \ufffd end"
    assert "\x00" not in json.dumps(run["result"]) and not run["unreadable"]


def test_backends_accept_exactly_the_same_values(backend, recording_model):  # noqa: F811
    """Labels and tags over 200 characters are refused before any call; a turn the engine
    already paid for keeps a shortened seat and model name; library names likewise."""
    judge = recording_model(["VERDICT: pro\nCONFIDENCE: 0.5"])
    with pytest.raises(ConfigError, match="label"):
        run_debate("Q?", proponent=judge, opponent=judge, judge=judge, max_rounds=1,
                   store=backend, label="L" * (NAME_MAX + 1))
    with pytest.raises(ConfigError, match="tag"):
        run_debate("Q?", proponent=judge, opponent=judge, judge=judge, max_rounds=1,
                   store=backend, tags=["T" * (NAME_MAX + 1)])
    assert judge.received == [] and backend.runs().empty
    run_id = backend.start_run("debate", "Q?", label="L" * NAME_MAX)
    from engine.models import Turn
    backend.add_turn(run_id, Turn(index=0, phase="p" * 60, seat="S" * 300,
                                  model="m" * 300 + "\x00", reply="r\x00", latency=float("nan"),
                                  tokens_in=10 ** 12, parsed={"n": float("inf"), "big": 10 ** 30,
                                                              "deep": json.loads(_deep(100))}))
    turn = backend.get(run_id)["turns"][0]
    assert len(turn["seat"]) == NAME_MAX and turn["seat"].endswith("…")
    assert len(turn["phase"]) == 40 and "\x00" not in turn["model"]
    assert turn["latency"] == 0.0 and turn["tokens_in"] == records.INT_MAX
    assert turn["parsed"]["n"] is None and turn["parsed"]["big"] == 1e30
    assert "nested deeper" in json.dumps(turn["parsed"]["deep"])
    with pytest.raises(ConfigError, match="name"):
        backend.put_library("persona", "P" * (NAME_MAX + 1), {"prompt": "x"})
    backend.put_library("persona", "Nul", {"prompt": "be \x00 careful \ud800"})
    assert backend.library("persona")[0]["prompt"] == "be \ufffd careful \ufffd"


def test_import_refusal_writes_nothing_on_both_backends(backend, exported):  # noqa: F811
    lines = [json.dumps(dict(exported, id=f"ok{i}")) for i in range(3)]
    lines.append(json.dumps(dict(exported, id="bad", calls=2 ** 40)))
    with pytest.raises(ConfigError, match="line 4"):
        backend.import_runs("\n".join(lines))
    assert nothing_stored(backend)
    assert sorted(backend.import_runs("\n".join(lines[:3]))) == ["ok0", "ok1", "ok2"]


# --------------------------------------------------------------------------- tolerant reading
def poison(store: Store) -> dict[str, str]:
    """Three sound runs and, written with raw SQL, rows no reader can take at face value."""
    good = run_debate("A sound run?", proponent="simulated", opponent="simulated",
                      judge="simulated", max_rounds=1, store=store, label="ok").run_id
    panel = run_panel("Which is larger, 3 or 5?", debaters=["simulated"] * 3,
                      critic="simulated", judge="simulated", store=store, label="ok").run_id
    bad = {name: run_debate(f"Poisoned by {name}?", proponent="simulated",
                            opponent="simulated", judge="simulated", max_rounds=1,
                            store=store, label="bad").run_id
           for name in ("tags", "metrics", "parsed", "created", "calls", "status", "result")}
    with store.engine.begin() as connection:
        def set_run(name: str, sql: str) -> None:
            connection.execute(text(f"UPDATE runs SET {sql} WHERE id = :id"), {"id": bad[name]})
        set_run("tags", """tags = '"a string"'""")
        set_run("metrics", "metrics = 'not json'")
        set_run("created", "created_at = 'yesterday'")
        set_run("calls", "calls = 'many'")
        set_run("status", "status = 'exploded'")
        set_run("result", """result = '{"verdict": {"x": 1}, "confidence": "high"}',
                             metrics = '{"judge_confidence": "high"}'""")
        connection.execute(text("UPDATE turns SET parsed = '[1' WHERE run_id = :id"),
                           {"id": bad["parsed"]})
    # A panel whose stored tally is of another shape (Insights reads panels' ballots).
    with store.engine.begin() as connection:
        row = connection.execute(text("SELECT result FROM runs WHERE id = :id"),
                                 {"id": panel}).scalar()
        result = json.loads(row)
        result["tally"]["ballots"] = [1, 2]
        result["first_round"]["counts"] = {"a": "x"}
        connection.execute(text("UPDATE runs SET result = :r WHERE id = :id"),
                           {"r": json.dumps(result), "id": panel})
    return {"good": good, "panel": panel, **bad}


def test_a_row_that_cannot_be_read_shows_as_unreadable_with_its_id(store):
    ids = poison(store)
    frame = store.runs()
    assert set(frame["id"]) == set(ids.values())  # every row is listed
    why = dict(zip(frame["id"], frame["unreadable"]))
    assert why[ids["good"]] == ""
    assert "tags is text, not a list of text" in why[ids["tags"]]
    assert "metrics is not JSON" in why[ids["metrics"]]
    assert "created_at is not a time" in why[ids["created"]]
    assert "calls is 'many', not a number" in why[ids["calls"]]
    assert "status 'exploded'" in why[ids["status"]]
    assert frame.set_index("id").loc[ids["tags"], "tags"] == []
    run = store.get(ids["parsed"])
    assert "turn 0: parsed is not JSON" in run["unreadable"]
    assert run["turns"][0]["parsed"] is None and run["turns"][1]["reply"]
    assert store.get(ids["status"])["status"] == "exploded"  # shown as it is
    turns = store.turns(ids["parsed"])
    assert "parsed is not JSON" in turns["unreadable"].iloc[0]
    exported = [json.loads(line) for line in store.export_jsonl().splitlines()]
    assert {d["id"] for d in exported} == set(ids.values())


def test_pages_data_keeps_working_when_one_row_is_bad(store):
    """Runs page, run detail and Insights read models, over every poisoned row."""
    ids = poison(store)
    page = history.history(store, RunFilters())
    assert set(page.table["id"]) == set(ids.values())
    assert {i for i, _ in history.unreadable_runs(page.table)} == {
        ids[n] for n in ("tags", "metrics", "created", "calls", "status")}
    assert history.choices(store)["tag"] == []  # the string "tags" is not a list of tags
    for name, run_id in ids.items():
        detail = history.run_detail(store, run_id)
        assert detail.transcript, name
    assert any("could not be read" in p for p in history.run_detail(store, ids["tags"]).problems)
    assert history.run_detail(store, ids["result"]).outcome == ""
    panel = history.run_detail(store, ids["panel"])
    assert any("does not fit this protocol's result" in p for p in panel.problems)
    assert insights.report_from_store(store, RunFilters())
    assert history.outcome_text({"outcome": {"not": "text"}}) == ""


def test_cli_runs_show_export_keep_working_and_delete_removes_the_bad_row(store, tmp_path):
    ids = poison(store)
    url = str(store.engine.url)
    listed = cli("runs", "--db", url, "--limit", "50")
    assert listed.returncode == 0, listed.stderr
    assert f"unreadable: run {ids['tags']}" in listed.stdout
    assert f"python -m engine delete {ids['tags']}" in listed.stdout
    as_json = cli("runs", "--db", url, "--json")
    assert as_json.returncode == 0 and len(json.loads(as_json.stdout)) == len(ids)
    for name in ("tags", "parsed", "created", "result"):
        shown = cli("show", ids[name], "--db", url)
        assert shown.returncode == 0, (name, shown.stderr)
    assert "unreadable: " in cli("show", ids["parsed"], "--db", url).stdout
    for fmt in ("jsonl", "csv"):
        done = cli("export", "--format", fmt, "--db", url)
        assert done.returncode == 0 and ids["tags"] in done.stdout, done.stderr

    unknown = cli("delete", ids["tags"], "nosuchrun", "--yes", "--db", url)
    assert unknown.returncode == 2 and "nosuchrun" in unknown.stderr
    assert store.exists(ids["tags"])  # nothing deleted when one id is unknown
    declined = cli("delete", ids["tags"], "--db", url, stdin="n\n")
    assert declined.returncode == 1 and store.exists(ids["tags"])
    asked = cli("delete", ids["tags"], "--db", url, stdin="y\n")
    assert asked.returncode == 0 and "deleted 1 run(s)" in asked.stdout
    done = cli("delete", ids["metrics"], ids["parsed"], "--yes", "--db", url)
    assert done.returncode == 0 and "deleted 2 run(s)" in done.stdout
    assert not any(store.exists(ids[n]) for n in ("tags", "metrics", "parsed"))
    assert store.turns(ids["parsed"]).empty


def test_library_rows_that_cannot_be_read_are_named_not_fatal(store):
    store.put_library("persona", "Fine", {"prompt": "p"})
    store.put_library("persona", "Broken", {"prompt": "p"})
    with store.engine.begin() as connection:
        connection.execute(text("UPDATE library SET body = '[1' WHERE name = 'Broken'"))
    rows = {r["name"]: r for r in store.library("persona")}
    assert rows["Fine"]["prompt"] == "p" and "body is not JSON" in rows["Broken"]["unreadable"]


# --------------------------------------------------------------------------- opening
def test_a_database_from_a_newer_parley_is_refused_at_open_with_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'newer.db'}"
    Store(url)
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO schema_migrations (name, applied_at) VALUES "
                                "('0042_from_the_future', '2030-01-01 00:00:00')"))
    engine.dispose()
    with pytest.raises(ConfigError) as info:
        Store(url)
    assert str(info.value) == ("this database was written by a newer Parley (migration "
                               "0042_from_the_future); upgrade Parley or use another database")
    done = cli("runs", "--db", url)
    assert done.returncode == 2
    assert done.stderr == f"error: {info.value}\n"


def _read_only_copy(tmp_path: Path) -> tuple[Store, str, str]:
    writer = Store(f"sqlite:///{tmp_path / 'ro.db'}")
    result = run_debate("Readable?", proponent="simulated", opponent="simulated",
                        judge="simulated", max_rounds=1, store=writer, label="kept")
    stuck = writer.start_run("debate", "Left running by a dead process?")
    with writer.engine.begin() as connection:
        connection.execute(text("UPDATE runs SET pid = 999999999 WHERE id = :id"), {"id": stuck})
    writer.engine.dispose()
    return writer, result.run_id, stuck


def test_a_read_only_database_can_be_listed_and_read(tmp_path, exported):
    """The finding: "a read-only database cannot even be listed"."""
    _, run_id, stuck = _read_only_copy(tmp_path)
    before = (tmp_path / "ro.db").read_bytes()
    store = Store(f"sqlite:///file:{tmp_path / 'ro.db'}?mode=ro&uri=true")
    assert store.read_only
    frame = store.runs()
    assert set(frame["id"]) == {run_id, stuck}
    statuses = dict(zip(frame["id"], frame["status"]))
    assert statuses[stuck] == "interrupted"  # shown so, never written
    assert store.get(run_id)["turns"] and store.get(stuck)["status"] == "interrupted"
    assert json.loads(store.export_run(run_id))["id"] == run_id
    assert not history.history(store, RunFilters()).table.empty
    for write in (lambda: store.start_run("debate", "Q?"), lambda: store.delete([run_id]),
                  lambda: store.put_library("persona", "P", {}),
                  lambda: store.import_runs(json.dumps(exported)),
                  lambda: store.stop_run(stuck)):
        with pytest.raises(ConfigError, match="read-only"):
            write()
    with pytest.raises(ConfigError, match="read-only"):
        TaskRunner(store).start_run({"protocol": "debate"}, "Q?")
    assert store.reap() == 0
    assert (tmp_path / "ro.db").read_bytes() == before


def test_a_read_only_database_reads_write_nothing(tmp_path):
    _, _, stuck = _read_only_copy(tmp_path)
    store = Store(f"sqlite:///file:{tmp_path / 'ro.db'}?mode=ro&uri=true")
    store.runs(), store.get(stuck), store.turns()
    raw = create_engine(f"sqlite:///{tmp_path / 'ro.db'}")
    with raw.connect() as connection:
        assert connection.execute(text("SELECT status FROM runs WHERE id = :id"),
                                  {"id": stuck}).scalar() == "running"
    raw.dispose()


def _as_nobody(target, *args):
    """Run `target(*args)` in a forked child that has dropped root (a real permission
    check: root may write a 0444 file); returns what it returned, or raises what it raised."""
    import multiprocessing
    import pickle
    context = multiprocessing.get_context("fork")
    reader, writer = context.Pipe(duplex=False)

    def child() -> None:
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            writer.send(("ok", target(*args)))
        except BaseException as exc:  # sent back to the test
            writer.send(("error", pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))))

    process = context.Process(target=child)
    process.start()
    kind, value = reader.recv()
    process.join(60)
    if kind == "error":
        raise pickle.loads(value)
    return value


def _list_runs(url: str) -> tuple[bool, list[str], str]:
    store = Store(url)
    try:
        store.start_run("debate", "Q?")
        refused = ""
    except ConfigError as exc:
        refused = str(exc)
    return store.read_only, sorted(store.runs()["id"]), refused


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_file_this_user_may_not_write_opens_read_only(tmp_path):
    folder = Path(tempfile.mkdtemp(prefix="parley-ro-"))
    try:
        writer = Store(f"sqlite:///{folder / 'locked.db'}")
        run_id = run_debate("Locked?", proponent="simulated", opponent="simulated",
                            judge="simulated", max_rounds=1, store=writer).run_id
        writer.engine.dispose()
        (folder / "locked.db").chmod(0o444)
        for extra in folder.glob("locked.db-*"):
            extra.unlink()  # no -wal / -shm: the reader may create neither
        folder.chmod(0o555)
        url = f"sqlite:///{folder / 'locked.db'}"
        opened = _as_nobody(_list_runs, url) if os.geteuid() == 0 else _list_runs(url)
        assert opened[0] is True and opened[1] == [run_id] and "read-only" in opened[2]
    finally:
        folder.chmod(0o755)
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


def test_postgresql_read_only_session_opens_for_reading():
    from conftest import fresh_pg_url
    url = fresh_pg_url()  # in CI (PARLEY_REQUIRE_PG=1) a missing server fails, not skips
    writer = Store(url)
    run_id = writer.start_run("debate", "On PostgreSQL?")
    writer.engine.dispose()
    joiner = "&" if "?" in url else "?"
    store = Store(f"{url}{joiner}options=-c%20default_transaction_read_only%3Don")
    assert store.read_only and list(store.runs()["id"]) == [run_id]
    with pytest.raises(ConfigError, match="read-only"):
        store.start_run("debate", "Q?")


def test_unreadable_json_columns_are_named_on_both_backends(backend):  # noqa: F811
    run_id = run_debate("Poisoned JSON?", proponent="simulated", opponent="simulated",
                        judge="simulated", max_rounds=1, store=backend).run_id
    with backend.engine.begin() as connection:
        connection.execute(text("""UPDATE runs SET tags = '"a string"', metrics = 'not json'
                                   WHERE id = :id"""), {"id": run_id})
        connection.execute(text("UPDATE turns SET parsed = '[1' WHERE run_id = :id"),
                           {"id": run_id})
    why = backend.runs()["unreadable"].iloc[0]
    assert "tags is text" in why and "metrics is not JSON" in why
    assert "turn 0: parsed is not JSON" in backend.get(run_id)["unreadable"]
    assert history.run_detail(backend, run_id).problems
    assert backend.delete([run_id]) == 1 and backend.runs().empty


# --------------------------------------------------------------------------- the pages
RUNS_PAGE = str(ROOT / "pages" / "runs.py")
INSIGHTS_PAGE = str(ROOT / "pages" / "insights.py")


def page(path: str, run_id: str | None = None):
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(path, default_timeout=60)
    if run_id:
        at.query_params["run"] = run_id
    return at.run()


def said(at) -> str:
    from apptest_helpers import plain
    kinds = ("markdown", "caption", "text", "warning", "error", "info", "success")
    return "\n".join(plain(str(e.value)) for kind in kinds for e in getattr(at, kind))


def test_runs_page_names_unreadable_rows_and_deletes_them(db_url):
    store = Store(db_url)
    ids = poison(store)
    at = page(RUNS_PAGE)
    assert not at.exception, at.exception
    assert set(at.dataframe[0].value["id"]) == set(ids.values())
    assert f"Run {ids['tags']}: tags is text, not a list of text" in said(at)
    at.button(key=f"runs_unreadable_{ids['tags']}_ask").click().run()
    at.button(key=f"runs_unreadable_{ids['tags']}_yes").click().run()
    assert not at.exception, at.exception
    assert not store.exists(ids["tags"]) and store.exists(ids["metrics"])
    for name, run_id in ids.items():  # every poisoned run's detail opens
        detail = page(RUNS_PAGE, run_id)
        assert not detail.exception, (name, detail.exception)
    assert "could not be read" in said(page(RUNS_PAGE, ids["parsed"]))
    insights_page = page(INSIGHTS_PAGE)
    assert not insights_page.exception, insights_page.exception


def test_runs_page_on_a_read_only_database_shows_a_banner(tmp_path, monkeypatch):
    _, run_id, _ = _read_only_copy(tmp_path)
    monkeypatch.setenv("PARLEY_DB_URL", f"sqlite:///file:{tmp_path / 'ro.db'}?mode=ro&uri=true")
    at = page(RUNS_PAGE)
    assert not at.exception, at.exception
    assert "This database is read-only: runs can be read, not started." in said(at)
    assert run_id in set(at.dataframe[0].value["id"])
    detail = page(RUNS_PAGE, run_id)
    assert not detail.exception, detail.exception
    assert "read-only" in said(detail)
    assert detail.button(key="runs_delete_ask").disabled
    assert detail.button(key="runs_rerun").disabled


@pytest.mark.parametrize("path", ["app.py", "pages/run.py", "pages/insights.py",
                                  "pages/personas.py", "pages/experiments.py"])
def test_every_page_on_a_read_only_database_shows_the_banner(path, tmp_path, monkeypatch):
    _read_only_copy(tmp_path)
    monkeypatch.setenv("PARLEY_DB_URL", f"sqlite:///file:{tmp_path / 'ro.db'}?mode=ro&uri=true")
    at = page(str(ROOT / path))
    assert not at.exception, at.exception
    assert "This database is read-only: runs can be read, not started." in said(at)


def test_the_app_shows_why_a_newer_database_cannot_be_opened(db_url):
    Store(db_url)
    engine = create_engine(db_url)
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO schema_migrations (name, applied_at) VALUES "
                                "('0042_from_the_future', '2030-01-01 00:00:00')"))
    engine.dispose()
    at = page(RUNS_PAGE)
    assert not at.exception, at.exception
    assert "written by a newer Parley (migration 0042_from_the_future)" in said(at)


# --------------------------------------------------------------------------- fuzzing the import
def test_fuzzed_imports_are_all_or_nothing_and_whatever_is_accepted_reads_back(tmp_path,
                                                                              exported):
    """Hypothesis replaces fields of a sound export (the run's or a turn's) with generated JSON
    values and breaks lines apart: each import either writes every record or refuses with a
    `ConfigError` and writes nothing, and whatever was accepted is read back whole by the
    store, the Runs page's read model and Insights."""
    pytest.importorskip("hypothesis")
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    store = Store(f"sqlite:///{tmp_path / 'fuzz.db'}")
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
                        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30))
    values = st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
        max_leaves=12)
    hostile_text = st.lists(st.one_of(st.characters(), st.sampled_from(
        ["\ud800", "\udfff", "\x00", "\u2028", "\x85", "\x1b[31m", "\u202e", "\n", "=",
         "x" * 50])), max_size=12).map("".join)

    def typed(sample):  # a value of the sound record's own type, with hostile content
        if isinstance(sample, bool):
            return st.booleans()
        if isinstance(sample, int):
            return st.integers(-1, 2 ** 31)
        if isinstance(sample, float):
            return st.floats(-1.0, 1e10)
        if isinstance(sample, str):
            return hostile_text
        if isinstance(sample, list):
            return st.lists(hostile_text, max_size=3)
        return values

    def changes(sound):  # up to three fields: mostly of their own type, some anything
        keys = st.sampled_from(sorted(sound))
        fitted = keys.flatmap(lambda k: typed(sound[k]).map(lambda v: (k, v)))
        return st.lists(st.one_of(fitted, fitted, st.tuples(keys, values)),
                        max_size=3).map(dict)

    sound_run = {k: v for k, v in exported.items() if k != "turns"}
    outcomes = {"imported": 0, "refused": 0}

    @settings(max_examples=300, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(run_changes=changes(sound_run), turn_changes=changes(exported["turns"][0]),
           which=st.integers(0, len(exported["turns"]) - 1),
           split=st.booleans())
    def check(run_changes, turn_changes, which, split):
        store.delete(list(store.runs()["id"]))
        doc = json.loads(json.dumps(exported))
        doc.update(run_changes)
        if isinstance(doc.get("turns"), list) and doc["turns"]:
            doc["turns"][which].update(turn_changes)
        sound = dict(exported, id="sound0")
        text_data = json.dumps(sound) + "\n" + json.dumps(doc, allow_nan=True)
        if split:  # a record broken over two lines
            text_data = text_data.replace(", ", ",\n", 1)
        try:
            imported = store.import_runs(text_data)
        except ConfigError as exc:
            assert "\n" not in str(exc)
            assert store.runs().empty and store.turns().empty
            outcomes["refused"] += 1
            return
        outcomes["imported"] += 1
        assert set(imported) <= {"sound0", str(doc.get("id"))}
        frame = store.runs()
        assert set(frame["unreadable"]) == {""}
        for run_id in imported:
            run = store.get(run_id)
            assert run["unreadable"] == ""
            history.run_detail(store, run_id)
        history.history(store, RunFilters())
        insights.report_from_store(store, RunFilters())

    check()
    print(f"fuzzed imports: {outcomes}")
    assert outcomes["imported"] and outcomes["refused"], outcomes
