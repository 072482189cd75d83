"""Reproductions of the published results (seed-facts.md) that ssdtwin must explain.

`cm6_brief` re-runs the KIOXIA CM6 brief (§1): the four corners on a preconditioned drive
at several namespace sizes made with the nvme-cli sequence, and the 3 DWPD SKU. The 3.84 TB
corners are the calibration points; everything else is a prediction.

`p5316_whitepaper` re-runs the Intel D5-P5316 jobs (§3) with the whitepaper's
preconditioning, measuring WAF the endurance-profiler way (NAND/host bytes between two
telemetry reads), bandwidth and mean completion latency. Nothing on P5316 is calibrated.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import _core
from .calibrate import direction_totals, job_text, preconditioned, run_on_ns1
from .drive import Drive
from .fio import parse_string


@dataclass
class Measured:
    iops: float
    mb_s: float
    mib_s: float
    lat_mean_us: float
    waf: Optional[float]
    wall_s: float


def run_job(drive: Drive, text: str, name: str, run_seed: int = 0) -> Measured:
    """Run one job file text on `drive`; figures of its only direction (read or write)."""
    run = parse_string(text, name=name, run_seed=run_seed)
    v0 = drive.vendor_log()
    t = time.perf_counter()
    out = run_on_ns1(drive, run)
    wall = time.perf_counter() - t
    v1 = drive.vendor_log()
    d = "write" if any(r["write"]["total_ios"] for r in out) else "read"
    ios, byts, secs = direction_totals(out, d)
    lat = sum(r[d]["lat"]["sum_ns"] for r in out) / max(1, sum(r[d]["lat"]["n"] for r in out)) / 1e3
    dh = v1["host_write_bytes"] - v0["host_write_bytes"]
    dn = v1["nand_write_bytes"] - v0["nand_write_bytes"]
    return Measured(ios / secs, byts / secs / 1e6, byts / secs / 2**20, lat, (dn / dh) if dh else None, wall)


CM6_PUBLISHED = {
    # (column, test): figure from seed-facts §1 (MB/s for sequential, IOPS for random)
    ("3.84", "seq-read"): 6971, ("3.84", "seq-write"): 4246, ("3.84", "rand-read"): 1_549_202, ("3.84", "rand-write"): 173_067,
    ("3.20", "seq-read"): 6952, ("3.20", "seq-write"): 4246, ("3.20", "rand-read"): 1_548_940, ("3.20", "rand-write"): 337_920,
    ("3dwpd", "seq-read"): 6972, ("3dwpd", "seq-write"): 4245, ("3dwpd", "rand-read"): 1_549_470, ("3dwpd", "rand-write"): 354_666,
}


def cm6_brief(scale: int = 64, runtime_ms: int = 3000, ramp_ms: int = 1000, sizes: tuple[float, ...] = (3.84, 3.52, 3.20, 2.56),
              log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """The CM6 namespace table: four corners per namespace size, plus the 3 DWPD SKU."""
    rows = []
    full = _core.preset("kioxia-cm6-r-3.84t")["capacity"]["tnvmcap_bytes"]["value"]
    columns: list[tuple[str, str, float]] = [(f"{s:.2f}", "kioxia-cm6-r-3.84t", s * 1e12 / full) for s in sizes]
    columns.append(("3dwpd", "kioxia-cm6-v-3.2t", 1.0))
    for col, model, frac in columns:
        tests = ("seq-read", "seq-write", "rand-read", "rand-write") if col in ("3.84", "3.20", "3dwpd") else ("rand-write",)
        drives = {s: preconditioned(model, scale, s, min(frac, 1.0), seed=11) for s in {("seq" if t.startswith("seq") else "rand") for t in tests}}
        for i, test in enumerate(tests):
            d = drives["seq" if test.startswith("seq") else "rand"]
            k = 2 if test == "rand-write" else 1
            m = run_job(d, job_text(f"cm6-{test}.fio", runtime_ms * k, ramp_ms), f"cm6-{test}.fio")
            value = m.mb_s if test.startswith("seq") else m.iops
            pub = CM6_PUBLISHED.get((col, test))
            row = {"namespace": col, "model": model, "test": test, "simulated": value, "published": pub,
                   "error": (value / pub - 1) if pub else None, "lat_mean_us": m.lat_mean_us, "waf": m.waf,
                   "role": "calibration" if col == "3.84" else "prediction"}
            rows.append(row)
            unit = "MB/s" if test.startswith("seq") else "IOPS"
            pub_s = f"{pub:>12,} ({value / pub - 1:+6.1%})" if pub else " " * 22
            waf_s = f"WAF {m.waf:.2f}" if m.waf else ""
            log(f"{col:>6} {test:<11} {value:>12,.0f} {unit:<5} published {pub_s}  {row['role']:<11} {waf_s}")
    return rows


P5316_PUBLISHED = [
    # (name, bs, rw, jobs, iodepth, written, WAF, MiB/s, mean clat ms) — seed-facts §3
    ("4k-randwrite", "4k", "randwrite", 4, 32, 300 * 2**30, 74.77, 23.9, 21.9),
    ("64k-randwrite", "64k", "randwrite", 4, 32, 300 * 2**30, 4.53, 424.0, 19.7),
    ("4k-seqwrite", "4k", "write", 1, 32, 5 * 2**40, 1.02, 1360.0, 0.093),
    ("64k-seqwrite", "64k", "write", 1, 32, 5 * 2**40, 1.02, 2985.0, 0.688),
]


def p5316_job(bs: str, rw: str, jobs: int, qd: int, io_bytes: int) -> str:
    # The whitepaper's fio settings (libaio, direct=1); io_size per job splits the amount.
    return (
        "[global]\nioengine=libaio\ndirect=1\ngroup_reporting\nrandrepeat=0\n"
        f"[p5316]\nrw={rw}\nbs={bs}\niodepth={qd}\nnumjobs={jobs}\nio_size={io_bytes // jobs}\n"
    )


def p5316_whitepaper(scale: int = 64, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """The Intel P5316 IU/WAF table, amounts scaled by 1/`scale` like the drive."""
    rows = []
    for name, bs, rw, jobs, qd, written, pwaf, pmib, plat in P5316_PUBLISHED:
        d = Drive.in_memory("intel-p5316-15.36t", scale=scale, seed=5)
        # Whitepaper preconditioning: sequential 128 KiB over the capacity; for random
        # tests then 1 MiB random writes (4 jobs x QD32 "for hours": 2x capacity here).
        d.precondition(1, "seq", 131072, loops=1, seed=5)
        if rw == "randwrite":
            d.precondition(1, "rand", 1 << 20, loops=2, seed=6)
        # Scale the amount with the drive, but write at least three superblocks: a steady-state
        # WAF needs whole GC cycles, and a superblock (18 GiB) does not shrink with the scale.
        sb = d.ftl_info()["superblock_bytes"]
        amount = max(written // scale, 3 * sb)
        m = run_job(d, p5316_job(bs, rw, jobs, qd, amount), f"p5316-{name}.fio")
        row = {"job": name, "waf": m.waf, "waf_published": pwaf, "mib_s": m.mib_s, "mib_s_published": pmib,
               "lat_mean_ms": m.lat_mean_us / 1e3, "lat_published_ms": plat, "wall_s": m.wall_s, "written_bytes": amount}
        rows.append(row)
        waf = m.waf if m.waf is not None else float("nan")  # every job here writes, so it has one
        log(f"{name:<14} WAF {waf:6.2f} (published {pwaf:6.2f}, {waf / pwaf - 1:+6.1%})  "
            f"{m.mib_s:8.1f} MiB/s ({pmib:7.1f}, {m.mib_s / pmib - 1:+6.1%})  "
            f"lat {m.lat_mean_us / 1e3:7.3f} ms ({plat:6.3f}, {m.lat_mean_us / 1e3 / plat - 1:+6.1%})  "
            f"[{amount / 2**30:.0f} GiB, {m.wall_s:.1f} s wall]")
    return rows

