"""fio's log-linear latency histogram (stat.h FIO_IO_U_PLAT_*), both directions, and its
completion-latency tables.

The buckets are the core's (stats/mod.rs, handed over as ``FACTS["histogram"]``): a value
``v`` (ns) below 128 has its own bucket; above, a bucket keeps the highest set bit and the
next 6 bits, and reports the midpoint of its range, so a reported value is within 1/128 of
every value in its bucket. 29 groups of 64 give 1856 buckets; values above 2**34 ns (~17 s)
all land in the last one (docs/fio.md §5). Percentiles are the value of the first bucket
where the running count reaches p/100 * N (stat.c calc_clat_percentiles); JSON and normal
output, the ``latency_*`` tables' cousins and the histogram log all use these buckets.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Union

from .facts import FACTS, latency_slot

__all__ = [
    "PLAT_NR",
    "value_to_index",
    "index_to_value",
    "index_bounds",
    "dense",
    "sparse",
    "percentiles",
    "DEFAULT_PERCENTILES",
    "latency_bucket",
    "LAT_LABELS",
    "LAT_LABELS_MS",
]

_H = FACTS["histogram"]
_LOW = _H["bucket_low_ns"]
_HIGH = _H["bucket_high_ns"]
_VALUE = _H["bucket_value_ns"]
PLAT_NR = len(_VALUE)  # 1856

DEFAULT_PERCENTILES = (1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99)

Hist = Union[Sequence[int], Mapping[int, int], Iterable[tuple[int, int]]]


def value_to_index(value: int) -> int:
    """Bucket index of a latency in ns (fio's ``plat_val_to_idx``)."""
    if value < 0:
        raise ValueError("latency must be >= 0")
    return bisect_right(_LOW, value) - 1


def _check_index(index: int) -> None:
    if not 0 <= index < PLAT_NR:
        raise ValueError(f"bucket index {index} out of range 0..{PLAT_NR - 1}")


def index_to_value(index: int) -> int:
    """The value fio reports for a bucket (``plat_idx_to_val``): its midpoint, an integer
    for every bucket (fio's double arithmetic loses nothing)."""
    _check_index(index)
    return _VALUE[index]


def index_bounds(index: int) -> tuple[int, int]:
    """The smallest and largest value (inclusive) that map to ``index``.

    The last bucket also takes every larger value; its bound is its nominal range.
    """
    _check_index(index)
    return _LOW[index], _HIGH[index]


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
# io_u.c io_u_mark_latency(): completion latency (clat, not total lat) is counted in the
# core's tables (engine/fio/report.rs: ns below 1 us, us below 1 ms, ms above). The label is the
# exclusive upper edge of the slot: "2" holds 0-1, "4" holds 2-3 ... "1000" holds 750-999;
# the ms table adds "2000" (1000-1999) and ">=2000".

_EDGES = FACTS["latency_tables"]["edges"]
_EDGES_MS = FACTS["latency_tables"]["ms_edges"]
LAT_LABELS = tuple(str(e) for e in _EDGES)
LAT_LABELS_MS = tuple(str(e) for e in _EDGES_MS) + (f">={_EDGES_MS[-1]}",)


def latency_bucket(clat_ns: int) -> tuple[str, int]:
    """Which table (``"ns"``, ``"us"``, ``"ms"``) and slot one completion latency counts in
    (engine/fio/report.rs ``latency_slot``)."""
    return latency_slot(clat_ns)
