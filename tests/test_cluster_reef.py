"""The Ceph Reef cost table, the lab's knobs (``cluster init`` flags, ``--like`` copies), the
published-lab studies (``reproduce ceph-reef``, ``reproduce spdk-tcp``, ``reproduce spdk-rdma``) on small pieces, the
KumoScale band, and bad input (docs/models.md §11, docs/cli.md).

The full studies take minutes (docs/models.md §11): here one point of each runs, the QD1
write of the Reef freeze lab and one target core of the SPDK report, each under 2 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ssdtwin.cluster import Cluster
from ssdtwin.studies import ceph_reef, kumoscale, spdk_rdma, spdk_tcp
from test_bad_input import assert_one_line_error
from test_sources import MARKS, source_keys
from twin import run_cli

SMALL = ("--nodes", "3", "--drives-per-node", "2", "--clients", "2", "--scale", "1/512", "--volume-size", "8GiB")
KNOBS = (
    "--node-cores", "128", "--client-cores", "64", "--osd-threads", "4", "--pg-num", "4096", "--osds-per-nvme", "2",
    "--fio-procs", "3", "--rbd-client", "krbd", "--msgr", "1",
)  # fmt: skip


def test_the_reef_table_has_a_source_for_every_cost(tmp_path: Path) -> None:
    spec = run_cli("cluster", "init", tmp_path / "reef", *SMALL, "--stack", "ceph-rbd", "--ceph-version", "18", "-o", "json").json()
    c = spec["ceph"]
    assert c["version"] == 18 and c["rbd_client"] == "librbd" and c["msgr_version"] == 2
    keys = source_keys()
    for name, entry in c.items():
        if isinstance(entry, dict):
            assert entry["source"].startswith(MARKS), f"ceph.{name}: {entry['source']}"
            if entry["source"].startswith("[SRC]"):
                assert any(k in entry["source"] for k in keys), f"ceph.{name}: names no document of docs/sources.md"
    # The inputs the table is derived from, and not the posts it predicts.
    assert "Ceph Reef encryption 2023" in c["osd_op_ns"]["source"] and "Ceph Reef encryption 2023" in c["osd_bluestore_write_ns"]["source"]
    predicted = ("Ceph Reef OSDs per NVMe 2023", "Ceph Reef freeze 2023")
    assert not any(p in c[k]["source"] for p in predicted for k in ("osd_op_ns", "osd_bluestore_read_ns", "osd_bluestore_write_ns"))
    assert "37,209" in c["osd_kv_commit_ns"]["source"]
    assert "Ceph QEMU librbd 2022" in c["osd_msgr_ns"]["source"] and "122K" in c["client_msgr_read_ns"]["source"]
    # Reef's OSD costs less per op than the 14 table's guidance; its kv_sync commit too.
    nautilus = run_cli("cluster", "init", tmp_path / "n", *SMALL, "--stack", "ceph-rbd", "-o", "json").json()["ceph"]
    per_read = lambda t: 2 * t["osd_msgr_ns"]["value"] + t["osd_op_ns"]["value"] + t["osd_bluestore_read_ns"]["value"]  # noqa: E731
    assert per_read(nautilus) == 500_000 and 97_000 < per_read(c) < 100_000
    assert c["osd_kv_commit_ns"]["value"] < nautilus["osd_kv_commit_ns"]["value"]


def test_the_labs_knobs_are_written_and_like_copies_them(tmp_path: Path) -> None:
    run_cli("cluster", "init", tmp_path / "a", *SMALL, "--stack", "ceph-rbd", "--ceph-version", "18", *KNOBS, "--clients-on-nodes")
    a = Cluster.open(tmp_path / "a")
    t, h, c = a.spec["cluster"], a.spec["hosts"], a.spec["ceph"]
    assert (t["osds_per_drive"], t["fio_procs_per_client"], t["clients_on_nodes"]) == (2, 3, True)
    assert (h["node_cores"]["value"], h["client_cores"]["value"], c["pg_num"]["value"]) == (128, 64, 4096)
    # 4 threads per OSD x 2 drives x 2 OSDs per drive, pinned together on each node.
    assert h["osd_cpus"]["value"] == 16 and "--osd-threads" in h["osd_cpus"]["source"]
    assert (c["rbd_client"], c["msgr_version"]) == ("krbd", 1)
    text = (tmp_path / "a" / "cluster.toml").read_text()
    assert "osds_per_drive = 2" in text and 'rbd_client = "krbd"' in text
    run_cli("cluster", "init", tmp_path / "b", "--like", tmp_path / "a")
    b = Cluster.open(tmp_path / "b")
    assert b.options() == a.options()
    assert b.spec["hosts"]["node_cores"]["source"] == h["node_cores"]["source"]
    info = run_cli("cluster", "info", tmp_path / "b", "-o", "json").json()["layout"]
    assert (info["drives"], info["osds_per_drive"], info["volumes"], info["pgs"]) == (6, 2, 6, 4096)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--ceph-version", "15"), ("--ceph-version 15",)),
        (("--drive", "no-such-drive"), ("cluster.drive 'no-such-drive'", "unknown preset")),
        (("--pg-num", "1000"), ("--pg-num 1000: must be a power of two, 1..1048576",)),
        (("--osds-per-nvme", "1000", "--drive", "samsung-pm983-3.84t"), ("cluster.osds_per_drive", "at most 715")),
        (("--rbd-client", "nfs"), ("--rbd-client 'nfs'",)),
        (("--msgr", "3"), ("--msgr 3",)),
        (("--clients-on-nodes", "--clients", "4"), ("cluster.clients_on_nodes",)),
    ],
)
def test_init_refuses_a_bad_ceph_lab(tmp_path: Path, args: tuple[str, ...], needles: tuple[str, ...]) -> None:
    base = ("--stack", "ceph-rbd", "--nodes", "3", "--drives-per-node", "2", "--scale", "1/512", "--volume-size", "8GiB")
    assert_one_line_error(run_cli("cluster", "init", tmp_path / "lab", *base, *args, check=False), *needles)
    assert not (tmp_path / "lab" / "cluster.toml").exists()


@pytest.mark.parametrize("stack", ["nvmeof-tcp", "nvmeof-rdma"])
def test_init_refuses_ceph_settings_on_an_nvmeof_lab(tmp_path: Path, stack: str) -> None:
    # They were written to cluster.toml and never used, where --osds-per-nvme is refused.
    args = ("--stack", stack, *SMALL, "--pg-num", "64", "--osd-threads", "4")
    assert_one_line_error(
        run_cli("cluster", "init", tmp_path / "lab", *args, check=False),
        f"--pg-num, --osd-threads: Ceph settings, and this is a {stack} cluster (give --stack ceph-rbd)",
    )
    assert not (tmp_path / "lab").exists()


def test_a_job_naming_a_client_the_lab_lacks(tmp_path: Path) -> None:
    run_cli("cluster", "init", tmp_path / "lab", *SMALL, "--stack", "ceph-rbd", "--ceph-version", "18")
    job = tmp_path / "j.fio"
    job.write_text("[global]\nrw=randread\nbs=4k\ntime_based=1\nruntime=5ms\n[a]\nfilename=client0\n[b]\nfilename=client9\n")
    assert_one_line_error(
        run_cli("cluster", "fio", tmp_path / "lab", job, check=False), "job 'b'", "filename=client9", "client0 to client1"
    )


def test_the_reef_freeze_qd1_write_end_to_end(tmp_path: Path) -> None:
    """One client writing 4 KiB synchronously at QD1 on the 60-OSD lab: a replicated write's
    whole path (client, primary, two replicas in parallel, data and WAL writes, replies)."""
    res = ceph_reef.run(points=("reef-freeze",), rws=("write-qd1",), log=lambda _: None)
    (row,) = res["rows"]
    assert (row["experiment"], row["rw"], row["published_lat_mean_ms"]) == ("reef-freeze", "write-qd1", 0.421)
    # QD1: one I/O in flight, so IOPS x latency = 1 (Little's law), and the path is at least
    # two OSD op-thread passes (primary, then a replica) and six OSD messages of the table's
    # costs; the client, the kv commit, the WAL write and the wire add less than 0.2 ms.
    assert row["iops"] * row["lat_mean_ms"] / 1e3 == pytest.approx(1.0, rel=0.02)
    c = ceph_reef.freeze_lab(1, 1).spec["ceph"]
    op_path_ms = (2 * (c["osd_op_ns"]["value"] + c["osd_bluestore_write_ns"]["value"]) + 6 * c["osd_msgr_ns"]["value"]) / 1e6
    assert op_path_ms < row["lat_mean_ms"] < op_path_ms + 0.2
    assert set(row) >= {"iops", "published_iops", "iops_error", "lat_mean_ms", "saturating", "within_25pct", "threads_per_osd"}
    paths = ceph_reef.plot(res, tmp_path)
    assert paths[0].stat().st_size > 10_000


def test_one_spdk_target_core_is_bound_by_its_cost() -> None:
    """A target pinned to one core serves 1 / (its receive + send cost) IOPS."""
    c = spdk_tcp.lab(1)
    n = c.spec["nvmeof"]
    bound = 1e9 / (n["tcp_target_rx_ns"]["value"] + n["tcp_target_tx_ns"]["value"])
    res, _ = ceph_reef.settled_run(c, spdk_tcp.job_text, (5, 20), "read", "spdk-1")
    assert res["read"]["iops"] == pytest.approx(bound, rel=0.03)
    assert res["resources"][0]["name"] == "node0.target"


def test_one_spdk_rdma_target_core_is_bound_by_its_rdma_cost() -> None:
    """Over RDMA the target's cost is the RDMA one, not the TCP one."""
    c = spdk_rdma.lab("nvmeof-rdma", "spdk", 1)
    n = c.spec["nvmeof"]
    assert n["target_stack"]["value"] == "spdk"
    bound = 1e9 / (n["rdma_target_rx_ns"]["value"] + n["rdma_target_tx_ns"]["value"])
    res, _ = ceph_reef.settled_run(c, spdk_tcp.job_text, (5, 20), "read", "rdma-1")
    assert res["read"]["iops"] == pytest.approx(bound, rel=0.03)
    assert res["resources"][0]["name"] == "node0.target"


