"""The cost of OpenTelemetry export: simulated runs with `OTEL_EXPORTER_OTLP_ENDPOINT` unset
(what every run pays: one lookup of the environment, no exporter imported) and with the
export on, to a receiver on loopback (`engine.bench.http`'s server, a process of its own) that
accepts and discards each batch."""
from __future__ import annotations

import os
import sys
from typing import Any

from engine.bench.http import serving
from engine.bench.table import Row, fact, median_run_ms


def _config() -> dict[str, Any]:
    """The run measured: many seats answering together for two rounds (the registry's
    `crowd_by_rounds`, chosen by shape, not by name), on the simulated model."""
    from engine.bench.choice import crowd_by_rounds, default_config
    return {**default_config(crowd_by_rounds()), "options": {"rounds": 2}}


def bench_otel(runs: int = 200) -> list[Row]:
    """Median wall time of a simulated society run (6 calls) with export off and on, and
    how many exporter modules the runs with it off imported."""
    from engine.llm import otel
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("OTEL_")}
    try:
        off = median_run_ms(_config(), runs)
        imported = sum(1 for m in sys.modules if m.startswith("opentelemetry.exporter"))
        with serving() as (url, _):  # the bench's loopback server accepts each batch
            os.environ[otel.ENDPOINT_ENV] = url.removesuffix("/v1")
            on = median_run_ms(_config(), runs)
            otel.flush()
    finally:
        os.environ.pop(otel.ENDPOINT_ENV, None)
        os.environ.update(saved)
    return [
        fact(f"simulated society run (6 calls), OpenTelemetry unset: median of {runs}",
             round(off, 2), "ms"),
        fact("exporter modules imported with the variable unset", imported, "", "0"),
        fact(f"the same run exported to a loopback OTLP/HTTP receiver: median of {runs}",
             round(on, 2), "ms"),
        fact("exported / unset", round(on / off, 3), "x"),
    ]
