"""The SNIA PTS Enterprise tests as lists of fio elements (docs/pts.md, The tests).

Every element is one fio job: the text saved in the report folder and run on the twin
(``ssdtwin fio``) or on a real target (fio) is the same, except for the target lines
(``PtsTarget.target_lines()``) that aim it at the device. Options follow the SNIA PTS
implementations (docs/sources.md), the ones every one of them passes: ``ioengine=libaio``
(asynchronous, so ``iodepth`` is the queue depth; a target may override it), ``direct=1``,
``norandommap=1``, ``randrepeat=0``, ``random_generator=tausworthe64``,
``refill_buffers=1`` (the random data pattern), ``group_reporting=1``, ``time_based=1``
with the round length as ``runtime``, ``size=100%`` (ActiveRange 100 %).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Optional

from .target import PtsError

# Test ids, in the order a full suite runs them (and the report shows them).
TEST_IDS = ("iops", "tp", "lat", "wsat", "hir", "curve", "xsr", "cbw", "dirth")
TITLES = {
    "iops": "IOPS",
    "tp": "Throughput",
    "lat": "Latency",
    "wsat": "Write Saturation (WSAT)",
    "hir": "Host Idle Recovery (HIR)",
    "curve": "Latency vs IOPS",
    "xsr": "Cross Stimulus Recovery (XSR)",
    "cbw": "Composite Block Size Workload (CBW)",
    "dirth": "Demand Intensity / Response Time Histogram (DIRTH)",
}

KIB = 1024
IOPS_BS = (1024 * KIB, 128 * KIB, 64 * KIB, 32 * KIB, 16 * KIB, 8 * KIB, 4 * KIB, 512)
MIXES = (100, 95, 65, 50, 35, 5, 0)  # read %, the R/W mixes "100/0" .. "0/100"
TP_BS = (128 * KIB, 1024 * KIB)
LAT_BS = (8 * KIB, 4 * KIB, 512)
LAT_MIXES = (100, 65, 0)
HIR_WAITS_S = (5, 10, 15, 25, 50)
HIR_BURST_S = 5.0
HIR_REPS = 360
CURVE_JOBS = (1, 2, 4, 8, 16)
CURVE_QD = (1, 2, 4, 8, 16, 32)
CURVE_READ_PCT = 70
# XSR (PTS test 6): three access groups at TC1/QD32, durations of the full drive
# (SEQ 1024 KiB W 8 h, RND 8 KiB W 6 h, SEQ 1024 KiB W 8 h: ADATA's PTS 2.0 implementation).
XSR_HOURS = (8.0, 6.0, 8.0)
# CBW (PTS test 7): the composite block-size access probabilities and LBA zones of PTS 2.0,
# read 40 % in the demand-intensity matrix (SNIA PTS implementations, docs/sources.md).
CBW_BSSPLIT = "512/4:1k/1:1536/1:2k/1:2560/1:3k/1:3584/1:4k/67:8k/10:16k/7:32k/3:64k/3"
CBW_ZONES = "zoned:50/5:30/15:20/80"
CBW_READ_PCT = 40
# The demand-intensity matrix of CBW and DIRTH: TC (outer) x QD (inner), high to low.
DI_TC = (32, 16, 8, 6, 4, 2, 1)
DI_QD = (32, 16, 8, 6, 4, 2, 1)
DI_PC_INTERVALS = 30  # one PC round: 30 intervals, the first one's IOPS tracked
DI_PREWRITE_S = 300.0  # TC32/QD32 100 % W before every matrix round (5 minutes)
DI_RTH_PREWRITE_S = 3600.0  # 100 % W at the point's TC/QD before its histogram (60 minutes)
DI_RTH_S = 600.0  # the histogram's measured run (10 minutes)
DI_ART_LIMIT_US = 5000.0  # Max IOPS point: the highest IOPS with a mean response time below 5 ms
DIRTH_BS = 4 * KIB
DIRTH_READ_PCT = 65

# Default thread count / queue depth per test (Enterprise; SNIA PTS 2.0.2 and its implementations, docs/sources.md).
# XSR runs at TC1/QD32; CBW and DIRTH precondition and pre-write at TC32/QD32.
TC_QD = {
    "iops": (4, 32),
    "tp": (1, 32),
    "lat": (1, 1),
    "wsat": (4, 32),
    "hir": (4, 32),
    "curve": (16, 32),
    "xsr": (1, 32),
    "cbw": (32, 32),
    "dirth": (32, 32),
}


def bs_label(bs_bytes: int) -> str:
    """fio's short size: 4k, 1m, 512 (bytes)."""
    for unit, n in (("m", 1 << 20), ("k", 1 << 10)):
        if bs_bytes % n == 0:
            return f"{bs_bytes // n}{unit}"
    return str(bs_bytes)


