"""NVM Sets and Endurance Groups (docs/models.md §9) from the CLI: an image built with sets,
namespaces placed in them, Identify CNS 04h, log 09h, and the refusals (one line, the NVMe
status or the allowed range, the image unchanged). The autouse fixture checks every image.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from ssdtwin.commands.common import drive_view
from test_bad_input import assert_one_line_error
from test_serve import need, served, sh
from twin import copy_image, image_digest, namespace_rows, run_cli

PB5 = "memblaze-pblaze5-910-3.84t"


@pytest.fixture(scope="module")
def sets_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PBlaze5 at 1/64 built with 2 NVM Sets: ns1 fills set 1, ns2 set 2 (the factory state)."""
    d = tmp_path_factory.mktemp("sets") / "pb5"
    r = run_cli("create", d, "--model", PB5, "--scale", "1/64", "--nvm-sets", "2")
    assert "in 2 NVM Sets" in r.stdout, r.stdout
    return d


@pytest.fixture
def pb5(tmp_path: Path, sets_template: Path) -> Path:
    return copy_image(sets_template, tmp_path / "pb5")


def test_sets_are_identified_listed_and_logged(pb5: Path) -> None:
    ctrl = run_cli("nvme", "id-ctrl", pb5, "-o", "json").json()
    assert (ctrl["ctratt"] & 0x14, ctrl["nsetidmax"], ctrl["endgidmax"]) == (0x14, 2, 2)
    sets = run_cli("nvme", "id-nvmset", pb5, "-o", "json").json()
    assert sets["nid"] == 2 and [e["nvmset_id"] for e in sets["NVMSet"]] == [1, 2]
    assert sum(e["total_nvmset_cap"] for e in sets["NVMSet"]) == ctrl["tnvmcap"]
    ids = [(n, run_cli("nvme", "id-ns", pb5, "-n", str(n), "-o", "json").json()["nvmsetid"]) for n in (1, 2)]
    assert ids == [(1, 1), (2, 2)]
    ns2 = run_cli("nvme", "id-ns", pb5, "-n", "2", "-o", "json").json()
    assert (ns2["nvmsetid"], ns2["endgid"]) == (2, 2)
    # Writes to ns2 show in Endurance Group 2's log only.
    run_cli("precondition", pb5, "-n", "2", "--seq", "128k", "--loops", "0.01", "-q")
    g1 = run_cli("nvme", "endurance-log", pb5, "-g", "1", "-o", "json").json()
    g2 = run_cli("nvme", "endurance-log", pb5, "-g", "2", "-o", "json").json()
    assert g1["data_units_written"] == 0 and g1["media_units_written"] == 0
    assert g2["data_units_written"] > 0 and g2["host_write_cmds"] > 0 and g2["media_units_written"] > 0
    text = run_cli("nvme", "endurance-log", pb5, "-g", "2").stdout
    # nvme-cli 2.16's stdout_endurance_log, its format strings as they are (the twin padded
    # with spaces and printed percent_used without its %)
    fmt = (
        "Endurance Group Log for NVME device:{dev} Group ID:2\ncritical_warning\t: {critical_warning}\n"
        "endurance_group_features: {endurance_group_features}\navl_spare\t\t: {avl_spare}\n"
        "avl_spare_threshold\t: {avl_spare_threshold}\npercent_used\t\t: {percent_used}%\n"
        "domain_identifier\t: {domain_identifier}\nendurance_estimate\t: {endurance_estimate}\n"
        "data_units_read\t\t: {data_units_read}\ndata_units_written\t: {data_units_written}\n"
        "media_units_written\t: {media_units_written}\nhost_read_cmds\t\t: {host_read_cmds}\n"
        "host_write_cmds\t\t: {host_write_cmds}\nmedia_data_integrity_err: {media_data_integrity_err}\n"
        "num_err_info_log_entries: {num_err_info_log_entries}\ntotal_end_grp_cap\t: {total_end_grp_cap}\n"
        "unalloc_end_grp_cap\t: {unalloc_end_grp_cap}\n"
    )
    assert text == fmt.format(dev=pb5, **drive_view(pb5).endurance_log(2))  # the 2.4 JSON lacks four
    assert "NVM Set Attribute Entry[ 1]" in run_cli("nvme", "id-nvmset", pb5).stdout


