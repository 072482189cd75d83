"""`ssdtwin calibrate`: fit the timing parameters that seed-facts marks "calibrate".

Only the four CM6-R 3.84 TB figures marked "calibrate" in seed-facts §1 are used, each to
fit exactly one parameter whose datasheet value is unknown:

| figure (3.84 TB namespace)          | parameter               | why this one                          |
|-------------------------------------|-------------------------|---------------------------------------|
| seq read 128 KiB QD16, 6,971 MB/s   | host_link_bytes_per_s   | link/controller data path is the limit |
| rand read 4 KiB QD32, 1,549,202 IOPS| t_read_ns               | 256 reads in flight: NAND read latency and the link set it (Little's law) |
| seq write 128 KiB QD16, 4,246 MB/s  | t_prog_ns               | NAND program bandwidth is the limit    |
| rand write 4 KiB QD32, 173,067 IOPS | gc_page_reads_per_iu    | φ of theory.md §1.6: GC read cost      |

Everything else (the 3.20 TB namespace, mixed workloads, other presets) is a prediction.
Each parameter is solved by a secant search on the simulated figure, in the order above
(later figures depend on earlier parameters, not the reverse).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from importlib import resources
from typing import Any, Callable, Optional

from . import _core
from .drive import Drive
from .fio import parse_string

JOBS = resources.files("ssdtwin") / "jobs"


@dataclass(frozen=True)
class Target:
    name: str
    job: str
    state: str  # "seq" or "rand": the preconditioning the figure was measured after
    metric: str  # "read_mbps", "write_mbps", "read_iops", "write_iops"
    value: float
    param: str


CM6_TARGETS = [
    Target("seq read 128 KiB QD16", "cm6-seq-read.fio", "seq", "read_mbps", 6971.0, "host_link_bytes_per_s"),
    Target("rand read 4 KiB QD32", "cm6-rand-read.fio", "rand", "read_iops", 1_549_202.0, "t_read_ns"),
    Target("seq write 128 KiB QD16", "cm6-seq-write.fio", "seq", "write_mbps", 4246.0, "t_prog_ns"),
    Target("rand write 4 KiB QD32", "cm6-rand-write.fio", "rand", "write_iops", 173_067.0, "gc_page_reads_per_iu"),
]


def timing_toml(timing: dict[str, Any]) -> str:
    """The `[timing]` table (without header) as TOML, values and sources."""
    lines = []
    for k, v in timing.items():
        src = v["source"].replace("\\", "\\\\").replace('"', '\\"')
        val = v["value"]
        lines.append(f'{k} = {{ value = {val if isinstance(val, float) else int(val)}, source = "{src}" }}')
    return "\n".join(lines) + "\n"


def job_text(job: str, runtime_ms: int, ramp_ms: int, fresh: bool = False) -> str:
    """The job file with its runtime filled in. `fresh` adds randrepeat=0 so that repeated
    trials on one drive do not replay the same offsets (which would turn a uniform workload
    into a hot set and lower the WAF trial after trial)."""
    text = (JOBS / job).read_text().replace("${RUNTIME}", f"{runtime_ms}ms").replace("${RAMP}", f"{ramp_ms}ms")
    return text.replace("[global]\n", "[global]\nrandrepeat=0\n", 1) if fresh else text


_trials = iter(range(1, 1 << 62))


def measure(drive: Drive, job: str, metric: str, timing: dict[str, Any], runtime_ms: int, ramp_ms: int) -> float:
    run = parse_string(job_text(job, runtime_ms, ramp_ms, fresh=True), name=job, run_seed=next(_trials))
    out = run_on_ns1(drive, run, timing)
    ios, byts, secs = direction_totals(out, "read" if metric.startswith("read") else "write")
    return float(byts / secs / 1e6 if metric.endswith("mbps") else ios / secs)


def run_on_ns1(drive: Drive, run: Any, timing: Optional[dict[str, Any]] = None) -> list[dict[str, Any]]:
    """Simulate a parsed fio run on namespace 1, without idle-time GC between batches."""
    ns = drive.namespaces()[0]
    return drive.run_fio(run.to_engine(ns.bytes, ns.lba_bytes), 1, idle_gc=False,
                         timing_toml=None if timing is None else timing_toml(timing))


def direction_totals(out: list[dict[str, Any]], d: str) -> tuple[int, int, float]:
    """I/Os and bytes of direction `d` over all clones, and the longest clone runtime (s)."""
    ios = sum(r[d]["total_ios"] for r in out)
    byts = sum(r[d]["io_bytes"] for r in out)
    secs = max(r[d]["runtime_ns"] for r in out) / 1e9
    return ios, byts, secs


def replace_namespace(d: Drive, blocks: int) -> int:
    """Carve the drive anew: namespace 1 detached and deleted, one of `blocks` 512 B LBAs
    created and attached (the KIOXIA resize sequence); returns its NSID."""
    d.nvme.detach_ns(1)
    d.nvme.delete_ns(1)
    nsid = d.nvme.create_ns(blocks, blocks, block_size=512)
    d.nvme.attach_ns(nsid)
    return nsid


def preconditioned(model: str, scale: int, state: str, ns_fraction: float = 1.0, seed: int = 1) -> Drive:
    """A drive in the state a figure was measured in: SNIA WIPC (seq 128 KiB over 2x), and
    for random figures then 4 KiB random writes over 2x (seed-facts §3 and §5). With
    `ns_fraction` < 1 the namespace is first re-created at that fraction of the capacity."""
    d = Drive.in_memory(model, scale=scale, seed=seed)
    if ns_fraction < 1.0:
        cap = d.nvme.id_ctrl()["tnvmcap"]
        replace_namespace(d, int(ns_fraction * cap) // 4096 * 4096 // 512)
    d.precondition(1, "seq", 131072, loops=2, seed=seed)
    if state == "rand":
        d.precondition(1, "rand", 4096, loops=2, seed=seed + 1)
    return d


def solve(f: Callable[[float], float], target: float, x0: float, tol: float, log: Callable[[str], None]) -> tuple[float, float]:
    """Secant search for f(x) = target on log x (f monotone); returns (x, f(x))."""
    xs = [x0, x0 * 1.1]
    ys = [f(xs[0]), f(xs[1])]
    for _ in range(14):
        if abs(ys[-1] / target - 1) <= tol:
            break
        (xa, xb), (ya, yb) = xs[-2:], ys[-2:]
        if ya == yb:
            xn = xb * (target / yb)
        else:
            la, lb = math.log(xa), math.log(xb)
            ln = lb + (target - yb) * (lb - la) / (yb - ya)
            xn = math.exp(max(min(ln, lb + 1.0), lb - 1.0))
        xs.append(xn)
        ys.append(f(xn))
        log(f"    {xn:,.4g} -> {ys[-1]:,.1f}")
    best = min(range(len(xs)), key=lambda i: abs(ys[i] / target - 1))
    return xs[best], ys[best]


def calibrate(model: str, scale: int, runtime_ms: int, ramp_ms: int, tol: float, log: Callable[[str], None]) -> dict[str, Any]:
    spec = _core.preset(model)
    timing = json.loads(json.dumps(spec["timing"]))
    drives = {s: preconditioned(model, scale, s) for s in ("seq", "rand")}
    fitted = {}
    for t in CM6_TARGETS + CM6_TARGETS:  # two sweeps: the figures are weakly coupled
        log(f"{t.name}: fit {t.param} to {t.value:,.0f} {'MB/s' if t.metric.endswith('mbps') else 'IOPS'}")
        t0 = time.perf_counter()

        def f(x: float, t: Target = t) -> float:
            trial = json.loads(json.dumps(timing))
            trial[t.param]["value"] = x if isinstance(timing[t.param]["value"], float) else int(round(x))
            # Random writes fluctuate with GC victim to victim: average over a longer window.
            k = 3 if t.metric == "write_iops" else 1
            return measure(drives[t.state], t.job, t.metric, trial, runtime_ms * k, ramp_ms)

        x, y = solve(f, t.value, float(timing[t.param]["value"]), tol if t.metric != "write_iops" else max(tol, 0.01), log)
        val = x if isinstance(timing[t.param]["value"], float) else int(round(x))
        timing[t.param]["value"] = val
        fitted[t.param] = {"value": val, "figure": t.name, "target": t.value, "simulated": y,
                           "error": y / t.value - 1, "seconds": time.perf_counter() - t0}
        log(f"  {t.param} = {val:,} (simulated {y:,.1f}, {y / t.value - 1:+.2%})")
    return {"model": model, "scale": scale, "runtime_ms": runtime_ms, "ramp_ms": ramp_ms, "fitted": fitted, "timing": timing}


FIGURES = {
    "host_link_bytes_per_s": "seq read 128 KiB QD16 = 6,971 MB/s",
    "t_read_ns": "rand read 4 KiB QD32 x 8 jobs = 1,549,202 IOPS",
    "t_prog_ns": "seq write 128 KiB QD16 = 4,246 MB/s",
    "gc_page_reads_per_iu": "rand write 4 KiB QD32 x 8 jobs = 173,067 IOPS",
}

# Presets sharing the CM6 NAND and firmware take the same calibrated numbers; the CD6 keeps
# its own (datasheet) link ceiling.
FAMILY = {
    "kioxia-cm6-r-3.84t": set(FIGURES),
    "kioxia-cm6-v-3.2t": set(FIGURES),
    "kioxia-cm6-v-1.6t": set(FIGURES),
    "kioxia-cd6-v-3.2t": set(FIGURES) - {"host_link_bytes_per_s"},
}


def write_presets(result: dict[str, Any], directory: Any = None) -> list[str]:
    """Rewrite the calibrated lines of the CM6-family presets with `result["fitted"]`."""
    import re
    from pathlib import Path

    base = Path(directory) if directory else Path(str(resources.files("ssdtwin") / "presets"))
    changed = []
    for name, params in FAMILY.items():
        path = base / f"{name}.toml"
        text = path.read_text()
        for k in sorted(params):
            v = result["fitted"][k]["value"]
            val = f"{v:.4g}" if isinstance(v, float) else str(v)
            src = (f"[CALIBRATED] ssdtwin calibrate kioxia-cm6-r-3.84t --scale 1/{result['scale']} (docs/calibration.md): "
                   f"{FIGURES[k]} (seed-facts §1, 3.84 TB namespace, marked calibrate)")
            if name != "kioxia-cm6-r-3.84t":
                src += "; same NAND and firmware platform as CM6-R 3.84 TB"
            text, n = re.subn(rf"(?m)^{k} = \{{[^\n]*\}}", f'{k} = {{ value = {val}, source = "{src}" }}', text)
            if n != 1:
                raise ValueError(f"{path}: no single '{k} = {{ ... }}' line to update")
        path.write_text(text)
        changed.append(str(path))
    return changed
