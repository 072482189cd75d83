"""fio's numbers as the core has them (crates/ssdtwin-core/src/engine/fio_facts.rs), read once
through the binding: the latency histogram's buckets, the latency tables, the queue-depth
bins, the direction order and the packed record layouts. Python keeps no copy of its own;
the fio modules read these.
"""

from __future__ import annotations

from bisect import bisect_right

from .. import _core
from .contract import FioFacts

FACTS: FioFacts = _core.fio_facts()

# The direction names in index order: a record's or a log row's ddir indexes them.
DDIR_NAMES = FACTS["ddirs"]


def first_draw(seed: int, use64: bool) -> tuple[int, int]:
    """fio's first draw from a freshly seeded Tausworthe stream and the stream's maximum
    (taus88, or taus258 for tausworthe64; workload/fiorand.rs ``first_draw``)."""
    return _core.fio_first_draw(seed, use64)


def splitmix(x: int) -> int:
    """One SplitMix64 step (util.rs ``splitmix``)."""
    return _core.splitmix(x)


def latency_slot(clat_ns: int) -> tuple[str, int]:
    """The table (``"ns"``, ``"us"``, ``"ms"``) and slot of ``FACTS["latency_tables"]`` a
    completion latency counts in (engine/fio/report.rs ``latency_slot``)."""
    return _core.fio_latency_slot(clat_ns)


_IODEPTH_BIN_LOW = FACTS["iodepth_bin_low"]
# fio's labels of the iodepth_level bins: 1, 2, 4 ... >=64.
IODEPTH_LABELS = tuple(str(low) for low in _IODEPTH_BIN_LOW[:-1]) + (f">={_IODEPTH_BIN_LOW[-1]}",)


def iodepth_bin(depth: int) -> int:
    """The ``iodepth_level`` bin a queue depth counts in (a depth of 0 counts as 1)."""
    return bisect_right(_IODEPTH_BIN_LOW, max(depth, 1)) - 1
