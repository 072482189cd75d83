"""`ssdtwin pts` on drives other than the CM6 (docs/pts.md): the Intel P5316's 64 KiB
indirection unit, and a namespace smaller than the drive.

The P5316 is made at 1/263 (the smallest it allows) with its factory namespace replaced by
a 1 GiB one, so WIPC writes 2 GiB and a 1 s round costs little."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from ssdtwin.pts.report.parts import header
from ssdtwin.sweep.point import preset_digest
from twin import P5316, Run, check_image

NS_BLOCKS = 2 * 1024 * 1024  # 1 GiB of 512 B LBAs


@pytest.fixture(scope="module")
def p5316_small_ns(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from twin import run_cli

    d = tmp_path_factory.mktemp("p5316") / "p5316"
    run_cli("create", d, "--model", P5316, "--scale", "1/263")
    run_cli("nvme", "detach-ns", d, "-n", "1")
    run_cli("nvme", "delete-ns", d, "-n", "1")
    run_cli("nvme", "create-ns", d, "-s", str(NS_BLOCKS), "-c", str(NS_BLOCKS), "-b", "512")
    run_cli("nvme", "attach-ns", d, "-n", "1", "-c", "1")
    return d


def test_p5316_report_says_which_writes_are_not_whole_ius(p5316_small_ns: Path, tmp_path: Path, cli: Callable[..., Run]) -> None:
    """A 4 KiB random write on the P5316's 64 KiB IU is a read-modify-write: the report gave
    its IOPS with no word of it (nor the IU in the device header), so a reader compared them
    with a 4 KiB-IU drive's. Now the header names the IU and the test says which of its
    writes are not whole IUs (4 KiB here, not the 64 KiB ones)."""
    rep = tmp_path / "rep"
    args = ["--tests", "iops", "--iops-bs", "64k,4k", "--iops-mixes", "0", "--round", "1s", "--max-rounds", "5"]
    r = cli("pts", p5316_small_ns, *args, "--report", rep, "-q", "-o", "json", "--no-render")
    assert r.returncode == 0, r.stderr
    check_image(p5316_small_ns)
    man = json.loads((rep / "pts.json").read_text())
    assert man["device"]["extra"]["iu_bytes"] == 65536
    assert man["device"]["capacity_bytes"] == NS_BLOCKS * 512
    notes = r.json()["tests"]["iops"]["result"]["extra"]["notes"]
    iu = [n for n in notes if "indirection unit" in n]
    assert len(iu) == 1, notes
    assert "64KiB indirection units" in iu[0] and "the 4KiB random writes" in iu[0] and "64KiB random" not in iu[0]
    assert iu == [n for n in json.loads((rep / "iops" / "result.json").read_text())["extra"]["notes"] if "indirection" in n]
    device = dict(header(man, "iops", None)[0][1])
    assert device["Indirection unit (bytes)"] == "65536"


def test_a_namespace_smaller_than_the_drive_says_so(p5316_small_ns: Path, cli: Callable[..., Run]) -> None:
    """The header gave a 1 GiB namespace's capacity as the device's, with no word that the
    drive holds 75 GB and that the NAND behind the 74 GB no namespace holds is spare for GC
    (so WSAT and the IOPS test's writes run at a far larger effective OP than the drive's
    own): a reader took a small namespace's figures for the drive's. Now the header gives the
    NSID, the drive's TNVMCAP and its unallocated capacity."""
    from ssdtwin.pts.twin import TwinTarget

    ctrl = cli("nvme", "id-ctrl", p5316_small_ns, "-o", "json").json()
    t = TwinTarget(str(p5316_small_ns))
    info = t.info.to_json()
    t.close()
    assert info["capacity_bytes"] == NS_BLOCKS * 512 < ctrl["tnvmcap"]
    assert (info["extra"]["drive_capacity_bytes"], info["extra"]["unallocated_bytes"]) == (ctrl["tnvmcap"], ctrl["unvmcap"])
    assert ctrl["unvmcap"] == ctrl["tnvmcap"] - NS_BLOCKS * 512
    device = dict(header({"device": info}, "iops", None)[0][1])
    assert device["Namespace (NSID)"] == "1"
    assert device["Drive capacity (TNVMCAP)"] == f"{ctrl['tnvmcap'] / 1e9:,.1f} GB ({ctrl['tnvmcap']:,} bytes)"
    assert device["In no namespace (UNVMCAP; its NAND is spare for GC)"].endswith(f"({ctrl['unvmcap']:,} bytes)")


