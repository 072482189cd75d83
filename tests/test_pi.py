"""Metadata formats and end-to-end protection information (docs/cli.md, docs/models.md).

Format NVM with PI through the CLI, the identify fields nvme-cli prints, the cost of PI in
the timing model (a 4096+8 format's IOPS against 4096+0 on the same fio job), and a
corrupted tag surfacing as its NVMe status in a fio run and as EIO over NBD.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from test_serve import need, served, sh
from twin import image_digest, run_cli

CM6 = "kioxia-cm6-v-1.6t"

# Random 4 KiB reads at a depth where the controller's command slot binds (the CM6's
# 1.7M IOPS ceiling), so a per-command cost shows in IOPS.
READS = """[global]
ioengine={engine}
filename=ns1
rw=randread
iodepth=64
numjobs=8
size=256m
runtime=20ms
time_based=1
group_reporting=1
{extra}
[r]
"""


@pytest.fixture
def cm6(tmp_path: Path) -> Path:
    d = tmp_path / "cm6"
    run_cli("create", d, "--model", CM6, "--scale", "1/64", "--seed", "3")
    return d


def fmt(image: Path, *args: str, check: bool = True) -> object:
    return run_cli("nvme", "format", image, "-n", "1", *args, check=check)


def fill(image: Path) -> None:
    job = image.parent / "fill.fio"
    job.write_text("[w]\nfilename=ns1\nrw=write\nbs=128k\nsize=256m\niodepth=32\n")
    run_cli("fio", image, job, "--output-format=json")


def iops(image: Path, engine: str = "libaio", extra: str = "") -> float:
    job = image.parent / "r.fio"
    job.write_text(READS.format(engine=engine, extra=extra if "bs=" in extra else extra + "\nbs=4k"))
    return float(run_cli("fio", image, job, "--output-format=json").json()["jobs"][0]["read"]["iops"])


def test_format_with_pi_shows_in_identify(cm6: Path) -> None:
    fmt(cm6, "--lbaf", "4", "-i", "1", "-p", "1", "-m", "1")
    ns = run_cli("nvme", "id-ns", cm6, "-n", "1", "-o", "json").json()
    assert ns["flbas"] == 0x14 and ns["dps"] == 0x09 and ns["dpc"] == 0x1F and ns["mc"] == 3
    assert [(f["ms"], 1 << f["ds"]) for f in ns["lbafs"]] == [(0, 512), (0, 4096), (8, 512), (64, 512), (8, 4096), (64, 4096)]
    row = run_cli("nvme", "list", cm6, "-o", "json").json()["Devices"][0]
    assert row["SectorSize"] == 4096 and "4096   B +  8 B" in run_cli("nvme", "list", cm6).stdout


def test_pi_costs_iops_when_the_controller_binds(cm6: Path) -> None:
    """The protection-information figure (docs/models.md §12): a format with PI type 1 against the same data size
    without metadata, same jobs. PI costs a per-command check, so it shows where the
    controller's command slot binds (512 B reads of deallocated blocks: no NAND, 0.87 GB/s on
    the link) and not
    where the NAND does (4 KiB reads of written data: 1.15M IOPS on 64 planes)."""
    rows = {}
    for lbaf, pi, bs in ((1, "0", "4k"), (4, "1", "4k"), (0, "0", "512"), (2, "1", "512")):
        fmt(cm6, "--lbaf", str(lbaf), "-i", pi)
        if bs == "4k":
            fill(cm6)  # else deallocated blocks: read without NAND, the controller binds
        rows[(bs, pi)] = iops(cm6, extra=f"bs={bs}")
    nand_bound = rows[("4k", "1")] / rows[("4k", "0")]
    ctrl_bound = rows[("512", "1")] / rows[("512", "0")]
    # The model's cost: 30 ns of check on the CM6's 588 ns command slot (-4.9 %).
    assert 0.94 < ctrl_bound < 0.96, rows
    assert 0.98 < nand_bound < 1.02, rows
    print(f"\nrandread QD64x8, IOPS: {rows}; 4096+8/4096+0 {nand_bound - 1:+.1%}; 512+8/512+0 {ctrl_bound - 1:+.1%}")


SCAN = "[scan]\nioengine={engine}\nfilename=ns1\nrw=read\nbs=4k\nsize=1m\n{extra}\n"


def scan(image: Path, engine: str, extra: str = "") -> object:
    """A sequential read of the first MiB (LBA 100 of a 4 KiB format is at 400 KiB)."""
    job = image.parent / "scan.fio"
    job.write_text(SCAN.format(engine=engine, extra=extra))
    return run_cli("fio", image, job, "--output-format=json", check=False)


def test_a_corrupted_tag_fails_a_checking_read(cm6: Path) -> None:
    fmt(cm6, "--lbaf", "4", "-i", "1")
    fill(cm6)
    run_cli("nvme", "inject-pi-error", cm6, "-n", "1", "-s", "100", "--tags", "guard")
    # io_uring_cmd with pi_act=1 and no pi_chk checks nothing: the run completes.
    assert scan(cm6, "io_uring_cmd", "cmd_type=nvme").returncode == 0
    r = scan(cm6, "io_uring_cmd", "cmd_type=nvme\npi_chk=GUARD,REFTAG")
    assert r.returncode != 0 and "GUARD_CHECK" in r.stderr and r.stdout == "", r
    assert len([ln for ln in r.stderr.splitlines() if "GUARD_CHECK" in ln]) == 1, r.stderr
    # Checking only the reference tag passes; the kernel's path (libaio) checks guard + ref.
    assert scan(cm6, "io_uring_cmd", "cmd_type=nvme\npi_chk=REFTAG").returncode == 0
    assert "GUARD_CHECK" in scan(cm6, "libaio").stderr
    # A write of the LBA stores fresh PI.
    w = cm6.parent / "w.fio"
    w.write_text("[w]\nfilename=ns1\nrw=write\nbs=4k\noffset=400k\nsize=4k\n")
    run_cli("fio", cm6, w, "--output-format=json")
    assert scan(cm6, "libaio").returncode == 0


def test_nbd_read_of_a_corrupted_lba_is_eio(tmp_path: Path, cm6: Path) -> None:
    need("qemu-img")
    fmt(cm6, "--lbaf", "4", "-i", "1")
    src = tmp_path / "s.raw"
    src.write_bytes(os.urandom(1 << 20))
    with served(cm6) as s:
        sh("qemu-img", "convert", "-n", "-f", "raw", "-O", "raw", src, s.uri("ns1"))
        s.stop()
    run_cli("nvme", "inject-pi-error", cm6, "-n", "1", "-s", "3", "--tags", "reftag")
    with served(cm6) as s:
        bad = s.uri("ns1")
        p = sh_fail("qemu-img", "convert", "-f", "raw", "-O", "raw", bad, tmp_path / "o.raw")
        assert "Input/output error" in p, p
        # The rest of the namespace reads back (the first 12 KiB are intact too).
        sh("qemu-img", "dd", "-f", "raw", "-O", "raw", f"if={bad}", f"of={tmp_path / 'head.raw'}", "bs=4k", "count=3")
        s.stop()
    assert (tmp_path / "head.raw").read_bytes() == src.read_bytes()[: 3 * 4096]


def sh_fail(*argv: str | os.PathLike[str]) -> str:
    p = subprocess.run([os.fspath(a) for a in argv], capture_output=True, text=True, timeout=300)
    assert p.returncode != 0, f"{argv} succeeded"
    return p.stderr


def test_bad_protection_requests_leave_the_image_alone(cm6: Path, tmp_path: Path) -> None:
    before = image_digest(cm6)
    r = fmt(cm6, "--lbaf", "1", "-i", "1", check=False)
    assert r.returncode != 0 and "INVALID_FORMAT" in r.stderr and "8 bytes of metadata" in r.stderr, r.stderr
    r = fmt(cm6, "--lbaf", "9", check=False)
    assert r.returncode != 0 and "4=4096+8 B" in r.stderr, r.stderr
    r = run_cli("nvme", "inject-pi-error", cm6, "-n", "1", "-s", "0", check=False)
    assert r.returncode != 0 and "without protection information" in r.stderr, r.stderr
    r = run_cli("nvme", "inject-pi-error", cm6, "-n", "1", "-s", "0", "--tags", "crc", check=False)
    assert r.returncode != 0 and "guard, apptag, reftag" in r.stderr, r.stderr
    assert image_digest(cm6) == before
    p5316 = tmp_path / "p5316"
    run_cli("create", p5316, "--model", "intel-p5316-15.36t", "--scale", "1/256")
    r = run_cli("nvme", "format", p5316, "-n", "1", "--lbaf", "1", "-i", "1", check=False)
    assert r.returncode != 0 and "supported types: none" in r.stderr, r.stderr
