"""`ssdtwin demo`: the KIOXIA CM6 namespace experiment (seed-facts §1) at a small scale.

For each namespace size the drive is purged, resized with the nvme-cli sequence
(detach, delete, create, attach), preconditioned the SNIA way (sequential 128 KiB over
2x the namespace, then 4 KiB random over 2x), and the steady-state random-write WAF is
measured over one more namespace of 4 KiB random writes. The closed-form greedy model
(Lambert W, theory.md §1.1) is printed beside it: NAND not allocated to the namespace is
spare for GC, so alpha = data pool / namespace size. Finally the timed engine runs the
brief's random-write job (fio job file, 4 KiB QD32 x 8 jobs) for a few simulated seconds and
reports the steady-state IOPS (the brief: 173,067 at 3.84 TB and 337,920 at 3.20 TB).
"""

from __future__ import annotations

import time

import typer

from . import _core
from .calibrate import job_text, replace_namespace
from .drive import Drive
from .experiments import run_job
from .nvmefmt import si_bytes


def run_demo(model: str, scale: int, sizes_tb: list[float], seed: int, quiet: bool) -> list[dict[str, float]]:
    full = _core.preset(model)
    full_cap = full["capacity"]["tnvmcap_bytes"]["value"]
    rows = []
    typer.echo(f"{model} at 1/{scale} scale, seed {seed}: 4 KiB random-write steady state per namespace size")
    typer.echo(f"{'namespace':>10} {'blocks @1/' + str(scale):>16} {'OP':>7} {'WAF':>7} {'model':>7} {'diff':>7} {'4K rand write IOPS':>19}")
    t0 = time.perf_counter()
    for tb in sizes_tb:
        d = Drive.in_memory(model, scale=scale, seed=seed)
        cap = d.nvme.id_ctrl()["tnvmcap"]
        info = d.ftl_info()
        fraction = tb * 1e12 / full_cap
        if not 0 < fraction <= 1.0 + 1e-9:
            raise ValueError(f"--sizes {tb}: must be above 0 and at most the drive's {full_cap / 1e12:.2f} TB")
        ns_bytes = min(int(fraction * cap) // 4096 * 4096, cap)
        blocks = ns_bytes // 512
        nsid = replace_namespace(d, blocks)
        d.precondition(nsid, "seq", 131072, loops=2)
        d.precondition(nsid, "rand", 4096, loops=2)
        r = d.precondition(nsid, "rand", 4096, loops=1)
        alpha = info["data_pool_bytes"] / ns_bytes
        model_waf = _core.waf_greedy(alpha)
        iops = None
        if d.spec().get("timing") is not None:
            iops = run_job(d, job_text("cm6-rand-write.fio", 3000, 1000), "cm6-rand-write.fio", run_seed=seed).iops
        row = {"namespace_tb": tb, "blocks": blocks, "op": alpha - 1, "waf": r.waf, "model_waf": model_waf, "iops": iops}
        rows.append(row)
        iops_s = f"{iops:>19,.0f}" if iops is not None else f"{'(no timing)':>19}"
        typer.echo(
            f"{tb:>8.2f}TB {blocks:>16} {alpha - 1:>7.1%} {r.waf:>7.3f} {model_waf:>7.3f} {r.waf / model_waf - 1:>+7.1%} {iops_s}"
        )
        d.close()
    if len(rows) >= 2:
        a, b = rows[0], next((r for r in rows if abs(r["namespace_tb"] - 3.20) < 1e-9), rows[-1])
        line = f"{a['namespace_tb']:.2f} TB vs {b['namespace_tb']:.2f} TB namespace: WAF ratio {a['waf'] / b['waf']:.2f}"
        if a["iops"] and b["iops"]:
            line += f", IOPS ratio {b['iops'] / a['iops']:.2f}"
        if abs(a["namespace_tb"] - 3.84) < 1e-9 and abs(b["namespace_tb"] - 3.20) < 1e-9:
            line += " (KIOXIA measured 337,920 / 173,067 = 1.95)"
        typer.echo(line)
    typer.echo(f"OP = data pool / namespace - 1 (data pool = {si_bytes(info['data_pool_bytes'])} at this scale); "
               f"model = greedy GC, Lambert-W form. {time.perf_counter() - t0:.0f} s.")
    return rows