def test_iu_writes_named_per_element_kind() -> None:
    """Which writes the note names: random ones of a size that is not whole IUs; not reads,
    not sequential writes (they merge into whole IUs in the write buffer), not 1 MiB; CBW's
    composite sizes on 512 B boundaries."""
    from ssdtwin.pts import tests as T

    iu = 65536
    assert T.sub_iu_writes(T.rnd(4096, 65, 1, 1, 1.0), iu) == "4KiB"
    assert T.sub_iu_writes(T.rnd(512, 0, 1, 1, 1.0), iu) == "0.5KiB"
    assert T.sub_iu_writes(T.rnd(4096, 100, 1, 1, 1.0), iu) == ""
    assert T.sub_iu_writes(T.rnd(1 << 20, 0, 1, 1, 1.0), iu) == ""
    assert T.sub_iu_writes(T.seq(4096, 0, 1, 1, 1.0), iu) == ""
    assert T.sub_iu_writes(T.rnd(4096, 0, 1, 1, 1.0), 4096) == ""
    assert T.sub_iu_writes(T.rnd(512, 0, 1, 1, 1.0), 4096) == "0.5KiB"
    cbw = T.cbw_workload().element(40, 1, 1, 1.0, "")
    assert T.sub_iu_writes(cbw, iu) == "composite (0.5KiB to 64KiB, on 0.5KiB boundaries)"


def test_report_says_when_the_spec_is_an_edited_preset(tmp_path: Path, cli: Callable[..., Run]) -> None:
    """A drive made with `create --spec` from `ssdtwin models X`, edited, keeps X's name, and
    the report header called it "preset X": a reader compared it with the preset's report as
    the same drive. Now the firmware line says the spec was edited and which fields; the
    unedited text round-trips to "preset X" at any scale (capacity and blocks per plane are
    scaled, not edited)."""
    from ssdtwin.pts.twin import TwinTarget

    name = "samsung-pm983-3.84t"
    text = cli("models", name).stdout
    (tmp_path / "same.toml").write_text(text)
    edited = text.replace("t_prog_ns = { value = ", "t_prog_ns = { value = 1", 1).replace(
        'gc_policy = { value = "greedy"', 'gc_policy = { value = "cost-benefit"', 1
    )
    assert edited.count("cost-benefit") == text.count("cost-benefit") + 1 and edited.count("t_prog_ns = { value = 1") == 1
    (tmp_path / "edited.toml").write_text(edited)
    (tmp_path / "renamed.toml").write_text(text.replace(f'name = "{name}"', 'name = "my-pm983"', 1))
    firmware, device = {}, {}
    for spec, scale in (("same", "1/305"), ("edited", "1/305"), ("same", "1/64"), ("renamed", "1/305")):
        img = tmp_path / f"{spec}-{scale.replace('/', '_')}"
        assert cli("create", img, "--spec", tmp_path / f"{spec}.toml", "--scale", scale).returncode == 0
        t = TwinTarget(str(img), writable=False)
        firmware[(spec, scale)] = t.info.firmware
        device[(spec, scale)] = t.info.to_json()
        t.close()
    assert firmware[("same", "1/305")].endswith(f", preset {name}") and firmware[("same", "1/64")].endswith(f", preset {name}")
    assert firmware[("edited", "1/305")].endswith(f", spec differing from preset {name} (ftl.gc_policy, timing.t_prog_ns)")
    # pts.json's device.preset names a preset only when the drive is one (it held the spec's
    # name whatever it was); device.spec says what it is, with the digest sweep's cache uses
    same = preset_digest(name)
    assert [(d["preset"], d.get("spec")) for d in device.values()] == [
        (name, {"origin": "preset", "name": name, "digest": same}),
        ("", {"origin": "spec file", "name": name, "digest": device[("edited", "1/305")]["spec"]["digest"]}),
        (name, {"origin": "preset", "name": name, "digest": same}),
        ("", {"origin": "spec file", "name": "my-pm983", "digest": device[("renamed", "1/305")]["spec"]["digest"]}),
    ]
    assert len({d["spec"]["digest"] for d in device.values()}) == 3  # the renamed spec's name is part of it
    rows = {k: dict(header({"device": d}, "iops", None)[0][1]) for k, d in device.items()}
    assert rows[("same", "1/64")]["Drive spec"] == f"preset {name} (digest {same})"
    assert rows[("renamed", "1/305")]["Drive spec"].startswith("spec file my-pm983, not a preset's values (digest ")


