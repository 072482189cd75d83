"""End-to-end runs of the ``ssdtwin`` command line on small drive images.

Every command of the foundation issue runs here as a subprocess, on a CM6 image at 1/64
scale: models, create, nvme list / id-ctrl / id-ns / detach-ns / delete-ns / create-ns /
attach-ns / format / smart-log / vendor-log / get-feature / set-feature, precondition,
check, power-cycle and waf.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ssdtwin import _core
from ssdtwin.drive import Drive
from twin import CM6, P5316, SSDTWIN, check_image, copy_image, image_digest, namespace_rows, run_cli

# The KIOXIA experiment's namespace sizes (KIOXIA CM6 namespace brief), IDEMA LBA1-03 block counts of 512 B.
IDEMA_3_20_TB_BLOCKS = 6_251_233_968
CM6_FULL_TNVMCAP = 3_840_755_982_336


def idctrl(d: Path) -> dict:
    return run_cli("nvme", "id-ctrl", d, "-o", "json").json()


def vendor(d: Path) -> dict:
    return run_cli("nvme", "vendor-log", d, "-o", "json").json()


def smart(d: Path) -> dict:
    return run_cli("nvme", "smart-log", d, "-o", "json").json()


def namespaces(d: Path) -> list[dict]:
    return namespace_rows(d)


# --------------------------------------------------------------------------- models, create


def test_models_lists_every_preset_with_op() -> None:
    r = run_cli("models")
    names = [n for n, _ in _core.presets()]
    for n in names:
        assert re.search(rf"(?m)^{re.escape(n)}\s", r.stdout), n
    # CM6-R: 3.84 TB user on 4.40 TB of NAND, OP 14.5 %, 4 KiB IU, TLC.
    line = next(line for line in r.stdout.splitlines() if line.startswith(CM6 + " "))
    assert "3.84 TB" in line and "4.40 TB" in line and "14.5%" in line and "4Ki" in line and "TLC" in line
    p5316 = next(line for line in r.stdout.splitlines() if line.startswith(P5316 + " "))
    assert "64Ki" in p5316 and "QLC" in p5316
    rows = run_cli("models", "-o", "json").json()
    assert [row["name"] for row in rows] == names
    cm6 = rows[names.index(CM6)]
    assert cm6["tnvmcap_bytes"] == CM6_FULL_TNVMCAP and cm6["iu_bytes"] == 4096 and cm6["dies"] == 64


def test_models_name_shows_every_number_with_its_source() -> None:
    text = run_cli("models", CM6).stdout
    assert "tnvmcap_bytes = { value = 3840755982336" in text and "source =" in text
    spec = run_cli("models", CM6, "-o", "json").json()
    assert spec["capacity"]["tnvmcap_bytes"]["value"] == CM6_FULL_TNVMCAP
    assert spec["capacity"]["tnvmcap_bytes"]["source"].startswith("[SRC]")
    assert spec["capacity"]["lba_bytes"]["value"] == [512, 4096]


def test_create_with_ftl_partitions(tmp_path: Path) -> None:
    """`create --partitions K` (docs/models.md §13): K die groups with the same NAND and user
    capacity; preconditioned, the image checks clean (the autouse fixture runs `check`);
    a count that is not a power of two is one line, no image."""
    plain, parted = tmp_path / "plain", tmp_path / "parted"
    run_cli("create", plain, "--model", CM6, "--scale", "1/256")
    r = run_cli("create", parted, "--model", CM6, "--scale", "1/256", "--partitions", "2")
    assert "(2 FTL partitions per set)" in r.stdout
    with Drive.open(plain) as a, Drive.open(parted) as b:
        ia, ib = a.ftl_info(), b.ftl_info()
        assert (ib["partitions"], ib["superblocks"], ib["raw_bytes"]) == (2, 2 * ia["superblocks"], ia["raw_bytes"])
        assert ib["data_pool_bytes"] == ia["data_pool_bytes"] and b.namespaces()[0].bytes == a.namespaces()[0].bytes
        for d in (a, b):
            d.precondition(1, "seq", 131072, loops=1.0, seed=3)
            d.precondition(1, "rand", 4096, loops=2.0, seed=4)
            d.commit()
    # Timed, after a 1 s ramp: the partitions' programs and GC run on their own dies, so a
    # NAND-bound random-write job keeps the drive's throughput (docs/models.md §13: within
    # 0.3-2.2 % at 1/64; +0.1 % here with stripes of 16 IUs, -1.3 % with stripes of one).
    job = tmp_path / "rw.fio"
    job.write_text(
        "[j]\nrw=randwrite\nbs=4k\nioengine=libaio\niodepth=32\nnumjobs=4\ntime_based=1\nramp_time=1s\nruntime=1s\ngroup_reporting=1\n"
    )
    iops = [run_cli("fio", d, job, "--output-format", "json").json()["jobs"][0]["write"]["iops"] for d in (plain, parted)]
    assert max(iops) < 250_000, f"{iops}: bound by the controller's write ceiling, not by NAND and GC"
    assert iops[1] == pytest.approx(iops[0], rel=0.03), iops
    r = run_cli("create", tmp_path / "x", "--model", CM6, "--partitions", "3", check=False)
    assert r.returncode == 1 and "ftl.partitions: must be a power of two (got 3)" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_create_from_an_edited_spec(tmp_path: Path) -> None:
    """`create --spec`: a preset's text (`ssdtwin models NAME`), edited, makes the image; its
    errors name the file, the field (or the line) and the range, and leave no image."""
    text = run_cli("models", CM6).stdout
    edited, n = re.subn(r"(?m)^ctrl_max_iops = \{ value = \d+,", "ctrl_max_iops = { value = 5000,", text)
    assert n == 1
    spec = tmp_path / "slow.toml"
    spec.write_text(edited)
    d = tmp_path / "slow"
    r = run_cli("create", d, "--spec", spec, "--scale", "1/64")
    assert r.stdout.startswith(f"created {d}: {CM6} (from {spec}) at 1/64 scale")
    with Drive.open(d, writable=False) as drv:
        assert drv.spec()["timing"]["ctrl_max_iops"]["value"] == 5000
    bad = {
        "zero.toml": (edited.replace("value = 5000,", "value = 0,"), "timing.ctrl_max_iops: must be 1..=1000000000 (got 0)"),
        "syntax.toml": ("[drive\n", "invalid TOML at line 1"),
    }
    for name, (body, _) in bad.items():
        (tmp_path / name).write_text(body)
    cases = [
        (["--spec", tmp_path / "zero.toml"], f"--spec {tmp_path / 'zero.toml'}: {bad['zero.toml'][1]}"),
        (["--spec", tmp_path / "syntax.toml"], bad["syntax.toml"][1]),
        (["--spec", tmp_path / "missing.toml"], "no such file"),
        ([], "give one of --model PRESET"),
        (["--model", CM6, "--spec", spec], "give one of --model PRESET"),
    ]
    for args, needle in cases:
        r = run_cli("create", tmp_path / "x", *args, check=False)
        assert r.returncode == 1 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not (tmp_path / "x").exists()


def test_an_edited_spec_s_errors_name_the_field(tmp_path: Path) -> None:
    """Edits a user makes to `ssdtwin models NAME`'s text: a value of the wrong type names
    the field on its line (it named the line only: "line 27: invalid type: integer `16`,
    expected struct Sourced"), and a spec the core would run over its own power budget is
    refused (an idle floor above power state 0: the engine granted one NAND operation), as
    is one without a [timing] table (created, then a traceback from every timed command)."""
    text = run_cli("models", CM6).stdout
    idle = re.sub(r"(?m)^(idle_power_mw = \{ value = )\d+", r"\g<1>30000", text)
    cases = {
        "bare.toml": (
            re.sub(r"(?m)^channels = \{[^}]*\}", "channels = 16", text),
            "invalid TOML at line 27 (nand.channels): invalid type: integer `16`, expected struct Sourced",
        ),
        "negative.toml": (
            re.sub(r"(?m)^(tnvmcap_bytes = \{ value = )\d+", r"\g<1>-5", text),
            "at line 18 (capacity.tnvmcap_bytes): invalid value: integer `-5`, expected u64",
        ),
        "watts.toml": (text.replace("max_power_mw = 9900\n", 'max_power_mw = "9.9 W"\n'), "(power_states[5].max_power_mw): invalid type"),
        "missing.toml": (re.sub(r"(?m)^pages_per_block = .*\n", "", text), "at line 24 (nand): missing field `pages_per_block`"),
        "idle.toml": (idle, "power_states[0].max_power_mw: an operational state must power one NAND operation over idle"),
        # no [timing]: created, then fio, serve and calibrate ended in KeyError: 'timing'
        "untimed.toml": (
            text[: text.index("\n[timing]\n")] + text[text.index("\n# Power states") :],
            "timing: missing: a drive needs its [timing] table to run any I/O",
        ),
    }
    for name, (body, needle) in cases.items():
        spec = tmp_path / name
        spec.write_text(body)
        r = run_cli("create", tmp_path / "x", "--spec", spec, "--scale", "1/454", check=False)
        assert r.returncode == 1 and f"--spec {spec}: " in r.stderr and needle in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "x").exists(), r.stderr


def test_an_images_spec_keeps_the_sources_of_the_spec_it_was_made_from(tmp_path: Path) -> None:
    """spec -> create -> the image's spec.toml: the two values scaling changes keep the
    user's sources (they were replaced by the derivation alone), and that scaled spec given
    back to --spec says what it is and what to give instead (was: "--scale 1/1: the spec is
    already scaled")."""
    text = run_cli("models", CM6).stdout
    text, n = re.subn(r'(?m)^(tnvmcap_bytes = \{ value = \d+, source = )"[^"]*"', r'\g<1>"[SRC] my datasheet rev 2"', text)
    assert n == 1
    spec = tmp_path / "mine.toml"
    spec.write_text(text)
    d = tmp_path / "mine"
    run_cli("create", d, "--spec", spec, "--scale", "1/454")
    with Drive.open(d, writable=False) as drv:
        cap = drv.spec()["capacity"]["tnvmcap_bytes"]["source"]
    assert cap.startswith("3840755982336 (full scale) x ") and cap.endswith("; full scale: [SRC] my datasheet rev 2"), cap
    r = run_cli("create", tmp_path / "again", "--spec", d / "spec.toml", check=False)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "already scaled (scale = 454: a drive image's spec.toml); give the full-scale spec it was made from" in r.stderr
    assert not (tmp_path / "again").exists()


def test_a_creation_that_fails_after_its_lock_can_be_run_again(tmp_path: Path) -> None:
    """A creation that fails after it took the image's lock (here a file-size limit, as a
    full disk would: its maps do not fit) removes what it wrote, LOCK included, and the same
    command then succeeds. Was: LOCK, spec.toml and gen-000001 stayed, and every later
    `create` said the directory already exists."""
    import resource

    def small_files() -> None:  # the child's files may not grow past 16 KiB; spec.toml fits
        resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 10, 16 << 10))

    empty = tmp_path / "empty"
    empty.mkdir()
    for d in (tmp_path / "new", empty):
        argv = [*SSDTWIN, "create", str(d), "--model", CM6, "--scale", "1/454"]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120, preexec_fn=small_files)
        assert p.returncode == 1 and p.stderr.count("\n") == 1 and "File too large" in p.stderr, p.stderr
        # a directory it made goes; one it was given stays, empty
        assert (not d.exists()) if d.name == "new" else list(d.iterdir()) == []
        run_cli("create", d, "--model", CM6, "--scale", "1/454")
        check_image(d)


