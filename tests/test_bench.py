"""The benchmark table reads protocols from the registry; figures are reported, never asserted."""
from __future__ import annotations

import math

from engine.bench.table import collect, format_table
from engine.protocols import REGISTRY, estimate


def test_critical_path_rows_cover_every_protocol_whose_calls_overlap():
    rows = collect(quick=True, only=["critical-path"])
    overlapping = [name for name in REGISTRY
                   if estimate({"protocol": name})["waves"] < estimate({"protocol": name})["calls"]]
    assert overlapping, "some protocol in the registry runs calls at once"
    for name in overlapping:
        mine = [r for r in rows if r["name"].startswith(f"{name},") or
                r["name"].startswith(f"{name} ")]
        assert len(mine) == 3, name
        assert all(isinstance(r["value"], float) and math.isfinite(r["value"]) and r["value"] > 0
                   for r in mine)
    # A protocol that makes one call after another has nothing to overlap and no row.
    serial = [name for name in REGISTRY if name not in overlapping]
    assert not [r for r in rows if r["name"].split(",")[0].split(" ")[0] in serial]
    assert "critical path" in format_table(rows)


def test_waves_default_to_the_calls_when_a_protocol_declares_none():
    for spec in REGISTRY.values():
        cost = estimate({"protocol": spec.name})
        assert 1 <= cost["waves"] <= cost["calls"]
        if spec.estimate_waves is None:
            assert cost["waves"] == cost["calls"]
