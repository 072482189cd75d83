"""``ssdtwin reproduce ceph-reef``: the Ceph project's own lab measurements of Reef (docs/sources.md,
"Ceph Reef OSDs per NVMe 2023" and "Ceph Reef freeze 2023") predicted by the cluster model
with the Reef cost table (``cluster init --ceph-version 18``). Nothing here is fitted: every
cost comes from the other posts of the lab (docs/models.md §11, "Ceph Reef"); the figures
below are predictions to check, never inputs.

* **osds-per-nvme**: 5 OSD nodes x 6 PM983 (one OSD each), 5 client nodes, 50 librbd fio
  processes x QD128 of 4 KiB random I/O, 16,384 PGs; the OSDs of a node pinned with numactl
  to N CPU threads per NVMe (N = 2, 8, 14, 20).
* **reef-freeze**: 10 nodes x 6 OSDs with 6 colocated librbd fio processes each (60 x QD128 =
  7,680 outstanding), msgr v2, 16,384 PGs, OSDs unpinned; and one client writing 4 KiB
  sequentially and synchronously at QD1.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Unpack

from .. import _core
from ..cluster import Cluster, Direction, save_figure
from ..core_types import ClusterInitOptions, ClusterRun, ResourceUse, SourcedCount

DRIVE = "samsung-pm983-3.84t"
SCALE = 256  # the drives at 1/256: 15 GB each, 256 MiB volumes (docs/models.md §11.8)
VOLUME_BYTES = 64 << 30  # [ASSUMED] CBT librbdfio's default vol_size, 65536 MB per fio process
THREADS = (2, 8, 14, 20)
WINDOW_MS = (1000, 1000)  # ramp, runtime (simulated): the Ceph default of `cluster sweep` (docs/models.md §11.5)
QD1_WINDOW_MS = (50, 500)


@dataclass(frozen=True)
class Published:
    """One published figure: IOPS and mean / 99 % latency in ms (None: not published)."""

    experiment: str
    threads_per_osd: Optional[int]
    rw: str
    iops: float
    lat_mean_ms: Optional[float]
    lat_p99_ms: Optional[float]
    note: str


# The issue's figures, read from the posts' charts (±2 %) and text. Targets, never inputs.
PUBLISHED: tuple[Published, ...] = (
    Published("osds-per-nvme", 2, "randread", 666_000, 9.6, 69, "chart"),
    Published("osds-per-nvme", 8, "randread", 1_830_000, 3.5, 47, "chart"),
    Published("osds-per-nvme", 14, "randread", 2_630_000, 2.4, 45, "chart"),
    Published("osds-per-nvme", 20, "randread", 2_700_000, 2.4, 50, "chart"),
    Published("osds-per-nvme", 2, "randwrite", 88_800, 72, 360, "chart"),
    Published("osds-per-nvme", 8, "randwrite", 247_000, 26, 176, "chart"),
    Published("osds-per-nvme", 14, "randwrite", 378_000, 17, 124, "chart"),
    Published("osds-per-nvme", 20, "randwrite", 451_000, 16, 152, "chart"),
    Published("reef-freeze", None, "randread", 4_400_000, None, None, "text: roughly 4.4M IOPS"),
    Published("reef-freeze", None, "randwrite", 800_000, None, None, "text: 800K IOPS"),
    Published("reef-freeze", None, "write-qd1", 1e3 / 0.421, 0.421, 0.465, "table: O_DSYNC, Reef, 0.421 ms mean"),
)


def sourced(value: int, source: str) -> SourcedCount:
    return {"value": value, "source": source}


EPYC = "[SRC] Ceph Reef OSDs per NVMe 2023 and Ceph Reef freeze 2023: 1 x AMD EPYC 7742, 64 cores / 128 threads per node"
PGS = "[SRC] Ceph Reef OSDs per NVMe 2023 and Ceph Reef freeze 2023: an RBD pool with a static 16,384 PGs, 3x replication"


def osd_cpus(threads_per_nvme: int) -> SourcedCount:
    """The CPUs a node's 6 OSDs were pinned to for N threads per NVMe: the post's numactl
    example binds processors 0-12 and 64-76 (26) for 4 threads per NVMe (24): 6N + 2."""
    return sourced(
        6 * threads_per_nvme + 2,
        f"[DERIVED] {threads_per_nvme} threads per NVMe x 6 OSDs + 2: the post's numactl example for 4 threads per NVMe, "
        "--physcpubind=0-12,64-76, binds 13 physical and 13 SMT processors, one pair more than the 24 it names "
        "(Ceph Reef OSDs per NVMe 2023); all OSDs of a node share the set",
    )


def _reef_lab(scale: int, seed: int, /, **lab: Unpack[ClusterInitOptions]) -> Cluster:
    """A Ceph 18 RBD lab of the posts' hardware (PM983 drives, 100 GbE, 128-thread EPYC nodes
    and clients, 3 replicas, librbd, msgr v2, 16,384 PGs) with `lab`'s own fields."""
    options: ClusterInitOptions = {
        "stack": "ceph-rbd",
        "ceph_version": 18,
        "drives_per_node": 6,
        "drive": DRIVE,
        "replicas": 3,
        "network": "100GbE",
        "volume_bytes": VOLUME_BYTES,
        "scale": scale,
        "seed": seed,
        "rbd_client": "librbd",
        "msgr_version": 2,
        "node_cores": sourced(128, EPYC),
        "client_cores": sourced(128, EPYC),
        "pg_num": sourced(16384, PGS),
        **lab,
    }
    return Cluster.from_text(_core.cluster_init(options))


