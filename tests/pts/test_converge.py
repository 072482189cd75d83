"""Converging rounds where the drive's state moves within a round (docs/pts.md, Speed):
Host Idle Recovery's write bursts, on a fresh drive and after idle time at GC steady state.
Each burst, run through the PTS twin target as the HIR test runs it, is checked against the
same burst timed in full (--no-converge) from the same state on a small drive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ssdtwin.pts import tests as T
from ssdtwin.pts.twin import TwinTarget
from twin import copy_image, run_cli

MODEL = "kioxia-cm6-v-3.2t"


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A fresh CM6-V at 1/454 (8 superblocks), and one at GC steady state."""
    root = tmp_path_factory.mktemp("pts-conv")
    fresh = root / "fresh"
    run_cli("create", fresh, "--model", MODEL, "--scale", "1/454")
    used = copy_image(fresh, root / "used")
    run_cli("precondition", used, "--seq", "128k", "--rand", "4k", "--amount", "1x", "-q")
    return {"fresh": fresh, "used": used}


def burst(image: Path, work: Path, seconds: float, idle_s: float, converge: bool) -> dict[str, Any]:
    """One HIR burst (RND 4 KiB W, TC4/QD32) after `idle_s` of idle time, as the HIR test runs
    it (its fio JSON under hir/fio, so the HIR rule applies)."""
    el = T.hir_element(4, 32, seconds)
    (work / "hir" / "fio").mkdir(parents=True)
    job = work / "hir" / "burst.fio"
    job.write_text(el.job_text())
    tgt = TwinTarget(str(copy_image(image, work / "img")), converge=converge)
    try:
        if idle_s:
            tgt.idle(idle_s)
        return tgt.run_fio(job, work / "hir" / "fio" / "s0001-burst.json")
    finally:
        tgt.close()


def write_iops(doc: dict[str, Any]) -> float:
    return float(doc["jobs"][0]["write"]["iops"])


def test_a_burst_on_a_fresh_drive_is_carried_until_gc_copies_then_timed_to_its_end(images: dict[str, Path], tmp_path: Path) -> None:
    # 20 s of 4 KiB writes fill the fresh drive's free space: no GC at first (a stationary
    # rate, carried in fast-forward), then GC copying data in cycles (timed to the end).
    # Carrying the whole burst at the first sample's rate gave 400.0 K IOPS against 390.8 K.
    full = burst(images["fresh"], tmp_path / "full", 20.0, 0, converge=False)
    conv = burst(images["fresh"], tmp_path / "conv", 20.0, 0, converge=True)
    timing = conv["ssdtwin"]["timing"]
    assert "timing" not in full["ssdtwin"]
    assert timing["timed_in_full"] is None and 0.1 < timing["timed_share"] < 0.95, timing["timed_share"]
    assert "garbage collection" in timing["timed_to_end"]
    assert not timing["samples"][-1]["converged"] and timing["samples"][-1]["fast_forward"] is None
    assert abs(write_iops(conv) - write_iops(full)) <= 0.01 * write_iops(full), (write_iops(conv), write_iops(full))
    assert abs(conv["jobs"][0]["write"]["io_bytes"] - full["jobs"][0]["write"]["io_bytes"]) <= 0.01 * full["jobs"][0]["write"]["io_bytes"]


def test_a_burst_at_gc_steady_state_is_timed_in_full_and_gives_the_full_burst(images: dict[str, Path], tmp_path: Path) -> None:
    # After 50 s of idle the drive's free pool is back to GC's threshold at once: the burst
    # copies from its start, so nothing of it may be carried at a sampled rate.
    full = burst(images["used"], tmp_path / "full", 5.0, 50.0, converge=False)
    conv = burst(images["used"], tmp_path / "conv", 5.0, 50.0, converge=True)
    timing = conv["ssdtwin"]["timing"]
    assert timing["timed_share"] == 1.0 and "garbage collection" in timing["timed_in_full"]
    assert conv["jobs"][0]["write"]["total_ios"] == full["jobs"][0]["write"]["total_ios"]
    assert write_iops(conv) == write_iops(full)
