"""The job-file parser: syntax, every supported option, inheritance, clones, groups,
errors, and the echo of options for the JSON report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ssdtwin.fio import FioJobError, parse, parse_string
from ssdtwin.fio.facts import first_draw
from ssdtwin.fio.parser import fio_seeds
from ssdtwin.fio.units import Percent

BASE = "[global]\nioengine=libaio\nfilename=/dev/nvme0n1\n"


def job(body: str, *, extra_global: str = "", **kw: Any):
    """Parse one job section ``[j]`` below a small global section."""
    run = parse_string(BASE + extra_global + "[j]\n" + body, name="t.fio", env=kw.pop("env", {}), **kw)
    assert len(run.jobs) == 1
    return run.jobs[0]


def err(text: str, **kw: Any) -> FioJobError:
    with pytest.raises(FioJobError) as info:
        parse_string(text, name="job.fio", env=kw.pop("env", {}), **kw)
    return info.value


# --- syntax -------------------------------------------------------------------------------


def test_comments_blank_lines_and_inline_comments() -> None:
    run = parse_string(
        "; leading comment\n# another\n\n[global]\n  bs=8k   ; trailing comment\nsize=1m#x\n[a]\nrw=write\n",
        env={},
    )
    st = run.jobs[0].state
    assert st["bs"] == [8192] * 3 and st["size"] == 1 << 20
    assert run.global_options == [("bs", "8k"), ("size", "1m")]


def test_option_outside_section_is_an_error() -> None:
    e = err("bs=4k\n[a]\n")
    assert (e.file, e.line) == ("job.fio", 1)
    assert "outside of [] job section" in str(e)


def test_flags_without_value_and_whitespace_before_equals() -> None:
    j = job("time_based\nruntime =10\nnorandommap\ngroup_reporting\nstonewall\n")
    st = j.state
    assert st["time_based"] == 1 and st["runtime_us"] == 10_000_000 and st["norandommap"] == 1
    # flags given without a value are echoed without a value (the JSON drops them)
    assert ("time_based", None) in j.options and ("runtime", "10") in j.options


def test_space_after_equals_is_refused_with_the_reason() -> None:
    # fio 3.33 reads "bs = 4k" as a 4-byte block size (measured); we refuse it.
    e = err(BASE + "[a]\nbs = 4k\n")
    assert (e.line, e.option, e.value) == (5, "bs", " 4k")
    assert "whitespace" in e.reason


def test_bool_needs_a_value() -> None:
    e = err(BASE + "[a]\ndirect\n")
    assert e.option == "direct" and "requires a value" in e.reason


def test_global_prefix_sections_and_accumulation() -> None:
    run = parse_string("[global]\nbs=8k\n[globalfoo]\nsize=2m\n[a]\n[global]\nbs=16k\n[b]\n", env={})
    a, b = run.jobs
    assert a.state["bs"][0] == 8192 and a.state["size"] == 2 << 20
    assert b.state["bs"][0] == 16384 and b.state["size"] == 2 << 20
    assert run.global_options == [("bs", "8k"), ("size", "2m"), ("bs", "16k")]
    assert any("globalfoo" in w for w in run.warnings)


def test_job_overrides_global_and_later_option_wins() -> None:
    j = job("bs=8k\nbs=16k\n", extra_global="bs=4k\n")
    assert j.state["bs"] == [16384] * 3
    assert [o for o in j.options if o[0] == "bs"] == [("bs", "8k"), ("bs", "16k")]


def test_aliases_are_echoed_by_canonical_name() -> None:
    j = job("readwrite=randread\nblocksize=8k\nio_limit=1m\ntimeout=5\nblockalign=4k\nwait_for_previous\nfileoffset=4k\n")
    names = [n for n, _ in j.options]
    assert names == ["rw", "bs", "io_size", "runtime", "ba", "stonewall", "offset"]
    assert j.state["rw"] == "randread"


def test_priority_order_kb_base_first_filename_last() -> None:
    # fio sorts a section's options by priority: kb_base (1) before others, filename (-1)
    # last; so kb_base applies to sizes written above it, and "job options" shows the order.
    run = parse_string("[a]\nfilename=ns1\nsize=4k\nkb_base=1000\nbs=4k\n", env={})
    j = run.jobs[0]
    assert [n for n, _ in j.options] == ["kb_base", "size", "bs", "filename"]
    assert j.state["size"] == 4000 and j.state["bs"] == [4000] * 3


def test_env_expansion_and_keywords() -> None:
    run = parse_string(
        "[a]\nsize=${SZ}\nbs=$pagesize\nnumjobs=$ncpus\niodepth=$ncpus*2\ndescription=x${UNSET}y\n",
        env={"SZ": "2m"},
        keywords={"pagesize": 8192, "ncpus": 4},
    )
    st = run.jobs[0].state
    assert st["size"] == 2 << 20 and st["bs"] == [8192] * 3 and st["numjobs"] == 4 and st["iodepth"] == 8
    assert st["description"] == "xy"
    # the echo shows the expanded values, as fio's does
    assert ("size", "2m") in run.jobs[0].options and ("bs", "8192") in run.jobs[0].options


def test_unset_env_gives_empty_value_error() -> None:
    e = err("[a]\nrw=${RW}\n")
    assert e.option == "rw" and e.line == 2


def test_include_relative_to_including_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "common.inc").write_text("; shared\nsize=2m\ninclude more.inc\n")
    (tmp_path / "sub" / "more.inc").write_text("bs=64k\n")
    (tmp_path / "sub" / "main.fio").write_text("[global]\ninclude common.inc\n[a]\nrw=write\n")
    run = parse(tmp_path / "sub" / "main.fio", env={}, cwd=tmp_path)
    st = run.jobs[0].state
    assert st["size"] == 2 << 20 and st["bs"] == [65536] * 3


def test_include_errors(tmp_path: Path) -> None:
    (tmp_path / "sec.inc").write_text("[x]\n")
    (tmp_path / "loop.inc").write_text("include loop.inc\n")
    (tmp_path / "bad.inc").write_text("bs=4q\n")
    main = tmp_path / "m.fio"
    main.write_text("[a]\ninclude sec.inc\ninclude loop.inc\ninclude nope.inc\ninclude bad.inc\n")
    with pytest.raises(FioJobError) as info:
        parse(main, env={}, cwd=tmp_path)
    msgs = [str(e) for e in info.value.errors]
    assert any("sec.inc:1" in m and "no new sections" in m for m in msgs)
    assert any("include loop" in m for m in msgs)
    assert any("m.fio:4" in m and "nope.inc" in m for m in msgs)
    assert any(m.startswith("bad.inc:1: bs=4q: not a size") for m in msgs)


def test_include_takes_the_name_after_one_blank_as_fio(tmp_path: Path) -> None:
    # fio 3.33 (init.c): "include\tinc.fio" and "include inc.fio  " include inc.fio, while
    # "include  inc.fio" looks for " inc.fio" and fails the run ("unable to open ' inc.fio'").
    (tmp_path / "inc.fio").write_text("bs=8k\n")
    for line in ("include\tinc.fio", "include inc.fio  "):
        (tmp_path / "m.fio").write_text(f"[a]\n{line}\n")
        assert parse(tmp_path / "m.fio", env={}, cwd=tmp_path).jobs[0].state["bs"] == [8192] * 3
    for line in ("include  inc.fio", "include \tinc.fio"):
        (tmp_path / "m.fio").write_text(f"[a]\n{line}\n")
        with pytest.raises(FioJobError, match="m.fio:2: include: more than one blank"):
            parse(tmp_path / "m.fio", env={}, cwd=tmp_path)


def test_lines_longer_than_fios_buffer_are_refused(tmp_path: Path) -> None:
    # fio 3.33 reads lines with fgets(8192): the rest of a longer line becomes a line of its
    # own (a description of 8179 characters followed by "bs=16k" sets bs=16k there)
    long = "description=" + "a" * (8191 - 12)
    assert len(parse_string(f"[x]\n{long}\n", env={}).jobs[0].state["description"]) == 8179
    with pytest.raises(FioJobError, match="x.fio:2: line longer than 8191 bytes"):
        parse_string(f"[x]\n{long}bs=16k\n", env={}, name="x.fio")
    # included files are read the same way
    inc = tmp_path / "inc.fio"
    inc.write_text(f"{long}bs=16k\n")
    with pytest.raises(FioJobError, match="inc.fio:1: line longer than 8191 bytes"):
        parse_string(f"[x]\ninclude {inc}\n", env={})
    # a blank rest is a blank line to fio too
    assert parse_string("[x]\nbs=8k" + " " * 9000 + "\n", env={}).jobs[0].state["bs"] == [8192] * 3


@pytest.mark.parametrize("sep", ["\r", "\f", "\v", "\x1c", "\x85", "\u2028"])
def test_lines_end_at_newline_only(tmp_path: Path, sep: str) -> None:
    # fio 3.33 reads "bs=8k<sep>bs=16k" as one line: bs=8k (the rest is ignored garbage);
    # splitting there as str.splitlines does would silently give bs=16k
    with pytest.raises(FioJobError, match="t.fio:2: bs="):
        parse_string(f"[x]\nbs=8k{sep}bs=16k\n", env={}, name="t.fio")
    (tmp_path / "inc.fio").write_text(f"bs=8k{sep}bs=16k\n", newline="")
    (tmp_path / "m.fio").write_text("[x]\ninclude inc.fio\n")
    with pytest.raises(FioJobError, match="inc.fio:1: bs="):
        parse(tmp_path / "m.fio", env={}, cwd=tmp_path)
    # CRLF files still read as fio reads them
    assert parse_string("[x]\r\nbs=8k\r\n", env={}).jobs[0].state["bs"] == [8192] * 3


def test_error_format_and_attributes() -> None:
    e = err("[global]\nioengine=libaio\n\n\n\n[a]\nbs=4q\n")
    assert str(e) == "job.fio:7: bs=4q: not a size: unknown size suffix 'q'"
    assert (e.file, e.line, e.option, e.value) == ("job.fio", 7, "bs", "4q")
    assert "\n" not in str(e)


def test_all_errors_are_collected() -> None:
    e = err("[a]\nbs=4q\nrw=sideways\nbogus=1\nverify=md5\n")
    assert len(e.errors) == 4
    assert str(e).endswith("(and 3 more errors)")
    reasons = [x.reason for x in e.errors]
    assert "unknown option (did you mean bs?)" in reasons
    assert any("not supported" in r or "verification" in r for r in reasons)


def test_an_error_every_job_shares_is_one_line() -> None:
    # A [global] size past the target's end is found in each job, at the same line: two
    # identical lines were printed (and "(and 1 more error)" counted the copy).
    run = parse_string("[global]\nrw=read\nsize=100m\n[a]\n[b]\n[c]\nsize=200m\n", name="g.fio", env={})
    with pytest.raises(FioJobError) as e:
        run.to_engine(1 << 20, 512)
    assert len(e.value.errors) == 3
    assert [line.split(": ")[1] for line in e.value.lines()] == ["size=100m", "size=200m"]
    assert str(e.value).endswith("(and 1 more error)")


def test_unknown_vs_unsupported() -> None:
    assert "unknown option" in err("[a]\nbsize=4k\n").reason
    assert err("[a]\nrw_sequencer=identical\n").reason.startswith("not supported by ssdtwin")
    assert "zonemode=zbd" in err("[a]\nzonemode=zbd\n").reason


# --- every supported option --------------------------------------------------------------

OPTION_CASES: list[Any] = [
    ("rw=randrw", {"rw": "randrw", "rw_nr": 1}),
    ("readwrite=readwrite", {"rw": "rw"}),
    ("rw=randread:8", {"rw": "randread", "rw_nr": 8}),
    ("rw=write:4k", {"rw": "write", "rw_seq_add": 4096}),
    ("rw=read:-8k", {"rw": "read", "rw_seq_add": -8192}),
    ("zonemode=strided", {"zonemode": "strided"}),
    ("zonesize=64k", {"zone_size": 65536}),
    ("zonerange=1m", {"zone_range": 1 << 20}),
    ("zoneskip=4k", {"zone_skip": 4096}),
    ("rw=trim", {"rw": "trim"}),
    ("rw=randtrim", {"rw": "randtrim"}),
    ("rw=trimwrite", {"rw": "trimwrite"}),
    ("rw=randtrimwrite", {"rw": "randtrimwrite"}),
    ("rwmixread=70", {"rwmix": [70, 30]}),
    ("rwmixwrite=20", {"rwmix": [80, 20]}),
    ("rwmixread=70\nrwmixwrite=20", {"rwmix": [80, 20]}),  # later wins
    ("rwmixwrite=20\nrwmixread=70", {"rwmix": [70, 30]}),
    ("bs=8k", {"bs": [8192, 8192, 8192]}),
    ("bs=8k,32k", {"bs": [8192, 32768, 32768]}),
    ("bs=8k,32k,", {"bs": [8192, 32768, 4096]}),
    ("bs=8k,", {"bs": [8192, 4096, 4096]}),
    ("bs=,8k", {"bs": [4096, 8192, 8192]}),
    ("bs=,8k,", {"bs": [4096, 8192, 4096]}),
    ("bs=1k,2k,3k", {"bs": [1024, 2048, 3072]}),
    ("bs=1k,,4k", {"bs": [1024, 4096, 4096]}),
    ("bs=4k-8k", {"bs": [4096, 8192, 8192]}),  # measured: '-' separates directions for bs
    ("bs=4k:8k", {"bs": [4096, 8192, 8192]}),
    ("bsrange=1k-4k", {"bsrange": [(1024, 4096)] * 3}),
    ("bsrange=1k:4k,8k-16k", {"bsrange": [(1024, 4096), (8192, 16384), (8192, 16384)]}),
    ("bsrange=4k-1k", {"bsrange": [(1024, 4096)] * 3}),
    ("bssplit=4k/50:64k/50", {"bssplit": [[[4096, 50], [65536, 50]]] * 3}),
    ("bssplit=4k/10:8k:16k", {"bssplit": [[[4096, 10], [8192, 45], [16384, 45]]] * 3}),
    # fio gives a lone blank entry 0% ((100-100)/1); it still issues only that size
    ("bssplit=4k/50:64k/50,8k", {"bssplit": [[[4096, 50], [65536, 50]], [[8192, 0]], [[8192, 0]]]}),
    ("bssplit=2k/50:4k/50,4k/90:8k/10,", {"bssplit": [[[2048, 50], [4096, 50]], [[4096, 90], [8192, 10]], None]}),
    ("bs_unaligned", {"bs_unaligned": 1}),
    ("blocksize_unaligned", {"bs_unaligned": 1}),
    ("ba=8k", {"ba": [8192] * 3}),
    ("blockalign=4k,8k", {"ba": [4096, 8192, 8192]}),
    ("offset=1m", {"offset": 1 << 20}),
    ("offset=25%", {"offset": Percent(25)}),
    ("offset_increment=2m", {"offset_increment": 2 << 20}),
    ("offset_increment=10%", {"offset_increment": Percent(10)}),
    ("offset_align=1m", {"offset_align": 1 << 20}),
    ("offset_align=0", {"offset_align": 0}),  # fio's default (HOWTO): align to the smallest block size
    ("size=64m", {"size": 64 << 20}),
    ("size=50%", {"size": Percent(50)}),
    ("io_size=200m", {"io_size": 200 << 20}),
    ("io_limit=50%", {"io_size": Percent(50)}),
    ("fill_device=1", {"fill_device": True}),
    ("fill_fs=1", {"fill_device": True}),
    ("loops=2", {"loops": 2}),
    ("thinktime_blocks=0", {"thinktime_blocks": 1}),  # fio 3.33: thinks after every block, as 1 (measured)
    ("loops=0", {"loops": 1}),  # fio 3.33: no minimum, and 0 runs one pass like 1 (measured)
    ("number_ios=1k", {"number_ios": 1024}),
    ("iodepth=32", {"iodepth": 32}),
    ("numjobs=4", {"numjobs": 4}),
    ("time_based=1\nruntime=1m", {"time_based": 1, "runtime_us": 60_000_000}),
    ("runtime=500ms", {"runtime_us": 500_000}),
    ("ramp_time=5", {"ramp_time_us": 5_000_000}),
    ("startdelay=2", {"startdelay_us": (2_000_000, 2_000_000)}),
    ("startdelay=1-5", {"startdelay_us": (1_000_000, 5_000_000)}),
    ("bs=4k,0x2000", {"bs": [4096, 8192, 8192]}),  # ',' ends the field for fio: no hex leak
    # a bare low end takes the unit written after the high end, as fio's get_mult_time reads it
    ("startdelay=2-3ms", {"startdelay_us": (2_000, 3_000)}),
    ("startdelay=1-2m", {"startdelay_us": (60_000_000, 120_000_000)}),
    ("startdelay=500ms-1s", {"startdelay_us": (500_000, 1_000_000)}),
    ("norandommap", {"norandommap": 1}),
    ("randrepeat=0", {"randrepeat": False}),
    ("randseed=1234", {"randseed": 1234}),
    ("allrandrepeat=1", {"allrandrepeat": True}),
    ("random_generator=tausworthe64", {"random_generator": "tausworthe64"}),
    ("random_generator=lfsr", {"random_generator": "lfsr"}),
    ("random_distribution=zipf", {"random_distribution": {"kind": "zipf", "param": 1.1, "center": None, "zones": [None] * 3}}),
    ("random_distribution=zipf:1.2", {"random_distribution": {"kind": "zipf", "param": 1.2, "center": None, "zones": [None] * 3}}),
    ("random_distribution=pareto:0.3:0.5", {"random_distribution": {"kind": "pareto", "param": 0.3, "center": 0.5, "zones": [None] * 3}}),
    ("random_distribution=normal:10", {"random_distribution": {"kind": "normal", "param": 10.0, "center": None, "zones": [None] * 3}}),
    (
        "random_distribution=zoned:50/5:30/15:20/",
        {
            "random_distribution": {
                "kind": "zoned",
                "param": None,
                "center": None,
                "zones": [[{"access_pct": 50, "range_pct": 5}, {"access_pct": 30, "range_pct": 15}, {"access_pct": 20, "range_pct": 80}]]
                * 3,
            }
        },
    ),
    (
        "random_distribution=zoned:60/10:40/90,100/100",
        {
            "random_distribution": {
                "kind": "zoned",
                "param": None,
                "center": None,
                "zones": [
                    [{"access_pct": 60, "range_pct": 10}, {"access_pct": 40, "range_pct": 90}],
                    [{"access_pct": 100, "range_pct": 100}],
                    [{"access_pct": 100, "range_pct": 100}],
                ],
            }
        },
    ),
    (
        "random_distribution=zoned_abs:60/10m:40/1g",
        {
            "random_distribution": {
                "kind": "zoned_abs",
                "param": None,
                "center": None,
                "zones": [[{"access_pct": 60, "range_bytes": 10 << 20}, {"access_pct": 40, "range_bytes": 1 << 30}]] * 3,
            }
        },
    ),
    ("percentage_random=25", {"percentage_random": [25, 25, 25]}),
    ("percentage_random=10,90", {"percentage_random": [10, 90, 90]}),
    ("rate=100m", {"rate": [100 << 20] * 3}),
    ("rate=1m,2m", {"rate": [1 << 20, 2 << 20, 2 << 20]}),
    ("rate=,5m,", {"rate": [0, 5 << 20, 0]}),
    ("rate_iops=1000", {"rate_iops": [1000] * 3}),
    ("rate_iops=500,100", {"rate_iops": [500, 100, 100]}),
    ("rate_process=poisson", {"rate_process": "poisson"}),
    ("thinktime=100", {"thinktime_us": 100}),
    ("thinktime=2ms\nthinktime_spin=500\nthinktime_blocks=4", {"thinktime_us": 2000, "thinktime_spin_us": 500, "thinktime_blocks": 4}),
    ("thinktime=10\nthinktime_spin=20", {"thinktime_spin_us": 10}),  # spin capped at thinktime
    ("stonewall", {"stonewall": 1}),
    ("new_group", {"new_group": 1}),
    ("group_reporting", {"group_reporting": 1}),
    ("percentile_list=50:99:99.9", {"percentile_list": [50.0, 99.0, 99.9], "percentile_precision": 1}),
    ("percentile_list=99.999:1", {"percentile_list": [99.999, 1.0], "percentile_precision": 3}),
    (
        "clat_percentiles=0\nlat_percentiles=1\nslat_percentiles=1",
        {"clat_percentiles": False, "lat_percentiles": True, "slat_percentiles": True},
    ),
    ("write_bw_log=foo", {"logs": {"bw": "foo", "iops": None, "lat": None, "hist": None}}),
    ("write_iops_log\nwrite_lat_log=L\nwrite_hist_log=H", {"logs": {"bw": None, "iops": "", "lat": "L", "hist": "H"}}),
    ("log_avg_msec=1000\nlog_hist_msec=500\nlog_hist_coarseness=2", {"log_avg_msec": 1000, "log_hist_msec": 500, "log_hist_coarseness": 2}),
    ("per_job_logs=0\nlog_offset=1\nlog_max_value=1", {"per_job_logs": False, "log_offset": True, "log_max_value": True}),
    ("bwavgtime=1000\niopsavgtime=250", {"bwavgtime": 1000, "iopsavgtime": 250}),
    ("name=renamed\ndescription=Hello world", {"name": "renamed", "description": "Hello world"}),
    ("filename=ns2", {"filename": "ns2", "namespace": 2}),
    ("filename=ns=3", {"filename": "ns=3", "namespace": 3}),
    ("filename=/dev/nvme1n4", {"namespace": 4}),
    ("filename=/dev/ng0n2", {"namespace": 2}),
    ("filename=/tmp/data.bin", {"namespace": None}),
    ("kb_base=1000\nbs=4k", {"bs": [4000] * 3}),
    ("significant_figures=6", {"significant_figures": 6}),
    ("unified_rw_reporting=none", {"unified_rw_reporting": "none"}),
    ("ioengine=psync", {"ioengine": "psync"}),
]


@pytest.mark.parametrize("body,expected", OPTION_CASES)
def test_supported_option(body: str, expected: dict[str, Any]) -> None:
    st = job(body + "\n").state
    for key, value in expected.items():
        assert st[key] == value, key


BAD_VALUES = [
    ("rw=RandRead", "not a valid rw mode"),
    ("rw=randread:0", "min value"),
    ("zonemode=zbd", "not simulated"),
    ("zonemode=bogus", "not one of none, strided, zbd"),
    ("zoneskip=2z", "zone-count"),
    ("rwmixread=101", "max value out of range"),
    ("iodepth=0", "min value out of range"),
    ("numjobs=0", "min value out of range"),
    ("bs=0", "min value"),
    ("bs=1k,2k,3k,4k", "more than three"),
    ("bssplit=4k/60:8k/60:16k:32k", "add to more than 100"),
    ("bssplit=4k/x", "not a percentage"),
    ("bsrange=4k", "not a range"),
    ("size=150%", "above 100%"),
    ("io_size=200%", "above 100%"),
    ("size=10z", "zone"),
    ("runtime=10sec", "unknown unit"),
    ("randseed=9223372036854775808", "9223372036854775807 max: fio reads numbers as signed 64-bit"),
    ("randseed=0xffffffffffffffff", "9223372036854775807 max"),
    ("rw=randread:4k", "reads '4k' with atoi, as 4"),
    ("rw=randrw:x", "reads 'x' with atoi, as 0"),
    ("rate_iops=8612-0x8", "would read '8612' as hex too"),
    ("startdelay=1-0x10", "would read '1' as hex too"),
    ("bs=4k--8k", "would read '-8k' as a negative number"),
    ("bs=4k:-8k", "would read '-8k' as a negative number"),
    ("rate_iops=100--5", "would read '-5' as a negative number"),
    ("startdelay=1--2", "would read '-2' as a negative number"),
    ("startdelay=2s-3s", "would read it as 2 microseconds"),
    ("startdelay=1h:2h", "would read it as 1 microseconds"),
    ("runtime=0x10", "would read it as 16 microseconds"),
    ("random_distribution=zipf:1", "zipf theta"),
    ("random_distribution=zipf:0", "zipf theta out of range"),
    ("random_distribution=zipf:1e309", "zipf theta out of range"),
    ("random_distribution=zipf:1.2:1.5", "center out of range"),
    ("random_distribution=pareto:1.5", "pareto input out of range"),
    ("random_distribution=normal:100", "normal deviation"),
    ("random_distribution=zoned:50/10:40/20", "don't add up to 100"),
    ("random_distribution=zoned:50/10:50/120", "more than 100%"),
    ("random_distribution=zoned_abs:60/10m:40", "needs access%/size"),
    ("random_distribution=uniform", "not one of"),
    ("percentage_random=101", "max value"),
    ("percentile_list=50:101", "out of range"),
    # A negative size names the range (it was a bare "not a size").
    ("size=-4k", "size=-4k: not a size: negative (allowed 0 or more)"),
    # So does a negative time, and a value that is no time names what one looks like (both
    # were a bare "not a time").
    ("runtime=-1", "runtime=-1: not a time: negative (allowed 0 or more)"),
    ("thinktime=-5ms", "thinktime=-5ms: not a time: negative (allowed 0 or more)"),
    ("ramp_time=(1-2)", "ramp_time=(1-2): not a time: negative (allowed 0 or more)"),
    ("size=(1-2)", "size=(1-2): not a size: negative (allowed 0 or more)"),
    ("runtime=abc", "runtime=abc: not a time: a number with an optional unit (us, ms, s, m, h or d)"),
    ("zoneskip=-16k", "zoneskip=-16k: negative: allowed 0 to 9223372036854775807 bytes (fio 3.33 reads it as 16k"),
    ("offset_increment=-50", "negative: allowed 0 to 9223372036854775807 bytes or 0% to 100% (fio 3.33 aborts on it)"),
    ("offset_increment=-50%", "(fio 3.33 reads it as 50%)"),
    ("thinktime_blocks=-1", "negative: allowed 0 to 4294967295 blocks (fio 3.33 wraps it to 4294967295 blocks"),
    # A negative percentage is a number out of range (fio: "value out of range: -1.000000
    # (range min: 0.000000)"), not "not a number"; a comma is not the list's separator.
    ("percentile_list=-1", "value out of range: -1 (allowed 0 to 100 each"),
    ("percentile_list=50,99", "percentiles are separated by ':'"),
    ("percentile_list=50:", "an empty value where a number belongs (allowed 0 to 100"),
    ("latency_percentile=-5", "value out of range: -5 (allowed 0 to 100, a percentage)"),
    ("random_distribution=zipf:-1", "value out of range: -1 (allowed 0 or more)"),
    ("random_generator=mt", "not one of"),
    ("rate_process=burst", "not one of"),
    ("log_hist_coarseness=7", "max value"),
    ("ioengine=mmap", "not supported"),
    ("kb_base=1001", "not one of"),
    ("filename=a:b", "several files"),
    ("filename=ns0", "start at 1"),
    ("direct=2", "max value out of range: 2 (1 max)"),
    ("direct=yes", "not an integer"),
    ("unified_rw_reporting=mixed", "not supported yet"),
    ("rate=1m\nrate_iops=100", "mutually exclusive"),
    ("size=1k\nbs=4k", "size too small"),
    ("hipri", "only valid with ioengine"),  # global engine is libaio
]


@pytest.mark.parametrize("body,message", BAD_VALUES)
def test_bad_values_are_errors_with_location(body: str, message: str) -> None:
    with pytest.raises(FioJobError) as info:
        job(body + "\n")
    e = info.value
    assert message in str(e)
    assert e.file == "t.fio" and e.line is not None and e.line >= 4


NOOP = [
    "direct=1",
    "buffered=0",
    "thread",
    "refill_buffers",
    "zero_buffers",
    "scramble_buffers=0",
    "invalidate=0",
    "cpus_allowed=0-3",
    "cpus_allowed_policy=split",
    "iodepth_batch=8",
    "iodepth_batch_complete=4",
    "iodepth_low=4",
    "lockmem=1g",
    "mem=malloc",
    "iomem_align=4k",
    "nice=-5",
    "prio=3",
    "clocksource=clock_gettime",
    "disk_util=0",
    "buffer_compress_percentage=50",
    "dedupe_percentage=10",
    "overwrite=1",
    "gtod_cpu=1",
    "unlink=1",
    "fadvise_hint=0",
    "create_serialize=0",
    "ioscheduler=none",
    "cgroup=x",
]


@pytest.mark.parametrize("body", NOOP)
def test_noop_options_are_accepted_and_echoed(body: str) -> None:
    j = job(body + "\n")
    name = body.split("=")[0]
    canonical = {"iodepth_batch": "iodepth_batch", "iodepth_batch_complete": "iodepth_batch_complete_min"}.get(name, name)
    assert canonical in [n for n, _ in j.options]


def test_engine_options_with_their_engine() -> None:
    j = job("ioengine=io_uring\nhipri\nfixedbufs\nsqthread_poll=1\nbs=4k\n")
    # engine options come after the general ones in fio's echo (second parsing pass)
    assert [n for n, _ in j.options] == ["ioengine", "bs", "hipri", "fixedbufs", "sqthread_poll"]
    assert job("ioengine=nbd\nuri=nbd+unix:///?socket=x.sock\n").state["ioengine"] == "nbd"


def test_sync_engines_cap_queue_depth() -> None:
    run = parse_string(
        "[a]\nioengine=psync\niodepth=32\n[b]\nioengine=libaio\niodepth=32\n[c]\nioengine=null\n[d]\nioengine=null\niodepth=4\n", env={}
    )
    a, b, c, d = run.jobs
    assert (a.effective_iodepth, a.iodepth, a.engine_async) == (1, 32, False)
    assert (b.effective_iodepth, b.engine_async) == (32, True)
    assert (c.engine_async, d.engine_async) == (False, True)
    assert any("capped at 1" in w for w in run.warnings)
    assert parse_string("[a]\n", env={}).jobs[0].state["ioengine"] == "psync"  # fio's default


def test_time_based_without_runtime_is_ignored_like_fio() -> None:
    run = parse_string("[a]\ntime_based\n", env={})
    assert run.jobs[0].state["time_based"] == 0
    assert any("time_based requires a runtime" in w for w in run.warnings)


# --- clones, threads, groups --------------------------------------------------------------


def test_clone_numbering_follows_fio() -> None:
    run = parse_string("[global]\nfilename=ns1\n[a]\n[b]\nnumjobs=4\noffset_increment=1m\n[c]\n", env={})
    assert [(c.name, c.thread_number, c.subjob) for c in run.clones] == [
        ("a", 1, 0),
        ("b", 2, 0),
        ("b", 3, 3),  # measured with fio-3.33: the 2nd clone of b got subjob 3 ...
        ("b", 4, 2),
        ("b", 5, 1),
        ("c", 6, 0),
    ]


def test_groups_stonewall_new_group() -> None:
    run = parse_string("[a]\n[b]\nstonewall\n[c]\nnumjobs=2\n[d]\nnew_group\n[e]\n", env={})
    assert [(c.name, c.group_id, c.batch) for c in run.clones] == [
        ("a", 0, 0),
        ("b", 1, 1),
        ("c", 1, 1),
        ("c", 1, 1),
        ("d", 2, 1),
        ("e", 2, 1),
    ]


def test_stonewall_on_first_job_keeps_group_zero() -> None:
    run = parse_string("[a]\nstonewall\n[b]\n", env={})
    assert [c.group_id for c in run.clones] == [0, 0]


def test_stonewall_in_global_serialises_every_job() -> None:
    run = parse_string("[global]\nstonewall\n[a]\nnumjobs=2\n[b]\n[c]\n", env={})
    assert [(c.group_id, c.batch) for c in run.clones] == [(0, 0), (0, 0), (1, 1), (2, 2)]


def test_several_job_files_are_separate_groups_and_reset_globals() -> None:
    # measured: the globals of file 1 do not reach file 2; its first job gets a stonewall;
    # "global options" in the JSON are those of the last file.
    run = parse_string(
        ["[global]\nbs=64k\nioengine=null\n[a]\n[b]\n", "[c]\n[global]\nbs=128k\n[d]\nnew_group\n[e]\n"],
        name=["f1.fio", "f2.fio"],
        env={},
    )
    got = [(j.name, j.group_id, j.state["bs"][0], j.state["ioengine"]) for j in run.jobs]
    assert got == [
        ("a", 0, 65536, "null"),
        ("b", 0, 65536, "null"),
        ("c", 1, 4096, "psync"),
        ("d", 2, 131072, "psync"),
        ("e", 2, 131072, "psync"),
    ]
    assert run.global_options == [("bs", "128k")]
    assert run.jobs[2].file == "f2.fio" and run.jobs[2].stonewall


def test_cmdline_options_are_defaults_for_the_first_file_only() -> None:
    run = parse_string(["[global]\nioengine=null\n[a]\n", "[b]\n"], cmdline=["--bs=8k"], env={})
    assert [j.state["bs"][0] for j in run.jobs] == [8192, 4096]
    assert run.global_options == []  # the last file had no globals
    run = parse_string("[a]\n", cmdline=["--bs=8k", "size=1m"], env={})
    assert run.global_options == [("bs", "8k"), ("size", "1m")]


def test_header_line_format() -> None:
    run = parse_string(
        "[global]\nioengine=null\n[mix]\nrw=randrw\niodepth=8\nnumjobs=2\n[seq]\nstonewall\nrw=write\nbs=128k\niodepth=4\n[split]\nbssplit=4k/50:32k/50,8k\n",
        env={},
    )
    assert run.header_text().splitlines() == [
        "mix: (g=0): rw=randrw, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine=null, iodepth=8",
        "...",
        "seq: (g=1): rw=write, bs=(R) 128KiB-128KiB, (W) 128KiB-128KiB, (T) 128KiB-128KiB, ioengine=null, iodepth=4",
        "split: (g=1): rw=read, bs=(R) 4096B-32.0KiB, (W) 8192B-8192B, (T) 8192B-8192B, ioengine=null, iodepth=1",
        "fio-3.33",
        "Starting 4 processes",
    ]


def test_threads_and_processes_count() -> None:
    run = parse_string("[a]\nthread\nnumjobs=2\n[b]\n", env={})
    assert run.header_text().splitlines()[-1] == "Starting 2 threads and 1 process"


def test_lat_percentiles_must_agree_under_group_reporting() -> None:
    e = err("[global]\ngroup_reporting\n[a]\n[b]\nlat_percentiles=1\n")
    assert "lat_percentiles" in str(e)


# --- seeds --------------------------------------------------------------------------------

M64 = (1 << 64) - 1


def _taus88_first(seed: int) -> int:
    """First draw of fio's 32-bit Tausworthe generator (taus88, fio's seeding)."""
    return first_draw(seed, use64=False)[0]


def _taus258_first(seed: int) -> int:
    """First draw of fio's tausworthe64 (taus258, fio's seeding)."""
    return first_draw(seed, use64=True)[0]


def test_offset_seeds_reproduce_fio_first_random_draw() -> None:
    # `fio --debug=random` printed these first offset draws ("off rand") for four jobs:
    #   a: default; b: randseed=1234 randrepeat=0; c: allrandrepeat=1; d: tausworthe64.
    run = parse_string(
        "[global]\nrw=randread\n[a]\n[b]\nrandseed=1234\nrandrepeat=0\n[c]\nallrandrepeat=1\n[d]\nrandom_generator=tausworthe64\n",
        env={},
    )
    a, b, c, d = run.clones
    assert _taus88_first(a.seed) == 259043585
    assert _taus88_first(b.seed) == 2511336284
    assert _taus88_first(c.seed) == 421437927
    assert _taus258_first(d.seed) == 1081110824681835660
    assert (a.seed_source, b.seed_source) == ("randrepeat", "randseed")


def test_randseed_alone_does_not_change_offsets_in_fio_333() -> None:
    # measured: with randseed=1234 (randrepeat left at 1) the first draw was the same as
    # fio's default for that thread number, 1094293889 for thread 2.
    run = parse_string("[global]\nrw=randread\n[a]\n[b]\nrandseed=1234\n", env={})
    assert _taus88_first(run.clones[1].seed) == 1094293889
    assert run.clones[1].seeds["bs_read"] != parse_string("[a]\nrw=randread\n[b]\nrw=randread\n", env={}).clones[1].seeds["bs_read"]


def test_randrepeat_0_uses_the_run_seed() -> None:
    text = "[a]\nrw=randread\nrandrepeat=0\nnumjobs=2\n"
    r1 = parse_string(text, env={}, run_seed=7)
    r2 = parse_string(text, env={}, run_seed=7)
    r3 = parse_string(text, env={}, run_seed=8)
    assert [c.seed for c in r1.clones] == [c.seed for c in r2.clones]
    assert [c.seed for c in r1.clones] != [c.seed for c in r3.clones]
    assert r1.clones[0].seed != r1.clones[1].seed
    assert r1.clones[0].seed_source == "run_seed"


def test_seed_formula() -> None:
    seeds, _ = fio_seeds(3, randrepeat=True, randseed=0x89, randseed_set=False, allrandrepeat=False, is_random=False, run_seed=0)
    s = 0x89
    for _ in range(4):
        s = s * 0x9E370001 & M64
    assert seeds[0] == s * 3 & M64
    s = s * 0x9E370001 & M64
    assert seeds[1] == (s * 3 + 1) & M64


def test_startdelay_range_is_drawn_per_clone_deterministically() -> None:
    run = parse_string("[a]\nstartdelay=1-5\nnumjobs=3\n", env={})
    delays = [c.startdelay_us for c in run.clones]
    assert all(1_000_000 <= d <= 5_000_000 for d in delays)
    assert delays == [c.startdelay_us for c in parse_string("[a]\nstartdelay=1-5\nnumjobs=3\n", env={}).clones]
    assert len(set(delays)) > 1


def test_a_float_list_past_20_entries_keeps_20_with_a_warning() -> None:
    """fio 3.33 runs a job whose percentile_list (or merge_blktrace_scalars) has more than 20
    entries with the first 20, after "the list exceeding max length 20"; the twin refused
    it. Entries past the 20th are not read (fio accepts "abc" there)."""
    plist = ":".join(str(i) for i in range(1, 21))
    run = parse_string(f"[x]\npercentile_list={plist}:abc:99.125\n", env={})
    st = run.jobs[0].state
    assert st["percentile_list"] == [float(i) for i in range(1, 21)] and st["percentile_precision"] == 3
    assert run.warnings == [
        "<string>:2: percentile_list: the list exceeds max length 20: its first 20 of 22 values kept, the rest not read (as fio 3.33 does)"
    ]
