"""`ssdtwin nvme … -o json` prints what nvme-cli 2.4 prints: per verb, the same keys in the
same order, nested the same way, with the same JSON types, against the keys extracted from
nvme-cli's own printers at tag v2.4 (tests/data/nvme-cli-2.4: keys.json, made by
extract.py; README.md there names the commit). A second check runs Debian's nvme-cli binary
on the twin's raw Identify data and log pages through a fake device (fake_nvme.c) and
compares its JSON, values included, with the twin's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Optional

import pytest

from ssdtwin import Drive
from twin import CM6, P5316, SSDTWIN, copy_image, run_cli

DATA = Path(__file__).parent / "data" / "nvme-cli-2.4"
KEYS: dict[str, Any] = json.loads((DATA / "keys.json").read_text())
PB5 = "memblaze-pblaze5-910-3.84t"

#: Arrays the twin prints empty by design, with why: their element keys cannot be compared.
EMPTY_BY_DESIGN = {
    "list -v": {
        "Devices[].Subsystems[].Controllers[].Paths": "one PCIe controller, no multipath: no paths",
        "Devices[].Subsystems[].Namespaces": "without multipath the namespaces sit under their controller",
    },
}


def json_type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"  # nvme-cli 2.4 prints none
    if isinstance(v, (int, float)):
        return "number"
    return {str: "string", dict: "object", list: "array", type(None): "null"}[type(v)]


def shape(doc: Any, prefix: str = "") -> list[list[str]]:
    """[path, JSON type] of every key in order, like extract.py's: nested objects as
    ``parent.key``, the elements of an array merged as ``array[].key``."""
    rows: list[list[str]] = []
    seen: set[str] = set()

    def add(row: list[str]) -> None:
        if row[0] not in seen:
            seen.add(row[0])
            rows.append(row)

    items = [(f"{prefix}[]", e) for e in doc] if isinstance(doc, list) else [(f"{prefix}.{k}" if prefix else k, v) for k, v in doc.items()]
    for path, value in items:
        if not path.endswith("[]"):
            add([path, json_type(value)])
        if isinstance(value, (dict, list)):
            for row in shape(value, path):
                add(row)
    return rows


def normalise(doc: Any, device: str) -> Any:
    """nvme-cli's computed keys as extract.py names them: the device, a firmware slot."""
    if isinstance(doc, dict):
        out = {}
        for k, v in doc.items():
            k = "<device>" if k == device else re.sub(r"^Firmware Rev Slot \d$", "Firmware Rev Slot <n>", k)
            out[k] = normalise(v, device)
        return out
    if isinstance(doc, list):
        return [normalise(e, device) for e in doc]
    return doc


def expected(verb: str) -> list[list[str]]:
    keys: list[list[str]] = KEYS["verbs"][verb]["keys"]
    empty = EMPTY_BY_DESIGN.get(verb, {})
    return [k for k in keys if not any(k[0].startswith(f"{a}[]") for a in empty)]


def differences(verb: str, doc: Any, device: str) -> dict[str, list[Any]]:
    """What the twin's JSON lacks, has beyond nvme-cli 2.4, and prints with another type."""
    ours, theirs = shape(normalise(doc, device)), expected(verb)
    mine, want = dict(map(tuple, ours)), dict(map(tuple, theirs))
    return {
        "missing": [k for k in want if k not in mine],
        "extra": [k for k in mine if k not in want],
        "types": [(k, mine[k], want[k]) for k in want if k in mine and mine[k] != want[k]],
    }


# --------------------------------------------------------------------------- the drives


