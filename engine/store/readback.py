"""Reading the store tolerantly: a stored value that cannot be read never fails the page,
the CLI command or the export that meets it.

Each JSON column must decode to the shape its readers expect (`config` an object, `tags` a
list of text ...); SQLite keeps whatever was written, so numbers, text and times are checked
too. A value that cannot be read takes its empty default and the row's `unreadable` says
which and why, so the Runs page can show the row by its id and offer to delete it.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any

import pandas as pd
from sqlalchemy import Boolean, Float, Integer, String

from engine.cells import CELL_PATTERN, SUPERSEDED, Cell
from engine.store.records import RUN_STATUSES as STATUSES
from engine.store.records import as_moment, json_reason
from engine.store.schema import Moment
from engine.store.statements import RUNS, TURNS
from engine.text import clean_text, clean_value


def aware(moment: datetime | None) -> datetime | None:
    """A stored time as timezone-aware (SQLite hands back naive UTC times)."""
    return as_moment(moment) if isinstance(moment, datetime) else moment


def iso(moment: Any) -> str | None:
    """A stored time as ISO-8601 text, timezone-aware (None when there is none)."""
    value = aware(moment) if moment else None
    return value.isoformat() if isinstance(value, datetime) else None


# How each column of `runs` and `turns` is read back follows from the column
# (`engine.store.schema`): its SQL type and nullability, and its `info`.
_TABLES = (RUNS, TURNS)


# What a run's stored metrics must decode to, and their value when they cannot be read.
METRICS = (dict, RUNS.c.metrics.info["empty"])
_SHAPES = {dict: "a JSON object", "tags": "a list of text", "texts": "a list of text",
           "messages": "a list of messages"}


# A list of plain texts as `json.dumps` writes it ('[]', '["a", "b"]'): no escape, quote or
# control character in a text, so splitting it gives the list the JSON decoder would, in a
# fifth of the time (a run's tags, read for every run of an experiment).
_PLAIN_TEXTS = re.compile(r'\[\]|\["[^"\\\x00-\x1f]*"(?:, "[^"\\\x00-\x1f]*")*\]')


def decode(raw: Any, shape: Any, default: Any) -> tuple[Any, str]:
    """A stored JSON column read tolerantly: `(value, "")`, or `(default, why)` when the
    text is not JSON or not the shape the column must hold. Never raises."""
    if raw is None or raw == "":
        return _copy(default), ""
    if shape in ("tags", "texts") and type(raw) is str and _PLAIN_TEXTS.fullmatch(raw):
        return (raw[2:-2].split('", "') if len(raw) > 2 else []), ""
    if not isinstance(raw, str):
        return _copy(default), f"holds a {type(raw).__name__}, not JSON text"
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return _copy(default), f"is not JSON ({json_reason(exc)})"
    if _fits(value, shape):
        return value, ""
    return _copy(default), f"is {_kind(value)}, not {_SHAPES[shape]}"


def decode_tags(raw: Any) -> list[str]:
    """A run's tags as a list of text ([] when the stored value cannot be read)."""
    tags: list[str] = decode(raw, "tags", [])[0]  # a list of text, as `_fits` checked
    return tags


# A run's tags as an experiment writes them (`json.dumps` of the sorted list): its cell's tag,
# and `superseded` once it was redone.
_CELL_TAGS = re.compile(rf'\["{CELL_PATTERN}"(, "{SUPERSEDED}")?\]')


def tag_cells(raws: Sequence[Any]) -> tuple[list[int], list[int], list[int], list[bool]]:
    """Each run's cell, read from its stored tags as `decode_tags` and `Cell.from_tags` read
    it, as three columns of indexes (q, c, r; -1 for none), and whether it is tagged
    `superseded`. The tags an experiment writes are read off their text: a list per run would
    be 20,000 objects for the garbage collector to walk, again and again, for four numbers."""
    qs: list[int] = []
    cs: list[int] = []
    rs: list[int] = []
    old: list[bool] = []
    plain = _CELL_TAGS.fullmatch
    for raw in raws:
        found = plain(raw) if type(raw) is str else None
        if found:
            q, c, r, gone = int(found[1]), int(found[2]), int(found[3]), found[4] is not None
        else:
            tags = decode_tags(raw)
            cell = Cell.from_tags(tags)
            q, c, r = (cell.q, cell.c, cell.r) if cell else (-1, -1, -1)
            gone = SUPERSEDED in tags
        qs.append(q)
        cs.append(c)
        rs.append(r)
        old.append(gone)
    return qs, cs, rs, old


