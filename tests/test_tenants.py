"""The multi-tenant drive (docs/tenants.md) end to end: DRAM namespaces on the PBlaze5, from the
CLI and served over NBD to real clients.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ssdtwin import Drive
from test_serve import need, served, sh, vendor
from twin import copy_image, image_digest, namespace_rows, run_cli

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
    ctrl = run_cli("nvme", "id-ctrl", pb5, "-v", "-o", "json").json()
    assert ctrl["vs_dram_ns"] == {"budget_bytes": 64 * MIB, "unallocated_bytes": 32 * MIB}
    assert run_cli("nvme", "id-ns", pb5, "-n", "2", "-v", "-o", "json").json()["vs_dram"] == 1
    assert "vs_dram" not in run_cli("nvme", "id-ns", pb5, "-n", "1", "-v", "-o", "json").json()
    rows = namespace_rows(pb5)
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
    # The first 30 through the API (30 CLI processes took ~20 s of CI); the refusal through the CLI.
    with Drive.open(pb5) as d:
        for _ in range(30):
            d.nvme.create_ns(8)
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


# --------------------------------------------------------------------------- QoS command


def test_qos_caps_are_set_read_back_and_persisted(pb5: Path) -> None:
    r = run_cli("nvme", "qos", pb5, "-n", "1", "--read-mbps", "391", "--write-mbps", "100", "--iops", "50000", "-o", "json")
    want = {"nsid": 1, "read_bytes_per_s": 391_000_000, "write_bytes_per_s": 100_000_000, "iops": 50_000, "sq_priority": "medium"}
    assert r.json() == want
    run_cli("nvme", "qos", pb5, "-n", "1", "--iops", "0", "--sq-priority", "high")
    rows = run_cli("nvme", "qos", pb5, "-o", "json").json()
    assert rows == [
        dict(want, iops=0, sq_priority="high"),
        {"nsid": 2, "read_bytes_per_s": 0, "write_bytes_per_s": 0, "iops": 0, "sq_priority": "medium"},
    ]
    assert "nsid 1: read 391 MB/s, write 100 MB/s, iops no cap, queues high" in run_cli("nvme", "qos", pb5, "-n", "1").stdout
    # Deleting the namespace drops its caps; a new namespace under the NSID has none.
    run_cli("nvme", "detach-ns", pb5, "-n", "1")
    run_cli("nvme", "delete-ns", pb5, "-n", "1")
    run_cli("nvme", "create-ns", pb5, "-s", "8", "-c", "8")
    assert run_cli("nvme", "qos", pb5, "-n", "1", "-o", "json").json()[0]["read_bytes_per_s"] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-n", "9", "--read-mbps", "391"), "INVALID_NS"),
        (("-n", "1", "--read-mbps", "-1"), "--read-mbps -1: must be 0 (no cap) or a positive number of MB/s"),
        (("-n", "1", "--write-mbps", "nan"), "--write-mbps nan: must be 0 (no cap) or a positive number of MB/s"),
        (("-n", "1", "--read-mbps", "391MB/s"), "--read-mbps '391MB/s': must be a number of MB/s (0 = no cap)"),
        (("-n", "1", "--iops", "lots"), "--iops 'lots': must be a whole number of commands per second"),
        # A command count is whole: 1.5 was rounded to 2 (and 0.4 to no cap at all).
        (("-n", "1", "--iops", "0.4"), "--iops '0.4': must be a whole number of commands per second (0 = no cap), a decimal or 0x hex"),
        (("-n", "1", "--iops", "1.5"), "--iops '1.5': must be a whole number"),
        (("-n", "1", "--read-mbps", "1e-9"), "--read-mbps 1e-9: must be 0 (no cap) or from 1e-06 up to 3400 MB/s"),
        # The range in the flag's unit and the drive's: it was "up to 1.1259e+09 MB/s" (no
        # drive's bound), or the core's "read bandwidth cap 3401000000 B/s" for --read-mbps.
        (("-n", "1", "--read-mbps", "1e12"), "--read-mbps 1e12: must be 0 (no cap) or from 1e-06 up to 3400 MB/s (the host link's rate)"),
        (("-n", "1", "--write-mbps", "3401"), "--write-mbps 3401: must be 0 (no cap) or from 1e-06 up to 3400 MB/s (the host link's rate)"),
        (("-n", "1", "--iops", "900000"), "--iops 900000: must be 0 (no cap) or 1 up to 800000 (the controller's command ceiling)"),
        # The drive's range, not the option's own "in 0..0x4000000000000" (no drive's bound).
        (("-n", "1", "--iops", "0x4000000000001"), "--iops 0x4000000000001: must be 0 (no cap) or 1 up to 800000 (the controller's"),
        (("-n", "1", "--iops", "-1"), "--iops -1: must be 0 (no cap) or 1 up to 800000 (the controller's command ceiling)"),
        # Python's digit separators are no number for nvme-cli: 1_000 was taken as 1000.
        (("-n", "1", "--read-mbps", "1_000"), "--read-mbps '1_000': must be a number of MB/s (0 = no cap)"),
        (("-n", "1", "--iops", "1_000"), "--iops '1_000': must be a whole number of commands per second"),
        (("-n", "1_0", "--iops", "1000"), "-n/--namespace-id '1_0': must be a namespace ID, a decimal or 0x hex integer"),
        (("-n", "1", "--sq-priority", "vip"), "must be one of urgent, high, medium, low"),
        (
            (
                "--read-mbps",
                "10",
            ),
            "give the namespace to cap",
        ),
    ],
)
def test_bad_qos_commands_are_refused_in_one_line(pb5: Path, args: tuple[str, ...], message: str) -> None:
    before = image_digest(pb5)
    r = run_cli("nvme", "qos", pb5, *args, check=False)
    assert r.returncode != 0 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert image_digest(pb5) == before


def test_qos_iops_is_a_whole_number_in_decimal_or_hex(pb5: Path) -> None:
    """--iops takes 0x hex like every NVMe number ('0x10' was "must be a number")."""
    assert run_cli("nvme", "qos", pb5, "-n", "0x1", "--iops", "0x10", "-o", "json").json()["iops"] == 16
    assert run_cli("nvme", "qos", pb5, "-n", "1", "--iops", "20", "-o", "json").json()["iops"] == 20
    run_cli("check", pb5)


def test_queues_of_a_capped_namespace_share_its_cap(tmp_path: Path, pb5: Path) -> None:
    """Two jobs (two submission queues) on one namespace capped at 20K IOPS: each gets a
    share. The queue that happened to wake first took every token and the other issued
    nothing for the whole run (a reader beside a 128 KiB writer: 20,000 writes, 0 reads)."""
    run_cli("nvme", "qos", pb5, "-n", "1", "--iops", "20000")
    job = tmp_path / "two.fio"
    job.write_text(
        "[global]\nfilename=ns1\nioengine=libaio\ntime_based=1\nruntime=200ms\niodepth=32\n"
        "[w]\nrw=write\nbs=128k\n[r]\nrw=randread\nbs=4k\n"
    )
    jobs = run_cli("fio", pb5, job, "--output-format", "json").json()["jobs"]
    iops = {j["jobname"]: j["read"]["iops"] + j["write"]["iops"] for j in jobs}
    assert 0.98 * 20_000 < sum(iops.values()) < 1.02 * 20_000, iops  # the cap holds for the namespace
    for name, v in iops.items():  # round robin between the two queues: about half each
        assert 0.4 * 20_000 < v < 0.6 * 20_000, (name, iops)
    # A queue held by its own direction's cap does not hold the other queue back.
    run_cli("nvme", "qos", pb5, "-n", "1", "--write-mbps", "100")
    jobs = {j["jobname"]: j for j in run_cli("fio", pb5, job, "--output-format", "json").json()["jobs"]}
    assert 0.97 * 100e6 < jobs["w"]["write"]["bw_bytes"] < 1.03 * 100e6, jobs["w"]["write"]["bw_bytes"]
    assert jobs["r"]["read"]["iops"] > 0.95 * (20_000 - 100e6 / (128 << 10)), jobs["r"]["read"]["iops"]
    run_cli("check", pb5)


@pytest.mark.parametrize("depths", [(32,), (16, 16), (8, 24)])
def test_a_capped_namespace_holds_its_commands_in_the_drive(tmp_path: Path, pb5: Path, depths: tuple[int, ...]) -> None:
    """The drive holds a capped namespace's commands, not the host: fio keeps its iodepth
    in flight, and each command's completion waits for its tokens, so its latency includes
    the hold. With 32 commands in flight and 20K IOPS, Little's law gives 32 / 20K = 1.6 ms.
    The host held each command until it conformed: the job's reported latency was the
    drive's service time alone (14.5 us), its queue depth 1. Jobs on one namespace take its
    tokens in the order their commands arrive, so each gets a share in proportion to the
    commands it keeps in flight, and all wait as long, under round robin and weighted round
    robin alike."""
    run_cli("nvme", "qos", pb5, "-n", "1", "--iops", "20000")
    job = tmp_path / "capped.fio"
    jobs_text = "".join(f"[q{i}]\niodepth={d}\n" for i, d in enumerate(depths))
    job.write_text("[global]\nfilename=ns1\nioengine=libaio\nrw=randread\nbs=4k\ntime_based=1\nruntime=300ms\nramp_time=50ms\n" + jobs_text)
    for arbitration in ("0x0", "0x0f030000"):  # round robin, then WRR with every queue medium
        run_cli("nvme", "set-feature", pb5, "-f", "0x01", "-v", arbitration)
        jobs = [j["read"] for j in run_cli("fio", pb5, job, "--output-format", "json").json()["jobs"]]
        assert 0.98 * 20_000 < sum(j["iops"] for j in jobs) < 1.01 * 20_000, jobs  # the cap holds
        for d, j in zip(depths, jobs, strict=True):
            share = 20_000 * d / 32
            assert 0.97 * share < j["iops"] < 1.03 * share, (arbitration, depths, jobs)
            assert 0.98 * 1600 < j["clat_ns"]["mean"] / 1e3 < 1.02 * 1600, (arbitration, j["clat_ns"])  # Little's law
    run_cli("check", pb5)


def test_a_capped_neighbour_holds_back_no_other_namespace_under_wrr(tmp_path: Path, pb5: Path) -> None:
    """A greedy reader on ns1 capped at 20K IOPS beside a writer on the DRAM namespace: the
    cap protects the writer under weighted round robin as under round robin. Under WRR the
    capped queues' commands passed the host's gate together and waited for their tokens at
    the fetch, where each held one took the controller's command processor at its token
    time: every later command of every namespace queued behind it (the DRAM writer fell
    from about 700K to 3K IOPS)."""
    run_cli("nvme", "qos", pb5, "-n", "1", "--iops", "20000")
    job = tmp_path / "noisy.fio"
    job.write_text(
        "[global]\nioengine=libaio\nbs=4k\ntime_based=1\nruntime=100ms\n"
        "[greedy]\nfilename=ns1\nrw=randread\niodepth=128\nnumjobs=2\n[dram]\nfilename=ns2\nrw=randwrite\niodepth=16\n"
    )

    def run() -> dict[str, float]:
        """Each job's I/Os per second of its longest clone's runtime: the greedy clones
        drain their held commands (up to 256 / 20K = 12.8 ms) at different times, and the
        sum of their own rates counted each over its own runtime."""
        jobs = run_cli("fio", pb5, job, "--output-format", "json").json()["jobs"]
        ios: dict[str, int] = {}
        ms: dict[str, int] = {}
        for j in jobs:
            name = j["jobname"]
            ios[name] = ios.get(name, 0) + j["read"]["total_ios"] + j["write"]["total_ios"]
            ms[name] = max(ms.get(name, 0), j["read"]["runtime"], j["write"]["runtime"])
        return {name: ios[name] / (ms[name] / 1e3) for name in ios}

    rr = run()
    run_cli("nvme", "set-feature", pb5, "-f", "0x01", "-v", "0x0f030000")  # WRR, every queue medium
    wrr = run()
    for case in (rr, wrr):
        assert 0.97 * 20_000 < case["greedy"] < 1.03 * 20_000, case  # the cap holds
    assert wrr["dram"] > 0.9 * rr["dram"], (rr, wrr)
    run_cli("check", pb5)


def _read_bw_over_nbd(tmp_path: Path, image: Path) -> float:
    """A real fio's sequential 128 KiB reads of ns1 over NBD, bytes/s."""
    with served(image) as s:
        job = tmp_path / "r.fio"
        job.write_text(f"[r]\nioengine=nbd\nuri={s.uri('ns1')}\nrw=read\nbs=128k\niodepth=8\ntime_based\nruntime=2\nsize=256m\n")
        out = sh("fio", "--output-format=json", job)
        s.stop()
    text = out.stdout
    return float(json.loads(text[text.index("{") :])["jobs"][0]["read"]["bw_bytes"])  # after fio's "connected" line


