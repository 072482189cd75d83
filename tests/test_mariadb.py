"""The doublewrite study with a real MariaDB (docs/models.md, "The doublewrite study with a
real MariaDB"), short: `ssdtwin serve` with a NAND and a DRAM namespace, ext4 on each through
nbdfuse + fuse2fs, MariaDB's system tablespace (the doublewrite buffer) on the DRAM
namespace's file system, a few seconds of sysbench oltp_write_only. The full study is
`make mariadb` (`ssdtwin reproduce pblaze5 --part mariadb`).

Skipped, with the reason, when a tool or FUSE is missing; CI installs them all (.ci/run).
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Any

import pytest

from ssdtwin.studies import mariadb

# pytest-xdist (`--dist loadfile`, the Makefile's): the module's tests on one worker, so its
# MariaDB server (the module fixture, ~16 s) starts once, and two `mariadb-install-db` never
# run at once (a CI run had one fail while the other worker's succeeded).
pytestmark = [pytest.mark.tools]

TINY = mariadb.Config(scale=256, threads=4, tables=1, table_size=30_000, run_s=5, buffer_pool="6M", pace="off", fill=False)
WRITE_BUFFER_BYTES = 12 << 20  # the preset's write buffer: data written before a window may be programmed in it


@pytest.fixture(scope="module")
def dram(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    why = mariadb.missing()
    if why:
        pytest.skip(why)
    return mariadb.run_placement(tmp_path_factory.mktemp("mariadb"), "dram", TINY, log=lambda _: None)


def test_o_direct_and_fsync_work_through_fuse2fs(tmp_path: Path) -> None:
    """What InnoDB needs of the file system: O_DIRECT writes of aligned pages, and fsync
    that succeeds (without nbdkit's blocksize filter under nbdfuse it fails: e2fsprogs
    rewrites single superblock bytes, which libnbd refuses)."""
    why = mariadb.missing()
    if why:
        pytest.skip(why)
    image = tmp_path / "img"
    mariadb.prepare_image(image, "shared", TINY)
    with mariadb.served(image, tmp_path / "nbd.sock", "off"), mariadb.mounted(tmp_path / "nbd.sock", "ns1", tmp_path, ()) as fs:
        fd = os.open(fs / "page", os.O_CREAT | os.O_RDWR | os.O_DIRECT)
        try:
            page = mmap.mmap(-1, 16384)  # page-aligned, as O_DIRECT requires
            page.write(b"x" * 16384)
            assert os.pwrite(fd, page, 16384) == 16384
            os.fsync(fd)
            os.fdatasync(fd)
        finally:
            os.close(fd)


def test_mariadb_keeps_its_system_tablespace_on_the_dram_namespace(dram: dict[str, Any]) -> None:
    assert "/ns2-fs/" in dram["ibdata1_path"], dram["ibdata1_path"]
    assert dram["tps"] > 0
    assert dram["innodb_dblwr_pages_written"] > 0, "pages were flushed through the doublewrite buffer"


def test_the_doublewrite_bytes_never_reach_nand(dram: dict[str, Any]) -> None:
    """Every doublewrite copy went to the DRAM namespace: what NAND programmed for the host
    is at most what the NAND namespace received (host bytes less the copies), give or take
    the write buffer's contents at the window's edges."""
    dblwr = dram["innodb_dblwr_pages_written"] * 16384
    assert dram["host_bytes"] > dblwr
    assert dram["host_program_bytes"] <= dram["host_bytes"] - dblwr + WRITE_BUFFER_BYTES, dram


def test_the_runs_waf_is_the_drives_only_over_a_gc_cycle(dram: dict[str, Any]) -> None:
    """Five seconds of sysbench write a few MiB of a 15 GB namespace: no WAF of the drive's,
    only the run's ratio (waf_window_raw), and the text says why (docs/models.md, "Measuring WAF")."""
    assert dram["waf_basis"] == "timed" and dram["waf_host_bytes"] == dram["host_bytes"] > 0
    assert dram["waf_verdict"] == "insufficient" and dram["waf"] is None, dram
    assert dram["waf_window_raw"] == pytest.approx(dram["nand_bytes"] / dram["host_bytes"])
    assert mariadb.describe(dram).startswith("dram   WAF: not measured (window wrote ")
