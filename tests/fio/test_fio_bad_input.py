"""Bad fio input is bounded (docs/fio.md §2.9): every input below ends at once with exit
status 1 and one line on stderr naming the file, line, option and allowed range; no
traceback, no panic, and the drive image is left exactly as it was.

Several of these used to hang (numjobs=100000, include /dev/zero, include fan-out,
loops=1e9 of a namespace), overflow the recursion limit (include depth), grow memory
without bound, or fail deep in the engine ("engine input does not follow contract v1").
The CLI runs as a real subprocess with a generous timeout: the bound is "returns", not a
speed.
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

from ssdtwin.fio import FioJobError, parse_string
from ssdtwin.fio import limits as L
from ssdtwin.fio import options as O
from ssdtwin.fio.engine import contract_range_error
from twin import CM6, image_digest, run_cli

# Generous: each case returns in well under a second; this only catches a hang.
HANG_TIMEOUT_S = 60

Files = dict[str, bytes]
Setup = Callable[[Path], Files]


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One small image for every case (none may change it); checked at the end."""
    d = tmp_path_factory.mktemp("bad-input") / "cm6"
    run_cli("create", d, "--model", CM6, "--scale", "1/454")
    yield d
    run_cli("check", d)


def job(body: str) -> bytes:
    return ("[j]\nioengine=libaio\nrw=randwrite\nbs=4k\n" + body).encode()


def text(files: Files) -> Setup:
    return lambda _: files


def fifo_include(d: Path) -> Files:
    os.mkfifo(d / "pipe")
    return {"job.fio": job("include pipe\n")}


def directory_include(d: Path) -> Files:
    (d / "adir").mkdir()
    return {"job.fio": job("include adir\n")}


def directory_job(d: Path) -> Files:
    (d / "jobs").mkdir()
    return {}


def fan_out(_: Path) -> Files:
    # Ten includes per level, eight levels: 10^8 includes if nothing stopped it.
    files = {f"fan{i}.inc": f"include fan{i + 1}.inc\n".encode() * 10 for i in range(8)}
    files["fan8.inc"] = b"size=1m\n"
    files["job.fio"] = job("include fan0.inc\n")
    return files


def depth(_: Path) -> Files:
    files = {f"d{i}.inc": f"include d{i + 1}.inc\n".encode() for i in range(3000)}
    files["d3000.inc"] = b"size=1m\n"
    files["job.fio"] = job("include d0.inc\n")
    return files


