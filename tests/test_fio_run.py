"""`ssdtwin fio` end to end: fio job files run on drive images in simulated time.

Every test runs the real command line on a small image (CM6 at 1/454: 9.4 GB user, 8
superblocks) and reads what a fio user reads: the normal text, the JSON report (fio 3.x
layout), the log files, and the drive's own telemetry (vendor log, namespace usage). What
the engine did is checked from those outputs, never from internals, except where the only
witness is the engine's per-clone start time (stonewall), read through the Python API.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ssdtwin.drive import Drive
from ssdtwin.fio.run import run_jobs
from twin import (
    CM6,
    FioRun,
    copy_image,
    image_digest,
    namespace_rows,
    run_cli,
    run_fio,
    without_timestamps,
)

MiB = 1 << 20
HEAD = "[global]\nioengine=libaio\ndirect=1\n"
REFERENCE = Path(__file__).resolve().parent / "fio" / "data" / "real"  # a real fio 3.33 run


def vendor(d: Path) -> dict[str, Any]:
    return run_cli("nvme", "vendor-log", d, "-o", "json").json()


def namespaces(d: Path) -> dict[int, dict[str, Any]]:
    return {ns["nsid"]: ns for ns in namespace_rows(d)}


def resize(d: Path, *sizes: tuple[int, int]) -> None:
    """Replace namespace 1 by namespaces of (blocks, lba bytes), all attached (nvme-cli verbs)."""
    run_cli("nvme", "detach-ns", d, "-n", "1", "-c", "1")
    run_cli("nvme", "delete-ns", d, "-n", "1")
    for i, (blocks, lba) in enumerate(sizes, start=1):
        r = run_cli("nvme", "create-ns", d, "-s", str(blocks), "-c", str(blocks), "-b", str(lba))
        assert r.stdout.strip() == f"create-ns: Success, created nsid:{i}"
        run_cli("nvme", "attach-ns", d, "-n", str(i), "-c", "1")


@pytest.fixture(scope="module")
def tiny_template(tmp_path_factory: pytest.TempPathFactory, fresh_template: Path) -> Path:
    """The fresh image with namespace 1 resized to 64 MiB (512 B LBAs): room to fill."""
    d = copy_image(fresh_template, tmp_path_factory.mktemp("fio-tiny") / "cm6")
    resize(d, (64 * MiB // 512, 512))
    return d


@pytest.fixture
def tiny(tmp_path: Path, tiny_template: Path) -> Path:
    return copy_image(tiny_template, tmp_path / "tiny")


def rw_counts(job: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {d: (job[d]["total_ios"], job[d]["io_bytes"]) for d in ("read", "write", "trim")}


# --------------------------------------------------------------------------- output formats


TWO_JOBS = HEAD + "bs=4k\niodepth=8\nsize=16m\n\n[a]\nrw=randwrite\n\n[b]\nstonewall\nrw=randread\n"


def test_normal_output_is_fios_text(fresh: Path, tmp_path: Path) -> None:
    job = tmp_path / "two.fio"
    job.write_text(TWO_JOBS)
    r = run_cli("fio", fresh, job, "--log-dir", tmp_path)
    out = r.stdout.splitlines()
    bs = r"bs=\(R\) 4096B-4096B, \(W\) 4096B-4096B, \(T\) 4096B-4096B"
    assert re.fullmatch(rf"a: \(g=0\): rw=randwrite, {bs}, ioengine=libaio, iodepth=8", out[0]), out[0]
    assert re.fullmatch(rf"b: \(g=1\): rw=randread, {bs}, ioengine=libaio, iodepth=8", out[1]), out[1]
    assert out[2].startswith("fio-3.33") and out[3] == "Starting 2 processes"
    text = r.stdout
    assert re.search(r"(?m)^a: \(groupid=0, jobs=1\): err= 0: pid=0: ", text)
    assert re.search(r"(?m)^b: \(groupid=1, jobs=1\): err= 0: pid=0: ", text)
    assert re.search(r"(?m)^  write: IOPS=[\d.]+k, BW=[\d.]+MiB/s \([\d.]+MB/s\)\(16\.0MiB/\d+msec\); 0 zone resets$", text)
    assert re.search(r"(?m)^  read: IOPS=[\d.]+k, BW=[\d.]+MiB/s \([\d.]+MB/s\)\(16\.0MiB/\d+msec\)$", text)
    assert "     issued rwts: total=0,4096,0,0 short=0,0,0,0 dropped=0,0,0,0" in out
    assert "     issued rwts: total=4096,0,0,0 short=0,0,0,0 dropped=0,0,0,0" in out
    assert "    clat percentiles (nsec):" in out or "    clat percentiles (usec):" in out
    assert "Run status group 0 (all jobs):" in out and "Run status group 1 (all jobs):" in out
    assert re.search(r"(?m)^  WRITE: bw=.*io=16\.0MiB \(16\.8MB\), run=\d+-\d+msec$", text)
    assert re.search(r"(?m)^   READ: bw=.*io=16\.0MiB \(16\.8MB\), run=\d+-\d+msec$", text)
    # stderr: the ignored direct=1 of [global] (once, not per job), then the one-line
    # summary of simulated time.
    assert (
        r.stderr_lines[0] == f"ssdtwin fio: note: {job}:3: direct=1: ignored: the simulated drive has no page cache: I/O always reaches it"
    )
    assert len(r.stderr_lines) == 2 and re.fullmatch(r"ssdtwin fio: [\d.]+ s of drive time simulated in [\d.]+ s", r.stderr_lines[1])


# The key structure of fio 3.33's JSON, from tests/fio/data/real/fio-sample.json (a real
# run); written out here so that a change to that file cannot silently change the test.
SAMPLE_TOP = ["fio version", "timestamp", "timestamp_ms", "time", "global options", "jobs", "disk_util"]
SAMPLE_JOB = [
    "jobname",
    "groupid",
    "error",
    "eta",
    "elapsed",
    "job options",
    "read",
    "write",
    "trim",
    "sync",
    "job_runtime",
    "usr_cpu",
    "sys_cpu",
    "ctx",
    "majf",
    "minf",
    "iodepth_level",
    "iodepth_submit",
    "iodepth_complete",
    "latency_ns",
    "latency_us",
    "latency_ms",
    "latency_depth",
    "latency_target",
    "latency_percentile",
    "latency_window",
]
SAMPLE_DIR = [
    "io_bytes",
    "io_kbytes",
    "bw_bytes",
    "bw",
    "iops",
    "runtime",
    "total_ios",
    "short_ios",
    "drop_ios",
    "slat_ns",
    "clat_ns",
    "lat_ns",
    "bw_min",
    "bw_max",
    "bw_agg",
    "bw_mean",
    "bw_dev",
    "bw_samples",
    "iops_min",
    "iops_max",
    "iops_mean",
    "iops_stddev",
    "iops_samples",
]
SAMPLE_STAT = ["min", "max", "mean", "stddev", "N"]
SAMPLE_PERCENTILES = [
    "1.000000",
    "5.000000",
    "10.000000",
    "20.000000",
    "30.000000",
    "40.000000",
    "50.000000",
    "60.000000",
    "70.000000",
    "80.000000",
    "90.000000",
    "95.000000",
    "99.000000",
    "99.500000",
    "99.900000",
    "99.950000",
    "99.990000",
]
SAMPLE_DEPTHS = ["1", "2", "4", "8", "16", "32", ">=64"]
SAMPLE_SUBMIT = ["0", "4", "8", "16", "32", "64", ">=64"]
SAMPLE_LAT = ["2", "4", "10", "20", "50", "100", "250", "500", "750", "1000"]


def test_sample_key_structure_matches_the_reference_file() -> None:
    s = json.loads((REFERENCE / "fio-sample.json").read_text())
    j = s["jobs"][0]
    assert list(s) == SAMPLE_TOP and list(j) == SAMPLE_JOB and list(j["read"]) == SAMPLE_DIR
    assert list(j["read"]["lat_ns"]) == SAMPLE_STAT and list(j["read"]["clat_ns"]) == SAMPLE_STAT + ["percentile"]
    assert list(j["read"]["clat_ns"]["percentile"]) == SAMPLE_PERCENTILES
    assert list(j["iodepth_level"]) == SAMPLE_DEPTHS and list(j["iodepth_submit"]) == SAMPLE_SUBMIT
    assert list(j["latency_ns"]) == SAMPLE_LAT and list(j["latency_ms"]) == SAMPLE_LAT + ["2000", ">=2000"]


# fio-sample.fio (the job that made fio-sample.json) without its steadystate job (steady
# state has its own tests, tests/test_fio_steadystate.py): the twin runs the reference job
# unchanged.
SAMPLE_JOBFILE = """\
[global]
ioengine=libaio
direct=1
filename=fio-sample.dat
size=64m
time_based=1
runtime=1
randrepeat=1
norandommap=1
group_reporting=1

