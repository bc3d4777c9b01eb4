"""The layout shows the design (issue 11): checks on the source tree itself.

- no module over 1,000 lines (engine/, pages/, app.py), and one over 400 named as a warning:
  how complex a function may be is ruff's check (C901, PLR0912, PLR0915 in pyproject.toml),
  because a hard 400-line cap bred splits that re-exported their other half, and circles;
- no protocol named outside engine/protocols/ (string literals, imports of a protocol's module,
  names of functions, classes and arguments), except the public façade `engine/__init__.py`;
- all SQL lives in engine/store/ (nothing else imports SQLAlchemy);
- no module imports another package's private names;
- the engine never imports Streamlit; pages import from a handful of engine packages;
- the simulated model's modules import one another at the top (no cycle dodged in functions).
"""
from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.protocols import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("engine/**/*.py"), *ROOT.glob("pages/*.py"), ROOT / "app.py"])
MAX_LINES = 1000  # past this a module surely holds two ideas
WARN_LINES = 400  # past this, a look: does it hold two ideas?
# The protocols' own package, and the public names DESIGN section 2 requires from `engine`.
PROTOCOL_HOMES = ("engine/protocols/", "engine/__init__.py")
# engine.access: who may do what (the pages disable what a role cannot use, DESIGN section 5)
PAGE_SOURCES = {"engine", "engine.access", "engine.llm", "engine.questions", "engine.redaction",
                "engine.text",
                "engine.reports", "engine.services", "engine.store", "engine.views"}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _protocol_words() -> set[str]:
    names = set()
    for name in REGISTRY:
        names |= {name, name.replace("-", "_"), name.replace("-", " ")}
    return names


def _imports(tree: ast.Module) -> Iterator[tuple[str, list[str], ast.AST]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module, [a.name for a in node.names], node
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_no_module_is_over_1000_lines_and_one_over_400_is_named(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{_rel(path)} has {lines} lines"
    if lines > WARN_LINES:
        warnings.warn(f"{_rel(path)} has {lines} lines: does it hold two ideas?", stacklevel=1)


def test_no_protocol_is_named_outside_its_package():
    words = _protocol_words()
    found = []
    for path in SOURCES:
        where = _rel(path)
        if where.startswith(PROTOCOL_HOMES):
            continue
        tree = _tree(path)
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef,
                                           ast.ClassDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docstrings and node.value.strip().lower() in words):
                found.append(f"{where}:{node.lineno} string {node.value!r}")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if words & set(node.name.lower().split("_")):
                    found.append(f"{where}:{node.lineno} def {node.name}")
            elif isinstance(node, ast.arg) and words & set(node.arg.lower().split("_")):
                found.append(f"{where}:{node.lineno} argument {node.arg}")
        for module, names, node in _imports(tree):
            parts = module.split(".")
            if parts[:2] == ["engine", "protocols"] and (
                    words & set(parts[2:]) or words & set(names)):
                found.append(f"{where}:{node.lineno} imports {module} {names}")
    assert not found, "protocols named outside engine/protocols/:\n" + "\n".join(found)


def test_all_sql_lives_in_the_store():
    outside = [f"{_rel(p)}:{node.lineno}" for p in SOURCES
               if not _rel(p).startswith("engine/store/")
               for module, _, node in _imports(_tree(p)) if module.split(".")[0] == "sqlalchemy"]
    assert not outside, f"SQLAlchemy imported outside engine/store/: {outside}"


def test_no_module_imports_another_packages_private_names():
    found = []
    for path in SOURCES:
        package = ".".join(_rel(path).removesuffix(".py").split("/")[:2])
        for module, names, node in _imports(_tree(path)):
            if not module.startswith("engine") or module.startswith(package):
                continue
            private = [n for n in names if n.startswith("_")]
            if private:
                found.append(f"{_rel(path)}:{node.lineno} {module} {private}")
    assert not found, "private names imported across packages:\n" + "\n".join(found)


def test_the_engine_never_imports_streamlit_and_pages_use_a_handful_of_packages():
    engine_sources = [p for p in SOURCES if _rel(p).startswith("engine/")]
    assert not [_rel(p) for p in engine_sources
                for module, _, _ in _imports(_tree(p)) if module.split(".")[0] == "streamlit"]
    used = set()
    for path in [p for p in SOURCES if not _rel(p).startswith("engine/")]:
        for module, _names, _ in _imports(_tree(path)):
            if module.split(".")[0] == "engine":
                used.add(".".join(module.split(".")[:2]))
    assert used <= PAGE_SOURCES, f"pages import {sorted(used - PAGE_SOURCES)}"


def test_the_simulated_model_imports_its_modules_at_the_top():
    late = []
    for path in ROOT.glob("engine/simulated/*.py"):
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and (inner.module or "").startswith(
                            "engine"):
                        late.append(f"{_rel(path)}:{inner.lineno} {inner.module}")
    assert not late, f"imports inside functions (an import cycle dodged): {late}"


def _circles(graph: Any) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm), every
    import counted: at the top, inside a function or under TYPE_CHECKING."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:  # iterative: a deep chain must not hit the recursion limit
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_no_module_of_the_engine_is_in_an_import_circle():
    grimp = pytest.importorskip("grimp")  # import-linter's graph builder (requirements-dev)
    graph = grimp.build_graph("engine", include_external_packages=False)
    assert _circles(graph) == [], "modules that import each other, directly or round a circle"


