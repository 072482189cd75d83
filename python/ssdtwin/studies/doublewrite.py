"""The doublewrite study of the **Memblaze PBlaze5 namespaces talk** (docs/sources.md),
modelled: InnoDB's page flushes, doublewrite copies, redo appends and buffer-pool misses
(`jobs/innodb-doublewrite.fio`) on a PBlaze5 910 3.84 TB, in the talk's two placements and
a control:

* ``shared``: tablespaces, redo log and the doublewrite file on one 3.84 TB namespace;
* ``dram``: tablespaces and redo on a 3.80 TB NAND namespace, the doublewrite file on a 64 MB
  DRAM namespace (no NAND behind it: its writes are host writes and never NAND writes);
* ``nand`` (not in the talk): the same split with a 64 MB NAND namespace.

Each placement starts from the state the talk's drive was in: the file system discarded the
namespace (mkfs), the database load wrote its 3 TB of tablespaces sequentially, and the
benchmark then ran long enough for GC to reach its steady state (a warm-up run of the same
jobs, not measured). The figures are those of the measurement windows that follow: NAND
write amplification from the vendor log (NAND bytes / host bytes, host bytes including the
DRAM namespace's) and the data namespace's mean write latency. None of the talk's figures
sets a parameter; docs/models.md ("An InnoDB workload") derives every input.

Entry point: `doublewrite_study` (``ssdtwin reproduce pblaze5 --part doublewrite``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Callable, Optional

from .. import _core
from .. import waf as wafm
from ..core_types import WafMeasurement
from ..drive import Drive
from ..fio import parse_string

MODEL = "memblaze-pblaze5-910-3.84t"
JOB = "innodb-doublewrite.fio"

# The talk's layout (full-scale bytes, decimal as the talk gives them).
DATA_BYTES_FULL = 3_000_000_000_000  # TPC-C, 28,000 warehouses: "about 3 TB" of tablespaces
NAND_NS_TB_DRAM = 3.80  # the data namespace beside the DRAM namespace
DRAM_NS_BYTES = 64 << 20  # the talk's 64 MB DRAM namespace (the preset's DRAM budget)
REDO_BYTES = 96 << 20  # innodb_log_file_size 48 MiB x innodb_log_files_in_group 2 (MySQL 8.0 defaults)
DBLWR_FILE_BYTES = 16 * 120 * 16384  # Percona's parallel doublewrite file: 2 x 8 instances x 120 pages
PAGE_BYTES = 16384
FLOW_ROUND_IOS = 3840  # the user threads' share of one flow round (the job file's USER_FLOW)

# Simulated seconds at 1/64 scale; a drive 1/N of the full one runs its GC cycle N times
# faster, so the windows scale with 64/N (the same number of GC cycles at any scale).
WARMUP_S_AT_64 = 60.0
MEASURE_S_AT_64 = 90.0
WINDOWS = 9

PLACEMENTS = ("shared", "dram", "nand")  # nand: a control, not in the talk

# What the NAND namespace's LBAs beyond the database hold when the load starts. The talk does
# not say, and the two ends bracket it: "trimmed" (mkfs discarded the namespace and nothing
# else wrote it: the spare the database leaves is free NAND) and "written" (every LBA was
# written once before the load, e.g. by an earlier run on a file system without discard: the
# 0.8 TB the database does not use stays valid, cold data GC must carry).
DRIVE_STATES = ("trimmed", "written")

# Memblaze PBlaze5 namespaces talk (docs/sources.md): TPC-C on Percona Server 8.0.15 at 64 threads.
PUBLISHED: dict[str, dict[str, float]] = {
    "shared": {"waf": 2.478, "host_gb": 29_953, "nand_gb": 74_229, "data_write_lat_ms": 2.758},
    "dram": {"waf": 1.335, "host_gb": 39_114, "nand_gb": 52_220, "data_write_lat_ms": 1.306},
}
PUBLISHED_GAINS = {"read_iops": 0.38, "tpmc_64_threads": 0.355, "tpmc_4_threads": 0.138}


def job_text() -> str:
    """The shipped InnoDB job file (variables unfilled)."""
    return (resources.files("ssdtwin") / "jobs" / JOB).read_text()


@dataclass
class Layout:
    """Where the database's files sit, in bytes, on a drive of one scale."""

    data_bytes: int
    redo_offset: int
    dblwr_ns: int
    dblwr_offset: int

    def env(self, threads: int, runtime_ms: int) -> dict[str, str]:
        """The job file's variables (docs/models.md, "An InnoDB workload")."""
        if threads < 1 or FLOW_ROUND_IOS % threads:
            raise ValueError(f"threads {threads}: must divide {FLOW_ROUND_IOS} (fio's flow weights are whole numbers)")
        return {
            "DATA_SIZE": str(self.data_bytes),
            "REDO_OFFSET": str(self.redo_offset),
            "DBLWR_FILE": f"ns{self.dblwr_ns}",
            "DBLWR_OFFSET": str(self.dblwr_offset),
            "THREADS": str(threads),
            "USER_FLOW": str(FLOW_ROUND_IOS // threads),
            "RUNTIME": f"{runtime_ms}ms",
            "RAMP": "0",
        }


def create_dram_namespace(d: Drive, nbytes: int) -> int:
    """A DRAM namespace of `nbytes` (512 B blocks), attached; returns its NSID."""
    blocks = nbytes // 512
    nsid = d.nvme.create_ns(blocks, blocks, block_size=512, dram=True)
    d.nvme.attach_ns(nsid)
    return nsid


def full_fraction(d: Drive, full_bytes: float) -> float:
    """`full_bytes` of the full drive on this (scaled) one: TNVMCAP shrank by the scale."""
    full = int(_core.preset(MODEL)["capacity"]["tnvmcap_bytes"]["value"])
    return full_bytes * int(d.nvme.id_ctrl()["tnvmcap"]) / full


def carve(d: Drive, second: Optional[str]) -> Optional[int]:
    """The talk's namespaces with the nvme-cli sequence. `second` None: the factory
    namespace (3.84 TB) alone. "dram": a 3.80 TB NAND namespace and the 64 MB DRAM
    namespace. "nand": the same split with a 64 MB NAND namespace in place of the DRAM one
    (a control: the doublewrite file on a namespace of its own, still on NAND). Returns the
    second namespace's NSID."""
    if second is None:
        return None
    if second not in ("dram", "nand"):
        raise ValueError(f"second namespace '{second}': choose dram or nand")
    blocks = int(full_fraction(d, NAND_NS_TB_DRAM * 1e12)) // 4096 * 4096 // 512
    d.nvme.detach_ns(1)
    d.nvme.delete_ns(1)
    d.nvme.attach_ns(d.nvme.create_ns(blocks, blocks, block_size=512))
    if second == "dram":
        return create_dram_namespace(d, DRAM_NS_BYTES)
    b = DRAM_NS_BYTES // 512
    nsid = d.nvme.create_ns(b, b, block_size=512)
    d.nvme.attach_ns(nsid)
    return nsid


def build_drive(placement: str, scale: int, seed: int, state: str = "trimmed") -> tuple[Drive, Layout]:
    """The drive of one placement, its namespaces made with the nvme-cli sequence, and the
    database loaded (the load wrote the tablespaces in order) over a namespace in `state`
    (DRIVE_STATES)."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement '{placement}': choose {', '.join(PLACEMENTS)}")
    if state not in DRIVE_STATES:
        raise ValueError(f"drive state '{state}': choose {', '.join(DRIVE_STATES)}")
    d = Drive.in_memory(MODEL, scale=scale, seed=seed)
    # Full-drive amounts shrink with TNVMCAP (docs/models.md, "Scale").
    data = int(full_fraction(d, DATA_BYTES_FULL)) // PAGE_BYTES * PAGE_BYTES
    second = carve(d, None if placement == "shared" else placement)
    layout = Layout(data, data, 1, data + REDO_BYTES) if second is None else Layout(data, data, second, 0)
    if state == "written":
        d.precondition(1, "seq", 131072, loops=1.0, seed=seed)
    d.precondition(1, "seq", 131072, amount_bytes=data, seed=seed)
    return d, layout


@dataclass
class Window:
    """One measured run: vendor-log deltas and what the jobs saw."""

    sim_s: float
    host_bytes: int
    nand_bytes: int
    host_program_bytes: int  # NAND bytes programmed for host data (the rest is GC)
    ns_write_bytes: dict[int, int]  # host bytes written per namespace
    ns_write_lat_sum_ns: dict[int, int]
    ns_writes: dict[int, int]
    job_ios: dict[str, dict[str, int]]  # job -> {reads, writes, read_lat_sum_ns, write_lat_sum_ns}

    @property
    def waf(self) -> float:
        return self.nand_bytes / self.host_bytes if self.host_bytes else float("nan")


def run_window(d: Drive, layout: Layout, threads: int, runtime_ms: int, run_seed: int) -> Window:
    """Run the InnoDB jobs for `runtime_ms` of simulated time with fresh offsets."""
    run = parse_string(job_text(), name=JOB, env=layout.env(threads, runtime_ms), run_seed=run_seed)
    nss = {n.nsid: n for n in d.namespaces() if n.attached}
    specs = run.to_engine(
        nss[1].bytes,
        nss[1].lba_bytes,
        namespace_sizes={k: v.bytes for k, v in nss.items()},
        namespace_lba_bytes={k: v.lba_bytes for k, v in nss.items()},
    )
    v0 = d.vendor_log()
    out = d.run_fio(specs, 1, idle_gc=False)
    v1 = d.vendor_log()
    w = Window(
        sim_s=runtime_ms / 1e3,
        host_bytes=v1["host_write_bytes"] - v0["host_write_bytes"],
        nand_bytes=v1["nand_write_bytes"] - v0["nand_write_bytes"],
        host_program_bytes=v1["nand_write_host_bytes"] - v0["nand_write_host_bytes"],
        ns_write_bytes={},
        ns_write_lat_sum_ns={},
        ns_writes={},
        job_ios={},
    )
    for spec, clone, r in zip(specs, run.clones, out):
        ns = spec["namespace"] or 1
        w.ns_write_bytes[ns] = w.ns_write_bytes.get(ns, 0) + r["write"]["io_bytes"]
        w.ns_write_lat_sum_ns[ns] = w.ns_write_lat_sum_ns.get(ns, 0) + r["write"]["lat"]["sum_ns"]
        w.ns_writes[ns] = w.ns_writes.get(ns, 0) + r["write"]["lat"]["n"]
        j = w.job_ios.setdefault(clone.job.name, {"reads": 0, "writes": 0, "read_lat_sum_ns": 0, "write_lat_sum_ns": 0})
        j["reads"] += r["read"]["lat"]["n"]
        j["writes"] += r["write"]["lat"]["n"]
        j["read_lat_sum_ns"] += r["read"]["lat"]["sum_ns"]
        j["write_lat_sum_ns"] += r["write"]["lat"]["sum_ns"]
    return w


@dataclass
class Result:
    """One placement at one thread count: the measurement windows summed."""

    placement: str
    threads: int
    scale: int
    state: str = "trimmed"
    windows: list[Window] = field(default_factory=list)
    wall_s: float = 0.0
    # The measurement windows together as a WAF measurement (waf.py): basis, amount, verdict.
    measurement: Optional[WafMeasurement] = None

    def total(self, key: str) -> int:
        return sum(getattr(w, key) for w in self.windows)

    def ns_total(self, key: str, ns: int) -> int:
        return sum(getattr(w, key).get(ns, 0) for w in self.windows)

    def job_total(self, job: str, key: str) -> int:
        return sum(w.job_ios.get(job, {}).get(key, 0) for w in self.windows)

    def row(self) -> dict[str, Any]:
        sim_s = sum(w.sim_s for w in self.windows)
        host, nand = self.total("host_bytes"), self.total("nand_bytes")
        waf = nand / host
        pub = PUBLISHED.get(self.placement) if self.threads == 64 else None
        lat_ms = self.ns_total("ns_write_lat_sum_ns", 1) / self.ns_total("ns_writes", 1) / 1e6
        reads, writes = self.job_total("user", "reads"), self.job_total("user", "writes")
        return {
            "study": "doublewrite",
            "placement": self.placement,
            "threads": self.threads,
            "scale": self.scale,
            "drive_state": self.state,
            # The ratio over the measurement windows, compared with the talk's ratio over its
            # benchmark run; the waf_* keys say what the windows span and whether that is also
            # the drive's WAF (docs/models.md, "Measuring WAF").
            "waf": waf,
            "waf_published": pub["waf"] if pub else None,
            "waf_error": waf / pub["waf"] - 1 if pub else None,
            **wafm.keys(self.measurement),
            "waf_window_min": min(w.waf for w in self.windows),
            "waf_window_max": max(w.waf for w in self.windows),
            "host_bytes": host,
            "nand_bytes": nand,
            "host_program_bytes": self.total("host_program_bytes"),
            "second_ns_host_bytes": sum(self.ns_total("ns_write_bytes", ns) for ns in self._namespaces() if ns != 1),
            "data_write_lat_ms": lat_ms,
            "data_write_lat_published_ms": pub["data_write_lat_ms"] if pub else None,
            "page_write_lat_ms": self.job_total("user", "write_lat_sum_ns") / max(1, writes) / 1e6,
            "page_read_lat_ms": self.job_total("user", "read_lat_sum_ns") / max(1, reads) / 1e6,
            "read_iops": reads / sim_s,
            "page_write_iops": writes / sim_s,
            "simulated_s": sim_s,
            "wall_s": self.wall_s,
        }

    def _namespaces(self) -> set[int]:
        return {ns for w in self.windows for ns in w.ns_write_bytes}


def windows_ms(scale: int) -> tuple[int, int]:
    """(warm-up, one measurement window) in simulated ms for a 1/`scale` drive."""
    warm = WARMUP_S_AT_64 * 64 / scale
    each = MEASURE_S_AT_64 * 64 / scale / WINDOWS
    return int(round(warm * 1e3)), int(round(each * 1e3))


def run_placement(
    placement: str,
    scale: int = 64,
    seed: int = 1,
    threads: int = 64,
    warmup_ms: Optional[int] = None,
    window_ms: Optional[int] = None,
    state: str = "trimmed",
) -> Result:
    """Build, load, warm up and measure one placement."""
    warm, each = windows_ms(scale)
    warm = warm if warmup_ms is None else warmup_ms
    each = each if window_ms is None else window_ms
    t = time.perf_counter()
    d, layout = build_drive(placement, scale, seed, state)
    try:
        res = Result(placement, threads, scale, state)
        run_window(d, layout, threads, warm, run_seed=seed)
        v0 = d.vendor_log()
        for i in range(WINDOWS):
            res.windows.append(run_window(d, layout, threads, each, run_seed=seed + 1 + i))
        ns_bytes = sum(n.bytes for n in d.namespaces() if n.attached)
        res.measurement = wafm.measure(v0, d.vendor_log(), "timed", ns_bytes)
        d.check()
    finally:
        d.close()
    res.wall_s = time.perf_counter() - t
    return res


def doublewrite_study(
    scale: int = 64,
    seed: int = 1,
    threads: tuple[int, ...] = (64,),
    log: Callable[[str], None] = print,
    warmup_ms: Optional[int] = None,
    window_ms: Optional[int] = None,
    placements: tuple[str, ...] = ("shared", "dram"),
    states: tuple[str, ...] = ("trimmed",),
) -> list[dict[str, Any]]:
    """The placements at each drive state and thread count, beside the talk's figures (64
    threads). Rows: one per placement, state and thread count, then a ``gain`` row per state
    and thread count when both ``shared`` and ``dram`` ran."""
    rows: list[dict[str, Any]] = []
    for state in states:
        for n in threads:
            by = {}
            for p in placements:
                r = run_placement(p, scale, seed, n, warmup_ms, window_ms, state).row()
                by[p] = r
                rows.append(r)
                log(describe(r))
            if "shared" in by and "dram" in by:
                gain = gains(by["shared"], by["dram"])
                rows.append(gain)
                log(describe_gain(gain))
    return rows


def gains(shared: dict[str, Any], dram: dict[str, Any]) -> dict[str, Any]:
    """What moving the doublewrite file to DRAM changes, beside the talk's figures."""
    n = shared["threads"]
    return {
        "study": "doublewrite",
        "placement": "gain",
        "threads": n,
        "drive_state": shared["drive_state"],
        "read_iops_gain": dram["read_iops"] / shared["read_iops"] - 1,
        "read_iops_gain_published": PUBLISHED_GAINS["read_iops"] if n == 64 else None,
        "tpmc_gain_published": PUBLISHED_GAINS.get(f"tpmc_{n}_threads"),
        "waf_ratio": shared["waf"] / dram["waf"],
        "waf_ratio_published": PUBLISHED["shared"]["waf"] / PUBLISHED["dram"]["waf"],
        "data_write_lat_ratio": shared["data_write_lat_ms"] / dram["data_write_lat_ms"],
        "data_write_lat_ratio_published": PUBLISHED["shared"]["data_write_lat_ms"] / PUBLISHED["dram"]["data_write_lat_ms"],
    }


