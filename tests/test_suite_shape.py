"""The test suite's own shape: fixtures and helpers shared through `tests/plugins/` and the
helper modules, never imported from another test module, and one polling helper
(`tests/waiting.py`) instead of a copy in each module."""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
POLLERS = ("wait_for", "wait_until", "_wait", "poll_until", "eventually")


def _modules() -> list[Path]:
    return sorted([*TESTS.glob("*.py"), *TESTS.glob("plugins/*.py")])


def test_no_test_module_imports_another():
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.name}: {n}" for n in names
                      if n.split(".")[-1].startswith("test_")]
    assert found == []


def test_one_polling_helper():
    copies = [f"{path.name}: {node.name}" for path in _modules() if path.name != "waiting.py"
              for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
              if isinstance(node, ast.FunctionDef) and node.name in POLLERS]
    assert copies == []
