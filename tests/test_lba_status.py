"""Rebuild assist (Get LBA Status, docs/cli.md `nvme get-lba-status`): an injected unrecoverable range fails reads with
Unrecovered Read Error (fio) or EIO (a real NBD client), `get-lba-status` reports it with
nvme-cli's flags and JSON names, and writing the range again repairs it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from test_bad_input import assert_one_line_error
from test_serve import need, served
from twin import run_cli


def job(tmp_path: Path, rw: str, offset: int, size: int) -> Path:
    p = tmp_path / f"{rw}.fio"
    p.write_text(f"[j]\nfilename=ns1\nrw={rw}\nbs=4k\noffset={offset}\nsize={size}\n")
    return p


def status(image: Path, *args: str) -> dict[str, object]:
    d: dict[str, object] = run_cli("nvme", "get-lba-status", image, "-n", "1", *args, "-o", "json").json()
    return d


def test_unrecoverable_ranges_are_reported_and_rebuilt(small: Path, tmp_path: Path) -> None:
    assert status(small)["Number of LBA Status Descriptors (NLSD)"] == 0
    run_cli("nvme", "inject-media-error", small, "-n", "1", "-s", "2048", "-c", "16")
    run_cli("nvme", "inject-media-error", small, "-n", "1", "-s", "900000", "-c", "1")
    st = status(small, "-s", "0", "-a", "0x11")
    assert list(st)[:3] == ["Number of LBA Status Descriptors (NLSD)", "Completion Condition (CMPC)", "cmpc-definition"]
    assert (st["Number of LBA Status Descriptors (NLSD)"], st["Completion Condition (CMPC)"]) == (2, 2)
    assert st["LSD entry 0"] == [{"DSLBA": "0x0000000000000800"}, {"NLB": "0x00000010"}, {"status": "0x00"}]
    assert status(small, "-l", "4096")["Number of LBA Status Descriptors (NLSD)"] == 1
    # the text is nvme-cli 2.16's stdout_lba_status, C's %#016x and all (the twin printed
    # a table of its own under "LBA Status Descriptor Entries")
    assert run_cli("nvme", "get-lba-status", small, "-n", "1").stdout == (
        "Number of LBA Status Descriptors(NLSD): 2\nCompletion Condition(CMPC): 2\n"
        "\tCompleted the specified action over the number of LBAs specified\n"
        "\tin the Range Length field and transferred all available LBA Status\n\tDescriptor Entries\n"
        "{ DSLBA: 0x00000000000800, NLB: 0x000010, Status: 00 }\n{ DSLBA: 0x000000000dbba0, NLB: 0x000001, Status: 00 }\n"
    )
    # 512-byte LBAs: 2048 is byte 1 MiB.
    r = run_cli("fio", small, job(tmp_path, "read", 1 << 20, 64 << 10), check=False)
    assert_one_line_error(r, "READ_ERROR(0x4281)", "LBAs 2048..2063 are unrecoverable")
    # (A failed run commits nothing, its SMART media error count included.)
    # The host rebuilds the range from elsewhere: it reads back again.
    run_cli("fio", small, job(tmp_path, "write", 1 << 20, 8 << 10))
    run_cli("fio", small, job(tmp_path, "read", 1 << 20, 64 << 10))
    assert status(small)["Number of LBA Status Descriptors (NLSD)"] == 1


def test_an_unrecoverable_range_reads_eio_over_nbd(small: Path) -> None:
    need("nbdcopy")
    run_cli("nvme", "inject-media-error", small, "-n", "1", "-s", "0", "-c", "8")
    with served(small) as s:
        p = subprocess.run(["nbdcopy", "--no-extents", s.uri("ns1"), "null:"], capture_output=True, text=True, timeout=120)
        s.stop()
    assert p.returncode != 0 and "Input/output error" in p.stderr, p.stderr