@pytest.mark.parametrize("stack", ["nvmeof-rdma", "nvmeof-tcp"])
def test_the_kernel_target_waits_then_costs_its_own_cpu_at_qd1(stack: str) -> None:
    """At QD1 nothing queues: the kernel target's read is its wake-up plus its own receive and
    send longer than SPDK's, on the same drive and seed."""
    row = spdk_rdma.kernel_qd1_point(stack, scale=256, seed=1)
    n = spdk_rdma.lab(stack, "kernel", 1).spec["nvmeof"]
    kind = "rdma" if stack == "nvmeof-rdma" else "tcp"
    kernel = n[f"kernel_{kind}_target_rx_ns"]["value"] + n[f"kernel_{kind}_target_tx_ns"]["value"]
    spdk = n[f"{kind}_target_rx_ns"]["value"] + n[f"{kind}_target_tx_ns"]["value"]
    want_us = (n["kernel_target_wake_ns"]["value"] + kernel - spdk) / 1e3
    assert row["model"] == pytest.approx(want_us, abs=0.05)
    assert row["model_lat_us"]["spdk"] > 50  # the CM6-V's own read is in both; the difference cancels it
    assert row["published"] == pytest.approx(spdk_rdma.QD1_US[stack][0] - spdk_rdma.QD1_US[stack][1])


