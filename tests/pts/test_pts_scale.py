"""WSAT and HIR on the same drive at two scales (docs/pts.md, What --scale changes): WSAT at
1/32 and 1/128, HIR at 1/64 and 1/128 with 5 s rounds (0.2 and 0.4 drive fill a pre-HIR
round, as 10 s rounds at 1/32 and 1/64: fine enough for the fill window below).

WSAT is measured in drive fills: a 1/N drive fills N times sooner and its WSAT segment is the
round divided by N, so IOPS against drive fills must agree between scales (the GC cycle is
per fill). HIR's wait states are times and do not shrink. Its random writes agree between
scales when measured in drive fills (the pre-HIR steady-state window does not: it spans N
times more fills on a 1/N drive), and both drives recover during a long idle wait; a scaled
drive has N times less spare to recover, so its recovery is not asserted equal.

The drive is a CM6-V 1.6 TB (50 GB at 1/32, 25 GB at 1/64, 12.5 GB at 1/128). HIR at 1/64
and 1/128 takes 10 s of CPU (19 s at 1/32 and 1/64 with 10 s rounds): per-fill IOPS 2.8 %
apart (bound 5 %; 1.8 % at the larger pair), recovery after the idle wait +11 % and +12 %
(bound +5 %; +21 %); with the twin's idle time doing no background GC (a broken model) the
recovery is -7 % and -6 % and the test fails (docs/performance.md, "CI time")."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ssdtwin import Drive, pts

MODEL = "kioxia-cm6-v-1.6t"
SCALES = ("1/32", "1/128")
HIR_SCALES = ("1/64", "1/128")
HIR_ROUND_S = 5.0


def _run(tmp_path: Path, scale: str, test: str, round_s: float = 10.0, **settings: object) -> pts.PtsResult:
    img = tmp_path / f"img-{scale.replace('/', '_')}"
    Drive.create(img, MODEL, scale=scale).close()
    res = pts.run(str(img), test, tmp_path / f"rep-{test}-{scale.replace('/', '_')}", round_s, render=False, **settings)
    with Drive.open(img, writable=False) as d:
        d.check()
    assert res.status[test] == "complete", res.results[test]
    return res


def _mean_iops_by_fills(table: pd.DataFrame, lo: float, hi: float) -> float:
    rows = table[(table.drive_fills > lo) & (table.drive_fills <= hi)]
    assert len(rows) >= 3, f"too few WSAT segments between {lo} and {hi} drive fills"
    return float(rows.iops.mean())


@pytest.mark.slow
def test_wsat_iops_per_drive_fill_agree_between_scales(tmp_path: Path) -> None:
    tables = {s: _run(tmp_path, s, "wsat", wsat_fills=2.0).tables["wsat"] for s in SCALES}
    fob = [_mean_iops_by_fills(tables[s], 0.1, 0.5) for s in SCALES]
    saturated = [_mean_iops_by_fills(tables[s], 1.5, 2.0) for s in SCALES]
    for a, b, what in ((fob[0], fob[1], "FOB"), (saturated[0], saturated[1], "after 1.5 fills")):
        assert abs(a / b - 1) < 0.03, f"{what}: {a:,.0f} IOPS at 1/32 vs {b:,.0f} at 1/128"
    # Saturation is visible at both scales: GC costs write IOPS once the spare is used.
    assert all(s < 0.9 * f for s, f in zip(saturated, fob))


@pytest.mark.slow
def test_hir_preconditioning_agrees_per_fill_and_both_scales_recover_when_idle(tmp_path: Path) -> None:
    settings = {"hir_reps": 2, "hir_waits_s": (50.0,), "hir_pre_fills": 3.0}
    results = {s: _run(tmp_path, s, "hir", HIR_ROUND_S, **settings) for s in HIR_SCALES}
    # The pre-HIR rounds (RND 4 KiB W, 5 s rounds: 0.2 fill at 1/64, 0.4 at 1/128) measured
    # in drive fills: the same drive, saturating the same way.
    pre = {s: results[s].frames["hir"][lambda f: f.phase == "pre"] for s in HIR_SCALES}
    per_fill = [_mean_iops_by_fills(pre[s], 1.5, 3.3) for s in HIR_SCALES]
    assert abs(per_fill[0] / per_fill[1] - 1) < 0.05, f"{per_fill[0]:,.0f} IOPS at 1/64 vs {per_fill[1]:,.0f} at 1/128"
    for s in HIR_SCALES:
        base = float(results[s].results["hir"]["extra"]["baseline_iops"])
        t = results[s].tables["hir"]
        after_idle = float(t[(t.phase == "A") & (t.iteration >= 2)].iops.mean())
        assert after_idle > 1.05 * base, f"{s}: {after_idle:,.0f} IOPS after a 50 s idle vs baseline {base:,.0f}"