[randrw-70-30-4k]
rw=randrw
rwmixread=70
bs=4k
iodepth=8
numjobs=2

[seqwrite-128k]
stonewall
rw=write
bs=128k
iodepth=32
numjobs=1
"""


def test_json_report_has_fios_layout(fresh: Path, tmp_path: Path) -> None:
    job = tmp_path / "sample.fio"
    job.write_text(SAMPLE_JOBFILE)
    out = tmp_path / "out.json"
    r = run_cli("fio", fresh, job, "--output-format=json", f"--output={out}", "--log-dir", tmp_path)
    assert r.stdout == ""  # the report went to --output
    doc = json.loads(out.read_text())
    # disk_util is left out on purpose (no kernel disk; docs/fio.md §6.1).
    # ssdtwin's own object follows fio's keys: the options it ignored (docs/fio.md §6.1).
    assert list(doc) == [k for k in SAMPLE_TOP if k != "disk_util"] + ["ssdtwin"]
    assert {(e["job"], e["option"], e["value"]) for e in doc["ssdtwin"]["ignored_options"]} == {
        (j, "direct", "1") for j in ("randrw-70-30-4k", "seqwrite-128k")
    }
    assert doc["fio version"].startswith("fio-3.33")
    assert doc["global options"]["filename"] == "fio-sample.dat" and doc["global options"]["size"] == "64m"
    assert [j["jobname"] for j in doc["jobs"]] == ["randrw-70-30-4k", "seqwrite-128k"]  # group_reporting: 2 clones, 1 entry
    assert [j["groupid"] for j in doc["jobs"]] == [0, 1]
    for j in doc["jobs"]:
        assert list(j) == SAMPLE_JOB, j["jobname"]
        assert list(j["iodepth_level"]) == SAMPLE_DEPTHS
        assert list(j["iodepth_submit"]) == SAMPLE_SUBMIT and list(j["iodepth_complete"]) == SAMPLE_SUBMIT
        assert list(j["latency_ns"]) == SAMPLE_LAT and list(j["latency_us"]) == SAMPLE_LAT
        assert list(j["latency_ms"]) == SAMPLE_LAT + ["2000", ">=2000"]
        assert j["job_runtime"] in ((2000, 2001) if j["jobname"].startswith("randrw") else (1000, 1001))
        for d in ("read", "write", "trim"):
            s = j[d]
            assert list(s) == SAMPLE_DIR, (j["jobname"], d)
            for stat in ("slat_ns", "lat_ns"):
                assert list(s[stat]) == SAMPLE_STAT
            if s["total_ios"]:
                assert list(s["clat_ns"]) == SAMPLE_STAT + ["percentile"]
                p = s["clat_ns"]["percentile"]
                assert list(p) == SAMPLE_PERCENTILES
                assert list(p.values()) == sorted(p.values()) and p["1.000000"] > 0
                assert s["clat_ns"]["min"] <= s["clat_ns"]["mean"] <= s["clat_ns"]["max"]
                assert s["lat_ns"]["N"] == s["clat_ns"]["N"] == s["total_ios"]
                assert s["io_kbytes"] == s["io_bytes"] // 1024 and s["bw"] == s["bw_bytes"] // 1024
                assert s["iops"] == pytest.approx(s["total_ios"] / (s["runtime"] / 1000), rel=0.01)
                assert s["bw_samples"] > 0 and s["bw_min"] <= s["bw_mean"] <= s["bw_max"]
    rw, seq = doc["jobs"]
    assert rw["job options"] == {"rw": "randrw", "rwmixread": "70", "bs": "4k", "iodepth": "8", "numjobs": "2"}
    reads, writes = rw["read"]["total_ios"], rw["write"]["total_ios"]
    assert reads / (reads + writes) == pytest.approx(0.70, abs=0.02)
    assert seq["read"]["total_ios"] == 0 and seq["write"]["io_bytes"] == seq["write"]["total_ios"] * 131072
    assert seq["trim"]["total_ios"] == 0 and "percentile" not in seq["trim"]["clat_ns"]


def test_json_plus_adds_the_histogram_bins(fresh: Path, tmp_path: Path) -> None:
    r = run_fio(fresh, HEAD + "[j]\nrw=randrw\nbs=4k\nsize=8m\niodepth=4\n", tmp_path, fmt="json+")
    j = r.job("j")
    for d in ("read", "write"):
        bins = j[d]["clat_ns"]["bins"]
        assert sum(bins.values()) == j[d]["total_ios"] > 0
        assert all(int(k) > 0 for k in bins)


# --------------------------------------------------------------------------- namespaces


def test_namespace_option_and_filename_select_namespace_2(fresh: Path, tmp_path: Path) -> None:
    resize(fresh, (1 << 19, 512), (1 << 20, 512))  # 256 MiB and 512 MiB
    ns = namespaces(fresh)
    assert ns[1]["bytes"] == 256 * MiB and ns[2]["bytes"] == 512 * MiB and ns[1]["attached"] and ns[2]["attached"]
    fill = HEAD + "[fill]\nrw=write\nbs=128k\niodepth=8\nsize=100%\n"
    # size=100% resolves against the namespace the job runs on: 512 MiB written.
    r = run_fio(fresh, fill, tmp_path / "opt", "--namespace", "2")
    assert r.job("fill")["write"]["io_bytes"] == 512 * MiB
    ns = namespaces(fresh)
    assert ns[1]["nuse"] == 0 and ns[2]["nuse"] > 0.9 * ns[2]["nsze"]
    # filename=ns2 in the job names namespace 2 whatever --namespace says (default 1).
    for name in ("ns2", "/dev/nvme0n2"):
        r = run_fio(fresh, HEAD + f"[t]\nfilename={name}\nrw=trim\nbs=1m\nsize=100%\n", tmp_path / name.replace("/", "_"))
        assert r.job("t")["trim"]["io_bytes"] == 512 * MiB
    assert namespaces(fresh)[2]["nuse"] == 0 and namespaces(fresh)[1]["nuse"] == 0
    r = run_fio(fresh, HEAD + "[w]\nfilename=ns1\nrw=write\nbs=128k\nsize=100%\n", tmp_path / "ns1", "--namespace", "2")
    assert r.job("w")["write"]["io_bytes"] == 256 * MiB and namespaces(fresh)[2]["nuse"] == 0


def test_a_job_on_a_namespace_with_another_lba_size(fresh: Path, tmp_path: Path) -> None:
    """filename=ns2 where namespace 2 has 4 KiB LBAs and the default namespace 512 B ones."""
    resize(fresh, (1 << 21, 512), (1 << 18, 4096))  # 1 GiB each
    r = run_fio(fresh, HEAD + "[w]\nfilename=ns2\nrw=write\nbs=64k\nsize=64m\n", tmp_path)
    assert r.job("w")["write"]["io_bytes"] == 64 * MiB
    ns = namespaces(fresh)
    assert ns[1]["nuse"] == 0 and ns[2]["nuse"] > 0


def test_a_missing_namespace_is_one_error_line(fresh: Path, tmp_path: Path) -> None:
    job = tmp_path / "j.fio"
    job.write_text(HEAD + "[j]\nrw=read\nsize=1m\n")
    r = run_cli("fio", fresh, job, "--namespace", "3", "--log-dir", tmp_path, check=False)
    assert r.returncode == 1 and r.stderr_lines == ["ssdtwin fio: error: --namespace 3: not an attached namespace (attached: 1)"]
    job.write_text(HEAD + "[j]\nrw=read\nsize=1m\nfilename=ns3\n")
    r = run_cli("fio", fresh, job, "--log-dir", tmp_path, check=False)
    assert r.returncode == 1 and len(r.stderr_lines) == 1
    assert r.stderr_lines[0].startswith(f"ssdtwin fio: error: {job}:7: filename=ns3: namespace 3 does not exist")


# --------------------------------------------------------------------------- job files

GROUPS = """\
[global]
ioengine=libaio
bs=8k
iodepth=4
size=8m
rw=randwrite

