"""engine.analysis.stats on cases worked by hand (the arithmetic is in each function's docstring)."""
import math

import pytest

from engine.analysis.stats import brier, ece, reliability_bins, sign_test, wilson_interval


def test_wilson_interval_8_of_10():
    # p = 0.8, z² = 3.8415: centre = (0.8 + 0.19207) / 1.38415 = 0.71680,
    # half = 1.96·√(0.016 + 0.0096037) / 1.38415 = 0.22656
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4)
    assert high == pytest.approx(0.9433, abs=1e-4)


def test_wilson_interval_edges():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(0.7225, abs=1e-4) and high == 1.0
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


CONF = [0.9, 0.9, 0.6, 0.6, 0.2]
OUT = [1, 0, 1, 1, 0]


def test_reliability_bins_small_table():
    bins = reliability_bins(CONF, OUT)
    assert [(b["bin"], b["count"]) for b in bins] == [(2, 1), (6, 2), (9, 2)]
    by = {b["bin"]: b for b in bins}
    assert by[9]["confidence"] == pytest.approx(0.9) and by[9]["accuracy"] == 0.5
    assert by[6]["accuracy"] == 1.0 and by[2]["accuracy"] == 0.0
    assert by[9]["low"] == pytest.approx(0.9) and by[9]["high"] == pytest.approx(1.0)


def test_bin_edges_land_in_the_upper_bin_and_one_is_in_the_last():
    bins = reliability_bins([0.3, 1.0, 0.0], [1, 1, 0])
    assert [b["bin"] for b in bins] == [0, 3, 9]


def test_ece_and_brier_small_table():
    # gaps: bin 0.9 |0.5 − 0.9| = 0.4 (2 runs), bin 0.6 |1 − 0.6| = 0.4 (2), bin 0.2 0.2 (1)
    assert ece(CONF, OUT) == pytest.approx((2 * 0.4 + 2 * 0.4 + 0.2) / 5)  # 0.36
    # (0.1² + 0.9² + 0.4² + 0.4² + 0.2²) / 5
    assert brier(CONF, OUT) == pytest.approx(1.18 / 5)  # 0.236


def test_perfect_and_empty_calibration():
    assert ece([1.0, 0.0], [True, False]) == 0.0
    assert brier([1.0, 0.0], [True, False]) == 0.0
    assert brier([0.5] * 4, [1, 0, 1, 0]) == pytest.approx(0.25)
    assert math.isnan(ece([], [])) and math.isnan(brier([], []))
    with pytest.raises(ValueError):
        brier([1.2], [1])
    with pytest.raises(ValueError):
        ece([0.5], [1, 0])


@pytest.mark.parametrize("wins, losses, p", [
    (9, 1, 0.021484375),    # 2 · (1 + 10) / 1024
    (1, 9, 0.021484375),
    (10, 0, 0.001953125),   # 2 / 1024
    (5, 5, 1.0),
    (6, 0, 0.03125),        # 2 / 64
    (7, 3, 0.34375),        # 2 · (1 + 10 + 45 + 120) / 1024
    (0, 0, 1.0),
])
def test_sign_test_known_counts(wins, losses, p):
    assert sign_test(wins, losses) == pytest.approx(p, abs=1e-15)


def test_sign_test_on_uneven_counts_and_refusal_of_negative_ones():
    # 2 and 12: 2 · (1 + 14 + 91) / 16384
    assert sign_test(2, 12) == pytest.approx(2 * 106 / 16384)
    with pytest.raises(ValueError):
        sign_test(-1, 2)