def test_id_nvmset_takes_nvme_cli_s_flag_spelling(pb5: Path) -> None:
    """nvme-cli 2.4 spells id-nvmset's flag --nvmset_id (with an underscore): a script's
    `--nvmset_id=2` was "No such option"."""
    want = run_cli("nvme", "id-nvmset", pb5, "-i", "2", "-o", "json").json()
    assert [e["nvmset_id"] for e in want["NVMSet"]] == [2]
    assert run_cli("nvme", "id-nvmset", pb5, "--nvmset_id=2", "-o", "json").json() == want
    assert run_cli("nvme", "id-nvmset", pb5, "--nvmset-id", "2", "-o", "json").json() == want


def test_namespaces_are_created_in_the_set_asked_for_within_its_capacity(pb5: Path) -> None:
    run_cli("nvme", "detach-ns", pb5, "-n", "2")
    run_cli("nvme", "delete-ns", pb5, "-n", "2")
    free = run_cli("nvme", "id-nvmset", pb5, "-i", "2", "-o", "json").json()["NVMSet"][0]["unalloc_nvmset_cap"]
    # Larger than the set: refused with the set's room, the image unchanged.
    before = image_digest(pb5)
    n = str(free // 512 + 1)
    line = assert_one_line_error(run_cli("nvme", "create-ns", pb5, "-s", n, "-c", n, "-i", "2", check=False), "NS_INSUFFICIENT_CAPACITY")
    assert f"at most {free // 512} blocks of 512 B" in line and "NVM Set 2" in line
    assert image_digest(pb5) == before
    half = free // 512 // 2
    for flag in ("-i", "--nvm-set"):
        r = run_cli("nvme", "create-ns", pb5, "-s", str(half), "-c", str(half), flag, "2")
        assert r.stdout.startswith("create-ns: Success")
    assert [r["nvmsetid"] for r in namespace_rows(pb5)] == [1, 2, 2]
    assert run_cli("nvme", "id-nvmset", pb5, "-i", "2", "-o", "json").json()["NVMSet"][0]["unalloc_nvmset_cap"] == free - 2 * half * 512


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("nvme", "create-ns", "{img}", "-s", "8", "-c", "8", "-i", "3"), ("INVALID_FIELD", "NVM Set 3 does not exist", "1..=2")),
        (("nvme", "create-ns", "{img}", "-s", "8", "-c", "8", "-i", "1"), ("NS_INSUFFICIENT_CAPACITY", "NVM Set 1", "at most 0 blocks")),
        (
            ("nvme", "create-ns", "{img}", "--dram", "-s", "8", "-c", "8", "-i", "1"),
            ("INVALID_FIELD", "a DRAM namespace lies in no NVM Set"),
        ),
        (("nvme", "id-nvmset", "{img}", "-i", "3"), ("INVALID_FIELD", "NVM Set 3 does not exist")),
        (("nvme", "endurance-log", "{img}", "-g", "3"), ("INVALID_FIELD", "endurance groups 1..=2")),
        (("nvme", "endurance-log", "{img}", "-g", "0"), ("endurance group 0 does not exist",)),
        (("nvme", "create-ns", "{img}", "-s", "8", "-c", "8", "-i", "70000"), ("-i",)),
    ],
)
def test_bad_set_commands_are_refused_in_one_line(pb5: Path, args: tuple[str, ...], needles: tuple[str, ...]) -> None:
    before = image_digest(pb5)
    argv = [str(pb5) if a == "{img}" else a for a in args]
    if "70000" in argv:  # out of the 16-bit NVMSETID: the CLI's own range error
        r = run_cli(*argv, check=False)
        assert r.returncode == 1 and "-i/--nvmset-id 70000" in r.stderr and "0..65535" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    else:
        assert_one_line_error(run_cli(*argv, check=False), *needles)
    assert image_digest(pb5) == before


