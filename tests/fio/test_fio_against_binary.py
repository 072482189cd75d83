"""Checks against the real fio binary (skipped when fio is not installed).

They keep the claims of docs/fio.md honest: the same job files must give the same
option echo (``--showcmd``), the same parsed numbers (``--debug=parse``), the same header
lines, the same accept/refuse decisions where we agree with fio, and the same I/O regions.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import DATA, REFERENCE
from ssdtwin.fio import FioJobError, parse, parse_string

pytestmark = pytest.mark.tools


def _fio(fio: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([fio, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


SHOWCMD_FILES = {
    "globals.fio": (
        "[global]\nioengine=null\nsize=1m\nfilename=/dev/null\n[a]\ntime_based\nruntime=2\n"
        "[global]\nbs=128k\nstonewall\n[b]\n[c]\nrw=write\n"
    ),
    "aliases.fio": (
        "[globalx]\nioengine=null\nfilename=/dev/null\nsize=1m\nreadwrite=randread\n[a]\nblocksize=8k\n"
        "io_limit=512k\nbs=16k\nblockalign=4k\ntimeout=1\ntime_based\ngroup_reporting\nnew_group=1\n"
    ),
    "prio.fio": (
        "[a]\nfilename=/dev/null\nsize=4k\nioengine=null\nkb_base=1000\nbs=4k\ndescription=hello world\nname=renamed\n"
        "[b]\nioengine=io_uring\nfilename=/dev/null\nhipri\nbs=4k,8k,\nrate=1m,\nrandom_distribution=zoned:50/5:50/95\n"
    ),
    "many.fio": (
        "[global]\nioengine=libaio\ndirect=1\nfilename=/dev/null\nsize=64m\n"
        "[x]\nrw=randrw:4\nrwmixwrite=30\nbssplit=4k/50:64k/50,8k\nnumjobs=3\noffset_increment=1m\niodepth=16\n"
        "norandommap\nrandrepeat=0\nrandseed=7\nramp_time=1\nstartdelay=1-2\nthinktime=10\nthinktime_blocks=4\n"
        "percentile_list=50:99\nwrite_bw_log\nwrite_lat_log=L\nlog_avg_msec=100\nper_job_logs=0\nlog_offset=1\n"
        "[y]\nstonewall\nrw=write\nbsrange=4k-64k\nloops=2\nio_size=2m\nnumber_ios=10\n"
        "random_distribution=pareto:0.3\npercentage_random=50\nrate_iops=100,200\nrate_process=poisson\n"
    ),
}


@pytest.mark.parametrize("name", sorted(SHOWCMD_FILES))
def test_showcmd_matches_fio(fio_binary: str, tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text(SHOWCMD_FILES[name])
    real = _fio(fio_binary, "--showcmd", name, cwd=tmp_path).stdout
    assert parse(tmp_path / name, env={}).showcmd() == real


def test_showcmd_matches_fio_for_several_files_and_real_runs(fio_binary: str, tmp_path: Path) -> None:
    files = [DATA / "real" / "r1.fio", DATA / "real" / "r2.fio", DATA / "real" / "hl.fio"]
    real = _fio(fio_binary, "--showcmd", *map(str, files), cwd=tmp_path).stdout
    assert parse(files, env={}).showcmd() == real


def test_showcmd_matches_fio_for_the_reference_sample(fio_binary: str, tmp_path: Path) -> None:
    text = (REFERENCE / "fio-sample.fio").read_text()
    (tmp_path / "s.fio").write_text(text)
    assert parse(tmp_path / "s.fio", env={}).showcmd() == _fio(fio_binary, "--showcmd", "s.fio", cwd=tmp_path).stdout


def _fio_parsed(fio: str, tmp_path: Path, line: str) -> list[int]:
    """The values fio's parser produced for one option line (``--debug=parse``)."""
    (tmp_path / "p.fio").write_text(f"[x]\nioengine=null\nfilename=/dev/null\n{line}\n")
    proc = _fio(fio, "--parse-only", "--debug=parse", "p.fio", cwd=tmp_path)
    name = line.split("=", 1)[0].strip()
    out = proc.stdout + proc.stderr
    values = []
    grab = False
    for text in out.splitlines():
        if f"__handle_option={name}," in text:
            grab = True
        elif grab and "ret=0, out=" in text:
            values.append(int(text.rsplit("out=", 1)[1]))
            grab = False
    return values


