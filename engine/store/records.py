"""What a record entering the store may hold: one schema for runs, turns, library items and
experiments, whichever way they arrive (an import, the engine, the app, a YAML file).

Two rules, so that SQLite and PostgreSQL accept exactly the same values:

- identifiers (run and experiment ids, protocol names, statuses) are REFUSED when malformed;
- text that people or models wrote (questions, replies, messages, errors) is KEPT, cleaned by
  `engine.text.clean_text` (a lone surrogate or NUL becomes U+FFFD).

Names (labels, seats, models, library names) must fit their `String(N)` column: an import or
a form that gives a longer one is refused; a turn the engine already paid for is kept with its
name shortened. JSON values are bounded in depth and hold finite numbers only. Reading is the
other way round: `decode` never raises, it says why a stored value cannot be read.

A run's and a turn's record, and the values the engine's turns are written as, are not
written out here: they follow from the `runs` and `turns` columns (`engine.store.schema`).
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
)
from sqlalchemy import Boolean, Float, Integer, String
from sqlalchemy import types as sql_types

from engine.models import ConfigError, total_cost
from engine.redaction import redact
from engine.store import schema
from engine.text import NAME_MAX, clean_text, has_visible

RunStatus = Literal["running", "completed", "failed", "interrupted"]
TurnStatus = Literal["ok", "degraded"]
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
TURN_STATUSES: tuple[str, ...] = get_args(TurnStatus)
INT_MAX = 2 ** 31 - 1  # PostgreSQL INTEGER
MAX_DEPTH = 64  # nesting of any stored JSON value
MAX_TAGS = 100
MAX_TURNS = 20_000  # turns per imported run
MAX_LABELS = 100_000  # preferences, and ratings, per imported run
MAX_IMPORT_BYTES = 200_000_000  # 200 MB
ID_RE = re.compile(r"[A-Za-z0-9_-]{1,32}")
PROTOCOL_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_SECRET_WORD = re.compile("key|secret|token|password|authorization")  # in a lowercased key


def error_text(value: Any) -> str:
    """What the store keeps of a text that records a failure (an error, a warning): cleaned
    (`clean_text`) and with every configured key, and anything shaped like one, redacted
    (`engine.redaction`), whichever way it arrived."""
    return redact(clean_text(value or ""))


def strip_secrets(value: Any) -> Any:
    """Drop any mapping entry whose key names a secret (api_key, token, password ...)."""
    if isinstance(value, Mapping):
        return {k: strip_secrets(v) for k, v in value.items()
                if not _SECRET_WORD.search(str(k).lower())}
    if isinstance(value, (list, tuple)):
        return [strip_secrets(v) for v in value]
    return value


# --------------------------------------------------------------------------- JSON values
def storable(value: Any, depth: int = 0, strict: bool = False) -> Any:
    """A JSON-safe copy of `value`, strings cleaned. What the engine hands the store is never
    refused: non-finite numbers become null, integers beyond 64 bits floats, other objects
    their text, and anything nested deeper than `MAX_DEPTH` a note saying so. An imported
    value (`strict`) is refused instead (ValueError), as no column or reader could take it."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if value.bit_length() <= 63:
            return value
        _refuse(strict, "holds a whole number beyond 64 bits")
        try:
            return float(value)
        except OverflowError:
            return None
    if isinstance(value, float):
        return value if math.isfinite(value) else _refuse(strict, "holds NaN or infinity")
    if isinstance(value, str):
        return clean_text(value)
    if depth >= MAX_DEPTH:
        _refuse(strict, f"is nested deeper than {MAX_DEPTH} levels")
        return f"(nested deeper than {MAX_DEPTH} levels; not stored)"
    if isinstance(value, Mapping):
        return {clean_text(str(k)): storable(v, depth + 1, strict) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [storable(v, depth + 1, strict) for v in value]
    _refuse(strict, f"holds a {type(value).__name__}, which is not JSON")
    return clean_text(str(value))


def _refuse(strict: bool, why: str) -> None:
    """Raise ValueError(`why`) when `strict` (`storable`); a lenient copy goes on."""
    if strict:
        raise ValueError(why)


# What in a value's JSON text shows that `storable` would change the value: NUL (a lone
# surrogate fails to encode), a key that was True, False or None (`storable` writes its
# Python name), a run of 19 digits (an integer maybe past 64 bits) or a container that may be
# nested `MAX_DEPTH` deep. A string that only looks so (a quoted "null": ) costs a walk.
_NINES = bytes(ord("9") if ord("0") <= i <= ord("9") else i for i in range(256))


def _walked(text: str) -> bool:
    """True when `text`, a value's JSON, is already what `storable` makes of the value."""
    if "\\u0000" in text or '"true": ' in text or '"false": ' in text or '"null": ' in text \
            or text.count("{") + text.count("[") >= MAX_DEPTH:
        return False
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return b"9" * 19 not in data.translate(_NINES)


def dumps(value: Any) -> str:
    """`value` as the JSON text a store column holds (see `storable`). A value that is JSON
    already (most of what the engine writes: a turn's messages, its parsed fields) is
    encoded as it is, as `storable` would leave it; only one that fails to encode, or whose
    text shows something `storable` changes, is walked."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):  # not JSON, NaN, a cycle, too deep
        text = None
    if text is None or not _walked(text):
        return json.dumps(storable(value), ensure_ascii=False, allow_nan=False)
    return text


def _counts_per_round(item: Any) -> None:
    """`round_votes`: a list with, per round, a count (a whole number, not negative) for each
    answer given (engine.analysis.rounds_dynamics.votes)."""
    if not isinstance(item, list) or not all(
            isinstance(r, dict) and all(isinstance(n, int) and not isinstance(n, bool)
                                        and n >= 0 for n in r.values()) for r in item):
        raise ValueError("'round_votes' must be a list of rounds, each a mapping of answers "
                         "to counts")


def _metrics(value: dict[str, Any]) -> dict[str, Any]:
    value = storable(value, strict=True)
    for key, item in value.items():
        if key == "round_votes":
            _counts_per_round(item)
            continue
        flat = item if isinstance(item, list) else [item]
        if any(isinstance(part, (dict, list)) for part in flat):
            raise ValueError(f"{key!r} must be a number, text, true/false, null or a list of "
                             "them")
    return value


def as_moment(value: Any) -> datetime | None:
    """An ISO-8601 time (or a datetime) as timezone-aware; naive times are UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and len(value) <= 40:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO-8601 time") from None
    else:
        raise ValueError("must be an ISO-8601 time")
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _identifier(pattern: re.Pattern[str], what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(f"{value[:40]!r} is not a valid {what}")
        return value
    return AfterValidator(check)


def _visible(value: str) -> str:
    if not has_visible(value):
        raise ValueError("must contain visible characters")
    return value


Text = Annotated[str, AfterValidator(clean_text)]
ErrorText = Annotated[str, AfterValidator(error_text)]
Name = Annotated[str, Field(max_length=NAME_MAX), AfterValidator(clean_text)]
RunId = Annotated[str, _identifier(ID_RE, "id (1-32 letters, digits, - or _)")]
Protocol = Annotated[str, _identifier(PROTOCOL_RE, "protocol name")]
Count = Annotated[int, Field(ge=0, le=INT_MAX)]
Seconds = Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)]
MONEY_MAX = 1e12  # US dollars; a stored cost beyond it is a forgery or a bug
# A cost in US dollars: finite and non-negative; None (unknown) is its own value, never 0.
Money = Annotated[float, Field(ge=0, le=MONEY_MAX, allow_inf_nan=False)]
Moment = Annotated[datetime | None, BeforeValidator(as_moment)]
JsonObject = Annotated[dict[str, Any], AfterValidator(partial(storable, strict=True))]


