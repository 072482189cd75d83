"""Asymmetric Namespace Access (docs/cli.md `nvme ana-log`) from the CLI and over NBD: identify fields, the
ANA log with nvme-cli's JSON names, the vendor command that sets a group's state, and I/O to
an inaccessible group failing with its ANA status (fio) or EIO (a real NBD client).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from test_bad_input import assert_one_line_error
from test_serve import need, served
from twin import image_digest, run_cli


def job(tmp_path: Path, rw: str) -> Path:
    p = tmp_path / f"{rw}.fio"
    p.write_text(f"[j]\nfilename=ns1\nrw={rw}\nbs=4k\nsize=4m\n")
    return p


def test_groups_states_and_io(small: Path, tmp_path: Path) -> None:
    ctrl = run_cli("nvme", "id-ctrl", small, "-o", "json").json()
    assert (ctrl["cmic"], ctrl["anacap"], ctrl["anatt"], ctrl["anagrpmax"], ctrl["nanagrpid"]) == (8, 0x5F, 10, 64, 64)
    assert run_cli("nvme", "id-ns", small, "-n", "1", "-o", "json").json()["anagrpid"] == 1
    log = run_cli("nvme", "ana-log", small, "-o", "json").json()
    assert list(log) == ["Asymmetric Namespace Access Log for NVMe device", "chgcnt", "ngrps", "ANA DESC LIST "]
    assert log["ANA DESC LIST "] == [{"grpid": 1, "nnsids": 1, "chgcnt": 0, "state": "optimized", "NSIDS": [{"nsid": 1}]}]
    # nvme-cli 2.4's nvme_show_ana_log, its format strings as they are (the twin had no
    # headings, printed the NSIDs as a bare "\t1" and no empty line after the group)
    want = "ANA LOG HEADER :-\nchgcnt\t:\t0\nngrps\t:\t1\nANA Log Desc :-\ngrpid\t:\t1\nnnsids\t:\t1\nchgcnt\t:\t0\n"
    want += "state\t:\toptimized\n\tnsid\t:\t1\n\n"
    assert run_cli("nvme", "ana-log", small).stdout == f"Asymmetric Namespace Access Log for NVMe device: {small}\n" + want
    run_cli("nvme", "ana-state", small, "--group", "1", "--state", "non-optimized")
    run_cli("fio", small, job(tmp_path, "randread"))
    run_cli("nvme", "ana-state", small, "-g", "1", "-s", "inaccessible")
    log = run_cli("nvme", "ana-log", small, "-o", "json").json()
    assert (log["chgcnt"], log["ANA DESC LIST "][0]["state"], log["ANA DESC LIST "][0]["chgcnt"]) == (2, "inaccessible", 2)
    before = image_digest(small)
    for rw in ("randread", "randwrite"):
        r = run_cli("fio", small, job(tmp_path, rw), check=False)
        assert_one_line_error(r, "ANA_INACCESSIBLE(0x302)", "namespace 1")
    assert image_digest(small) == before
    # a state given by number is echoed by name, as the log spells it
    assert run_cli("nvme", "ana-state", small, "-g", "1", "-s", "0xf").stdout == "ana-state: Success, group:1 state:change\n"
    assert run_cli("nvme", "ana-state", small, "-g", "1", "-s", "1").stdout == "ana-state: Success, group:1 state:optimized\n"
    run_cli("fio", small, job(tmp_path, "randwrite"))


def test_an_inaccessible_group_reads_eio_over_nbd(small: Path, tmp_path: Path) -> None:
    need("nbdcopy")
    run_cli("nvme", "ana-state", small, "-g", "1", "-s", "inaccessible")
    with served(small) as s:
        p = subprocess.run(["nbdcopy", "--no-extents", s.uri("ns1"), "null:"], capture_output=True, text=True, timeout=120)
        s.stop()
    assert p.returncode != 0 and "Input/output error" in p.stderr, p.stderr
