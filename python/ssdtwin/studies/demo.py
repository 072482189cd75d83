"""`ssdtwin demo`: the KIOXIA CM6 namespace experiment (KIOXIA CM6 namespace brief) at a small scale.

For each namespace size the drive is resized with the nvme-cli sequence (detach, delete,
create, attach), preconditioned the SNIA way (sequential 128 KiB over 2x the namespace,
then 4 KiB random over 2x), and the steady-state random-write WAF is measured over one more
namespace of 4 KiB random writes. The closed-form greedy model (Lambert W, Desnoyers 2012)
is printed beside it: NAND not allocated to the namespace is spare for GC, so alpha = data
pool / namespace size. Finally the timed engine runs the brief's random-write job (fio job
file, 4 KiB QD32 x 8 jobs) and reports the steady-state IOPS (the brief: 173,067 at 3.84 TB
and 337,920 at 3.20 TB).

The drive state and the measurement are `experiments.cm6_drive` and `measure_cm6`, the
ones `ssdtwin reproduce cm6` uses: the same size, scale and seed give the same figures.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from .. import _core
from .. import waf as wafm
from ..nvmefmt import si_bytes
from .experiments import cm6_drive, measure_cm6, namespace_fraction, namespace_label


def compared_pair(rows: list[dict[str, Any]]) -> Optional[tuple[dict[str, Any], dict[str, Any]]]:
    """The two sizes the closing line compares: 3.84 TB (else the largest) against 3.20 TB
    (else the smallest), in that order whatever the order of --sizes; None when every size
    is the same. It took the first size given and the 3.20 TB row, so `--sizes 3.20,3.84`
    compared 3.20 TB with itself ("WAF ratio 1.00")."""
    if not rows:
        return None
    by_size = sorted(rows, key=lambda r: -float(r["namespace_tb"]))
    a = next((r for r in rows if abs(r["namespace_tb"] - 3.84) < 1e-9), by_size[0])
    b = next((r for r in rows if abs(r["namespace_tb"] - 3.20) < 1e-9 and r["namespace_tb"] != a["namespace_tb"]), by_size[-1])
    return None if a["namespace_tb"] == b["namespace_tb"] else (a, b)


def run_demo(
    model: str,
    scale: int,
    sizes_tb: list[float],
    seed: int,
    log: Callable[[str], None] = print,
    note: Optional[Callable[[str], None]] = None,
) -> list[dict[str, Any]]:
    """The table on `log`, a line per size before its slow part on `note` (progress)."""
    fractions = [namespace_fraction(model, tb) for tb in sizes_tb]  # every size checked before any work
    rows: list[dict[str, Any]] = []
    log(f"{model} at 1/{scale} scale, seed {seed}: 4 KiB random-write steady state per namespace size")
    log(f"{'namespace':>10} {'blocks @1/' + str(scale):>16} {'OP':>7} {'WAF':>7} {'model':>7} {'diff':>7} {'4K rand write IOPS':>19}")
    t0 = time.perf_counter()
    pool = 0
    ius_per_write = 1
    for tb, fraction in zip(sizes_tb, fractions):
        if note is not None:
            note(f"{namespace_label(tb)} TB: preconditioning, then the random-write job ...")
        p = cm6_drive(model, scale, "rand", fraction, seed)
        d = p.drive
        pool = d.ftl_info()["data_pool_bytes"]
        ns_bytes = d.namespaces()[0].bytes
        alpha = pool / ns_bytes
        # Lambert W counts IUs: where an IU holds several 4 KiB writes (the P5316's 64 KiB),
        # each write programs a whole IU, 16 of them for the 4 KiB written (docs/models.md).
        ius_per_write = max(1, d.ftl_info()["iu_bytes"] // 4096)
        model_waf = _core.waf_greedy(alpha) * ius_per_write
        m = p.steady_measurement  # the last namespace pass of the "rand" state, in fast-forward
        waf = None if m is None else m["waf"]
        iops: Optional[float] = None
        if d.spec().get("timing") is not None:
            iops = measure_cm6(d, "rand-write").iops
        d.close()
        rows.append(
            {"namespace_tb": tb, "blocks": p.blocks, "op": alpha - 1, "waf": waf, **wafm.keys(m), "model_waf": model_waf, "iops": iops}
        )
        iops_s = f"{iops:>19,.0f}" if iops is not None else f"{'(no timing)':>19}"
        # A pass that spans less than a GC cycle and a namespace pass prints no WAF.
        waf_s = f"{waf:>7.3f} {model_waf:>7.3f} {waf / model_waf - 1:>+7.1%}" if waf else f"{'-':>7} {model_waf:>7.3f} {'':>7}"
        # Every digit given (3.205 printed as 3.20TB, the row of another namespace).
        log(f"{namespace_label(tb):>8}TB {p.blocks:>16} {alpha - 1:>7.1%} {waf_s} {iops_s}")
    spans = [r for r in rows if r["waf_verdict"] is not None]
    if spans:
        cycles = [r["waf_gc_cycles"] for r in spans]
        log(
            f"WAF: {wafm.BASIS_TEXT['fast_forward']}{wafm.AT_STEADY_STATE}, one namespace pass of 4 KiB random writes per size "
            f"({min(r['waf_namespace_passes'] for r in spans):.2f} passes, {min(cycles):.1f}-{max(cycles):.1f} GC cycles; "
            f"'-': less than {wafm.NEED})"
        )
    pair = compared_pair(rows)
    if pair is not None:
        a, b = pair
        ratio = f"WAF ratio {a['waf'] / b['waf']:.2f}" if a["waf"] and b["waf"] else "WAF ratio not measured"
        line = f"{namespace_label(a['namespace_tb'])} TB vs {namespace_label(b['namespace_tb'])} TB namespace: {ratio}"
        if a["iops"] and b["iops"]:
            line += f", IOPS ratio {b['iops'] / a['iops']:.2f}"
        if model == "kioxia-cm6-r-3.84t" and abs(a["namespace_tb"] - 3.84) < 1e-9 and abs(b["namespace_tb"] - 3.20) < 1e-9:
            line += " (KIOXIA measured 337,920 / 173,067 = 1.95)"
        log(line)
    log(
        f"OP = data pool / namespace - 1 (data pool = {si_bytes(pool)} at this scale); "
        f"model = greedy GC, Lambert-W form"
        + (f" x {ius_per_write} (4 KiB writes into {4 * ius_per_write} KiB IUs)" if ius_per_write > 1 else "")
        + f". {time.perf_counter() - t0:.0f} s."
    )
    return rows