def test_quotas_hold_over_nbd_for_a_real_fio(tmp_path: Path, pb5: Path) -> None:
    """A real fio reading ns1 over NBD gets the cap the controller enforces (within the
    bucket's 1 ms burst and the run's start). The cap is an upper bound whatever the host's
    speed; that the reader also gets all of it needs a host that serves more than the cap
    over NBD, which a loaded machine (load 12-16 on 2 cores) does not always do at 40 MB/s:
    then a lower cap is measured, and an uncapped run tells a slow host from a quota that
    holds the reader below its cap."""
    need("fio")
    delivered: dict[int, float] = {}
    for cap_mbps in (40, 10):
        run_cli("nvme", "qos", pb5, "-n", "1", "--read-mbps", str(cap_mbps))
        bw = delivered[cap_mbps] = _read_bw_over_nbd(tmp_path, pb5)
        assert bw < 1.05 * cap_mbps * 1e6, delivered  # never above the cap, however fast the host
        if bw > 0.9 * cap_mbps * 1e6:
            run_cli("check", pb5)
            return  # and all of it
    run_cli("nvme", "qos", pb5, "-n", "1", "--read-mbps", "0")
    uncapped = _read_bw_over_nbd(tmp_path, pb5)
    run_cli("check", pb5)
    assert uncapped < 1.2 * 10e6, (
        f"the quota held the reader below its cap ({delivered}) though the host serves {uncapped:.0f} B/s uncapped"
    )
    pytest.skip(f"the host served only {uncapped / 1e6:.1f} MB/s over NBD uncapped: too loaded to show a 10 MB/s cap delivered")


