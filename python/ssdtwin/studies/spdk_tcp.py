"""``ssdtwin reproduce spdk-tcp``: the SPDK 24.05 NVMe-oF/TCP performance report's target-core
scaling (docs/sources.md, "SPDK NVMe-oF reports"; read second-hand, the report's PDF was not
reachable) predicted by the cluster model's NVMe-oF/TCP stack with its default costs. Nothing
is fitted to the report's figures.

The report's setup as the digests give it: one target of 2 x Xeon Gold 6348 with 14 KIOXIA
KCM61VUL3T20 (CM6-V 3.2 TB) and 4 ConnectX-5 100 GbE ports direct-attached to the
initiators, Linux 6.0.18, the SPDK target pinned to 1, 8, 12 or 48 cores, the kernel NVMe/TCP
initiator with fio (io_uring), 4 KiB random reads: 611.3K, 5,571K, 8,307K and 11,059K IOPS
(the last at 362 Gb/s, the links' limit). What the digests do not give (initiator hosts and
cores, queue depth, jobs) is assumed so that the initiators are not the bound: the report
measures the target.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Optional

from .. import _core
from ..cluster import Cluster, save_figure
from ..core_types import ClusterInitOptions
from .ceph_reef import saturating, settled_run, sourced

DRIVE = "kioxia-cm6-v-3.2t"
SCALE = 256
CORES = (1, 8, 12, 48)
PUBLISHED_IOPS = {1: 611_300, 8: 5_571_000, 12: 8_307_000, 48: 11_059_000}
CLIENTS, VOLUMES_PER_CLIENT, JOBS_PER_CLIENT, IODEPTH = 2, 7, 32, 32
WINDOW_MS = (10, 40)
REPORT = "SPDK NVMe-oF reports (24.05 TCP, second-hand)"


def retoml(text: str, cores: int) -> str:
    """The lab's cluster.toml with the report's target cores and the 4 links as one."""
    lines = []
    for line in text.splitlines():
        if line.startswith("target_threads = "):
            line = f'target_threads = {{ value = {cores}, source = "[SRC] {REPORT}: the SPDK target pinned to {cores} core(s)" }}'
        elif line.startswith("link_bits_per_s = "):
            line = (
                'link_bits_per_s = { value = 400000000000, source = "[DERIVED] '
                f'{REPORT}: 4 ConnectX-5 100 GbE ports on the target, direct-attached, taken as one 400 Gb/s port per host" }}'
            )
        lines.append(line)
    return "\n".join(lines) + "\n"


def lab(cores: int, scale: int = SCALE, seed: int = 1) -> Cluster:
    """The report's target pinned to `cores` cores."""
    return Cluster.from_text(retoml(_core.cluster_init(lab_options(scale, seed)), cores))


def job_text(window_ms: tuple[int, int] = WINDOW_MS) -> str:
    """Each initiator: 32 fio jobs at QD32 over its 7 volumes (one per target subsystem)."""
    ramp, runtime = window_ms
    head = (
        f"[global]\nioengine=io_uring\ndirect=1\nrw=randread\nbs=4k\niodepth={IODEPTH}\nnumjobs={JOBS_PER_CLIENT}\n"
        f"time_based=1\nramp_time={ramp}ms\nruntime={runtime}ms\n"
    )
    return head + "".join(f"[initiator{c}]\nfilename=client{c}\n" for c in range(CLIENTS))


def run(
    scale: int = SCALE, seed: int = 1, log: Callable[[str], None] = print, progress: Optional[Callable[[int, int, str, int], object]] = None
) -> dict[str, Any]:
    rows = []
    t0 = time.perf_counter()
    for cores in CORES:
        c = lab(cores, scale, seed)
        t1 = time.perf_counter()
        res, window = settled_run(c, job_text, WINDOW_MS, "read", f"spdk-tcp-{cores}", progress)
        top = res["resources"][:4]
        r = res["read"]
        pub = PUBLISHED_IOPS[cores]
        err = r["iops"] / pub - 1
        row = {
            "experiment": "spdk-tcp",
            "target_cores": cores,
            "rw": "randread",
            "iops": r["iops"],
            "published_iops": pub,
            "iops_error": err,
            "lat_mean_ms": r["lat_mean_ns"] / 1e6,
            "published_lat_mean_ms": None,
            "lat_p99_ms": r["lat_p99_ns"] / 1e6,
            "outstanding": CLIENTS * JOBS_PER_CLIENT * IODEPTH,
            "saturating": saturating(res["resources"])["name"],
            "saturating_utilisation": saturating(res["resources"])["utilisation"],
            "window_ms": list(window),
            "busiest": [{"name": u["name"], "utilisation": u["utilisation"]} for u in top],
            "events": res["events"],
            "wall_s": time.perf_counter() - t1,
        }
        row["within_25pct"] = abs(err) <= 0.25
        rows.append(row)
        log(
            f"spdk-tcp {cores:>2} target core(s): {r['iops']:>12,.0f} IOPS (published {pub:>12,}, {row['iops_error']:+6.1%})  "
            f"saturating {row['saturating']} {row['saturating_utilisation']:.0%}  [{row['wall_s']:.0f} s wall]"
        )
    return {"scale": scale, "seed": seed, "drive": DRIVE, "rows": rows, "wall_s": time.perf_counter() - t0}


def lab_options(scale: int, seed: int) -> ClusterInitOptions:
    """One SPDK target with 14 CM6-V (one volume each), 2 initiator hosts of 7 volumes."""
    return {
        "stack": "nvmeof-tcp",
        "nodes": 1,
        "drives_per_node": 14,
        "drive": DRIVE,
        "clients": CLIENTS,
        "fio_procs_per_client": VOLUMES_PER_CLIENT,
        "replicas": 1,
        "network": "100GbE",
        "volume_bytes": 200 << 30,
        "scale": scale,
        "seed": seed,
        "node_cores": sourced(112, f"[SRC] {REPORT}: 2 x Intel Xeon Gold 6348 (28 cores, 56 threads each)"),
        "client_cores": sourced(112, "[ASSUMED] initiators like the target; the report measures the target, not them"),
    }


def plot(result: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    out.mkdir(parents=True, exist_ok=True)
    rows = result["rows"]
    fig, ax = plt.subplots(figsize=(6, 4.2))
    x = [r["target_cores"] for r in rows]
    ax.plot(x, [r["iops"] for r in rows], "o-", label="model (ReFlex's 850K IOPS per target core)")
    ax.plot(x, [r["published_iops"] for r in rows], "s--", mfc="none", label="SPDK 24.05 report (second-hand)")
    ax.fill_between(x, [0.75 * r["published_iops"] for r in rows], [1.25 * r["published_iops"] for r in rows], color="0.9", label="±25 %")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="SPDK target cores",
        ylabel="4 KiB random read IOPS",
        title="NVMe-oF/TCP target, 14 CM6-V, 4 x 100 GbE",
    )
    # The log axis would tick at 10^0 and 10^1: tick the core counts run, named plainly.
    ax.set_xticks(x, [str(c) for c in x])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return [save_figure(fig, out / "spdk-tcp.png")]