def test_the_circle_finder_finds_a_circle():
    class Graph:
        modules = {"a", "b", "c", "d"}
        links = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

        def find_modules_directly_imported_by(self, module: str) -> set[str]:
            return self.links[module]

    assert _circles(Graph()) == [["a", "b", "c"]]


def test_the_store_meets_the_protocols_without_importing_them(tmp_path):
    """`engine.store` imports no protocol: a fresh process opens the store alone, and what
    it needs of the protocols is handed to it from their side (the result types an import
    is checked against), so an unknown protocol is refused and a known one imported."""
    import subprocess
    import sys
    script = f"""
import json, sys
from engine.store import Store
store = Store("sqlite:///{tmp_path / 'fresh.db'}")
assert "engine.protocols" not in sys.modules, "opening the store loaded the protocols"
from engine.protocols.storing import result_types
try:
    store.import_runs(json.dumps({{"id": "x1", "protocol": "brawl", "question": "q",
                                    "status": "failed"}}), results=result_types())
except ValueError as exc:
    print("refused:", exc)
record = {{"id": "v1", "protocol": "vote", "question": "q", "status": "failed"}}
print("imported:", store.import_runs(json.dumps(record), results=result_types()))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "refused:" in out.stdout and "'brawl'" in out.stdout and "debate" in out.stdout
    assert "imported: ['v1']" in out.stdout


def _rebinds_module_state(tree: ast.AST) -> list[str]:
    """What in a module's syntax tree rebinds module-level state at run time: a `global`
    statement (a module-level name set by a function, as a process-wide lookup set at
    start-up is), a write through `globals()`, or an attribute set on a module taken from
    `sys.modules`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.append(f"line {node.lineno}: global {', '.join(node.names)}")
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Call) and \
                    getattr(target.value.func, "id", "") == "globals":
                found.append(f"line {node.lineno}: globals()[...] =")
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setattr" and \
                node.args and "sys.modules" in ast.unparse(node.args[0]):
            found.append(f"line {node.lineno}: setattr(sys.modules[...], ...)")
    return found


def test_the_engine_keeps_no_module_level_state_set_at_run_time():
    """No global (STYLE 7): the protocol registry reaches the store as an argument from the
    protocols' side, not through a module-level lookup set at start-up (`engine/catalog.py`
    is gone), and no engine module rebinds module-level state from a function."""
    assert not (ROOT / "engine" / "catalog.py").exists()
    found = {_rel(path): hits for path in ROOT.glob("engine/**/*.py")
             if (hits := _rebinds_module_state(ast.parse(path.read_text(encoding="utf-8"))))}
    assert found == {}


@pytest.mark.parametrize("source", [
    "_loader = None\ndef provide(f):\n    global _loader\n    _loader = f\n",
    "def __getattr__(name):\n    globals()[name] = 1\n",
    "import sys\nsetattr(sys.modules[__name__], 'x', 1)\n",
])
def test_the_module_state_check_finds_each_kind(source):
    assert _rebinds_module_state(ast.parse(source))
