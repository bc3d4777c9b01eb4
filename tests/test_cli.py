"""`python -m engine`: run, runs, show, export, import; bad input exits 2 with one line."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from engine import Store

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'cli.db'}"


def cli(*args, env_db=None):
    """Run the CLI in a subprocess from the project root."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    if env_db:  # belt and braces: never touch the default data/parley.db
        env["PARLEY_DB_URL"] = env_db
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def run_main(args, capsys):
    """The CLI's `main` in this process (much faster than a subprocess): (status, out, err)."""
    from engine.cli.main import main
    try:
        status = main(args)
    except SystemExit as exc:  # argparse errors exit from inside the parser
        status = exc.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# --------------------------------------------------------------------------- run
def test_run_debate_json(db):
    done = cli("run", "debate", "Should we adopt the plan?", "--rounds", "2", "--db", db,
               "--json", env_db=db)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["protocol"] == "debate"
    assert result["topic"] == "Should we adopt the plan?"
    assert len(result["rounds"]) == 2 and len(result["turns"]) == 5
    for field in ("verdict", "reasoning", "pro_summary", "con_summary", "confidence",
                  "is_high_confidence", "duration", "run_id"):
        assert field in result
    assert 0.0 <= result["confidence"] <= 1.0
    assert all(turn["simulated"] for turn in result["turns"])
    stored = Store(db).get(result["run_id"])
    assert stored["status"] == "completed" and stored["calls"] == 5


def test_run_peer_review_json(db):
    done = cli("run", "peer-review", "Write release notes for 2.0", "--rounds", "2",
               "--db", db, "--json", "--label", "cli-label", env_db=db)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["protocol"] == "peer-review"
    assert result["task"] == "Write release notes for 2.0"
    for field in ("final_output", "approved", "iterations", "iterations_used", "duration"):
        assert field in result
    assert 1 <= result["iterations_used"] <= 2
    assert len(result["iterations"]) == result["iterations_used"]
    assert Store(db).get(result["run_id"])["label"] == "cli-label"


def test_plain_run_prints_run_id_and_summary(db):
    done = cli("run", "debate", "Should we adopt the plan?", "--rounds", "1", "--db", db,
               env_db=db)
    assert done.returncode == 0, done.stderr
    first, *rest = done.stdout.splitlines()
    assert first.startswith("run ") and "Debate" in first and "(simulated)" in first
    assert "3 calls" in first
    run_id = first.split()[1].rstrip(":")
    assert "verdict:" in done.stdout and "confidence:" in done.stdout
    assert Store(db).get(run_id)["protocol"] == "debate"
    assert "argument" in done.stderr  # live progress goes to stderr


# --------------------------------------------------------------------------- reading
@pytest.fixture(scope="module")
def stored_db(tmp_path_factory):
    """A database holding two runs made with `run` (in this process, to save start-up time;
    the tests above run it as a real process): (url, [debate id, review id])."""
    from engine.cli.main import main
    db = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'stored.db'}"
    ids = []
    for protocol, question in (("debate", "Should we ship?"), ("peer-review", "Write notes")):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["run", protocol, question, "--rounds", "1", "--db", db, "--json",
                         "--tag", "cli"]) == 0
        ids.append(json.loads(out.getvalue())["run_id"])
    return db, ids


@pytest.fixture
def stored(stored_db):
    return stored_db[1]


def test_runs_lists_stored_runs(stored_db, stored, capsys):
    db = stored_db[0]
    done = cli("runs", "--db", db, env_db=db)
    assert done.returncode == 0, done.stderr
    for run_id in stored:
        assert run_id in done.stdout
    status, out, _err = run_main(["runs", "--db", db, "--json", "--protocol", "debate"],
                                 capsys)
    assert status == 0
    listed = json.loads(out)
    assert [r["id"] for r in listed] == [stored[0]]
    assert listed[0]["status"] == "completed"


def test_runs_on_an_empty_store(db, capsys):
    status, out, _err = run_main(["runs", "--db", db], capsys)
    assert status == 0 and "no runs" in out