def _vs(value: float, published: Optional[float], fmt: str) -> str:
    if published is None:
        return format(value, fmt)
    return f"{format(value, fmt)} (published {format(published, fmt)}, {value / published - 1:+.1%})"


def describe(r: dict[str, Any]) -> str:
    return (
        f"{r['placement']:<6} {r['threads']:>2} threads, {r['drive_state']:<7}  WAF {_vs(r['waf'], r['waf_published'], '.3f')}"
        f" [{wafm.window_label(wafm.from_keys(r))}; its {WINDOWS} windows {r['waf_window_min']:.3f}-{r['waf_window_max']:.3f}]"
        f"  data-namespace write latency {_vs(r['data_write_lat_ms'], r['data_write_lat_published_ms'], '.3f')} ms"
        f"  reads {r['read_iops']:,.0f}/s, page writes {r['page_write_iops']:,.0f}/s"
        f"  [{r['simulated_s']:.0f} s simulated, {r['wall_s']:.0f} s wall]"
    )


def describe_gain(g: dict[str, Any]) -> str:
    pub = g["read_iops_gain_published"]
    read = f"{g['read_iops_gain']:+.1%}" + (f" (published {pub:+.0%})" if pub is not None else "")
    tpmc = g["tpmc_gain_published"]
    return (
        f"gain   {g['threads']:>2} threads, {g['drive_state']:<7}  DRAM doublewrite: read IOPS {read}"
        + (f", tpmC published {tpmc:+.1%}" if tpmc is not None else "")
        + f"; WAF shared/dram {g['waf_ratio']:.2f} (published {g['waf_ratio_published']:.2f})"
        + f"; write latency shared/dram {g['data_write_lat_ratio']:.2f} (published {g['data_write_lat_ratio_published']:.2f})"
    )
