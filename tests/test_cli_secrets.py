"""The CLI reads `.streamlit/secrets.toml` as the app does: a key and an endpoint registered only
there reach a real HTTP server, `PARLEY_DB_URL` there picks the store, and the key is never
stored or printed. A broken secrets file is refused in one line that does not show its text."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import Store

from openai_stub import SimulatedOpenAI

KEY = "sk-parley-SECRETS-FILE-canary-0123456789"
ROOT = Path(__file__).resolve().parents[1]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "PARLEY_ENDPOINTS", "PARLEY_DB_URL", "OPENAI_BASE_URL")
           and not k.lower().endswith("_proxy")}
    env.update(HOME=str(home), NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
               PYTHONPATH=str(ROOT))
    return env


def _cli(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


@pytest.fixture
def project(tmp_path):
    """A working directory with its own `.streamlit/` and an empty home."""
    (tmp_path / "home").mkdir()
    (tmp_path / "work" / ".streamlit").mkdir(parents=True)
    return tmp_path


def test_an_endpoint_and_key_in_secrets_toml_reach_the_server_and_go_nowhere_else(project):
    db = project / "stored.db"
    with SimulatedOpenAI() as server:
        (project / "work" / ".streamlit" / "secrets.toml").write_text(
            f'PARLEY_DB_URL = "sqlite:///{db}"\n\n[endpoints.lab]\n'
            f'base_url = "{server.base_url}"\nkey = "{KEY}"\n', encoding="utf-8")
        cli = _cli(project / "work", _env(project / "home"), "run", "vote", "What is 6 x 7?",
                   "--model", "openai:sim-model?endpoint=lab", "--json")
        assert cli.returncode == 0, cli.stderr
        assert server.requests, "the endpoint registered in secrets.toml was never called"
        assert all(r["auth"] == f"Bearer {KEY}" for r in server.requests)
    # PARLEY_DB_URL from the file chose the store; the run is there, the key is not
    runs = Store(f"sqlite:///{db}").runs()
    assert len(runs) == 1 and runs["protocol"].iloc[0] == "vote"
    assert KEY.encode() not in db.read_bytes()
    assert KEY not in cli.stdout + cli.stderr
    listed = _cli(project / "work", _env(project / "home"), "runs")
    assert listed.returncode == 0 and runs["id"].iloc[0] in listed.stdout


def test_the_project_file_wins_over_the_home_file(project):
    home_db, work_db = project / "home.db", project / "work.db"
    (project / "home" / ".streamlit").mkdir()
    (project / "home" / ".streamlit" / "secrets.toml").write_text(
        f'PARLEY_DB_URL = "sqlite:///{home_db}"\n', encoding="utf-8")
    env = _env(project / "home")
    # only the home file: it is read
    assert _cli(project / "work", env, "run", "single", "2+2?").returncode == 0
    assert len(Store(f"sqlite:///{home_db}").runs()) == 1
    (project / "work" / ".streamlit" / "secrets.toml").write_text(
        f'PARLEY_DB_URL = "sqlite:///{work_db}"\n', encoding="utf-8")
    assert _cli(project / "work", env, "run", "single", "2+2?").returncode == 0
    assert len(Store(f"sqlite:///{work_db}").runs()) == 1
    assert len(Store(f"sqlite:///{home_db}").runs()) == 1
    # --db given on the command line wins over both
    other = project / "other.db"
    assert _cli(project / "work", env, "runs", "--db", f"sqlite:///{other}").returncode == 0


def test_a_broken_secrets_file_is_refused_in_one_line_without_its_text(project):
    (project / "work" / ".streamlit" / "secrets.toml").write_text(
        f'OPENAI_API_KEY = "{KEY}\n[endpoints.lab\n', encoding="utf-8")
    cli = _cli(project / "work", _env(project / "home"), "runs")
    assert cli.returncode == 2
    assert cli.stderr.startswith("error: ") and cli.stderr.count("\n") == 1
    assert "secrets.toml is not valid TOML" in cli.stderr and "line 1" in cli.stderr
    assert KEY not in cli.stdout + cli.stderr
