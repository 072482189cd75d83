"""KIOXIA KumoScale versus Ceph (docs/sources.md, "KIOXIA KumoScale vs Ceph study"): both systems modelled from
their parts on the brief's lab (3 nodes x 5 CM5 3.84 TB, 4 clients, one 100 GbE switch, four
200 GiB volumes replicated 3x) and run beside the brief's figures. Nothing here is fitted:
every cost is the default of ``cluster.toml`` with its source (docs/models.md, "Replicated
block storage"); the brief's figures are predictions to check.

The load: the brief says "~150 outstanding" at its largest point, but its own figures give
N = X·R = 845 I/Os in flight for KumoScale and 358 for Ceph (Little's law).
Each system is run at the load its figures imply, spread over the 4 clients (one fio job per
client volume); docs/models.md says why.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .. import _core
from ..cluster import Cluster, Direction, depths_per_job, summary, sweep, sweep_job, windows_ms, with_stack


# The brief's figures at its largest load (KIOXIA KumoScale vs Ceph study): IOPS and mean
# read latency. Predictions, never inputs to a cost.
@dataclass(frozen=True)
class Brief:
    system: str
    iops: int
    read_lat_us: float


BRIEF = {
    "nvmeof-tcp": Brief("KumoScale (NVMe-oF/TCP)", 2_293_860, 369.0),
    "ceph-rbd": Brief("Ceph 14 (RBD)", 43_852, 8_169.0),
}
CURVE_LEVELS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def implied_outstanding(stack: str, clients: int) -> int:
    """Per-client outstanding I/O of the brief's largest load by Little's law: N = X·R,
    spread over the clients."""
    b = BRIEF[stack]
    return max(1, round(b.iops * b.read_lat_us / 1e6 / clients))


def lab(scale: int = 64, seed: int = 1) -> dict[str, Cluster]:
    """The brief's lab with each stack (every cost at its default)."""
    base = Cluster.from_text(_core.cluster_init({"stack": "nvmeof-tcp", "scale": scale, "seed": seed}))
    return {"nvmeof-tcp": base, "ceph-rbd": with_stack(base, "ceph-rbd")}


def brief_points(
    clusters: dict[str, Cluster], log: Callable[[str], None] = print, progress: Optional[Callable[[int, int, str, int], object]] = None
) -> list[dict[str, Any]]:
    """Each stack at the brief's implied load: random read (IOPS, read latency, the two
    figures of the brief) and random write (its write latency, which the brief only
    compares), with the busiest resources."""
    rows = []
    for stack, c in clusters.items():
        clients = int(c.spec["cluster"]["clients"])
        qd = implied_outstanding(stack, clients)
        b = BRIEF[stack]
        row: dict[str, Any] = {"stack": stack, "system": b.system, "outstanding_per_client": qd, "outstanding_total": qd * clients}
        ramp_ms, runtime_ms = windows_ms(stack)
        for rw in ("randread", "randwrite"):
            t0 = time.perf_counter()
            _, res = c.run_text(sweep_job(clients, rw, qd, 1, ramp_ms, runtime_ms), name=f"brief-{stack}-{rw}", progress=progress)
            wall = time.perf_counter() - t0
            s = summary(res)
            direction: Direction = "write" if rw == "randwrite" else "read"
            row[rw] = {
                **s[direction],
                "busiest": s["busiest"],
                "outstanding_mean": s["outstanding_mean"],
                "little_x_r": s["little_x_r"],
                "wall_s": wall,
                "events": s["events"],
            }
        r = row["randread"]
        row["brief_iops"] = b.iops
        row["brief_read_lat_us"] = b.read_lat_us
        row["iops_error"] = r["iops"] / b.iops - 1
        row["read_lat_error"] = r["lat_mean_us"] / b.read_lat_us - 1
        rows.append(row)
        w = row["randwrite"]
        log(
            f"{b.system:<25} at {qd * clients} outstanding: read {r['iops']:>11,.0f} IOPS "
            f"(brief {b.iops:>9,}, {row['iops_error']:+.0%}), read latency {r['lat_mean_us']:>8.0f} us "
            f"(brief {b.read_lat_us:,.0f}, {row['read_lat_error']:+.0%}), p99 {r['lat_p99_us']:.0f} us; "
            f"write {w['iops']:,.0f} IOPS at {w['lat_mean_us']:.0f} us (p99 {w['lat_p99_us']:.0f} us)"
        )
        for d in ("randread", "randwrite"):
            top = ", ".join(f"{u['name']} {u['utilisation']:.0%}" for u in row[d]["busiest"][:3])
            log(f"{'':<25}   {d} busiest: {top}  [{row[d]['wall_s']:.1f} s wall]")
    return rows