[a]
numjobs=2
group_reporting

[b]
rw=randread

[c]
stonewall
bs=16k

[d]
new_group
offset=16m

[global]
iodepth=2

[e]
stonewall
group_reporting
numjobs=3
"""


def test_globals_groups_stonewall_new_group_group_reporting(fresh: Path, tmp_path: Path) -> None:
    r = run_fio(fresh, GROUPS, tmp_path)
    jobs = r.doc["jobs"]
    # group_reporting folds a's 2 clones and e's 3 into one entry each; b has no
    # group_reporting, so it is reported alone although it shares group 0 with a.
    assert [(j["jobname"], j["groupid"]) for j in jobs] == [("a", 0), ("b", 0), ("c", 1), ("d", 2), ("e", 3)]
    # [global] gave every job bs=8k, rw=randwrite, size=8m; jobs override some of it.
    a, b, c, d, e = jobs
    assert rw_counts(a) == {"read": (0, 0), "write": (2048, 16 * MiB), "trim": (0, 0)}
    assert rw_counts(b) == {"read": (1024, 8 * MiB), "write": (0, 0), "trim": (0, 0)}
    assert rw_counts(c)["write"] == (512, 8 * MiB)
    assert rw_counts(d)["write"] == (1024, 8 * MiB)
    assert rw_counts(e)["write"] == (3072, 24 * MiB)
    # The second [global] applies to the jobs below it only.
    assert [j["latency_depth"] for j in jobs] == [4, 4, 4, 4, 2]
    assert e["iodepth_level"]["4"] == 0 and e["iodepth_level"]["2"] > 99
    assert a["iodepth_level"]["4"] > 99
    assert r.doc["global options"] == {"ioengine": "libaio", "bs": "8k", "iodepth": "2", "size": "8m", "rw": "randwrite"}

    # Start order (stonewall: after every earlier job has finished; new_group: no wait).
    with Drive.in_memory(CM6, scale=454) as drive:
        run, results = run_jobs(drive, [str(r.dir / "job.fio")])
    span = {}
    for clone, res in zip(run.clones, results):
        span.setdefault(clone.job.name, []).append((res["start_ns"], res["start_ns"] + res["elapsed_ns"]))
    first_end = max(end for j in "ab" for _, end in span[j])
    assert all(start == 0 for j in "ab" for start, _ in span[j])
    assert all(start == first_end for j in "cd" for start, _ in span[j])  # d starts with c
    second_end = max(end for j in "cd" for _, end in span[j])
    assert second_end > first_end and all(start == second_end for start, _ in span["e"])


MODES = {
    # mode: expected (read, write, trim) I/O counts for 16 MiB of 4 KiB I/O
    "read": (4096, 0, 0),
    "write": (0, 4096, 0),
    "randread": (4096, 0, 0),
    "randwrite": (0, 4096, 0),
    "rw": None,
    "randrw": None,
    "trim": (0, 0, 4096),
    "randtrim": (0, 0, 4096),
    "trimwrite": (0, 4096, 4096),  # every block trimmed, then written
}


@pytest.mark.parametrize("mode", list(MODES))
def test_every_rw_mode_completes(mode: str, small: Path, tmp_path: Path) -> None:
    v0 = vendor(small)
    r = run_fio(small, HEAD + f"[m]\nrw={mode}\nrwmixread=70\nbs=4k\niodepth=4\nsize=16m\noffset=64m\n", tmp_path)
    v1 = vendor(small)
    j = r.job("m")
    counts = tuple(j[d]["total_ios"] for d in ("read", "write", "trim"))
    if MODES[mode] is None:
        reads, writes, trims = counts
        assert reads + writes == 4096 and trims == 0
        assert reads / 4096 == pytest.approx(0.70, abs=0.03)  # rwmixread=70
    else:
        assert counts == MODES[mode]
    for d in ("read", "write", "trim"):
        assert j[d]["io_bytes"] == 4096 * j[d]["total_ios"]
        if j[d]["total_ios"]:
            assert 0 < j[d]["clat_ns"]["min"] <= j[d]["clat_ns"]["mean"] < 10_000_000
    # The drive saw exactly the job's reads and writes.
    assert v1["host_write_bytes"] - v0["host_write_bytes"] == j["write"]["io_bytes"]
    assert v1["host_read_bytes"] - v0["host_read_bytes"] == j["read"]["io_bytes"]
    if "trim" in mode:
        # The template's fill mapped the whole region: every 4 KiB trim deallocates one IU.
        assert v1["trimmed_ius"] - v0["trimmed_ius"] == 4096


def randread_mean_ns(image: Path, workdir: Path) -> float:
    r = run_fio(image, HEAD + "[r]\nrw=randread\nbs=4k\niodepth=1\nsize=16m\noffset=64m\nnumber_ios=2000\n", workdir, "--scratch")
    return r.job("r")["read"]["clat_ns"]["mean"]


def test_trim_deallocates_and_unmapped_reads_are_fast(small: Path, fresh: Path, tmp_path: Path) -> None:
    unwritten = randread_mean_ns(fresh, tmp_path / "fresh")
    written = randread_mean_ns(small, tmp_path / "before")
    # A mapped LBA costs a NAND page read (tens of µs); an unmapped one only the controller.
    assert unwritten < 0.5 * written
    nuse0, v0 = namespaces(small)[1]["nuse"], vendor(small)
    run_fio(small, HEAD + "[t]\nrw=randtrim\nbs=64k\niodepth=4\nsize=16m\noffset=64m\n", tmp_path / "trim")
    nuse1, v1 = namespaces(small)[1]["nuse"], vendor(small)
    assert v1["trimmed_ius"] - v0["trimmed_ius"] == 4096  # every IU of the region was on NAND
    assert nuse0 - nuse1 == 16 * MiB // 512
    after = randread_mean_ns(small, tmp_path / "after")
    assert after == pytest.approx(unwritten, rel=0.05)
    run_cli("check", small)


def iops_log_rows(r: FioRun, job: str) -> list[list[int]]:
    return r.log_rows(f"{job}_iops.1.log")


def test_bssplit_sizes_and_shares(fresh: Path, tmp_path: Path) -> None:
    r = run_fio(fresh, HEAD + "[s]\nrw=randwrite\nbssplit=4k/20:16k/30:64k/50\nsize=64m\niodepth=8\nwrite_iops_log\n", tmp_path)
    rows = iops_log_rows(r, "s")
    sizes = collections.Counter(row[3] for row in rows)
    n = len(rows)
    assert n == r.job("s")["write"]["total_ios"]
    # As fio's random map (io_u.c mark_random_map): an I/O is shortened to the free blocks
    # it starts on, so other multiples of 4k appear and every block is written once: the
    # job moves exactly its size. fio 3.33 on this job: 2519 I/Os, 4k 24.7 %, 16k 26.0 %.
    assert all(s % 4096 == 0 and s <= 65536 for s in sizes)
    assert {bs for bs, _ in sizes.most_common(3)} == {4096, 16384, 65536}
    assert sizes[4096] / n == pytest.approx(0.247, abs=0.05) and sizes[16384] / n == pytest.approx(0.26, abs=0.05)
    io_bytes = r.job("s")["write"]["io_bytes"]
    assert io_bytes == sum(row[3] for row in rows) == 64 * MiB


def test_blockalign(fresh: Path, tmp_path: Path) -> None:
    r = run_fio(fresh, HEAD + "[b]\nrw=randwrite\nbs=4k\nba=64k\nsize=64m\nnumber_ios=2000\nwrite_iops_log\nlog_offset=1\n", tmp_path)
    rows = iops_log_rows(r, "b")
    assert len(rows) == 2000 and all(len(row) == 6 for row in rows)
    offsets = [row[4] for row in rows]
    assert all(o % 65536 == 0 for o in offsets)
    assert any(o % 131072 for o in offsets)  # aligned to 64k, not to anything coarser
    assert all(0 <= o < 64 * MiB for o in offsets)


def test_offset_increment_gives_clones_disjoint_regions(fresh: Path, tmp_path: Path) -> None:
    job = HEAD + "[g]\nrw=randwrite\nbs=4k\niodepth=4\noffset=1m\nsize=4m\noffset_increment=4m\nnumjobs=4\nwrite_iops_log=g\nlog_offset=1\n"
    r = run_fio(fresh, job, tmp_path)
    # Clones are subjobs 0, 3, 2, 1 in thread order (fio adds them with while (--numjobs)).
    seen: set[int] = set()
    for thread, subjob in zip((1, 2, 3, 4), (0, 3, 2, 1)):
        offsets = [row[4] for row in r.log_rows(f"g_iops.{thread}.log")]
        start = 1 * MiB + subjob * 4 * MiB
        assert len(offsets) == 1024 and all(start <= o < start + 4 * MiB for o in offsets), thread
        assert len(set(offsets)) == 1024  # the random map: each block once
        assert not seen & set(offsets)
        seen |= set(offsets)
    # Four report entries (no group_reporting), 4 MiB each.
    assert [(j["jobname"], j["write"]["io_bytes"]) for j in r.doc["jobs"]] == [("g", 4 * MiB)] * 4


def test_region_and_amount_options(tiny: Path, tmp_path: Path) -> None:
    """size in %, io_size (bytes and %), offset in %, loops, number_ios, fill_device on a
    64 MiB namespace; jobs run one after another (stonewall) on the same namespace."""
    jobs = {
        "pct": ("rw=randwrite\nsize=25%\n", {"write": (4096, 16 * MiB)}),
        "iosize": ("rw=randwrite\nsize=8m\nio_size=2m\n", {"write": (512, 2 * MiB)}),
        "iopct": ("rw=randread\nsize=8m\nio_size=50%\n", {"read": (1024, 4 * MiB)}),
        "loops": ("rw=read\nsize=8m\nloops=3\n", {"read": (6144, 24 * MiB)}),
        "nios": ("rw=randread\nnumber_ios=1000\n", {"read": (1000, 4096000)}),
        "offpct": ("rw=randread\nsize=8m\noffset=50%\nwrite_iops_log\nlog_offset=1\n", {"read": (2048, 8 * MiB)}),
        "fill": ("rw=write\nbs=128k\nfill_device=1\n", {"write": (512, 64 * MiB)}),
    }
    text = HEAD + "bs=4k\niodepth=4\n" + "".join(f"\n[{name}]\nstonewall\n{opts}" for name, (opts, _) in jobs.items())
    r = run_fio(tiny, text, tmp_path)
    for name, (_, want) in jobs.items():
        got = {d: v for d, v in rw_counts(r.job(name)).items() if v != (0, 0)}
        assert got == want, name
    offsets = [row[4] for row in r.log_rows("offpct_iops.6.log")]
    assert min(offsets) >= 32 * MiB and max(offsets) < 40 * MiB
    # fill_device wrote the whole namespace (minus what the write buffer still holds).
    ns = namespaces(tiny)[1]
    assert ns["nuse"] >= ns["nsze"] - vendor(tiny)["buffered_bytes"] // 512


def test_runtime_time_based_and_ramp_time(fresh: Path, tmp_path: Path) -> None:
    text = HEAD + (
        "bs=4k\niodepth=4\n"
        "[tb]\nrw=randread\nsize=8m\ntime_based\nruntime=300ms\nramp_time=200ms\n"
        "[noramp]\nrw=randread\nsize=8m\ntime_based\nruntime=300ms\n"
        "[cut]\nrw=randread\nsize=8g\nruntime=100ms\n"
        "[whole]\nrw=randread\nsize=8m\nruntime=10s\n"
    )
    r = run_fio(fresh, text, tmp_path)
    tb, cut, whole = r.job("tb"), r.job("cut"), r.job("whole")
    assert tb["job_runtime"] == 300 and tb["read"]["runtime"] in (300, 301)
    # time_based wraps around the 8 MiB region until the runtime is over.
    assert tb["read"]["io_bytes"] > 10 * 8 * MiB
    assert cut["job_runtime"] == 100 and cut["read"]["io_bytes"] < 8 << 30
    assert whole["read"]["io_bytes"] == 8 * MiB and whole["job_runtime"] < 1000  # size came first
    # The ramp is run but not reported: the clone ran ramp + runtime of drive time.
    with Drive.in_memory(CM6, scale=454) as drive:
        _, results = run_jobs(drive, [str(r.dir / "job.fio")])
    assert results[0]["elapsed_ns"] == pytest.approx(500e6, rel=0.001)
    assert results[0]["runtime_ns"] == pytest.approx(300e6, rel=0.001)
    # ... and what it did in the ramp is not counted: as many I/Os as the same job without one.
    assert tb["read"]["total_ios"] == pytest.approx(r.job("noramp")["read"]["total_ios"], rel=0.02)
    assert results[1]["elapsed_ns"] == pytest.approx(300e6, rel=0.001)


def test_rate_and_rate_iops_cap_the_job(fresh: Path, tmp_path: Path) -> None:
    text = (
        HEAD
        + "bs=4k\niodepth=8\nsize=64m\ntime_based\nruntime=500ms\n"
        + (
            "[free]\nrw=randread\nruntime=100ms\n"
            "[iops]\nrw=randread\nrate_iops=5000\n"
            "[bw]\nrw=randread\nrate=20m\n"
            "[poisson]\nrw=randread\nrate_iops=5000\nrate_process=poisson\n"
            "[wcap]\nrw=randwrite\nrate_iops=,2000\n"
        )
    )
    r = run_fio(fresh, text, tmp_path)
    assert r.job("free")["read"]["iops"] > 50_000  # the caps below bind
    assert r.job("iops")["read"]["iops"] == pytest.approx(5000, rel=0.02)
    assert r.job("bw")["read"]["bw_bytes"] == pytest.approx(20 * MiB, rel=0.02)
    assert r.job("poisson")["read"]["iops"] == pytest.approx(5000, rel=0.05)
    assert r.job("wcap")["write"]["iops"] == pytest.approx(2000, rel=0.02)


def test_thinktime_stalls_after_each_batch_of_ios(fresh: Path, tmp_path: Path) -> None:
    text = (
        HEAD
        + "bs=4k\nsize=64m\ntime_based\nruntime=1s\n"
        + ("[t1]\nrw=randread\niodepth=1\nthinktime=1ms\n[t4]\nrw=randread\niodepth=1\nthinktime=500\nthinktime_blocks=4\n")
    )
    r = run_fio(fresh, text, tmp_path)
    for name, think_ns, every in (("t1", 1_000_000, 1), ("t4", 500_000, 4)):
        s = r.job(name)["read"]
        # fio (backend.c handle_thinktime): after `every` I/Os, wait for the ones in flight,
        # then stall; one cycle is `every` I/Os back to back plus the think time.
        cycle_ns = every * s["clat_ns"]["mean"] + think_ns
        assert s["iops"] == pytest.approx(every * 1e9 / cycle_ns, rel=0.01), name


def test_thinktime_blocks_type_counts_completions_or_issues(fresh: Path, tmp_path: Path) -> None:
    """fio's handle_thinktime: with thinktime_blocks_type=issue a stall follows every
    `thinktime_blocks` issued I/Os; with `complete` (the default) the counter is completed
    I/Os, and the I/Os that complete during a stall's quiesce count toward the next stall,
    so at a queue depth above thinktime_blocks there are fewer stalls (between
    n/(blocks+depth) and n/blocks). At QD1 the two count the same."""
    n, blocks, depth, think_ms = 400, 4, 8, 5
    text = (
        HEAD
        + f"bs=4k\nsize=64m\nrw=randread\nnumber_ios={n}\nthinktime={think_ms}ms\nthinktime_blocks={blocks}\n"
        + (
            f"[issue]\niodepth={depth}\nthinktime_blocks_type=issue\n"
            f"[complete]\nstonewall\niodepth={depth}\n"
            "[qd1-issue]\nstonewall\niodepth=1\nnumber_ios=40\nthinktime_blocks_type=issue\n"
            "[qd1-complete]\nstonewall\niodepth=1\nnumber_ios=40\nthinktime_blocks_type=complete\n"
        )
    )
    r = run_fio(fresh, text, tmp_path)
    stalls = {}
    for name in ("issue", "complete"):
        s = r.job(name)["read"]
        assert s["total_ios"] == n
        # The I/O itself takes well under a millisecond per batch: the job's time is the stalls.
        stalls[name] = s["runtime"] / think_ms  # runtime in ms
    print(f"stalls: {stalls}")
    assert int(stalls["issue"]) == n // blocks
    assert n / (blocks + depth) <= int(stalls["complete"]) < n // blocks, stalls
    q1, qc = r.job("qd1-issue")["read"], r.job("qd1-complete")["read"]
    assert (q1["runtime"], q1["clat_ns"]["mean"]) == (qc["runtime"], qc["clat_ns"]["mean"])


def offsets_of(r: FioRun, job: str) -> list[int]:
    return [row[4] for row in r.log_rows(f"{job}_iops.1.log")]


def test_random_distributions_have_their_shape(fresh: Path, tmp_path: Path) -> None:
    dists = {"uniform": "random", "zipf": "zipf:1.2", "pareto": "pareto:0.9", "normal": "normal:5", "zoned": "zoned:90/10:10/90"}
    text = HEAD + "bs=4k\niodepth=8\nrw=randread\nsize=64m\noffset=64m\nnumber_ios=16384\nwrite_iops_log\nlog_offset=1\n"
    text += "".join(f"[{name}]\nrandom_distribution={d}\n" for name, d in dists.items())
    r = run_fio(fresh, text, tmp_path)
    shape = {}
    for thread, name in enumerate(dists, start=1):
        offsets = [row[4] for row in r.log_rows(f"{name}_iops.{thread}.log")]
        assert len(offsets) == 16384 and all(64 * MiB <= o < 128 * MiB for o in offsets)
        pos = [(o - 64 * MiB) / (64 * MiB) for o in offsets]
        counts = collections.Counter(offsets)
        hottest = sum(n for _, n in counts.most_common(16384 // 10)) / len(offsets)  # share of the top 10 % of blocks
        shape[name] = {
            "distinct": len(counts),
            "hottest": hottest,
            "first10": sum(p < 0.1 for p in pos) / len(pos),
            "middle20": sum(abs(p - 0.5) < 0.1 for p in pos) / len(pos),
        }
    assert shape["uniform"]["distinct"] == 16384  # each block once (random map)
    assert shape["zipf"]["hottest"] > 0.6 and shape["zipf"]["distinct"] < 16384 / 4
    assert shape["pareto"]["hottest"] > 0.25 and shape["pareto"]["distinct"] < 16384 / 2
    # fio hashes the normal draw over the blocks too (lib/gauss.c): a hot set scattered over
    # the region, not a bell (fio 3.33 on this job: 5424 distinct blocks, 19.9 % in the middle 20 %).
    assert shape["normal"]["distinct"] < 16384 / 2 and shape["normal"]["middle20"] < 0.3
    assert shape["zoned"]["first10"] == pytest.approx(0.90, abs=0.02)


def test_zipf_lowers_the_waf_of_random_writes(small_template: Path, tmp_path: Path) -> None:
    """On a written drive, zipf-hot random writes hit the write buffer and invalidate whole
    blocks sooner: a lower WAF and more buffer merges than uniform random writes."""
    seen = {}
    for dist in ("random", "zipf:1.2"):
        d = copy_image(small_template, tmp_path / dist.replace(":", "_"))
        v0 = vendor(d)
        run_fio(d, HEAD + f"[w]\nrw=randwrite\nbs=4k\niodepth=32\nio_size=512m\nrandom_distribution={dist}\n", tmp_path / f"j-{dist}")
        v1 = vendor(d)
        host = v1["host_write_bytes"] - v0["host_write_bytes"]
        assert host == 512 * MiB
        seen[dist] = ((v1["nand_write_bytes"] - v0["nand_write_bytes"]) / host, v1["buffer_merges"] - v0["buffer_merges"])
    (waf_u, merges_u), (waf_z, merges_z) = seen["random"], seen["zipf:1.2"]
    assert waf_u > 1.5  # the template is past its first fill: GC is running
    assert waf_z < 0.7 * waf_u
    assert merges_z > 10 * max(merges_u, 1)


def test_percentile_list(fresh: Path, tmp_path: Path) -> None:
    r = run_fio(fresh, HEAD + "[p]\nrw=randrw\nbs=4k\nsize=16m\niodepth=16\npercentile_list=50:99:99.9:99.999\n", tmp_path)
    for d in ("read", "write"):
        p = r.job("p")[d]["clat_ns"]["percentile"]
        assert list(p) == ["50.000000", "99.000000", "99.900000", "99.999000"]
        assert list(p.values()) == sorted(p.values())
        # Percentiles are bucket midpoints: within 1/128 of a real sample (docs/fio.md §5).
        assert p["99.999000"] <= r.job("p")[d]["clat_ns"]["max"] * (1 + 1 / 128)


LOGS = (
    HEAD
    + """\
