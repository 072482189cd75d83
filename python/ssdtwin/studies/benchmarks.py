"""Benchmarks that report figures on `log` (recorded in docs/performance.md with their commands)."""

from __future__ import annotations

import platform
import resource
import time
from typing import Any, Callable

from ..drive import Drive
from ..nvmefmt import si_bytes


def peak_rss_bytes() -> int:
    # ru_maxrss is KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_ftl_bench(model: str, scale: int, steady: float, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Precondition a whole in-memory drive (seq 128 KiB 2x, then random 4 KiB 2x) and
    measure random 4 KiB writes per second at steady state, all in fast-forward."""
    t_all = time.perf_counter()
    d = Drive.in_memory(model, scale=scale)
    cap = d.namespaces()[0].bytes
    log(f"{model} at 1/{scale}: namespace {si_bytes(cap)}, {platform.processor() or platform.machine()}")
    res: dict[str, Any] = {"model": model, "scale": scale, "namespace_bytes": cap}
    phases = [("seq_128k_2x", "seq", 131072, 2.0), ("rand_4k_2x", "rand", 4096, 2.0), ("steady_rand_4k", "rand", 4096, steady)]
    for key, pattern, bs, loops in phases:
        t0 = time.perf_counter()
        r = d.precondition(1, pattern, bs, loops=loops, seed=len(res))
        dt = time.perf_counter() - t0
        ius = r.host_bytes / d.ftl_info()["iu_bytes"]
        res[key] = {"seconds": dt, "ios": r.ios, "ios_per_s": r.ios / dt, "host_ius_per_s": ius / dt, "waf": r.waf}
        log(f"{key:<16} {dt:8.1f} s  {r.ios / dt / 1e6:7.2f} M IOs/s  {ius / dt / 1e6:7.2f} M IU writes/s  WAF {r.waf:.3f}")
    res["precondition_seconds"] = res["seq_128k_2x"]["seconds"] + res["rand_4k_2x"]["seconds"]
    res["peak_rss_bytes"] = peak_rss_bytes()
    res["total_seconds"] = time.perf_counter() - t_all
    log(
        f"precondition (seq 2x + rand 2x): {res['precondition_seconds']:.1f} s; "
        f"steady-state 4 KiB random writes: {res['steady_rand_4k']['ios_per_s'] / 1e6:.2f} M/s; "
        f"peak RSS {si_bytes(res['peak_rss_bytes'])}"
    )
    d.close()
    return res


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
    for rw in ("randread", "randwrite"):
        job = (
            f"[global]\nioengine=libaio\ndirect=1\ntime_based\nruntime={int(seconds * 1000)}ms\ngroup_reporting\n"
            f"[bench]\nrw={rw}\nbs=4k\niodepth=32\nnumjobs={numjobs}\n"
        )
        run = parse_string(job, name=f"bench-{rw}.fio")
        t = time.perf_counter()
        out = d.run_fio(run.to_engine(ns.bytes, ns.lba_bytes))
        wall = time.perf_counter() - t
        ios = sum(r[k]["total_ios"] for r in out for k in ("read", "write"))
        res[rw] = {"ios": ios, "wall_seconds": wall, "sim_ios_per_wall_s": ios / wall, "simulated_iops": ios / seconds}
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
    is per simulated I/O; a rate limit must cost no more wall time per I/O (issue 10)."""
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