def test_tcp_and_rdma_differ_at_qd1_by_their_cpu_and_the_kernel_tcp_receives() -> None:
    """SPDK's target over TCP and over RDMA at QD1: the difference is the initiator's and the
    target's CPU plus the kernel TCP stack's wait off the CPU on each of the two receives (the
    target's command, the initiator's data); the frames' serialisation at 400 Gb/s differs by
    nanoseconds."""
    row = spdk_rdma.transport_qd1_point(scale=256, seed=1)
    n = spdk_rdma.lab("nvmeof-tcp", "spdk", 1).spec["nvmeof"]
    cpu_ns = sum(n[f"tcp_{k}_ns"]["value"] - n[f"rdma_{k}_ns"]["value"] for k in ("host_tx", "host_rx", "target_rx", "target_tx"))
    assert n["tcp_rx_delay_ns"]["value"] > 0
    assert row["model"] == pytest.approx((cpu_ns + 2 * n["tcp_rx_delay_ns"]["value"]) / 1e3, abs=0.05)
    assert row["published"] == pytest.approx(20.43 - 9.39)


def _qd1_with_tcp_rx_delay(stack: str, delay_ns: int | None) -> float:
    """Mean QD1 read latency (us) through SPDK's target over `stack`, with the kernel TCP
    receive delay set to `delay_ns` (None: the default)."""
    c = spdk_rdma.lab(stack, "spdk", 1, scale=256, seed=1, clients=1)
    if delay_ns is not None:
        c = Cluster.from_text(spdk_rdma.set_line(c.text, "tcp_rx_delay_ns", str(delay_ns), "[ASSUMED] a what-if"))
    _, res = c.run_text(spdk_rdma.qd1_job(200), name=f"qd1-{stack}-{delay_ns}")
    return float(res["read"]["lat_mean_ns"]) / 1e3