# The parameters the study does not publish, over their plausible ranges: the band of each
# stack's curve (docs/models.md §11, "The band"). NVMe-oF: fio jobs per client; Ceph: the
# storage nodes' cores and the pool's PGs, taken at both ends together (fewer cores and PGs
# give fewer IOPS, more give more).
NVMEOF_JOBS = (1, 8)
CEPH_ENDS = ({"node_cores": 16, "pg_num": 128}, {"node_cores": 64, "pg_num": 2048})


def band_labs(clusters: dict[str, Cluster]) -> list[tuple[str, str, Cluster, int]]:
    """(stack, label, cluster, fio jobs per client) at each end of each stack's band."""
    out = [("nvmeof-tcp", f"{n} fio job(s) per client", clusters["nvmeof-tcp"], n) for n in NVMEOF_JOBS]
    for end in CEPH_ENDS:
        opts = clusters["ceph-rbd"].options()
        src = "[ASSUMED] an end of the band over the study's unpublished Ceph parameters (docs/models.md §11)"
        opts["node_cores"] = {"value": end["node_cores"], "source": src}
        opts["pg_num"] = {"value": end["pg_num"], "source": src}
        c = Cluster.from_text(_core.cluster_init(opts))
        out.append(("ceph-rbd", f"{end['node_cores']} cores per node, {end['pg_num']} PGs", c, 1))
    return out


def band(
    clusters: dict[str, Cluster],
    log: Callable[[str], None] = print,
    progress: Optional[Callable[[int, int, str, int], object]] = None,
    levels: Sequence[int] = CURVE_LEVELS,
) -> list[dict[str, Any]]:
    """Random reads at each end of each stack's band: the curve over ``levels`` (none: the
    study's load alone) plus the study's own load, and where the study's figures (IOPS and
    mean read latency) fall between the ends."""
    out: list[dict[str, Any]] = []
    for stack, label, c, jobs in band_labs(clusters):
        clients = int(c.spec["cluster"]["clients"])
        load = implied_outstanding(stack, clients)
        at_levels = sorted(set(levels) | {load})
        rows = sweep(c, at_levels, ("randread",), jobs, log=log, progress=progress)
        # The study's load runs as jobs x (load // jobs) outstanding per client; a level that
        # comes to the same point is run once (depths_per_job), so look the row up by it.
        per_client = depths_per_job([load], jobs)[0] * jobs
        at = next(r for r in rows if r["outstanding_per_client"] == per_client)
        out.append({"stack": stack, "label": label, "numjobs": jobs, "curve": rows, "at_study_load": at})
    for stack, b in BRIEF.items():
        ends = [x for x in out if x["stack"] == stack]
        lo, hi = sorted(x["at_study_load"]["iops"] for x in ends)
        lat_lo, lat_hi = sorted(x["at_study_load"]["lat_mean_us"] for x in ends)
        where = _position(b.iops, lo, hi)
        lat_where = _position(b.read_lat_us, lat_lo, lat_hi)
        log(f"{b.system}: the study's {b.iops:,} IOPS lie {where} the model's band of {lo:,.0f} to {hi:,.0f} at its load")
        log(f"{b.system}: the study's {b.read_lat_us:,.0f} us lie {lat_where} the model's band of {lat_lo:,.0f} to {lat_hi:,.0f} us")
        for x in ends:
            x["study_iops"], x["study_position"], x["band_iops"] = b.iops, where, [lo, hi]
            x["study_lat_us"], x["study_lat_position"], x["band_lat_us"] = b.read_lat_us, lat_where, [lat_lo, lat_hi]
    return out


def _position(value: float, lo: float, hi: float) -> str:
    return "inside" if lo <= value <= hi else ("below" if value < lo else "above")


def kumoscale(
    scale: int = 64,
    seed: int = 1,
    curves: bool = True,
    log: Callable[[str], None] = print,
    progress: Optional[Callable[[int, int, str, int], object]] = None,
    band_at_load: bool = False,
) -> dict[str, Any]:
    """The brief's comparison: both stacks at the brief's load, then (with ``curves``) IOPS
    against mean and 99 % latency from 1 to 256 outstanding I/O per client, both
    directions, each point on a cluster built afresh, and the band of each stack's read
    curve over the study's unpublished parameters. Without ``curves``, ``band_at_load``
    runs the band's ends at the study's load alone (`ssdtwin validate`)."""
    clusters = lab(scale, seed)
    t0 = time.perf_counter()
    out: dict[str, Any] = {"scale": scale, "seed": seed, "brief": brief_points(clusters, log, progress)}
    if curves:
        rows = []
        for c in clusters.values():
            rows += sweep(c, CURVE_LEVELS, ("randread", "randwrite"), 1, log=log, progress=progress)
        out["curves"] = rows
        out["band"] = band(clusters, log, progress)
    elif band_at_load:
        out["band"] = band(clusters, log, progress, levels=())
    out["wall_s"] = time.perf_counter() - t0
    return out
