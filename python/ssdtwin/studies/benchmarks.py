"""Benchmarks that report figures on `log` (recorded in docs/performance.md with their commands)."""

from __future__ import annotations

import os
import platform
import resource
import time
from pathlib import Path
from typing import Any, Callable, Optional

from .. import _core
from .. import waf as wafm
from ..core_types import FtlInfo
from ..drive import Drive
from ..nvmefmt import si_bytes


def peak_rss_bytes() -> int:
    # ru_maxrss is KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def maps_bytes(info: FtlInfo) -> int:
    """Bytes of the FTL's two maps (4-byte L2P entries per logical IU, P2L per physical IU)."""
    return 4 * (int(info["logical_ius"]) + int(info["superblocks"]) * int(info["ius_per_superblock"]))


def l2p_bytes(info: FtlInfo) -> int:
    """Bytes of the L2P (4 bytes per logical IU): every random map line a host write
    touches is in it (its own entry, and GC's checks of the victim's IUs); the P2L is
    written and read in order (open superblocks, the victim's entries)."""
    return 4 * int(info["logical_ius"])


def mem_available_bytes() -> Optional[int]:
    """MemAvailable from /proc/meminfo (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


# The FTL bench's phases: (key, pattern, block bytes, seed). The seeds are those the bench
# has always used, so its WAF figures stay comparable across versions.
FTL_PHASES = (("seq_128k_2x", "seq", 131072, 3), ("rand_4k_2x", "rand", 4096, 4), ("steady_rand_4k", "rand", 4096, 5))


def run_ftl_bench(
    model: str,
    scale: int,
    steady: float,
    count: float = 0.1,
    inflight: int = 32,
    rmw_ops: int = 1 << 26,
    log: Callable[[str], None] = print,
    partitions: Optional[int] = None,
    threads: int = 0,
) -> dict[str, Any]:
    """Precondition a whole in-memory drive (seq 128 KiB 2x, then random 4 KiB 2x) and
    measure random 4 KiB writes per second at steady state, all in fast-forward; then count
    the random map lines each host write touches (`count` capacity multiples more, through
    the counting copy of the write path), and measure this machine's random
    read-modify-write rate over an array of the L2P's size (where those lines are), before
    and after. The FTL can go no faster than that rate divided by its touches per write
    (docs/performance.md).

    ``partitions`` overrides the preset's FTL partitions per NVM Set; a drive of several
    partitions fast-forwards on ``threads`` threads (0: one per core, at most one per
    partition), and the machine's rate is then measured on as many threads, each over its
    own part of the array. A drive of one partition runs its write buffer on a second
    thread when it may use two; its maps, and so the machine's rate, stay on one."""
    t_all = time.perf_counter()
    d = Drive.in_memory(model, scale=scale, partitions=partitions)
    d.set_fast_forward_threads(threads)
    cap = d.namespaces()[0].bytes
    info = d.ftl_info()
    mb = maps_bytes(info)
    # The machine is measured over the L2P alone: an array of both maps' size spreads the
    # same number of random lines over twice the pages, so it misses the TLB where the FTL
    # does not (at full scale it measured below what the FTL itself did, docs/performance.md).
    lb = l2p_bytes(info)
    parts = info["partitions"]
    # The core counts the CPUs this process may run on (Rust available_parallelism), not the machine's.
    may = threads or len(os.sched_getaffinity(0))
    used = min(may, parts)
    apart = " (the write buffer on a second)" if parts == 1 and may > 1 else ""
    log(
        f"{model} at 1/{scale}: namespace {si_bytes(cap)}, maps {si_bytes(mb)}, {parts} FTL partition(s) on {used} thread(s){apart}, "
        f"{platform.processor() or platform.machine()}"
    )
    res: dict[str, Any] = {"model": model, "scale": scale, "namespace_bytes": cap, "maps_bytes": mb, "l2p_bytes": lb}
    res |= {"partitions": parts, "threads": used}
    # The drive's maps are untouched zero pages until written: the array is measured first,
    # freed, and measured again after the drive is closed, so the two never coexist.
    res["rmw_before"] = _core.rmw_rate(lb, rmw_ops, inflight, 1, used)
    log(_rmw_line("before", res["rmw_before"]))
    for key, pattern, bs, seed in FTL_PHASES:
        loops = steady if key == "steady_rand_4k" else 2.0
        v0 = d.vendor_log()
        t0 = time.perf_counter()
        r = d.precondition(1, pattern, bs, loops=loops, seed=seed)
        res[key] = _phase(r, time.perf_counter() - t0, info) | wafm.keys(wafm.measure(v0, d.vendor_log(), "fast_forward", cap))
        log(_phase_line(key, res[key]))
    v0 = d.vendor_log()
    t0 = time.perf_counter()
    r, touches = d.precondition_touches(1, "rand", 4096, int(round(count * cap)), 6)
    res["counted_rand_4k"] = (
        _phase(r, time.perf_counter() - t0, info)
        | _touches(r, touches, info)
        | wafm.keys(wafm.measure(v0, d.vendor_log(), "fast_forward", cap))
    )
    log(_phase_line("counted_rand_4k", res["counted_rand_4k"]))
    res["precondition_seconds"] = res["seq_128k_2x"]["seconds"] + res["rand_4k_2x"]["seconds"]
    d.close()
    res["rmw_after"] = _core.rmw_rate(lb, rmw_ops, inflight, 1, used)
    log(_rmw_line("after", res["rmw_after"]))
    res["peak_rss_bytes"] = peak_rss_bytes()
    res["bound"] = _bound(res)
    res["total_seconds"] = time.perf_counter() - t_all
    for line in _bound_lines(res):
        log(line)
    return res


