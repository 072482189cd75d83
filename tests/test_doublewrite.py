"""The InnoDB model (python/ssdtwin/jobs/innodb-doublewrite.fio) and the modelled doublewrite
study of the Memblaze PBlaze5 namespaces talk (docs/models.md, "An InnoDB workload").

What must hold, from the job file's own definition and the drive's physics (none of the
talk's figures is asserted: they are predictions, compared in the docs):

* the real fio reads the shipped job file as the twin does (same option echo);
* flow control keeps the database's byte ratios: every page written is written twice
  (doublewrite copy, home), one read per page written, redo 1/32 of the page bytes;
* with the doublewrite file on the DRAM namespace, its bytes are host writes and never NAND
  writes; NAND write amplification falls and the data namespace's writes get faster;
* with the doublewrite file on a 64 MB NAND namespace of its own (the control), nothing
  changes on NAND: it is the DRAM, not the separate namespace, that matters.

Small drives (1/256: 9 superblocks) and short windows keep each run to seconds.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ssdtwin.fio import parse_string
from ssdtwin.studies import doublewrite as dw
from test_bad_input import assert_one_line_error
from twin import run_cli

SCALE = 256
WARMUP_MS = 15_000  # 60 s at 1/64, scaled: the same GC cycles
WINDOW_MS = 1_500


def study_env(placement: str = "shared", threads: int = 64, runtime_ms: int = 1000) -> dict[str, str]:
    d, layout = dw.build_drive(placement, SCALE, 1) if placement == "shared" else (None, None)
    if d is not None:
        d.close()
    assert layout is not None
    return layout.env(threads, runtime_ms)


def test_the_real_fio_reads_the_job_file_as_the_twin_does(tmp_path: Path) -> None:
    fio = shutil.which("fio")
    if fio is None:
        pytest.skip("the real fio binary is not installed")
    env = study_env()
    job = tmp_path / dw.JOB
    job.write_text(dw.job_text())
    real = subprocess.run([fio, "--showcmd", str(job)], capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    assert parse_string(dw.job_text(), name=str(job), env=env).showcmd() == real.stdout
    parsed = subprocess.run([fio, "--parse-only", str(job)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert parsed.returncode == 0, parsed.stderr


def test_layout_is_the_talks_at_scale() -> None:
    d, layout = dw.build_drive("shared", SCALE, 1)
    try:
        ns = d.namespaces()[0]
        assert layout.data_bytes == pytest.approx(ns.bytes * 3.0 / 3.84, rel=1e-3), "3 TB of tablespaces on the 3.84 TB namespace"
        assert layout.data_bytes % dw.PAGE_BYTES == 0
        assert layout.dblwr_offset + dw.DBLWR_FILE_BYTES <= ns.bytes
        assert dw.DBLWR_FILE_BYTES <= dw.DRAM_NS_BYTES, "the doublewrite file fits the DRAM namespace"
        v = d.vendor_log()
        assert v["valid_bytes"] + v["buffered_bytes"] >= layout.data_bytes, "the load wrote the tablespaces"
    finally:
        d.close()


@pytest.mark.parametrize(
    ("part", "option", "needle"),
    [
        ("doublewrite", "--placements", "each of shared, dram, nand"),
        ("doublewrite", "--drive-state", "each of trimmed, written"),
        ("doublewrite", "--threads", "a comma-separated list of whole numbers"),
        ("mariadb", "--placements", "each of shared, nand, dram"),
    ],
)
def test_an_empty_list_is_refused_not_taken_for_the_default(part: str, option: str, needle: str) -> None:
    """`--placements ''` (a shell variable left empty) ran the default placements: a study
    of minutes (the mariadb part: half an hour) instead of a one-line error."""
    r = run_cli("reproduce", "pblaze5", "--part", part, option, "", check=False, process=True, timeout=30)
    assert_one_line_error(r, f"{option} ''", needle)


def test_threads_must_divide_the_flow_round() -> None:
    with pytest.raises(ValueError, match="must divide 3840"):
        dw.Layout(1 << 30, 1 << 30, 1, 2 << 30).env(7, 1000)


@pytest.fixture(scope="module")
def window() -> dw.Window:
    d, layout = dw.build_drive("shared", SCALE, 1)
    try:
        return dw.run_window(d, layout, 64, 2000, run_seed=1)
    finally:
        d.close()


def test_flow_keeps_the_databases_byte_ratios(window: dw.Window) -> None:
    user, dblwr, redo = (window.job_ios[j] for j in ("user", "doublewrite", "redo"))
    pages = user["writes"] * dw.PAGE_BYTES
    assert user["reads"] == pytest.approx(user["writes"], rel=0.03), "one miss read per page flushed"
    assert dblwr["writes"] * 120 * dw.PAGE_BYTES == pytest.approx(pages, rel=0.03), "every page doublewritten once"
    assert redo["writes"] * 65536 == pytest.approx(pages / 32, rel=0.05), "redo 1/32 of the page bytes"
    # In this placement everything is written to namespace 1.
    assert set(window.ns_writes) == {1}
    assert window.host_bytes == sum(window.ns_write_bytes.values())


def run(placement: str) -> dict[str, Any]:
    return dw.run_placement(placement, SCALE, 1, 64, WARMUP_MS, WINDOW_MS).row()


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, Any]]:
    return {p: run(p) for p in dw.PLACEMENTS}


@pytest.mark.slow
def test_the_dram_namespaces_writes_are_host_writes_and_never_nand_writes(rows: dict[str, dict[str, Any]]) -> None:
    r = rows["dram"]
    assert r["second_ns_host_bytes"] > 0.3 * r["host_bytes"], "about half the host bytes are doublewrite copies"
    # NAND programs host data of namespace 1 only (give or take the write buffer's contents
    # at the windows' edges), never the DRAM namespace's.
    ns1 = r["host_bytes"] - r["second_ns_host_bytes"]
    assert r["host_program_bytes"] <= ns1 + 9 * 12 * 2**20, r
    assert rows["shared"]["second_ns_host_bytes"] == 0
    # Shared: the copies are programmed too (the 15 MiB of active shards outlast the 12 MiB buffer).
    assert rows["shared"]["host_program_bytes"] > 0.9 * rows["shared"]["host_bytes"]


@pytest.mark.slow
def test_doublewrite_on_dram_lowers_waf_and_the_data_namespaces_write_latency(rows: dict[str, dict[str, Any]]) -> None:
    shared, dram = rows["shared"], rows["dram"]
    assert shared["waf"] > 1.5 * dram["waf"], (shared["waf"], dram["waf"])
    assert shared["data_write_lat_ms"] > dram["data_write_lat_ms"]
    assert dram["read_iops"] > shared["read_iops"], "the buffer pool's misses are served faster"


@pytest.mark.slow
def test_a_separate_nand_namespace_is_not_enough(rows: dict[str, dict[str, Any]]) -> None:
    """The control: the doublewrite file on a 64 MB NAND namespace still reaches NAND and
    shares its superblocks with the data: the WAF stays that of the shared placement."""
    assert rows["nand"]["waf"] == pytest.approx(rows["shared"]["waf"], rel=0.1)
    assert rows["nand"]["waf"] > 1.5 * rows["dram"]["waf"]


@pytest.mark.slow
def test_a_written_namespace_leaves_gc_less_spare(rows: dict[str, dict[str, Any]]) -> None:
    """The drive-state bracket (docs/models.md §10.4): when the namespace's LBAs beyond the
    database were written before the load, they stay valid and cold, so GC works with less
    free NAND and the same workload costs more NAND writes."""
    written = dw.run_placement("dram", SCALE, 1, 64, WARMUP_MS, WINDOW_MS, state="written").row()
    assert written["drive_state"] == "written" and rows["dram"]["drive_state"] == "trimmed"
    assert written["waf"] > 1.3 * rows["dram"]["waf"], (written["waf"], rows["dram"]["waf"])
    with pytest.raises(ValueError, match="drive state 'full'"):
        dw.build_drive("dram", SCALE, 1, state="full")


@pytest.mark.slow
def test_the_waf_says_what_its_windows_span(rows: dict[str, dict[str, Any]]) -> None:
    """The row's WAF (compared with the talk's ratio over its run) is the ratio over the
    measurement windows; its waf_* keys and the text say what they span and whether that is
    also the drive's WAF (docs/models.md, "Measuring WAF")."""
    for placement, r in rows.items():
        assert r["waf_basis"] == "timed" and r["waf_host_bytes"] == r["host_bytes"], placement
        steady = r["waf_gc_cycles"] >= 1 or r["waf_namespace_passes"] >= 1
        assert r["waf_verdict"] == ("steady" if steady else "insufficient"), r
        text = dw.describe(r)
        assert f"[timed window: {r['host_bytes'] / 2**30:,.1f} GiB written, {r['waf_namespace_passes']:.2f} namespace passes" in text
        assert ("GC cycles; steady; its 9 windows" if steady else "not the drive's WAF; its 9 windows") in text, text
