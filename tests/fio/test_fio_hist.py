"""fio's log-linear latency buckets and percentiles (stat.c plat_* / calc_clat_percentiles)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import DATA, REFERENCE
from ssdtwin.fio.hist import (
    PLAT_NR,
    dense,
    index_bounds,
    index_to_value,
    latency_bucket,
    percentiles,
    sparse,
    value_to_index,
)

# Derived by hand from stat.c: below 128 ns a bucket per ns; then 64 buckets per power of
# two, reporting the midpoint.
KNOWN = [
    (0, 0, 0),
    (1, 1, 1),
    (127, 127, 127),
    (128, 128, 129),  # msb 7: error_bits 1, bucket [128, 129], midpoint 129
    (129, 128, 129),
    (255, 191, 255),  # last bucket of the 128..255 group: [254, 255]
    (256, 192, 258),  # msb 8: buckets of 4 -> [256, 259], midpoint 258
    (88064, 726, 88576),  # fio-sample.json's read p1 value 88576 is bucket 726's midpoint
    (1 << 20, 960, (1 << 20) + (1 << 13)),
]


@pytest.mark.parametrize("value,index,mid", KNOWN)
def test_known_buckets(value: int, index: int, mid: int) -> None:
    assert value_to_index(value) == index
    assert index_to_value(index) == mid


def test_last_bucket_takes_everything_above() -> None:
    assert PLAT_NR == 1856
    assert value_to_index(1 << 34) == PLAT_NR - 1
    assert value_to_index(10**15) == PLAT_NR - 1
    assert index_to_value(PLAT_NR - 1) == (1 << 33) + 127 * (1 << 26)


def test_every_index_round_trips() -> None:
    previous = -1
    for i in range(PLAT_NR):
        v = index_to_value(i)
        assert value_to_index(v) == i
        lo, hi = index_bounds(i)
        assert lo <= v <= hi
        assert lo == previous + 1  # buckets tile the line without gaps
        previous = hi


@given(st.integers(min_value=0, max_value=(1 << 34) - 1))
def test_value_round_trip_within_1_128(value: int) -> None:
    index = value_to_index(value)
    lo, hi = index_bounds(index)
    assert lo <= value <= hi
    reported = index_to_value(index)
    assert abs(reported - value) * 128 <= max(value, 1)


@given(st.integers(min_value=0, max_value=1 << 40), st.integers(min_value=0, max_value=1 << 40))
def test_index_is_monotonic(a: int, b: int) -> None:
    if a <= b:
        assert value_to_index(a) <= value_to_index(b)
    else:
        assert value_to_index(a) >= value_to_index(b)


def test_fio_sample_percentiles_are_bucket_midpoints() -> None:
    doc = json.loads((REFERENCE / "fio-sample.json").read_text())
    checked = 0
    for job in doc["jobs"]:
        for ddir in ("read", "write", "trim"):
            for value in job[ddir]["clat_ns"].get("percentile", {}).values():
                assert index_to_value(value_to_index(value)) == value
                checked += 1
    assert checked == 4 * 17  # read+write of job 1, write of jobs 2 and 3


@pytest.mark.parametrize("name", ["r1", "r2"])
def test_percentiles_from_real_bins_match_fio(name: str) -> None:
    # json+ gives fio's histogram (bins) and its percentiles for the same samples.
    doc = json.loads((DATA / "real" / f"{name}.jsonplus").read_text())
    checked = 0
    for job in doc["jobs"]:
        for ddir in ("read", "write"):
            for lat in ("clat_ns", "lat_ns"):
                obj = job[ddir][lat]
                if "bins" not in obj:
                    continue
                hist = dense((value_to_index(int(v)), c) for v, c in obj["bins"].items())
                plist = [float(p) for p in obj["percentile"]]
                ours = percentiles(hist, obj["N"], plist)
                assert [(f"{p:f}", v) for p, v in ours] == list(obj["percentile"].items())
                checked += 1
    assert checked >= 3


def test_percentiles_on_exact_buckets() -> None:
    hist = [0] * PLAT_NR
    for v in range(1, 101):
        hist[v] = 1
    got = dict(percentiles(hist, 100, [1, 50, 99, 99.99, 100]))
    assert got == {1.0: 1, 50.0: 50, 99.0: 99, 99.99: 100, 100.0: 100}


def test_percentile_threshold_is_exact_not_double() -> None:
    # 99.9 is slightly above 99.9 in binary, so with N=1000 the threshold is just above
    # 999 samples: fio (long double) needs the 1000th sample.
    hist = [0] * PLAT_NR
    hist[10] = 999
    hist[20] = 1
    assert percentiles(hist, 1000, [99.9]) == [(99.9, 20)]


def test_percentiles_sort_and_stop_at_zero() -> None:
    hist = [0] * PLAT_NR
    hist[5] = 10
    assert percentiles(hist, 10, [99, 50, 0, 10]) == [(50.0, 5), (99.0, 5)]
    assert percentiles(hist, 0, [50]) == []


def test_sparse_dense() -> None:
    h = dense([[3, 2], [1000, 5]])
    assert sparse(h) == [[3, 2], [1000, 5]]
    assert dense({3: 2}) == dense([[3, 2]])
    with pytest.raises(ValueError):
        dense([[PLAT_NR, 1]])


@pytest.mark.parametrize(
    "clat,table,slot",
    [
        (0, "ns", 0),
        (1, "ns", 0),
        (2, "ns", 1),
        (9, "ns", 2),
        (999, "ns", 9),
        (1000, "us", 0),
        (1999, "us", 0),
        (2000, "us", 1),
        (999_999, "us", 9),
        (1_000_000, "ms", 0),
        (1_999_999_999, "ms", 10),
        (2_000_000_000, "ms", 11),
    ],
)
def test_latency_table_slots(clat: int, table: str, slot: int) -> None:
    assert latency_bucket(clat) == (table, slot)