def _phase(r: Any, seconds: float, info: FtlInfo) -> dict[str, Any]:
    ius = r.host_bytes / info["iu_bytes"]
    return {"seconds": seconds, "ios": r.ios, "ios_per_s": r.ios / seconds, "host_ius_per_s": ius / seconds, "waf": r.waf}


def _touches(r: Any, touches: dict[str, int], info: FtlInfo) -> dict[str, Any]:
    """Random map lines per host write of the counted phase, by kind."""
    relocated = r.nand_bytes // info["iu_bytes"] - touches["host_l2p"]
    per = max(r.ios, 1)
    return {
        "host_l2p": touches["host_l2p"],
        "gc_checks": touches["gc_checks"],
        "gc_relocated": relocated,
        "touches_per_write": (touches["host_l2p"] + touches["gc_checks"]) / per,
        "host_l2p_per_write": touches["host_l2p"] / per,
        "gc_relocated_per_write": relocated / per,
        "gc_stale_checks_per_write": (touches["gc_checks"] - relocated) / per,
    }


def _bound(res: dict[str, Any]) -> dict[str, Any]:
    """The hardware bound on host writes/s and how far the FTL is from it."""
    rmw = (res["rmw_before"]["rmw_per_s"] + res["rmw_after"]["rmw_per_s"]) / 2
    touches = res["counted_rand_4k"]["touches_per_write"]
    rate = res["steady_rand_4k"]["ios_per_s"]
    bound = rmw / touches if touches > 0 else float("inf")
    return {
        "rmw_per_s": rmw,
        "touches_per_write": touches,
        "host_writes_per_s_bound": bound,
        "host_writes_per_s": rate,
        "ftl_rmw_per_s": rate * touches,
        "fraction_of_bound": rate / bound,
    }


def _rmw_line(when: str, r: dict[str, Any]) -> str:
    return (
        f"machine ({when}): {r['rmw_per_s'] / 1e6:6.1f} M random read-modify-writes/s over {si_bytes(r['array_bytes'])}, "
        f"{r['inflight']} prefetches in flight ({r['ops']} ops in {r['seconds']:.2f} s; page fill {r['fill_seconds']:.1f} s)"
    )


def _phase_line(key: str, p: dict[str, Any]) -> str:
    rates = f"{p['ios_per_s'] / 1e6:7.2f} M IOs/s  {p['host_ius_per_s'] / 1e6:7.2f} M IU writes/s"
    # The phase's NAND / host ratio (the FTL's work per host write), with what it spans.
    return f"{key:<16} {p['seconds']:8.1f} s  {rates}  WAF {p['waf']:.3f} [{wafm.window_label(wafm.from_keys(p))}]"


def _bound_lines(res: dict[str, Any]) -> list[str]:
    c, b = res["counted_rand_4k"], res["bound"]
    return [
        f"random map lines per host 4 KiB write (counted): {c['touches_per_write']:.2f} = host L2P {c['host_l2p_per_write']:.2f} "
        f"+ GC checks of relocated IUs {c['gc_relocated_per_write']:.2f} + of stale IUs {c['gc_stale_checks_per_write']:.2f}",
        "",
        f"{'':<34} {'M/s':>8}",
        f"{'machine random RMW (mean)':<34} {b['rmw_per_s'] / 1e6:8.2f}",
        f"{'bound: RMW / touches per write':<34} {b['host_writes_per_s_bound'] / 1e6:8.2f}",
        f"{'FTL steady-state host writes':<34} {b['host_writes_per_s'] / 1e6:8.2f}",
        f"{'FTL map RMWs (writes x touches)':<34} {b['ftl_rmw_per_s'] / 1e6:8.2f}",
        f"FTL at {100 * b['fraction_of_bound']:.0f} % of the bound; precondition (seq 2x + rand 2x) {res['precondition_seconds']:.1f} s; "
        f"peak RSS {si_bytes(res['peak_rss_bytes'])}",
    ] + (
        # Above its own bound: the machine's measurement was disturbed (load) or too short.
        ["note: the FTL ran above the bound: the machine's measurements were too short or disturbed (raise --rmw-ops, or rerun)"]
        if b["fraction_of_bound"] > 1
        else []
    )