def osds_per_nvme_lab(threads_per_nvme: int, scale: int = SCALE, seed: int = 1) -> Cluster:
    """Ceph Reef OSDs per NVMe 2023, 1 OSD per NVMe, N CPU threads per NVMe."""
    return _reef_lab(scale, seed, nodes=5, clients=5, fio_procs_per_client=10, osd_cpus=osd_cpus(threads_per_nvme))


def freeze_lab(clients: int = 10, procs: int = 6, scale: int = SCALE, seed: int = 1) -> Cluster:
    """Ceph Reef freeze 2023: 10 nodes x 6 OSDs, fio colocated on the nodes, OSDs unpinned."""
    return _reef_lab(scale, seed, nodes=10, clients=clients, fio_procs_per_client=procs, clients_on_nodes=True)


def job_text(clients: int, procs: int, rw: str, iodepth: int, window_ms: tuple[int, int]) -> str:
    """One section per client; `procs` fio processes (numjobs) each on its own volume. The
    engine named here is fio's generic async one: how the clients reach RBD (librbd or krbd)
    is the lab's ``ceph.rbd_client``."""
    ramp, runtime = window_ms
    head = (
        f"[global]\nioengine=libaio\ndirect=1\nrw={rw}\nbs=4k\niodepth={iodepth}\nnumjobs={procs}\n"
        f"time_based=1\nramp_time={ramp}ms\nruntime={runtime}ms\n"
    )
    return head + "".join(f"[client{c}]\nfilename=client{c}\n" for c in range(clients))


def settled_run(
    c: Cluster,
    text: Callable[[tuple[int, int]], str],
    window_ms: tuple[int, int],
    direction: Direction,
    name: str,
    progress: Optional[Callable[[int, int, str, int], object]] = None,
) -> tuple[ClusterRun, tuple[int, int]]:
    """Run the job `text(window)` until its window is long against its own mean latency R
    (ramp >= 10 R, runtime >= 50 R): fio counts only I/Os issued after the ramp, so a
    runtime W undercounts IOPS by about R/W. Returns the run and the window used."""
    ramp, runtime = window_ms
    while True:
        _, res = c.run_text(text((ramp, runtime)), name=name, progress=progress)
        lat_ms = res[direction]["lat_mean_ns"] / 1e6
        if runtime >= 50 * lat_ms and ramp >= 10 * lat_ms:
            return res, (ramp, runtime)
        ramp, runtime = max(ramp, math.ceil(10 * lat_ms)), max(runtime, math.ceil(50 * lat_ms))