def test_the_kernel_tcp_receive_delay_is_latency_over_tcp_only() -> None:
    """The delay is waited twice per read over TCP (the target's receive and the initiator's)
    and never over RDMA, whose completions bypass the kernel's stack."""
    tcp_default, tcp_none, tcp_more = (_qd1_with_tcp_rx_delay("nvmeof-tcp", d) for d in (None, 0, 10_000))
    n = spdk_rdma.lab("nvmeof-tcp", "spdk", 1).spec["nvmeof"]
    assert tcp_default - tcp_none == pytest.approx(2 * n["tcp_rx_delay_ns"]["value"] / 1e3, abs=0.05)
    assert tcp_more - tcp_none == pytest.approx(20.0, abs=0.05)
    assert _qd1_with_tcp_rx_delay("nvmeof-rdma", 10_000) == pytest.approx(_qd1_with_tcp_rx_delay("nvmeof-rdma", 0), abs=0.01)


def test_the_kernel_tcp_receive_delay_holds_no_cpu() -> None:
    """One SPDK TCP target core at 2,048 outstanding stays bound by its CPU cost alone: the
    receive delay is a wait, not a burst, so a longer one leaves the IOPS where they were."""
    text = spdk_tcp.lab(1).text
    c = Cluster.from_text(spdk_rdma.set_line(text, "tcp_rx_delay_ns", "20000", "[ASSUMED] a what-if"))
    n = c.spec["nvmeof"]
    bound = 1e9 / (n["tcp_target_rx_ns"]["value"] + n["tcp_target_tx_ns"]["value"])
    res, _ = ceph_reef.settled_run(c, spdk_tcp.job_text, (5, 20), "read", "tcp-1-delay")
    assert res["read"]["iops"] == pytest.approx(bound, rel=0.03)


def test_the_kernel_target_runs_its_cost_on_the_nodes_cores() -> None:
    """The kernel target's cores in use per I/O are its receive and send cost: nothing else
    runs on the target node."""
    c = spdk_rdma.lab("nvmeof-tcp", "kernel", spdk_rdma.NODE_CPUS)
    n = c.spec["nvmeof"]
    res, _ = ceph_reef.settled_run(c, spdk_tcp.job_text, (5, 20), "read", "kernel-tcp")
    (node,) = [u for u in res["resources"] if u["name"] == "node0.cores"]
    per_io_ns = node["mean_in_use"] / res["read"]["iops"] * 1e9
    assert per_io_ns == pytest.approx(n["kernel_tcp_target_rx_ns"]["value"] + n["kernel_tcp_target_tx_ns"]["value"], rel=0.03)