class _Record(BaseModel):
    # Strict: a string is never a list of tags, "5" never a count. Unknown keys (an export
    # from another version, or read-only facts such as `unreadable`) are ignored.
    model_config = ConfigDict(strict=True, extra="ignore")


# --------------------------------------------------------------------------- from the tables
_STATUSES: dict[str, Any] = {"runs": RunStatus, "turns": TurnStatus}
_JSON_FIELDS: dict[str, Any] = {
    "object": JsonObject,
    "tags": Annotated[list[Name], Field(max_length=MAX_TAGS)],
    "messages": list[dict[str, Text]],
    "texts": list[Text]}


def _field_type(column: Any) -> Any:
    """What a file may hold for `column` (`engine.store.schema`: its type, size and `info`),
    without None."""
    info, coltype = column.info, column.type
    rule = info.get("rule")
    if rule in ("id", "protocol"):
        return Protocol if rule == "protocol" else RunId
    if rule == "status":
        return _STATUSES[column.table.name]
    if rule == "metrics":
        return Annotated[dict[str, Any], AfterValidator(_metrics)]
    if rule == "money":
        return Money
    if "json" in info:
        return list[ErrorText] if rule == "error" else _JSON_FIELDS[info["json"]]
    if rule == "error":
        return ErrorText
    for kind, field in ((schema.Moment, Moment), (Boolean, bool), (Integer, Count),
                        (Float, Seconds)):
        if isinstance(coltype, kind):
            return field
    if isinstance(coltype, String) and coltype.length and not isinstance(coltype, sql_types.Text):
        return Annotated[str, Field(max_length=coltype.length), AfterValidator(clean_text)]
    return Text