def test_create_makes_a_factory_fresh_image(tmp_path: Path) -> None:
    d = tmp_path / "cm6"
    r = run_cli("create", d, "--model", CM6, "--scale", "1/64", "--seed", "9")
    assert r.stdout.startswith(f"created {d}: {CM6} at 1/64 scale")
    assert "seed 9" in r.stdout and "32 superblocks" in r.stdout
    assert sorted(p.name for p in d.iterdir()) == ["CURRENT", "LOCK", "gen-000001", "spec.toml", "ssdtwin.toml"]
    manifest = (d / "ssdtwin.toml").read_text()
    assert 'format = "ssdtwin-image"' in manifest and "scale = 64" in manifest and "seed = 9" in manifest
    c = idctrl(d)
    # 1/64 keeps the OP ratio (data pool / TNVMCAP) of the full drive, on a 64 KiB grid.
    assert c["tnvmcap"] % 65536 == 0
    with Drive.open(d, writable=False) as drv:
        info = drv.ftl_info()
    full = Drive.in_memory(CM6, scale=1)  # no maps are touched: cheap
    full_info, full_cap = full.ftl_info(), full.nvme.id_ctrl()["tnvmcap"]
    full.close()
    assert full_cap == CM6_FULL_TNVMCAP and full_info["superblocks"] == 1820
    assert info["data_pool_bytes"] / c["tnvmcap"] == pytest.approx(full_info["data_pool_bytes"] / full_cap, rel=1e-4)
    assert c["tnvmcap"] == pytest.approx(CM6_FULL_TNVMCAP / 64, rel=0.02)
    # nvme-cli prints the identify strings as the drive holds them: space-padded ASCII fields.
    assert c["unvmcap"] == 0 and c["nn"] == 64 and c["mn"] == "KCM6XRUL3T84".ljust(40) and c["fr"] == "0106".ljust(8)
    (ns,) = namespaces(d)
    assert ns == {
        "nsid": 1,
        "nsze": c["tnvmcap"] // 512,
        "ncap": c["tnvmcap"] // 512,
        "nuse": 0,
        "lba_bytes": 512,
        "flbas": 0,
        "attached": True,
        "write_protect": 0,
        "nmic": 0,
        "bytes": c["tnvmcap"],
        "dram": False,
        "nvmsetid": 0,
        "ms": 0,
        "pi": 0,
    }


