"""Bounded YAML: every YAML document Parley reads (the CLI's `--config`, experiment specs, the
library import) goes through `safe_load`, which caps what a small hostile file can cost.

- size: at most `MAX_CHARS` characters of text;
- aliases: the nodes that aliases (and `<<` merges) bring in, counted as if expanded, at most
  `MAX_ALIAS_NODES` (a 347-byte "billion laughs" file expands to billions); an alias to a node
  that contains it is refused;
- depth: at most `MAX_DEPTH` levels of nesting, aliases expanded (PyYAML's composer recurses, so
  1,000 levels were a RecursionError);
- scalars: a number longer than `MAX_NUMBER_CHARS` characters is refused (a sexagesimal
  `1:2:3:...` integer is quadratic to build), and a value PyYAML cannot build (a timestamp in
  month 13) is a YAML error with its line and column, not a ValueError.

Limits raise `ConfigError` (code "limit") naming the line and column; malformed YAML raises
`yaml.YAMLError`, so each caller words its own message (`yaml_problem` says where and what).
"""
from __future__ import annotations

import os
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, SequenceNode

from engine.models import ConfigError

MAX_CHARS = 1_000_000
MAX_DEPTH = 50
MAX_ALIAS_NODES = 10_000
MAX_NUMBER_CHARS = 100


def _where(mark: Any) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


class _Limit(ConfigError):
    def __init__(self, problem: str, mark: Any = None):
        super().__init__(f"{problem}{_where(mark)}", "limit")


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with a nesting cap while composing and a cap on number lengths."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Node:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH + 1:  # +1: a scalar leaf is not a level of nesting
                raise _Limit(f"the YAML nests deeper than {MAX_DEPTH} levels",
                             self.peek_event().start_mark)
            node = super().compose_node(parent, index)
            assert node is not None  # only None at the end of the stream, never inside a node
            return node
        finally:
            self._depth -= 1

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        self.last_node = node  # where a constructor's plain ValueError is reported
        return super().construct_object(node, deep)

    def _number(self, node: Node, build: Any) -> Any:
        if len(str(node.value)) > MAX_NUMBER_CHARS:
            raise _Limit(f"a number has {len(node.value):,} characters; the limit is "
                         f"{MAX_NUMBER_CHARS}", node.start_mark)
        return build(self, node)

    def _int(self, node: Node) -> Any:
        return self._number(node, yaml.SafeLoader.construct_yaml_int)

    def _float(self, node: Node) -> Any:
        return self._number(node, yaml.SafeLoader.construct_yaml_float)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader._int)
_BoundedLoader.add_constructor("tag:yaml.org,2002:float", _BoundedLoader._float)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: Node) -> None:
    """Refuse a document whose aliases expand past the caps (measured without expanding:
    sizes and depths are computed once per node, iteratively, so this is linear)."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    on_path: set[int] = set()
    distinct = 0
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            kids = _children(node)
            sizes[key] = 1 + sum(sizes[id(k)] for k in kids)
            depths[key] = 1 + max((depths[id(k)] for k in kids), default=0)
            on_path.discard(key)
            if depths[key] > MAX_DEPTH + 1:  # +1: a scalar leaf is not a level of nesting
                raise _Limit(f"the YAML's aliases nest deeper than {MAX_DEPTH} levels",
                             node.start_mark)
            if sizes[key] - distinct > MAX_ALIAS_NODES:
                raise _Limit(f"the YAML's aliases expand to more than {MAX_ALIAS_NODES:,} "
                             "nodes", node.start_mark)
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise _Limit("an alias refers to a node that contains it", node.start_mark)
        on_path.add(key)
        distinct += 1
        stack.append((node, True))
        stack.extend((kid, False) for kid in _children(node) if id(kid) not in sizes)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """Where and what malformed YAML's problem is: ` at line L, column C: PROBLEM`."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{_where(getattr(exc, 'problem_mark', None))}: {problem}"


def safe_load(text: str, *, note: str = "") -> Any:
    """`yaml.safe_load` within the caps above: a limit raises `ConfigError` (code "limit",
    `note` appended), malformed YAML raises `yaml.YAMLError`, and nothing else escapes."""
    if len(text) > MAX_CHARS:
        raise ConfigError(f"the YAML has {len(text):,} characters; the limit is "
                          f"{MAX_CHARS:,}{note}", "limit")
    loader = _BoundedLoader(text)
    try:
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_expansion(node)
            return loader.construct_document(node)
        except _Limit as exc:
            raise ConfigError(f"{exc}{note}", "limit") from None
        except (ValueError, TypeError, OverflowError) as exc:
            # e.g. a timestamp in month 13: PyYAML's constructors raise plain ValueErrors
            problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConstructorError(None, None, f"a value cannot be read ({problem})",
                                   getattr(getattr(loader, "last_node", None), "start_mark", None)
                                   ) from None
        except RecursionError:  # pragma: no cover - the depth cap comes first
            raise ConfigError(f"the YAML nests too deeply{note}", "limit") from None
    finally:
        loader.dispose()


def load_mapping(path: str, *, what: str = "", expected: str = "") -> dict[str, Any]:
    """The mapping in the YAML/JSON file at `path`, or a one-line `ConfigError`.

    `what` prefixes messages (e.g. "--config: "); `expected` names the keys it should hold.
    The file is read through `safe_load`, so its size, aliases and nesting are capped.
    """
    try:
        if os.path.getsize(path) > 4 * MAX_CHARS:  # UTF-8 is at most 4 bytes a character
            raise ConfigError(f"{what}{path} has {os.path.getsize(path):,} bytes; a YAML file "
                              f"may have at most {MAX_CHARS:,} characters", "limit")
        with open(path, encoding="utf-8") as handle:
            text = handle.read(MAX_CHARS + 1)
    except OSError as exc:
        raise ConfigError(f"{what}cannot read {path}: {exc.strerror}", "input") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what}{path} is not UTF-8 text (byte {exc.start + 1})",
                          "input") from None
    try:
        data = safe_load(text)
    except ConfigError as exc:
        raise ConfigError(f"{what}{path}: {exc}", exc.code) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what}{path} is not valid JSON or YAML{yaml_problem(exc)}",
                          "input") from None
    if not isinstance(data, dict):
        hint = f" ({expected})" if expected else ""
        raise ConfigError(f"{what}{path} must hold a mapping{hint}", "input")
    return data
