"""``ssdtwin replay DRIVE TRACE`` (docs/traces.md): the public block-trace formats replayed
on a drive image with their totals, the formats told apart, offsets past the namespace
refused, folded or scaled, and bad traces refused in one line with the image unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tracefiles as tf
from twin import image_digest, run_cli

DDIRS = ("read", "write", "trim")
# The 1/454 CM6 (conftest's `fresh`) has one namespace of 9,386,786,816 bytes.
NS_BYTES = 9_386_786_816


@pytest.fixture(scope="module")
def work() -> dict[str, np.ndarray]:
    """2,000 I/Os of a database volume (and 10 % of a second one) over 1 GiB."""
    return tf.workload(2000, seed=11)


def totals(w: dict[str, np.ndarray], mask: Any = True) -> dict[str, tuple[int, int]]:
    m = np.asarray(mask) & np.ones(len(w["write"]), bool)
    reads, writes = m & ~w["write"], m & w["write"]
    return {
        "read": (int(reads.sum()), int(w["length"][reads].sum())),
        "write": (int(writes.sum()), int(w["length"][writes].sum())),
        "trim": (0, 0),
    }


def replay(image: Path, trace: Path, *args: str, check: bool = True) -> Any:
    r = run_cli("replay", image, trace, "-o", "json", *args, check=check)
    return r.json() if check else r


def job_totals(doc: dict[str, Any]) -> dict[str, tuple[int, int]]:
    job = doc["jobs"][0]
    return {d: (job[d]["total_ios"], job[d]["io_bytes"]) for d in DDIRS}


WRITERS = {"msr": tf.write_msr, "alibaba": tf.write_alibaba, "tencent": tf.write_tencent}


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_each_csv_format_replays_with_its_totals(tmp_path: Path, fresh: Path, work: dict[str, np.ndarray], fmt: str) -> None:
    trace = WRITERS[fmt](tmp_path / f"t.{fmt}.csv", work)
    doc = replay(fresh, trace)
    assert job_totals(doc) == totals(work)
    rep = doc["replay"]
    assert rep["format"] == fmt, "--format auto told it apart"
    assert rep["trace_ios"] == {d: t[0] for d, t in totals(work).items()}
    assert rep["volumes"] == 2 and rep["skipped_lines"] == 0 and rep["realigned_ios"] == 0
    # fio's shape: latency percentiles per direction; the drive's write amplification.
    job = doc["jobs"][0]
    for d in ("read", "write"):
        assert job[d]["clat_ns"]["percentile"]["99.000000"] > 0
    drive = rep["drive"]
    assert drive["host_write_bytes"] == totals(work)["write"][1]
    assert drive["waf_window_raw"] is not None and drive["smart_log"]["host_write_commands"] >= totals(work)["write"][0]
    # ~0.5 s of I/O spans no GC cycle: no WAF is the drive's (docs/models.md, "Measuring WAF")
    assert drive["waf_verdict"] == "insufficient" and drive["waf"] is None and drive["waf_gc_cycles"] < 1
    # The trace's pacing: ~0.5 s of I/O at ~4,000 IOPS (Tencent's timestamps are whole
    # seconds: its I/Os all come at once).
    if fmt != "tencent":
        assert doc["jobs"][0]["job_runtime"] >= 0.9 * work["time"][-1] / 1e6


def test_one_volume_the_first_ios_and_the_image_changes(tmp_path: Path, fresh: Path, work: dict[str, np.ndarray]) -> None:
    trace = tf.write_alibaba(tmp_path / "t.csv", work)
    only = replay(fresh, trace, "--volume", "1", "--scratch")
    assert job_totals(only) == totals(work, work["volume"] == 1)
    before = image_digest(fresh)
    first = replay(fresh, trace, "--max-ios", "100", "--scratch")
    assert job_totals(first) == totals(work, np.arange(len(work["time"])) < 100)
    assert image_digest(fresh) == before, "--scratch leaves the image as it was"
    replay(fresh, trace, "--max-ios", "100")
    assert image_digest(fresh) != before, "a replay changes the image as a real drive changes"
    again = replay(fresh, trace, "--max-ios", "100", "--scratch")
    assert again["replay"]["drive"]["smart_log"]["host_write_commands"] == 2 * first["replay"]["drive"]["smart_log"]["host_write_commands"]


def test_offsets_past_the_namespace_are_refused_folded_or_scaled(tmp_path: Path, fresh: Path) -> None:
    w = tf.workload(200, seed=3, span_bytes=4 * NS_BYTES)
    trace = tf.write_msr(tmp_path / "big.csv", w)
    past = int(np.argmax(w["offset"] + w["length"] > NS_BYTES))
    r = replay(fresh, trace, "--scratch", check=False)
    assert r.returncode == 1 and len(r.stderr_lines) == 1, r.stderr
    assert r.stderr_lines[0].startswith(f"ssdtwin replay: error: {trace}:{past + 1}: offset="), r.stderr_lines[0]
    assert "past the end of the target (9386786816 bytes)" in r.stderr_lines[0]
    for flag in ("--wrap", "--fit"):
        doc = replay(fresh, trace, flag, "--scratch")
        assert job_totals(doc) == totals(w), flag
        assert doc["replay"]["moved_ios"] > 0
    r = run_cli("replay", fresh, trace, "--wrap", "--fit", check=False)
    assert r.returncode == 1 and "choose one" in r.stderr


def test_blktrace_and_fio_iolog_replay_like_ssdtwin_fio(tmp_path: Path, fresh: Path) -> None:
    bt = tf.write_blktrace(tmp_path / "t.blktrace", tf.block_trace(400, seed=4))
    doc = replay(fresh, bt, "--scratch")
    rep = doc["replay"]
    assert rep["format"] == "blktrace" and rep["trace_syncs"] > 0
    assert rep["iodepth"] > 1, "the depth fio probes from the trace"
    assert {d: doc["jobs"][0][d]["total_ios"] for d in DDIRS} == rep["trace_ios"]
    # The same trace through `ssdtwin fio` issues the same totals.
    job = tmp_path / "bt.fio"
    job.write_text(f"[r]\nioengine=libaio\nread_iolog={bt}\n")
    out = tmp_path / "fio.json"
    run_cli("fio", fresh, job, "--output-format=json", f"--output={out}", "--scratch")
    assert job_totals(json.loads(out.read_text())) == job_totals(doc)
    iolog = tmp_path / "t.log"
    iolog.write_text(
        "fio version 3 iolog\n0 /dev/sdb add\n0 /dev/sdb open\n10 /dev/sdb write 0 4096\n50 /dev/sdb read 0 8192\n60 /dev/sdb close\n"
    )
    doc = replay(fresh, iolog, "--scratch")
    assert doc["replay"]["format"] == "fio-iolog" and job_totals(doc)["read"] == (1, 8192)


BAD = {
    "a bad line": (b"0,R,0,4096,1\n0,W,4096,4096,2\n0,X,0,4096,3\n", [], r"{t}:3: opcode=X: not R or W"),
    "unknown format": (b"hello world\nthis is not a trace\n", [], r"{t}: unknown trace format: it starts with 'this is not a trace'"),
    "a named format that does not fit": (b"0,R,0,4096,1\n", ["--format", "msr"], r"{t}:1: expected 7 fields"),
    "a truncated blktrace record": (
        tf.blktrace_bytes(tf.block_trace(5, seed=1))[:-20],
        [],
        r"{t}: record 15 \(byte 720\): truncated: the file ends 28 bytes into a 48-byte record",
    ),
    "no I/O": (b"device_id,opcode,offset,length,timestamp\n", ["--format", "alibaba"], r"{t}: no I/O to replay \(alibaba trace\)"),
    # It was "unknown trace format: it starts with binary data".
    "an empty file": (b"", [], r"{t}: an empty file: no I/O to replay"),
    # The gap times 1e300 saturated at u64::MAX ("never"): the second I/O was dropped without a word, exit 0.
    "a time scale past the run limit": (
        b"0,R,0,4096,1\n0,W,4096,4096,2\n",
        ["--time-scale", "1e300"],
        r"{t}: --time-scale 1e\+300: the trace's gaps add up to more than 2.135e\+05 days of drive time, past the 200 days",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_traces_are_one_line_and_leave_the_image_untouched(tmp_path: Path, fresh: Path, case: str) -> None:
    import re

    content, args, pattern = BAD[case]
    trace = tmp_path / "t.trace"
    trace.write_bytes(content)
    before = image_digest(fresh)
    r = replay(fresh, trace, *args, check=False)
    assert r.returncode == 1, r.stderr
    assert len(r.stderr_lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout == ""
    assert r.stderr_lines[0].startswith("ssdtwin replay: error: ")
    assert re.search(pattern.format(t=re.escape(str(trace))), r.stderr_lines[0]), r.stderr_lines[0]
    assert image_digest(fresh) == before


def test_skip_bad_counts_the_lines_it_skips(tmp_path: Path, fresh: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("0,R,0,4096,1\n0,W,4096,4096,2\n0,X,0,4096,3\ngarbage\n0,W,8192,4096,4\n")
    r = run_cli("replay", fresh, trace, "-o", "json", "--skip-bad", "--format", "alibaba", "--scratch")
    assert job_totals(r.json())["write"] == (2, 8192) and r.json()["replay"]["skipped_lines"] == 2
    notes = [line for line in r.stderr_lines if "skipped" in line]
    assert notes == [f"ssdtwin replay: skipped 2 bad line(s), the first: {trace}:3: opcode=X: not R or W"]


def test_options_are_checked_before_the_trace_is_read(tmp_path: Path, fresh: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("0,R,0,4096,1\n")
    for args, message in (
        (["--format", "parquet"], "--format parquet: one of auto, blktrace, msr, alibaba, tencent, fio-iolog"),
        (["--time-scale", "-1"], "--time-scale -1.0: a factor of 0 (no waits) or more"),
        (["--namespace", "7"], "--namespace 7: not an attached namespace (attached: 1)"),
        (["--volume", "3", "--format", "blktrace"], "a volume filter applies to the CSV formats"),
    ):
        r = run_cli("replay", fresh, trace, *args, check=False)
        assert r.returncode == 1 and len(r.stderr_lines) == 1 and message in r.stderr, (args, r.stderr)
    # A count past 64 bits is the parser's range error, not the core's OverflowError.
    r = run_cli("replay", fresh, trace, "--max-ios", str(1 << 64), check=False)
    assert r.returncode == 2 and len(r.stderr_lines) == 1 and "'--max-ios'" in r.stderr and "Overflow" not in r.stderr, r.stderr
    r = run_cli("replay", fresh, tmp_path / "nothere.csv", check=False)
    assert r.returncode == 1 and r.stderr_lines == [f"ssdtwin replay: error: {tmp_path / 'nothere.csv'}: no such trace file"]


@pytest.mark.parametrize(
    ("fmt", "lines"),
    [
        # Times made relative to the trace's start: the first line is at 0, the next 1 s on.
        ("alibaba", "0,R,0,4096,0\n0,W,4096,4096,1000000\n0,W,8192,4096,2000000\n"),
        ("tencent", "0,0,8,0,1\n1,8,8,1,1\n2,16,8,1,1\n"),
        ("msr", "0,h,0,Read,0,4096,1\n10000000,h,0,Write,4096,4096,1\n20000000,h,0,Write,8192,4096,1\n"),
    ],
)
def test_a_trace_whose_times_start_at_zero_keeps_its_first_gap(tmp_path: Path, fresh: Path, fmt: str, lines: str) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(lines)
    doc = replay(fresh, trace, "--scratch", "--format", fmt)
    assert doc["replay"]["trace_span_ns"] == 2_000_000_000, "two gaps of 1 s"
    assert doc["jobs"][0]["job_runtime"] == 2000


def test_a_version_2_trace_timed_by_its_waits_spans_them(tmp_path: Path, fresh: Path) -> None:
    """A version 2 iolog has no timestamps; its waits time it (milliseconds since the start).
    trace_span_ns summed the lines' delays only and said 0 for a replay of 1.5 s; and a
    trace of waits alone was refused ("no I/O to replay") where fio runs its waits."""
    trace = tmp_path / "t.log"
    trace.write_text("fio version 2 iolog\nf add\nf open\nf write 0 4096\nf wait 1500 0\nf close\n")
    doc = replay(fresh, trace, "--scratch")
    assert (doc["replay"]["trace_span_ns"], doc["jobs"][0]["job_runtime"]) == (1_500_000_000, 1500)
    trace.write_text("fio version 2 iolog\nf add\nf open\nf wait 1500 0\nf close\n")
    doc = replay(fresh, trace, "--scratch")
    assert (doc["replay"]["trace_span_ns"], doc["jobs"][0]["job_runtime"]) == (1_500_000_000, 1500)
    assert doc["replay"]["trace_ios"] == {"read": 0, "write": 0, "trim": 0}


def test_a_flush_after_the_last_io_holds_the_replay_as_in_fio(tmp_path: Path, fresh: Path) -> None:
    """fio waits a blktrace's trailing flush before the job ends (fio 3.33 --ioengine=null
    on this trace: job_runtime 303 ms); the replay ended with its last write (2 ms)."""
    q = tf.TC_QUEUE | tf.TA_QUEUE
    r = tf.records(
        np.array([1000, 2_000_000, 302_000_000]),
        np.array([0, 8, 0]),
        np.array([4096, 4096, 0]),
        np.array([tf.TC_WRITE | q, tf.TC_WRITE | q, tf.TC_WRITE | tf.TC_FLUSH | tf.TC_SYNC | q]),
    )
    doc = replay(fresh, tf.write_blktrace(tmp_path / "f.blktrace", r), "--scratch")
    assert doc["replay"]["trace_span_ns"] == 301_999_000 and doc["replay"]["trace_syncs"] == 1
    job = doc["jobs"][0]
    assert job["job_runtime"] == 301
    assert job["write"]["runtime"] in (301, 302), "the direction's runtime spans the whole replay (fio: 303)"
    assert job["write"]["bw_bytes"] == 8192 * 1000 // job["write"]["runtime"]


def test_a_volume_the_trace_does_not_hold_is_named_with_the_volumes_it_does(tmp_path: Path, fresh: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("0,h,0,Read,0,4096,1\n1,h,1,Write,4096,4096,1\n2,web,0,Write,8192,4096,1\n")
    before = image_digest(fresh)
    r = run_cli("replay", fresh, trace, "--volume", "h_7", "--max-ios", "1", check=False)
    assert r.returncode == 1
    why = "--volume h_7: no I/O of that volume in the trace (its volumes: h_0, h_1, web_0)"
    assert r.stderr_lines == [f"ssdtwin replay: error: {trace}: {why}"]
    assert image_digest(fresh) == before


def test_fit_counts_the_ios_it_moves_where_the_replay_puts_them(tmp_path: Path, fresh: Path) -> None:
    # Scaled by 9,386,786,816 / 20,000,004,096: the write at 20 GB lands 4 KiB short of the
    # end (past it, so moved back), the read at 5 GB (inside the namespace) near 2.35 GB, the
    # write at byte 100 on LBA 0 (where it was, grown to whole LBAs): two moved, one realigned.
    trace = tmp_path / "t.csv"
    trace.write_text("0,W,20000000000,4096,0\n0,W,100,1000,1\n0,R,5000000000,8192,2\n")
    rep = replay(fresh, trace, "--fit", "--scratch")["replay"]
    assert (rep["moved_ios"], rep["realigned_ios"], rep["trace_end_bytes"]) == (2, 1, 20_000_004_096)


def test_a_byte_order_mark_before_the_first_line_is_passed_over(tmp_path: Path, fresh: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_bytes(b"\xef\xbb\xbf0,R,0,4096,1\r\n0,W,4096,8192,2\r\n")
    doc = replay(fresh, trace, "--scratch")
    assert doc["replay"]["format"] == "alibaba"
    assert job_totals(doc) == {"read": (1, 4096), "write": (1, 8192), "trim": (0, 0)}


def test_a_trace_of_only_bad_lines_says_so_with_skip_bad(tmp_path: Path, fresh: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("0,X,0,4096,1\n0,R,0,0,2\n")
    r = run_cli("replay", fresh, trace, "--skip-bad", "--format", "alibaba", check=False)
    why = f"no I/O to replay (alibaba trace): --skip-bad skipped its 2 bad line(s), the first: {trace}:1: opcode=X: not R or W"
    assert r.returncode == 1 and r.stderr_lines == [f"ssdtwin replay: error: {trace}: {why}"]


def test_a_time_scale_past_the_longest_run_is_refused_naming_the_option(tmp_path: Path, fresh: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("0,R,0,4096,0\n0,W,4096,4096,1000000\n")  # one gap of 1 s
    before = image_digest(fresh)
    r = run_cli("replay", fresh, trace, "--time-scale", "2e7", check=False)  # 231.5 days
    why = "--time-scale 20000000.0: the trace's gaps add up to 231.5 days of drive time, past the 200 days a run may simulate"
    assert r.returncode == 1 and len(r.stderr_lines) == 1 and f"ssdtwin replay: error: {trace}: {why}" in r.stderr
    assert image_digest(fresh) == before


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        # Read as a namespace that is not there: "--namespace 1: not an attached namespace (attached: 1)".
        ("namespace", "1", "Options.namespace '1': must be an int, not str"),
        # "iodepth=True: not a size", from the fio job the replay runs as.
        ("iodepth", True, "Options.iodepth True: must be an int or None, not bool"),
        # "'>=' not supported between instances of 'str' and 'int'".
        ("time_scale", "0.5", "Options.time_scale '0.5': must be a number, not str"),
        # The binding's conversion: "trace plan: TypeError: 'float' object cannot be interpreted as an integer".
        ("max_ios", 1.5, "Options.max_ios 1.5: must be an int or None, not float"),
    ],
)
def test_options_of_the_wrong_type_are_named_before_the_drive_is_touched(tmp_path: Path, option: str, value: Any, message: str) -> None:
    from ssdtwin import Drive
    from ssdtwin import replay as rp

    trace = tmp_path / "t.csv"
    trace.write_text("".join(f"{128166372000000000 + i * 1000},h,0,Write,{i * 4096},4096,100\n" for i in range(8)))
    d = Drive.in_memory("kioxia-cm6-r-3.84t", scale=454)
    before = d.vendor_log()
    with pytest.raises(TypeError) as e:
        rp.replay(d, trace, rp.Options(**{option: value}))
    assert str(e.value) == message
    assert d.vendor_log() == before
    d.check()


def test_numpy_numbers_are_options_of_their_kind() -> None:
    from ssdtwin import replay as rp

    rp.check(rp.Options(namespace=np.int64(1), time_scale=np.float32(0.5), max_ios=np.uint32(8), iodepth=np.int16(4)))  # type: ignore[arg-type]