def test_an_old_pts_json_says_what_its_firmware_line_says(tmp_path: Path) -> None:
    """pts.json from before device.spec: device.preset held a spec file's name as if it were
    a preset; the header reads the origin from the Firmware text instead, with no digest."""
    old = {"simulated": True, "preset": "my-pm983", "firmware": "ssdtwin 0.1.0, spec my-pm983 (not a preset)"}
    assert (
        dict(header({"device": old}, "iops", None)[0][1])["Drive spec"] == "spec file my-pm983, not a preset's values (digest not recorded)"
    )
    old["firmware"] = "ssdtwin 0.1.0, spec differing from preset samsung-pm983-3.84t (ftl.gc_policy)"
    assert "spec file samsung-pm983-3.84t, not a preset" in dict(header({"device": old}, "iops", None)[0][1])["Drive spec"]
    old["firmware"] = "ssdtwin 0.1.0, preset samsung-pm983-3.84t"
    assert dict(header({"device": old}, "iops", None)[0][1])["Drive spec"] == "preset samsung-pm983-3.84t (digest not recorded)"
    real = {"simulated": False, "firmware": "EDA5402Q", "spec": "hand-edited"}
    assert "Drive spec" not in dict(header({"device": real}, "iops", None)[0][1])


def test_wsat_on_a_namespace_one_segment_fills(tmp_path: Path, cli: Callable[..., Run]) -> None:
    """A 32 MiB namespace on a CM6-V at 1/454: one 1 s segment writes it many times over, so
    WSAT stops after one segment; its status said "stopped after 1 segments", and its drive
    fills are the namespace's, not the drive's."""
    from twin import make_two_namespaces

    img = make_two_namespaces(tmp_path / "cm6", 65536, 8192)
    rep = tmp_path / "rep"
    r = cli("pts", img, "--tests", "wsat", "--round", "1s", "--wsat-fills", "1", "--report", rep, "-q", "-o", "json", "--no-render")
    assert r.returncode == 0, r.stderr
    wsat = r.json()["tests"]["wsat"]
    assert wsat["result"]["message"] == "stopped after 1 segment: 1x capacity written"
    fills = wsat["table"][0]["drive_fills"]
    assert fills > 10 and wsat["result"]["bytes_written_total"] / (65536 * 512) == pytest.approx(fills)


def test_rounds_csv_is_not_rewritten_after_every_segment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rounds.csv was rewritten in full after every round or segment: quadratic in the rows,
    and a P5316's thousands of WSAT segments or pre-HIR rounds spent up to 40 % of their CPU
    on it. With a clock where a segment takes 10 ms and writing the file 20 µs a row, the
    writes while the test runs now cost at most ~5 % of the run, and the final write has every
    row."""
    from types import SimpleNamespace

    from ssdtwin.pts import testrun

    clock = [0.0]
    written: list[int] = []

    def csv_text(rows: list[dict[str, int]], columns: list[str]) -> str:
        clock[0] += 20e-6 * len(rows)
        written.append(len(rows))
        return f"{len(rows)}\n"

    monkeypatch.setattr(testrun.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(testrun, "csv_text", csv_text)
    tr = testrun.TestRun(SimpleNamespace(folder=tmp_path), "wsat")  # type: ignore[arg-type]
    for seg in range(1, 3001):
        clock[0] += 0.010
        tr.rows.append({"segment": seg})  # type: ignore[typeddict-item]
        tr.save_rows()
    saving = sum(20e-6 * n for n in written)
    assert saving < 0.06 * clock[0] and 10 < len(written) < 1000, (saving, clock[0], len(written))
    tr.save_rows(final=True)
    assert (tmp_path / "wsat" / "rounds.csv").read_text() == "3000\n"


def test_a_dram_namespace_has_no_nand_in_the_header(tmp_path: Path, cli: Callable[..., Run]) -> None:
    """PTS on a PBlaze5's DRAM namespace: the header named the drive's NAND part (and now
    would give its IU), though no NAND is behind that namespace; namespace 1 keeps both."""
    from ssdtwin.pts.twin import TwinTarget

    img = tmp_path / "pb5"
    cli("create", img, "--model", "memblaze-pblaze5-910-3.84t", "--scale", "1/305")
    cli("nvme", "create-ns", img, "--dram", "-s", "65536", "-c", "65536", "-b", "512")
    cli("nvme", "attach-ns", img, "-n", "2", "-c", "1")
    infos = {}
    for ns in (1, 2):
        t = TwinTarget(f"{img}:ns{ns}")
        infos[ns] = t.info
        t.close()
    assert infos[2].nand.startswith("none: a DRAM namespace") and "iu_bytes" not in infos[2].extra
    assert "TLC" in infos[1].nand and infos[1].extra["iu_bytes"] == 4096 and "drive_capacity_bytes" not in infos[1].extra
    assert infos[2].capacity_bytes == 65536 * 512