def run_engine_bench(model: str, scale: int, seconds: float, numjobs: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Simulated host I/Os per wall second of the timed engine at steady state: 4 KiB random
    read and random write at QD32 (per job) on a preconditioned in-memory drive."""
    from ..fio import parse_string

    d = Drive.in_memory(model, scale=scale)
    ns = d.namespaces()[0]
    t0 = time.perf_counter()
    d.precondition(1, "seq", 131072, loops=1, seed=1)
    d.precondition(1, "rand", 4096, loops=2, seed=2)
    log(f"{model} at 1/{scale}: preconditioned {si_bytes(ns.bytes)} in {time.perf_counter() - t0:.1f} s")
    res: dict[str, Any] = {"model": model, "scale": scale, "numjobs": numjobs, "simulated_seconds": seconds}
    # In microseconds, so the run lasts the seconds its IOPS are divided by (whole
    # milliseconds cut 1.5 ms to 1, and under 1 ms to 0: no limit at all).
    runtime_us = max(1, round(seconds * 1e6))
    for rw in ("randread", "randwrite"):
        job = (
            f"[global]\nioengine=libaio\ndirect=1\ntime_based\nruntime={runtime_us}us\ngroup_reporting\n"
            f"[bench]\nrw={rw}\nbs=4k\niodepth=32\nnumjobs={numjobs}\n"
        )
        run = parse_string(job, name=f"bench-{rw}.fio")
        t = time.perf_counter()
        out = d.run_fio(run.to_engine(ns.bytes, ns.lba_bytes))
        wall = time.perf_counter() - t
        ios = sum(r[k]["total_ios"] for r in out for k in ("read", "write"))
        ran_s = max(r["elapsed_ns"] for r in out) / 1e9  # the drive time the job ran: --seconds
        res[rw] = {"ios": ios, "wall_seconds": wall, "simulated_seconds": ran_s, "sim_ios_per_wall_s": ios / wall}
        res[rw]["simulated_iops"] = ios / seconds
        log(
            f"{rw:<10} {ios:>10} I/Os ({ios / seconds / 1e3:8.1f}K IOPS simulated) in {wall:6.2f} s wall: "
            f"{ios / wall / 1e6:5.2f} M simulated I/Os per second"
        )
    d.close()
    return res


def run_rate_bench(model: str, scale: int, ios: int, rate_iops: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The same size-terminated job (4 KiB random read, then random write, libaio QD32) with
    and without ``rate_iops``: simulated I/Os per wall second of each, and their ratio. Both
    issue exactly ``ios`` I/Os (fio's random map covers each block once), so the comparison
    is per simulated I/O; a rate limit must cost no more wall time per I/O."""
    from ..fio import parse_string

    d = Drive.in_memory(model, scale=scale)
    ns = d.namespaces()[0]
    size = ios * 4096
    if size > ns.bytes:
        d.close()
        raise ValueError(f"--ios {ios}: {si_bytes(size)} of 4 KiB I/Os do not fit the {si_bytes(ns.bytes)} namespace")
    d.precondition(1, "seq", 131072, loops=1, seed=1)
    log(f"{model} at 1/{scale}: {ios} 4 KiB I/Os per job, QD32, rate limit {rate_iops} IOPS")
    res: dict[str, Any] = {"model": model, "scale": scale, "ios": ios, "rate_iops": rate_iops}
    for rw in ("randread", "randwrite"):
        row: dict[str, Any] = {}
        for label, limit in (("unlimited", ""), ("rate_limited", f"rate_iops={rate_iops}\n")):
            job = f"[bench]\nioengine=libaio\ndirect=1\nrw={rw}\nbs=4k\niodepth=32\nsize={size}\n{limit}"
            run = parse_string(job, name=f"bench-{rw}.fio")
            t = time.perf_counter()
            out = d.run_fio(run.to_engine(ns.bytes, ns.lba_bytes))
            wall = time.perf_counter() - t
            done = sum(r[k]["total_ios"] for r in out for k in ("read", "write"))
            sim_s = max(r["elapsed_ns"] for r in out) / 1e9
            row[label] = {"ios": done, "wall_seconds": wall, "simulated_seconds": sim_s, "sim_ios_per_wall_s": done / wall}
            log(
                f"{rw:<10} {label:<13} {done:>9} I/Os, {sim_s:8.3f} s simulated in {wall:6.2f} s wall: "
                f"{done / wall / 1e6:5.2f} M simulated I/Os per second"
            )
        row["ratio"] = row["rate_limited"]["sim_ios_per_wall_s"] / row["unlimited"]["sim_ios_per_wall_s"]
        log(f"{rw:<10} rate-limited / unlimited, per simulated I/O: {row['ratio']:.2f}")
        res[rw] = row
    d.close()
    return res