@pytest.mark.parametrize(
    "line,ours",
    [
        ("size=4k", lambda st: st["size"]),
        ("size=4KiB", lambda st: st["size"]),
        ("size=1MiB", lambda st: st["size"]),
        ("size=1mi", lambda st: st["size"]),
        ("size=0x10", lambda st: st["size"]),
        ("size=1g", lambda st: st["size"]),
        ("number_ios=1k", lambda st: st["number_ios"]),
        ("runtime=10", lambda st: st["runtime_us"]),
        ("runtime=1m", lambda st: st["runtime_us"]),
        ("runtime=500ms", lambda st: st["runtime_us"]),
        ("ramp_time=2h", lambda st: st["ramp_time_us"]),
        ("thinktime=10", lambda st: st["thinktime_us"]),
        ("thinktime=1s", lambda st: st["thinktime_us"]),
        ("iodepth=+3", lambda st: st["iodepth"]),
        ("size=+4k", lambda st: st["size"]),
        ("runtime=+3", lambda st: st["runtime_us"]),
    ],
)
def test_numbers_match_fio_debug_parse(fio_binary: str, tmp_path: Path, line: str, ours) -> None:
    # bs=1 keeps small sizes legal for our post-parse check (fio checks it later too)
    assert _fio_parsed(fio_binary, tmp_path, line) == [ours(parse_string("[x]\nbs=1\n" + line + "\n", env={}).jobs[0].state)]


@pytest.mark.parametrize("value", ["1-2", "2-3ms", "1-2m", "500ms-1s", "2us-3", "2:3ms", "7"])
def test_startdelay_ranges_match_fio(fio_binary: str, tmp_path: Path, value: str) -> None:
    # fio takes the low end's unit from the rest of the value: 2-3ms starts at 2 ms, not 2 s
    lo, hi = parse_string(f"[x]\nstartdelay={value}\n", env={}).jobs[0].state["startdelay_us"]
    assert _fio_parsed(fio_binary, tmp_path, f"startdelay={value}") == ([lo, hi] if lo != hi else [lo])


@pytest.mark.parametrize("value,fio_low", [("2s-3s", 2), ("1m-2m", 1), ("1h:2h", 1)])
def test_startdelay_low_ends_fio_misreads_are_refused(fio_binary: str, tmp_path: Path, value: str, fio_low: int) -> None:
    assert _fio_parsed(fio_binary, tmp_path, f"startdelay={value}")[0] == fio_low
    with pytest.raises(FioJobError, match="microseconds"):
        parse_string(f"[x]\nstartdelay={value}\n", env={})


def test_loops_0_is_one_pass_as_in_fio(fio_binary: str, tmp_path: Path) -> None:
    moved = {}
    for n in (0, 1):
        (tmp_path / "l.fio").write_text(f"[x]\nioengine=null\nfilename=/dev/null\nsize=1m\nrw=randread\nloops={n}\n")
        out = _fio(fio_binary, "--output-format=json", "l.fio", cwd=tmp_path).stdout
        moved[n] = json.loads(out[out.index("{") :])["jobs"][0]["read"]["io_bytes"]
    assert moved[0] == moved[1] == 1 << 20
    assert parse_string("[x]\nloops=0\n", env={}).jobs[0].state["loops"] == 1


@pytest.mark.parametrize("line,fio_write", [("bs=4k--8k", -8192), ("bs=4k,-8k", -8192), ("rate_iops=100--5", -5)])
def test_negative_fields_fio_reads_are_refused(fio_binary: str, tmp_path: Path, line: str, fio_write: int) -> None:
    # fio passes the rest of the value, '-' included, to the next direction: a negative number
    assert _fio_parsed(fio_binary, tmp_path, line)[1] == fio_write % (1 << 64)
    with pytest.raises(FioJobError, match="negative number"):
        parse_string(f"[x]\n{line}\n", env={})


