"""What the tests of the pool of workers share: the questions and the experiment spec they
run, and a worker process (`python -m engine worker`)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

QUESTIONS = [{"question": f"What is {i} plus {i}?", "expected": str(2 * i)} for i in range(50)]


def _spec(questions: list[dict], repeats: int, latency: float = 0.05) -> dict:
    model = f"simulated?latency={latency}"
    return {"name": "pool", "questions": questions, "repeats": repeats, "concurrency": 4,
            "configs": [{"protocol": "vote", "label": "vote", "model": model},
                        {"protocol": "panel", "label": "panel", "model": model}]}


def _worker(url: str, log: Path) -> subprocess.Popen:
    """A worker process; its log goes to a file (a pipe nobody reads would block it)."""
    with log.open("a", encoding="utf-8") as out:
        return subprocess.Popen([sys.executable, "-m", "engine", "worker", "--db", url,
                                 "--concurrency", "4", "--heartbeat", "2"], cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT)
