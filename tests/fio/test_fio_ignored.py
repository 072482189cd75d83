"""Options with no effect on a simulated drive (docs/fio.md §2.6): accepted, checked like
fio checks them, echoed like fio, and listed as ignored (Run.ignored, the CLI's notes on
stderr, the JSON's "ssdtwin" object); options that act only at their "off" value are
refused otherwise, with the reason; filesize= is simulated as fio's target size.
Every error of a run is printed, one per line (§2.9)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_fio_bad_input import EXTREMES

from ssdtwin.fio import FioJobError, parse, parse_string
from ssdtwin.fio import limits as L
from ssdtwin.fio import options as O
from ssdtwin.fio.engine import _file_size, engine_input
from twin import CM6, image_digest, run_cli

GiB = 1 << 30


def one_job(body: str, engine: str = "libaio") -> Any:
    return parse_string(f"[j]\nioengine={engine}\nrw=randread\nsize=1m\n{body}\n", name="t.fio", env={})


def refusal(body: str, engine: str = "libaio") -> FioJobError:
    with pytest.raises(FioJobError) as info:
        one_job(body, engine)
    return info.value


# (line, engine): every option of fio 3.33 that is ignored (docs/fio.md §2.6), at a value fio accepts.
IGNORED = [
    ("gtod_reduce=1", "libaio"),
    ("disable_lat=1", "libaio"),
    ("disable_bw=1", "libaio"),
    ("directory=/tmp", "libaio"),
    ("io_submit_mode=offload", "libaio"),
    ("log_prio=1", "libaio"),
    ("dedupe_mode=working_set", "libaio"),
    ("dedupe_working_set_percentage=20", "libaio"),
    ("dedupe_global=1", "libaio"),
    ("do_verify=0", "libaio"),
    ("do_verify=1", "libaio"),
    ("verify_interval=512", "libaio"),
    ("verify_backlog=1k", "libaio"),
    ("verifysort=1", "libaio"),
    ("file_append=1", "libaio"),
    ("fallocate=keep", "libaio"),
    ("file_service_type=zipf:1.2", "libaio"),
    ("atomic=1", "libaio"),
    ("exitall_on_error", "libaio"),
    ("continue_on_error=all", "libaio"),
    ("ignore_error=EIO", "libaio"),
    ("write_hint=short", "libaio"),
    ("log_compression=1m", "libaio"),
    ("threads=4", "libaio"),
    ("test-duration=10s", "libaio"),
    ("prep", "libaio"),
    ("fsync=0", "libaio"),
    ("sync=none", "libaio"),
    ("nrfiles=1", "libaio"),
    ("rw_sequencer=sequential", "libaio"),
    ("max_latency=0", "libaio"),
    ("stats=1", "libaio"),
    ("unit_base=8", "libaio"),
    ("cmdprio_percentage=10,20", "libaio"),
    ("cmdprio_class=1", "io_uring"),
    ("cmdprio=3", "io_uring_cmd"),
    ("cmdprio_bssplit=4k/50:8k/50,16k/100", "libaio"),
    ("cmdprio_bssplit=4k/50/1/3/2:8k/50/2/0,16k/", "io_uring"),
    ("mem=mmaphuge:/hugetlbfs/f", "libaio"),
]


@pytest.mark.parametrize("line,engine", IGNORED, ids=[i[0] for i in IGNORED])
def test_ignored_option_is_echoed_and_listed(line: str, engine: str) -> None:
    run = one_job(line, engine)
    written, _, value = line.partition("=")
    canonical = O.lookup(written) or O.lookup_engine_option(written)
    assert canonical is not None
    job = run.jobs[0]
    assert (canonical.name, value or None) in job.options  # echoed as written, canonical name
    (entry,) = [e for e in run.ignored if e["option"] == canonical.name]
    assert entry["job"] == "j" and entry["value"] == (value or None) and (entry["file"], entry["line"]) == ("t.fio", 5)
    assert entry["reason"] and entry["reason"] == O.ignored_reason(canonical.name)


def test_every_accepted_option_without_an_effect_is_listed() -> None:
    body = "direct=1\nthread\nbuffer_pattern=0xdeadbeef\ncpus_allowed=0-3\nhipri\n"
    run = parse_string("[global]\nioengine=io_uring\ngtod_reduce=1\n[a]\n" + body + "[b]\nrw=write\n", name="g.fio", env={})
    listed = [(e["job"], e["option"], e["line"]) for e in run.ignored]
    assert listed == [
        ("a", "gtod_reduce", 3),
        ("a", "direct", 5),
        ("a", "thread", 6),
        ("a", "buffer_pattern", 7),
        ("a", "cpus_allowed", 8),
        ("a", "hipri", 9),
        ("b", "gtod_reduce", 3),  # inherited from [global]: listed for every job under it
    ]
    assert all(e["reason"] and e["reason"] != "no effect on a simulated drive" for e in run.ignored)
    # Simulated options are never listed.
    assert not one_job("bs=8k\niodepth=4\nfilesize=1m\n").ignored


OUT_OF_RANGE = [
    ("nice=30", "max value out of range: 30 (19 max)"),
    ("nice=-21", "min value out of range: -21 (-20 min)"),
    ("prio=8", "max value out of range: 8 (7 max)"),
    ("io_submit_mode=bad", "not one of inline, offload"),
    ("dedupe_working_set_percentage=101", "max value out of range: 101 (100 max)"),
    ("verify_interval=79", "min value out of range: 79 (80 min)"),
    ("log_compression=1000", "min value out of range: 1000 (1024 min)"),
    ("gtod_reduce=2", "max value out of range: 2 (1 max)"),
    ("file_service_type=bogus", "not one of random, zipf"),
    ("cmdprio_class=4", "max value out of range: 4 (3 max)"),
    ("cmdprio_bssplit=garbage", "not a size"),
    ("cmdprio_bssplit=4k/50/1", "'4k/50/1' is not bs[/percentage[/class/level[/hint]]]"),
    ("cmdprio_bssplit=4k/50/1/3/2/9", "'4k/50/1/3/2/9' is not bs[/percentage[/class/level[/hint]]]"),
    ("threads", "requires a value"),
    ("filesize=0", "min value out of range: 0 (1 min)"),
    ("log_entries=1048577", "max value out of range: 1048577 (1048576 max)"),
    ("verify_offset=39", "min value out of range: 39 (40 min)"),
    ("cmdprio_class=0", "min value out of range: 0 (1 min)"),
]


@pytest.mark.parametrize("line,message", OUT_OF_RANGE, ids=[o[0] for o in OUT_OF_RANGE])
def test_values_are_checked_like_fio(line: str, message: str) -> None:
    e = refusal(line)
    assert message in e.reason and (e.file, e.line) == ("t.fio", 5), str(e)


OFF_ONLY = [
    ("fsync=32", "flushes and FUA writes are not part of the engine contract yet"),
    ("end_fsync=1", "flushes and FUA writes"),
    ("sync=dsync", "flushes and FUA writes"),
    ("nrfiles=4", "one target per job"),
    ("pre_read=1", "page cache"),
    ("create_only=1", "do no I/O"),
    ("verify_only", "verification is not simulated"),
    ("rw_sequencer=identical", "repeating one offset"),
    ("bs_is_seq_rand=1", "sequential/random"),
    ("max_latency=10ms", "fio ends a job"),
    ("trim_percentage=10", "verify's trim phase"),
    ("stats=0", "always collects statistics"),
    ("log_unix_epoch=1", "wall-clock"),
    ("unit_base=1", "bit-based"),
]


@pytest.mark.parametrize("line,why", OFF_ONLY, ids=[o[0] for o in OFF_ONLY])
def test_off_only_options_refuse_other_values_with_the_reason(line: str, why: str) -> None:
    e = refusal(line)
    assert e.reason.startswith("not supported by ssdtwin: ") and why in e.reason, str(e)


REFUSED = [
    ("opendir=/mnt", "directory tree"),
    ("profile=tiobench", "built-in profiles"),
    ("exec_prerun=/bin/true", "host commands"),
    ("percentage_sequential=50", "deprecated: fio 3.33 refuses it too"),
    ("max_open_zones=8", "zonemode=zbd"),
    ("verify=md5", "data verification is not simulated"),
    ("sync_file_range=write", "flushes"),
]


@pytest.mark.parametrize("line,why", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_options_say_why(line: str, why: str) -> None:
    assert why in refusal(line).reason


# Refused with the generic reason: flow_watermark (deprecated in fio, ignored by fio's own
# flow control since 2012).
PENDING = {"flow_watermark"}


def test_every_fio_option_is_simulated_ignored_or_refused_with_a_reason() -> None:
    """docs/fio.md §2.6 sorts every option of fio 3.33 (options.c, the cmdprio engine
    options, the tiobench/act profile options) into these kinds."""
    kinds: dict[str, set[str]] = {"simulated": set(), "ignored": set(), "off-only": set(), "refused": set(), "generic": set()}
    for name in sorted(O.FIO_OPTION_NAMES | O.FIO_ENGINE_OPTION_NAMES):
        d = O.lookup(name) or O.lookup_engine_option(name)
        if d is None:
            kinds["generic" if O.unsupported_reason(name) == "not supported by ssdtwin" else "refused"].add(name)
        elif d.kind == O.SIM:
            kinds["simulated"].add(name)
        else:
            kinds["off-only" if d.name in O.OFF_ONLY_REASONS else "ignored"].add(name)
            assert O.ignored_reason(d.name) != "no effect on a simulated drive", name
    assert kinds["generic"] <= PENDING, kinds["generic"] - PENDING
    assert {"verify", "opendir", "profile", "exec_prerun"} <= kinds["refused"]
    assert {"gtod_reduce", "directory", "io_submit_mode", "cmdprio", "log_prio", "dedupe_mode", "do_verify"} <= kinds["ignored"]
    assert {"fsync", "sync", "nrfiles", "nr_files"} <= kinds["off-only"] and "filesize" in kinds["simulated"]


def test_threads_is_fios_tiobench_option_not_an_alias_of_thread() -> None:
    # fio 3.33 registers the tiobench profile's "threads" (an integer) for every job;
    # it does not turn processes into threads.
    run = one_job("threads=8")
    assert run.jobs[0].state["noop"] == {"threads": "8"}
    assert "Starting 1 process" in run.header_text()


def test_cmdprio_needs_an_engine_that_has_it() -> None:
    assert "only valid with ioengine=libaio/io_uring/io_uring_cmd" in refusal("cmdprio=1", engine="psync").reason
    # fio 3.33 has no cmdprio_hint (added in 3.35): an unknown option.
    assert refusal("cmdprio_hint=1").reason.startswith("unknown option")


def test_directory_completes_a_relative_device_name() -> None:
    assert one_job("directory=/dev\nfilename=nvme0n2").jobs[0].state["namespace"] == 2
    assert one_job("directory=/dev/\nfilename=ng1n3").jobs[0].state["namespace"] == 3
    assert one_job("directory=/mnt\nfilename=ns4").jobs[0].state["namespace"] == 4  # nsN stays a namespace
    assert one_job("directory=/mnt\nfilename=data").jobs[0].state["namespace"] is None


# --- filesize: the target's size (filesetup.c setup_files) ----------------------------------


def region(body: str, target_bytes: int = GiB, numjobs_index: int = 0) -> tuple[int, int, int]:
    run = parse_string(f"[j]\nioengine=null\nrw=write\nbs=4k\n{body}\n", env={})
    spec = engine_input(run.clones[numjobs_index], target_bytes, 512)
    return spec["offset_bytes"], spec["size_bytes"], spec["io_size_bytes"]


def test_filesize_sets_the_region_and_size_the_amount() -> None:
    assert region("filesize=1m") == (0, 1 << 20, 1 << 20)
    assert region("filesize=1m\nsize=256k") == (0, 1 << 20, 256 << 10)  # random offsets over 1m, 256k moved
    assert region("filesize=1m\nsize=4m") == (0, 1 << 20, 1 << 20)
    assert region("filesize=2m\noffset=512k\nsize=50%") == (512 << 10, 1 << 20, 1 << 20)
    assert region("filesize=2m\nio_size=3m") == (0, 2 << 20, 3 << 20)
    # A target whose size is inside the range keeps its size.
    assert region("filesize=512m-2g") == (0, GiB, GiB)


def test_filesize_past_the_target_or_below_the_offset_is_refused() -> None:
    # The error names filesize= and its line (it named the section's line and no option:
    # fio's t/jobs/t0030.fio, filesize=1T, on a smaller namespace).
    run = parse_string("[j]\nrw=write\nfilesize=2g\n", name="f.fio", env={})
    with pytest.raises(FioJobError, match="runs past the end of the target") as info:
        run.to_engine(GiB, 512)
    assert (info.value.line, info.value.option) == (3, "filesize"), info.value
    assert str(info.value).startswith("f.fio:3: filesize=2g: the I/O region [0, 2147483648)"), info.value
    run = parse_string("[j]\nrw=write\nfilesize=1m\noffset=2m\n", name="f.fio", env={})
    with pytest.raises(FioJobError, match="offset 2097152 is beyond filesize 1048576"):
        run.to_engine(GiB, 512)


FILESIZE_JOBS = {
    "a": "filesize=1m",
    "b": "filesize=1m\nsize=256k",
    "c": "filesize=1m-3m\nnumjobs=3",
    "d": "filesize=1m-3m\nrandom_generator=tausworthe64",
    "e": "filesize=2m\noffset=512k\nsize=50%",
    "f": "filesize=2m\nio_size=3m",
    "g": "filesize=1m-3m\nbs=8k\nloops=2",
}


@pytest.mark.tools
def test_filesize_moves_the_bytes_fio_moves(fio_binary: str, tmp_path: Path) -> None:
    """Against fio 3.33 with the null engine. Each job's file does not exist, so its size
    (0) is outside every filesize range and fio uses filesize, drawing a range from the
    thread's file_size stream; we resolve the same jobs against a target of size 0."""
    text = "[global]\nioengine=null\nrw=write\nbs=4k\n"
    text += "".join(f"[{name}]\nfilename={tmp_path}/{name}.dat\n{body}\n" for name, body in FILESIZE_JOBS.items())
    (tmp_path / "fs.fio").write_text(text)
    proc = subprocess.run([fio_binary, "--output-format=json", "fs.fio"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    real = [j["write"]["io_bytes"] for j in json.loads(proc.stdout)["jobs"]]
    run = parse(tmp_path / "fs.fio", env={})
    assert [_bytes_of(c) for c in run.clones] == real
    assert len(set(real[2:5])) == 3  # the three clones of c drew three sizes


def _bytes_of(clone: Any) -> int:
    """What fio moves for a clone on a target of size 0: the filesize region's amount."""
    st = clone.job.state
    size = _file_size(st, clone, 0, min(st["bs"]))
    assert size is not None
    spec = engine_input(clone, 8 * GiB, 512)  # a target big enough; the region is filesize's
    assert spec["offset_bytes"] + spec["size_bytes"] <= size  # size=P% takes a part of it
    return int(spec["io_size_bytes"] * spec["loops"])


# --- the CLI: notes on stderr, JSON, every error one per line ------------------------------


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Any:
    d = tmp_path_factory.mktemp("ignored") / "cm6"
    run_cli("create", d, "--model", CM6, "--scale", "1/454")
    yield d
    run_cli("check", d)


def test_cli_lists_ignored_options_on_stderr_and_in_json(image: Path, tmp_path: Path) -> None:
    job = tmp_path / "j.fio"
    job.write_text(
        "[global]\nioengine=libaio\ndirect=1\n[a]\nrw=randread\nsize=1m\ngtod_reduce=1\ncmdprio_percentage=10\n[b]\nrw=write\nsize=1m\n"
    )
    r = run_cli("fio", image, job, "--scratch", "--output-format=json")
    notes = [line for line in r.stderr_lines if ": note: " in line]
    assert notes == [
        f"ssdtwin fio: note: {job}:3: direct=1: ignored: {O.ignored_reason('direct')}",
        f"ssdtwin fio: note: {job}:7: gtod_reduce=1: ignored: {O.ignored_reason('gtod_reduce')}",
        f"ssdtwin fio: note: {job}:8: cmdprio_percentage=10: ignored: {O.ignored_reason('cmdprio_percentage')}",
    ]
    doc = json.loads(r.stdout)
    assert list(doc)[-2:] == ["jobs", "ssdtwin"]  # fio's keys first, untouched
    assert [(e["job"], e["option"], e["value"]) for e in doc["ssdtwin"]["ignored_options"]] == [
        ("a", "direct", "1"),
        ("a", "gtod_reduce", "1"),
        ("a", "cmdprio_percentage", "10"),
        ("b", "direct", "1"),
    ]
    assert doc["jobs"][0]["job options"]["gtod_reduce"] == "1"


def test_cli_prints_every_error_one_per_line(image: Path, tmp_path: Path) -> None:
    job = tmp_path / "bad.fio"
    job.write_text("[a]\nrw=randread\nnice=30\nbs=4q\n[b]\nfsync=8\ncmdprio=1\n")
    before = image_digest(image)
    r = run_cli("fio", image, job, "--output", tmp_path / "out.json", check=False)
    assert r.returncode == 1 and r.stdout == "" and not (tmp_path / "out.json").exists()
    assert r.stderr_lines == [
        f"ssdtwin fio: error: {job}:3: nice=30: max value out of range: 30 (19 max)",
        f"ssdtwin fio: error: {job}:4: bs=4q: not a size: unknown size suffix 'q'",
        f"ssdtwin fio: error: {job}:6: fsync=8: not supported by ssdtwin: flushes and FUA writes are not part of the engine contract yet",
        f"ssdtwin fio: error: {job}:7: cmdprio=1: only valid with ioengine=libaio/io_uring/io_uring_cmd (this job uses psync)",
    ]
    assert image_digest(image) == before


def test_cli_caps_the_error_lines(image: Path, tmp_path: Path) -> None:
    n = L.MAX_ERROR_LINES + 7
    job = tmp_path / "many.fio"
    job.write_text("[a]\n" + "".join(f"bogus{i}=1\n" for i in range(n)))
    a, b = tmp_path / "missing1.fio", tmp_path / "missing2.fio"
    r = run_cli("fio", image, job, check=False)
    assert r.returncode == 1 and len(r.stderr_lines) == L.MAX_ERROR_LINES + 1
    assert r.stderr_lines[0] == f"ssdtwin fio: error: {job}:2: bogus0=1: unknown option"
    assert r.stderr_lines[-1] == f"ssdtwin fio: error: ... and 7 more errors (the first {L.MAX_ERROR_LINES} are shown)"
    # Job files that cannot be read: every one is named.
    r = run_cli("fio", image, a, b, check=False)
    assert r.returncode == 1 and r.stderr_lines == [f"ssdtwin fio: error: {p}: no such job file" for p in (a, b)]


def test_str_of_the_exception_stays_one_line() -> None:
    with pytest.raises(FioJobError) as info:
        parse_string("[a]\nbs=4q\nnice=30\n[b]\nbogus=1\n", name="e.fio", env={})
    e = info.value
    assert str(e) == "e.fio:2: bs=4q: not a size: unknown size suffix 'q' (and 2 more errors)"
    assert e.lines() == [
        "e.fio:2: bs=4q: not a size: unknown size suffix 'q'",
        "e.fio:3: nice=30: max value out of range: 30 (19 max)",
        "e.fio:5: bogus=1: unknown option (did you mean bs?)",
    ]
    assert e.lines(limit=1) == [e.lines()[0], "... and 2 more errors (the first 1 are shown)"]


@pytest.mark.tools
def test_fio_accepts_what_we_accept_and_refuses_the_values_we_refuse(fio_binary: str, tmp_path: Path) -> None:
    """fio 3.33 --parse-only on the same lines: every ignored option and every off-only
    option at any value parses; every out-of-range value fails (cmdprio_bssplit fails
    only when the engine starts, so a parse-only run cannot show it)."""

    def section(i: int, line: str, engine: str) -> str:
        return f"[j{i}]\nioengine={engine}\nrw=randread\nsize=1m\nfilename={tmp_path}/c.dat\n{line}\n"

    def fio_parses(text: str) -> bool:
        (tmp_path / "c.fio").write_text(text)
        return subprocess.run([fio_binary, "--parse-only", "c.fio"], cwd=tmp_path, capture_output=True, timeout=60).returncode == 0

    def fio_accepts(line: str, engine: str) -> bool:
        return fio_parses(section(0, line, engine))

    def one_file(lines: list[tuple[str, str]]) -> str:
        return "".join(section(i, line, engine) for i, (line, engine) in enumerate(lines))

    def fio_refuses(lines: list[tuple[str, str]]) -> list[str]:
        """The lines fio refuses. One fio start for all (a job section each: fio parses every
        section's options and fails on the first it refuses; a start is ~0.07 s of CPU, most
        of it fio's clock calibration); only when it refuses, each line alone, to name them."""
        return [] if fio_parses(one_file(lines)) else [line for line, engine in lines if not fio_accepts(line, engine)]

    accepted = [*IGNORED, *((line, "libaio") for line, _ in OFF_ONLY)]
    # The one-file form fails when one of its sections holds a value fio refuses, wherever it is.
    bad = ("nice=30", "libaio")
    assert not fio_parses(one_file([bad, *accepted])) and not fio_parses(one_file([*accepted, bad]))
    assert fio_refuses(accepted) == []
    assert [line for line, _ in OUT_OF_RANGE if fio_accepts(line, "libaio")] == [
        "cmdprio_bssplit=garbage",
        "cmdprio_bssplit=4k/50/1",
        "cmdprio_bssplit=4k/50/1/3/2/9",
    ]


NOT_SIMULATED = sorted({d.name for d in O.OPTIONS.values() if d.kind == O.NOOP} | set(O.ENGINE_OPTIONS) | {"filesize"})


@pytest.mark.parametrize("name", NOT_SIMULATED)
def test_extreme_values_of_accepted_options_are_one_line_errors_or_accepted(name: str) -> None:
    for value in [*EXTREMES, "1" * 5000, "zipf:1e999", "mmap:", "4k/50/1/2/3"]:
        try:
            one_job(f"{name}={value}")
        except FioJobError as e:
            assert "\n" not in str(e) and str(e).startswith("t.fio:5: "), str(e)
