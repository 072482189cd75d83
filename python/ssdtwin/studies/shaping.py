"""`ssdtwin reproduce shaping` (docs/host.md, Figures): a write-shaping tier in front of the
Intel D5-P5316 (64 KiB IU, QLC), against the drive alone.

1. 4 KiB random writes: end-to-end WAF and bandwidth without shaping, with `iu-fill` and
   with `log`, at three tier sizes; and a 95 % 64 KiB / 5 % 4 KiB mix (separate jobs, as the
   whitepaper's) where the aligned 64 KiB writes bypass the tier.
2. 4 KiB random-write latency and bandwidth at QD1-QD8 with and without the tier, after a
   warm-up that fills the tier (so the sustained rate shows, not the first burst).
3. A sizing curve: tier capacity against the tier's write-hit rate and the end-to-end WAF,
   uniform and zipf:1.2, both policies (a PNG).

Every figure is a prediction: nothing here is fitted. The drive is the P5316 preset as it is;
its baseline against the whitepaper is docs/models.md §14 (the P5316).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from .. import stack as stacklib
from .. import waf as wafm
from ..drive import Drive
from ..fio import parse_string

MODEL = "intel-p5316-15.36t"
MEDIA = "pmem"


@dataclass
class Size:
    """The study's amounts at one size: CI (`quick`) or full."""

    scale: int
    amount_bytes: int  # 4 KiB random writes per figure-1 point
    tier_fractions: tuple[float, ...]  # of the namespace, figures 1 and 2 use the middle one
    sizing_fractions: tuple[float, ...]  # figure 3
    qds: tuple[int, ...] = (1, 2, 4, 8)
    mix: bool = True  # the 95/5 mix of figure 1


QUICK = Size(scale=256, amount_bytes=1 << 30, tier_fractions=(0.001, 0.004, 0.016), sizing_fractions=(0.001, 0.004, 0.016))
SMOKE = Size(scale=256, amount_bytes=256 << 20, tier_fractions=(0.001,), sizing_fractions=(), qds=(1,), mix=False)
FULL = Size(scale=64, amount_bytes=32 << 30, tier_fractions=(0.001, 0.004, 0.02), sizing_fractions=(0.0005, 0.001, 0.004, 0.01, 0.02, 0.05))


_TEMPLATES: dict[tuple[int, int], str] = {}


def prepared(scale: int, seed: int) -> Drive:
    """The whitepaper's random-test state: a sequential 128 KiB fill, then 1 MiB random
    writes (twice the capacity), in fast-forward. Made once per (scale, seed) as an image in
    a temporary folder; every point opens a fresh copy (its maps are megabytes) and never
    commits it."""
    key = (scale, seed)
    if key not in _TEMPLATES:
        root = tempfile.mkdtemp(prefix="ssdtwin-shaping-")
        atexit.register(shutil.rmtree, root, True)
        path = os.path.join(root, "template")
        d = Drive.create(path, MODEL, scale=scale, seed=seed)
        d.precondition(1, "seq", 131072, loops=1, seed=seed)
        d.precondition(1, "rand", 1 << 20, loops=2, seed=seed + 1)
        d.commit()
        d.close()
        _TEMPLATES[key] = path
    template = _TEMPLATES[key]
    copy = os.path.join(os.path.dirname(template), "point")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(template, copy)
    return Drive.open(copy, writable=False)


def job(body: str) -> str:
    return "[global]\nioengine=libaio\ndirect=1\ngroup_reporting\nrandrepeat=0\n" + body


def randwrite(bs: str, qd: int, jobs: int, amount: int, extra: str = "") -> str:
    return job(f"[w]\nrw=randwrite\nbs={bs}\niodepth={qd}\nnumjobs={jobs}\nio_size={amount // jobs}\n{extra}")


def mix(amount: int) -> str:
    """95 % of the bytes in 64 KiB writes (IU-aligned: they bypass), 5 % in 4 KiB, as two jobs."""
    big, small = amount * 95 // 100, amount * 5 // 100
    return job(
        f"[big]\nrw=randwrite\nbs=64k\niodepth=32\nnumjobs=1\nio_size={big // 65536 * 65536}\n"
        f"[small]\nrw=randwrite\nbs=4k\niodepth=32\nnumjobs=1\nio_size={small // 4096 * 4096}\n"
    )


