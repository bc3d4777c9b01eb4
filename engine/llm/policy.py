"""A run's call policy as one typed record: how long one model call may take, how often a
transient failure is retried, and how many calls the run keeps in flight.

Every reader of the policy goes through `CallPolicy`: a configuration (`RunConfig` is a
`CallPolicy` with the rest of a run's configuration), a runner's keyword arguments
(`PolicyKwargs`), the guarded call (`RunContext`), the Run and Experiments forms (each
field's title, help, range and sentence), the preflight's defaults from the seats'
endpoints, and the CLI. A field left None is decided by the seat's endpoint, else by
`DEFAULTS`.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from engine.checks import require_int
from engine.models import ConfigError

MAX_RETRIES = 10
MAX_CONCURRENCY = 64
MAX_CALL_TIMEOUT = 3600.0


class CallPolicy(BaseModel):
    """Per-call timeout (seconds), retries after a transient failure, and calls one run
    keeps in flight; None leaves a field to the seat's endpoint, else the default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_per_call: float | None = Field(None, title="Per-call timeout (s)", json_schema_extra={
        "help": "seconds one model call may take before it is abandoned",
        "line": "per-call timeout {:g} s", "endpoint": "timeout", "low": 0.1,
        "high": MAX_CALL_TIMEOUT, "whole": False, "cli": "--timeout-per-call"})
    retries: int | None = Field(None, title="Retries", json_schema_extra={
        "help": "retries after a transient failure (rate limit, timeout, connection)",
        "line": "retries {:d}", "endpoint": "retries", "low": 0, "high": MAX_RETRIES,
        "whole": True, "cli": "--retries"})
    concurrency: int | None = Field(None, title="Calls at once", json_schema_extra={
        "help": "model calls this run keeps in flight at once",
        "line": "calls at once {:d}", "endpoint": "concurrency", "low": 1,
        "high": MAX_CONCURRENCY, "whole": True, "cli": "--concurrency (experiment run)",
        "fewest": True})

    @classmethod
    def read(cls, data: Mapping[str, Any], fields: Iterable[str] | None = None
             ) -> CallPolicy:
        """The policy among `data`'s keys (only `fields`, when given; a None value is
        unset), checked before any call: a `ConfigError` names the field and its range."""
        wanted = FIELDS if fields is None else tuple(fields)
        values = {name: data[name] for name in wanted if data.get(name) is not None}
        for name, value in values.items():
            info = field_info(name)
            if info["whole"]:
                require_int(value, name, info["low"], info["high"], "run")
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not 0 < value <= info["high"]:
                raise ConfigError(f"{name} must be seconds in (0, {info['high']:g}], got "
                                  f"{value!r}", "input")
        return CallPolicy(**values)

    def given(self) -> dict[str, Any]:
        """The fields set, as keyword arguments (a runner's, a configuration's)."""
        return {name: value for name in FIELDS
                if (value := getattr(self, name)) is not None}


FIELDS: tuple[str, ...] = tuple(CallPolicy.model_fields)
# What the guarded call uses for a field neither the run nor the seat's endpoint sets.
DEFAULT_TIMEOUT = 60.0
DEFAULT_RETRIES = 2
DEFAULT_CONCURRENCY = 8
DEFAULTS = CallPolicy(timeout_per_call=DEFAULT_TIMEOUT, retries=DEFAULT_RETRIES,
                      concurrency=DEFAULT_CONCURRENCY)
# The spec's own policy of an experiment (its `concurrency` is the runs it keeps at once).
SPEC_FIELDS: tuple[str, ...] = tuple(name for name in FIELDS if name != "concurrency")


def field_info(name: str) -> dict[str, Any]:
    """A field's title and the form's words and range for it: `title`, `help`, `line` (its
    part of the policy sentence), `endpoint` (the endpoint setting it falls back on), `low`,
    `high`, `whole` (a whole number), `cli` (its flag)."""
    info = CallPolicy.model_fields[name]
    extra = info.json_schema_extra
    return {"title": info.title, **(extra if isinstance(extra, dict) else {})}


class PolicyKwargs(TypedDict, total=False):
    """The call policy as a runner's keyword arguments (`run_*`, `arun_config`)."""

    timeout_per_call: float | None
    retries: int | None
    concurrency: int | None


def endpoint_defaults(policies: Mapping[str, Mapping[str, Any]]) -> tuple[CallPolicy,
                                                                             dict[str, list[str]]]:
    """What a run uses with no policy of its own, given the policies its seats' endpoints set
    (endpoint name -> `Endpoint.policy()`): per field, the longest timeout, the most retries,
    the fewest calls at once when they differ, else the default; and, per field, the
    endpoints it came from (empty: the default)."""
    values: dict[str, Any] = {}
    sources: dict[str, list[str]] = {}
    for name in FIELDS:
        info = field_info(name)
        given = {endpoint: policy[info["endpoint"]] for endpoint, policy in policies.items()
                 if info["endpoint"] in policy}
        pick = min if info.get("fewest") else max
        values[name] = pick(given.values()) if given else getattr(DEFAULTS, name)
        sources[name] = sorted(given)
    return CallPolicy(**values), sources


def sentence(policy: CallPolicy, defaults: CallPolicy, sources: Mapping[str, list[str]]
             ) -> str:
    """A run's call policy in one line, each field with where it comes from (this run's
    configuration, an endpoint, or the default)."""
    parts = []
    for name in FIELDS:
        value = getattr(policy, name)
        if value is not None:
            where = "this run"
        else:
            value = getattr(defaults, name)
            named = sources.get(name) or []
            where = f"endpoint {', '.join(named)}" if named else "default"
        parts.append(f"{field_info(name)['line'].format(value)} ({where})")
    return "Call policy: " + ", ".join(parts)