def columns(found: Any, chunk: int = 200) -> dict[str, list[Any]]:
    """A query's rows as columns (name -> values), turned over `chunk` rows at a time: 20,000
    rows held at once lived long enough for the garbage collector to walk the whole heap
    on their account, twice."""
    names = list(found.keys())
    out: dict[str, list[Any]] = {name: [] for name in names}
    for rows in found.partitions(chunk):
        for name, values in zip(names, zip(*rows, strict=True), strict=True):
            out[name].extend(values)
    return out


def _copy(default: Any) -> Any:
    return type(default)() if default is not None else None


def _fits(value: Any, shape: Any) -> bool:
    if shape is dict:
        return isinstance(value, dict)
    if shape in ("tags", "texts"):
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, list) and all(
        isinstance(m, dict) and all(isinstance(v, str) for v in m.values()) for m in value)


def _kind(value: Any) -> str:
    return {str: "text", dict: "an object", list: "a list", bool: "true/false",
            type(None): "null"}.get(type(value), "a number")


# Numbers a row always has (NOT NULL), by column name, in either table.
NUMBERS: dict[str, type] = {
    c.name: int if isinstance(c.type, Integer) else float for table in _TABLES
    for c in table.columns
    if isinstance(c.type, (Integer, Float)) and not c.nullable and not c.primary_key}


def number(value: Any, kind: type) -> tuple[Any, str]:
    """A stored number read tolerantly: `(value, "")`, or `(0, why)`."""
    if isinstance(value, bool):
        return kind(value), ""
    if isinstance(value, (int, float)) and math.isfinite(value):
        return kind(value), ""
    if value is None:
        return kind(0), ""
    return kind(0), f"is {str(value)[:40]!r}, not a number"


# Amounts of money: NULL (None) is a value of its own (a cost that is unknown), never 0.
OPTIONAL_NUMBERS = tuple(dict.fromkeys(c.name for table in _TABLES for c in table.columns
                                       if c.info.get("rule") == "money"))


def optional_number(value: Any, whole: bool = False) -> tuple[Any, str]:
    """A stored nullable number read tolerantly: `(value, "")` (a float, or an int when
    `whole`), `(None, "")` for NULL, or `(None, why)` when it is not a finite number (a whole
    number when `whole`) of 0 or more."""
    if value is None:
        return None, ""
    if isinstance(value, int if whole else (int, float)) and not isinstance(value, bool) \
            and (whole or math.isfinite(value)) and value >= 0:
        return (value if whole else float(value)), ""
    return None, f"is {str(value)[:40]!r}, not a {'whole ' * whole}number of 0 or more"