def test_show_prints_the_run_and_its_turns(stored_db, stored, capsys):
    db = stored_db[0]
    done = cli("show", stored[0], "--db", db, env_db=db)
    assert done.returncode == 0, done.stderr
    assert stored[0] in done.stdout and "Should we ship?" in done.stdout
    assert "(simulated)" in done.stdout and "completed" in done.stdout
    for phase in ("argument", "counter-argument", "judge"):
        assert phase in done.stdout
    as_json = json.loads(run_main(["show", stored[0], "--db", db, "--json"], capsys)[1])
    assert as_json["id"] == stored[0] and len(as_json["turns"]) == 3


def test_export_json_jsonl_csv_to_files(stored_db, stored, tmp_path):
    db = stored_db[0]
    one = tmp_path / "one.json"
    done = cli("export", stored[0], "--format", "json", "-o", str(one), "--db", db)
    assert done.returncode == 0, done.stderr
    doc = json.loads(one.read_text(encoding="utf-8"))
    assert doc["id"] == stored[0] and len(doc["turns"]) == 3

    many = tmp_path / "many.jsonl"
    assert cli("export", *stored, "--format", "jsonl", "-o", str(many),
               "--db", db).returncode == 0
    lines = [json.loads(line) for line in many.read_text(encoding="utf-8").splitlines()]
    assert sorted(d["id"] for d in lines) == sorted(stored)

    table = tmp_path / "runs.csv"
    assert cli("export", "--format", "csv", "-o", str(table), "--db", db).returncode == 0
    frame = pd.read_csv(table)
    assert sorted(frame["id"]) == sorted(stored)
    assert set(frame["protocol"]) == {"debate", "peer-review"}


def test_export_to_stdout(stored_db, stored, capsys):
    db = stored_db[0]
    status, out, _err = run_main(["export", "--db", db], capsys)  # all runs, JSON lines
    assert status == 0
    assert sorted(json.loads(line)["id"] for line in out.splitlines()) == sorted(stored)
    status, out, _err = run_main(["export", "--format", "csv", "--db", db], capsys)
    table = pd.read_csv(io.StringIO(out))
    assert status == 0 and len(table) == 2
    # structures are JSON an analysis reads back; the outcome has columns of its own
    for metrics, config in zip(table["metrics"], table["config"], strict=True):
        assert isinstance(json.loads(metrics), dict) and json.loads(config)["protocol"]
    stored_runs = Store(db).runs().set_index("id")
    for row in table.itertuples():
        metrics = stored_runs.loc[row.id, "metrics"]
        assert {"answer", "tally_winner", "tally_votes", "confidence", "mind_changes",
                "persuaded", "misled"} <= set(table.columns)
        assert (None if pd.isna(row.confidence) else row.confidence) == metrics.get("level")
    status, out, _err = run_main(["export", stored[1], "--db", db], capsys)
    assert status == 0 and json.loads(out)["id"] == stored[1]  # one id: a JSON document


def test_import_into_a_fresh_database(stored_db, stored, tmp_path, capsys):
    db = stored_db[0]
    dump = tmp_path / "dump.jsonl"
    assert cli("export", "-o", str(dump), "--db", db).returncode == 0
    other = f"sqlite:///{tmp_path / 'other.db'}"
    done = cli("import", str(dump), "--db", other)
    assert done.returncode == 0, done.stderr
    assert "imported 2 run(s)" in done.stdout
    again = run_main(["import", str(dump), "--db", other], capsys)[1]
    assert "imported 0 run(s); skipped 2 already in this database" in again
    copy = Store(other)
    assert sorted(copy.runs()["id"]) == sorted(stored)
    assert len(copy.get(stored[0])["turns"]) == 3


# --------------------------------------------------------------------------- bad input
BAD_INPUT = [
    (["run", "nosuch", "Q?"], "protocol"),
    (["run", "debate", ""], "topic"),
    (["run", "debate", "   "], "topic"),
    (["run", "peer-review", ""], "task"),
    (["run", "debate", "Q?", "--rounds", "0"], "max_rounds"),
    (["run", "debate", "Q?", "--rounds", "many"], "--rounds"),
    (["run", "debate", "Q?", "--seat", "judge"], "NAME=SPEC"),
    (["run", "debate", "Q?", "--seat", "nobody=simulated"], "nobody"),
    (["run", "debate", "Q?", "--model", "bogus:x"], "bogus"),
    (["run", "debate", "Q?", "--seat", "judge=simulated?bogus=1"], "bogus"),
    (["show", "no-such-run"], "no-such-run"),
    (["export", "no-such-run"], "no-such-run"),
    (["import", "/nonexistent/dump.jsonl"], "cannot read"),
]


