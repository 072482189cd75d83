"""`ssdtwin fio` with fio's I/O logs: write_iolog writes what fio would (so the run replays
on a real drive), read_iolog replays fio's version 2 and 3 traces, bad traces are one-line
errors that leave the image untouched (docs/fio.md §2.10)."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ssdtwin.drive import Drive
from ssdtwin.fio import FioJobError, parse_string
from twin import CM6, copy_image, image_digest, run_cli, run_fio

DATA = Path(__file__).resolve().parent / "fio" / "data" / "iolog"
FIO_TRACE = DATA / "fio-randrw.v3.log"  # recorded by fio 3.33: randrw 4k over 256k of /dev/null
DDIRS = ("read", "write", "trim")


@pytest.fixture
def image(fresh: Path) -> Path:
    """A fresh CM6 at 1/454 (conftest's `fresh`)."""
    return fresh


def totals(job: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {d: (job[d]["total_ios"], job[d]["io_bytes"]) for d in DDIRS}


def io_lines(text: str) -> list[tuple[int, str, str, int, int]]:
    out = []
    for line in text.splitlines()[1:]:
        words = line.split()
        if len(words) == 5:
            out.append((int(words[0]), words[1], words[2], int(words[3]), int(words[4])))
    return out


def replayed(job_text: str, *, cwd: Path) -> list[tuple[str, int, int, int]]:
    """(ddir, offset, length, issue time ns) of every I/O the engine issues for a replay
    job, recorded by the engine itself (write_iolog is off for read_iolog jobs, as in fio)."""
    run = parse_string(job_text, cwd=cwd)
    with Drive.in_memory(CM6, scale=454) as d:
        ns = d.namespaces()[0]
        specs = run.to_engine(ns.bytes, ns.lba_bytes)
        for s in specs:
            s["iolog"] = True
        (result,) = d.run_fio(specs, 1, True, None)
    return [(DDIRS[dd], off, n, t) for t, dd, off, n in struct.iter_unpack("<4Q", bytes(result["iolog"]))]


def test_write_iolog_is_fio_format_and_replays_to_the_same_ios(tmp_path: Path, fresh_template: Path) -> None:
    job = "[j]\nioengine=libaio\niodepth=4\nrw=randrw\nbs=4k\nsize=1m\nwrite_iolog=j.iolog\n"
    first = run_fio(copy_image(fresh_template, tmp_path / "a"), job, tmp_path / "rec")
    text = (tmp_path / "rec" / "j.iolog").read_text()
    lines = text.splitlines()
    assert lines[:3] == ["fio version 3 iolog", "0 j.0.0 add", "0 j.0.0 open"]
    ios = io_lines(text)
    close = lines[-1].split()
    assert close[1:] == ["j.0.0", "close"] and int(close[0]) >= ios[-1][0]
    t = totals(first.job("j"))
    for d in ("read", "write"):
        mine = [x for x in ios if x[2] == d]
        assert (len(mine), sum(x[4] for x in mine)) == t[d]
    assert [x[0] for x in ios] == sorted(x[0] for x in ios), "issue order, times in us"
    assert ios[0][0] == 0 and ios[-1][0] > 0
    # Each 4 KiB block once (the random map), inside the 1 MiB region.
    assert sorted(x[3] for x in ios) == list(range(0, 1 << 20, 4096))

    # The twin replays its own trace: the same totals through the CLI, the same I/Os in the
    # same order at the same (recorded, microsecond) times through the engine.
    log = tmp_path / "rec" / "j.iolog"
    replay_job = f"[r]\nioengine=libaio\niodepth=4\nread_iolog={log}\n"
    second = run_fio(copy_image(fresh_template, tmp_path / "b"), replay_job, tmp_path / "play")
    assert totals(second.job("r")) == t
    again = replayed(replay_job, cwd=tmp_path)
    assert [(d, off, n) for d, off, n, _ in again] == [(x[2], x[3], x[4]) for x in ios]
    # Paced by the microsecond timestamps: fio's replay of this log ends about when the run
    # did (each gap, truncated to whole us, is waited after the previous issue).
    end_us = again[-1][3] / 1000
    assert abs(end_us - ios[-1][0]) <= 0.05 * ios[-1][0] + 50, (end_us, ios[-1][0])


def test_write_iolog_appends_clones_in_thread_order_with_fio_file_names(tmp_path: Path, image: Path) -> None:
    job = (
        "[w]\nrw=write\nbs=64k\nsize=256k\nnumjobs=3\noffset_increment=1m\nwrite_iolog=w.iolog\n"
        "[d]\nfilename=/dev/nvme0n1\nrw=read\nbs=4k\nsize=8k\nwrite_iolog=w.iolog\n"
    )
    run_fio(image, job, tmp_path / "w")
    text = (tmp_path / "w" / "w.iolog").read_text()
    blocks = text.split("fio version 3 iolog\n")[1:]
    assert len(blocks) == 4
    # fio numbers a job's clones 0, N-1, ..., 1 in thread order and names their files so.
    names = [b.splitlines()[0].split()[1] for b in blocks]
    assert names == ["w.0.0", "w.2.0", "w.1.0", "/dev/nvme0n1"]
    offsets = [[x[3] for x in io_lines("h\n" + b)] for b in blocks]
    assert offsets[1] == [2 << 20, (2 << 20) + 65536, (2 << 20) + 131072, (2 << 20) + 196608]
    assert offsets[3] == [0, 4096]
    # A second run appends, as fio does (fio opens the file with "a").
    run_fio(image, job, tmp_path / "w")
    assert (tmp_path / "w" / "w.iolog").read_text() == text * 2


def test_replays_a_trace_fio_wrote(tmp_path: Path, image: Path) -> None:
    trace = io_lines(FIO_TRACE.read_text())
    r = run_fio(image, f"[p]\nread_iolog={FIO_TRACE}\n", tmp_path / "p")
    for d in ("read", "write"):
        mine = [x for x in trace if x[2] == d]
        assert totals(r.job("p"))[d] == (len(mine), sum(x[4] for x in mine))
    got = replayed(f"[p]\nread_iolog={FIO_TRACE}\n", cwd=tmp_path)
    assert [(d, off, n) for d, off, n, _ in got] == [(x[2], x[3], x[4]) for x in trace]
    # Paced by the timestamps: each I/O waits its gap after the previous issue (or issues
    # as soon as the previous one completed, when that was later: psync, QD 1).
    gaps = [b[0] - a[0] for a, b in zip(trace, trace[1:])]
    issue = [t for *_, t in got]
    assert all(b - a >= g * 1000 for a, b, g in zip(issue, issue[1:], gaps))
    fast = replayed(f"[p]\nread_iolog={FIO_TRACE}\nreplay_no_stall=1\n", cwd=tmp_path)
    assert fast[-1][3] < issue[-1], "replay_no_stall ignores the timestamps"


def test_replays_what_real_fio_records(tmp_path: Path, image: Path) -> None:
    fio = shutil.which("fio")
    if fio is None:
        pytest.skip("the real fio binary is not installed")
    rec = tmp_path / "rec.log"
    subprocess.run(
        [fio, "--name=x", "--ioengine=null", "--size=512k", "--bs=8k", "--rw=randtrimwrite", f"--write_iolog={rec}"],
        check=True,
        capture_output=True,
    )
    trace = io_lines(rec.read_text())
    got = replayed(f"[p]\nread_iolog={rec}\n", cwd=tmp_path)
    assert [(d, off, n) for d, off, n, _ in got] == [(x[2], x[3], x[4]) for x in trace]
    assert {d for d, *_ in got} == {"trim", "write"}, "trims replay (fio 3.33 drops them: 'bad ddir: 2')"


def test_version_2_waits_and_the_replay_options(tmp_path: Path) -> None:
    v2 = tmp_path / "v2.log"
    v2.write_text(
        "fio version 2 iolog\n/dev/sdb add\n/dev/sdb open\n/dev/sdb write 4096 8192\n/dev/sdb wait 5 0\n"
        "/dev/sdb read 1003520 4096\n/dev/sdb sync 0 0\n/dev/sdb trim 65536 4096\n/dev/sdb close\n"
    )
    got = replayed(f"[v]\nread_iolog={v2}\n", cwd=tmp_path)
    assert [(d, off, n) for d, off, n, _ in got] == [("write", 4096, 8192), ("read", 1003520, 4096), ("trim", 65536, 4096)]
    assert got[0][3] == 0 and got[1][3] == 5_000_000, "wait holds the next I/O until 5 ms after the start"
    assert replayed(f"[v]\nread_iolog={v2}\nreplay_no_stall=1\n", cwd=tmp_path)[1][3] < 5_000_000
    # replay_scale divides offsets, replay_align rounds them down, replay_skip drops types.
    opts = "replay_scale=2\nreplay_align=4096\nreplay_skip=trim\n"
    got = replayed(f"[v]\nread_iolog={v2}\n{opts}", cwd=tmp_path)
    assert [(d, off) for d, off, _, _ in got] == [("write", 0), ("read", 499712)]

    v3 = tmp_path / "v3.log"
    v3.write_text("fio version 3 iolog\n10 f add\n20 f open\n30 f read 0 4096\n1030 f read 4096 4096\n2030 f close\n")
    base = replayed(f"[v]\nread_iolog={v3}\n", cwd=tmp_path)
    assert base[1][3] - base[0][3] == 1_000_000, "1000 us after the previous issue"
    half = replayed(f"[v]\nread_iolog={v3}\nreplay_time_scale=200\n", cwd=tmp_path)
    assert half[1][3] - half[0][3] == 500_000


TAILS = {
    # fio 3.33 --ioengine=null on these traces: job_runtime 1001 ms, 500 ms and 1392 ms (a
    # wait counts from fio's genesis, a little before the job's start; docs/fio.md §2.10).
    "a close 1 s after the last write": (
        "fio version 3 iolog\n0 f add\n0 f open\n1000 f write 0 4096\n2000 f write 4096 4096\n1002000 f close\n",
        1_001_000_000,
    ),
    "a sync 0.5 s after it": ("fio version 3 iolog\n0 f add\n0 f open\n1000 f write 0 4096\n501000 f sync 0 0\n", 500_000_000),
    "a version 2 wait": ("fio version 2 iolog\nf add\nf open\nf write 0 4096\nf wait 1500 0\nf close\n", 1_500_000_000),
    "no line after the last I/O": ("fio version 3 iolog\n0 f add\n0 f open\n1000 f write 0 4096\n2000 f write 4096 4096\n", 1_000_000),
}


@pytest.mark.parametrize("case", sorted(TAILS))
def test_lines_after_the_last_io_hold_the_job_as_in_fio(tmp_path: Path, case: str) -> None:
    """fio waits a trace's trailing close, sync or wait before the job ends (iolog.c
    ipo_special, read_iolog_get); the twin ended with the last I/O: a job runtime of 1 ms
    for a trace spanning 1.001 s, and every per-second figure off by as much."""
    text, runtime_ns = TAILS[case]
    trace = tmp_path / "t.log"
    trace.write_text(text)
    run = parse_string(f"[v]\nioengine=libaio\nread_iolog={trace}\n", cwd=tmp_path)
    with Drive.in_memory(CM6, scale=454) as d:
        ns = d.namespaces()[0]
        (result,) = d.run_fio(run.to_engine(ns.bytes, ns.lba_bytes), 1, True, None)
    # The job ends at the tail's time, or with its last write's completion (~14 us after
    # its issue) when nothing follows it.
    assert runtime_ns <= result["runtime_ns"] < runtime_ns + 100_000
    assert result["write"]["runtime_ns"] == result["runtime_ns"], "the bandwidth is over the whole replay"


def test_a_trace_of_waits_and_no_io_replays_its_waits_as_fio_does(tmp_path: Path) -> None:
    """fio 3.33 fails an iolog with no read, write or wait ("failed initializing iolog") but
    runs one of version 2 waits alone: it waits, and ends with no I/O (measured with
    --ioengine=null: `wait 1500`, exit 0, job_runtime 1399 ms, its wait counted from fio's
    genesis). The twin refused it: "no I/O to replay"."""
    trace = tmp_path / "t.log"
    trace.write_text("fio version 2 iolog\nf add\nf open\nf wait 700 0\nf wait 1500 0\nf close\n")
    run = parse_string(f"[v]\nread_iolog={trace}\n", cwd=tmp_path)
    with Drive.in_memory(CM6, scale=454) as d:
        ns = d.namespaces()[0]
        (result,) = d.run_fio(run.to_engine(ns.bytes, ns.lba_bytes), 1, True, None)
    assert result["runtime_ns"] == 1_500_000_000
    assert [result[k]["total_ios"] for k in ("read", "write", "trim")] == [0, 0, 0]


def test_the_trace_names_the_target(tmp_path: Path) -> None:
    trace = tmp_path / "t.log"
    trace.write_text("fio version 2 iolog\n/dev/nvme0n2 add\n/dev/nvme0n2 write 0 4096\n")
    sizes, lbas = {1: 1 << 30, 2: 1 << 20}, {1: 4096, 2: 512}

    def spec(extra: str = "") -> dict[str, Any]:
        run = parse_string(f"[t]\nfilename=ns1\nread_iolog={trace}\n{extra}", cwd=tmp_path)
        return run.to_engine(1 << 30, 4096, namespace_sizes=sizes, namespace_lba_bytes=lbas)[0]

    assert (spec()["namespace"], spec()["lba_bytes"], spec()["directions"]) == (2, 512, ["write"])
    assert spec("replay_redirect=ns1\n")["namespace"] == 1
    assert spec("replay_redirect=/dev/sdc\n")["namespace"] is None, "any other device: the default target"
    trace.write_text("fio version 2 iolog\na add\nb add\na write 0 4096\nb write 0 4096\n")
    with pytest.raises(FioJobError, match=r"addresses 2 files \(a, b\).*replay_redirect="):
        spec()
    assert spec("replay_redirect=ns2\n")["namespace"] == 2


BAD_TRACES = {
    "unknown action": ("fio version 3 iolog\n0 f add\n5 f reed 0 4096\n", r"t\.log:3: action=reed: unknown I/O action"),
    "beyond the namespace": ("fio version 2 iolog\nf add\nf write 10995116277760 4096\n", r"t\.log:3: offset=10995116277760: I/O ends at"),
    "not a multiple of the LBA": ("fio version 2 iolog\nf add\nf read 0 4096\nf read 100 4096\n", r"t\.log:4: offset=100: not a multiple"),
    "length not a multiple": ("fio version 2 iolog\nf add\nf read 0 1000\n", r"t\.log:3: length=1000: not a multiple"),
    "garbage line": ("fio version 3 iolog\n0 f add\nhello world\n", r"t\.log:3: timestamp=hello: not a decimal number"),
    "missing field": ("fio version 3 iolog\n0 f add\n1 f read 0\n", r"t\.log:3: expected 'TIMESTAMP FILE ACTION \[OFFSET LENGTH\]'"),
    "file never added": ("fio version 2 iolog\nf write 0 4096\n", r"t\.log:2: file=f: file not added"),
    "no header": ("0 f add\n", r"t\.log:1: not a fio iolog"),
    "blktrace without I/O": (b"\x07\x74\x61\x65" + bytes(44), r"t\.log: found no ios in blktrace data"),
    "truncated blktrace": (
        b"\x07\x74\x61\x65" + bytes(24) + b"\x01\x00\x12\x00" + bytes(16) + b"\x07\x74\x61\x65" + bytes(16),
        r"t\.log: record 1 \(byte 48\): truncated: the file ends 20 bytes into a 48-byte record",
    ),
    "no I/O": ("fio version 2 iolog\nf add\nf open\nf close\n", r"read_iolog=.*t\.log: no I/O to replay"),
    # fio counts reads, writes and waits (read_iolog2): a sync is not one.
    "a sync and no I/O": ("fio version 3 iolog\n0 f add\n0 f open\n500 f sync 0 0\n", r"read_iolog=.*t\.log: no I/O to replay"),
    # replay_no_stall drops the waits, and fio then fails the trace too.
    "waits dropped by replay_no_stall": ("fio version 2 iolog\nf add\nf wait 1500 0\n", r"no I/O to replay"),
}


def _write_trace(path: Path, content: str | bytes) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


@pytest.mark.parametrize("case", sorted(BAD_TRACES))
def test_bad_traces_are_refused_naming_file_line_and_field(tmp_path: Path, case: str) -> None:
    content, pattern = BAD_TRACES[case]
    trace = _write_trace(tmp_path / "t.log", content)
    stall = "replay_no_stall=1\n" if "no_stall" in case else ""
    run = parse_string(f"[bad]\nrw=write\nsize=1m\nread_iolog={trace}\n{stall}", cwd=tmp_path)
    with pytest.raises(FioJobError) as e:
        run.to_engine(9_390_000_000 // 4096 * 4096, 512)
    assert re.search(pattern, str(e.value)), str(e.value)


@pytest.mark.parametrize("case", ["unknown action", "beyond the namespace", "truncated blktrace"])
def test_bad_traces_through_the_cli_are_one_line_and_leave_the_image_untouched(tmp_path: Path, image: Path, case: str) -> None:
    content, pattern = BAD_TRACES[case]
    trace = _write_trace(tmp_path / "t.log", content)
    job = tmp_path / "job.fio"
    job.write_text(f"[bad]\nrw=write\nsize=1m\nread_iolog={trace}\n")
    before = image_digest(image)
    r = run_cli("fio", image, job, check=False)
    assert r.returncode == 1, r.stderr
    assert len(r.stderr_lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr_lines[0].startswith("ssdtwin fio: error: ") and re.search(pattern, r.stderr_lines[0]), r.stderr_lines[0]
    assert image_digest(image) == before


def test_bad_replay_options(tmp_path: Path) -> None:
    for line, message in (
        ("replay_align=3", "must be a power-of-2"),
        ("replay_skip=read,foo", "Unknown skip type: foo"),
        ("replay_time_scale=0", "min value out of range"),
        ("read_iolog=-", "stdin is not supported"),
        ("read_iolog=nothere.log", "nothere.log: no such trace file"),
    ):
        with pytest.raises(FioJobError, match=message):
            parse_string(f"[x]\nread_iolog={tmp_path / 'x.log'}\n{line}\n", cwd=tmp_path).to_engine(1 << 30, 512)


def test_trace_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/fio.md §2.9: a trace is a regular file within the size, line and I/O limits."""
    from ssdtwin.fio import iolog, limits

    def refused(trace: Path, message: str) -> None:
        with pytest.raises(FioJobError, match=message):
            parse_string(f"[x]\nread_iolog={trace}\n", cwd=tmp_path).to_engine(1 << 30, 512)

    big = tmp_path / "big.log"
    with open(big, "wb") as f:  # sparse: nothing is written
        f.write(b"fio version 2 iolog\n")
        f.truncate(limits.MAX_TRACE_BYTES + 1)
    refused(big, f"trace of {limits.MAX_TRACE_BYTES + 1} bytes; at most {limits.MAX_TRACE_BYTES}")
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    refused(fifo, "fifo.log: not a regular file")
    long = tmp_path / "long.log"
    long.write_text("fio version 2 iolog\nf add\nf read 0 " + "0" * 5000 + "4096\n")
    refused(long, r"long\.log:3: line longer than 4095 characters")
    many = tmp_path / "many.log"
    many.write_text("fio version 2 iolog\nf add\n" + "f read 0 4096\n" * 4)
    monkeypatch.setattr(iolog, "MAX_TRACE_IOS", 3)
    refused(many, r"many\.log:6: more than 3 I/Os in one trace")


def test_real_fio_replays_the_twins_iolog(tmp_path: Path, image: Path) -> None:
    fio = shutil.which("fio")
    if fio is None:
        pytest.skip("the real fio binary is not installed")
    job = "[j]\nioengine=libaio\niodepth=8\nrw=randrw\nbs=8k\nsize=512k\nwrite_iolog=j.iolog\n"
    twin = totals(run_fio(image, job, tmp_path).job("j"))
    # fio (null engine: no file is created) replays every line of it, in its own time.
    proc = subprocess.run(
        [fio, "--name=r", "--ioengine=null", f"--read_iolog={tmp_path / 'j.iolog'}", "--output-format=json"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    real = json.loads(proc.stdout[proc.stdout.index("{") :])["jobs"][0]
    assert totals(real) == twin and twin["read"][0] > 0 and twin["write"][0] > 0


def test_an_unreadable_trace_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ssdtwin.fio import iolog

    trace = tmp_path / "secret.log"
    trace.write_text("fio version 2 iolog\nf add\nf read 0 4096\n")

    def denied(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(iolog, "open", denied, raising=False)  # root reads any file: fail the open itself
    with pytest.raises(FioJobError, match=r"read_iolog=.*secret\.log: .*secret\.log: Permission denied$"):
        parse_string(f"[x]\nread_iolog={trace}\n", cwd=tmp_path).to_engine(1 << 30, 512)