def clean_stored(value: Any) -> Any:
    """A stored text column as text (SQLite keeps whatever type was written)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return clean_text(value.decode("utf-8", "replace"))
    return clean_value(str(value))


# The text columns (JSON aside) of either table.
_TEXTS = tuple(dict.fromkeys(c.name for table in _TABLES for c in table.columns
                             if isinstance(c.type, String) and "json" not in c.info))


def _reader(column: Any) -> Callable[[Any], tuple[Any, str]] | None:  # noqa: PLR0911
    """How `Store.get` reads a stored value of `column` back: `(value, "")`, or its default
    and why it cannot be read (None: as stored). JSON is parsed; a time is ISO text (one a
    row always has is missing when it cannot be read); a flag that is never NULL is a bool;
    numbers are made sound (NULL is its own value for an amount of money and a nullable
    whole number); a run's status must be one of the table's; text is text ("" for NULL
    where the column's `null` says so: older rows hold NULL in it)."""
    info, kind = column.info, column.type
    if "json" in info:
        return partial(decode, shape=dict if info["json"] == "object" else info["json"],
                       default=info["empty"])
    if isinstance(kind, Moment):
        return lambda value: (iso(value), "is not a time" if value is None and
                              not column.nullable else "")
    if isinstance(kind, Boolean):
        return None if column.nullable else lambda value: (bool(value), "")
    if info.get("rule") == "money":
        return optional_number
    if isinstance(kind, Integer) and column.nullable:
        return partial(optional_number, whole=True)
    if column.name in NUMBERS:
        return partial(number, kind=NUMBERS[column.name])
    if info.get("rule") == "status" and column.table.name == "runs":
        return _run_status
    if isinstance(kind, String):
        if info.get("null") == "":
            return lambda value: (clean_stored(value) or "", "")
        return lambda value: (clean_stored(value), "")
    return None


def _run_status(value: Any) -> tuple[Any, str]:
    status = clean_stored(value)
    return status, "" if status in STATUSES else (f"{status!r} is not one of "
                                                  f"{', '.join(STATUSES)}")


# Each table's readers (`_reader`), by column name.
_READERS = {table.name: [(c.name, read) for c in table.columns
                         for read in [_reader(c)] if read is not None] for table in _TABLES}


def read_row(row: dict[str, Any], table: str) -> dict[str, Any]:
    """A row of `table` (runs or turns) as `Store.get` returns it: read back in place
    (`_reader`), `unreadable` saying what could not be read and why, a turn without the
    table's own id."""
    if table == "turns":
        row.pop("id", None)
    problems = []
    for name, read in _READERS[table]:
        if name in row:
            row[name], why = read(row[name])
            if why:
                problems.append(f"{name} {why}")
    row["unreadable"] = "; ".join(problems)
    return row


# The columns `tolerant_frame` reads value by value, as `_reader` reads them (JSON, and a
# run's status), and the times a row of each table always has.
_ONE_BY_ONE = {table.name: [(name, read) for name, read in _READERS[table.name]
                             if "json" in table.c[name].info or read is _run_status]
               for table in _TABLES}
_REQUIRED_TIMES = {table.name: [c.name for c in table.columns
                                if isinstance(c.type, Moment) and not c.nullable]
                   for table in _TABLES}


def _each(frame: pd.DataFrame, name: str, read: Callable[[Any], tuple[Any, str]],
          problems: dict[int, list[str]], dtype: Any = None) -> None:
    """Column `name` of `frame` read back value by value with `read`, each value that cannot
    be read noted with its row in `problems`."""
    read_back = [read(value) for value in frame[name].tolist()]
    frame[name] = pd.Series([value for value, _ in read_back], index=frame.index, dtype=dtype)
    for i, (_, why) in enumerate(read_back):
        if why:
            problems.setdefault(i, []).append(f"{name} {why}")


def tolerant_frame(frame: pd.DataFrame, table: str, decoded: bool = False) -> pd.DataFrame:
    """A frame of rows of `table` (runs or turns) read back as `_reader` reads one row: its
    JSON (unless already `decoded`), numbers, text, the times a row always has and a run's
    status, column by column (fast for 10,000 sound rows); its times and flags stay as the
    database sent them."""
    # what could not be read, by row: only rows with a problem get a list (20,000 empty
    # lists were 20,000 objects for the garbage collector)
    problems: dict[int, list[str]] = {}
    for name, read in _ONE_BY_ONE[table]:
        if name in frame and not (decoded and name != "status"):
            _each(frame, name, read, problems)
    for name, numeric_type in NUMBERS.items():
        if name not in frame or frame.empty:
            continue
        numbers = pd.to_numeric(frame[name], errors="coerce")
        bad = numbers.isna() & frame[name].notna()
        bad |= numbers.isin([float("inf"), float("-inf")])
        for i in bad.to_numpy().nonzero()[0].tolist():
            problems.setdefault(i, []).append(
                f"{name} is {str(frame[name].iloc[i])[:40]!r}, not a number")
        frame[name] = numbers.where(~bad, 0).fillna(0).astype(numeric_type)
    for name in OPTIONAL_NUMBERS:
        if name in frame and not frame.empty and frame[name].dtype.kind == "f" and not (
                (frame[name] < 0) | frame[name].isin([math.inf, -math.inf])).any():
            # numbers of 0 or more (or missing) all: what `optional_number` gives each,
            # without a call per value
            frame[name] = frame[name].astype(object).where(frame[name].notna(), None)
        elif name in frame and not frame.empty:
            _each(frame, name, lambda v: optional_number(
                None if isinstance(v, float) and v != v else v), problems, dtype=object)
    for name in _TEXTS:
        if name in frame and frame[name].dtype == object:
            odd = [not (v is None or isinstance(v, str)) for v in frame[name].tolist()]
            if any(odd):
                frame[name] = [clean_stored(v) for v in frame[name].tolist()]
    for name in _REQUIRED_TIMES[table]:
        if name in frame:
            for i in frame[name].isna().to_numpy().nonzero()[0].tolist():
                problems.setdefault(i, []).append(f"{name} is not a time")
    frame["unreadable"] = ["; ".join(problems[i]) if i in problems else ""
                          for i in range(len(frame))]
    return frame