def measure(d: Drive, text: str, state: Optional[stacklib.StackImageState], seed: int, warmup: Optional[str] = None) -> dict[str, Any]:
    """One run on ``d`` (through ``state``'s stack when given): bandwidth, mean latency,
    WAFs over the run. ``warmup`` runs first, unmeasured, so the tier is full and destaging
    (its steady state) when the measured run starts. End-to-end WAF = NAND bytes / host
    bytes of the measured run."""
    if warmup is not None and state is not None:
        _, state = stacklib.run_parsed(d, state, parse_string(warmup, name="warmup.fio", run_seed=seed + 1), idle_gc=False)
    run = parse_string(text, name="shaping.fio", run_seed=seed)
    v0 = d.vendor_log()
    t = time.perf_counter()
    c0: Mapping[str, Any] = {}
    c1: Mapping[str, Any] = {}
    if state is None:
        out = d.run_fio(run.to_engine(*_target(d)), 1, idle_gc=False)
    else:
        c0 = state["stack"].counters()  # a copy: the stack advances in place
        out, state = stacklib.run_parsed(d, state, run, idle_gc=False)
        c1 = state["stack"].counters()
    wall = time.perf_counter() - t
    v1 = d.vendor_log()
    host = sum(r["write"]["io_bytes"] for r in out)
    ios = sum(r["write"]["total_ios"] for r in out)
    secs = max(r["write"]["runtime_ns"] for r in out) / 1e9
    lat_us = sum(r["write"]["lat"]["sum_ns"] for r in out) / max(1, sum(r["write"]["lat"]["n"] for r in out)) / 1e3
    dh = v1["host_write_bytes"] - v0["host_write_bytes"]
    dn = v1["nand_write_bytes"] - v0["nand_write_bytes"]

    def delta(k: str) -> Optional[int]:
        return c1[k] - c0[k] if c1 else None

    # What the run's drive window spans (waf.py): its WAFs are the run's ratios, compared
    # between policies over the same run; the verdict says whether the drive's is also its
    # WAF (docs/models.md, "Measuring WAF").
    m = wafm.measure(v0, v1, "timed", _target(d)[0])
    tier_writes = delta("tier_write_bytes")
    hits = delta("overwrite_hit_bytes")
    return {
        "mib_s": host / secs / 2**20,
        "iops": ios / secs,
        "lat_mean_us": lat_us,
        "end_to_end_waf": dn / host if host else None,
        "drive_waf": dn / dh if dh else None,
        # Bytes the stack sent the drive per host byte, in the measured run.
        "tier_waf": dh / host if c1 and host else None,
        "tier_write_hit_rate": hits / tier_writes if tier_writes and hits is not None else None,
        "evictions": delta("evictions"),
        "stalls": delta("stalls"),
        "host_gc_bytes": delta("gc_write_bytes"),
        "host_bytes": host,
        **wafm.keys(m, "drive_waf"),
        "wall_s": wall,
    }


# The tier policies compared, and with them the drive without a tier (None).
POLICIES: tuple[stacklib.Policy, ...] = ("iu-fill", "log")
WITH_AND_WITHOUT: tuple[Optional[stacklib.Policy], ...] = (None, *POLICIES)


def _target(d: Drive) -> tuple[int, int]:
    ns = {n.nsid: n for n in d.namespaces()}[1]
    return ns.bytes, ns.lba_bytes


def point(size: Size, seed: int, text: str, policy: Optional[stacklib.Policy], fraction: float, warmup_extra: str = "") -> dict[str, Any]:
    """A fresh prepared drive; with a policy, a tier of ``fraction`` of the namespace, filled by
    a warm-up of twice its size in 4 KiB random writes (``warmup_extra``: the same
    distribution as the measured run) before the measured run."""
    d = prepared(size.scale, seed)
    try:
        state = None
        warmup = None
        if policy is not None:
            cap = int(_target(d)[0] * fraction) // (1 << 20) * (1 << 20)
            state = stacklib.new_state(MEDIA, stacklib.tier_params(d, policy, cap))
            warmup = randwrite("4k", 32, 4, 2 * cap, warmup_extra)
        row = measure(d, text, state, seed, warmup)
        row.update(policy=policy or "none", tier_fraction=fraction if policy else 0.0)
        return row
    finally:
        d.close()


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def line(tag: str, r: dict[str, Any]) -> str:
    return (
        f"{tag:<28} {r['mib_s']:9.1f} MiB/s  lat {r['lat_mean_us']:10.1f} us  "
        f"end-to-end WAF {_fmt(r['end_to_end_waf'], '7.2f')}  drive WAF {_fmt(r['drive_waf'], '6.2f')}  "
        f"tier WAF {_fmt(r['tier_waf'], '5.2f')}  hit {_fmt(r['tier_write_hit_rate'], '5.3f')}  "
        f"[drive {wafm.window_label(wafm.from_keys(r, 'drive_waf'))}; {r['wall_s']:.1f} s]"
    )