def test_random_rw_count_suffix_is_atoi_in_fio(fio_binary: str, tmp_path: Path) -> None:
    # options.c str_rw_cb reads randread:N with atoi: randread:4k issues like randread:4
    # (1 random + 3 sequential), not like 1 random + 4095 sequential
    offsets = {}
    for mode in ("randread:4", "randread:4k"):
        log = tmp_path / "io.log"
        log.unlink(missing_ok=True)
        (tmp_path / "r.fio").write_text(f"[x]\nioengine=null\nfilename=/dev/null\nsize=1m\nnumber_ios=12\nwrite_iolog=io.log\nrw={mode}\n")
        _fio(fio_binary, "--output=/dev/null", "r.fio", cwd=tmp_path)
        offsets[mode] = [int(t.split()[-2]) for t in log.read_text().splitlines() if " read " in t]
    assert offsets["randread:4"] == offsets["randread:4k"]
    assert offsets["randread:4"][4] != offsets["randread:4"][3] + 4096  # a new random offset after 4
    assert parse_string("[x]\nrw=randread:4\n", env={}).jobs[0].state["rw_nr"] == 4
    with pytest.raises(FioJobError, match="atoi, as 4"):
        parse_string("[x]\nrw=randread:4k\n", env={})


def test_long_line_is_cut_by_fio(fio_binary: str, tmp_path: Path) -> None:
    line = "description=" + "a" * (8191 - 12) + "bs=16k"
    (tmp_path / "p.fio").write_text(f"[x]\nioengine=null\nfilename=/dev/null\n{line}\n")
    out = _fio(fio_binary, "--parse-only", "--debug=parse", "p.fio", cwd=tmp_path).stdout
    assert "__handle_option=bs, type=OPT_ULL, ptr=16k" in out  # the cut-off rest, parsed as bs=16k
    with pytest.raises(FioJobError, match="longer than 8191"):
        parse_string(f"[x]\n{line}\n", env={})


def test_carriage_return_does_not_end_a_line_in_fio(fio_binary: str, tmp_path: Path) -> None:
    assert _fio_parsed(fio_binary, tmp_path, "bs=8k\rbs=16k") == [8192]
    with pytest.raises(FioJobError):
        parse_string("[x]\nbs=8k\rbs=16k\n", env={})


@pytest.mark.parametrize("line,fio_first", [("rate_iops=8612-0x8", 0x8612), ("bs=4096:0x2000", 0x4096), ("startdelay=1-0x10", 1)])
def test_hex_later_field_fio_reads_are_refused(fio_binary: str, tmp_path: Path, line: str, fio_first: int) -> None:
    # after ':' or '-' fio parses the rest of the value too, and any "0x" there means hex
    assert _fio_parsed(fio_binary, tmp_path, line)[0] == fio_first
    with pytest.raises(FioJobError, match="as hex too"):
        parse_string(f"[x]\n{line}\n", env={})


def test_kb_base_1000_matches_fio(fio_binary: str, tmp_path: Path) -> None:
    for value in ("4k", "4KiB", "1m", "1MiB"):
        line = f"kb_base=1000\nsize={value}"
        assert _fio_parsed(fio_binary, tmp_path, line) == [parse_string(f"[x]\nbs=1\n{line}\n", env={}).jobs[0].state["size"]]


@pytest.mark.parametrize(
    "line,fio_reads",
    [("size=4q", 4), ("size=1.5k", 1), ("runtime=10sec", 10), ("runtime=10x", 16), ("size= 4k", 4), ("runtime=0x10", 16)],
)
def test_values_fio_misreads_are_refused_here(fio_binary: str, tmp_path: Path, line: str, fio_reads: int) -> None:
    # The documented reason for refusing: fio really does read these as something else.
    assert _fio_parsed(fio_binary, tmp_path, line) == [fio_reads]
    with pytest.raises(FioJobError):
        parse_string("[x]\n" + line + "\n", env={})


BOTH_REFUSE = [
    "rw=RandRead",
    "rwmixread=101",
    "iodepth=0",
    "direct=2",
    "direct=yes",
    "direct",
    "random_distribution=zipf:1",
    "random_distribution=zipf:1.2:1.5",
    "random_distribution=pareto:1.5",
    "random_distribution=zoned:50/10:40/20",
    "random_distribution=zoned:50/10:50/120",
    "io_size=200%",
    "percentile_list=50:101",
    "bogus=1",
    "randseed=9223372036854775808",  # strtoll saturates: "failed parsing"
    "bs=(1+2)*4k",  # fio 3.33 here: no expression support; we evaluate it (§2.2), see below
    # fio 3.33 matches the choice up to the first ',' (parse.c opt_len), so per-direction
    # zones fail to parse there; newer fio reads them, and so do we (§2.3), see below
    "random_distribution=zoned:60/10:40/90,100/100",
]