def _field(column: Any) -> tuple[Any, Any]:
    """`column` as a record's field: (type, default). A file may leave out a column with a
    default, a nullable one, a time or a JSON value (then empty)."""
    annotation = _field_type(column)
    info = column.info
    if "json" in info:
        empty = info["empty"]
        if empty is None:
            return annotation | None, None
        return annotation, Field(default_factory=type(empty))
    if isinstance(column.type, schema.Moment):  # `Moment` takes None already
        return annotation, None
    if column.nullable:
        return annotation | None, None
    if column.default is not None:
        return annotation, column.default.arg
    return annotation, ...


def _fields(table: Any) -> dict[str, Any]:
    """A field for each column of `table` that a file carries, in the table's order."""
    return {column.name: _field(column) for column in table.columns
            if column.info.get("file", True)}


class _Columns(_Record):
    # Built on first use, not on import: a command that never imports or exports a run
    # does not pay for the two records' validators.
    model_config = ConfigDict(defer_build=True)


if TYPE_CHECKING:  # the fields are the tables' columns: any name, typed by the table
    class _TurnColumns(_Columns):
        def __getattr__(self, name: str) -> Any: ...

    class _RunColumns(_Columns):
        def __getattr__(self, name: str) -> Any: ...
else:
    _TurnColumns = create_model("_TurnColumns", __base__=_Columns, __module__=__name__,
                                **_fields(schema.TurnRow.__table__))
    _RunColumns = create_model("_RunColumns", __base__=_Columns, __module__=__name__,
                               **_fields(schema.RunRow.__table__))


def record_row(table: Any, values: dict[str, Any]) -> dict[str, Any]:
    """A checked record's values (`model_dump`) as `table`'s column values, in place: JSON
    values as text (an absent object as {}), and "" as NULL where NULL reads as ""."""
    for column in table.columns:
        if column.name not in values:
            continue
        if "json" in column.info:
            value = values[column.name]
            values[column.name] = json.dumps({} if value is None else value,
                                             ensure_ascii=False)
        elif column.info.get("null") == "":
            values[column.name] = values[column.name] or None
    return values


class TurnRecord(_TurnColumns):
    """One stored turn, as exported (`idx`, not `index`): a field for each column of `turns`
    a file carries (`engine.store.schema.TurnRow`)."""


COMMENT_MAX = 10_000  # characters of a label's comment
Rater = Annotated[str, Field(min_length=1, max_length=NAME_MAX), AfterValidator(clean_text),
                  AfterValidator(_visible)]
Comment = Annotated[str, Field(max_length=COMMENT_MAX), AfterValidator(clean_text)]


class PreferenceRecord(_Record):
    """A person's judgement between two runs' final answers (`choice`: which is better, or a
    tie) and which run was shown on the left (None: not shown side by side)."""

    id: RunId
    run_a: RunId
    run_b: RunId
    shown_left: Literal["a", "b"] | None = None
    rater: Rater
    choice: Literal["a", "b", "tie"]
    comment: Comment = ""
    created_at: Moment = None


class RatingRecord(_Record):
    """A person's 1-5 score of a run, or of its turn `turn` (by index)."""

    id: RunId
    run_id: RunId
    turn: Count | None = None
    rater: Rater
    score: Annotated[int, Field(ge=1, le=5)]
    comment: Comment = ""
    created_at: Moment = None


class RunRecord(_RunColumns):
    """One stored run with its turns, as `Store.export_run` writes it: a field for each
    column of `runs` a file carries (`engine.store.schema.RunRow`), then its turns and the
    labels naming it (`engine.store.labels`; absent from older exports)."""

    turns: list[TurnRecord] = Field(default_factory=list, max_length=MAX_TURNS)
    preferences: list[PreferenceRecord] = Field(default_factory=list, max_length=MAX_LABELS)
    ratings: list[RatingRecord] = Field(default_factory=list, max_length=MAX_LABELS)
    unreadable: Literal["", None] = None  # a run exported unreadable is not imported