def measure(
    c: Cluster, rw: str, iodepth: int, window_ms: tuple[int, int], progress: Optional[Callable[[int, int, str, int], object]] = None
) -> dict[str, Any]:
    """Run one point (window: settled_run; the posts ran 60 s and 300 s); the figures, the
    saturating resource and what the run cost."""
    t = c.spec["cluster"]
    fio_rw = "write" if rw == "write-qd1" else rw
    t0 = time.perf_counter()

    def text(window: tuple[int, int]) -> str:
        return job_text(t["clients"], t["fio_procs_per_client"], fio_rw, iodepth, window)

    res, (ramp, runtime) = settled_run(c, text, window_ms, "write" if "write" in rw else "read", f"ceph-reef-{rw}", progress)
    d = res["write" if "write" in rw else "read"]
    wall = time.perf_counter() - t0
    top = res["resources"][:4]
    sat = saturating(res["resources"])
    return {
        "iops": d["iops"],
        "lat_mean_ms": d["lat_mean_ns"] / 1e6,
        "lat_p99_ms": d["lat_p99_ns"] / 1e6,
        "outstanding": t["clients"] * t["fio_procs_per_client"] * iodepth,
        "outstanding_mean": res["outstanding_mean"],
        "saturating": sat["name"],
        "saturating_utilisation": sat["utilisation"],
        "busiest": [{"name": u["name"], "utilisation": u["utilisation"]} for u in top],
        "window_ms": [ramp, runtime],
        "events": res["events"],
        "simulated_s": res["simulated_ns"] / 1e9,
        "wall_s": wall,
    }


def saturating(resources: Sequence[ResourceUse]) -> ResourceUse:
    """The resource that bounds a point: the busiest CPU set if it is 95 % busy or more (a
    thread pool's or the kv_sync thread's utilisation counts the time its threads wait for a
    core, so they read 100 % behind nearly full cores), otherwise the busiest resource."""
    full = [u for u in resources if u["kind"] == "cores" and u["utilisation"] >= 0.95]
    return full[0] if full else resources[0]


def row(p: Published, m: dict[str, Any]) -> dict[str, Any]:
    err = m["iops"] / p.iops - 1
    out: dict[str, Any] = {
        "experiment": p.experiment,
        "threads_per_osd": p.threads_per_osd,
        "rw": p.rw,
        "iops": m["iops"],
        "published_iops": p.iops,
        "iops_error": err,
        "lat_mean_ms": m["lat_mean_ms"],
        "published_lat_mean_ms": p.lat_mean_ms,
        "lat_p99_ms": m["lat_p99_ms"],
        "published_lat_p99_ms": p.lat_p99_ms,
        "published_note": p.note,
    }
    if p.lat_mean_ms is not None:
        out["lat_mean_error"] = m["lat_mean_ms"] / p.lat_mean_ms - 1
    out.update({k: v for k, v in m.items() if k not in out})
    # Within 25 %: IOPS for the loaded points, the mean latency for the QD1 one.
    judged = out.get("lat_mean_error", err) if p.rw == "write-qd1" else err
    out["within_25pct"] = abs(judged) <= 0.25
    return out


def run(
    scale: int = SCALE,
    seed: int = 1,
    points: Sequence[str] = ("osds-per-nvme", "reef-freeze"),
    threads: Sequence[int] = THREADS,
    rws: Sequence[str] = ("randread", "randwrite", "write-qd1"),
    window_ms: tuple[int, int] = WINDOW_MS,
    log: Callable[[str], None] = print,
    progress: Optional[Callable[[int, int, str, int], object]] = None,
) -> dict[str, Any]:
    """Every published point of the two posts (or those of `points`, `threads` and `rws`)
    beside the model's prediction."""
    rows = []
    t0 = time.perf_counter()
    for p in PUBLISHED:
        if p.experiment not in points or p.rw not in rws or (p.threads_per_osd is not None and p.threads_per_osd not in threads):
            continue
        if p.experiment == "osds-per-nvme":
            lab, qd, win = osds_per_nvme_lab(p.threads_per_osd or 0, scale, seed), 128, window_ms
        elif p.rw == "write-qd1":
            lab, qd, win = freeze_lab(1, 1, scale, seed), 1, QD1_WINDOW_MS
        else:
            lab, qd, win = freeze_lab(10, 6, scale, seed), 128, window_ms
        r = row(p, measure(lab, p.rw, qd, win, progress))
        rows.append(r)
        threads_txt = f"{p.threads_per_osd:>2} thr/NVMe" if p.threads_per_osd else "  unpinned "
        log(
            f"{p.experiment:<13} {threads_txt} {p.rw:<9} {r['iops']:>11,.0f} IOPS (published {p.iops:>11,.0f}, {r['iops_error']:+6.1%})  "
            f"mean {r['lat_mean_ms']:7.3f} ms (published {p.lat_mean_ms if p.lat_mean_ms is not None else '-'})  "
            f"saturating {r['saturating']} {r['saturating_utilisation']:.0%}  [{r['wall_s']:.0f} s wall, {r['events'] / 1e6:.0f}M events]"
        )
    return {"scale": scale, "seed": seed, "drive": DRIVE, "rows": rows, "wall_s": time.perf_counter() - t0}