@pytest.mark.parametrize("line", BOTH_REFUSE)
def test_fio_refuses_too(fio_binary: str, tmp_path: Path, line: str) -> None:
    (tmp_path / "r.fio").write_text(f"[x]\nioengine=null\nfilename=/dev/null\nsize=1m\n{line}\n")
    proc = _fio(fio_binary, "--parse-only", "r.fio", cwd=tmp_path)
    # fio complains on stderr; for a bad element after the first of a list
    # (percentile_list=50:101) it even keeps the job, which is worse than refusing.
    assert proc.stderr.strip() or proc.returncode != 0
    if line.startswith("bs=("):
        assert parse_string(f"[x]\n{line}\n", env={}).jobs[0].state["bs"] == [12288] * 3
    elif "," in line:
        zones = parse_string(f"[x]\n{line}\n", env={}).jobs[0].state["random_distribution"]["zones"]
        assert zones[1] == zones[2] == [{"access_pct": 100, "range_pct": 100}]
    else:
        with pytest.raises(FioJobError):
            parse_string(f"[x]\n{line}\n", env={})


HEADER_FILES = [
    "[global]\nioengine=null\nfilename=/dev/null\nsize=1m\n[a]\nbs=8k,32k\n[b]\nbssplit=4k/50:64k/50,8k\nnumjobs=3\n[c]\nstonewall\nbsrange=1k:4k,8k-16k\nrw=randrw\niodepth=4\n",
    "[global]\nioengine=null\nfilename=/dev/null\nsize=1m\nkb_base=1000\n[a]\nbs=4KiB,64KiB\nsignificant_figures=6\n[b]\nnew_group\nbs=1m\n",
]


@pytest.mark.parametrize("text", HEADER_FILES)
def test_header_lines_match_fio(fio_binary: str, tmp_path: Path, text: str) -> None:
    (tmp_path / "h.fio").write_text(text)
    real = _fio(fio_binary, "h.fio", cwd=tmp_path).stdout
    ours = parse(tmp_path / "h.fio", env={}).header_text()
    assert real.startswith(ours)


