"""``ssdtwin reproduce spdk-rdma``: the SPDK 24.05 NVMe-oF performance reports beyond the TCP
target's core scaling (docs/sources.md, "SPDK NVMe-oF reports"; read second-hand, the PDFs
were not reachable), predicted by the cluster model with costs taken from other documents.
Nothing is fitted to the reports' figures.

Three kinds of figure, on the lab of ``spdk-tcp`` (one target of 2 x Xeon Gold 6348 with 14
KIOXIA CM6-V and 4 ConnectX-5 100 GbE ports; the digests give the same hosts for the RDMA
report's latency and CPU tests, [ASSUMED] for its core scaling):

* ``spdk-rdma``: 4 KiB random reads through SPDK's RDMA target on 8 cores (10.94M IOPS).
* ``kernel-cpu``: the Linux kernel target's (nvmet-rdma, nvmet-tcp) CPU at the IOPS the report
  measured: 10.2 cores at 6,174K IOPS over RDMA, 20.5 cores at 4,018K over TCP. The model's
  figure is its own target cores in use per I/O (the node's ``cores`` counter over its IOPS)
  at the published IOPS.
* ``kernel-qd1``: a 4 KiB read at QD1 through the kernel target less through SPDK's, both
  behind the kernel initiator (the report measured both against a null bdev: RDMA 12.10 and
  9.39 us, TCP 21.39 and 20.43 us). The model runs both targets on the same drive and seed, so
  the drive's own time cancels in the difference.
* ``transport-qd1``: the same read over TCP less over RDMA, SPDK's target on both (20.43 and
  9.39 us).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Optional

from .. import _core
from ..cluster import Cluster, save_figure
from ..core_types import ClusterRun
from . import spdk_tcp
from .ceph_reef import saturating, settled_run

DRIVE = spdk_tcp.DRIVE
SCALE = spdk_tcp.SCALE
REPORT = "SPDK NVMe-oF reports (24.05 RDMA and TCP, second-hand)"
NODE_CPUS = 112  # 2 x Xeon Gold 6348, 28 cores / 56 threads each
SPDK_RDMA_CORES = 8
SPDK_RDMA_IOPS = 10_940_000
# The kernel target's CPU (the reports' CPU-efficiency test): cores busy at the IOPS measured.
KERNEL_CPU = {"nvmeof-rdma": (6_174_000, 10.2), "nvmeof-tcp": (4_018_000, 20.5)}
# QD1 4 KiB random read against a null bdev, kernel initiator: (kernel target, SPDK target) us.
QD1_US = {"nvmeof-rdma": (12.10, 9.39), "nvmeof-tcp": (21.39, 20.43)}
WINDOW_MS = (10, 40)
QD1_IOS = 2000


def set_line(text: str, key: str, value: str, source: str) -> str:
    """`text` with the `{ value, source }` line of `key` replaced (it must be there once)."""
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if line.startswith(f"{key} = ")]
    if len(hits) != 1:
        raise ValueError(f"cluster.toml: expected one '{key}' line, found {len(hits)}")
    lines[hits[0]] = f'{key} = {{ value = {value}, source = "{source}" }}'
    return "\n".join(lines) + "\n"


def lab(stack: str, target: str, cores: int, scale: int = SCALE, seed: int = 1, clients: int = spdk_tcp.CLIENTS) -> Cluster:
    """The report's lab over `stack` with the SPDK (`spdk`, pinned to `cores`) or the kernel
    (`kernel`, on `cores` logical CPUs) target, and `clients` initiators."""
    opts = spdk_tcp.lab_options(scale, seed)
    opts["stack"], opts["clients"] = stack, clients
    text = spdk_tcp.retoml(_core.cluster_init(opts), cores)
    if target == "kernel":
        text = set_line(
            text,
            "target_threads",
            str(cores),
            f"[ASSUMED] {REPORT}: the kernel target is not pinned; its interrupts and work items run on any of "
            f"the node's {cores} logical CPUs",
        )
    src = f"[SRC] {REPORT}: the {'Linux kernel target (nvmet)' if target == 'kernel' else 'SPDK target'} under test"
    return Cluster.from_text(set_line(text, "target_stack", f'"{target}"', src))


def qd1_job(ios: int = QD1_IOS) -> str:
    """One fio job at QD1 from the one initiator (the report's latency test): `ios` reads, the
    same offsets whatever the target, so the drive's own time cancels in a difference."""
    return f"[global]\nioengine=io_uring\ndirect=1\nrw=randread\nbs=4k\niodepth=1\nnumjobs=1\nio_size={ios * 4}k\n[qd1]\nfilename=client0\n"


def _row(experiment: str, stack: str, figure: str, unit: str, model: float, published: float, extra: dict[str, Any]) -> dict[str, Any]:
    err = model / published - 1
    return {
        "experiment": experiment,
        "stack": stack,
        "figure": figure,
        "unit": unit,
        "model": model,
        "published": published,
        "error": err,
        "within_25pct": abs(err) <= 0.25,
        **extra,
    }


def spdk_rdma_point(scale: int, seed: int, progress: Optional[Callable[[int, int, str, int], object]] = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    c = lab("nvmeof-rdma", "spdk", SPDK_RDMA_CORES, scale, seed)
    res, window = settled_run(c, spdk_tcp.job_text, WINDOW_MS, "read", "spdk-rdma-8", progress)
    return _row(
        "spdk-rdma",
        "nvmeof-rdma",
        f"4 KiB random read IOPS, SPDK target on {SPDK_RDMA_CORES} cores",
        "IOPS",
        res["read"]["iops"],
        SPDK_RDMA_IOPS,
        _loaded_run(res, window, t0),
    )


def _loaded_run(res: ClusterRun, window: tuple[int, int], t0: float) -> dict[str, Any]:
    """What a loaded point reports of its run: the saturating resource, the settled window,
    the events simulated and the wall time since `t0`."""
    sat = saturating(res["resources"])
    return {
        "saturating": sat["name"],
        "saturating_utilisation": sat["utilisation"],
        "window_ms": list(window),
        "events": res["events"],
        "wall_s": time.perf_counter() - t0,
    }


def kernel_cpu_point(
    stack: str, scale: int, seed: int, progress: Optional[Callable[[int, int, str, int], object]] = None
) -> dict[str, Any]:
    """The kernel target's cores in use per I/O under the report's load, at its IOPS."""
    t0 = time.perf_counter()
    iops_pub, cores_pub = KERNEL_CPU[stack]
    c = lab(stack, "kernel", NODE_CPUS, scale, seed)
    res, window = settled_run(c, spdk_tcp.job_text, WINDOW_MS, "read", f"kernel-{stack}", progress)
    (node,) = [u for u in res["resources"] if u["name"] == "node0.cores"]
    per_io_us = node["mean_in_use"] / res["read"]["iops"] * 1e6
    return _row(
        "kernel-cpu",
        stack,
        f"kernel target cores in use at {iops_pub / 1e6:.3f}M 4 KiB read IOPS",
        "cores",
        per_io_us * iops_pub / 1e6,
        cores_pub,
        {
            "model_iops": res["read"]["iops"],
            "model_cores": node["mean_in_use"],
            "model_cpu_per_io_us": per_io_us,
            "published_cpu_per_io_us": cores_pub / iops_pub * 1e6,
            **_loaded_run(res, window, t0),
        },
    )


def _qd1_us(stack: str, target: str, scale: int, seed: int, name: str, progress: Optional[Callable[[int, int, str, int], object]]) -> float:
    """Mean latency (us) of the QD1 job from one initiator through `target` over `stack`, on one
    target core."""
    c = lab(stack, target, 1, scale, seed, clients=1)
    _, res = c.run_text(qd1_job(), name=name, progress=progress)
    return float(res["read"]["lat_mean_ns"]) / 1e3


def kernel_qd1_point(
    stack: str, scale: int, seed: int, progress: Optional[Callable[[int, int, str, int], object]] = None
) -> dict[str, Any]:
    """QD1 read latency through the kernel target less through SPDK's (same drive, seed)."""
    t0 = time.perf_counter()
    lat = {target: _qd1_us(stack, target, scale, seed, f"qd1-{target}", progress) for target in ("kernel", "spdk")}
    kernel_pub, spdk_pub = QD1_US[stack]
    published = {"kernel": kernel_pub, "spdk": spdk_pub}
    return _qd1_difference_row("kernel-qd1", stack, "QD1 4 KiB read latency, kernel target less SPDK target", lat, published, t0)


def transport_qd1_point(scale: int, seed: int, progress: Optional[Callable[[int, int, str, int], object]] = None) -> dict[str, Any]:
    """QD1 read latency over TCP less over RDMA, SPDK's target and the kernel initiator on both."""
    t0 = time.perf_counter()
    lat = {stack: _qd1_us(stack, "spdk", scale, seed, f"qd1-{stack}", progress) for stack in ("nvmeof-tcp", "nvmeof-rdma")}
    published = {stack: QD1_US[stack][1] for stack in lat}
    return _qd1_difference_row("transport-qd1", "nvmeof-tcp", "QD1 4 KiB read latency, TCP less RDMA (SPDK target)", lat, published, t0)


def _qd1_difference_row(
    point: str, stack: str, figure: str, lat: dict[str, float], published: dict[str, float], t0: float
) -> dict[str, Any]:
    """A row whose figure is the first QD1 latency less the second, in the model and in the
    report (which measured against a null bdev, so the drive's time cancels in both)."""
    first, second = lat
    extra = {"model_lat_us": lat, "published_lat_us": {**published, "device": "null bdev"}, "wall_s": time.perf_counter() - t0}
    return _row(point, stack, figure, "us", lat[first] - lat[second], published[first] - published[second], extra)


def run(
    scale: int = SCALE, seed: int = 1, log: Callable[[str], None] = print, progress: Optional[Callable[[int, int, str, int], object]] = None
) -> dict[str, Any]:
    t0 = time.perf_counter()
    rows = [spdk_rdma_point(scale, seed, progress)]
    for stack in ("nvmeof-rdma", "nvmeof-tcp"):
        rows.append(kernel_cpu_point(stack, scale, seed, progress))
    for stack in ("nvmeof-rdma", "nvmeof-tcp"):
        rows.append(kernel_qd1_point(stack, scale, seed, progress))
    rows.append(transport_qd1_point(scale, seed, progress))
    for r in rows:
        log(row_line(r))
    return {"scale": scale, "seed": seed, "drive": DRIVE, "rows": rows, "wall_s": time.perf_counter() - t0}


def row_line(r: dict[str, Any]) -> str:
    """One row of the table on stderr. IOPS in whole digits with separators, as every other
    table prints them (",.4g" printed 9.553e+06 IOPS against a published 1.094e+07)."""

    def figure(v: float) -> str:
        return f"{v:,.0f}" if r["unit"] == "IOPS" else f"{v:,.4g}"

    sat = f"  saturating {r['saturating']} {r['saturating_utilisation']:.0%}" if "saturating" in r else ""
    return (
        f"{r['experiment']:<10} {r['stack']:<11} {r['figure']}: {figure(r['model'])} {r['unit']} "
        f"(published {figure(r['published'])}, {r['error']:+.1%}){sat}  [{r['wall_s']:.0f} s wall]"
    )


def plot(result: dict[str, Any], out: Path) -> list[Path]:
    """Model against published, each figure as a ratio (model / published), with the ±25 % band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    rows = result["rows"]
    labels = [
        f"{r['experiment']}\n{'tcp - rdma' if r['experiment'] == 'transport-qd1' else r['stack'].removeprefix('nvmeof-')}" for r in rows
    ]
    ratios = [r["model"] / r["published"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    x = list(range(len(rows)))
    ax.axhspan(0.75, 1.25, color="0.9", label="±25 %")
    ax.axhline(1.0, color="0.5", lw=0.8)
    ax.bar(x, ratios, color=["C0" if r["within_25pct"] else "C3" for r in rows])

    def short(v: float) -> str:
        return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v:.3g}"

    for i, r in enumerate(rows):
        ax.annotate(f"{short(r['model'])} / {short(r['published'])} {r['unit']}", (i, ratios[i]), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set(ylabel="model / published", title="SPDK 24.05 reports: RDMA target, kernel target (14 CM6-V)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    return [save_figure(fig, out / "spdk-rdma.png")]
