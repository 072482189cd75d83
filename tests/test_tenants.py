"""The multi-tenant drive (issue 12) end to end: DRAM namespaces on the PBlaze5, from the
CLI and served over NBD to real clients.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from test_serve import need, served, sh, vendor
from twin import copy_image, image_digest, run_cli

PB5 = "memblaze-pblaze5-910-3.84t"
MIB = 1 << 20


@pytest.fixture(scope="module")
def pb5_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PBlaze5 at 1/64: a 512 MiB NAND namespace (ns1) and a 32 MiB DRAM namespace (ns2)."""
    d = tmp_path_factory.mktemp("pb5") / "pb5"
    run_cli("create", d, "--model", PB5, "--scale", "1/64")
    run_cli("nvme", "detach-ns", d, "-n", "1")
    run_cli("nvme", "delete-ns", d, "-n", "1")
    run_cli("nvme", "create-ns", d, "-s", str(MIB), "-c", str(MIB), "-b", "512")
    r = run_cli("nvme", "create-ns", d, "--dram", "-s", str(32 * MIB // 512), "-c", str(32 * MIB // 512), "-b", "512")
    assert r.stdout.strip() == "create-ns: Success, created nsid:2"
    for n in ("1", "2"):
        run_cli("nvme", "attach-ns", d, "-n", n, "-c", "1")
    return d


@pytest.fixture
def pb5(tmp_path: Path, pb5_template: Path) -> Path:
    return copy_image(pb5_template, tmp_path / "pb5")


def test_dram_namespace_is_identified_and_listed(pb5: Path) -> None:
    ctrl = run_cli("nvme", "id-ctrl", pb5, "-o", "json").json()
    assert ctrl["vs_dram_ns"] == {"budget_bytes": 64 * MIB, "unallocated_bytes": 32 * MIB}
    assert run_cli("nvme", "id-ns", pb5, "-n", "2", "-o", "json").json()["vs_dram"] == 1
    assert "vs_dram" not in run_cli("nvme", "id-ns", pb5, "-n", "1", "-o", "json").json()
    rows = run_cli("nvme", "list", pb5, "-o", "json").json()["Devices"][0]["Namespaces"]
    assert [(r["nsid"], r["dram"], r["nuse"]) for r in rows] == [(1, False, 0), (2, True, 32 * MIB // 512)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--dram", "-s", str(32 * MIB // 512 + 1), "-c", str(32 * MIB // 512 + 1), "-b", "512"), "NS_INSUFFICIENT_CAPACITY"),
        (("--dram", "-s", "8193", "-c", "8193", "-b", "4096"), "33554432 bytes of the 67108864-byte DRAM budget free (at most 8192 blocks"),
        (("--dram", "-s", "0", "-c", "0"), "must be at least 1 block"),
        (("--dram", "-s", "8", "-c", "4"), "THIN_PROVISIONING"),
    ],
)
def test_bad_dram_namespaces_are_refused_in_one_line(pb5: Path, args: tuple[str, ...], message: str) -> None:
    before = image_digest(pb5)
    r = run_cli("nvme", "create-ns", pb5, *args, check=False)
    assert r.returncode != 0 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert image_digest(pb5) == before


def test_no_dram_budget_and_no_namespace_ids_left_are_refused(tmp_path: Path, pb5: Path) -> None:
    cm6 = tmp_path / "cm6"
    run_cli("create", cm6, "--model", "kioxia-cm6-r-3.84t", "--scale", "1/454")
    r = run_cli("nvme", "create-ns", cm6, "--dram", "-s", "8", "-c", "8", check=False)
    assert r.returncode != 0 and "has no DRAM namespaces" in r.stderr, r.stderr
    # Namespaces up to the preset's 32; the 33rd is refused with the NVMe status.
    for _ in range(30):
        run_cli("nvme", "create-ns", pb5, "-s", "8", "-c", "8")
    before = image_digest(pb5)
    r = run_cli("nvme", "create-ns", pb5, "--dram", "-s", "8", "-c", "8", check=False)
    assert r.returncode != 0 and "NS_ID_UNAVAILABLE" in r.stderr and "all 32 namespace IDs are in use" in r.stderr, r.stderr
    assert image_digest(pb5) == before


def test_a_served_dram_namespace_stores_data_and_writes_no_nand(tmp_path: Path, pb5: Path) -> None:
    need("qemu-img")
    data = os.urandom(24 * MIB)
    src, out = tmp_path / "src.raw", tmp_path / "out.raw"
    src.write_bytes(data)
    before = vendor(pb5)
    with served(pb5) as s:
        sh("qemu-img", "convert", "-n", "-f", "raw", "-O", "raw", src, s.uri("ns2"))
        s.stop()
    with served(pb5) as s:  # a restart: the data is the image's, not the process's
        sh("qemu-img", "convert", "-f", "raw", "-O", "raw", s.uri("ns2"), out)
        s.kill()  # a power loss
    got = out.read_bytes()
    assert len(got) == 32 * MIB and got[: len(data)] == data
    v = vendor(pb5)
    assert v["dram_write_bytes"] - before["dram_write_bytes"] >= len(data)
    assert v["host_write_bytes"] - before["host_write_bytes"] == v["dram_write_bytes"] - before["dram_write_bytes"]
    assert v["nand_write_bytes"] == before["nand_write_bytes"], "DRAM-namespace writes never reach NAND"
    # The power loss dumped the whole DRAM namespace to its reserved NAND area.
    assert v["dram_flush_bytes"] - before["dram_flush_bytes"] == 32 * MIB
    assert run_cli("nvme", "smart-log", pb5, "-o", "json").json()["unsafe_shutdowns"] == 1