class LibraryRecord(_Record):
    """A persona, a role or a saved configuration."""

    kind: Literal["persona", "role", "config", "meta"]
    name: Annotated[str, Field(min_length=1, max_length=NAME_MAX), AfterValidator(clean_text),
                    AfterValidator(_visible)]
    body: JsonObject = Field(default_factory=dict)


class ExperimentRecord(_Record):
    """An experiment's name and spec as stored, and who started it."""

    name: Name = ""
    spec: JsonObject = Field(default_factory=dict)
    started_by: Name = ""


_T = TypeVar("_T")


def latest(items: Iterable[_T], key: Callable[[_T], Any],
           when: Callable[[_T], Any]) -> list[_T]:
    """Of the `items` sharing a `key`, the latest by `when`: one person's judgement counts
    once (the import of labels, and the migration that made it a rule)."""
    kept: dict[Any, _T] = {}
    for item in items:
        found = kept.get(key(item))
        if found is None or when(item) > when(found):
            kept[key(item)] = item
    return list(kept.values())


def why_invalid(error: ValidationError) -> str:
    """The first problem of a validation error as `field: reason` (one line)."""
    first = error.errors()[0]
    where = " ".join(".".join(str(part) for part in first["loc"]).split())
    message = " ".join(str(first["msg"]).split())  # one line, whatever the data held
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    return f"{where}: {message}" if where else message


_R = TypeVar("_R", bound=_Record)


def validate(model: type[_R], data: Mapping[str, Any], what: str) -> _R:
    """`model` validated from `data`, or a `ConfigError` naming `what` and the field."""
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(f"{what}: {why_invalid(exc)}", "input") from None


# --------------------------------------------------------------------------- engine writes
def fit(value: Any, size: int) -> str:
    """A name the engine already paid for, cleaned and shortened to its column's `size`."""
    text = clean_text("" if value is None else str(value))
    return text if len(text) <= size else text[:size - 1] + "…"


def new_run(protocol: str, question: str, *, config: Mapping[str, Any], label: str | None,
            tags: Iterable[str], expected: str | None,
            experiment_id: str | None, started_by: str = "") -> dict[str, Any]:
    """The checked values of a run about to start (before any call): `ConfigError` when an
    identifier is malformed or a label or tag does not fit."""
    tag_list = list(tags)
    if any(not isinstance(tag, str) for tag in tag_list):
        raise ConfigError("tags must be text", "input")
    checked = validate(RunRecord, {
        "id": "new", "protocol": protocol, "question": question,
        "expected": None if expected is None else str(expected), "label": label or None,
        "tags": sorted(set(tag_list)), "status": "running", "experiment_id": experiment_id,
        "started_by": started_by}, "run")
    return {"protocol": checked.protocol, "question": checked.question,
            "expected": checked.expected, "label": checked.label,
            "tags": json.dumps(checked.tags, ensure_ascii=False),
            "config": dumps(strip_secrets(dict(config))), "started_by": checked.started_by}


def count(value: Any) -> int:
    """A count the engine produced, kept within a PostgreSQL INTEGER (0..2**31-1)."""
    try:
        return min(max(int(value or 0), 0), INT_MAX)
    except (TypeError, ValueError, OverflowError):
        return 0


def total(values: Iterable[Any]) -> int:
    """A run's total of its turns' counts, by the rule a turn row keeps: each count within
    0..INT_MAX (`count`), and the sum too (a run's tokens never negative, never too big for
    the column, whatever its turns carried)."""
    return count(sum(count(value) for value in values))


def seconds(value: Any) -> float:
    """A duration the engine measured, finite and non-negative."""
    try:
        value = float(value or 0.0)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return min(max(value, 0.0), 1e9) if math.isfinite(value) else 0.0


