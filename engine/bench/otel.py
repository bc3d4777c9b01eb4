"""The cost of OpenTelemetry export: simulated runs with `OTEL_EXPORTER_OTLP_ENDPOINT` unset
(what every run pays: one lookup of the environment, no exporter imported) and with the
export on, to a receiver on loopback that accepts and discards each batch."""
from __future__ import annotations

import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from engine.bench.table import Row, fact, median_run_ms


def _config() -> dict[str, Any]:
    """The run measured: many seats answering together for two rounds (the registry's
    `crowd_by_rounds`, chosen by shape, not by name), on the simulated model."""
    from engine.bench.choice import crowd_by_rounds, default_config
    return {**default_config(crowd_by_rounds()), "options": {"rounds": 2}}


class _Discard(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def bench_otel(runs: int = 200) -> list[Row]:
    """Median wall time of a simulated society run (6 calls) with export off and on, and
    how many exporter modules the runs with it off imported."""
    from engine.llm import otel
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("OTEL_")}
    try:
        off = median_run_ms(_config(), runs)
        imported = sum(1 for m in sys.modules if m.startswith("opentelemetry.exporter"))
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Discard)
        thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        os.environ[otel.ENDPOINT_ENV] = f"http://127.0.0.1:{server.server_address[1]}"
        try:
            on = median_run_ms(_config(), runs)
            otel.flush()
        finally:
            server.shutdown()
            server.server_close()
            os.environ.pop(otel.ENDPOINT_ENV, None)
    finally:
        os.environ.update(saved)
    return [
        fact(f"simulated society run (6 calls), OpenTelemetry unset: median of {runs}",
             round(off, 2), "ms"),
        fact("exporter modules imported with the variable unset", imported, "", "0"),
        fact(f"the same run exported to a loopback OTLP/HTTP receiver: median of {runs}",
             round(on, 2), "ms"),
        fact("exported / unset", round(on / off, 3), "x"),
    ]