def bs_title(bs_bytes: int) -> str:
    """The report's size: 4KiB, 1024KiB, 0.5KiB (PTS tables use KiB throughout)."""
    kib = bs_bytes / KIB
    return f"{kib:g}KiB"


def mix_label(read_pct: int) -> str:
    return f"{read_pct}/{100 - read_pct}"


@dataclass(frozen=True)
class Element:
    """One fio job of a test: a stimulus run for one round (or segment)."""

    name: str  # file-name safe: rnd-4k-65_35, seq-128k-0_100, rnd-4k-70_30-j4-qd8
    rw: str  # randrw, read, write
    read_pct: int
    bs_bytes: int
    numjobs: int
    iodepth: int
    runtime_s: Optional[float]  # None: size-based (WIPC: loops over the range)
    loops: int = 1
    label: str = ""  # "RND 4KiB 65/35"
    bssplit: str = ""  # CBW: fio's bssplit instead of one bs (bs_bytes is then 0)
    distribution: str = ""  # CBW: fio's random_distribution (zoned access)

    def job_text(self, target_lines: str = "", title: str = "") -> str:
        """The fio job file: [global] with the PTS options and the target lines, then the job."""
        lines = [f"; ssdtwin PTS {title or 'element'}: {self.label} (docs/pts.md)", "[global]"]
        lines += ["ioengine=libaio", "direct=1", "size=100%", "refill_buffers=1", "group_reporting=1", "randrepeat=0"]
        if self.rw.startswith("rand"):
            lines += ["norandommap=1", "random_generator=tausworthe64"]
        if self.runtime_s is not None:
            lines += ["time_based=1", f"runtime={fio_seconds(self.runtime_s)}"]
        elif self.loops != 1:
            lines.append(f"loops={self.loops}")
        # The target's lines last: fio takes the last value of an option (ioengine=nbd wins).
        lines += [t for t in target_lines.strip().splitlines() if t.strip()]
        lines += ["", f"[{self.name}]", f"rw={self.rw}"]
        if self.rw == "randrw":
            lines.append(f"rwmixread={self.read_pct}")
        lines.append(f"bssplit={self.bssplit}" if self.bssplit else f"bs={bs_label(self.bs_bytes)}")
        if self.distribution:
            lines.append(f"random_distribution={self.distribution}")
        lines += [f"numjobs={self.numjobs}", f"iodepth={self.iodepth}"]
        return "\n".join(lines) + "\n"

    def with_runtime(self, runtime_s: float) -> Element:
        return replace(self, runtime_s=runtime_s)


def _fio_size(text: str) -> int:
    """A bssplit size: 512, 1536, 4k, 64k, 1m (bytes)."""
    mult = {"k": KIB, "m": KIB * KIB}.get(text[-1:].lower(), 1)
    return int(text[:-1] if mult > 1 else text) * mult


def sub_iu_writes(el: Element, iu_bytes: int) -> str:
    """The writes of ``el`` that are not whole indirection units of ``iu_bytes`` (a drive
    that maps IUs read-modify-writes each IU such a write touches), as the report names
    them: "4KiB", "composite (0.5KiB to 64KiB, on 0.5KiB boundaries)"; "" when the
    element only reads, writes sequentially (back-to-back blocks merge into whole IUs in
    the write buffer: docs/models.md §2) or every write is whole IUs. fio places random
    blocks on multiples of the block size (of the smallest size, with bssplit)."""
    if el.read_pct >= 100 or iu_bytes <= 0 or not el.rw.startswith("rand"):
        return ""
    if el.bssplit:
        sizes = [_fio_size(part.split("/")[0]) for part in el.bssplit.split(":")]
        if all(b % iu_bytes == 0 for b in sizes):
            return ""
        lo, hi = min(sizes), max(sizes)
        return f"composite ({bs_title(lo)} to {bs_title(hi)}, on {bs_title(lo)} boundaries)"
    return bs_title(el.bs_bytes) if el.bs_bytes % iu_bytes else ""


def fio_seconds(seconds: float) -> str:
    """A time for fio: whole seconds plain, otherwise milliseconds (fio's ``ms`` suffix)."""
    if float(seconds).is_integer():
        return str(int(seconds))
    return f"{round(seconds * 1000)}ms"