@pytest.mark.parametrize("args, fragment", BAD_INPUT)
def test_bad_input_exits_2_with_one_line(db, capsys, args, fragment):
    status, out, err = run_main([*args, "--db", db], capsys)
    assert status == 2, (out, err)
    line = one_line(err)
    assert line.startswith("error:") and fragment in line
    assert out == ""


def test_unknown_command_exits_2_with_one_line(capsys):
    status, out, err = run_main(["frobnicate"], capsys)
    assert status == 2 and "invalid choice" in one_line(err)


@pytest.mark.parametrize("args, fragment", [
    (["run", "nosuch", "Q?"], "unknown protocol"),
    (["run", "debate", "Q?", "--rounds", "0"], "max_rounds"),
])
def test_bad_input_exit_status_of_the_real_process(db, args, fragment):
    done = cli(*args, "--db", db, env_db=db)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert fragment in one_line(done.stderr)
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_bad_input_stores_nothing(db, capsys):
    run_main(["run", "debate", "Q?", "--rounds", "0", "--db", db], capsys)
    run_main(["run", "debate", "Q?", "--model", "bogus:x", "--db", db], capsys)
    assert Store(db).runs().empty


def test_malformed_import_file_exits_2(db, tmp_path, capsys):
    junk = tmp_path / "junk.jsonl"
    junk.write_text("this is not an export\n", encoding="utf-8")
    status, _out, err = run_main(["import", str(junk), "--db", db], capsys)
    assert status == 2
    assert "import" in one_line(err)


def test_option_flag_reaches_the_protocol(tmp_path, capsys):
    from engine.cli.main import main
    db = f"sqlite:///{tmp_path / 'opt.db'}"
    assert main(["run", "duel", "Is Rust better than C++?", "--option", "first=b",
                 "--option", "reply=last", "--rounds", "1", "--db", db, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [name for name, _ in result["transcript"]] == ["skeptic", "optimist"]
    assert result["reply"] == result["transcript"][-1][1]
    assert main(["run", "debate", "q", "--option", "timeout=0", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rounds"] == []


def test_run_with_expected_says_right_or_wrong(tmp_path, capsys):
    """`--expected` scores the run, and the summary says how, not only `--json`."""
    db = f"sqlite:///{tmp_path / 'scored.db'}"
    said = []
    for seed in range(4):
        status, out, _err = run_main(["run", "vote", "What is 6 x 7?", "--expected", "42",
                                      "--model", f"simulated?seed={seed}", "--db", db], capsys)
        assert status == 0
        line = next(l for l in out.splitlines() if l.startswith("expected 42: "))
        said.append(line.split(": ", 1)[1].split(" ")[0])
    runs = Store(db).runs().sort_values("created_at")
    assert said == ["right" if c else "wrong" for c in runs["correct"]]
    status, out, _err = run_main(["run", "vote", "What is 6 x 7?", "--db", db], capsys)
    assert not any(l.startswith("expected") for l in out.splitlines())


@pytest.mark.parametrize("command", [["runs"], ["experiment", "list"]])
def test_a_command_runs_with_the_garbage_collector_on_and_start_up_frozen(db, command):
    """`python -m engine` starts with the cyclic collector off (start-up makes only what
    lives as long as the process); every command, run directly or imported on its call,
    runs with it back on and what start-up made frozen out of its scans."""
    probe = ("import atexit, gc, runpy, sys\n"
             "atexit.register(lambda: print('collector', gc.isenabled(), gc.get_freeze_count()"
             " > 0))\n"
             "sys.argv = ['engine', *sys.argv[1:]]\n"
             "runpy.run_module('engine', run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", probe, *command, "--db", db], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "collector True True"
