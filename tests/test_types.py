"""The types stay where they are: checks on the source tree and on CI's configuration.

- no argument or field of the engine, the pages or app.py that holds a store or the endpoint
  registry is annotated `Any` (mypy accepts `Any` anywhere, so only this test keeps them typed);
- engine/store, engine/llm and engine/protocols are checked with every per-module flag of
  `mypy --strict` (pyproject.toml), and CI type-checks the pages and app.py too (.ci/run).
"""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("engine/**/*.py"), *ROOT.glob("pages/*.py"), ROOT / "app.py"])
# What an argument or a field of these names holds: a store, or the endpoint registry.
TYPED_NAMES = {"store", "_store", "endpoints", "registry"}
STRICT_MODULES = {"engine.store", "engine.store.*", "engine.llm", "engine.llm.*",
                  "engine.protocols", "engine.protocols.*"}
# `mypy --strict`'s flags that can be set per module (the global ones are set for all).
STRICT_FLAGS = {"disallow_any_generics": True, "disallow_subclassing_any": True,
                "disallow_untyped_calls": True, "disallow_untyped_defs": True,
                "disallow_incomplete_defs": True, "disallow_untyped_decorators": True,
                "warn_return_any": True, "implicit_reexport": False, "strict_equality": True,
                "extra_checks": True}


def _any(annotation: ast.expr | None) -> bool:
    """`Any`, or `Any | None` / `None | Any`."""
    if isinstance(annotation, ast.Name):
        return annotation.id == "Any"
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _any(annotation.left) or _any(annotation.right)
    return False


def untyped(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of each argument or annotated field named in `TYPED_NAMES` whose
    annotation is `Any`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.arg in TYPED_NAMES and _any(node.annotation):
            found.append((node.lineno, node.arg))
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
              and node.target.id in TYPED_NAMES and _any(node.annotation)):
            found.append((node.lineno, node.target.id))
    return sorted(found)


def test_the_finder_sees_each_shape_of_an_untyped_store():
    source = ("def f(store: Any, *, endpoints: Any | None = None, other: Any = 1) -> None:\n"
              "    pass\n"
              "class S:\n"
              "    registry: Any = None\n"
              "    store: Store\n"
              "def g(_store: Store | None, endpoints: EndpointRegistry) -> None:\n"
              "    pass\n")
    assert untyped(ast.parse(source)) == [(1, "endpoints"), (1, "store"), (4, "registry")]


def test_no_store_or_endpoint_registry_is_annotated_any():
    found = [f"{path.relative_to(ROOT).as_posix()}:{line} {name}"
             for path in SOURCES for line, name in untyped(ast.parse(path.read_text()))]
    assert not found, f"annotated Any (use Store, EndpointRegistry ...): {found}"


def test_store_llm_and_protocols_are_checked_strictly_and_ci_checks_the_pages():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = [o for o in config.get("overrides", [])
              if STRICT_MODULES <= set(o["module"] if isinstance(o["module"], list)
                                       else [o["module"]])]
    assert strict, "pyproject.toml: no [[tool.mypy.overrides]] for the strict modules"
    assert {k: strict[0].get(k) for k in STRICT_FLAGS} == STRICT_FLAGS
    assert config["warn_unused_ignores"] and config["warn_redundant_casts"]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "python -m mypy engine" in ci and "python -m mypy pages app.py" in ci
