"""The everyday nvme-cli verbs (list-ns, list-ctrl, error-log, fw-log, get-log), sanitize
and per-namespace crypto erase, end to end through the CLI (docs/cli.md).

JSON field names are nvme-cli 2.x's (nvme-print-json.c); the images are CM6 at 1/454 (a
few superblocks), so each test runs in seconds. Crypto erase over NBD runs the real
nbdcopy against `ssdtwin serve` and skips when it is not installed.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ssdtwin import Drive
from ssdtwin.commands.common import drive_view
from test_bad_input import fails_cleanly
from twin import P5316, SSDTWIN, copy_image, make_two_namespaces, namespace_rows, run_cli

NS_BLOCKS_512 = 64 << 11  # 64 MiB of 512 B blocks

ERROR_FIELDS = [
    "error_count",
    "sqid",
    "cmdid",
    "status_field",
    "phase_tag",
    "parm_error_location",
    "lba",
    "nsid",
    "vs",
    "trtype",
    "cs",
    "trtype_spec_info",
]
SANITIZE_FIELDS = [
    "sprog",
    "sstat",
    "cdw10_info",
    "time_over_write",
    "time_block_erase",
    "time_crypto_erase",
    "time_over_write_no_dealloc",
    "time_block_erase_no_dealloc",
    "time_crypto_erase_no_dealloc",
]


@pytest.fixture(scope="session")
def two_ns_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CM6 at 1/454 with two 64 MiB namespaces: ns1 (512 B LBAs) and ns2 (4 KiB LBAs)."""
    d = tmp_path_factory.mktemp("verbs-two-ns") / "cm6"
    return make_two_namespaces(d, NS_BLOCKS_512, NS_BLOCKS_512 // 8)


@pytest.fixture
def two_ns(tmp_path: Path, two_ns_template: Path) -> Path:
    return copy_image(two_ns_template, tmp_path / "cm6")


def sanitize_log(d: Path) -> dict[str, Any]:
    out = run_cli("nvme", "sanitize-log", d, "-o", "json").json()
    assert list(out) == [str(d)], "nvme-cli keys the log by device"
    return out[str(d)]


def vendor(d: Path) -> dict[str, Any]:
    return run_cli("nvme", "vendor-log", d, "-o", "json").json()


def test_list_ns_and_list_ctrl(two_ns: Path) -> None:
    assert run_cli("nvme", "list-ns", two_ns, "-o", "json").json() == {"nsid_list": [{"nsid": 1}, {"nsid": 2}]}
    assert run_cli("nvme", "list-ns", two_ns).stdout.splitlines() == ["[   0]:0x1", "[   1]:0x2"]
    run_cli("nvme", "detach-ns", two_ns, "-n", "2")
    assert run_cli("nvme", "list-ns", two_ns, "-o", "json").json() == {"nsid_list": [{"nsid": 1}]}, "active only"
    assert run_cli("nvme", "list-ns", two_ns, "--all", "-o", "json").json()["nsid_list"] == [{"nsid": 1}, {"nsid": 2}]
    # nvme-cli 2.x: -n is the first NSID listed (it was the NSID to list above: -n 1 left 1 out).
    assert run_cli("nvme", "list-ns", two_ns, "-a", "-n", "2", "-o", "json").json()["nsid_list"] == [{"nsid": 2}]
    assert run_cli("nvme", "list-ns", two_ns, "-a", "-n", "1", "-o", "json").json()["nsid_list"] == [{"nsid": 1}, {"nsid": 2}]
    assert run_cli("nvme", "list-ns", two_ns, "-n", "2").stdout == ""  # nothing active from 2 on: no line
    fails_cleanly(two_ns, "nvme", "list-ns", str(two_ns), "-n", "0", needles=("-n/--namespace-id 0", "1..0xffffffff"))
    fails_cleanly(two_ns, "nvme", "list-ns", str(two_ns), "-n", "0xffffffff", needles=("INVALID_NS(0x400b)",))
    assert run_cli("nvme", "list-ctrl", two_ns, "-o", "json").json() == {"num_ctrl": 1, "ctrl_list": [{"ctrl_id": 1}]}
    assert run_cli("nvme", "list-ctrl", two_ns, "-n", "2", "-o", "json").json() == {"num_ctrl": 0, "ctrl_list": []}
    assert run_cli("nvme", "list-ctrl", two_ns).stdout.splitlines() == ["num of ctrls present: 1", "[   0]:0x1"]


def test_fw_log_and_get_log(fresh: Path) -> None:
    fr = run_cli("nvme", "id-ctrl", fresh, "-o", "json").json()["fr"]
    fw = run_cli("nvme", "fw-log", fresh, "-o", "json").json()[str(fresh)]
    assert fw["Active Firmware Slot (afi)"] == 1
    assert fw["Firmware Rev Slot 1"].endswith(f"({fr.replace(' ', '.')})"), "nvme-cli shows the padding as dots"
    raw = run_cli("nvme", "fw-log", fresh, "-b").stdout
    assert raw.startswith("\x01") and fr in raw
    dump = run_cli("nvme", "get-log", fresh, "--log-id", "0x81", "--log-len", "40").stdout.splitlines()
    assert dump[0] == f"Device:{fresh} log-id:129 namespace-id:0xffffffff"
    assert dump[2].startswith("0000: ff ff 00 01 00 00 00 00"), "SPROG FFFFh, SSTAT never sanitized + Global Data Erased"
    j = run_cli("nvme", "get-log", fresh, "-i", "2", "-l", "512", "-o", "json").json()
    assert (j["log_id"], j["log_len"], len(j["data"])) == (2, 512, 32)


def test_smart_log_takes_nvme_cli_s_namespace_id_and_raw_binary(small: Path) -> None:
    """nvme-cli 2.4's smart-log flags: -n (0 or the broadcast NSID: LPA bit 0 is clear, no
    per-namespace log) and -b (the 512-byte page). Both were "No such option"."""
    raw = subprocess.run([*SSDTWIN, "nvme", "smart-log", str(small), "-b"], check=True, capture_output=True).stdout
    page = subprocess.run([*SSDTWIN, "nvme", "get-log", str(small), "-i", "2", "-l", "512", "-b"], check=True, capture_output=True).stdout
    assert raw == page and len(raw) == 512
    written = run_cli("nvme", "smart-log", small, "-o", "json").json()["data_units_written"]
    assert written > 0 and int.from_bytes(raw[48:64], "little") == written, "Data Units Written, bytes 63:48"
    assert run_cli("nvme", "smart-log", small, "-n", "0", "-o", "json").json()["data_units_written"] == written
    assert run_cli("nvme", "smart-log", small, "-n", "0").stdout.startswith(f"Smart Log for NVME device:{small} namespace-id:0\n")
    assert run_cli("nvme", "smart-log", small, "-n", "0xffffffff").stdout.startswith(
        f"Smart Log for NVME device:{small} namespace-id:ffffffff\n"
    )
    fails_cleanly(
        small, "nvme", "smart-log", str(small), "-n", "1", needles=("INVALID_FIELD(0x4002)", "-n/--namespace-id 1", "0 or 0xffffffff")
    )
    fails_cleanly(small, "nvme", "smart-log", str(small), "-b", "-o", "json", needles=("-b/--raw-binary and -o json",))


def test_error_log_holds_failed_commands_only(two_ns: Path) -> None:
    empty = run_cli("nvme", "error-log", two_ns, "-o", "json").json()["errors"]
    assert len(empty) == 64 and all(e["error_count"] == 0 for e in empty), "nothing failed: every entry empty"
    assert list(empty[0]) == ERROR_FIELDS
    d = Drive.open(two_ns)
    nsze = d.nvme.namespace(2).nsze
    for slba in (nsze, nsze + 7):
        with pytest.raises(Exception, match="LBA_RANGE"):
            d.read(2, slba, 1)
    d.commit()
    d.close()
    log = run_cli("nvme", "error-log", two_ns, "-e", "2", "-o", "json").json()["errors"]
    opcodes = [e["opcode"] for e in drive_view(two_ns).error_log()]  # not in nvme-cli 2.4's JSON
    assert [(e["error_count"], e["lba"], e["nsid"], op, e["status_field"]) for e, op in zip(log, opcodes)] == [
        (2, nsze + 7, 2, 0x02, 0x4080),
        (1, nsze, 2, 0x02, 0x4080),
    ]
    assert run_cli("nvme", "smart-log", two_ns, "-o", "json").json()["num_err_log_entries"] == 2


def test_sanitize_block_erase_runs_on_the_drive_clock(small: Path) -> None:
    before = vendor(small)
    assert before["valid_bytes"] > 0
    log0 = sanitize_log(small)
    assert list(log0) == SANITIZE_FIELDS and log0["sstat"]["status"].startswith("(0)")
    assert run_cli("nvme", "id-ctrl", small, "-o", "json").json()["sanicap"] == 0x2000_0007
    run_cli("nvme", "sanitize", small, "--sanact", "start-block-erase")
    log = sanitize_log(small)
    assert (log["sprog"], log["cdw10_info"], log["sstat"]["status"]) == (0, 2, "(2) Sanitize in Progress.")
    assert "(SSI) : 0x1\n  [3:0] : Sanitize State : 0x1\tRestricted Processing State" in run_cli("nvme", "sanitize-log", small, "-H").stdout
    after = vendor(small)
    assert after["valid_bytes"] == 0, "every mapping went when the command was accepted"
    assert after["superblock_erases"] == before["superblock_erases"] + after["superblocks"]
    assert after["erase_count_min"] == before["erase_count_min"] + 1
    assert after["nand_write_bytes"] == before["nand_write_bytes"], "a block erase programs nothing"
    done = run_cli("nvme", "sanitize-log", small, "--wait", "-o", "json").json()[str(small)]
    assert (done["sprog"], done["sstat"]["status"], done["sstat"]["global_erased"]) == (
        0xFFFF,
        "(1) Most Recent Sanitize Command Completed Successfully.",
        1,
    )
    assert done["time_block_erase"] >= 1 and done["time_crypto_erase"] == 0


def test_write_protected_namespace_survives_sanitize_and_delete(small: Path) -> None:
    """NVMe 1.4 §8.12 keeps a write protected namespace's data: a sanitize (which erases every
    namespace) and a delete of it are refused, whether it is attached or not."""
    run_cli("nvme", "set-feature", small, "-f", "0x84", "-n", "1", "-v", "3")  # permanent
    for sanact in ("2", "3", "4"):
        fails_cleanly(small, "nvme", "sanitize", str(small), "-a", sanact, needles=("NS_WRITE_PROTECTED(0x4020)", "namespace 1"))
    run_cli("nvme", "detach-ns", small, "-n", "1")
    for nsid in ("1", "0xffffffff"):
        fails_cleanly(
            small, "nvme", "delete-ns", str(small), "-n", nsid, needles=("NS_WRITE_PROTECTED(0x4020)", "namespace 1", "permanently")
        )
    fails_cleanly(small, "nvme", "sanitize", str(small), "-a", "2", needles=("NS_WRITE_PROTECTED(0x4020)",))
    run_cli("nvme", "attach-ns", small, "-n", "1", "-c", "1")
    assert run_cli("nvme", "id-ns", small, "-n", "1", "-o", "json").json()["nuse"] > 0


def test_identify_the_broadcast_nsid_gives_the_common_capabilities(two_ns: Path) -> None:
    """Identify CNS 00h with NSID FFFFFFFFh on a drive with Namespace Management: the LBA
    formats every namespace can take (nvme-cli's create-ns -b reads them), no one's sizes."""
    one = run_cli("nvme", "id-ns", two_ns, "-n", "1", "-o", "json").json()
    r = run_cli("nvme", "id-ns", two_ns, "-n", "0xffffffff", "-o", "json")
    common = r.json()
    assert r.stderr == ""
    assert (common["nlbaf"], common["lbafs"], common["mc"], common["dpc"]) == (one["nlbaf"], one["lbafs"], one["mc"], one["dpc"])
    assert (common["nsze"], common["ncap"], common["nuse"], common["nvmcap"]) == (0, 0, 0, 0)
    text = run_cli("nvme", "id-ns", two_ns, "-n", "0xffffffff").stdout
    assert text.startswith("NVME Identify Namespace -1:\nnsze    : 0\n")  # nvme-cli's %d
    fails_cleanly(two_ns, "nvme", "id-ns", str(two_ns), "-n", "0xffffffff", "--force", needles=("INVALID_NS(0x400b)", "CNS 11h"))


def test_sanitize_overwrite_counts_its_nand_writes(fresh: Path) -> None:
    raw = run_cli("nvme", "vendor-log", fresh, "-o", "json").json()["superblocks"]
    out = run_cli("nvme", "sanitize", fresh, "-a", "3", "--owpass", "2", "--ovrpat", "0xdeadbeef", "--wait").stdout
    assert out.startswith("sanitize: Success, sanact:3") and "waited" in out
    v = vendor(fresh)
    assert v["nand_write_sanitize_bytes"] == v["nand_write_bytes"] == 2 * raw * v["superblock_bytes"]
    assert v["erase_count_min"] == v["erase_count_max"] == 2
    log = sanitize_log(fresh)
    assert (log["cdw10_info"], log["sstat"]["no_cmplted_passes"]) == (0x23, 2)


def test_io_and_format_are_refused_while_sanitizing(small: Path, tmp_path: Path) -> None:
    run_cli("nvme", "sanitize", small, "-a", "2")
    job = tmp_path / "r.fio"
    job.write_text("[r]\nrw=randread\nbs=4k\nsize=8m\n")
    fails_cleanly(small, "fio", str(small), str(job), needles=("SANITIZE_IN_PROGRESS(0x401d)", "s left on the drive's clock"))
    fails_cleanly(small, "nvme", "format", str(small), "-n", "1", "--ses", "2", needles=("SANITIZE_IN_PROGRESS",))
    fails_cleanly(small, "nvme", "sanitize", str(small), "-a", "4", needles=("SANITIZE_IN_PROGRESS",))
    run_cli("nvme", "sanitize-log", small, "--wait")
    assert "read: IOPS=" in run_cli("fio", small, job).stdout


def test_sanitize_unsupported_by_the_preset(tmp_path: Path) -> None:
    d = tmp_path / "p5316"
    run_cli("create", d, "--model", P5316, "--scale", "1/256")
    assert run_cli("nvme", "id-ctrl", d, "-o", "json").json()["sanicap"] == 0
    fails_cleanly(d, "nvme", "sanitize", str(d), "-a", "2", needles=("INVALID_OPCODE(0x4001)", "does not support Sanitize"))
    assert sanitize_log(d)["time_block_erase"] == 0xFFFFFFFF


def test_crypto_erase_of_one_namespace_keeps_the_others(two_ns: Path) -> None:
    keys = {n: run_cli("nvme", "id-ns", two_ns, "-n", str(n), "-v", "-o", "json").json()["vs_mek_id"] for n in (1, 2)}
    d = Drive.open(two_ns)
    d.write(1, 0, 2048)
    d.write(2, 0, 256)
    d.commit()
    d.close()
    nand = vendor(two_ns)["nand_write_bytes"]
    run_cli("nvme", "format", two_ns, "-n", "2", "--ses", "2")
    rows = {r["nsid"]: r for r in namespace_rows(two_ns)}
    assert (rows[1]["nuse"], rows[2]["nuse"]) == (2048, 0)
    new = {n: run_cli("nvme", "id-ns", two_ns, "-n", str(n), "-v", "-o", "json").json()["vs_mek_id"] for n in (1, 2)}
    assert new[1] == keys[1] and new[2] != keys[2]
    assert vendor(two_ns)["nand_write_bytes"] == nand, "no NAND operation: a key change"


def test_crypto_erase_over_nbd(two_ns: Path, tmp_path: Path) -> None:
    """Serve, write both namespaces with nbdcopy, stop, crypto-erase ns 2, serve again,
    read both back with nbdcopy: ns 2 reads zeroes, ns 1 its data."""
    from test_serve import need, served

    need("nbdcopy")
    payload = {1: os.urandom(4 << 20), 2: os.urandom(4 << 20)}
    for n, data in payload.items():
        (tmp_path / f"in{n}.raw").write_bytes(data)
    with served(two_ns) as s:
        for n in payload:
            run_tool("nbdcopy", "--flush", tmp_path / f"in{n}.raw", s.uri(f"ns{n}"))
        s.stop()
    run_cli("nvme", "format", two_ns, "-n", "2", "--ses", "2")
    assert not (two_ns / "data" / "ns2.img").exists(), "the served data of ns 2 went with its key"
    with served(two_ns) as s:
        for n in payload:
            run_tool("nbdcopy", "--no-extents", s.uri(f"ns{n}"), tmp_path / f"out{n}.raw")
        s.stop()
    got1 = (tmp_path / "out1.raw").read_bytes()
    got2 = (tmp_path / "out2.raw").read_bytes()
    assert got1[: 4 << 20] == payload[1]
    assert len(got2) == 64 << 20 and got2.count(0) == len(got2), "ns 2 reads zeroes"


def run_tool(*argv: object) -> None:
    p = subprocess.run([os.fspath(a) if isinstance(a, Path) else str(a) for a in argv], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{argv} exited {p.returncode}: {p.stderr}"


def test_sanitize_over_nbd_refuses_io_then_reads_zeroes(two_ns: Path, tmp_path: Path) -> None:
    """A served drive refuses I/O while its sanitize runs (on the server's wall clock), and
    once it has ended every namespace reads zeroes."""
    from test_serve import need, served

    need("nbdcopy")
    data = tmp_path / "in.raw"
    data.write_bytes(os.urandom(4 << 20))
    with served(two_ns) as s:
        run_tool("nbdcopy", "--flush", data, s.uri("ns1"))
        s.stop()
    # 15 overwrite passes: about a minute at this scale, far longer than the reads below.
    run_cli("nvme", "sanitize", two_ns, "-a", "3", "--owpass", "15")
    with served(two_ns) as s:
        p = subprocess.run(
            ["nbdcopy", "--no-extents", s.uri("ns1"), str(tmp_path / "busy.raw")], capture_output=True, text=True, timeout=120
        )
        assert p.returncode != 0, "a read during the sanitize must fail"
        assert "Input/output error" in p.stderr, p.stderr
        p = subprocess.run(["nbdcopy", str(data), s.uri("ns1")], capture_output=True, text=True, timeout=120)
        assert p.returncode != 0, "a write during the sanitize must fail"
        s.stop()
    refused = drive_view(two_ns).error_log()  # with the opcode, which nvme-cli 2.4's JSON leaves out
    opcodes = {e["opcode"] for e in refused if e["status_field"] == 0x401D}
    assert opcodes == {0x01, 0x02}, f"the refused reads and writes are in the Error Information log: {refused[:3]}"
    assert sanitize_log(two_ns)["sstat"]["status"] == "(2) Sanitize in Progress."
    run_cli("nvme", "sanitize-log", two_ns, "--wait")
    with served(two_ns) as s:
        run_tool("nbdcopy", "--no-extents", s.uri("ns1"), tmp_path / "out.raw")
        s.stop()
    got = (tmp_path / "out.raw").read_bytes()
    assert len(got) == 64 << 20 and got.count(0) == len(got)


# --------------------------------------------------------------------------- numbers, features


#: One call per verb with every NVMe number it takes written in 0x hex (and what it prints).
HEX_CALLS = [
    ("id-ns", "-n", "0x1"),
    ("list-ns", "-n", "0x1", "-c", "0x0"),
    ("list-ctrl", "-c", "0x0", "-n", "0x1"),
    ("error-log", "-e", "0x2"),
    ("get-log", "-i", "0x2", "-l", "0x200", "-n", "0xffffffff"),
    ("get-feature", "-f", "0x2", "-n", "0x0", "-c", "0x0"),
    ("get-feature", "-f", "0x84", "-n", "0x1"),
    ("set-feature", "-f", "0x2", "-v", "0x1", "-n", "0x0", "-c", "0x0"),
    ("get-lba-status", "-n", "0x1", "-s", "0x0", "-m", "0xff", "-a", "0x10", "-l", "0x0", "-t", "0x0"),
    ("inject-pi-error", "-n", "0x1", "-s", "0x10"),
    ("inject-media-error", "-n", "0x1", "-s", "0x10", "-c", "0x1"),
    ("qos", "-n", "0x1"),
    ("detach-ns", "-n", "0x2", "-c", "0x1"),
    ("attach-ns", "-n", "0x2", "-c", "0x1"),
    ("format", "-n", "0x2", "-l", "0x1", "--ses", "0x1", "-i", "0x0", "-p", "0x0", "-m", "0x0"),
    ("ana-state", "-g", "0x2", "-s", "optimized"),
    ("create-ns", "-s", "0x800", "-c", "0x800", "-f", "0x0", "-m", "0x0", "-i", "0x0"),
    ("delete-ns", "-n", "0x3"),
    ("intel", "smart-log-add", "-n", "0xffffffff"),
]


@pytest.mark.parametrize("call", HEX_CALLS, ids=lambda c: " ".join(c[:2]))
def test_every_nvme_number_takes_decimal_and_hex(two_ns: Path, call: tuple[str, ...]) -> None:
    """nvme-cli takes every number in decimal or 0x hex; so does each verb (id-ns -n 0x1 was
    refused: "'0x1' is not a valid int range"), and the decimal form does the same."""
    verb, *args = call
    if verb == "intel":
        line = fails_cleanly(two_ns, "nvme", verb, args[0], str(two_ns), *args[1:], needles=("log page 0xca",))
        assert line.startswith("ssdtwin nvme intel smart-log-add: error: "), line  # the plugin verb named
        return
    if verb == "delete-ns":
        run_cli("nvme", "create-ns", two_ns, "-s", "2048", "-c", "2048")
    if verb == "attach-ns":
        run_cli("nvme", "detach-ns", two_ns, "-n", "2")
    if verb == "inject-pi-error":
        run_cli("nvme", "format", two_ns, "-n", "1", "-l", "2", "-i", "1")  # 512+8 B with PI type 1
    hexed = run_cli("nvme", verb, two_ns, *args, check=False)
    assert hexed.returncode == 0, hexed.stderr
    if verb in ("id-ns", "list-ns", "list-ctrl", "get-log", "get-feature", "get-lba-status", "qos"):
        decimal = [str(int(a, 0)) if a.startswith("0x") else a for a in args]
        assert run_cli("nvme", verb, two_ns, *decimal).stdout == hexed.stdout
    run_cli("check", two_ns)


@pytest.mark.parametrize(
    "args, needles",
    [
        (("id-ns", "-n", "one"), ("-n/--namespace-id 'one'", "decimal or 0x hex", "0..0xffffffff")),
        (("id-ns", "-n", "0x100000000"), ("-n/--namespace-id 0x100000000", "0..0xffffffff")),
        (("format", "-n", "1", "-l", "0x100"), ("-l/--lbaf 0x100", "an LBA format index in 0..255")),
        (("format", "-n", "1", "--ses", "0x8"), ("-s/--ses 0x8", "0..7")),
        (("create-ns", "-s", "8", "-c", "8", "-i", "0x10000"), ("-i/--nvmset-id 0x10000", "0..65535")),
        (("get-log", "-i", "2", "-l", "0"), ("-l/--log-len 0", "1..0x100000")),
        (("get-lba-status", "-n", "1", "-a", "zz"), ("-a/--action 'zz'", "0..255")),
        (("error-log", "-e", "0x41"), ("-e/--log-entries 0x41", "1..64")),
        (("precondition", "-n", "0"), ("-n/--namespace-id 0", "1..0xffffffff")),
    ],
)
def test_a_bad_number_names_the_option_and_its_range(small: Path, args: tuple[str, ...], needles: tuple[str, ...]) -> None:
    verb, *rest = args
    cmd = ("precondition", str(small), *rest, "--rand", "4k") if verb == "precondition" else ("nvme", verb, str(small), *rest)
    fails_cleanly(small, *cmd, needles=needles)


def test_feature_lines_are_nvme_cli_s(small: Path) -> None:
    """nvme-cli 2.4 names the feature and prints C's %#0*x (no 0x on a zero); the twin
    printed "(nsid 0)" and 0x00000000."""
    get = run_cli("nvme", "get-feature", small, "-f", "0x84", "-n", "1").stdout.strip()
    assert get == "get-feature:0x84 (Namespace Write Protect), Current value:00000000"
    out = run_cli("nvme", "set-feature", small, "-f", "4", "-v", "0x15e").stdout.strip()
    assert out == "set-feature:0x04 (Temperature Threshold), value:0x0000015e, cdw12:00000000, save:0"
    get = run_cli("nvme", "get-feature", small, "-f", "4").stdout.strip()
    assert get == "get-feature:0x04 (Temperature Threshold), Current value:0x0000015e"


def test_write_protect_until_power_cycle_holds_until_the_power_cycle(small: Path) -> None:
    """NVMe 1.4 §8.12: no Set Features leaves Write Protect Until Power Cycle (the twin let
    -v 0 clear it, so a "until power cycle" protection did not hold)."""
    run_cli("nvme", "set-feature", small, "-f", "0x84", "-n", "1", "-v", "2")
    for v in ("0", "1", "3"):
        fails_cleanly(
            small,
            "nvme",
            "set-feature",
            str(small),
            "-f",
            "0x84",
            "-n",
            "1",
            "-v",
            v,
            needles=("FEATURE_NOT_CHANGEABLE(0x410e)", "power cycle"),
        )
    fails_cleanly(small, "precondition", str(small), "--rand", "4k", "--amount", "1MiB", needles=("NS_WRITE_PROTECTED(0x4020)",))
    run_cli("power-cycle", small)
    assert run_cli("nvme", "get-feature", small, "-f", "0x84", "-n", "1", "-o", "json").json()["value"] == 0
    run_cli("precondition", small, "--rand", "4k", "--amount", "1MiB", "-q")
    run_cli("check", small)


def test_temperature_thresholds_and_the_smart_warning(small: Path) -> None:
    """Feature 04h keeps the over (THSEL 0) and under (THSEL 1) thresholds apart (setting the
    under one overwrote the over one), refuses sensors the drive lacks, and the SMART
    critical warning's bit 1 follows them (it was always 0)."""
    run_cli("nvme", "set-feature", small, "-f", "4", "-v", "0x100111")  # under: 273 K
    assert run_cli("nvme", "get-feature", small, "-f", "4", "-o", "json").json()["value"] == 343
    assert run_cli("nvme", "get-feature", small, "-f", "4", "-c", "0x100000", "-o", "json").json()["value"] == 0x100111
    fails_cleanly(small, "nvme", "set-feature", str(small), "-f", "4", "-v", "0x10150", needles=("INVALID_FIELD(0x4002)", "TMPSEL 1"))
    fails_cleanly(small, "nvme", "get-feature", str(small), "-f", "4", "-c", "0x200000", needles=("INVALID_FIELD(0x4002)", "THSEL 2"))
    assert run_cli("nvme", "smart-log", small, "-o", "json").json()["critical_warning"] == 0
    run_cli("nvme", "set-feature", small, "-f", "4", "-v", "300")  # over: 300 K, under the drive's 313 K
    assert run_cli("nvme", "smart-log", small, "-o", "json").json()["critical_warning"] == 2
    human = run_cli("nvme", "smart-log", small, "-H").stdout.splitlines()
    assert [line.split(":")[-1].strip() for line in human if "Temp. Threshold[1]" in line] == ["1"]


def test_delete_all_prints_nvme_cli_s_nsid(two_ns: Path) -> None:
    """nvme-cli prints the NSID with %d: deleting every namespace says nsid:-1 (the twin said
    4294967295)."""
    for n in ("1", "2"):
        run_cli("nvme", "detach-ns", two_ns, "-n", n)
    assert run_cli("nvme", "delete-ns", two_ns, "-n", "0xffffffff").stdout == "delete-ns: Success, deleted nsid:-1\n"
    assert run_cli("nvme", "list-ns", two_ns, "--all", "-o", "json").json() == {"nsid_list": []}
    run_cli("check", two_ns)


def test_id_ns_of_an_inactive_nsid_is_zeros(two_ns: Path) -> None:
    """NVMe 1.4 Identify CNS 00h: a detached namespace or an unallocated NSID in 1..NN gives a
    zero-filled structure (the twin showed a detached namespace's data and refused an
    unallocated NSID); --force (CNS 11h) shows the detached one; 0 and past NN (but FFFFFFFFh)
    are INVALID_NS."""
    attached = run_cli("nvme", "id-ns", two_ns, "-n", "2", "-o", "json").json()

    def raw(*force: str) -> bytes:
        return subprocess.run([*SSDTWIN, "nvme", "id-ns", str(two_ns), "-n", "2", "-b", *force], check=True, capture_output=True).stdout

    attached_raw = raw()
    run_cli("nvme", "detach-ns", two_ns, "-n", "2")
    for nsid, note in (("2", "namespace 2 is not attached"), ("9", "namespace 9 does not exist")):
        r = run_cli("nvme", "id-ns", two_ns, "-n", nsid, "-o", "json")
        ns = r.json()
        assert (ns["nsze"], ns["ncap"], ns["nuse"], ns["nvmcap"], ns["flbas"], ns["nlbaf"]) == (0, 0, 0, 0, 0, 0)
        assert ns["lbafs"] == [{"ms": 0, "ds": 0, "rp": 0}]
        assert note in r.stderr and "returns zeros" in r.stderr
        assert run_cli("nvme", "id-ns", two_ns, "-n", nsid, "-b").stdout == "\x00" * 4096
        assert run_cli("nvme", "id-ns", two_ns, "-n", nsid).stdout.startswith(f"NVME Identify Namespace {nsid}:\nnsze    : 0\n")
    r = run_cli("nvme", "id-ns", two_ns, "-n", "2", "--force", "-o", "json")
    assert r.json() == attached and r.stderr == ""
    assert raw("--force") == attached_raw and raw() == bytes(4096)
    for bad in ("0", "65"):  # 0xffffffff is the common capabilities (test below)
        fails_cleanly(two_ns, "nvme", "id-ns", str(two_ns), "-n", bad, needles=("INVALID_NS(0x400b)", "1..=64"))
