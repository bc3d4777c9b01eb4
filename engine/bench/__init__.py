"""Benchmarks (`python -m engine bench`): throughput, panels, the dashboard at 10,000 runs
(or the `--sizes` asked for), experiments and reliability drills."""
from engine.bench.table import Row, collect, format_table, to_json

__all__ = ["Row", "collect", "format_table", "to_json"]