def rnd(bs_bytes: int, read_pct: int, numjobs: int, iodepth: int, runtime_s: float, suffix: str = "") -> Element:
    """A random element: rw=randrw with rwmixread (100 and 0 too, as cloudharmony does)."""
    name = f"rnd-{bs_label(bs_bytes)}-{read_pct}_{100 - read_pct}{suffix}"
    label = f"RND {bs_title(bs_bytes)} {mix_label(read_pct)}"
    return Element(name, "randrw", read_pct, bs_bytes, numjobs, iodepth, runtime_s, label=label)


def seq(bs_bytes: int, read_pct: int, numjobs: int, iodepth: int, runtime_s: float) -> Element:
    """A sequential 100 % read or 100 % write element (Throughput)."""
    if read_pct not in (0, 100):
        raise ValueError("a sequential PTS element is 100 % read or 100 % write")
    rw = "read" if read_pct == 100 else "write"
    name = f"seq-{bs_label(bs_bytes)}-{read_pct}_{100 - read_pct}"
    label = f"SEQ {bs_title(bs_bytes)} {mix_label(read_pct)}"
    return Element(name, rw, read_pct, bs_bytes, numjobs, iodepth, runtime_s, label=label)


def wipc(bs_bytes: int = 128 * KIB, loops: int = 2, iodepth: int = 32) -> Element:
    """Workload-independent preconditioning: SEQ writes over the whole range, ``loops`` times."""
    name = "wipc" if bs_bytes == 128 * KIB else f"wipc-{bs_label(bs_bytes)}"
    label = f"WIPC SEQ {bs_title(bs_bytes)} W, {loops}x capacity"
    return Element(name, "write", 0, bs_bytes, 1, iodepth, None, loops=loops, label=label)


@dataclass(frozen=True)
class Tracking:
    """A tracking variable: one column of one element's rows (steady.json)."""

    name: str
    element: str
    column: str
    unit: str


@dataclass(frozen=True)
class Pass:
    """One preconditioned run of rounds: purge, WIPC (optional), then rounds of ``elements``
    until every ``tracking`` variable is steady. Throughput has two passes (128 KiB, 1 MiB)."""

    name: str
    wipc: Optional[Element]
    elements: tuple[Element, ...]
    tracking: tuple[Tracking, ...]


def iops_pass(bs_list: Sequence[int], mixes: Sequence[int], tc: int, qd: int, round_s: float) -> Pass:
    """IOPS: the mixes (outer) x block sizes (inner); PTS 2.0's three tracking variables, those present."""
    elements = tuple(rnd(bs, m, tc, qd, round_s) for m in mixes for bs in bs_list)
    names = {e.name for e in elements}
    wanted = [
        (4 * KIB, 0, "RND 4KiB 100% W IOPS"),
        (64 * KIB, 65, "RND 64KiB 65:35 IOPS"),
        (1024 * KIB, 100, "RND 1024KiB 100% R IOPS"),
    ]
    tracking = [Tracking(t, rnd(bs, m, tc, qd, round_s).name, "iops", "IOPS") for bs, m, t in wanted]
    tracking = [t for t in tracking if t.element in names]
    if not tracking:  # a reduced matrix without any of them: track its first element
        e = elements[0]
        tracking = [Tracking(f"{e.label} IOPS", e.name, "iops", "IOPS")]
    return Pass("iops", wipc(), elements, tuple(tracking))


def tp_passes(bs_list: Sequence[int], tc: int, qd: int, round_s: float) -> list[Pass]:
    """Throughput: one pass per block size, each with its own purge and WIPC at that size."""
    out = []
    for bs in bs_list:
        els = (seq(bs, 100, tc, qd, round_s), seq(bs, 0, tc, qd, round_s))
        track = Tracking(f"SEQ {bs_title(bs)} 100% W MB/s", els[1].name, "write_bw_bytes_s", "B/s")
        out.append(Pass(f"tp-{bs_label(bs)}", wipc(bs), els, (track,)))
    return out


def lat_pass(bs_list: Sequence[int], mixes: Sequence[int], tc: int, qd: int, round_s: float) -> Pass:
    """Latency: block sizes x mixes at TC1/QD1; tracking the RND 4KiB 100% W mean latency."""
    elements = tuple(rnd(bs, m, tc, qd, round_s) for bs in bs_list for m in mixes)
    want = rnd(4 * KIB, 0, tc, qd, round_s).name
    el = next((e for e in elements if e.name == want), elements[0])
    track = Tracking(f"{el.label} mean latency", el.name, "lat_mean_us", "us")
    return Pass("lat", wipc(), elements, (track,))


def wsat_element(tc: int, qd: int, segment_s: float) -> Element:
    return rnd(4 * KIB, 0, tc, qd, segment_s)


def hir_element(tc: int, qd: int, seconds: float) -> Element:
    return rnd(4 * KIB, 0, tc, qd, seconds)


