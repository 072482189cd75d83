"""`ssdtwin reproduce pblaze5`: the Memblaze PBlaze5 namespaces talk (docs/sources.md) on
the twin. Nothing here is fitted: every figure is a prediction of the
PBlaze5 preset and the controller's QoS, arbitration and DRAM-namespace mechanisms
(docs/models.md §9).

* Study 1, **quotas**: 8 equal namespaces, NS1-4 capped at 391 MB/s, NS5-8 at 39 MB/s by
  the vendor QoS command; sequential 128 KiB reads on all eight at once. The talk: each
  delivers its cap.
* Study 2, **noisy neighbour**: NS1 runs 4 KiB random reads at a fixed 50K IOPS; NS2 a
  greedy workload. NS1's mean and 99.9 % latency alone, with the neighbour, with a QoS cap
  on the neighbour, with weighted round robin arbitration (NS1's queues high, NS2's
  low), and with NS1 and NS2 in separate NVM Sets (a drive built with two sets: disjoint
  dies, free pools and GC; docs/models.md §9).
* Study 3, the **doublewrite buffer** on a DRAM namespace: `studies/doublewrite.py` (the
  InnoDB model, docs/models.md §10), which also runs alone
  (`ssdtwin reproduce pblaze5 --part doublewrite`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional

from ..cluster import save_figure
from ..drive import Drive
from ..fio import parse_string
from ..fio.contract import CloneOut, DirOut
from ..fio.hist import PLAT_NR, percentiles

MODEL = "memblaze-pblaze5-910-3.84t"
MB = 1_000_000
QUOTA_CAPS_MBPS = (391, 391, 391, 391, 39, 39, 39, 39)
VICTIM_IOPS = 50_000


def carve(d: Drive, parts: int) -> list[int]:
    """Namespace 1 replaced by `parts` equal 512 B-LBA namespaces over the whole capacity
    (the nvme-cli sequence), attached; returns their NSIDs."""
    d.nvme.detach_ns(1)
    d.nvme.delete_ns(1)
    blocks = d.nvme.id_ctrl()["tnvmcap"] // 512 // parts // 4096 * 4096
    ids = [d.nvme.create_ns(blocks, blocks) for _ in range(parts)]
    for n in ids:
        d.nvme.attach_ns(n)
    return ids


class NamedClone(CloneOut):
    """A clone's result with its job's name and namespace (every job here names its own)."""

    name: str
    nsid: Optional[int]


def run_text(d: Drive, text: str, name: str, idle_gc: bool = False) -> list[NamedClone]:
    """Simulate a job file whose jobs name their namespaces (filename=nsN); each clone's
    result carries its job's ``name`` and ``nsid``."""
    run = parse_string(text, name=name)
    nss = {n.nsid: n for n in d.namespaces() if n.attached}
    link = int(d.spec()["timing"]["host_link_bytes_per_s"]["value"])
    first = nss[min(nss)]
    specs = run.to_engine(
        first.bytes,
        first.lba_bytes,
        namespace_sizes={k: n.bytes for k, n in nss.items()},
        namespace_lba_bytes={k: n.lba_bytes for k, n in nss.items()},
        link_bytes_per_s=link,
    )
    out = d.run_fio(specs, min(nss), idle_gc)
    return [{**r, "name": s["name"], "nsid": s["namespace"]} for s, r in zip(specs, out)]


def _lat(dirout: DirOut) -> tuple[float, float]:
    """Mean and 99.9th percentile completion latency (us) of one direction of one clone."""
    clat = dirout["clat"]
    n = clat["n"]
    if n == 0:
        return 0.0, 0.0
    dense = [0] * PLAT_NR
    for i, c in clat["hist"]:
        dense[i] += c
    ((_, p999),) = percentiles(dense, n, [99.9])
    return clat["sum_ns"] / n / 1e3, p999 / 1e3


# --------------------------------------------------------------------------- study 1