def shaping(
    full: bool = False, seed: int = 5, plot: Optional[str] = None, log: Callable[[str], None] = print, size: Optional[Size] = None
) -> dict[str, list[dict[str, Any]]]:
    """Figures 1-3; ``size`` overrides the amounts (the tests' smoke size)."""
    size = size or (FULL if full else QUICK)
    out: dict[str, list[dict[str, Any]]] = {"random_4k": [], "qd": [], "sizing": []}
    log(f"P5316 at 1/{size.scale}, PMem tier; the baseline against the whitepaper: docs/models.md §14")
    log("figure 1: 4 KiB random writes, 4 jobs x QD32, and the 95 % 64 KiB / 5 % 4 KiB mix")
    amount = size.amount_bytes
    for policy in WITH_AND_WITHOUT:
        for f in size.tier_fractions if policy else (0.0,):
            r = point(size, seed, randwrite("4k", 32, 4, amount), policy, f)
            r["workload"] = "4k-randwrite"
            out["random_4k"].append(r)
            log(line(f"4k {r['policy']} {f:.2%}", r))
    mid = size.tier_fractions[len(size.tier_fractions) // 2]
    for policy in WITH_AND_WITHOUT if size.mix else ():
        r = point(size, seed, mix(amount), policy, mid if policy else 0.0)
        r["workload"] = "mix-95-64k-5-4k"
        out["random_4k"].append(r)
        log(line(f"mix {r['policy']}", r))
    log("figure 2: 4 KiB random writes, 1 job, QD1-QD8, the tier's size after a warm-up of twice it")
    for qd in size.qds:
        for policy in WITH_AND_WITHOUT:
            d = prepared(size.scale, seed)
            tier_bytes = int(_target(d)[0] * mid)
            d.close()
            r = point(size, seed, randwrite("4k", qd, 1, tier_bytes // 4096 * 4096), policy, mid if policy else 0.0)
            r["qd"] = qd
            out["qd"].append(r)
            log(line(f"QD{qd} {r['policy']}", r))
    log("figure 3: sizing, 4 KiB random writes, uniform and zipf:1.2")
    for dist in ("random", "zipf:1.2"):
        for policy in POLICIES:
            for f in size.sizing_fractions:
                extra = "" if dist == "random" else f"random_distribution={dist}\n"
                r = point(size, seed, randwrite("4k", 32, 4, amount, extra), policy, f, extra)
                r["distribution"] = dist
                out["sizing"].append(r)
                log(line(f"{dist} {policy} {f:.2%}", r))
    if plot is not None:
        plot_sizing(out["sizing"], plot, size)
        log(f"wrote {plot}")
    return out


def plot_sizing(rows: list[dict[str, Any]], path: str, size: Size) -> None:
    from ..cluster import save_figure

    save_figure(sizing_figure(rows, size), Path(path))


def sizing_figure(rows: list[dict[str, Any]], size: Size) -> Any:
    """Figure 3: the tier's write-hit rate and the end-to-end WAF against its size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for dist in ("random", "zipf:1.2"):
        for policy in ("iu-fill", "log"):
            rs = [r for r in rows if r["distribution"] == dist and r["policy"] == policy]
            x = [r["tier_fraction"] * 100 for r in rs]
            label = f"{policy}, {'uniform' if dist == 'random' else dist}"
            a.plot(x, [r["tier_write_hit_rate"] or 0 for r in rs], marker="o", label=label)
            b.plot(x, [r["end_to_end_waf"] for r in rs], marker="o", label=label)
    for ax in (a, b):
        ax.set_xscale("log")
        ax.set_xlabel("tier capacity (% of the drive namespace)")
        ax.grid(True, which="both", alpha=0.3)
    a.set_ylabel("tier write-hit rate")
    b.set_ylabel("end-to-end WAF (NAND bytes / host byte)")
    b.set_yscale("symlog", linthresh=0.1)  # a tier that absorbs everything in the window has WAF 0
    # From 0 (symlog's own limits drew negative WAFs below a point at 0) to above the largest
    # (they clipped its markers at the top edge).
    top = max((r["end_to_end_waf"] for r in rows if r["end_to_end_waf"] is not None), default=1.0)
    b.set_ylim(0, max(1.0, top) * 2)
    a.legend(fontsize=8)
    fig.suptitle(f"PMem tier over an Intel P5316 (1/{size.scale}), 4 KiB random writes")
    fig.tight_layout()
    return fig