def test_module_entry_point_runs_too(cm6: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "ssdtwin", "nvme", "list", str(cm6), "-o", "json"], capture_output=True, text=True, check=True
    )
    assert '"SerialNumber": "STW' in p.stdout


# --------------------------------------------------------------------------- identify


def test_nvme_list_normal_and_json(cm6: Path) -> None:
    text = run_cli("nvme", "list", cm6).stdout.splitlines()
    assert text[0].split()[:4] == ["Node", "SN", "Model", "Namespace"]
    assert text[2].startswith(f"{cm6}:ns1 ") and "KCM6XRUL3T84" in text[2] and "512   B +  0 B" in text[2]
    dev = run_cli("nvme", "list", cm6, "-o", "json").json()["Devices"][0]
    assert dev["DevicePath"] == str(cm6) and dev["ModelNumber"] == "KCM6XRUL3T84" and dev["Firmware"] == "0106"
    assert dev["SerialNumber"].startswith("STW")


def test_id_ctrl_normal_and_json(cm6: Path) -> None:
    c = idctrl(cm6)
    for key in ("vid", "sn", "mn", "fr", "tnvmcap", "unvmcap", "nn", "oacs", "oncs", "psds", "subnqn"):
        assert key in c, key
    assert c["vid"] == 0x1E0F  # KIOXIA
    assert c["oacs"] & 0x8, "Namespace Management must be advertised (OACS bit 3)"
    text = run_cli("nvme", "id-ctrl", cm6).stdout
    assert text.startswith("NVME Identify Controller:")
    assert re.search(rf"(?m)^tnvmcap\s+: {c['tnvmcap']}$", text)
    assert re.search(r"(?m)^unvmcap\s+: 0$", text)
    assert re.search(r"(?m)^vid\s+: 0x1e0f$", text)


def test_id_ns_normal_and_json(cm6: Path) -> None:
    ns = run_cli("nvme", "id-ns", cm6, "-n", "1", "-o", "json").json()
    c = idctrl(cm6)
    assert ns["nsze"] == ns["ncap"] == c["tnvmcap"] // 512
    assert ns["nvmcap"] == c["tnvmcap"] and ns["nuse"] == 0
    assert ns["flbas"] == 0 and ns["nlbaf"] == 5
    # 512 B and 4 KiB, then each with 8 and 64 B of metadata (docs/cli.md, format).
    assert [(f["ds"], f["ms"]) for f in ns["lbafs"]] == [(9, 0), (12, 0), (9, 8), (9, 64), (12, 8), (12, 64)]
    # Optimal-write hints in LBAs: one 4 KiB IU = 8 blocks of 512 B (0's based: 7).
    assert ns["npwg"] == ns["npwa"] == 7
    text = run_cli("nvme", "id-ns", cm6, "-n", "1").stdout
    assert text.startswith("NVME Identify Namespace 1:")
    assert re.search(rf"(?m)^nsze\s+: {hex(ns['nsze'])}$", text)
    assert "lbaf  0 : ms:0   lbads:9  rp:0x2 (in use)" in text


# --------------------------------------------------------------------------- namespace management


def test_kioxia_resize_sequence(cm6: Path) -> None:
    """detach, delete, create-ns with the 3.20 TB block count scaled to the image, attach:
    UNVMCAP = TNVMCAP - NVMCAP, TNVMCAP never changes (NVMe base spec, Identify Controller)."""
    c0 = idctrl(cm6)
    tnvmcap = c0["tnvmcap"]
    assert run_cli("nvme", "detach-ns", cm6, "-n", "1", "-c", "1").stdout.strip() == "detach-ns: Success, nsid:1"
    assert namespaces(cm6)[0]["attached"] is False
    assert run_cli("nvme", "delete-ns", cm6, "-n", "1").stdout.strip() == "delete-ns: Success, deleted nsid:1"
    c1 = idctrl(cm6)
    assert (c1["tnvmcap"], c1["unvmcap"]) == (tnvmcap, tnvmcap)
    assert namespaces(cm6) == []

    blocks = IDEMA_3_20_TB_BLOCKS * tnvmcap // CM6_FULL_TNVMCAP
    r = run_cli("nvme", "create-ns", cm6, "-s", str(blocks), "-c", str(blocks), "-b", "512")
    assert r.stdout.strip() == "create-ns: Success, created nsid:1"
    c2 = idctrl(cm6)
    assert c2["tnvmcap"] == tnvmcap and c2["unvmcap"] == tnvmcap - blocks * 512
    # 3.20 of 3.84 TB: the rest (1/6) is unallocated and works as extra spare for GC.
    assert c2["unvmcap"] / tnvmcap == pytest.approx(1 - 3.20 / 3.84, abs=0.002)
    (ns,) = namespaces(cm6)
    assert ns["attached"] is False and ns["nsze"] == blocks and ns["bytes"] == blocks * 512

    assert run_cli("nvme", "attach-ns", cm6, "-n", "1", "-c", "1").stdout.strip() == "attach-ns: Success, nsid:1"
    idns = run_cli("nvme", "id-ns", cm6, "-n", "1", "-o", "json").json()
    assert idns["nsze"] == idns["ncap"] == blocks and idns["nvmcap"] == blocks * 512
    assert namespaces(cm6)[0]["attached"] is True
    run_cli("precondition", cm6, "--seq", "128k", "--loops", "1", "-q")
    # One sequential pass covers every LBA (the last write is shortened to the namespace
    # end); NUSE counts it all, whether it reached NAND or still sits in the write buffer.
    assert blocks * 512 % 131072, "a size that is not a multiple of the block size"
    assert namespaces(cm6)[0]["nuse"] == blocks

    # A second namespace takes exactly what is left; one block more is refused.
    rest = c2["unvmcap"] // 4096
    bad = run_cli("nvme", "create-ns", cm6, "-s", str(rest + 1), "-c", str(rest + 1), "-b", "4096", check=False)
    assert bad.returncode == 1 and "NS_INSUFFICIENT_CAPACITY(0x4115)" in bad.stderr
    assert (
        run_cli("nvme", "create-ns", cm6, "-s", str(rest), "-c", str(rest), "-b", "4096").stdout.strip()
        == "create-ns: Success, created nsid:2"
    )
    c3 = idctrl(cm6)
    assert c3["unvmcap"] == c2["unvmcap"] - rest * 4096 and c3["tnvmcap"] == tnvmcap
    ns2 = namespaces(cm6)[1]
    assert ns2["lba_bytes"] == 4096 and ns2["flbas"] == 1 and ns2["attached"] is False
    run_cli("check", cm6)

    # delete-ns -n 0xffffffff deletes every namespace and returns all capacity.
    run_cli("nvme", "delete-ns", cm6, "-n", "0xffffffff")
    c4 = idctrl(cm6)
    assert c4["unvmcap"] == tnvmcap and namespaces(cm6) == []
    run_cli("check", cm6)