def _lower_fetch_ceiling(image: Path, iops: int) -> None:
    """Lower the image's controller command ceiling (spec.toml, the effective spec) so that
    one loopback NBD client can saturate the command fetch, as a greedy tenant does the
    real drive's 800K (an NBD client on this machine does tens of thousands)."""
    spec = image / "spec.toml"
    text = spec.read_text()
    old = "[timing.ctrl_max_iops]\nvalue = 800000\n"
    assert old in text
    spec.write_text(text.replace(old, f"[timing.ctrl_max_iops]\nvalue = {iops}\n"))


def _measured_until(tmp_path: Path, image: Path, neighbour: bool, valid: Callable[[dict[str, float]], bool]) -> dict[str, float]:
    """`_ns1_latency_over_nbd`, measured again at most twice while `valid` is false (the
    host starved the run); the last measurement is returned whatever it shows."""
    m = _ns1_latency_over_nbd(tmp_path, image, neighbour)
    for _ in range(2):
        if valid(m):
            break
        m = _ns1_latency_over_nbd(tmp_path, image, neighbour)
    return m


def _ns1_latency_over_nbd(tmp_path: Path, image: Path, neighbour: bool) -> dict[str, float]:
    """NS1's 4 KiB random reads at QD1 over NBD (a real fio), beside NS2's QD32 flood."""
    with served(image) as s:
        job = tmp_path / "noisy.fio"
        jobs = f"[ns1]\nuri={s.uri('ns1')}\niodepth=1\nrate_iops=2000\n"
        if neighbour:
            jobs += f"[ns2]\nuri={s.uri('ns2')}\niodepth=32\n"
        job.write_text(f"[global]\nioengine=nbd\nrw=randread\nbs=4k\ntime_based\nruntime=1500ms\n{jobs}")
        out = sh("fio", "--output-format=json", job)
        s.stop()
    text = out.stdout
    jobs_out = {j["jobname"]: j["read"] for j in json.loads(text[text.index("{") :])["jobs"]}
    ns1 = jobs_out["ns1"]
    return {
        "mean_us": ns1["clat_ns"]["mean"] / 1e3,
        "ns1_iops": ns1["iops"],
        "ns2_iops": jobs_out["ns2"]["iops"] if neighbour else 0.0,
        "ns2_mean_us": jobs_out["ns2"]["clat_ns"]["mean"] / 1e3 if neighbour else 0.0,
    }


