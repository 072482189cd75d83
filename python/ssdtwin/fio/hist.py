"""fio's log-linear latency histogram (stat.h FIO_IO_U_PLAT_*), both directions.

A value ``v`` (ns) below 128 has its own bucket. Above, with ``msb`` the index of the
highest set bit, the bucket keeps the msb and the next 6 bits::

    error_bits = msb - 6
    index      = (error_bits + 1) * 64 + ((v >> error_bits) & 63)      (capped at 1855)

and reports the midpoint of its range::

    value(index) = 2**(e + 6) + (index % 64 + 0.5) * 2**e,   e = index // 64 - 1

so a reported value is within 1/128 of every value in its bucket. 29 groups of 64 give
1856 buckets; values above 2**34 ns (~17 s) all land in the last one. Percentiles are
the value of the first bucket where the running count reaches p/100 * N
(stat.c calc_clat_percentiles); JSON and normal output, the ``latency_*`` tables'
cousins and the histogram log all use these buckets.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Union

__all__ = [
    "PLAT_BITS",
    "PLAT_VAL",
    "PLAT_GROUP_NR",
    "PLAT_NR",
    "value_to_index",
    "index_to_value",
    "index_bounds",
    "dense",
    "sparse",
    "percentiles",
    "DEFAULT_PERCENTILES",
    "latency_bucket",
    "latency_buckets_from_hist",
]

PLAT_BITS = 6
PLAT_VAL = 1 << PLAT_BITS
PLAT_GROUP_NR = 29
PLAT_NR = PLAT_GROUP_NR * PLAT_VAL  # 1856

DEFAULT_PERCENTILES = (1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99)

Hist = Union[Sequence[int], Mapping[int, int], Iterable[tuple[int, int]]]


def value_to_index(value: int) -> int:
    """Bucket index of a latency in ns (fio's ``plat_val_to_idx``)."""
    if value < 0:
        raise ValueError("latency must be >= 0")
    msb = value.bit_length() - 1 if value else 0
    if msb <= PLAT_BITS:
        return value
    error_bits = msb - PLAT_BITS
    base = (error_bits + 1) << PLAT_BITS
    offset = (PLAT_VAL - 1) & (value >> error_bits)
    return min(base + offset, PLAT_NR - 1)


def index_to_value(index: int) -> int:
    """The value fio reports for a bucket (``plat_idx_to_val``): its midpoint.

    For every bucket above 127 the midpoint is an integer, because ``(k + 0.5) * 2**e``
    with ``e >= 1`` is exact; fio's double arithmetic therefore loses nothing.
    """
    if not 0 <= index < PLAT_NR:
        raise ValueError(f"bucket index {index} out of range 0..{PLAT_NR - 1}")
    if index < (PLAT_VAL << 1):
        return index
    error_bits = (index >> PLAT_BITS) - 1
    base = 1 << (error_bits + PLAT_BITS)
    k = index % PLAT_VAL
    return base + (2 * k + 1) * (1 << (error_bits - 1))


def index_bounds(index: int) -> tuple[int, int]:
    """The smallest and largest value (inclusive) that map to ``index``.

    The last bucket also takes every larger value; its bound is its nominal range.
    """
    if not 0 <= index < PLAT_NR:
        raise ValueError(f"bucket index {index} out of range 0..{PLAT_NR - 1}")
    if index < (PLAT_VAL << 1):
        return index, index
    error_bits = (index >> PLAT_BITS) - 1
    lo = (1 << (error_bits + PLAT_BITS)) + (index % PLAT_VAL) * (1 << error_bits)
    return lo, lo + (1 << error_bits) - 1


def dense(hist: Hist) -> list[int]:
    """A histogram as a list of PLAT_NR counts, from a dense list, a dict or sparse pairs."""
    if isinstance(hist, Mapping):
        pairs: Iterable[tuple[int, int]] = hist.items()
    elif isinstance(hist, Sequence) and (len(hist) == 0 or isinstance(hist[0], int)):
        counts = [int(c) for c in hist]
        if len(counts) > PLAT_NR:
            raise ValueError(f"histogram has {len(counts)} buckets, more than {PLAT_NR}")
        return counts + [0] * (PLAT_NR - len(counts))
    else:
        pairs = hist  # type: ignore[assignment]
    out = [0] * PLAT_NR
    for index, count in pairs:
        index = int(index)
        if not 0 <= index < PLAT_NR:
            raise ValueError(f"bucket index {index} out of range 0..{PLAT_NR - 1}")
        if count < 0:
            raise ValueError("negative bucket count")
        out[index] += int(count)
    return out


def sparse(hist: Sequence[int]) -> list[list[int]]:
    """Nonzero buckets of a dense histogram as ``[index, count]`` pairs."""
    return [[i, c] for i, c in enumerate(hist) if c]


def percentiles(hist: Sequence[int], n: int, plist: Sequence[float]) -> list[tuple[float, int]]:
    """fio's percentiles of a dense histogram: ``[(p, value_ns), ...]`` sorted by p.

    ``n`` is the sample count fio divides by (the io_stat's N, normally the histogram
    total). A zero ends fio's list, as in fio. The comparison is done in exact rationals:
    fio uses long double, which agrees except for ties far below one sample.
    """
    plist_sorted = []
    for p in plist:
        if p == 0.0:
            break
        plist_sorted.append(float(p))
    plist_sorted.sort()
    if not plist_sorted or n <= 0:
        return []
    # running >= p*n/100 exactly, as integers: running >= ceil(p*n/100) (running is whole).
    thresholds = [math.ceil(Fraction(p) * n / 100) for p in plist_sorted]
    out: list[tuple[float, int]] = []
    running = 0
    j = 0
    for index, count in enumerate(hist):
        running += count
        while j < len(thresholds) and running >= thresholds[j]:
            out.append((plist_sorted[j], index_to_value(index)))
            j += 1
        if j == len(thresholds):
            break
    # fio logs "error calculating latency percentiles" and leaves the rest unset when the
    # histogram holds fewer samples than N; we report what was reached.
    return out


# --- the latency_ns / latency_us / latency_ms tables --------------------------------------
#
# io_u.c io_u_mark_latency(): completion latency (clat, not total lat) is counted in
# 10 ns buckets, 10 us buckets or 12 ms buckets. The label is the exclusive upper bound of
# the range: "2" holds 0-1, "4" holds 2-3, "10" holds 4-9 ... "1000" holds 750-999;
# the ms table adds "2000" (1000-1999) and ">=2000".

LAT_LABELS_NS = ("2", "4", "10", "20", "50", "100", "250", "500", "750", "1000")
LAT_LABELS_US = LAT_LABELS_NS
LAT_LABELS_MS = LAT_LABELS_NS + ("2000", ">=2000")
_LAT_EDGES = (2, 4, 10, 20, 50, 100, 250, 500, 750, 1000)


def _edge_index(value: int, edges: Sequence[int]) -> int:
    for i, edge in enumerate(edges):
        if value < edge:
            return i
    return len(edges)


def latency_bucket(clat_ns: int) -> tuple[str, int]:
    """Which table (``"ns"``, ``"us"``, ``"ms"``) and slot one completion latency counts in."""
    if clat_ns < 1000:
        return "ns", _edge_index(clat_ns, _LAT_EDGES)
    if clat_ns < 1_000_000:
        return "us", _edge_index(clat_ns // 1000, _LAT_EDGES)
    return "ms", min(_edge_index(clat_ns // 1_000_000, _LAT_EDGES + (2000,)), 11)


def latency_buckets_from_hist(hist: Sequence[int]) -> dict[str, list[int]]:
    """Approximate the latency tables from a clat histogram, counting each bucket at the
    value fio would report for it. Exact for buckets below 128 ns; elsewhere a bucket that
    straddles a table edge (750 ns, 10 us, 20 us ...) is counted on one side. The engine
    contract lets the engine send exact counts instead (docs/fio.md).
    """
    out = {"ns": [0] * 10, "us": [0] * 10, "ms": [0] * 12}
    for index, count in enumerate(hist):
        if count:
            table, slot = latency_bucket(index_to_value(index))
            out[table][slot] += count
    return out
