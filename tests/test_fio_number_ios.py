"""`number_ios` ends a job where fio 3.33's backend.c does (`exceeds_number_ios`, do_io).

The limit is `number_ios × loops` (tests/fio/conformance/number_ios-*.fio compare that with
real fio), counted from the end of `ramp_time` (reset_all_stats zeroes the count), and it
ends nothing in a time-based job or a replay, whose do_io loop goes on regardless.
Measured with fio 3.33 and ioengine=null: `number_ios=100 rate_iops=1000 ramp_time=50ms`
runs 151 I/Os and reports 100; `number_ios=10 time_based runtime=1` runs the whole
second; a 50-line trace replayed with `number_ios=10` runs 50.
"""

from __future__ import annotations

from pathlib import Path

from twin import run_fio

JOB = "[n]\nioengine=psync\nrw=read\nbs=4k\nsize=64m\nrate_iops=1000\nnumber_ios={n}\n"


def test_number_ios_counts_from_the_end_of_the_ramp(fresh: Path, tmp_path: Path) -> None:
    r = run_fio(fresh, JOB.format(n=100) + "ramp_time=50ms\n", tmp_path, "--scratch")
    read = r.job("n")["read"]
    assert read["total_ios"] == 100
    assert r.job("n")["job_runtime"] >= 99  # 100 I/Os at 1,000 IOPS after the ramp


def test_number_ios_does_not_end_a_time_based_job(fresh: Path, tmp_path: Path) -> None:
    r = run_fio(fresh, JOB.format(n=10) + "time_based\nruntime=100ms\n", tmp_path, "--scratch")
    assert r.job("n")["job_runtime"] == 100
    assert r.job("n")["read"]["total_ios"] >= 99  # the runtime at 1,000 IOPS, not 10 I/Os


def test_number_ios_does_not_cut_a_replay_short(fresh: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.log"
    lines = ["fio version 2 iolog", "/dev/nvme0n1 add", "/dev/nvme0n1 open"]
    lines += [f"/dev/nvme0n1 read {k * 4096} 4096" for k in range(50)]
    trace.write_text("\n".join(lines + ["/dev/nvme0n1 close"]) + "\n")
    r = run_fio(fresh, f"[r]\nioengine=psync\nread_iolog={trace}\nnumber_ios=10\n", tmp_path / "run", "--scratch")
    assert (r.job("r")["read"]["total_ios"], r.job("r")["read"]["io_bytes"]) == (50, 50 * 4096)


def test_number_ios_with_trimwrite_doubles_each_loop_as_fio_does(fresh: Path, tmp_path: Path) -> None:
    """fio's do_io doubles number_ios at the start of every loop of a trimwrite job, and loop
    k ends at number_ios × 2^k × k I/Os in all (measured with fio 3.33, ioengine=null:
    number_ios=5 runs 5 trims and 5 writes, 20 of each with loops=2, 60 with loops=3). The
    twin stopped after number_ios I/Os in all: 3 trims and 2 writes."""
    for loops, each in ((1, 5), (2, 20), (3, 60)):
        job = f"[t]\nioengine=psync\nrw=trimwrite\nbs=4k\nsize=1m\nnumber_ios=5\nloops={loops}\n"
        r = run_fio(fresh, job, tmp_path / str(loops), "--scratch")
        assert (r.job("t")["trim"]["total_ios"], r.job("t")["write"]["total_ios"]) == (each, each), loops
