"""``ssdtwin cluster`` end to end (docs/cli.md, cluster): init, info, fio with fio's JSON out,
sweep with plots, ``reproduce kumoscale``, and bad input (one line, exit != 0).

The labs are small (3 nodes x 2 drives at 1/512, 8 GiB volumes) so each run builds its
drives in milliseconds; the brief's full lab runs in `reproduce kumoscale` (docs/models.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ssdtwin import _core
from ssdtwin.cluster import Cluster, littles_law_gap, sweep, with_stack
from ssdtwin.commands.cluster import lab_maps_bytes
from ssdtwin.drive import Drive
from ssdtwin.studies import benchmarks
from test_bad_input import assert_one_line_error
from test_sources import MARKS, source_keys
from twin import ALWAYS_A_PROCESS, run_cli

SMALL = ("--nodes", "3", "--drives-per-node", "2", "--clients", "2", "--scale", "1/512", "--volume-size", "8GiB")


@pytest.fixture(scope="module")
def labs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("clusters")
    run_cli("cluster", "init", root / "nv", *SMALL, "--stack", "nvmeof-tcp")
    run_cli("cluster", "init", root / "ceph", "--like", root / "nv", "--stack", "ceph-rbd", "--ceph-version", "14")
    return {"nvmeof-tcp": root / "nv", "ceph-rbd": root / "ceph"}


def job_file(tmp_path: Path, rw: str = "randread", iodepth: int = 8, sections: int = 2, extra: str = "") -> Path:
    text = f"[global]\nioengine=libaio\ndirect=1\nrw={rw}\nbs=4k\niodepth={iodepth}\ntime_based=1\nruntime=20ms\nramp_time=2ms\n{extra}"
    text += "".join(f"[vol{i}]\n" for i in range(sections))
    p = tmp_path / f"{rw}-{iodepth}.fio"
    p.write_text(text)
    return p


def test_init_writes_every_cost_with_its_source(tmp_path: Path) -> None:
    r = run_cli("cluster", "init", tmp_path / "lab", "-o", "json")
    spec = r.json()
    t = spec["cluster"]
    # The brief's lab is the default (KIOXIA KumoScale vs Ceph study).
    assert (t["nodes"], t["drives_per_node"], t["drive"], t["clients"], t["replicas"]) == (3, 5, "kioxia-cm5-r-3.84t", 4, 3)
    assert t["volume_bytes"] == 200 * 2**30 and spec["network"]["name"] == "100GbE"
    text = (tmp_path / "lab" / "cluster.toml").read_text()
    sourced = [line for line in text.splitlines() if "= { value = " in line]
    assert len(sourced) > 40
    assert all('source = "' in line and 'source = ""' not in line for line in sourced)
    assert "[ceph]" in text and "osd_op_ns = { value = 150000" in text
    # Every cost is marked, and a published one names its document in docs/sources.md.
    keys = source_keys()
    for section in ("hosts", "network", "client", "nvmeof", "ceph"):
        for name, entry in spec[section].items():
            if not isinstance(entry, dict):
                continue
            src = entry["source"]
            assert src.startswith(MARKS), f"{section}.{name}: {src}"
            if src.startswith("[SRC]"):
                assert any(k in src for k in keys), f"{section}.{name}: [SRC] names no document of docs/sources.md: {src}"


def test_like_copies_the_lab_and_changes_the_stack(labs: dict[str, Path]) -> None:
    a = Cluster.open(labs["nvmeof-tcp"]).options()
    b = Cluster.open(labs["ceph-rbd"]).options()
    assert b.pop("stack") == "ceph-rbd" and a.pop("stack") == "nvmeof-tcp"
    assert a == b


def _without_clock(fio_json: str) -> dict[str, object]:
    """fio's JSON less its wall-clock stamps (the run's time of day, as fio prints)."""
    out: dict[str, object] = json.loads(fio_json)
    for k in ("time", "timestamp", "timestamp_ms"):
        out.pop(k, None)
    return out


def test_like_keeps_an_edited_network_and_runs_the_same(labs: dict[str, Path], tmp_path: Path) -> None:
    # Jumbo frames, a slower switch and a fabric of its own name: --like took the preset of
    # the name (dropping the edits, so the copy ran another lab), and refused a name no
    # preset has as if it had been given to --network.
    orig = tmp_path / "orig"
    run_cli("cluster", "init", orig, "--like", labs["nvmeof-tcp"])
    f = orig / "cluster.toml"
    text = f.read_text().replace('name = "100GbE"', 'name = "lab fabric"')
    text = text.replace("mtu_bytes = { value = 1500,", "mtu_bytes = { value = 9000,").replace(
        "switch_latency_ns = { value = 750,", "switch_latency_ns = { value = 5000,"
    )
    f.write_text(text)
    run_cli("cluster", "init", tmp_path / "copy", "--like", orig)
    assert Cluster.open(tmp_path / "copy").spec == Cluster.open(orig).spec
    job = job_file(tmp_path, "randwrite")
    runs = [run_cli("cluster", "fio", d, job, "--output-format", "json").stdout for d in (orig, tmp_path / "copy")]
    assert _without_clock(runs[0]) == _without_clock(runs[1])
    # --network names a preset instead.
    run_cli("cluster", "init", tmp_path / "net25", "--like", orig, "--network", "25GbE")
    net = Cluster.open(tmp_path / "net25").spec["network"]
    assert (net["name"], net["mtu_bytes"]["value"], net["link_bits_per_s"]["value"]) == ("25GbE", 1500, 25_000_000_000)


def test_like_takes_a_multi_osd_ceph_lab_onto_nvmeof(labs: dict[str, Path], tmp_path: Path) -> None:
    # Its OSDs per NVMe are Ceph's: the NVMe-oF copy was refused ("only Ceph has OSDs").
    run_cli("cluster", "init", tmp_path / "ceph2", "--like", labs["ceph-rbd"], "--osds-per-nvme", "2")
    r = run_cli("cluster", "init", tmp_path / "nv", "--like", tmp_path / "ceph2", "--stack", "nvmeof-tcp", "-o", "json")
    assert r.json()["cluster"]["osds_per_drive"] == 1 and "2 OSDs per NVMe are Ceph's" in r.stderr
    assert_one_line_error(
        run_cli(
            "cluster", "init", tmp_path / "nv2", "--like", tmp_path / "ceph2", "--stack", "nvmeof-tcp", "--osds-per-nvme", "2", check=False
        ),
        "only Ceph has OSDs",
    )
    assert not (tmp_path / "nv2").exists()


def test_info_places_one_replica_per_node(labs: dict[str, Path]) -> None:
    info = run_cli("cluster", "info", labs["nvmeof-tcp"], "-o", "json").json()["layout"]
    assert info["drives"] == 6 and info["volumes"] == 2
    # 2 volumes x 3 replicas on 3 nodes of 2 drives: every drive holds one replica.
    assert info["placements"] == [1] * 6
    ceph = run_cli("cluster", "info", labs["ceph-rbd"], "-o", "json").json()["layout"]
    assert sum(ceph["placements"]) == ceph["pgs"] == 512


@pytest.mark.parametrize("stack", ["nvmeof-tcp", "ceph-rbd"])
def test_fio_prints_fios_json(labs: dict[str, Path], tmp_path: Path, stack: str) -> None:
    r = run_cli("cluster", "fio", labs[stack], job_file(tmp_path, "randwrite"), "--output-format", "json")
    out = json.loads(r.stdout)  # stdout is only fio's JSON
    jobs = out["jobs"]
    assert [j["jobname"] for j in jobs] == ["vol0", "vol1"]
    for j in jobs:
        w = j["write"]
        assert w["iops"] > 0 and w["clat_ns"]["mean"] > 0 and j["read"]["io_bytes"] == 0
        assert w["clat_ns"]["percentile"]["99.000000"] >= w["clat_ns"]["percentile"]["50.000000"]
    assert "busiest:" in r.stderr


def test_fio_normal_output_and_numjobs(labs: dict[str, Path], tmp_path: Path) -> None:
    r = run_cli("cluster", "fio", labs["nvmeof-tcp"], job_file(tmp_path, extra="numjobs=2\n"))
    assert r.stdout.count("vol0: (groupid=") == 2 and "IOPS=" in r.stdout


def test_sweep_rises_at_flat_latency_then_saturates(labs: dict[str, Path], tmp_path: Path) -> None:
    r = run_cli(
        "cluster", "sweep", labs["nvmeof-tcp"], "--outstanding", "1,2,64,256", "--rw", "randread", "--runtime", "20ms", "--ramp", "2ms",
        "--plot", tmp_path / "plots", "-o", "json",
    )  # fmt: skip
    rows = r.json()
    assert [x["outstanding_per_client"] for x in rows] == [1, 2, 64, 256]
    q1, q2, q64, q256 = rows
    # Linear at low load: twice the I/O in flight, twice the IOPS at the same latency.
    assert q2["iops"] == pytest.approx(2 * q1["iops"], rel=0.05)
    assert q2["lat_mean_us"] == pytest.approx(q1["lat_mean_us"], rel=0.05)
    # Saturated: 4x the load, the same IOPS, 4x the latency (Little's law).
    assert q256["iops"] == pytest.approx(q64["iops"], rel=0.05)
    assert q256["lat_mean_us"] == pytest.approx(4 * q64["lat_mean_us"], rel=0.1)
    assert q256["busiest_utilisation"] > 0.95
    assert (tmp_path / "plots" / "randread.png").stat().st_size > 10_000
    assert len(json.loads((tmp_path / "plots" / "sweep.json").read_text())) == 4


def test_the_api_runs_both_stacks_and_littles_law_holds(labs: dict[str, Path]) -> None:
    nv = Cluster.open(labs["nvmeof-tcp"])
    rows = sweep(nv, [16], ["randread"], ramp_ms=5, runtime_ms=40) + sweep(
        with_stack(nv, "ceph-rbd"), [16], ["randread"], ramp_ms=5, runtime_ms=40
    )
    assert [r["stack"] for r in rows] == ["nvmeof-tcp", "ceph-rbd"]
    # The same load: NVMe-oF answers much faster than Ceph's OSD software path.
    assert rows[0]["lat_mean_us"] * 3 < rows[1]["lat_mean_us"]
    for r in rows:
        assert r["outstanding_mean"] == pytest.approx(2 * 16, rel=0.01)
    _, res = nv.run_text("[global]\nrw=randread\nbs=4k\niodepth=16\ntime_based=1\nruntime=40ms\nramp_time=2ms\n[a]\n[b]\n")
    assert littles_law_gap(res) < 0.02


def test_reproduce_kumoscale_prints_both_systems_beside_the_brief() -> None:
    r = run_cli("reproduce", "kumoscale", "--scale", "1/256", "--no-curves", "-o", "json")
    rows = {row["stack"]: row for row in r.json()["brief"]}
    nv, ceph = rows["nvmeof-tcp"], rows["ceph-rbd"]
    assert (nv["brief_iops"], ceph["brief_iops"]) == (2_293_860, 43_852)
    # Each at the load its own figures imply (N = X·R over 4 clients).
    assert (nv["outstanding_total"], ceph["outstanding_total"]) == (848, 360)
    assert nv["randread"]["iops"] > 3 * ceph["randread"]["iops"]
    assert nv["randread"]["lat_mean_us"] < ceph["randread"]["lat_mean_us"]
    assert nv["randwrite"]["lat_mean_us"] < ceph["randwrite"]["lat_mean_us"]
    for row in (nv, ceph):
        for d in ("randread", "randwrite"):
            assert row[d]["outstanding_mean"] == pytest.approx(row["outstanding_total"], rel=0.01)
            assert row[d]["little_x_r"] == pytest.approx(row[d]["outstanding_mean"], rel=0.05)
    assert "Ceph 14 (RBD)" in r.stderr and "brief" in r.stderr


# --------------------------------------------------------------------------- bad input


def test_a_folder_that_is_not_a_cluster(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("cluster", "info", tmp_path, check=False), "not a cluster folder", "cluster.toml")
    assert_one_line_error(run_cli("cluster", "sweep", tmp_path / "nope", check=False), "not a cluster folder")
    (tmp_path / "cluster.toml").write_text("[cluster]\nnodes = 3\n")
    assert_one_line_error(run_cli("cluster", "info", tmp_path, check=False), "cluster.toml", "missing field")


def test_fio_splits_an_io_across_rbd_objects(labs: dict[str, Path], tmp_path: Path) -> None:
    # librbd sends one op per 4 MiB object an I/O touches: an 8 MiB write was refused.
    big = tmp_path / "big.fio"
    big.write_text("[global]\nioengine=libaio\ndirect=1\nrw=write\nbs=8m\nsize=16m\niodepth=2\n[vol0]\n[vol1]\n")
    out = json.loads(run_cli("cluster", "fio", labs["ceph-rbd"], big, "--output-format", "json").stdout)
    assert [j["write"]["io_bytes"] for j in out["jobs"]] == [16 << 20, 16 << 20]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--nodes", "0"), ("--nodes 0: must be 1..64",)),
        (("--replicas", "4"), ("--replicas 4: must be 1..3 (one replica per storage node at most",)),
        # A negative or huge count named the binding's u32 range (0..4294967295), not its own.
        (("--nodes", "-1"), ("--nodes -1: must be 1..64",)),
        (("--drives-per-node", "99999999999"), ("--drives-per-node 99999999999: must be 1..64",)),
        (("--clients", "-3"), ("--clients -3: must be 1..256",)),
        (("--replicas", "-1"), ("--replicas -1: must be 1..3",)),
        (("--nodes", "5", "--replicas", "-1"), ("--replicas -1: must be 1..5",)),
        (("--fio-procs", "-1"), ("--fio-procs -1: must be 1..256",)),
        (("--node-cores", "-1"), ("--node-cores -1: must be 1..4096",)),
        (("--client-cores", "5000"), ("--client-cores 5000: must be 1..4096",)),
        (("--stack", "ceph-rbd", "--osds-per-nvme", "-2"), ("--osds-per-nvme -2: must be 1..1024",)),
        (("--stack", "ceph-rbd", "--osd-threads", "-1"), ("--osd-threads -1: must be 0..4096",)),
        (("--stack", "ceph-rbd", "--pg-num", "-1"), ("--pg-num -1: must be a power of two, 1..1048576",)),
        (("--stack", "ceph-rbd", "--msgr", "-1"), ("--msgr -1: choose 1 or 2",)),
        (("--stack", "ceph-rbd", "--ceph-version", "-1"), ("--ceph-version -1: choose 14 (Nautilus) or 18 (Reef)",)),
        (("--volume-size", "10TiB"), ("cluster.volume_bytes", "more than the pool")),
        (("--stack", "iscsi"), ("--stack 'iscsi'",)),
        (("--network", "7GbE"), ("--network '7GbE'",)),
        (("--stack", "ceph-rbd", "--ceph-version", "15"), ("--ceph-version 15",)),
        (("--ceph-version", "18"), ("--ceph-version: Ceph settings, and this is a nvmeof-tcp cluster",)),
        (("--drive", "no-such-drive"), ("cluster.drive 'no-such-drive'",)),
        (("--scale", "1/0"), ("--scale",)),
    ],
)
def test_init_refuses_a_bad_lab(tmp_path: Path, args: tuple[str, ...], needles: tuple[str, ...]) -> None:
    assert_one_line_error(run_cli("cluster", "init", tmp_path / "lab", *args, check=False), *needles)
    assert not (tmp_path / "lab" / "cluster.toml").exists()


def test_init_names_its_command_once(tmp_path: Path) -> None:
    # The core's "cluster init: " after the line's own `ssdtwin cluster init: error: `.
    r = run_cli("cluster", "init", tmp_path / "lab", *SMALL, "--stack", "ceph-rbd", "--osds-per-nvme", "1000", check=False)
    line = assert_one_line_error(r, "cluster.osds_per_drive: 1000 OSDs on a ")
    assert line.startswith("ssdtwin cluster init: error: cluster.osds_per_drive: "), line


def test_init_ranges_are_the_cores(tmp_path: Path) -> None:
    # The range each flag names is the one the core checks its cluster.toml field against.
    from ssdtwin.commands.cluster import INIT_FIELDS, init_ranges

    keys = {"cluster.osds_per_drive": "osds_per_drive", "cluster.fio_procs_per_client": "fio_procs_per_client"}
    for flag, field in INIT_FIELDS.items():
        lo, hi = init_ranges()[flag]
        key = keys.get(field, field.split(".")[1])
        for v in (lo - 1, hi + 1) if lo > 0 else (hi + 1,):
            value: object = {"value": v, "source": "test"} if field.split(".")[0] in ("hosts", "ceph") else v
            with pytest.raises(_core.SpecError, match=rf"{field}: must be {lo}\.\.={hi} \(got {v}\)"):
                _core.cluster_init({"stack": "ceph-rbd", key: value})


def test_like_keeps_a_pinned_labs_cpus_for_more_osds_per_nvme(labs: dict[str, Path], tmp_path: Path) -> None:
    # The lab's CPU set stays (its threads per NVMe), shared by the new OSDs: a note and the
    # field's source say the threads per OSD before and after (they changed without a word).
    run_cli("cluster", "init", tmp_path / "pin", "--like", labs["ceph-rbd"], "--osd-threads", "4")
    r = run_cli("cluster", "init", tmp_path / "two", "--like", tmp_path / "pin", "--osds-per-nvme", "2", "-o", "json")
    cpus = r.json()["hosts"]["osd_cpus"]
    assert cpus["value"] == 8 and "8 CPUs, 2 threads per OSD (the lab's 4)" in cpus["source"]
    note = "stay pinned to 4 threads per NVMe: 8 CPUs per node for 2 NVMe (the lab's 8 for 2), shared by 4 OSDs: 2 threads per OSD"
    assert note in r.stderr
    # --osd-threads pins that many per OSD; an unpinned lab or the same OSDs: no note.
    r = run_cli("cluster", "init", tmp_path / "t4", "--like", tmp_path / "pin", "--osds-per-nvme", "2", "--osd-threads", "4", "-o", "json")
    assert r.json()["hosts"]["osd_cpus"]["value"] == 16 and "note" not in r.stderr
    r = run_cli("cluster", "init", tmp_path / "un", "--like", labs["ceph-rbd"], "--osds-per-nvme", "2", "-o", "json")
    assert r.json()["hosts"]["osd_cpus"]["value"] == 0 and "note" not in r.stderr


def test_like_keeps_a_pinned_labs_threads_per_nvme_for_another_drive_count(labs: dict[str, Path], tmp_path: Path) -> None:
    # The lab's pinning is per NVMe (the Ceph lab's posts give threads per NVMe): another
    # drive count brings each NVMe's share. It kept the node's 8 CPUs for 4 drives, halving
    # the threads per OSD without a word.
    run_cli("cluster", "init", tmp_path / "pin", "--like", labs["ceph-rbd"], "--osd-threads", "4")  # 2 NVMe: 8 CPUs
    r = run_cli("cluster", "init", tmp_path / "d4", "--like", tmp_path / "pin", "--drives-per-node", "4", "-o", "json")
    cpus = r.json()["hosts"]["osd_cpus"]
    assert cpus["value"] == 16 and "16 CPUs, 4 threads per OSD (the lab's 4)" in cpus["source"]
    assert "4 threads per NVMe: 16 CPUs per node for 4 NVMe (the lab's 8 for 2), shared by 4 OSDs: 4 threads per OSD" in r.stderr
    # With more OSDs per NVMe too, they divide their NVMe's share.
    pin = ("--like", tmp_path / "pin")
    r = run_cli("cluster", "init", tmp_path / "d3", *pin, "--drives-per-node", "3", "--osds-per-nvme", "2", "-o", "json")
    assert r.json()["hosts"]["osd_cpus"]["value"] == 12 and "2 threads per OSD" in r.stderr
    # A set beyond the node's cores, or a share that is not whole, is refused naming the flags.
    r = run_cli("cluster", "init", tmp_path / "d9", "--like", tmp_path / "pin", "--drives-per-node", "9", check=False)
    assert_one_line_error(r, "--drives-per-node 9: ", "9 NVMe take 36 CPUs, more than a node's 32 cores", "--osd-threads N")
    assert run_cli("cluster", "init", tmp_path / "d9", *pin, "--drives-per-node", "9", "--node-cores", "36").returncode == 0
    (tmp_path / "odd").mkdir()
    text = (tmp_path / "pin" / "cluster.toml").read_text()
    (tmp_path / "odd" / "cluster.toml").write_text(text.replace("osd_cpus = { value = 8,", "osd_cpus = { value = 5,"))
    r = run_cli("cluster", "init", tmp_path / "d3b", "--like", tmp_path / "odd", "--drives-per-node", "3", check=False)
    assert_one_line_error(r, "--drives-per-node 3: ", "2.5 threads per NVMe", "would take 7.5, not a whole number of CPUs")
    assert not (tmp_path / "d3b").exists()
    # NVMe-oF has no OSDs: the pinning is dropped with a note (it was kept, unused, and would
    # have refused these 9 drives for CPUs no OSD uses).
    r = run_cli("cluster", "init", tmp_path / "nv", *pin, "--stack", "nvmeof-tcp", "--drives-per-node", "9", "-o", "json")
    assert r.json()["hosts"]["osd_cpus"]["value"] == 0 and "8 pinned CPUs per node are Ceph's" in r.stderr


def test_a_job_past_a_volume_names_the_volume_as_simulated(labs: dict[str, Path], tmp_path: Path) -> None:
    # size=4g on an 8 GiB volume said "runs past the end of the target (16777216 bytes)",
    # twice (once per job taking the [global] size): the target is the volume at 1/512.
    jobs = job_file(tmp_path, extra="size=4g\n")
    r = run_cli("cluster", "fio", labs["nvmeof-tcp"], jobs, check=False)
    assert_one_line_error(
        r,
        f"{jobs}:10: size=4g: ",
        "runs past the end of the client's volume as simulated (16777216 bytes: cluster.volume_bytes 8589934592 at 1/512;",
    )


def test_a_cluster_toml_that_is_a_directory_is_one_line_everywhere(labs: dict[str, Path], tmp_path: Path) -> None:
    # init said "already a cluster folder", the others "no cluster.toml".
    (tmp_path / "d" / "cluster.toml").mkdir(parents=True)
    line = f"{tmp_path / 'd' / 'cluster.toml'}: a directory, not a file"
    for args in (("info",), ("sweep",), ("init",), ("fio", job_file(tmp_path))):
        assert_one_line_error(run_cli("cluster", args[0], tmp_path / "d", *args[1:], check=False), line)
    r = run_cli("cluster", "init", tmp_path / "x", "--like", tmp_path / "d", check=False)
    assert_one_line_error(r, f"--like {line}")
    # The file given for its folder is named as such.
    toml = labs["ceph-rbd"] / "cluster.toml"
    assert_one_line_error(run_cli("cluster", "info", toml, check=False), f"{toml}: the cluster's cluster.toml; give its folder")


def test_init_refuses_an_existing_cluster_and_a_bad_like(labs: dict[str, Path], tmp_path: Path) -> None:
    assert_one_line_error(run_cli("cluster", "init", labs["nvmeof-tcp"], check=False), "already a cluster folder")
    r = run_cli("cluster", "init", tmp_path / "x", "--like", tmp_path, check=False)
    assert_one_line_error(r, f"--like {tmp_path}: not a cluster folder")


@pytest.mark.parametrize("marker", ["ssdtwin.toml", "stack.toml"])
def test_init_refuses_an_image_folder(tmp_path: Path, marker: str) -> None:
    img = tmp_path / "img"
    img.mkdir()
    (img / marker).write_text('format = "ssdtwin-image"\n')
    assert_one_line_error(run_cli("cluster", "init", img, *SMALL, check=False), f"{img}: a ", f"({marker} exists)")
    assert sorted(p.name for p in img.iterdir()) == [marker]
    (img / marker).unlink()  # a stand-in, not an image the suite's after-test check could open


def test_an_edited_toml_with_a_bad_value_names_the_field(tmp_path: Path) -> None:
    run_cli("cluster", "init", tmp_path / "lab", *SMALL)
    f = tmp_path / "lab" / "cluster.toml"
    text = f.read_text().replace("replicas = 3", "replicas = 5").replace("node_cores = { value = 32", "node_cores = { value = 0")
    f.write_text(text)
    assert_one_line_error(run_cli("cluster", "info", tmp_path / "lab", check=False), "cluster.replicas", "hosts.node_cores", "2 problems")


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        # A float was spelt out in full (1e300: 301 digits on the error line).
        (("nodes = 3", "nodes = 1e300"), "line 6, cluster.nodes: invalid type: floating point `1e300`, expected u32; must be 1..=64"),
        # Beyond i64, or a string: the field's range as for -1.
        (("nodes = 3", "nodes = 99999999999999999999"), "as i128, expected u32; must be 1..=64"),
        (("nodes = 3", 'nodes = "3"'), 'cluster.nodes: invalid type: string "3", expected u32; must be 1..=64'),
    ],
)
def test_a_hand_edited_number_names_its_fields_range(tmp_path: Path, edit: tuple[str, str], needle: str) -> None:
    run_cli("cluster", "init", tmp_path / "lab", *SMALL)
    f = tmp_path / "lab" / "cluster.toml"
    text = f.read_text()
    assert "\n" + edit[0] + "\n" in text
    f.write_text(text.replace("\n" + edit[0] + "\n", "\n" + edit[1] + "\n"))
    line = assert_one_line_error(run_cli("cluster", "info", tmp_path / "lab", check=False), needle)
    assert len(line) < 300, line


def test_a_missing_table_is_named(tmp_path: Path) -> None:
    # It said "line 1: missing field `ceph`", line 1 being a comment.
    run_cli("cluster", "init", tmp_path / "lab", *SMALL)
    f = tmp_path / "lab" / "cluster.toml"
    text = f.read_text()
    f.write_text(text[: text.index("\n[ceph]\n")])
    assert_one_line_error(run_cli("cluster", "info", tmp_path / "lab", check=False), f"{f}: no [ceph] table (every cluster.toml has ")


def test_fio_refuses_what_the_cluster_does_not_model(labs: dict[str, Path], tmp_path: Path) -> None:
    lab = labs["ceph-rbd"]
    three = job_file(tmp_path, sections=3)
    assert_one_line_error(run_cli("cluster", "fio", lab, three, check=False), f"{three}: 3 job section(s) for 2 client(s)")
    rated = job_file(tmp_path, extra="rate_iops=1000\n")
    # Named where it was written: the job's section in its file.
    assert_one_line_error(run_cli("cluster", "fio", lab, rated, check=False), f"{rated}:11: job 'vol0': rate, rate_iops", "not modelled")
    assert_one_line_error(run_cli("cluster", "fio", lab, tmp_path / "missing.fio", check=False), "missing.fio")
    dump = tmp_path / "missing" / "jobs.json"
    ok = job_file(tmp_path)
    assert_one_line_error(run_cli("cluster", "fio", lab, ok, "--dump-jobs", dump, check=False), f"--dump-jobs {dump}: no such directory")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--outstanding", "0..8"), ("--outstanding '0..8'",)),
        (("--outstanding", "a,b"), ("--outstanding 'a,b'",)),
        # A range past an NVMe queue is refused like a list, before any point runs.
        (("--outstanding", "65536..70000"), ("--outstanding '65536..70000'", "1..65535")),
        (("--rw", "randtrim"), ("--rw 'randtrim'",)),
        # The same curve twice ran every point twice.
        (("--rw", "randread,randwrite,randread"), ("--rw 'randread,randwrite,randread'", "randread given twice")),
        (("--runtime", "0ms"), ("--runtime '0ms'",)),
        # A fraction of a ms ran the whole ms below it (1.5ms: 1 ms) without a word.
        (("--runtime", "1.5ms"), ("--runtime '1.5ms': a whole number of ms",)),
        (("--ramp", "0.0015s"), ("--ramp '0.0015s': a whole number of ms",)),
    ],
)
def test_sweep_refuses_bad_options(labs: dict[str, Path], args: tuple[str, ...], needles: tuple[str, ...]) -> None:
    assert_one_line_error(run_cli("cluster", "sweep", labs["nvmeof-tcp"], *args, check=False), *needles)


def test_fio_names_the_client_a_job_names_and_refuses_a_second_job_file(labs: dict[str, Path], tmp_path: Path) -> None:
    lab = labs["nvmeof-tcp"]
    # One section naming a client the lab lacks: the client is the mistake, not the count.
    far = job_file(tmp_path, sections=1, extra="filename=client7\n")
    assert_one_line_error(run_cli("cluster", "fio", lab, far, check=False), f"{far}:11: job 'vol0': filename=client7", "client0 to client1")
    # fio starts a second job file's jobs after the first's end: one section per file per
    # client is refused naming that, not as a stonewall the user never wrote.
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    first, second = job_file(a, sections=1), job_file(b, sections=1)
    line = assert_one_line_error(run_cli("cluster", "fio", lab, first, second, check=False), f"{second}:10: job 'vol0'", "one job file")
    assert "stonewall" not in line


def test_sweep_levels_that_come_to_the_same_point_run_it_once(labs: dict[str, Path]) -> None:
    """Each of 4 jobs per client takes a whole share of at least 1: levels 1, 2 and 4 are all
    4 per client, and were three identical points."""
    args = ("--outstanding", "1,2,4,8", "--numjobs", "4", "--rw", "randread", "--runtime", "5ms", "--ramp", "1ms", "-o", "json")
    r = run_cli("cluster", "sweep", labs["nvmeof-tcp"], *args)
    assert [x["outstanding_per_client"] for x in r.json()] == [4, 8]
    assert r.stderr_lines[0] == (
        "ssdtwin cluster sweep: note: with 4 jobs per client, each taking a whole share of at least 1, "
        "--outstanding 1, 2 and 4 all run as 4 per client: each point runs once (2 per curve, not 4)"
    )


def test_sweep_plot_folder_that_cannot_be_made_fails_before_the_sweep(labs: dict[str, Path], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = run_cli("cluster", "sweep", labs["nvmeof-tcp"], "--outstanding", "1", "--rw", "randread", "--plot", blocker / "out", check=False)
    assert_one_line_error(r, f"--plot {blocker / 'out'}: ")
    assert r.stdout == ""


def test_the_python_sweep_checks_its_arguments_before_any_run() -> None:
    from ssdtwin import _core
    from ssdtwin.cluster import ClusterError

    lab = Cluster.from_text(_core.cluster_init({}))
    # randrw's curve was its reads alone, numjobs 0 a ZeroDivisionError, a level of 0 ran as 1.
    for kwargs, needle in (
        ({"rws": ["randrw"]}, "rws ['randrw']: a list of randread, randwrite, read, write (each curve is one direction's)"),
        ({"numjobs": 0}, "numjobs 0: an integer from 1 to 256"),
        ({"outstanding": [0, 8]}, "outstanding [0, 8]: one or more integers from 1 to 65535"),
    ):
        args: dict = {"outstanding": [8], **kwargs}
        with pytest.raises(ClusterError) as e:
            sweep(lab, progress=lambda *a: pytest.fail("ran a point"), **args)
        assert str(e.value) == needle


def test_the_python_sweep_takes_numpy_levels() -> None:
    import numpy as np

    from ssdtwin import _core

    lab = Cluster.from_text(_core.cluster_init({}))
    rows = sweep(lab, np.array([4]), rws=["randread"], numjobs=np.int64(2), ramp_ms=2, runtime_ms=5)
    assert [(r["outstanding_per_client"], r["rw"]) for r in rows] == [(4, "randread")] and rows[0]["iops"] > 0


@pytest.mark.skipif(ALWAYS_A_PROCESS, reason="patches this process's MemAvailable")
@pytest.mark.parametrize("command", ["fio", "sweep"])
def test_a_lab_beyond_memory_is_refused_before_it_is_built(
    labs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    # Its drives were built and filled, writing every map page of the volumes' data, until
    # the kernel's OOM killer ended the command without a word (`cluster init --scale 1/1`).
    lab = Cluster.open(labs["ceph-rbd"])
    need = lab_maps_bytes(lab)
    # 6 drives at 1/512, each with a third of its 8 GiB volumes' replicas: a share of its maps.
    assert 0 < need < 6 * benchmarks.maps_bytes(Drive.in_memory("kioxia-cm5-r-3.84t", scale=512).ftl_info())
    monkeypatch.setattr(benchmarks, "mem_available_bytes", lambda: need + (255 << 20))
    ran: list[int] = []

    def stub(*_: object, **__: object) -> None:
        ran.append(1)
        raise KeyboardInterrupt  # the check passed: stop at the run

    monkeypatch.setattr(_core, "cluster_run", stub)
    args = [job_file(tmp_path)] if command == "fio" else ["--outstanding", "1"]
    r = run_cli("cluster", command, labs["ceph-rbd"], *args, check=False)
    assert_one_line_error(r, f"{labs['ceph-rbd'] / 'cluster.toml'}: cluster.scale 512: the FTL maps of the lab's 6 ", "MemAvailable")
    assert ran == [] and r.stdout == ""
    monkeypatch.setattr(benchmarks, "mem_available_bytes", lambda: need + (257 << 20))
    r = run_cli("cluster", command, labs["ceph-rbd"], *args, check=False)
    assert (r.returncode, ran) == (130, [1]) and "MemAvailable" not in r.stderr


@pytest.mark.skipif(ALWAYS_A_PROCESS, reason="patches this process's MemAvailable")
@pytest.mark.parametrize(
    ("study", "drives"), [("ceph-reef", "60 samsung-pm983-3.84t"), ("spdk-tcp", "14 kioxia-cm6-v-3.2t"), ("kumoscale", "15 ")]
)
def test_reproduce_refuses_a_cluster_study_beyond_memory(monkeypatch: pytest.MonkeyPatch, study: str, drives: str) -> None:
    # `reproduce ceph-reef --scale 1/1` filled 60 drives with 11.5 TB of volumes (26 GB of
    # maps) for the OOM killer; now its largest lab is weighed first.
    from ssdtwin.studies import ceph_reef, kumoscale, spdk_tcp

    monkeypatch.setattr(benchmarks, "mem_available_bytes", lambda: 300 << 20)
    ran: list[str] = []
    for module, name in ((ceph_reef, "run"), (spdk_tcp, "run"), (kumoscale, "kumoscale")):
        monkeypatch.setattr(module, name, lambda *a, name=name, **kw: ran.append(name))
    r = run_cli("reproduce", study, "--scale", "1/16", "-o", "json", check=False)
    assert_one_line_error(r, f"--scale 1/16: the FTL maps of the lab's {drives}", "MemAvailable): use a smaller scale")
    assert ran == [] and r.stdout == ""


def test_sweep_takes_a_ramp_of_zero(labs: dict[str, Path]) -> None:
    # fio's ramp_time=0 (no warm-up) was refused ("must be 1 ms to 1 h"); the runtime stays 1 ms at least.
    r = run_cli(
        "cluster", "sweep", labs["nvmeof-tcp"], "--outstanding", "4", "--rw", "randread", "--ramp", "0", "--runtime", "5ms", "-o", "json"
    )
    assert r.json()[0]["iops"] > 0
    assert "each point 0 ms of ramp and 5 ms measured" in r.stderr
    assert_one_line_error(
        run_cli("cluster", "sweep", labs["nvmeof-tcp"], "--runtime", "0", check=False), "--runtime '0': must be 1 ms to 1 h"
    )