[lg]
rw=randread
bs=4k
iodepth=4
size=256m
numjobs=2
time_based
runtime=1s
ramp_time=200ms
write_bw_log
write_iops_log=myio
write_lat_log
write_hist_log
log_avg_msec=100
log_hist_msec=200
"""
)


def test_log_files_are_named_and_filled_as_fio_does(fresh: Path, tmp_path: Path) -> None:
    r = run_fio(fresh, LOGS, tmp_path)
    logs = sorted(p.name for p in tmp_path.glob("*.log"))
    want = [f"{p}.{n}.log" for p in ("lg_bw", "lg_clat", "lg_clat_hist", "lg_lat", "lg_slat", "myio_iops") for n in (1, 2)]
    assert logs == sorted(want)
    j1, j2 = r.doc["jobs"]  # numjobs=2 without group_reporting: an entry per clone
    assert j1["jobname"] == j2["jobname"] == "lg"
    for n, job in ((1, j1), (2, j2)):
        s = job["read"]
        bw = r.log_rows(f"lg_bw.{n}.log")
        iops = r.log_rows(f"myio_iops.{n}.log")
        lat = r.log_rows(f"lg_lat.{n}.log")
        hist = r.log_rows(f"lg_clat_hist.{n}.log")
        # One averaged row per 100 ms window after the ramp: t, value, ddir, bs, prio; none
        # for the window the 1 s runtime ends in (fio samples only while the job runs).
        assert [row[0] for row in bw] == list(range(100, 901, 100)) == [row[0] for row in iops]
        assert all(len(row) == 5 and row[2] == 0 for row in bw + iops + lat)
        assert sum(row[1] for row in iops) / len(iops) == pytest.approx(s["iops"], rel=0.03)
        assert sum(row[1] for row in bw) / len(bw) == pytest.approx(s["bw"], rel=0.03)
        assert sum(row[1] for row in lat) / len(lat) == pytest.approx(s["lat_ns"]["mean"], rel=0.05)
        assert all(row[1] == 0 for row in r.log_rows(f"lg_slat.{n}.log"))  # no host submission modelled
        # Histogram rows every 200 ms: t, ddir, bs, then 1856 bins (coarseness 0). fio's
        # window starts at the first completion after 0 ms (tests/test_fio_log_files.py).
        assert len(hist) >= 4 and all(len(row) == 3 + 1856 and row[2] == 4096 for row in hist)
        assert [row[0] for row in hist][:4] == [201, 401, 601, 801]
        assert sum(sum(row[3:]) for row in hist) == pytest.approx(s["total_ios"], rel=0.25)
    # per_job_logs=0: one file for all clones, their rows one after the other.
    r2 = run_fio(fresh, LOGS.replace("log_hist_msec=200", "log_hist_msec=200\nper_job_logs=0"), tmp_path / "shared")
    assert sorted(p.name for p in (tmp_path / "shared").glob("*.log")) == [
        "lg_bw.log",
        "lg_clat.log",
        "lg_clat_hist.log",
        "lg_lat.log",
        "lg_slat.log",
        "myio_iops.log",
    ]
    assert len(r2.log_rows("myio_iops.log")) == 18


def test_per_io_logs_without_averaging(fresh: Path, tmp_path: Path) -> None:
    r = run_fio(fresh, HEAD + "[p]\nrw=randwrite\nbs=4k\nsize=1m\niodepth=2\nwrite_lat_log\nwrite_bw_log\nlog_offset=1\n", tmp_path)
    lat, bw = r.log_rows("p_lat.1.log"), r.log_rows("p_bw.1.log")
    assert len(lat) == len(bw) == 256  # one row per I/O: t, value, ddir, bs, offset, prio
    assert all(row[2] == 1 and row[3] == 4096 and len(row) == 6 for row in lat)
    s = r.job("p")["write"]["lat_ns"]
    assert min(row[1] for row in lat) == s["min"] and max(row[1] for row in lat) == s["max"]
    assert sum(row[1] for row in lat) / 256 == pytest.approx(s["mean"], rel=1e-6)
    assert sorted(row[4] for row in lat) == list(range(0, MiB, 4096))
    # bw value of one I/O: bytes * 10^6 / clat ns (KiB/s as fio computes it)
    assert all(b[1] == 4096 * 1_000_000 // lt[1] for b, lt in zip(bw, lat))


# --------------------------------------------------------------------------- determinism

DET = HEAD + "bs=4k\niodepth=16\nrandrepeat=0\n[m]\nrw=randrw\nrwmixread=60\nsize=512m\nio_size=32m\nnumjobs=2\n"


def test_same_seed_same_report_on_identical_images(small_template: Path, tmp_path: Path) -> None:
    docs, digests = [], []
    for k in range(2):
        d = copy_image(small_template, tmp_path / f"img{k}")
        docs.append(run_fio(d, DET, tmp_path / f"run{k}", "--seed", "7").doc)
        digests.append(image_digest(d))
    assert without_timestamps(docs[0]) == without_timestamps(docs[1])
    assert digests[0] == digests[1]  # and the images are left in the same state


def test_scratch_twice_gives_the_same_report_and_leaves_the_image(small: Path, tmp_path: Path) -> None:
    before = image_digest(small)
    a = run_fio(small, DET, tmp_path / "a", "--scratch", "--seed", "7").doc
    b = run_fio(small, DET, tmp_path / "b", "--scratch", "--seed", "7").doc
    assert image_digest(small) == before
    assert without_timestamps(a) == without_timestamps(b)
    # ... and the text that differs is only the time stamp lines.
    c = run_fio(small, DET, tmp_path / "c", "--scratch", "--seed", "8").doc
    assert without_timestamps(a) != without_timestamps(c)  # randrepeat=0: the run seed decides
    ra, rc = a["jobs"][0], c["jobs"][0]
    assert ra["read"]["total_ios"] + ra["write"]["total_ios"] == rc["read"]["total_ios"] + rc["write"]["total_ios"]
    assert (ra["read"]["total_ios"], ra["read"]["clat_ns"]["mean"]) != (rc["read"]["total_ios"], rc["read"]["clat_ns"]["mean"])


def test_run_seed_does_not_move_a_randrepeat_job(small: Path, tmp_path: Path) -> None:
    """With fio's default randrepeat=1 the offsets come from the thread number, not from the
    OS: a different --seed changes nothing (docs/fio.md §2.5)."""
    text = DET.replace("randrepeat=0", "randrepeat=1")
    a = run_fio(small, text, tmp_path / "a", "--scratch", "--seed", "1").doc
    b = run_fio(small, text, tmp_path / "b", "--scratch", "--seed", "2").doc
    assert without_timestamps(a) == without_timestamps(b)


# --------------------------------------------------------------------------- refused jobs

BAD = [
    # (option line, what the one error line must name)
    ("verify=md5", "verify=md5"),
    ("bs=4q", "bs=4q"),
    ("bogus_option=1", "bogus_option=1"),
    ("rw=RandRead", "rw=RandRead"),
    ("ioengine=windowsaio", "ioengine=windowsaio"),
    ("size=150%", "size=150%"),
    ("read_iolog=trace.log", "read_iolog=trace.log"),
    ("steadystate=iops_slope:fast", "steadystate=iops_slope:fast"),
    ("random_distribution=zipf:hot", "random_distribution=zipf:hot"),
    ("bs=1000", "bs=1000"),  # not a multiple of the 512-byte LBA: EINVAL on a real drive
    ("offset=100g", "offset=100g"),  # past the end of the namespace
]


@pytest.mark.parametrize("line,names", BAD, ids=[b[0] for b in BAD])
def test_refused_option_is_one_line_and_changes_nothing(line: str, names: str, small: Path, tmp_path: Path) -> None:
    job = tmp_path / "bad.fio"
    job.write_text(f"[global]\nioengine=libaio\n\n[job1]\nrw=randwrite\n{line}\nsize=1m\n")
    out = tmp_path / "out.json"
    before = image_digest(small)
    r = run_cli("fio", small, job, "--output-format=json", f"--output={out}", "--log-dir", tmp_path, check=False)
    assert r.returncode == 1
    assert len(r.stderr_lines) == 1, r.stderr
    err = r.stderr_lines[0]
    assert err.startswith(f"ssdtwin fio: error: {job}:6: {names}: ") or (
        # a region error is reported at the option that set the region's end
        line.startswith("offset=") and err.startswith(f"ssdtwin fio: error: {job}:") and "past the end" in err
    ), err
    assert r.stdout == "" and not out.exists()
    assert image_digest(small) == before


def test_every_error_is_one_line(small: Path, tmp_path: Path) -> None:
    job = tmp_path / "bad.fio"
    job.write_text("[a]\nrw=randread\nbs=4q\nverify=md5\n[b]\nnot_an_option=1\n")
    before = image_digest(small)
    r = run_cli("fio", small, job, "--log-dir", tmp_path, check=False)
    assert r.returncode == 1 and r.stderr_lines == [
        f"ssdtwin fio: error: {job}:3: bs=4q: not a size: unknown size suffix 'q'",
        f"ssdtwin fio: error: {job}:4: verify=md5: data verification is not simulated",
        f"ssdtwin fio: error: {job}:6: not_an_option=1: unknown option",
    ]
    assert r.stdout == ""
    assert image_digest(small) == before


def test_missing_job_file_and_bad_format(small: Path, tmp_path: Path) -> None:
    r = run_cli("fio", small, tmp_path / "nope.fio", check=False)
    assert r.returncode == 1 and r.stderr_lines == [f"ssdtwin fio: error: {tmp_path / 'nope.fio'}: no such job file"]
    job = tmp_path / "j.fio"
    job.write_text("[j]\nrw=read\nsize=1m\n")
    r = run_cli("fio", small, job, "--output-format=xml", check=False)
    assert r.returncode == 1 and len(r.stderr_lines) == 1 and "--output-format 'xml'" in r.stderr_lines[0]


# --------------------------------------------------------------------------- fio-plot


@pytest.fixture(scope="module")
def bench_tree(tmp_path_factory: pytest.TempPathFactory, fresh_template: Path) -> Path:
    """Real engine output laid out as bench-fio writes it (fio-plot 1.1.21, docs/sources.md):
    OUT/<device>/<bs>/<mode>-<iodepth>-<numjobs>.json, logs named <mode>-iodepth-<d>-numjobs-<n>."""
    out = tmp_path_factory.mktemp("bench") / "OUT"
    leaf = out / "nvme0n1" / "4k"
    leaf.mkdir(parents=True)
    img = copy_image(fresh_template, tmp_path_factory.mktemp("bench-img") / "cm6")
    # Something to read: a written region, so latency depends on the queue depth.
    run_fio(img, HEAD + "[fill]\nrw=write\nbs=128k\niodepth=16\nsize=1g\n", leaf.parent / "fill")
    for depth in (1, 8, 32):
        name = f"randread-iodepth-{depth}-numjobs-1"
        text = (
            "[global]\nioengine=libaio\ndirect=1\nfilename=/dev/nvme0n1\nrw=randread\nbs=4k\nsize=1g\n"
            f"time_based\nruntime=2\nlog_avg_msec=500\n[{name}]\niodepth={depth}\nnumjobs=1\n"
            f"write_bw_log={name}\nwrite_iops_log={name}\nwrite_lat_log={name}\n"
        )
        job = leaf.parent / f"{name}.fio"
        job.write_text(text)
        run_cli("fio", img, job, "--output-format=json", f"--output={leaf / f'randread-{depth}-1.json'}", "--log-dir", leaf)
    return leaf


@pytest.mark.tools
@pytest.mark.parametrize(
    "args",
    [["-l", "-d", "1", "8", "32", "-n", "1"], ["-H", "-d", "8", "-n", "1"], ["-g", "-d", "1", "8", "32", "-n", "1", "-t", "iops", "lat"]],
    ids=["qd-bars", "histogram", "log-graph"],
)
def test_fio_plot_charts_real_engine_output(bench_tree: Path, args: list[str], tmp_path: Path) -> None:
    if shutil.which("fio-plot") is None:
        pytest.skip("fio-plot is not installed (pip install -e '.[test]')")
    png = tmp_path / f"chart{args[0]}.png"
    env = dict(os.environ, MPLBACKEND="Agg")
    p = subprocess.run(
        ["fio-plot", "-i", str(bench_tree), "-T", "ssdtwin CM6", "-r", "randread", "-o", str(png), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ERROR" not in p.stdout and "Traceback" not in p.stderr
    assert png.exists() and png.stat().st_size > 20_000


def test_bench_tree_latency_grows_with_queue_depth(bench_tree: Path) -> None:
    """What fio-plot's QD chart shows must make sense: IOPS and latency grow with depth."""
    docs = {d: json.loads((bench_tree / f"randread-{d}-1.json").read_text())["jobs"][0]["read"] for d in (1, 8, 32)}
    assert docs[1]["iops"] < docs[8]["iops"] < docs[32]["iops"]
    assert docs[1]["lat_ns"]["mean"] < docs[32]["lat_ns"]["mean"]


