"""No module-level mutable state in `engine/` (STYLE 7: many Streamlit sessions share one
process, so what a run learns or holds belongs to an owner passed down: the endpoint
registry, a run's or an experiment's context, a store).

The check reads every module's syntax tree. A constant is a value a module builds at import
and nothing changes afterwards: a dict of templates, a compiled pattern, a frozen dataclass.
What tells state apart from it:

- a function (or method) that changes a module-level object by its name: sets or deletes an
  item, calls a mutating method (`append`, `setdefault`, `clear` ...), or sets an attribute;
- a module-level object whose only use is run-time state: a lock, a semaphore, an event, a
  weak or ordered container, a thread-local;
- a module-level instance of an engine class whose methods change the instance (a cache
  object, a limiter holding buckets);
- a functools cache on a module-level function (it holds whatever its calls returned);
- a `global` statement.

A `ContextVar` is not state of the module: its values belong to the context that sets them
(a run's, an experiment's), and tasks a run starts share them by copying its context.
`ALLOWED` names what stays, each with why; an entry that no longer matches fails the test too,
so the list only shrinks.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MUTATORS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "pop",
                      "popitem", "clear", "remove", "discard", "move_to_end", "appendleft",
                      "extendleft", "sort", "reverse", "__setitem__", "__delitem__"})
STATE_TYPES = frozenset({"Lock", "RLock", "Semaphore", "BoundedSemaphore", "Event",
                         "Condition", "Barrier", "local", "WeakKeyDictionary",
                         "WeakValueDictionary", "WeakSet", "OrderedDict", "defaultdict",
                         "deque", "Counter", "Queue", "SimpleQueue", "LifoQueue"})
CACHES = frozenset({"cache", "lru_cache"})

# What stays, by "path:name", and why. Each is computed once from its arguments and never
# changed after (a lazily built value, not a run's state): dropping it changes only speed.
ALLOWED = {
    # The openai SDK's client classes subclassed once: the SDK is imported only when a model
    # needs it, so the classes cannot be built at import.
    "engine/llm/transport.py:_bounded_classes": "classes made on first use",
    "engine/llm/transport.py:guarded_connector": "a class made on first use",
    "engine/llm/transport.py:loop_client_type": "a class made on first use",
    # The process's one verifying TLS context: loading the CA store is most of what building
    # a client costs (issue 42 measured a context per model as 85% of a call's CPU), and a
    # process that calls only plain http builds none. Never changed after it is made.
    "engine/llm/transport.py:tls_context": "built on first https use, never changed",
    # langchain-openai's chat class subclassed once per class (a pure function of it).
    "engine/llm/providers.py:reporting": "a class made per chat class",
    # An OpenTelemetry tracer provider per OTLP endpoint: the SDK's provider owns the batch
    # processor's background thread, which must outlive each run it exports.
    "engine/llm/otel.py:_provider": "the SDK's exporter thread lives for the process",
    # The environment's secrets as a pure function of the environment's raw items: every
    # model call redacts twice, and matching every variable's name each time cost more than
    # the rest of the redaction.
    "engine/redaction.py:_secrets_of": "a memo of a pure function of the environment",
    # A short stance's canonical form: a run reads each stance several times (its check,
    # its proposal, the tally, the mind changes, the dynamics), each a dozen regex passes.
    "engine/analysis/stances.py:_normalized": "a memo of a pure function of a short text",
    # Bundled question sets read from the package's own files: the files do not change
    # while the process runs.
    "engine/questions/sets.py:_arithmetic": "bundled data read once",
    "engine/questions/sets.py:_gsm8k": "bundled data read once",
    "engine/questions/sets.py:_gsm8k_100": "bundled data read once",
    "engine/questions/sets.py:_mmlu_pro_math": "bundled data read once",
    # Whether two answers match, a pure function of the two strings, asked for every pair
    # of a consensus table's rows.
    "engine/reports/consensus.py:_match": "a memo of a pure function",
}


def _local_names(function: ast.AST) -> set[str]:
    """The names a function binds itself (parameters, assignments, loop and `with`
    targets): a mutation of one of them changes no module-level object."""
    names: set[str] = set()
    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        arguments = function.args
        for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                    arguments.vararg, arguments.kwarg):
            if arg is not None:
                names.add(arg.arg)
    declared_global: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Global):
            declared_global.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names - declared_global


def _root_name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _mutations(function: ast.AST, module_names: set[str]) -> list[tuple[int, str]]:
    """Changes `function` makes to module-level objects named in `module_names`."""
    local = _local_names(function)
    found = []

    def module_level(node: ast.AST) -> str | None:
        name = _root_name(node)
        return name if name in module_names and name not in local else None

    for node in ast.walk(function):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            if isinstance(target, (ast.Subscript, ast.Attribute)):
                name = module_level(target.value)
                if name:
                    found.append((node.lineno, f"{name} changed ({ast.unparse(target)})"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in MUTATORS and not (node.func.attr == "insert" and
                                                    len(node.args) < 2):
            name = module_level(node.func.value)
            if name:
                found.append((node.lineno, f"{name}.{node.func.attr}(...)"))
    return found


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _stateful_classes(trees: dict[str, ast.Module]) -> set[str]:
    """Engine classes whose methods (after `__init__`) change the instance: an attribute
    of `self` set, or an item of one set, or a mutating method called on one."""
    stateful = set()
    for tree in trees.values():
        for cls in ast.walk(tree):
            if not isinstance(cls, ast.ClassDef):
                continue
            for method in cls.body:
                if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
                        method.name == "__init__":
                    continue
                for node in ast.walk(method):
                    targets = node.targets if isinstance(node, ast.Assign) else (
                        [node.target] if isinstance(node, ast.AugAssign) else [])
                    touched = [t for t in targets if isinstance(t, (ast.Attribute,
                                                                    ast.Subscript))]
                    called = isinstance(node, ast.Call) and isinstance(
                        node.func, ast.Attribute) and node.func.attr in MUTATORS
                    bases = [t.value for t in touched] + ([node.func.value] if called else [])
                    for base in bases:
                        while isinstance(base, (ast.Attribute, ast.Subscript)):
                            if isinstance(base.value, ast.Name) and base.value.id == "self":
                                stateful.add(cls.name)
                            base = base.value
                        if isinstance(base, ast.Name) and base.id == "self" and touched:
                            stateful.add(cls.name)
    return stateful


def module_state(trees: dict[str, ast.Module]) -> dict[str, list[str]]:
    """Per "path:name", what makes it module-level mutable state (see the module)."""
    stateful = _stateful_classes(trees)
    found: dict[str, list[str]] = {}

    def note(path: str, name: str, line: int, why: str) -> None:
        found.setdefault(f"{path}:{name}", []).append(f"line {line}: {why}")

    for path, tree in trees.items():
        names: set[str] = set()
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AnnAssign) else [])
            for target in targets:
                for named in ast.walk(target):
                    if isinstance(named, ast.Name):
                        names.add(named.id)
            value = getattr(node, "value", None)
            if isinstance(value, ast.Call) and targets:
                callee = _callee(value)
                label = ast.unparse(targets[0])
                if callee in STATE_TYPES:
                    note(path, label, node.lineno, f"a {callee} at module level")
                elif callee in stateful:
                    note(path, label, node.lineno, f"an instance of {callee}, which changes")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    called = decorator.func if isinstance(decorator, ast.Call) else decorator
                    name = called.attr if isinstance(called, ast.Attribute) else getattr(
                        called, "id", "")
                    if name in CACHES:
                        note(path, node.name, node.lineno, f"@{ast.unparse(decorator)}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                for name in node.names:
                    note(path, name, node.lineno, "a global statement")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                for line, why in _mutations(node, names):
                    note(path, why.partition(".")[0].partition(" ")[0], line, why)
    return found


def _engine_trees() -> dict[str, ast.Module]:
    return {path.relative_to(ROOT).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
            for path in sorted(ROOT.glob("engine/**/*.py"))}


def test_the_engine_holds_no_module_level_mutable_state():
    found = module_state(_engine_trees())
    unexplained = {key: why for key, why in found.items() if key not in ALLOWED}
    assert unexplained == {}
    assert sorted(set(ALLOWED) - set(found)) == []  # an entry for what is gone goes too


@pytest.mark.parametrize("source", [
    "_SEEN = []\ndef f(x):\n    _SEEN.append(x)\n",
    "_KNOWN = {}\ndef f(k, v):\n    _KNOWN[k] = v\n",
    "_KNOWN = {}\nasync def f(k):\n    del _KNOWN[k]\n",
    "import threading\n_LOCK = threading.Lock()\n",
    "import weakref\n_BY_LOOP = weakref.WeakKeyDictionary()\n",
    "from collections import OrderedDict\n_LRU = OrderedDict()\n",
    "class Box:\n    def __init__(self):\n        self.items = {}\n"
    "    def put(self, k, v):\n        self.items[k] = v\nBOX = Box()\n",
    "class Count:\n    n = 0\n    def bump(self):\n        self.n += 1\nCOUNT = Count()\n",
    "import functools\n@functools.cache\ndef f(x):\n    return x\n",
    "from functools import lru_cache\n@lru_cache(maxsize=8)\ndef f(x):\n    return x\n",
    "_loader = None\ndef provide(f):\n    global _loader\n    _loader = f\n",
    "import types\nCONFIG = types.SimpleNamespace()\ndef set_it(v):\n    CONFIG.value = v\n",
])
def test_the_check_finds_each_kind_of_state(source):
    assert module_state({"engine/x.py": ast.parse(source)})


@pytest.mark.parametrize("source", [
    "TEMPLATES = {'a': 'b'}\ndef get(k):\n    return TEMPLATES[k]\n",
    "import re\nPATTERN = re.compile('x')\n",
    "from contextvars import ContextVar\nMEMO = ContextVar('m', default=None)\n"
    "def open_run():\n    MEMO.set({})\n",
    "ITEMS = []\nITEMS.append(1)\n",  # built at import, then left alone
    "def f():\n    seen = []\n    seen.append(1)\n    return seen\n",
    "KNOWN = {}\ndef f(KNOWN):\n    KNOWN['a'] = 1\n",  # a parameter, not the module's
    "class Point:\n    def __init__(self, x):\n        self.x = x\nORIGIN = Point(0)\n",
])
def test_the_check_leaves_constants_and_local_values_alone(source):
    assert module_state({"engine/x.py": ast.parse(source)}) == {}