def money(value: Any) -> float | None:
    """A cost the engine computed, in US dollars: finite and non-negative, else None
    (unknown: never stored as 0)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return value if math.isfinite(value) and 0 <= value <= MONEY_MAX else None


def _nullable(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else convert(value)


def _writer(column: Any) -> Callable[[Any], Any]:  # noqa: PLR0911
    """How a value the engine made is written to `column`: never refused (the call was
    made, the run happened), always storable, by the column's type and rule."""
    info, coltype = column.info, column.type
    rule = info.get("rule")
    if rule == "status":  # an unknown status is written as the last (a turn's "degraded")
        statuses = RUN_STATUSES if column.table.name == "runs" else TURN_STATUSES
        return lambda value: value if value in statuses else statuses[-1]
    if rule == "money":
        return money
    if "json" in info:
        empty = info["empty"] if info["empty"] is not None else {}
        if rule == "error":
            return lambda value: dumps([error_text(v) for v in value or ()])
        return lambda value: dumps(empty if value is None else value)
    if rule == "error":
        return error_text
    if isinstance(coltype, schema.Moment):
        return lambda value: value
    for kind, convert in ((Boolean, bool), (Integer, count), (Float, seconds)):
        if isinstance(coltype, kind):
            return _nullable(convert) if column.nullable else convert
    if isinstance(coltype, String) and coltype.length and not isinstance(coltype, sql_types.Text):
        size = coltype.length
        return (lambda value: fit(value, size) or None) if column.nullable else (
            lambda value: fit(value, size))
    return lambda value: clean_text(value or "")


# A turn's columns and the `Turn` field each is written from (`idx` is the turn's `index`).
_TURN_WRITERS = [(column.name, "index" if column.name == "idx" else column.name,
                  _writer(column)) for column in schema.TurnRow.__table__.columns
                 if column.info.get("file", True)]


def turn_values(run_id: str, turn: Any) -> dict[str, Any]:
    """A completed turn's column values, one for each column of `turns` (a field of
    `engine.models.Turn` of the same name): never refused (the call was made), always
    storable."""
    values = {name: write(getattr(turn, field, None)) for name, field, write in _TURN_WRITERS}
    values["run_id"] = run_id
    return values


def column_values(table: Any, facts: Mapping[str, Any]) -> dict[str, Any]:
    """`facts` (column name -> what the engine made) as `table`'s column values, each
    written as `turn_values` writes a turn's."""
    return {name: _writer(table.columns[name])(value) for name, value in facts.items()}


def totals(turns: Sequence[Any]) -> dict[str, Any]:
    """A run's totals over its turns (`Turn`s, rows, or mappings with their fields): `calls`,
    `degraded`, tokens in and out (`total`), `latency` (the calls' summed latency) and
    `cost_usd` (`engine.models.total_cost`): what a run ends with, however it ends."""
    def field(turn: Any, name: str) -> Any:
        return turn[name] if isinstance(turn, Mapping) else getattr(turn, name)
    return {"calls": len(turns), "degraded": sum(1 for t in turns if field(t, "status") != "ok"),
            "tokens_in": total(field(t, "tokens_in") for t in turns),
            "tokens_out": total(field(t, "tokens_out") for t in turns),
            "latency": seconds(sum(seconds(field(t, "latency")) for t in turns)),
            "cost_usd": money(total_cost(turns))}


class _Labels(_Record):
    label: Name | None = None
    tags: list[Name] = Field(default_factory=list, max_length=MAX_TAGS)


def labels(label: Any, tags: Iterable[Any]) -> tuple[str | None, list[str]]:
    """A run's label and sorted tags, checked (`ConfigError` when one does not fit)."""
    checked = validate(_Labels, {"label": label or None, "tags": sorted(set(tags))}, "run")
    return checked.label, checked.tags


def library_item(kind: str, name: Any, body: Mapping[str, Any]) -> LibraryRecord:
    """A checked library entry (`ConfigError` naming the field when it is not storable)."""
    if not isinstance(name, str):
        raise ConfigError(f"a {kind} name must be text", "input")
    clean = strip_secrets({k: v for k, v in body.items() if k not in ("id", "name", "builtin")})
    return validate(LibraryRecord, {"kind": kind, "name": name.strip(),
                                    "body": storable(clean)}, f"{kind} {name.strip()[:40]!r}")


def experiment_item(name: Any, spec: Mapping[str, Any]) -> ExperimentRecord:
    """A checked experiment row (`ConfigError` when its name does not fit)."""
    return validate(ExperimentRecord, {"name": clean_text(str(name or "")),
                                       "spec": storable(dict(spec))}, "experiment")


def starter(started_by: Any) -> str:
    """Who starts an experiment, checked as a run's `started_by` is (`ConfigError` when it is
    not text or does not fit), so that every run of it can record the name."""
    if not isinstance(started_by, str):
        raise ConfigError("started_by must be text", "input")
    return str(validate(ExperimentRecord, {"started_by": started_by}, "experiment").started_by)


def json_reason(exc: BaseException) -> str:
    """Why a JSON text could not be parsed, in a few words."""
    if isinstance(exc, RecursionError):
        return "nested too deep"
    return getattr(exc, "msg", None) or str(exc).splitlines()[0][:120]
