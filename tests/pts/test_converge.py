"""Converging rounds in the PTS tests (docs/pts.md, Speed): a round that writes is timed in
full, so the drive's state after it, and every figure of it, is the full run's; a round that
reads alone converges. Each round, run through the PTS twin target as its test runs it, is
checked against the same round timed in full (--no-converge) from the same state on a small
drive. The core's rule for rounds that write (`ssdtwin fio --converge`: carried until GC
copies) is tested in tests/test_fio_converge.py and engine/fio/converge.rs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ssdtwin.pts import tests as T
from ssdtwin.pts.twin import TwinTarget
from twin import copy_image, run_cli, without_timestamps

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


def element(image: Path, work: Path, test: str, el: T.Element, idle_s: float, converge: bool) -> dict[str, Any]:
    """One round of `el` after `idle_s` of idle time, as `test` runs it (its fio JSON under
    test/fio, so the test's rule applies)."""
    (work / test / "fio").mkdir(parents=True)
    job = work / test / f"{el.name}.fio"
    job.write_text(el.job_text())
    tgt = TwinTarget(str(copy_image(image, work / "img")), converge=converge)
    try:
        if idle_s:
            tgt.idle(idle_s)
        return tgt.run_fio(job, work / test / "fio" / f"r01-{el.name}.json")
    finally:
        tgt.close()


def burst(image: Path, work: Path, seconds: float, idle_s: float, converge: bool) -> dict[str, Any]:
    """One HIR burst (RND 4 KiB W, TC4/QD32) after `idle_s` of idle time."""
    return element(image, work, "hir", T.hir_element(4, 32, seconds), idle_s, converge)


def test_a_burst_on_a_fresh_drive_is_timed_in_full_and_is_the_full_burst(images: dict[str, Path], tmp_path: Path) -> None:
    # 20 s of 4 KiB writes fill the fresh drive's free space: no GC at first, a stationary
    # rate the core's default rule would carry in part (an estimated count of writes), then
    # GC copying in cycles. The PTS rule times a round that writes in full: the same burst.
    full = burst(images["fresh"], tmp_path / "full", 20.0, 0, converge=False)
    conv = burst(images["fresh"], tmp_path / "conv", 20.0, 0, converge=True)
    timing = conv["ssdtwin"]["timing"]
    assert "timing" not in full["ssdtwin"]
    assert timing["timed_share"] == 1.0 and "times writes in full" in timing["timed_in_full"]
    assert without_timestamps(conv["jobs"]) == without_timestamps(full["jobs"])


def test_a_read_round_of_the_iops_test_converges_within_half_a_percent(images: dict[str, Path], tmp_path: Path) -> None:
    # RND 4 KiB 100/0 at TC4/QD32 on the used drive: a stationary read round, timed for a
    # small part of its 5 s; IOPS is all the IOPS test reports of it.
    el = T.rnd(4096, 100, 4, 32, 5.0)
    full = element(images["used"], tmp_path / "full", "iops", el, 0, converge=False)
    conv = element(images["used"], tmp_path / "conv", "iops", el, 0, converge=True)
    timing = conv["ssdtwin"]["timing"]
    assert timing["timed_in_full"] is None and timing["timed_share"] < 0.2, timing["timed_share"]
    got, want = conv["jobs"][0]["read"]["iops"], full["jobs"][0]["read"]["iops"]
    assert abs(got - want) <= 0.005 * want, (got, want)


def test_a_burst_at_gc_steady_state_is_timed_in_full_and_is_the_full_burst(images: dict[str, Path], tmp_path: Path) -> None:
    # After 50 s of idle the drive's free pool is back to GC's threshold at once: the burst
    # copies from its start (the core's rule would time it in full too).
    full = burst(images["used"], tmp_path / "full", 5.0, 50.0, converge=False)
    conv = burst(images["used"], tmp_path / "conv", 5.0, 50.0, converge=True)
    timing = conv["ssdtwin"]["timing"]
    assert timing["timed_share"] == 1.0 and "times writes in full" in timing["timed_in_full"]
    assert without_timestamps(conv["jobs"]) == without_timestamps(full["jobs"])