def test_wrr_arbitration_holds_over_nbd_for_real_fio(tmp_path: Path) -> None:
    """Feature 01h weighted round robin while serving: NS2 floods the controller's command
    fetch; NS1's queue is high priority and NS2's low, so NS1's reads are fetched first and
    its latency stays far below what it suffers under round robin (FIFO at the fetch)."""
    need("fio")
    d = tmp_path / "pb5"
    with Drive.create(d, PB5, scale="1/256") as drive:  # in process: the CLI's start-up is slow
        drive.nvme.detach_ns(1)
        drive.nvme.delete_ns(1)
        for n, cls in ((1, "high"), (2, "low")):
            assert drive.nvme.create_ns(64 * MIB // 512, block_size=512) == n
            drive.nvme.attach_ns(n)
            drive.precondition(n, loops=1)
            drive.nvme.set_sq_priority(n, cls)
    _lower_fetch_ceiling(d, 5_000)
    # Each case is measured again (at most twice) when the loaded machine, not the drive, set
    # it: NS1 alone must get the 2,000 IOPS it asks for at QD1 (a starved host once gave it
    # 318 IOPS at 3.1 ms, above what round robin's backlog adds), and the flood must keep most
    # of its 32 commands in flight (Little's law: NS2's IOPS x its mean latency; a starved
    # fio kept 12-16, and NS1 waited as many fetches).
    alone = _measured_until(tmp_path, d, False, lambda m: m["ns1_iops"] > 0.8 * 2000)
    rr = _measured_until(tmp_path, d, True, lambda m: m["ns2_iops"] * m["ns2_mean_us"] / 1e6 > 24)
    with Drive.open(d) as drive:
        drive.nvme.set_feature(0x01, 0x0F030000)  # WRR: high 16, medium 4, low 1, burst 1
    rr_total = rr["ns1_iops"] + rr["ns2_iops"]
    # A window in which the loaded machine starved NS2's fio is no flood, and cannot show
    # the controller saturated: measured again, at most twice (a CI run once saw NS2 at 988
    # IOPS, NS1 at 743, against round robin's 4,771 in all moments before).
    wrr = _measured_until(tmp_path, d, True, lambda m: m["ns1_iops"] + m["ns2_iops"] > 0.7 * rr_total and m["ns2_iops"] > 2000)
    # Round robin: NS1 waits behind NS2's queued commands at 200 us per fetch (about 6 ms with
    # all 32 queued). Against NS1 alone, not an absolute figure: on a loaded machine NS2's fio
    # keeps fewer than 32 in flight (seen: 4,339 IOPS and 2.9 ms in a CI run), a weaker flood.
    assert rr["mean_us"] > 4 * alone["mean_us"], (alone, rr, wrr)
    # WRR: NS1 waits for the next fetch only (measured 6-11x less than round robin,
    # docs/tenants.md; the rest of its latency is the host's, which a loaded machine adds).
    assert wrr["mean_us"] < rr["mean_us"] / 3, (alone, rr, wrr)
    assert wrr["mean_us"] < alone["mean_us"] + 1000, (alone, rr, wrr)
    # The controller stays saturated under WRR as under round robin (never above its 5K
    # fetches/s), and the neighbour gets what NS1 leaves. Against round robin's total, measured
    # moments before on the same machine, not an absolute floor: on a loaded machine (CI's
    # three test workers on two cores) the real-time server and fio lose CPU, and a WRR run
    # once served 3,757/s against round robin's 4,991/s.
    wrr_total = wrr["ns1_iops"] + wrr["ns2_iops"]
    assert max(rr_total, wrr_total) < 5000 * 1.05, (rr, wrr)
    assert wrr_total > 0.7 * rr_total and wrr["ns2_iops"] > 2000, (rr, wrr)


# --------------------------------------------------------------------------- reproduce pblaze5


def test_reproduce_pblaze5_quick(tmp_path: Path) -> None:
    plot = tmp_path / "noisy.png"
    r = run_cli("reproduce", "pblaze5", "--scale", "1/256", "--quick", "--plot", plot, "-o", "json", timeout=900)
    rows = r.json()
    quota = [x for x in rows if x["study"] == "quota"]
    assert [x["cap_mb_s"] for x in quota] == [391] * 4 + [39] * 4
    for x in quota:  # the talk: each namespace delivers its cap (within 2 %)
        assert abs(x["error"]) < 0.02, x
    assert sum(x["uncapped_mb_s"] for x in quota) > sum(x["mb_s"] for x in quota)
    noisy = {x["case"]: x for x in rows if x["study"] == "noisy" and x["neighbour"] == "reads"}
    alone, shared = noisy["alone"], noisy["with neighbour"]
    capped = next(v for k, v in noisy.items() if k.startswith("neighbour capped"))
    wrr = noisy["WRR: NS1 high, NS2 low"]
    for x in (alone, capped, wrr):
        assert abs(x["ns1_iops"] / 50_000 - 1) < 0.02, x  # the fixed rate is kept
    # Beside the greedy tenant, NS1's 32 commands in flight no longer sustain 50K IOPS.
    assert shared["ns1_iops"] < 0.9 * 50_000 and shared["ns2_iops"] > 10 * shared["ns1_iops"]
    assert shared["ns1_mean_us"] > 2 * alone["ns1_mean_us"], "the greedy tenant hurts"
    assert capped["ns1_mean_us"] < shared["ns1_mean_us"] and wrr["ns1_mean_us"] < shared["ns1_mean_us"]
    assert capped["ns2_iops"] < 1.02 * 100_000
    # NVM Sets part the dies, not the controller: beside a greedy reader that saturates the
    # command ceiling NS1 waits as long as when sharing every die.
    sets = noisy["NVM sets: NS1, NS2 on disjoint dies"]
    assert sets["ns1_mean_us"] > 0.7 * shared["ns1_mean_us"] and sets["ns1_iops"] < 0.9 * 50_000
    # Beside a greedy writer they do isolate: its programs and GC stay on its own dies.
    writes = {x["case"]: x for x in rows if x["study"] == "noisy" and x["neighbour"] == "writes"}
    w_alone, w_shared, w_sets = writes["alone"], writes["with neighbour"], writes["NVM sets: NS1, NS2 on disjoint dies"]
    assert w_shared["ns1_mean_us"] > 2 * w_alone["ns1_mean_us"] and w_shared["ns1_p999_us"] > 4 * w_alone["ns1_p999_us"]
    assert w_sets["ns1_mean_us"] < 1.3 * w_alone["ns1_mean_us"] and w_sets["ns1_p999_us"] < 0.5 * w_shared["ns1_p999_us"]
    assert w_sets["ns2_iops"] < w_shared["ns2_iops"], "the writer has half the dies"
    assert plot.stat().st_size > 10_000