def test_a_cluster_toml_without_the_target_fields_is_an_spdk_target() -> None:
    """cluster.toml files written before the kernel target keep their meaning."""
    text = spdk_tcp.lab(1).text
    old = "\n".join(line for line in text.splitlines() if not line.startswith(("target_stack", "kernel_", "tcp_rx_delay"))) + "\n"
    assert old != text
    n = Cluster.from_text(old).spec["nvmeof"]
    assert n["target_stack"]["value"] == "spdk"
    assert n["tcp_rx_delay_ns"] == spdk_tcp.lab(1).spec["nvmeof"]["tcp_rx_delay_ns"]
    assert n["kernel_target_wake_ns"]["value"] == spdk_rdma.lab("nvmeof-tcp", "kernel", 1).spec["nvmeof"]["kernel_target_wake_ns"]["value"]


def test_a_kernel_tcp_receive_delay_out_of_range_is_one_line(tmp_path: Path) -> None:
    run_cli("cluster", "init", tmp_path / "lab", *SMALL)
    f = tmp_path / "lab" / "cluster.toml"
    f.write_text(spdk_rdma.set_line(f.read_text(), "tcp_rx_delay_ns", "2000000000", "[ASSUMED] a what-if"))
    assert_one_line_error(run_cli("cluster", "info", tmp_path / "lab", check=False), "nvmeof.tcp_rx_delay_ns", "1000000000")


def test_an_unknown_target_stack_is_one_line(tmp_path: Path) -> None:
    run_cli("cluster", "init", tmp_path / "lab", *SMALL)
    f = tmp_path / "lab" / "cluster.toml"
    f.write_text(spdk_rdma.set_line(f.read_text(), "target_stack", '"dpdk"', "[ASSUMED] a what-if"))
    assert_one_line_error(run_cli("cluster", "info", tmp_path / "lab", check=False), "cluster.toml", "dpdk", "spdk", "kernel")
    f.write_text(spdk_rdma.set_line(f.read_text(), "target_stack", '"kernel"', ""))
    assert_one_line_error(run_cli("cluster", "info", tmp_path / "lab", check=False), "nvmeof.target_stack", "source")


def test_the_kumoscale_band_spans_its_unpublished_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kumoscale, "CURVE_LEVELS", (16,))
    monkeypatch.setattr("ssdtwin.cluster.WINDOWS_MS", {"nvmeof-tcp": (5, 20), "ceph-rbd": (20, 60), "nvmeof-rdma": (5, 20)})
    rows = kumoscale.band(kumoscale.lab(scale=256), log=lambda _: None)
    ends = {(r["stack"], r["label"]): r for r in rows}
    assert len(ends) == 4
    one, eight = (ends[("nvmeof-tcp", f"{n} fio job(s) per client")]["at_study_load"]["iops"] for n in (1, 8))
    assert eight > 3 * one  # the client's fio job CPUs bound NVMe-oF: more jobs, more IOPS
    for r in rows:
        lo, hi = r["band_iops"]
        where = r["study_position"]
        assert where == ("inside" if lo <= r["study_iops"] <= hi else "below" if r["study_iops"] < lo else "above")
    assert json.dumps(rows)  # plain data for -o json


def test_spdk_rdma_prints_iops_in_whole_digits() -> None:
    # The table printed "9.553e+06 IOPS (published 1.094e+07, -12.7%)"; latencies and cores keep 4 digits.
    row = {"experiment": "spdk-rdma", "stack": "nvmeof-rdma", "figure": "4 KiB random read IOPS", "unit": "IOPS"}
    row |= {"model": 9552725.0, "published": 10940000, "error": 9552725 / 10940000 - 1, "wall_s": 3.4}
    line = spdk_rdma.row_line(row | {"saturating": "node0.target", "saturating_utilisation": 1.0})
    assert "4 KiB random read IOPS: 9,552,725 IOPS (published 10,940,000, -12.7%)  saturating node0.target 100%" in line, line
    line = spdk_rdma.row_line(row | {"unit": "us", "model": 8.704999, "published": 0.96, "error": 8.0677})
    assert ": 8.705 us (published 0.96, +806.8%)  [3 s wall]" in line, line