@pytest.mark.parametrize(
    ("model", "sets", "needles"),
    [
        (PB5, "3", ("--nvm-sets 3", "1, 2, 4, 8, 16", "not 3")),
        (PB5, "32", ("not 32",)),
        ("kioxia-cm6-r-3.84t", "2", ("has no NVM Sets", "use 1")),
    ],
)
def test_bad_set_counts_are_refused_at_create(tmp_path: Path, model: str, sets: str, needles: tuple[str, ...]) -> None:
    img = tmp_path / "img"
    assert_one_line_error(run_cli("create", img, "--model", model, "--scale", "1/64", "--nvm-sets", sets, check=False), *needles)
    assert not img.exists()


def test_a_drive_without_sets_refuses_set_commands(tmp_path: Path) -> None:
    cm6 = tmp_path / "cm6"
    run_cli("create", cm6, "--model", "kioxia-cm6-r-3.84t", "--scale", "1/454")
    before = image_digest(cm6)
    assert_one_line_error(run_cli("nvme", "id-nvmset", cm6, check=False), "INVALID_FIELD", "has no NVM Sets")
    assert_one_line_error(run_cli("nvme", "endurance-log", cm6, "-g", "1", check=False), "INVALID_LOG_PAGE")
    assert_one_line_error(run_cli("nvme", "create-ns", cm6, "-s", "8", "-c", "8", "-i", "1", check=False), "without NVM Sets")
    assert image_digest(cm6) == before
    assert run_cli("nvme", "id-ns", cm6, "-n", "1", "-o", "json").json()["nvmsetid"] == 0


def live_group(image: Path, endgid: int, done: Callable[[dict[str, Any]], bool], timeout: float = 60) -> dict[str, Any]:
    """Endurance Group `endgid`'s log while serving (the server's live.json, rewritten every
    second, later on a loaded machine), re-read until `done`."""
    t0 = time.monotonic()
    while True:
        r = run_cli("nvme", "endurance-log", image, "-g", str(endgid), "-o", "json")
        assert "being served" in r.stderr, r.stderr
        g: dict[str, Any] = r.json()
        if done(g):
            return g
        assert time.monotonic() - t0 < timeout, f"the live log never showed the expected state: {g}"
        time.sleep(0.2)


def test_sets_hold_while_serving(tmp_path: Path, pb5: Path) -> None:
    """A real client writes a 64 MiB namespace in set 2 over NBD: the live view and the
    committed image count the traffic in Endurance Group 2 only."""
    need("qemu-img")
    run_cli("nvme", "detach-ns", pb5, "-n", "2")
    run_cli("nvme", "delete-ns", pb5, "-n", "2")
    run_cli("nvme", "create-ns", pb5, "-s", "131072", "-c", "131072", "-b", "512", "-i", "2")  # 64 MiB
    run_cli("nvme", "attach-ns", pb5, "-n", "2", "-c", "1")
    data = os.urandom(8 << 20)
    src = tmp_path / "src.raw"
    src.write_bytes(data)
    with served(pb5) as s:
        sh("qemu-img", "convert", "-n", "-f", "raw", "-O", "raw", src, s.uri("ns2"))
        live = live_group(pb5, 2, lambda g: g["data_units_written"] > 0)
        assert live["host_write_cmds"] > 0
        s.stop()
    g1 = run_cli("nvme", "endurance-log", pb5, "-g", "1", "-o", "json").json()
    g2 = run_cli("nvme", "endurance-log", pb5, "-g", "2", "-o", "json").json()
    assert g1["data_units_written"] == 0 and g1["host_write_cmds"] == 0
    assert g2["data_units_written"] >= len(data) // 512_000