@pytest.fixture(scope="module")
def drives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CM6 (ANA groups) with two failed reads in its error log, a PBlaze5 with two NVM Sets
    and a predictable latency event, a P5316 (Intel's additional SMART log)."""
    base = tmp_path_factory.mktemp("nvme-cli-json")
    cm6, pb5, p5316 = base / "cm6", base / "pb5", base / "p5316"
    run_cli("create", cm6, "--model", CM6, "--scale", "1/454")
    from ssdtwin import Drive

    d = Drive.open(cm6)
    nsze = d.nvme.namespace(1).nsze
    for slba in (nsze, nsze + 7):
        with pytest.raises(Exception, match="LBA_RANGE"):
            d.read(1, slba, 1)
    d.commit()
    d.close()
    run_cli("create", pb5, "--model", PB5, "--scale", "1/256", "--nvm-sets", "2")
    job = base / "w.fio"
    for seconds, dtwin in ((2, False), (35, True)):  # NDWIN's minimum, then a DTWIN that outlives its maximum
        job.write_text(f"[global]\nfilename=ns1\nbs=4k\ntime_based=1\nruntime={seconds}s\n[w]\nrw=randwrite\nrate=1m\n")
        if dtwin:
            run_cli("nvme", "set-feature", pb5, "-f", "0x14", "-V", "1", "-c", "1")
        else:
            run_cli("nvme", "set-feature", pb5, "-f", "0x13", "-V", "1", "-c", "1")
        run_cli("fio", pb5, job)
    run_cli("create", p5316, "--model", P5316, "--scale", "1/256")
    return {"cm6": cm6, "pb5": pb5, "p5316": p5316}


#: Each verb of keys.json: the drive, the command's words and its options.
VERBS: dict[str, tuple[str, list[str], list[str]]] = {
    "id-ctrl": ("cm6", ["id-ctrl"], []),
    "id-ns": ("cm6", ["id-ns"], ["-n", "1"]),
    "smart-log": ("cm6", ["smart-log"], []),
    "smart-log -H": ("cm6", ["smart-log"], ["-H"]),
    "error-log": ("cm6", ["error-log"], []),
    "fw-log": ("cm6", ["fw-log"], []),
    "endurance-log": ("pb5", ["endurance-log"], ["-g", "1"]),
    "sanitize-log": ("cm6", ["sanitize-log"], []),
    "ana-log": ("cm6", ["ana-log"], []),
    "predictable-lat-log": ("pb5", ["predictable-lat-log"], ["-i", "1"]),
    "pred-lat-event-agg-log": ("pb5", ["pred-lat-event-agg-log"], []),
    "id-nvmset": ("pb5", ["id-nvmset"], []),
    "list-ns": ("cm6", ["list-ns"], []),
    "list-ctrl": ("cm6", ["list-ctrl"], []),
    "list": ("cm6", ["list"], []),
    "list -v": ("cm6", ["list"], ["-v"]),
    "intel smart-log-add": ("p5316", ["intel", "smart-log-add"], []),
}


def twin_json(drives: dict[str, Path], verb: str, *more: str) -> tuple[Any, str]:
    drive, words, options = VERBS[verb]
    path = drives[drive]
    return run_cli("nvme", *words, path, *options, *more, "-o", "json").json(), str(path)


def test_every_extracted_verb_is_run() -> None:
    assert sorted(VERBS) == sorted(KEYS["verbs"])
    assert KEYS["nvme-cli"]["ref"] == "v2.4" and KEYS["nvme-cli"]["commit"].startswith("0b2961e62f41")


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_json_has_nvme_cli_2_4_keys_order_and_types(drives: dict[str, Path], verb: str) -> None:
    doc, device = twin_json(drives, verb)
    assert differences(verb, doc, device) == {"missing": [], "extra": [], "types": []}
    assert shape(normalise(doc, device)) == expected(verb), "same keys, same order"
    for array in EMPTY_BY_DESIGN.get(verb, {}):
        node: Any = doc
        for part in array.split("."):
            node = node[part.removesuffix("[]")][0] if part.endswith("[]") else node[part]
        assert node == [], array


def test_id_ctrl_values_follow_the_drive(drives: dict[str, Path]) -> None:
    c, _ = twin_json(drives, "id-ctrl")
    assert c["mn"] == "KCM6XRUL3T84".ljust(40) and len(c["sn"]) == 20 and c["fr"] == "0106    ", "fixed-width fields, space padded"
    assert (c["cntrltype"], c["fguid"], c["sgls"], c["hctma"], c["mntmt"], c["mxtmt"]) == (
        1,
        "00000000-0000-0000-0000-000000000000",
        0,
        0,
        0,
        0,
    )
    assert (c["cmic"], c["anacap"], c["anagrpmax"]) == (0x08, 0x5F, c["nn"]), "the CM6's ANA reporting"
    assert [p["flags"] for p in c["psds"]] == [0] * 6 + [2], "MXPS clear (0.01 W units); NOPS on the non-operational PS6"
    assert not [k for k in c if k.startswith("vs_")]


def test_vendor_specific_fields_only_with_v(drives: dict[str, Path], tmp_path: Path) -> None:
    ns, _ = twin_json(drives, "id-ns", "-v")
    assert list(ns)[-1] == "vs_mek_id" and "vs_mek_id" not in twin_json(drives, "id-ns")[0]
    pb5 = drives["pb5"]
    assert "vs_dram_ns" in run_cli("nvme", "id-ctrl", pb5, "-v", "-o", "json").json()
    assert "vs_dram_ns" not in run_cli("nvme", "id-ctrl", pb5, "-o", "json").json()


def test_smart_log_h_spells_out_the_critical_warning(drives: dict[str, Path]) -> None:
    plain, _ = twin_json(drives, "smart-log")
    human, _ = twin_json(drives, "smart-log", "-H")
    assert plain["critical_warning"] == 0
    assert human["critical_warning"] == {
        "value": 0,
        "available_spare": 0,
        "temp_threshold": 0,
        "reliability_degraded": 0,
        "ro": 0,
        "vmbu_failed": 0,
        "pmr_ro": 0,
    }
    assert {k: v for k, v in human.items() if k != "critical_warning"} == {k: v for k, v in plain.items() if k != "critical_warning"}
    text = run_cli("nvme", "smart-log", drives["cm6"], "-H").stdout
    assert re.search(r"(?m)^\s+Read-only\[3\]\s+: 0$", text)


def test_list_prints_the_flat_devices_and_the_verbose_tree(drives: dict[str, Path]) -> None:
    cm6 = drives["cm6"]
    flat = run_cli("nvme", "list", cm6, "-o", "json").json()["Devices"]
    ns = run_cli("nvme", "id-ns", cm6, "-n", "1", "-o", "json").json()
    lba = 1 << ns["lbafs"][ns["flbas"] & 0xF]["ds"]
    assert flat == [
        {
            "NameSpace": 1,
            "DevicePath": str(cm6),
            "GenericPath": str(cm6),
            "Firmware": "0106",
            "ModelNumber": "KCM6XRUL3T84",
            "SerialNumber": flat[0]["SerialNumber"],
            "UsedBytes": ns["nuse"] * lba,
            "MaximumLBA": ns["nsze"],
            "PhysicalSize": ns["nsze"] * lba,
            "SectorSize": lba,
        }
    ]
    tree = run_cli("nvme", "list", cm6, "-v", "-o", "json").json()["Devices"][0]["Subsystems"][0]
    assert tree["Controllers"][0]["Namespaces"][0]["NSID"] == 1 and tree["Controllers"][0]["Transport"] == "pcie"
    text = run_cli("nvme", "list", cm6, "-v").stdout
    assert text.startswith("Subsystem ") and "nvme0n1" in text


def test_intel_smart_log_add_counts_what_the_drive_wrote(drives: dict[str, Path]) -> None:
    doc, _ = twin_json(drives, "intel smart-log-add")
    vendor = run_cli("nvme", "vendor-log", drives["p5316"], "-o", "json").json()
    stats = doc["Device stats"]
    assert stats["nand_bytes_written"]["raw"] == vendor["intel_smart_add"]["nand_bytes_written_sectors"]
    assert stats["timed_workload_media_wear"]["raw"] == "0.000000", "the plugin prints this one with %Lf"
    refused = run_cli("nvme", "intel", "smart-log-add", drives["cm6"], "-o", "json", check=False)
    assert refused.returncode != 0 and refused.stdout == "" and "0xca" in refused.stderr


# --------------------------------------------------------------------------- re-extraction


def test_extract_reproduces_keys_json(tmp_path: Path) -> None:
    """keys.json is what extract.py makes of nvme-cli v2.4 (NVME_CLI_SRC: a clone, or its
    git directory, holding the tag)."""
    src = os.environ.get("NVME_CLI_SRC")
    if not src:
        pytest.skip("NVME_CLI_SRC (a clone of linux-nvme/nvme-cli) not set")
    out = subprocess.run(["python3", DATA / "extract.py", src, "--ref", "v2.4"], check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == KEYS


# --------------------------------------------------------------------------- Debian's nvme-cli


def debian_nvme() -> Optional[tuple[str, str]]:
    """The nvme binary and its version, if it is the 2.3/2.4 line and a C compiler is here."""
    nvme, cc = shutil.which("nvme"), shutil.which("cc")
    if not (nvme and cc):
        return None
    version = subprocess.run([nvme, "version"], capture_output=True, text=True).stdout.split()
    return (nvme, version[2]) if len(version) > 2 and version[2] in ("2.3", "2.4") else None


#: Verbs the fake device answers (Identify CNS 00h/01h, log pages 01h, 02h, 03h, 81h).
REAL_VERBS = ("id-ctrl", "id-ns", "smart-log", "smart-log -H", "error-log", "fw-log", "sanitize-log")


def same(theirs: Any, ours: Any, where: str = "") -> list[str]:
    """Where nvme-cli's document and the twin's differ. Two ways nvme-cli up to 2.3 prints
    numbers count as the same number: a 128-bit counter as a string of digits, and a 32-bit
    unsigned field through json_object_new_int (0xFFFFFFFF as -1); 2.4 prints both as
    the unsigned number."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        if list(ours) != list(theirs):
            return [f"{where}: keys {list(theirs)} != {list(ours)}"]
        return [d for k in ours for d in same(theirs[k], ours[k], f"{where}.{k}")]
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [d for i, (t, o) in enumerate(zip(theirs, ours)) for d in same(t, o, f"{where}[{i}]")]
    if isinstance(ours, int) and isinstance(theirs, str) and theirs == str(ours):
        return []
    if isinstance(ours, int) and isinstance(theirs, int) and theirs < 0 and theirs + (1 << 32) == ours:
        return []
    return [] if theirs == ours and type(theirs) is type(ours) else [f"{where}: nvme-cli {theirs!r}, ssdtwin {ours!r}"]


@pytest.fixture(scope="module")
def fake_device(drives: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    found = debian_nvme()
    if found is None:
        pytest.skip("no nvme-cli 2.3/2.4 binary (apt-get install nvme-cli) or no C compiler")
    nvme, _ = found
    d = tmp_path_factory.mktemp("fake-nvme")
    lib = d / "fake_nvme.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, DATA / "fake_nvme.c", "-ldl"], check=True)
    cm6 = drives["cm6"]
    pages = {
        "identify-1-0.bin": ["nvme", "id-ctrl", cm6, "-b"],
        "identify-0-1.bin": ["nvme", "id-ns", cm6, "-n", "1", "-b"],
        "log-1.bin": ["nvme", "error-log", cm6, "-b"],
        "log-2.bin": ["nvme", "get-log", cm6, "-i", "2", "-l", "512", "-b"],
        "log-3.bin": ["nvme", "fw-log", cm6, "-b"],
        "log-129.bin": ["nvme", "sanitize-log", cm6, "-b"],
    }
    for name, args in pages.items():
        raw = subprocess.run([*SSDTWIN, *map(str, args)], check=True, capture_output=True).stdout
        (d / name).write_bytes(raw)
    return nvme, lib, d


@pytest.mark.parametrize("verb", REAL_VERBS)
def test_debian_nvme_cli_prints_the_same_json(drives: dict[str, Path], fake_device: tuple[str, Path, Path], verb: str) -> None:
    nvme, lib, pages = fake_device
    _, words, options = VERBS[verb]
    env = {**os.environ, "LD_PRELOAD": str(lib), "FAKE_NVME_DIR": str(pages)}
    real = subprocess.run([nvme, *words, "/dev/null", *options, "-o", "json"], check=True, capture_output=True, text=True, env=env)
    ours, device = twin_json(drives, verb)
    assert same(normalise(json.loads(real.stdout), "null"), normalise(ours, device)) == []


def test_debian_nvme_cli_prints_the_same_id_ns_text(drives: dict[str, Path], fake_device: tuple[str, Path, Path], tmp_path: Path) -> None:
    """`id-ns` without -o json is nvme-cli's text, byte for byte: of an attached namespace in
    a PI format, and the zeros of an inactive NSID (the twin printed ``nuse : 0x0``, ``mc : 3``,
    ``dlfeat : 0x9``, ``rp:0x0``, no mssrl/mcl/msrc/nulbaf, ``nsattr`` without nvme-cli's tab)."""
    nvme, lib, _ = fake_device
    img = copy_image(drives["cm6"], tmp_path / "cm6")
    run_cli("nvme", "detach-ns", img, "-n", "1")
    run_cli("nvme", "delete-ns", img, "-n", "1")
    run_cli("nvme", "create-ns", img, "-s", "0x10000", "-c", "0x10000", "-b", "4096")
    run_cli("nvme", "attach-ns", img, "-n", "1", "-c", "1")
    run_cli("nvme", "format", img, "-n", "1", "-l", "4", "-i", "1")  # 4096+8 B, PI type 1
    run_cli("nvme", "create-ns", img, "-s", "8", "-c", "8")  # nsid 2, never attached
    pages = tmp_path / "pages"
    pages.mkdir()
    for nsid in (1, 2, 9):
        raw = subprocess.run([*SSDTWIN, "nvme", "id-ns", str(img), "-n", str(nsid), "-b"], check=True, capture_output=True).stdout
        (pages / f"identify-0-{nsid}.bin").write_bytes(raw)
        env = {**os.environ, "LD_PRELOAD": str(lib), "FAKE_NVME_DIR": str(pages)}
        real = subprocess.run([nvme, "id-ns", "/dev/null", "-n", str(nsid)], check=True, capture_output=True, text=True, env=env)
        assert run_cli("nvme", "id-ns", img, "-n", str(nsid)).stdout == real.stdout, nsid


def test_debian_nvme_cli_prints_the_same_error_log_text(
    drives: dict[str, Path], fake_device: tuple[str, Path, Path], tmp_path: Path
) -> None:
    """`error-log` without -o json is nvme-cli's text: tabs, C's ``%#x`` (``cmdid : 0``, not
    ``0x0``), the status and the transport type spelled out (the twin padded with spaces,
    printed ``status_field : 0x4080`` and ``trtype : 0``). Debian's 2.3 binary lacks 2.4's
    csi, opcode and log_page_version lines, which follow 2.4's source."""
    nvme, lib, cm6_pages = fake_device
    img = copy_image(drives["cm6"], tmp_path / "cm6")
    d = Drive.open(img)
    nsze = d.nvme.namespace(1).nsze
    with pytest.raises(Exception, match="LBA_RANGE"):
        d.read(1, nsze, 1)
    d.commit()
    d.close()
    run_cli("nvme", "set-feature", img, "-f", "0x84", "-n", "1", "-v", "1")
    d = Drive.open(img)
    with pytest.raises(Exception, match="NS_WRITE_PROTECTED"):
        d.write(1, 0, 8)
    d.commit()
    d.close()
    pages = tmp_path / "pages"
    pages.mkdir()
    shutil.copy(cm6_pages / "identify-1-0.bin", pages)  # nvme-cli reads ELPE first
    raw = subprocess.run([*SSDTWIN, "nvme", "error-log", str(img), "-b"], check=True, capture_output=True).stdout
    (pages / "log-1.bin").write_bytes(raw)
    env = {**os.environ, "LD_PRELOAD": str(lib), "FAKE_NVME_DIR": str(pages)}
    real = subprocess.run([nvme, "error-log", "/dev/null"], check=True, capture_output=True, text=True, env=env).stdout
    ours = run_cli("nvme", "error-log", img).stdout.replace(f"device:{img} ", "device:null ")
    lines = ours.splitlines()
    assert re.fullmatch(r"error_count\t: \d+", lines[4]) and lines[5] == "sqid\t\t: 1"
    assert lines[7].startswith("status_field\t: 0x4020(Namespace is Write Protected: ")
    assert lines[14:17] == ["csi\t\t: 0", "opcode\t\t: 0x1", "cs\t\t: 0"]  # 2.4: csi, opcode after trtype
    assert lines[18] == "log_page_version: 0"
    not_in_2_3 = ("csi\t", "opcode\t", "log_page_version:")
    ours_2_3 = "".join(line + "\n" for line in lines if not line.startswith(not_in_2_3))
    assert ours_2_3 == real


def test_debian_nvme_cli_prints_the_same_sanitize_log_text(
    drives: dict[str, Path], fake_device: tuple[str, Path, Path], tmp_path: Path
) -> None:
    """`sanitize-log` (and `-H`) without -o json is nvme-cli's text, idle and while a
    sanitize runs, then the NVMe 2.0 SSI line nvme-cli 2.4 lacks (2.16's). The twin printed
    its own layout: ``(SPROG):``, ``SSTAT: global_erased:1 passes:0 (0) NVM Subsystem has
    never been sanitized.``, ``SCDW10: 0x0``."""
    nvme, lib, _ = fake_device
    img = copy_image(drives["cm6"], tmp_path / "cm6")
    pages = tmp_path / "pages"
    pages.mkdir()
    env = {**os.environ, "LD_PRELOAD": str(lib), "FAKE_NVME_DIR": str(pages)}
    for running in (False, True):
        if running:
            run_cli("nvme", "sanitize", img, "-a", "2")
        raw = subprocess.run([*SSDTWIN, "nvme", "sanitize-log", str(img), "-b"], check=True, capture_output=True).stdout
        (pages / "log-129.bin").write_bytes(raw)
        for human in ([], ["-H"]):
            real = subprocess.run([nvme, "sanitize-log", "/dev/null", *human], check=True, capture_output=True, text=True, env=env)
            ours = run_cli("nvme", "sanitize-log", img, *human).stdout
            head, ssi = ours.split("Sanitize State Information               (SSI) : ")
            assert head == real.stdout, (running, human)
            assert ssi.startswith("0x1\n" if running else "0\n"), (running, human)
            assert ("\t(" in head) == (running and human == ["-H"]), "-H: the progress in percent while running"


@pytest.mark.parametrize("drive", ["cm6", "pb5", "p5316"])
def test_debian_nvme_cli_prints_the_same_id_ctrl_text(
    drives: dict[str, Path], fake_device: tuple[str, Path, Path], tmp_path: Path, drive: str
) -> None:
    """`id-ctrl` without -o json is nvme-cli's text, every line (it was 33 of nvme-cli's 86
    fields, ``vwc : 0x0`` for nvme-cli's ``0``, ``nwpc : 0x7`` for ``7``, the power states
    indented otherwise and without their workload line)."""
    nvme, lib, _ = fake_device
    raw = subprocess.run([*SSDTWIN, "nvme", "id-ctrl", str(drives[drive]), "-b"], check=True, capture_output=True).stdout
    (tmp_path / "identify-1-0.bin").write_bytes(raw)
    env = {**os.environ, "LD_PRELOAD": str(lib), "FAKE_NVME_DIR": str(tmp_path)}
    real = subprocess.run([nvme, "id-ctrl", "/dev/null"], check=True, capture_output=True, text=True, env=env)
    assert run_cli("nvme", "id-ctrl", drives[drive]).stdout == real.stdout


def test_smart_log_text_is_nvme_cli_2_4s(tmp_path: Path) -> None:
    """nvme-cli 2.4's nvme_show_smart_log, its format strings as they are (tabs, %#x); the twin
    padded with spaces and printed the critical warning in decimal (Debian's 2.3 binary prints
    another temperature line, so this compares with 2.4's source, not a binary)."""
    d = tmp_path / "cm6"
    run_cli("create", d, "--model", CM6, "--scale", "1/454")
    run_cli("nvme", "set-feature", d, "-f", "4", "-v", "300")  # over threshold under 313 K: warning bit 1
    expected = [
        f"Smart Log for NVME device:{d} namespace-id:ffffffff",
        "critical_warning\t\t\t: 0x2",
        "      Available Spare[0]             : 0",
        "      Temp. Threshold[1]             : 1",
        "      NVM subsystem Reliability[2]   : 0",
        "      Read-only[3]                   : 0",
        "      Volatile mem. backup failed[4] : 0",
        "      Persistent Mem. RO[5]          : 0",
        "temperature\t\t\t\t: 40 °C (313 K)",
        "available_spare\t\t\t\t: 100%",
        "available_spare_threshold\t\t: 10%",
        "percentage_used\t\t\t\t: 0%",
        "endurance group critical warning summary: 0",
        "Data Units Read\t\t\t\t: 0 (0.00 B)",
        "Data Units Written\t\t\t: 0 (0.00 B)",
        "host_read_commands\t\t\t: 0",
        "host_write_commands\t\t\t: 0",
        "controller_busy_time\t\t\t: 0",
        "power_cycles\t\t\t\t: 0",
        "power_on_hours\t\t\t\t: 0",
        "unsafe_shutdowns\t\t\t: 0",
        "media_errors\t\t\t\t: 0",
        "num_err_log_entries\t\t\t: 0",
        "Warning Temperature Time\t\t: 0",
        "Critical Composite Temperature Time\t: 0",
        "Thermal Management T1 Trans Count\t: 0",
        "Thermal Management T2 Trans Count\t: 0",
        "Thermal Management T1 Total Time\t: 0",
        "Thermal Management T2 Total Time\t: 0",
    ]
    assert run_cli("nvme", "smart-log", d, "-H").stdout.splitlines() == expected
    assert run_cli("nvme", "smart-log", d).stdout.splitlines() == expected[:2] + expected[8:]
