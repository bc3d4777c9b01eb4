"""Every protocol in the registry keeps the protocol contract: each has a `ProtocolContract`
subclass in its own tests/test_<protocol>.py, so a new protocol (the society of minds will add
tests/test_society.py) cannot join the registry untested."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

from engine.protocols import REGISTRY

TESTS = Path(__file__).parent


def contract_subclasses() -> dict[str, list[str]]:
    """{protocol name: [test file, ...]} for every class in tests/ that subclasses
    `ProtocolContract` and sets `protocol = "<name>"`; read from the source, nothing imported."""
    found: dict[str, list[str]] = {}
    for path in sorted(TESTS.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or not any(
                    isinstance(base, ast.Name) and base.id == "ProtocolContract"
                    for base in node.bases):
                continue
            for statement in node.body:
                if isinstance(statement, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == "protocol"
                        for t in statement.targets) and isinstance(
                        statement.value, ast.Constant):
                    found.setdefault(str(statement.value.value), []).append(path.name)
    return found


def test_every_registered_protocol_keeps_the_contract_in_its_own_test_file() -> None:
    found = contract_subclasses()
    missing = {name: f"tests/test_{name.replace('-', '_')}.py" for name in REGISTRY
               if f"test_{name.replace('-', '_')}.py" not in found.get(name, [])}
    assert not missing, ("protocols without a ProtocolContract subclass in their own test "
                         f"file: {missing}")


def test_no_contract_names_a_protocol_the_registry_lacks() -> None:
    assert set(contract_subclasses()) <= set(REGISTRY)


def test_the_finder_sees_a_subclass_written_the_documented_way(tmp_path, monkeypatch) -> None:
    (tmp_path / "test_society.py").write_text(
        "from protocol_contract import ProtocolContract\n\n\n"
        "class TestSocietyContract(ProtocolContract):\n    protocol = \"society\"\n")
    monkeypatch.setattr(sys.modules[__name__], "TESTS", tmp_path)
    assert contract_subclasses() == {"society": ["test_society.py"]}