def big_file(_: Path) -> Files:
    line = b"description=" + b"x" * 80 + b"\n"
    return {"job.fio": job("size=1m\n") + line * (10 * 1024 * 1024 // len(line) + 1)}


def binary(_: Path) -> Files:
    return {"job.fio": random.Random(1).randbytes(4096)}


def binary_include(_: Path) -> Files:
    return {"job.fio": job("include blob\n"), "blob": bytes(range(256)) * 4}


# (id, setup, job file argument, text the error line must contain)
CASES: list[tuple[str, Setup, str, str]] = [
    (
        "numjobs=100000",
        text({"job.fio": job("numjobs=100000\n")}),
        "job.fio",
        "job.fio:5: numjobs=100000: max value out of range: 100000 (4096 max",
    ),
    (
        "threads over all jobs",
        text({"job.fio": job("numjobs=4096\n") + b"[k]\nnumjobs=1\n"}),
        "job.fio",
        "job.fio:7: numjobs=1: job k: the run would have 4097 threads",
    ),
    ("10 MB job file", big_file, "job.fio", "job.fio: too large: 10485"),
    (
        "include /dev/zero",
        text({"job.fio": job("include /dev/zero\n")}),
        "job.fio",
        "job.fio:5: include /dev/zero: not a regular file (a character device)",
    ),
    ("include a FIFO", fifo_include, "job.fio", "job.fio:5: include pipe: not a regular file (a FIFO)"),
    ("include a directory", directory_include, "job.fio", "include adir: not a regular file (a directory)"),
    ("include fan-out", fan_out, "job.fio", f"more than {L.MAX_INCLUDES} includes in a run"),
    ("include depth", depth, "job.fio", "d15.inc:1: include d16.inc: includes nested more than 16 deep"),
    (
        "include cycle",
        text({"job.fio": job("include a.inc\n"), "a.inc": b"include b.inc\n", "b.inc": b"include a.inc\n"}),
        "job.fio",
        "b.inc:1: include loop through 'a.inc'",
    ),
    ("binary job file", binary, "job.fio", "job.fio: not a text file ("),
    (
        "latin-1 job file",
        text({"job.fio": job("description=caf\xe9\n").replace(b"\xc3\xa9", b"\xe9")}),
        "job.fio",
        "job.fio: not a text file (byte 0xe9 at offset",
    ),
    ("binary include", binary_include, "job.fio", "job.fio:5: include blob: not a text file (NUL byte at offset 0)"),
    (
        "loops=1e9 of the namespace",
        text({"job.fio": job("loops=1000000000\n")}),
        "job.fio",
        "job.fio:5: loops=1000000000: the job would move 8.142 EiB",
    ),
    (
        "loops past 32 bits",
        text({"job.fio": job("size=1m\nloops=4294967296\n")}),
        "job.fio",
        "loops=4294967296: max value out of range: 4294967296 (4294967295 max: fio keeps this option in 32 bits)",
    ),
    ("runtime=1e12", text({"job.fio": job("time_based\nruntime=1e12\n")}), "job.fio", "job.fio:6: runtime=1e12: not a time"),
    (
        "runtime=10^12 s",
        text({"job.fio": job("time_based\nruntime=1000000000000\n")}),
        "job.fio",
        "runtime=1000000000000: max value out of range: 31,710 years (200 days max",
    ),
    (
        "thinktime over a long runtime",
        text({"job.fio": job("size=1m\ntime_based\nruntime=1000000000\nthinktime=10s\n")}),
        "job.fio",
        "job.fio:7: runtime=1000000000: max value out of range: 31.71 years (200 days max",
    ),
    (
        "thinktime past 32-bit us",
        text({"job.fio": job("size=1m\nthinktime=2h\n")}),
        "job.fio",
        "thinktime=2h: max value out of range: 2 h (4294967295 us (1.193 h) max: fio keeps it in 32-bit microseconds)",
    ),
    (
        "stonewalled runtimes past the run limit",
        text({"job.fio": job("size=1m\ntime_based\nruntime=150d\n") + b"[k]\nstonewall\nsize=1m\ntime_based\nruntime=150d\n"}),
        "job.fio",
        "job k: the run takes at least 300 days of simulated time",
    ),
    (
        "startdelay past the run limit",
        text({"job.fio": job("size=1m\nstartdelay=201d\n")}),
        "job.fio",
        "startdelay=201d: max value out of range: 201 days (200 days max",
    ),
    (
        "steady-state window past a day",
        text({"job.fio": job("size=1m\nss=iops:5%\nss_dur=2d\n")}),
        "job.fio",
        "ss_dur=2d: max value out of range: 2 days (1 days max: the window keeps one sample per second, at most a day of them)",
    ),
    (
        "block size past one syscall",
        text({"job.fio": job("bs=4g\n")}),
        "job.fio",
        "bs=4g: max value out of range: 4294967296 (2147479552 max: Linux moves at most this much in one read or write call)",
    ),
    (
        "I/Os in flight",
        text({"job.fio": job("size=1m\niodepth=65536\nnumjobs=17\n")}),
        "job.fio",
        f"the run would keep 1114112 I/Os in flight (iodepth x numjobs, summed over jobs); at most {L.MAX_INFLIGHT}",
    ),
    (
        "expression bomb",
        text({"job.fio": job("size=(9^9^9^9)\n")}),
        "job.fio",
        "size=(9^9^9^9): expression value out of range (more than 128 bits)",
    ),
    (
        "nested parentheses",
        text({"job.fio": job("size=" + "(" * 4000 + "1" + ")" * 4000 + "\n")}),  # fits fio's 8191-byte line
        "job.fio",
        "expression of more than 256 numbers, units and operators",
    ),
    ("an 8,000-digit number", text({"job.fio": job("size=1" + "0" * 8_000 + "\n")}), "job.fio", "not a size: longer than 40 characters"),
    ("a 100,000-byte line", text({"job.fio": job("size=1" + "0" * 100_000 + "\n")}), "job.fio", "job.fio:5: line longer than 8191 bytes"),
    (
        "keyword arithmetic bomb",
        text({"job.fio": job("size=$pagesize*9^999999999\n")}),
        "job.fio",
        "cannot evaluate keyword arithmetic: value out of range (more than 128 bits)",
    ),
    (
        "sections",
        text({"job.fio": b"[global]\nbs=4k\n" * (L.MAX_SECTIONS + 1)}),
        "job.fio",
        f"job.fio:{2 * L.MAX_SECTIONS + 1}: more than {L.MAX_SECTIONS} sections in a run",
    ),
    (
        "include a name too long for the OS",
        text({"job.fio": job("include " + "a" * 5000 + "\n")}),
        "job.fio",
        "job.fio:5: cannot open include file 'aaaa",
    ),
    ("/dev/zero as the job file", text({}), "/dev/zero", "/dev/zero: not a regular file (a character device)"),
    ("a directory as the job file", directory_job, "jobs", "jobs: not a regular file (a directory)"),
    ("a job file name too long for the OS", text({}), "b" * 5000, "bbbb: File name too long"),
    # fio: "No job(s) defined", exit 1; these ran nothing, printed an empty report and exited 0.
    ("an empty job file", text({"job.fio": b""}), "job.fio", "job.fio: no job defined (no [section] other than [global])"),
    ("only [global]", text({"job.fio": b"[global]\nrw=read\nsize=1m\n"}), "job.fio", "job.fio: no job defined"),
    ("only comments", text({"job.fio": b"; nothing\n# here\n"}), "job.fio", "job.fio: no job defined"),
]


@pytest.mark.parametrize("setup,jobfile,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_leaves_the_image(setup: Setup, jobfile: str, expected: str, image: Path, tmp_path: Path) -> None:
    for name, data in setup(tmp_path).items():
        (tmp_path / name).write_bytes(data)
    before = image_digest(image)
    arg = jobfile if jobfile.startswith("/") else tmp_path / jobfile
    # A process of its own: what it guards against is a hang, which the timeout turns into a failure.
    r = run_cli("fio", image, arg, "--output", tmp_path / "out.json", check=False, timeout=HANG_TIMEOUT_S, process=True)
    assert r.returncode == 1, r
    assert "Traceback" not in r.stderr and "panicked" not in r.stderr, r.stderr
    assert len(r.stderr_lines) == 1, r.stderr
    (line,) = r.stderr_lines
    assert line.startswith("ssdtwin fio: error: "), line
    assert expected in line, line
    assert r.stdout == ""
    assert not (tmp_path / "out.json").exists()
    assert image_digest(image) == before


def test_a_fifo_job_file_does_not_hang(image: Path, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.fio")
    r = run_cli("fio", image, tmp_path / "pipe.fio", check=False, timeout=HANG_TIMEOUT_S, process=True)
    assert r.returncode == 1 and r.stderr_lines == [f"ssdtwin fio: error: {tmp_path / 'pipe.fio'}: not a regular file (a FIFO)"], r


def test_a_log_file_that_cannot_be_written_is_refused_before_the_run(image: Path, tmp_path: Path) -> None:
    # These used to run (and commit to the image), print the report, then fail writing the log.
    (tmp_path / "plain").write_text("x")
    jobf = tmp_path / "job.fio"
    jobf.write_bytes(job(f"size=1m\nwrite_iolog={tmp_path}/plain/io.log\n[k]\nrw=read\nsize=1m\nwrite_bw_log={tmp_path}/nodir/bw\n"))
    before = image_digest(image)
    r = run_cli("fio", image, jobf, check=False)
    assert r.returncode == 1 and r.stdout == "", r
    assert r.stderr_lines == [
        f"ssdtwin fio: error: {jobf}:6: write_iolog={tmp_path}/plain/io.log: cannot write the log file {tmp_path}/plain/io.log: "
        f"{tmp_path}/plain is not a directory",
        f"ssdtwin fio: error: {jobf}:10: write_bw_log={tmp_path}/nodir/bw: cannot write the log file {tmp_path}/nodir/bw_bw.2.log: "
        f"no such directory {tmp_path}/nodir",
    ]
    assert image_digest(image) == before and not (tmp_path / "nodir").exists()


def test_a_log_folder_that_refuses_new_files_is_refused_before_the_run(image: Path, tmp_path: Path) -> None:
    # /proc's permission bits let root write (os.access says yes), but no file can be made
    # there: this used to run, commit, print the report, then fail writing the log.
    jobf = tmp_path / "job.fio"
    jobf.write_bytes(job("size=1m\nwrite_bw_log=/proc/bw\n"))
    before = image_digest(image)
    r = run_cli("fio", image, jobf, check=False)
    assert r.returncode == 1 and r.stdout == "", r
    assert r.stderr_lines == [
        f"ssdtwin fio: error: {jobf}:6: write_bw_log=/proc/bw: cannot write the log file /proc/bw_bw.1.log: "
        "cannot create a file in /proc (No such file or directory)"
    ], r.stderr_lines
    assert image_digest(image) == before


# --- every option, extreme values: a one-line FioJobError or an engine input that fits --

EXTREMES = [
    "99999999999999999999",
    "0xffffffffffffffffffff",
    "(2^62)",
    "(2^63)",
    "(2^64)",
    "(2^127)",
    "18446744073709551615",
    "9223372036854775807",
    "9223372036854775808",
    "4294967295",
    "4294967296",
    "-1",
    "0",
    "1",
    "1e9",
    "200d",
    "201d",
    "(1/0)",
    "100%",
    "4g",
    "2g",
    "1p",
    "4k-8k",
    "4k:(2^70)",
    "(2^70)/50",
    "4k/50:(2^70)/50",
    "zipf:1e308",
    "pareto:0.5:2",
    "zoned_abs:50/(2^70):50/1k",
    "randread:99999999999",
    "write:(2^64)",
    "1,2,3,4",
    "1::",
    "0x",
    "",
]
NAMESPACE_BYTES = 15_873_409_024


def _engine_inputs(body: str) -> list[dict[str, Any]]:
    run = parse_string("[j]\nioengine=libaio\nrw=randrw\nbs=4k\n" + body, env={})
    return run.to_engine(
        NAMESPACE_BYTES, 512, namespace_sizes={1: NAMESPACE_BYTES}, namespace_lba_bytes={1: 512}, link_bytes_per_s=6_972_272_923
    )


@pytest.mark.parametrize("name", sorted(o.name for o in O.OPTIONS.values() if o.kind == O.SIM))
def test_extreme_values_never_reach_the_engine_out_of_range(name: str) -> None:
    for value in EXTREMES:
        try:
            specs = _engine_inputs(f"{name}={value}\n")
        except FioJobError as e:
            assert "\n" not in str(e) and str(e).startswith("<string>:"), str(e)
            continue
        for spec in specs:
            assert contract_range_error(spec) is None, (name, value)


def test_pairs_of_extremes_never_reach_the_engine_out_of_range() -> None:
    # Values that pass alone but could overflow together.
    body = [
        "offset_increment=(2^62)\nnumjobs=4096",
        "rate=9223372036854775807\nbs=2g",
        "io_size=(2^62)\nloops=4294967295",
        "number_ios=9223372036854775807\nbs=2g",
        "startdelay=200d\nramp_time=200d\ntime_based\nruntime=200d",
        "rw=write:9223372036854775807\nloops=4294967295\nsize=4k",
    ]
    for a, b in itertools.product(body, repeat=2):
        try:
            specs = _engine_inputs(a + "\n" + b + "\n")
        except FioJobError as e:
            assert "\n" not in str(e)
            continue
        for spec in specs:
            assert contract_range_error(spec) is None, (a, b)


def test_the_engine_refuses_a_run_past_the_limit_the_parser_uses(tmp_path: Path) -> None:
    """The parser's 200 days (limits.MAX_RUN_NS) is the engine's MAX_RUN_NS: a start delay
    just inside runs, one just past it is the engine's one-line error."""
    import ssdtwin

    d = tmp_path / "img"
    run_cli("create", d, "--model", CM6, "--scale", "1/454")
    spec = _engine_inputs("rw=randwrite\nsize=1m\nnumber_ios=8\n")[0]
    with ssdtwin.Drive.open(d, writable=False) as drive:
        ns = drive.namespaces()[0]
        spec.update(target_size_bytes=ns.bytes, lba_bytes=ns.lba_bytes)
        (out,) = drive.run_fio([dict(spec, startdelay_ns=L.MAX_RUN_NS - 1_000_000_000)])
        assert out["write"]["total_ios"] == 8
        with pytest.raises(ssdtwin._core.EngineError, match="pass 200 days"):
            drive.run_fio([dict(spec, startdelay_ns=L.MAX_RUN_NS + 1)])


def test_logs_past_the_row_limit_stop_the_run_in_one_line(image: Path, tmp_path: Path) -> None:
    # A time-based hour of 4k writes at QD32 with write_lat_log (log_avg_msec=0: a row per
    # I/O) grew to 24 GB until the kernel killed the process. The run now stops at the
    # limit: one line, nothing written, the image untouched. 5 rows per I/O (lat, clat, slat,
    # bw, iops): the limit is reached after ~1.7M I/Os.
    jobf = tmp_path / "job.fio"
    jobf.write_bytes(job("iodepth=32\ntime_based\nruntime=1h\nwrite_lat_log=l\nwrite_bw_log=b\nwrite_iops_log=i\n"))
    before = image_digest(image)
    r = run_cli("fio", image, jobf, "--log-dir", tmp_path, check=False)
    assert r.returncode == 1 and r.stdout == "", r
    assert r.stderr_lines == [
        "ssdtwin fio: error: job 'j' (thread 1): write_bw_log/write_iops_log/write_lat_log/write_hist_log: the run's logs "
        "passed 8388608 rows (kept in memory until the run ends; log_avg_msec=0 writes a row per I/O: set log_avg_msec to "
        "average them, or log a shorter run)"
    ], r.stderr_lines
    assert image_digest(image) == before and not list(tmp_path.glob("*.log"))


def test_a_log_dir_is_left_alone_by_a_run_without_logs(image: Path, tmp_path: Path) -> None:
    # --log-dir was made after every run, logs or none: a missing folder appeared, and one
    # that could not be made (/proc/x) failed the command after the run had been committed.
    jobf = tmp_path / "job.fio"
    jobf.write_bytes(job("size=1m\n"))
    for log_dir in (tmp_path / "new" / "logs", Path("/proc/x")):
        r = run_cli("fio", image, jobf, "--scratch", "--log-dir", log_dir, "--output-format", "json", check=False)
        assert r.returncode == 0 and r.json()["jobs"][0]["write"]["io_bytes"] == 1 << 20, r
        assert not log_dir.exists()
