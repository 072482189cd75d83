"""The SNIA steady-state rule (ssdtwin.pts.steady): hand cases and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ssdtwin.pts import steady as ss

ROUNDS = [1, 2, 3, 4, 5]
positive = st.floats(min_value=1e-3, max_value=1e9, allow_nan=False, allow_infinity=False)


def test_flat_window_is_steady() -> None:
    c = ss.check_window(ROUNDS, [100.0] * 5)
    assert c.steady and c.data_excursion == 0 and abs(c.slope) < 1e-9 and c.avg == 100


def test_data_excursion_limit_is_20_percent_of_the_average() -> None:
    # avg 100, range 20: exactly at the limit (steady); range 21: outside.
    assert ss.check_window(ROUNDS, [90, 110, 100, 100, 100]).steady
    assert not ss.check_window(ROUNDS, [89.5, 110.5, 100, 100, 100]).steady


def test_slope_excursion_limit_is_10_percent_of_the_average() -> None:
    # A straight line rising 2.5 per round: range 10 (< 20 % of 100) and rise 4 x 2.5 = 10 = limit.
    c = ss.check_window(ROUNDS, [95, 97.5, 100, 102.5, 105])
    assert c.steady and c.slope == pytest.approx(2.5) and c.slope_excursion == pytest.approx(10)
    c = ss.check_window(ROUNDS, [94.5, 97.25, 100, 102.75, 105.5])  # rise 11 > 10, range 11 < 20
    assert not c.steady and c.data_excursion < c.data_limit and c.slope_excursion > c.slope_limit


def test_cloudharmony_reading_range_inside_slope_outside() -> None:
    # The range passes, the fitted line does not: the rule needs both.
    c = ss.check_window([10, 11, 12, 13, 14], [92, 96, 100, 104, 108])
    assert c.data_excursion == 16 and c.slope_excursion == pytest.approx(16) and not c.steady


def test_zero_or_negative_average_is_never_steady() -> None:
    assert not ss.check_window(ROUNDS, [0, 0, 0, 0, 0]).steady
    assert not ss.check_window(ROUNDS, [float("nan"), 1, 1, 1, 1]).steady


def test_evaluate_needs_five_rounds_and_min_rounds() -> None:
    v = [ss.Variable("IOPS", "e", "iops", "IOPS")]
    four = [[(r, 100.0) for r in range(1, 5)]]
    assert ss.evaluate(v, four)["steady"] is False
    five = [[(r, 100.0) for r in range(1, 6)]]
    doc = ss.evaluate(v, five)
    assert doc["steady"] and doc["steady_round"] == 5 and doc["window"] == [1, 5]
    assert ss.evaluate(v, five, min_rounds=7)["steady"] is False


def test_not_steady_at_max_rounds_is_reported_with_the_last_window() -> None:
    # A drive that keeps slowing: 25 rounds, each 3 % below the last.
    series = [[(r, 1000.0 * 0.97**r) for r in range(1, 26)]]
    doc = ss.evaluate([ss.Variable("IOPS", "e", "iops", "IOPS")], series, 5, 25)
    assert doc["steady"] is False and doc["steady_round"] is None and doc["window"] == [21, 25]
    var = doc["variables"][0]
    assert var["window"] == [21, 25] and var["steady"] is False and var["slope_excursion"] > var["slope_limit"]
    assert ss.is_done(doc, 25) and not ss.is_done(doc, 24)


def test_every_variable_must_be_steady() -> None:
    vs = [ss.Variable("a", "a", "iops", "IOPS"), ss.Variable("b", "b", "iops", "IOPS")]
    flat = [(r, 50.0) for r in range(1, 6)]
    wild = [(r, 50.0 * (1 + (r % 2))) for r in range(1, 6)]
    doc = ss.evaluate(vs, [flat, wild])
    assert not doc["steady"] and [v["steady"] for v in doc["variables"]] == [True, False]


@given(st.lists(positive, min_size=5, max_size=5), st.floats(min_value=1e-3, max_value=1e3), st.integers(0, 10_000))
def test_verdict_ignores_units_and_round_numbering(values: list[float], scale: float, first: int) -> None:
    """Scaling the values (IOPS or MB/s, ns or us) or renumbering the rounds changes nothing
    (up to float rounding right at a limit)."""
    a = ss.check_window(ROUNDS, values)
    b = ss.check_window([first + r for r in ROUNDS], [v * scale for v in values])
    margin = min(abs(a.data_excursion - a.data_limit), abs(a.slope_excursion - a.slope_limit)) / a.avg
    if margin > 1e-9:
        assert a.steady == b.steady


@given(st.lists(positive, min_size=5, max_size=5))
def test_verdict_is_the_two_inequalities(values: list[float]) -> None:
    c = ss.check_window(ROUNDS, values)
    avg = sum(values) / 5
    mean_r = 3.0
    slope = sum((r - mean_r) * (v - avg) for r, v in zip(ROUNDS, values)) / 10.0
    expect = max(values) - min(values) <= 0.2 * avg and abs(slope) * 4 <= 0.1 * avg
    near = min(abs(max(values) - min(values) - 0.2 * avg), abs(abs(slope) * 4 - 0.1 * avg)) / avg
    if near > 1e-9:
        assert c.steady == expect
    assert c.slope == pytest.approx(slope, rel=1e-9, abs=1e-9 * avg)


@given(positive, st.floats(min_value=-0.2, max_value=0.2))
def test_a_straight_line_is_steady_iff_its_rise_is_within_10_percent(base: float, rel_slope: float) -> None:
    values = [base * (1 + rel_slope * (r - 3)) for r in ROUNDS]
    if min(values) <= 0:
        return
    c = ss.check_window(ROUNDS, values)
    rise = abs(rel_slope) * 4  # relative to the average (= base)
    if abs(rise - 0.1) > 1e-9:
        assert c.steady == (rise <= 0.1)


@given(st.lists(positive, min_size=5, max_size=40))
def test_last_window_is_the_last_five_rounds(values: list[float]) -> None:
    series = list(enumerate(values, 1))
    c = ss.last_window(series)
    assert c is not None
    assert c.rounds == [r for r, _ in series[-5:]] and c.values == values[-5:]
    assert math.isclose(c.avg, sum(values[-5:]) / 5, rel_tol=1e-12)
