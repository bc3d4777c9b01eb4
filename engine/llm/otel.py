"""OpenTelemetry export: with `OTEL_EXPORTER_OTLP_ENDPOINT` set (the extra `otel`), each run
is exported as a trace when it ends, so runs show up in the tracing tools a team already has.

A run is a span (`parley.run PROTOCOL`) with a child span per model call (`chat MODEL`), each
timed by the turn's own start and end. A call's span carries the GenAI semantic conventions'
attributes (`gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
`gen_ai.response.model`, `gen_ai.usage.input_tokens` and `gen_ai.usage.output_tokens`) and
`parley.*` ones: protocol, phase, round, seat, status, simulated, and `parley.cost_usd` only
when the cost is known (an unpriced call has none, never 0). No prompt, question or reply text
is exported unless `PARLEY_OTEL_CONTENT=1` (then `gen_ai.input.messages` and
`gen_ai.output.messages`, as JSON).

Unset, nothing is imported and a run pays one dictionary lookup. The SDK's exporter is the
OTLP/HTTP one, configured by the standard `OTEL_*` variables (endpoint, headers, time-out);
spans are sent in the background by a batch processor (`flush` waits for them), and an export
that fails is the SDK's to log: it never fails a run.
"""
from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.models import Turn

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
CONTENT_ENV = "PARLEY_OTEL_CONTENT"
INSTALL = "pip install 'parley[otel]'"
log = logging.getLogger(__name__)


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """True when an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`, or the traces one)."""
    env = os.environ if environ is None else environ
    return bool(env.get(ENDPOINT_ENV) or env.get(TRACES_ENDPOINT_ENV))


@functools.cache
def _provider(endpoint: str) -> Any:
    """The tracer provider exporting to `endpoint`, made on first use and kept for the
    process (its batch processor's thread sends in the background); None when the extra is
    missing, said once in the log."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("%s is set but OpenTelemetry is not installed: %s", ENDPOINT_ENV, INSTALL)
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": "parley"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def _configured(env: Mapping[str, str]) -> Any:
    """The tracer provider of `env`'s endpoint; None when export is off or the extra missing."""
    return _provider(str(env.get(TRACES_ENDPOINT_ENV) or env.get(ENDPOINT_ENV))) \
        if enabled(env) else None


def flush(timeout_ms: int = 30_000, environ: Mapping[str, str] | None = None) -> bool:
    """Send every span ended so far to the environment's endpoint (the batch processor sends
    in the background); True when there is nothing to send."""
    provider = _configured(os.environ if environ is None else environ)
    return provider is None or bool(provider.force_flush(timeout_ms))


def _ns(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1e9)


def _model(spec: str) -> tuple[str, str]:
    """A model spec's provider and model name: `openai:gpt-4o?x=1` -> (openai, gpt-4o)."""
    bare = str(spec or "").split("?")[0]
    provider, _, name = bare.partition(":")
    return (provider, name) if name else (provider or "unknown", provider or "unknown")


def _call_attributes(protocol: str, turn: Turn, content: bool) -> dict[str, Any]:
    provider, name = _model(turn.model)
    out: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
        "gen_ai.request.model": name, "gen_ai.response.model": name,
        "gen_ai.usage.input_tokens": int(turn.tokens_in or 0),
        "gen_ai.usage.output_tokens": int(turn.tokens_out or 0),
        "parley.protocol": protocol, "parley.phase": str(turn.phase),
        "parley.round": int(turn.round or 0), "parley.seat": str(turn.seat),
        "parley.status": str(turn.status), "parley.simulated": bool(turn.simulated),
        "parley.turn": int(turn.index), "parley.attempts": int(turn.attempts or 1)}
    if turn.cost_usd is not None:
        out["parley.cost_usd"] = float(turn.cost_usd)
    if content:
        out["gen_ai.input.messages"] = json.dumps(turn.messages, ensure_ascii=False)
        out["gen_ai.output.messages"] = json.dumps(
            [{"role": "assistant", "content": turn.reply}], ensure_ascii=False)
    return out


def export_run(protocol: str, run_id: str | None, turns: Sequence[Any], status: str, *,
               started: datetime, finished: datetime, cost_usd: float | None = None,
               label: str | None = None, experiment_id: str | None = None,
               environ: Mapping[str, str] | None = None) -> bool:
    """Export one ended run as a trace (see the module); False when export is off or the
    extra is missing. Never raises: a trace is never worth a run."""
    env = os.environ if environ is None else environ
    try:
        provider = _configured(env)
        if provider is None:
            return False
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode
        tracer = provider.get_tracer("parley")
        content = env.get(CONTENT_ENV) == "1"
        given = {"parley.label": label or None, "parley.experiment_id": experiment_id or None,
                 "parley.cost_usd": None if cost_usd is None else float(cost_usd)}
        attributes: dict[str, Any] = {
            "parley.protocol": protocol, "parley.status": status,
            "parley.run_id": str(run_id or ""), "parley.calls": len(turns),
            **{name: value for name, value in given.items() if value is not None}}
        root = tracer.start_span(f"parley.run {protocol}", start_time=_ns(started),
                                 attributes=attributes)
        if status != "completed":
            root.set_status(Status(StatusCode.ERROR, status))
        context = trace.set_span_in_context(root)
        for turn in turns:
            _provider_name, model = _model(turn.model)
            span = tracer.start_span(f"chat {model}", context=context,
                                     start_time=_ns(turn.started_at),
                                     attributes=_call_attributes(protocol, turn, content))
            if turn.status != "ok":
                span.set_status(Status(StatusCode.ERROR, "degraded"))
            span.end(end_time=max(_ns(turn.finished_at) or 0, _ns(turn.started_at) or 0))
        root.end(end_time=max(_ns(finished) or 0, _ns(started) or 0))
        return True
    except Exception as exc:  # an exporter's or the SDK's fault: logged, never raised
        log.warning("run %s not exported to OpenTelemetry: %s", run_id, exc)
        return False