def quota_job(nsids: Sequence[int], runtime_ms: int, ramp_ms: int) -> str:
    jobs = "".join(f"[ns{n}]\nfilename=ns{n}\n" for n in nsids)
    return (
        f"[global]\nrw=read\nbs=128k\niodepth=32\nioengine=libaio\ndirect=1\ntime_based\n"
        f"runtime={runtime_ms}ms\nramp_time={ramp_ms}ms\n\n{jobs}"
    )


def _fio_bw_mb_s(r: NamedClone) -> float:
    """fio's BW= of a namespace's reads: the bytes fio counts over its runtime. Both ends of
    the window count a queue's worth of reads the drive holds at a capped namespace's rate:
    the reads in flight when the ramp ends count their bytes (fio's own rule, docs/fio.md
    section 4), and the runtime counts draining the reads in flight at its end, so the two
    cancel and BW= is the served rate."""
    return r["read"]["io_bytes"] / (r["read"]["runtime_ns"] / 1e9) / MB


def quota_study(scale: int = 64, seed: int = 1, runtime_ms: int = 2000, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Study 1: per-namespace read bandwidth under the talk's caps, beside an uncapped run."""
    rows: list[dict[str, Any]] = []
    d = Drive.in_memory(MODEL, scale=scale, seed=seed)
    ids = carve(d, len(QUOTA_CAPS_MBPS))
    for n in ids:  # reads of mapped data: each namespace written once, sequentially
        ns = next(x for x in d.namespaces() if x.nsid == n)
        d.precondition(n, "seq", 131072, amount_bytes=ns.bytes, seed=seed)
    text = quota_job(ids, runtime_ms, 500)
    free = {r["nsid"]: _fio_bw_mb_s(r) for r in run_text(d, text, "quota.fio")}
    for n, cap in zip(ids, QUOTA_CAPS_MBPS):
        d.nvme.set_qos(n, read_bytes_per_s=cap * MB)
    capped = {r["nsid"]: _fio_bw_mb_s(r) for r in run_text(d, text, "quota.fio")}
    log(f"Study 1, quotas (PBlaze5 1/{scale}, 8 namespaces, 128 KiB sequential reads QD32 each, {runtime_ms} ms)")
    log(f"{'ns':>3} {'cap MB/s':>9} {'capped MB/s':>12} {'error':>7} {'no cap MB/s':>12}")
    for n, cap in zip(ids, QUOTA_CAPS_MBPS):
        err = capped[n] / cap - 1
        rows.append({"study": "quota", "nsid": n, "cap_mb_s": cap, "mb_s": capped[n], "error": err, "uncapped_mb_s": free[n]})
        log(f"{n:>3} {cap:>9} {capped[n]:>12.1f} {err:>+7.2%} {free[n]:>12.1f}")
    return rows


# --------------------------------------------------------------------------- study 2

NEIGHBOUR_CAP_IOPS = 100_000
# WRR weights (1's based) high, medium, low and the burst: NS1's queues high, NS2's low.
WRR_WEIGHTS = (16, 4, 1)
WRR_BURST_LOG2 = 0


def arbitration_value(high: int, medium: int, low: int, burst_log2: int) -> int:
    """Feature 01h's value: HPW, MPW, LPW (0's based) and AB."""
    return ((high - 1) << 24) | ((medium - 1) << 16) | ((low - 1) << 8) | burst_log2


# The greedy neighbours: the talk's (reads that saturate the controller's command ceiling)
# and a writer (random writes that keep the NAND programming and collecting garbage).
GREEDY_JOBS = {
    "reads": "[greedy]\nfilename=ns2\nrw=randread\nbs=4k\niodepth=128\nnumjobs=8\n",
    "writes": "[greedy]\nfilename=ns2\nrw=randwrite\nbs=4k\niodepth=32\nnumjobs=4\n",
}


def noisy_job(runtime_ms: int, neighbour: bool, greedy: str = "reads") -> str:
    victim = f"[victim]\nfilename=ns1\nrw=randread\nbs=4k\niodepth=32\nrate_iops={VICTIM_IOPS}\n"
    other = GREEDY_JOBS[greedy] if neighbour else ""
    return f"[global]\nioengine=libaio\ndirect=1\ntime_based\nruntime={runtime_ms}ms\nramp_time=200ms\nrandrepeat=0\n\n{victim}\n{other}"


def two_tenants(scale: int, seed: int, nvm_sets: bool) -> Drive:
    """The study's drive: NS1 and NS2 of half the capacity each (the same size either way),
    written once sequentially; with `nvm_sets`, built with two NVM Sets and NS1 in set 1,
    NS2 in set 2 (disjoint dies), else carved from one set of every die."""
    d = Drive.in_memory(MODEL, scale=scale, seed=seed, nvm_sets=2 if nvm_sets else None)
    blocks = d.nvme.id_ctrl()["tnvmcap"] // 512 // 2 // 4096 * 4096
    if nvm_sets:
        for n in (1, 2):
            d.nvme.detach_ns(n)
            d.nvme.delete_ns(n)
        ids = [d.nvme.create_ns(blocks, blocks, nvmsetid=s) for s in (1, 2)]
        for n in ids:
            d.nvme.attach_ns(n)
    else:
        ids = carve(d, 2)
    assert [d.nvme.namespace(n).nsze for n in ids] == [blocks, blocks]
    for n in ids:
        d.precondition(n, "seq", 131072, amount_bytes=blocks * 512, seed=seed)
    return d


def noisy_study(
    scale: int = 64, seed: int = 1, runtime_ms: int = 1000, log: Callable[[str], None] = print, greedy: str = "reads"
) -> list[dict[str, Any]]:
    """Study 2: NS1's latency alone, with a greedy NS2 (`greedy`: the talk's reads, or
    random writes), with a cap on NS2, with WRR, and with NS1 and NS2 in separate NVM Sets
    (a drive built with two, same job). Reads leave the drive as it was, so the read cases
    share one drive; each write case starts from a fresh one."""
    shared = two_tenants(scale, seed, nvm_sets=False)
    drives = [shared]

    def fresh(nvm_sets: bool = False) -> Drive:
        if greedy == "reads" and not nvm_sets:
            shared.nvme.set_qos(2)  # every case starts uncapped, round robin
            shared.nvme.set_feature(0x01, 0)
            return shared
        drives.append(two_tenants(scale, seed, nvm_sets))
        return drives[-1]

    cases: list[tuple[str, bool, Callable[[], Drive]]] = [
        ("alone", False, fresh),
        ("with neighbour", True, fresh),
        (f"neighbour capped at {NEIGHBOUR_CAP_IOPS // 1000}K IOPS", True, lambda: _capped(fresh())),
        ("WRR: NS1 high, NS2 low", True, lambda: _wrr(fresh())),
        (SETS_CASE, True, lambda: fresh(nvm_sets=True)),
    ]
    rows: list[dict[str, Any]] = []
    what = "4 KiB random reads, 8 jobs x QD128" if greedy == "reads" else "4 KiB random writes, 4 jobs x QD32"
    log(f"Study 2, noisy neighbour (PBlaze5 1/{scale}; NS1 4 KiB random reads at {VICTIM_IOPS // 1000}K IOPS;")
    log(f"NS2 greedy: {what})")
    log(f"{'case':<36} {'NS1 mean us':>12} {'NS1 p99.9 us':>13} {'NS1 kIOPS':>10} {'NS2 kIOPS':>10}")
    for name, neighbour, setup in cases:
        drive = setup()
        out = run_text(drive, noisy_job(runtime_ms, neighbour, greedy), "noisy.fio")
        v = [r for r in out if r["read"]["total_ios"] and _job_name(r) == "victim"][0]
        mean, p999 = _lat(v["read"])
        secs = v["read"]["runtime_ns"] / 1e9
        n2 = sum(r["read"]["total_ios"] + r["write"]["total_ios"] for r in out if _job_name(r) == "greedy") / secs
        n1 = v["read"]["total_ios"] / secs
        row = {
            "study": "noisy",
            "neighbour": greedy,
            "case": name,
            "ns1_mean_us": mean,
            "ns1_p999_us": p999,
            "ns1_iops": n1,
            "ns2_iops": n2,
        }
        rows.append(row)
        log(f"{name:<36} {mean:>12.1f} {p999:>13.1f} {n1 / 1e3:>10.1f} {n2 / 1e3:>10.1f}")
    for x in drives:
        x.close()
    return rows


SETS_CASE = "NVM sets: NS1, NS2 on disjoint dies"


def _capped(d: Drive) -> Drive:
    d.nvme.set_qos(2, iops=NEIGHBOUR_CAP_IOPS)
    return d


def _wrr(d: Drive) -> Drive:
    d.nvme.set_feature(0x01, arbitration_value(*WRR_WEIGHTS, WRR_BURST_LOG2))
    d.nvme.set_sq_priority(1, "high")
    d.nvme.set_sq_priority(2, "low")
    return d


def _job_name(r: NamedClone) -> str:
    return r["name"]


def noisy_plot(rows: Sequence[dict[str, Any]], path: str) -> None:
    """Study 2 as bar charts (mean and 99.9 %, log scale), one panel per neighbour, to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [k for k in GREEDY_JOBS if any(r["study"] == "noisy" and r.get("neighbour", "reads") == k for r in rows)]
    fig, axes = plt.subplots(1, len(kinds), figsize=(7 * len(kinds), 4.5), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        got = [r for r in rows if r["study"] == "noisy" and r.get("neighbour", "reads") == kind]
        xs = range(len(got))
        ax.bar([x - 0.2 for x in xs], [r["ns1_mean_us"] for r in got], 0.4, label="mean")
        ax.bar([x + 0.2 for x in xs], [r["ns1_p999_us"] for r in got], 0.4, label="99.9 %")
        ax.set_yscale("log")
        ax.set_ylabel("NS1 read latency (us)")
        # Wrapped: "with neighbour" and "neighbour capped at 100K IOPS" ran into each other.
        ax.set_xticks(list(xs), [textwrap.fill(r["case"], 16) for r in got], fontsize=7)
        ax.set_title(f"NS1 4 KiB random reads at 50K IOPS, NS2 greedy {kind}", fontsize=9)
        ax.legend()
    fig.suptitle("PBlaze5 twin: a polite tenant beside a greedy one")
    save_figure(fig, Path(path))


# --------------------------------------------------------------------------- study 3 (hook)


def doublewrite_study(scale: int = 64, seed: int = 1, quick: bool = False, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Study 3, the InnoDB doublewrite buffer on a DRAM namespace (NAND write amplification
    2.478 -> 1.335 in the talk): the shared and DRAM placements at 64 threads
    (studies/doublewrite.py). `quick` shortens the warm-up and windows fourfold."""
    from . import doublewrite

    warm, each = doublewrite.windows_ms(scale)
    if quick:
        warm, each = warm // 4, each // 4
    return doublewrite.doublewrite_study(scale, seed, log=log, warmup_ms=warm, window_ms=each)


def pblaze5_talk(
    scale: int = 64, seed: int = 1, plot: Optional[str] = None, quick: bool = False, log: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """Every study of the talk, in order; `plot` writes study 2's figure there."""
    rows = quota_study(scale, seed, runtime_ms=500 if quick else 2000, log=log)
    log("")
    rows += noisy_study(scale, seed, runtime_ms=200 if quick else 1000, log=log)
    log("")
    rows += noisy_study(scale, seed, runtime_ms=200 if quick else 1000, log=log, greedy="writes")
    log("")
    rows += doublewrite_study(scale, seed, quick=quick, log=log)
    if plot:
        noisy_plot(rows, plot)
        log(f"plot: {plot}")
    return rows