def plot(result: dict[str, Any], out: Path) -> list[Path]:
    """Predicted against published: IOPS against threads per NVMe for the OSDs-per-NVMe
    sweep, and every point on a log-log plane with the ±25 % band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    rows = result["rows"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.6))
    for i, rw in enumerate(("randread", "randwrite")):
        pts = sorted((r for r in rows if r["experiment"] == "osds-per-nvme" and r["rw"] == rw), key=lambda r: r["threads_per_osd"])
        if not pts:
            continue
        x = [r["threads_per_osd"] for r in pts]
        ax1.plot(x, [r["iops"] for r in pts], "o-", color=f"C{i}", label=f"{rw}: model")
        ax1.plot(x, [r["published_iops"] for r in pts], "s--", color=f"C{i}", mfc="none", label=f"{rw}: published")
    ax1.set(yscale="log", xlabel="CPU threads per NVMe (1 OSD per NVMe)", ylabel="IOPS", title="Ceph Reef, 30 OSDs: IOPS against OSD CPU")
    lo = min(min(r["iops"], r["published_iops"]) for r in rows) / 1.6
    hi = max(max(r["iops"], r["published_iops"]) for r in rows) * 1.6
    ax2.fill_between([lo, hi], [lo * 0.75, hi * 0.75], [lo * 1.25, hi * 1.25], color="0.9", label="±25 %")
    ax2.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    labels = []
    for r in rows:
        marker = {"randread": "o", "randwrite": "s", "write-qd1": "^"}[r["rw"]]
        colour = "C0" if r["experiment"] == "osds-per-nvme" else "C3"
        ax2.plot([r["published_iops"]], [r["iops"]], marker, color=colour)
        what = {"randread": "read", "randwrite": "write", "write-qd1": "QD1 write"}[r["rw"]]
        tag = f"{r['threads_per_osd']} thr" if r["threads_per_osd"] else ("" if r["rw"] == "write-qd1" else "60 OSDs")
        labels.append((f"{what} {tag}".strip(), (r["published_iops"], r["iops"])))
    ax2.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="published IOPS", ylabel="predicted IOPS")
    ax2.set_title("every point: blue 30 OSDs (threads per NVMe), red 60 OSDs")
    fig.suptitle(f"ssdtwin cluster, Ceph 18 cost table, PM983 at 1/{result['scale']}: predicted against published")
    fig.tight_layout()
    label_points(ax2, labels)
    for ax in (ax1, ax2):
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    return [save_figure(fig, out / "ceph-reef.png")]


def label_points(ax: Any, labels: Sequence[tuple[str, tuple[float, float]]], gap_px: float = 30.0) -> None:
    """Name each point of `ax` by a label beside it, joined to it by a thin line. Points of
    (nearly) the same height would put their labels on one another, so the labels of each
    side are stacked in the points' order along the diagonal (x + y on the display: the
    order of points near y = x, whose lines then do not cross), each at least one text
    height above the label below it. A label goes left of its point, or right where the
    axes leave it no room on the left. Call it after the axes' limits and the figure's
    layout are set: it places in display pixels."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    sizes = []
    for text, _ in labels:
        probe = ax.text(0, 0, text, fontsize=7)
        extent = probe.get_window_extent(renderer)
        sizes.append((extent.width, extent.height))
        probe.remove()
    line_px = max((h for _, h in sizes), default=0.0) * 1.15
    sides: dict[str, list[tuple[float, float, int]]] = {"left": [], "right": []}
    for i, ((_, xy), (width, _)) in enumerate(zip(labels, sizes)):
        x, y = ax.transData.transform(xy)
        sides["left" if x - gap_px - width >= box.x0 else "right"].append((y, x, i))
    pt_per_px = 72.0 / fig.dpi
    for side, placed in sides.items():
        below = -float("inf")
        for y, _, i in sorted(placed, key=lambda p: p[0] + p[1]):
            at = max(y, below + line_px)
            below = at
            text, xy = labels[i]
            ax.annotate(
                text,
                xy,
                fontsize=7,
                xytext=((-gap_px if side == "left" else gap_px) * pt_per_px, (at - y) * pt_per_px),
                textcoords="offset points",
                ha="right" if side == "left" else "left",
                va="center",
                arrowprops={"arrowstyle": "-", "color": "0.5", "lw": 0.6, "shrinkA": 1, "shrinkB": 4},
            )