def test_format_ses2_purges_and_changes_lba_size(cm6_written: Path) -> None:
    ns = namespaces(cm6_written)[0]
    v0 = vendor(cm6_written)
    # The template was filled once: every IU is on NAND or in the write buffer (the last
    # 128 KiB write wraps to the start, so a few IUs can be in both).
    assert ns["nuse"] * 512 <= ns["bytes"] <= ns["nuse"] * 512 + v0["buffered_bytes"]
    assert v0["valid_bytes"] <= ns["bytes"] <= v0["valid_bytes"] + v0["buffered_bytes"]
    r = run_cli("nvme", "format", cm6_written, "-n", "1", "--ses", "2")
    assert r.stdout.strip() == "Success formatting namespace:1"
    v1 = vendor(cm6_written)
    assert namespaces(cm6_written)[0]["nuse"] == 0
    assert v1["valid_bytes"] == 0
    assert v1["trimmed_ius"] - v0["trimmed_ius"] == ns["nuse"] * 512 // 4096  # every mapped IU
    assert v1["buffered_bytes"] == 0
    assert v1["host_write_bytes"] == v0["host_write_bytes"]  # a purge is not a host write
    # Format to the 4 KiB LBA format: same bytes, an eighth of the blocks.
    run_cli("nvme", "format", cm6_written, "-n", "1", "-b", "4096", "--ses", "1")
    ns2 = namespaces(cm6_written)[0]
    assert (ns2["lba_bytes"], ns2["flbas"], ns2["nsze"], ns2["bytes"]) == (4096, 1, ns["nsze"] // 8, ns["bytes"])
    run_cli("check", cm6_written)


# --------------------------------------------------------------------------- precondition


def test_precondition_seq_then_rand(fresh: Path) -> None:
    # A CM6 at 1/454 (8 superblocks): the passes' counts and WAFs are the same story as at
    # 1/64 (rand 4k: WAF 3.86 over 3.9 GC cycles) for a seventh of the writes.
    cap = idctrl(fresh)["tnvmcap"]
    r = run_cli("precondition", fresh, "--seq", "128k", "--loops", "2", "--rand", "4k", "--amount", "2x", "-q")
    seq, rand = r.stdout.strip().splitlines()
    # Each pass spans two namespace passes: its WAF is the drive's, with its basis and amount.
    # A pass is not called steady state: the seq pass fills an empty drive, the rand pass
    # leaves the sequential state (its WAF is below the steady state's).
    span = r"\(fast-forward pass: [\d.]+ GiB written, 2\.00 namespace passes, ([\d.]+) GC cycles\)"
    m = re.match(rf"^\s*seq 128k: wrote .* in (\d+) IOs, NAND .*, WAF (\d+\.\d+) {span}, seed (\d+), [\d.]+ s$", seq)
    assert m, seq
    # Each pass ends with a write shortened to the namespace end: 2 x ceil(cap / 128k) I/Os.
    seq_ios = 2 * -(-cap // 131072)
    assert int(m[1]) == seq_ios and float(m[2]) == pytest.approx(1.0, abs=0.005)
    m = re.match(rf"^rand 4k: wrote .* in (\d+) IOs, NAND .*, WAF (\d+\.\d+) {span}, seed (\d+), [\d.]+ s$", rand)
    assert m, rand
    assert int(m[1]) == 2 * cap // 4096
    assert 2.5 < float(m[2]) < 6.0  # 14.5 % OP: steady state about 4.2, the warm-up below it
    assert float(m[3]) > 1.0  # GC turned the drive over more than once
    v = vendor(fresh)
    assert v["host_write_bytes"] == 2 * cap + 2 * cap
    s = smart(fresh)
    assert s["host_write_commands"] == seq_ios + 2 * cap // 4096
    run_cli("check", fresh)


def test_precondition_too_short_a_pass_prints_no_waf(small: Path) -> None:
    """64 MiB of random writes on the 10 GB drive: under a GC cycle and a namespace pass, so
    the line says so instead of printing the ratio as the drive's WAF."""
    out = run_cli("precondition", small, "--rand", "4k", "--amount", "64MiB", "--seed", "9", "-q").stdout
    m = re.search(
        r", WAF: not measured \(window wrote 64\.0 MiB, ([\d.]+) GC cycles, ([\d.]+) namespace passes; need >= 1 of either\)", out
    )
    assert m, out
    assert float(m[1]) < 1.0 and float(m[2]) <= 0.01
    assert not re.search(r"WAF \d", out)


def test_precondition_just_short_of_a_pass_is_not_printed_as_one(fresh: Path) -> None:
    """A pass 1 MiB short of the namespace on a fresh drive (no GC yet) is under the rule by
    a hair: it says "not measured", and its passes are not rounded up to the 1.00 it misses."""
    ns_bytes = namespaces(fresh)[0]["bytes"]
    out = run_cli("precondition", fresh, "--rand", "4k", "--amount", str(ns_bytes - (1 << 20)), "--seed", "4", "-q").stdout
    want = r", WAF: not measured \(window wrote [\d.]+ GiB, 0\.\d GC cycles, 0\.99 namespace passes; need >= 1 of either\)"
    assert re.search(want, out), out


def test_precondition_amount_as_size_and_seed_is_replayable(cm6: Path, tmp_path: Path) -> None:
    other = copy_image(cm6, tmp_path / "other")
    a = run_cli("precondition", cm6, "--rand", "16k", "--amount", "1GiB", "--seed", "42", "-q").stdout
    b = run_cli("precondition", other, "--rand", "16k", "--amount", "1GiB", "--seed", "42", "-q").stdout
    assert "wrote 1.07 GB in 65536 IOs" in a and "seed 42" in a

    def strip_time(s: str) -> str:
        return re.sub(r", [\d.]+ s$", "", s.strip())

    assert strip_time(a) == strip_time(b)
    assert vendor(cm6) == vendor(other)


def test_the_seeds_example_of_docs_cli_prints_what_it_shows(cm6: Path, tmp_path: Path) -> None:
    """docs/cli.md, "Seeds and determinism", as written on a fresh 1/64 CM6-R: the first
    command prints the line the page shows (its wall time aside), and the second, given the
    seed it printed, makes the same choices on a copy (the page once showed a WAF that a
    1 GiB window no longer reports)."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    first, shown, second = doc.split("### Seeds and determinism", 1)[1].split("```", 2)[1].strip().splitlines()
    copy = copy_image(cm6, tmp_path / "copy")

    def run(line: str) -> str:
        words = [{"./cm6": str(cm6), "./copy": str(copy)}.get(w, w) for w in shlex.split(line.removeprefix("$ "), comments=True)]
        assert words[0] == "ssdtwin", line
        return re.sub(r", [\d.]+ s$", "", run_cli(*words[1:]).stdout.strip())

    a = run(first)
    assert a == re.sub(r", [\d.]+ s$", "", shown.strip())
    assert run(second) == a


def test_default_seeds_follow_the_image_seed(tmp_path: Path) -> None:
    """Without --seed each command draws the image's next seed: two images created with the
    same seed replay identically, a different image seed gives different choices."""
    seeds = {}
    for name, image_seed in (("a", 1), ("b", 1), ("c", 2)):
        d = tmp_path / name
        run_cli("create", d, "--model", CM6, "--scale", "1/64", "--seed", str(image_seed))
        out = run_cli("precondition", d, "--rand", "4k", "--amount", "256MiB", "-q").stdout
        seeds[name] = (re.search(r"seed (\d+)", out)[1], vendor(d))  # type: ignore[index]
    assert seeds["a"] == seeds["b"]
    assert seeds["a"][0] != seeds["c"][0]


# --------------------------------------------------------------------------- logs


def test_smart_log_data_units_round_up_per_thousand_512_byte_units(cm6: Path) -> None:
    s0 = smart(cm6)
    assert s0["data_units_written"] == 0 and s0["host_write_commands"] == 0
    # 125 writes of 4 KiB = 1000 units of 512 B = exactly 1 data unit.
    run_cli("precondition", cm6, "--rand", "4k", "--amount", "500KiB", "--seed", "1", "-q")
    s1 = smart(cm6)
    assert (s1["data_units_written"], s1["host_write_commands"]) == (1, 125)
    # One more 4 KiB write: 1008 units -> rounds up to 2 (NVMe: thousands, rounded up).
    run_cli("precondition", cm6, "--rand", "4k", "--amount", "4KiB", "--seed", "2", "-q")
    s2 = smart(cm6)
    assert (s2["data_units_written"], s2["host_write_commands"]) == (2, 126)
    assert s2["data_units_read"] == 0 and s2["host_read_commands"] == 0
    assert s2["percent_used"] == 0 and s2["avail_spare"] == 100 and s2["critical_warning"] == 0
    text = run_cli("nvme", "smart-log", cm6).stdout
    assert text.startswith(f"Smart Log for NVME device:{cm6} namespace-id:ffffffff")
    assert re.search(r"(?m)^Data Units Written\s+: 2 \(1\.02 MB\)$", text)
    assert re.search(r"(?m)^host_write_commands\s+: 126$", text)
    assert re.search(r"(?m)^temperature\s+: 40 °C \(313 K\)$", text)


def test_vendor_log_fields(fresh: Path) -> None:
    v0 = vendor(fresh)
    assert v0["host_write_bytes"] == v0["nand_write_bytes"] == 0 and v0["waf"] == 0
    assert "intel_smart_add" not in v0  # CM6 has no Intel 0xF4/0xF5 attributes
    run_cli("precondition", fresh, "--seq", "128k", "--loops", "1", "--rand", "4k", "--amount", "1x", "-q")
    v = vendor(fresh)
    cap = idctrl(fresh)["tnvmcap"]
    assert v["nand_write_bytes"] == v["nand_write_host_bytes"] + v["nand_write_gc_bytes"]
    assert v["waf"] == pytest.approx(v["nand_write_bytes"] / v["host_write_bytes"], rel=1e-12)
    assert v["nand_write_gc_bytes"] > 0 and v["nand_read_gc_bytes"] == v["nand_write_gc_bytes"]
    assert v["nand_read_bytes"] == v["nand_read_rmw_bytes"] + v["nand_read_gc_bytes"]  # no host reads yet
    assert v["rmw_ius"] == 0  # 4 KiB writes on a 4 KiB IU never read-modify-write
    assert v["valid_bytes"] + v["buffered_bytes"] >= cap - v["buffered_bytes"]
    assert v["valid_bytes"] <= cap and v["iu_bytes"] == 4096
    assert v["superblocks"] == 8 and v["superblock_bytes"] == 64 * 2 * 1152 * 16384
    assert 0 <= v["free_superblocks"] < v["superblocks"]
    assert v["erase_count_min"] <= v["erase_count_avg"] <= v["erase_count_max"]
    assert v["pe_cycles_rated"] == 7000
    assert v["gc_victims"] >= v["superblock_erases"] - 1 and v["superblock_erases"] > 0
    text = run_cli("nvme", "vendor-log", fresh).stdout
    assert text.startswith(f"ssdtwin vendor log for device:{fresh}")
    assert re.search(rf"(?m)^waf \(lifetime\)\s+: {v['waf']:.4f}$", text)
    assert re.search(rf"(?m)^host_write_bytes\s+: {v['host_write_bytes']} ", text)
    assert "Additional Smart Log" not in text


def test_p5316_vendor_log_has_intel_0xf4_0xf5(tmp_path: Path) -> None:
    d = tmp_path / "p5316"
    run_cli("create", d, "--model", P5316, "--scale", "1/256")
    v0 = vendor(d)
    assert v0["intel_smart_add"] == {"nand_bytes_written_sectors": 0, "host_bytes_written_sectors": 0}
    run_cli("precondition", d, "--rand", "4k", "--amount", "100MiB", "--seed", "3", "-q")
    v = vendor(d)
    intel = v["intel_smart_add"]
    # Units of 65,536 sectors of 512 B (32 MiB), truncated: 100 MiB host -> 3.
    assert intel["host_bytes_written_sectors"] == v["host_write_bytes"] // 512 // 65536 == 3
    assert intel["nand_bytes_written_sectors"] == v["nand_write_bytes"] // 512 // 65536
    # 4 KiB writes on 64 KiB IUs: each programs a whole IU (read-modify-write).
    assert v["iu_bytes"] == 65536 and v["rmw_ius"] > 0
    assert intel["nand_bytes_written_sectors"] >= 15 * intel["host_bytes_written_sectors"]
    text = run_cli("nvme", "vendor-log", d).stdout
    assert f"Additional Smart Log for NVME device:{d} namespace-id:ffffffff" in text
    assert re.search(rf"(?m)^nand_bytes_written\s+: 100%\s+sectors: {intel['nand_bytes_written_sectors']}$", text)
    assert re.search(r"(?m)^host_bytes_written\s+: 100%\s+sectors: 3$", text)
    assert "0xF4/0xF5" in text


# --------------------------------------------------------------------------- waf


def test_waf_wraps_a_command_and_matches_vendor_log_deltas(small: Path) -> None:
    """A window of one namespace pass is the drive's WAF: printed with what it spans (basis
    "window": the flow cannot tell timed from fast-forward writes)."""
    # (The written CM6 at 1/454: each 4 KiB pass writes a seventh of what 1/64 took.)
    v0 = vendor(small)
    inner = [*SSDTWIN, "precondition", str(small), "--rand", "4k", "--amount", "1x", "-q"]
    r = run_cli("waf", small, "--", *inner)
    v1 = vendor(small)
    dh = v1["host_write_bytes"] - v0["host_write_bytes"]
    dn = v1["nand_write_bytes"] - v0["nand_write_bytes"]
    assert dh == idctrl(small)["tnvmcap"] // 4096 * 4096
    out = r.stdout.splitlines()
    assert out[0].startswith("rand 4k: wrote")  # the command's own output comes first
    assert f"host bytes written : {dh} " in r.stdout
    assert f"NAND bytes written : {dn} " in r.stdout
    w = re.search(
        r"(?m)^window\s+: [\d.]+ GiB written, 1\.00 namespace passes, ([\d.]+) GC cycles "
        r"\(basis: window, timed or fast-forward not known\)$",
        r.stdout,
    )
    assert w and float(w[1]) > 1.0, r.stdout
    m = re.search(r"(?m)^WAF\s+: (\d+\.\d+) \(steady: the window spans at least 1 GC cycle or 1 namespace pass\)$", r.stdout)
    assert m and float(m[1]) == pytest.approx(dn / dh, abs=5e-5), r.stdout
    assert 2.0 < dn / dh < 6.0
    # -o json: stdout is exactly one JSON document, with the measurement.
    inner = [*SSDTWIN, "precondition", str(small), "--rand", "4k", "--amount", "1x", "-q"]
    j = run_cli("waf", small, "-o", "json", "--", *inner).json()
    v2 = vendor(small)
    assert j["host_bytes_written"] == v2["host_write_bytes"] - v1["host_write_bytes"] == dh
    assert j["nand_bytes_written"] == v2["nand_write_bytes"] - v1["nand_write_bytes"]
    assert j["waf"] == pytest.approx(j["nand_bytes_written"] / j["host_bytes_written"])
    m = j["measurement"]
    assert (m["basis"], m["verdict"], m["waf"], m["host_bytes"]) == ("window", "steady", j["waf"], dh)
    assert m["namespace_passes"] == pytest.approx(1.0) and m["gc_cycles"] > 1.0
    assert m["gc_victims"] == v2["gc_victims"] - v1["gc_victims"] and m["superblocks"] == v2["superblocks"]
    assert "intel_waf" not in j


def test_waf_of_too_short_a_window_is_not_measured(cm6_written: Path) -> None:
    """256 MiB on a 60 GB namespace: under a GC cycle and a namespace pass. The text says
    so instead of a figure; JSON keeps its keys with ``waf`` null and the measurement."""
    inner = [*SSDTWIN, "precondition", str(cm6_written), "--rand", "4k", "--amount", "256MiB", "-q"]
    r = run_cli("waf", cm6_written, "--", *inner)
    w = re.search(r"(?m)^window\s+: 256\.0 MiB written, 0\.00 namespace passes, ([\d.]+) GC cycles \(basis: window", r.stdout)
    assert w and float(w[1]) < 1.0, r.stdout
    assert re.search(
        r"(?m)^WAF\s+: not measured \(the window spans less than 1 GC cycle or 1 namespace pass: its ratio is not the drive's WAF\)$",
        r.stdout,
    ), r.stdout
    j = run_cli("waf", cm6_written, "-o", "json", "--", *inner).json()
    assert j["host_bytes_written"] == 256 << 20 and j["nand_bytes_written"] > 0
    assert j["waf"] is None
    m = j["measurement"]
    assert (m["basis"], m["verdict"], m["waf"], m["host_bytes"]) == ("window", "insufficient", None, 256 << 20)
    assert m["waf_window_raw"] == pytest.approx(j["nand_bytes_written"] / j["host_bytes_written"])
    assert m["gc_cycles"] < 1.0 and m["namespace_passes"] < 0.01
    # A command that writes nothing: no ratio at all.
    j = run_cli("waf", cm6_written, "-o", "json", "--", *SSDTWIN, "nvme", "list", str(cm6_written)).json()
    assert (j["waf"], j["measurement"]["verdict"], j["measurement"]["waf_window_raw"]) == (None, "no_writes", None)


def test_waf_of_a_command_that_makes_the_image_again_is_refused(tmp_path: Path) -> None:
    from ssdtwin import waf
    from test_bad_input import assert_one_line_error

    img = tmp_path / "img"
    with Drive.create(img, CM6, scale=454) as d:
        d.precondition(1, "seq", 131072, amount_bytes=64 << 20)
        before = d.vendor_log()
    create = shlex.join([*SSDTWIN, "create", str(img), "--model", CM6, "--scale", "1/454"])
    again = f"rm -rf {shlex.quote(str(img))} && {create} >/dev/null 2>&1"
    # Printed "host bytes written : -67108864" and "WAF : - (nothing written)", exit 0.
    r = run_cli("waf", img, "--", "sh", "-c", again, check=False)
    went_down = "host_write_bytes went down from 67,108,864 to 0: not two vendor logs of one drive"
    assert_one_line_error(r, f"{img}: {went_down}", "WAF not computed")
    # The same from Python: the logs swapped were a window of "no_writes".
    with pytest.raises(waf.WafWindowError, match="^host_write_bytes went down from 67,108,864 to 0"):
        waf.measure(before, Drive.open(img, writable=False).vendor_log(), "window", 1 << 30)
    run_cli("check", img)


def test_waf_options_after_the_command_are_the_commands_without_a_double_dash(small: Path) -> None:
    """`waf DIR cmd ... -o json` gave the -o to waf (click reads options anywhere): waf
    printed JSON and the command its text. From the command's first word on, every
    argument is the command's, as after `--`; waf's own -o goes before the command."""
    inner = [*SSDTWIN, "nvme", "smart-log", str(small), "-o", "json"]
    with_dashes = run_cli("waf", small, "--", *inner)
    without = run_cli("waf", small, *inner)
    assert without.stdout == with_dashes.stdout
    assert json.loads(without.stdout.split("\n}\n")[0] + "\n}")["critical_warning"] == 0  # the command's JSON, then waf's text
    assert run_cli("waf", small, "-o", "json", *inner[:-2]).json()["measurement"]["verdict"] == "no_writes"
    assert run_cli("waf", small, "--output-format=json", *inner[:-2]).json()["waf"] is None


def test_waf_p5316_reports_the_intel_attribute_ratio(tmp_path: Path) -> None:
    d = tmp_path / "p5316"
    run_cli("create", d, "--model", P5316, "--scale", "1/256")
    inner = [*SSDTWIN, "precondition", str(d), "--seq", "128k", "--loops", "1", "-q"]
    j = run_cli("waf", d, "-o", "json", "--", *inner).json()
    v = vendor(d)
    assert j["intel_0xf5_host_units"] == v["intel_smart_add"]["host_bytes_written_sectors"] > 0
    assert j["intel_0xf4_nand_units"] == v["intel_smart_add"]["nand_bytes_written_sectors"]
    assert j["measurement"]["verdict"] == "steady"  # one namespace pass
    assert j["intel_waf"] == pytest.approx(j["waf"], rel=0.01)  # 32 MiB units: close, not exact
    # 100 MiB more: the attributes count it (3 units), but the window is no WAF of the drive's.
    inner = [*SSDTWIN, "precondition", str(d), "--rand", "4k", "--amount", "100MiB", "-q"]
    j = run_cli("waf", d, "-o", "json", "--", *inner).json()
    assert j["intel_0xf5_host_units"] in (3, 4) and j["measurement"]["verdict"] == "insufficient"
    assert j["waf"] is None and j["intel_waf"] is None
    text = run_cli("waf", d, "--", *inner).stdout
    assert "WAF from 0xF4/0xF5 : not measured (the same window)" in text


def test_waf_fails_when_the_command_fails(cm6: Path) -> None:
    before = image_digest(cm6)
    r = run_cli("waf", cm6, "--", *SSDTWIN, "precondition", str(cm6), "-n", "7", "--rand", "4k", check=False)
    assert r.returncode == 1
    assert r.stderr_lines[-1] == "ssdtwin waf: error: the command exited with status 1; WAF not computed"
    assert image_digest(cm6) == before
    r = run_cli("waf", cm6, check=False)
    assert r.returncode == 1 and len(r.stderr_lines) == 1 and "give the command to run after --" in r.stderr


# --------------------------------------------------------------------------- features, check, power


def test_write_protect_feature_blocks_writes_until_cleared(cm6: Path) -> None:
    assert run_cli("nvme", "get-feature", cm6, "-f", "0x84", "-n", "1", "-o", "json").json() == {"feature_id": 0x84, "sel": 0, "value": 0}
    run_cli("nvme", "set-feature", cm6, "-f", "0x84", "-n", "1", "-v", "1")
    r = run_cli("precondition", cm6, "--rand", "4k", "--amount", "1MiB", check=False)
    assert r.returncode == 1 and r.stderr_lines == [
        "ssdtwin precondition: error: NS_WRITE_PROTECTED(0x4020): namespace 1 is write protected"
    ]
    run_cli("nvme", "set-feature", cm6, "-f", "0x84", "-n", "1", "-v", "0")
    run_cli("precondition", cm6, "--rand", "4k", "--amount", "1MiB", "-q")
    # 2 = write protect until power cycle.
    run_cli("nvme", "set-feature", cm6, "-f", "0x84", "-n", "1", "-v", "2")
    assert run_cli("precondition", cm6, "--rand", "4k", "--amount", "1MiB", check=False).returncode == 1
    assert run_cli("power-cycle", cm6).stdout.strip() == f"{cm6}: power cycled"
    assert smart(cm6)["power_cycles"] == 1
    run_cli("precondition", cm6, "--rand", "4k", "--amount", "1MiB", "-q")


def test_saved_feature_is_what_a_power_cycle_restores(cm6: Path) -> None:
    def get(*args: str) -> str:
        return run_cli("nvme", "get-feature", cm6, *args).stdout

    run_cli("nvme", "set-feature", cm6, "-f", "8", "-v", "5", "-s")
    run_cli("nvme", "set-feature", cm6, "-f", "8", "-v", "7")
    assert get("-f", "8", "--sel", "2").strip() == "get-feature:0x08 (Interrupt Coalescing), Saved value:0x00000005"
    assert get("-f", "8", "-s", "1", "-o", "json") == '{\n  "feature_id": 8,\n  "sel": 1,\n  "value": 0\n}\n'
    assert get("-f", "8", "-s", "3").splitlines() == [
        "get-feature:0x08 (Interrupt Coalescing), Supported capabilities value:0x00000005",
        "  Feature is saveable",
        "  Feature is changeable",
    ]
    run_cli("power-cycle", cm6)
    assert get("-f", "8").strip() == "get-feature:0x08 (Interrupt Coalescing), Current value:0x00000005"
    # 84h is not saveable: SV fails with the spec's status and changes nothing.
    before = image_digest(cm6)
    r = run_cli("nvme", "set-feature", cm6, "-f", "0x84", "-n", "1", "-v", "1", "--save", check=False)
    assert r.returncode == 1 and r.stderr_lines == [
        "ssdtwin nvme set-feature: error: FEATURE_NOT_SAVEABLE(0x410d): feature 0x84 is not saveable "
        "(saveable: 0x01, 0x02, 0x04, 0x08); set it without -s/--save"
    ]
    assert image_digest(cm6) == before
    assert "Feature is saveable" not in get("-f", "0x84", "-n", "1", "-s", "3")
    assert run_cli("check", cm6).returncode == 0


def test_power_state_feature(cm6: Path) -> None:
    assert run_cli("nvme", "get-feature", cm6, "-f", "2").stdout.strip() == "get-feature:0x02 (Power Management), Current value:00000000"
    r = run_cli("nvme", "set-feature", cm6, "-f", "2", "-v", "9", check=False)
    assert r.returncode == 1 and "INVALID_FIELD" in r.stderr and "power state 9" in r.stderr


def test_nuse_counts_buffered_writes(cm6_written: Path) -> None:
    # One 128 KiB sequential pass writes every LBA of the namespace (the last write is
    # shortened to its end); NUSE counts all of it, including the IUs that still sit in the
    # (power-loss protected) write buffer.
    ns = namespaces(cm6_written)[0]
    assert vendor(cm6_written)["buffered_bytes"] > 0
    assert ns["nuse"] == ns["nsze"]


def test_nuse_counts_a_buffered_write_by_its_iu(tmp_path: Path) -> None:
    # docs/cli.md said buffered data was not counted; it is, IU by IU: one 4 KiB write that
    # is still in the buffer of a drive of 64 KiB IUs and 512 B LBAs uses 128 blocks.
    d = tmp_path / "p5316"
    run_cli("create", d, "--model", "intel-p5316-15.36t", "--scale", "1/256")
    run_cli("precondition", d, "--rand", "4k", "--amount", "4k", "-q")
    v = vendor(d)
    assert (v["nand_write_bytes"], v["buffered_bytes"], v["iu_bytes"]) == (0, 65536, 65536)
    assert namespaces(d)[0]["nuse"] == 65536 // 512
    run_cli("check", d)


def test_check_reports_consistent_image(cm6_written: Path) -> None:
    assert run_cli("check", cm6_written).stdout.strip() == f"{cm6_written}: FTL consistent"


def test_read_only_commands_do_not_change_the_image(cm6_written: Path) -> None:
    before = image_digest(cm6_written)
    for verb, extra in (
        ("list", []),
        ("id-ctrl", []),
        ("id-ns", ["-n", "1"]),
        ("smart-log", []),
        ("vendor-log", []),
        ("get-feature", ["-f", "2"]),
        ("ana-log", []),
        ("get-lba-status", ["-n", "1"]),
    ):
        run_cli("nvme", verb, cm6_written, *extra)
    run_cli("check", cm6_written)
    assert image_digest(cm6_written) == before


def test_help_lists_every_command() -> None:
    top = run_cli("--help").stdout
    for cmd in ("models", "create", "check", "precondition", "waf", "demo", "nvme", "power-cycle"):
        assert cmd in top, cmd
    sub = run_cli("nvme", "--help").stdout
    for cmd in (
        "list",
        "id-ctrl",
        "id-ns",
        "create-ns",
        "delete-ns",
        "attach-ns",
        "detach-ns",
        "format",
        "smart-log",
        "vendor-log",
        "get-feature",
        "set-feature",
        "predictable-lat-log",
        "pred-lat-event-agg-log",
        "ana-log",
        "ana-state",
        "get-lba-status",
        "inject-media-error",
    ):
        assert cmd in sub, cmd


@pytest.mark.parametrize("stderr", ["2>&-", "2</dev/null"])
def test_every_command_runs_with_stderr_closed(tmp_path: Path, stderr: str) -> None:
    """Only `serve` pointed a closed stderr at /dev/null. `ssdtwin create IMG 2>&-` created
    the image, then failed its note (Python left sys.stderr None; through pyenv's shim a
    read-only descriptor 2) and exited 1; `ssdtwin fio IMG job --output-format json 2>&-`
    exited 1 after its JSON. Every command now runs as usual, its notes going nowhere."""
    d, job = tmp_path / "cm6", tmp_path / "w.fio"
    job.write_text("[w]\nrw=randwrite\nbs=4k\nsize=1m\n")

    def closed(*args: object) -> subprocess.CompletedProcess[str]:
        argv = ["sh", "-c", f'exec "$@" {stderr}', "sh", *SSDTWIN, *map(str, args)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)

    created = closed("create", d, "--model", CM6, "--scale", "1/454")
    assert created.returncode == 0 and created.stdout.startswith(f"created {d}:"), created
    ran = closed("fio", d, job, "--output-format", "json")
    assert ran.returncode == 0, ran
    assert json.loads(ran.stdout)["jobs"][0]["write"]["io_bytes"] == 1 << 20
    check_image(d)


def test_fio_takes_o_json_like_every_other_command(fresh: Path, tmp_path: Path) -> None:
    """docs/cli.md: "-o json (or --output-format json)" for every command; `ssdtwin fio` and
    `ssdtwin cluster fio` had only the long form (`-o json`: "No such option: -o", exit 2)."""
    job = tmp_path / "r.fio"
    job.write_text("[r]\nrw=randread\nbs=4k\nsize=1m\n")
    r = run_cli("fio", fresh, job, "--scratch", "-o", "json")
    assert r.json()["jobs"][0]["read"]["io_bytes"] == 1 << 20, r
    bad = run_cli("fio", fresh, job, "-o", "xml", check=False)
    assert bad.returncode == 1 and bad.stderr_lines == ["ssdtwin fio: error: -o/--output-format 'xml': must be normal, json or json+"], bad
    assert "-o, --output-format" in run_cli("cluster", "fio", "--help").stdout