@pytest.mark.parametrize(
    "body",
    [
        "size=50%\noffset=25%",
        "size=30%\noffset=10%\nbs=64k",
        "numjobs=3\noffset_increment=10%\nsize=1m",
        "numjobs=4\nsize=256k\nbs=256k\noffset_increment=1m",
    ],
)
def test_regions_match_fio_io(fio_binary: str, tmp_path: Path, body: str) -> None:
    data = tmp_path / "data.bin"
    with open(data, "wb") as f:
        f.truncate(8 << 20)
    text = f"[x]\nioengine=psync\nfilename={data}\nrw=write\nbs=64k\nwrite_bw_log=W\nlog_offset=1\n{body}\n"
    (tmp_path / "x.fio").write_text(text)
    proc = _fio(fio_binary, "x.fio", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    specs = parse(tmp_path / "x.fio", env={}).to_engine(8 << 20, 512)
    for spec in specs:
        rows = (tmp_path / f"W_bw.{spec['thread_number']}.log").read_text().splitlines()
        offsets = [int(r.split(",")[4]) for r in rows]
        bs = spec["bs"]["write"]["min"]
        assert min(offsets) == spec["offset_bytes"]
        assert max(offsets) + bs == spec["offset_bytes"] + spec["io_size_bytes"]


@pytest.mark.parametrize("extra", ["21", "abc", "21.12345", "21:22"])
def test_a_percentile_list_past_20_entries_keeps_the_first_20_as_fio_does(fio_binary: str, tmp_path: Path, extra: str) -> None:
    """fio 3.33 logs "the list exceeding max length 20", reads no entry past the 20th and runs
    the job with the first 20 (the decimals of the first '.' past them still count); the twin
    refused the job."""
    plist = ":".join(str(i) for i in range(1, 21)) + ":" + extra
    job = f"[x]\nioengine=null\nfilename=/dev/null\nsize=64k\npercentile_list={plist}\n"
    (tmp_path / "p.fio").write_text(job)
    proc = _fio(fio_binary, "--output-format=json", "p.fio", cwd=tmp_path)
    assert proc.returncode == 0 and "the list exceeding max length 20" in proc.stderr
    fio_keys = list(json.loads(proc.stdout)["jobs"][0]["read"]["clat_ns"]["percentile"])
    fio_normal = _fio(fio_binary, "p.fio", cwd=tmp_path).stdout
    run = parse_string(job, env={})
    st = run.jobs[0].state
    assert [f"{p:f}" for p in st["percentile_list"]] == fio_keys
    # The normal output's percentile labels carry the precision: 1.00000th with 5, 1th with 0.
    assert re.search(r"\|\s+" + re.escape(f"{1.0:.{st['percentile_precision']}f}th=["), fio_normal), fio_normal
    entries = len(plist.split(":"))
    assert run.warnings == [
        f"<string>:5: percentile_list: the list exceeds max length 20: its first 20 of {entries} values kept, "
        "the rest not read (as fio 3.33 does)"
    ]


def _iolog_offsets(fio: str, tmp_path: Path, *options: str) -> list[tuple[str, int]]:
    """(direction, offset) of every I/O fio issues for ``options`` (null engine, write_iolog)."""
    (tmp_path / "f").write_bytes(b"")
    os.truncate(tmp_path / "f", 1 << 20)
    log = tmp_path / "o.log"
    log.unlink(missing_ok=True)
    proc = _fio(fio, "--name=x", "--ioengine=null", "--filename=f", "--write_iolog=o.log", *options, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = [line.split() for line in log.read_text().splitlines()[1:]]
    return [(w[2], int(w[3])) for w in lines if len(w) == 5]


@pytest.mark.parametrize(
    "line,fio_reads",
    [
        ("zoneskip=-16k", "zoneskip=16k"),
        ("offset_increment=-4k", "offset_increment=4k"),
    ],
)
def test_a_negative_zoneskip_or_offset_increment_is_refused_saying_how_fio_reads_it(
    fio_binary: str, tmp_path: Path, line: str, fio_reads: str
) -> None:
    """fio 3.33 splits a value at '-' (a range) and keeps the last piece: zoneskip=-16k skips
    16k forward, offset_increment=-4k steps 4k up. The twin refused both with a bare "not a
    size"; it still refuses them (the value does not do what it says), naming the range and
    fio's reading, which this checks against fio's I/O."""
    common = ["--size=1m", "--rw=read", "--bs=4k", "--number_ios=6", "--numjobs=2"]
    common += ["--zonemode=strided", "--zonesize=8k", "--zonerange=64k"] if line.startswith("zone") else []
    # Sorted: the two jobs write one iolog, interleaved as the host schedules them (CI: job 1's
    # 4096 came first once, job 0's 0 another time).
    given, read_as = (sorted(_iolog_offsets(fio_binary, tmp_path, *common, f"--{o}")) for o in (line, fio_reads))
    assert given == read_as
    with pytest.raises(FioJobError) as e:
        parse_string(f"[x]\nzonemode=strided\nzonesize=8k\nzonerange=64k\n{line}\n", env={})
    assert str(e.value).startswith(f"<string>:5: {line}: negative: allowed 0 to 9223372036854775807 bytes")
    assert f"(fio 3.33 reads it as {fio_reads.split('=')[1]}" in str(e.value)


def test_a_negative_thinktime_blocks_is_refused_saying_fio_wraps_it(fio_binary: str, tmp_path: Path) -> None:
    """fio 3.33 stores thinktime_blocks=-5 as 2^32 - 5 blocks (an unsigned int): no think time
    in a short job. The twin refused it with a bare "not a size"."""
    assert _fio_parsed(fio_binary, tmp_path, "thinktime_blocks=-5")[0] % (1 << 32) == (1 << 32) - 5
    wraps = r"thinktime_blocks=-5: negative: allowed 0 to 4294967295 blocks \(fio 3.33 wraps it to 4294967291"
    with pytest.raises(FioJobError, match=wraps):
        parse_string("[x]\nthinktime=1ms\nthinktime_blocks=-5\n", env={})