def curve_elements(jobs: Sequence[int], qds: Sequence[int], round_s: float) -> list[Element]:
    """Latency vs IOPS (the review's curves): 4 KiB 70/30 at every jobs x QD point."""
    return [rnd(4 * KIB, CURVE_READ_PCT, j, q, round_s, suffix=f"-j{j}-qd{q}") for j in jobs for q in qds]


def xsr_groups(tc: int, qd: int, segment_s: float) -> list[Element]:
    """XSR's access groups, in order: SEQ 1024 KiB W, RND 8 KiB W, SEQ 1024 KiB W."""
    seq_w = seq(1024 * KIB, 0, tc, qd, segment_s)
    return [seq_w, rnd(8 * KIB, 0, tc, qd, segment_s), seq_w]


@dataclass(frozen=True)
class DiWorkload:
    """The access pattern of a demand-intensity test: CBW's composite one, or DIRTH's
    single random block size; ``read_pct`` is the matrix's mix (preconditioning and
    pre-writes are 100 % writes of the same pattern)."""

    test: str  # cbw, dirth
    bs_bytes: int  # 0: bssplit
    read_pct: int
    bssplit: str = ""
    distribution: str = ""

    @property
    def title(self) -> str:
        return "CBW" if self.bssplit else f"RND {bs_title(self.bs_bytes)}"

    def element(self, read_pct: int, tc: int, qd: int, runtime_s: float, suffix: str) -> Element:
        """One fio job of the pattern: ``cbw-40_60-tc32-qd8`` or ``rnd-4k-65_35-tc32-qd8``."""
        if not self.bssplit:
            return rnd(self.bs_bytes, read_pct, tc, qd, runtime_s, suffix=f"-tc{tc}-qd{qd}{suffix}")
        name = f"cbw-{read_pct}_{100 - read_pct}-tc{tc}-qd{qd}{suffix}"
        label = f"CBW {mix_label(read_pct)} TC{tc}/QD{qd}"
        return Element(name, "randrw", read_pct, 0, tc, qd, runtime_s, label=label, bssplit=self.bssplit, distribution=self.distribution)


def cbw_workload() -> DiWorkload:
    return DiWorkload("cbw", 0, CBW_READ_PCT, CBW_BSSPLIT, CBW_ZONES)


def dirth_workload(bs_bytes: int, read_pct: int) -> DiWorkload:
    return DiWorkload("dirth", bs_bytes, read_pct)


def di_pc_pass(wl: DiWorkload, tc: int, qd: int, interval_s: float, intervals: int) -> Pass:
    """CBW/DIRTH preconditioning: rounds of ``intervals`` 100 % W intervals at TC/QD; the
    first interval's IOPS is the tracking variable (one value per round)."""
    els = tuple(wl.element(0, tc, qd, interval_s, f"-pc{n:02d}") for n in range(1, intervals + 1))
    track = Tracking(f"{wl.title} 100% W IOPS (preconditioning, TC{tc}/QD{qd})", els[0].name, "iops", "IOPS")
    return Pass(f"{wl.test}-pc", None, els, (track,))


def di_pass(wl: DiWorkload, tc: int, qd: int, prewrite_s: float, tcs: Sequence[int], qds: Sequence[int], round_s: float) -> Pass:
    """A demand-intensity round: a 100 % W pre-write at TC/QD, then the TC x QD matrix at
    the pattern's mix (TC outer, QD inner, high to low); tracking the highest point's IOPS."""
    pre = wl.element(0, tc, qd, prewrite_s, "-prewrite")
    grid = tuple(wl.element(wl.read_pct, t, q, round_s, "") for t in tcs for q in qds)
    top = next((e for e in grid if (e.numjobs, e.iodepth) == (max(tcs), max(qds))), grid[0])
    track = Tracking(f"{wl.title} {mix_label(wl.read_pct)} IOPS at TC{top.numjobs}/QD{top.iodepth}", top.name, "iops", "IOPS")
    return Pass(f"{wl.test}-di", None, (pre, *grid), (track,))


def parse_tests(text: str) -> list[str]:
    """``--tests iops,tp`` → ["iops", "tp"] (suite order kept as written; "all" = every test)."""
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    if not names:
        raise PtsError(f"--tests '{text}': name at least one of {', '.join(TEST_IDS)}")
    if names == ["all"]:
        return list(TEST_IDS)
    bad = [n for n in names if n not in TEST_IDS]
    if bad:
        raise PtsError(f"--tests: unknown test '{bad[0]}' (choose from {', '.join(TEST_IDS)}, or all)")
    seen: list[str] = []
    for n in names:
        if n not in seen:
            seen.append(n)
    return seen