def test_the_json_waf_is_the_drives_only_over_a_gc_cycle_or_a_namespace_pass(small: Path, tmp_path: Path) -> None:
    """fio's JSON carries the drive's WAF measurement over the run (docs/models.md,
    "Measuring WAF"): 64 MiB of random writes on an 8-superblock drive reclaim a fraction of
    its superblocks, so there is no WAF, only the window's raw ratio; a sequential pass over
    the whole namespace is enough to report one."""
    short = run_fio(small, HEAD + "[w]\nrw=randwrite\nbs=4k\niodepth=32\nio_size=64m\n", tmp_path / "short").doc["ssdtwin"]["waf"]
    assert short["basis"] == "timed" and short["verdict"] == "insufficient", short
    assert short["waf"] is None and short["waf_window_raw"] > 1.0 and short["host_bytes"] == 64 * MiB
    assert short["gc_cycles"] < 1 and short["namespace_passes"] < 0.01 and short["superblocks"] == 8
    whole = run_fio(small, HEAD + "[w]\nrw=write\nbs=128k\niodepth=8\n", tmp_path / "whole").doc["ssdtwin"]["waf"]
    assert whole["verdict"] == "steady" and whole["namespace_passes"] == pytest.approx(1.0, rel=1e-3), whole
    # The pass follows random writes: GC still copies what they scattered, so WAF > 1.
    assert whole["waf"] == whole["waf_window_raw"] > 1.0, whole


def test_run_jobs_takes_one_job_file_as_parse_does_and_a_namespace_must_be_an_int(tmp_path: Path) -> None:
    job = tmp_path / "j.fio"
    job.write_text("[j]\nrw=randwrite\nbs=4k\niodepth=8\nsize=16m\nnumber_ios=100\n")
    d = Drive.in_memory(CM6, scale=454)
    # A str ran each of its characters as a job file: "/: not a regular file (a directory)".
    for files in (str(job), job, [str(job)]):
        _, out = run_jobs(d, files)
        assert out[0]["write"]["total_ios"] == 100
    # Was "--namespace 1: not an attached namespace (attached: 1)".
    with pytest.raises(TypeError, match=r"^namespace '1': must be an int, not str$"):
        run_jobs(d, [job], namespace="1")  # type: ignore[arg-type]
    d.check()
