"""`ssdtwin fio` log files and bw/iops samples follow fio 3.33's rules (stat.c, docs/fio.md §4, §6.3).

Each test runs the CLI on the fresh CM6 at 1/454 and derives what fio would write from
another output of the same run (the per-I/O latency log is the witness of every
completion's time, direction and size), so a rule is checked without trusting the rows
it checks.
"""

from __future__ import annotations

from pathlib import Path

from ssdtwin.fio.logs import window_rows
from twin import run_fio

HEAD = "[global]\nioengine=libaio\ndirect=1\n"


def test_averaged_latency_logs_round_the_window_mean_half_up(fresh: Path, tmp_path: Path) -> None:
    """stat.c __add_stat_to_log writes `mean + 0.50` as an integer: a window whose mean is
    13751.93 ns is logged as 13752, not 13751."""
    job = HEAD + "[m]\nrw=randrw\nbs=4k\niodepth=4\nsize=16m\nwrite_lat_log=l\nlog_avg_msec={avg}\n"
    per_io = run_fio(fresh, job.format(avg=0), tmp_path / "per_io", "--scratch")
    averaged = run_fio(fresh, job.format(avg=2), tmp_path / "avg", "--scratch")
    end_ms = averaged.job("m")["job_runtime"]
    for kind in ("lat", "clat"):
        samples = [(t, v, d) for t, v, d, _bs, _prio in per_io.log_rows(f"l_{kind}.1.log")]
        want = window_rows(samples, 2, end_ms=end_ms)
        got = [row[:5] for row in averaged.log_rows(f"l_{kind}.1.log")]
        assert len(got) > 4
        assert got == want, kind


def test_a_synchronous_engine_writes_an_empty_slat_log(fresh: Path, tmp_path: Path) -> None:
    """fio records slat only for I/Os its engine queued (ioengines.c td_io_queue): psync's
    slat log is created and stays empty, as its JSON slat has no samples."""
    for avg in (0, 1):
        job = f"[s]\nioengine=psync\nrw=randread\nbs=4k\nsize=1m\nwrite_lat_log=l\nlog_avg_msec={avg}\n"
        r = run_fio(fresh, job, tmp_path / str(avg), "--scratch")
        assert r.job("s")["read"]["slat_ns"]["N"] == 0
        assert (r.dir / "l_slat.1.log").read_text() == ""
        assert len(r.log_rows("l_clat.1.log")) > 0


def test_no_bw_or_iops_sample_for_the_window_the_runtime_ends_in(fresh: Path, tmp_path: Path) -> None:
    """fio's helper thread samples only while the job runs: fio 3.33 (ioengine=null,
    time_based) reports 4 samples for runtime=1 with 200 ms windows, 3 for runtime=2 with
    500 ms, also with I/Os still in flight at the end. Its bw/iops log rows are the same
    samples."""
    cases = [
        # (job, window ms, samples fio takes)
        ("ioengine=psync\nrate_iops=1000\nruntime=1\n", 200, 4),
        ("ioengine=psync\nrate_iops=500\nruntime=2\n", 500, 3),
        ("iodepth=8\nruntime=100ms\n", 20, 4),  # I/Os in flight complete after the runtime
    ]
    for k, (opts, window, samples) in enumerate(cases):
        job = (
            HEAD + f"[t]\nrw=randread\nbs=4k\nsize=64m\ntime_based\n{opts}bwavgtime={window}\niopsavgtime={window}\n"
            f"write_bw_log=b\nwrite_iops_log=i\nlog_avg_msec={window}\n"
        )
        r = run_fio(fresh, job, tmp_path / str(k), "--scratch")
        read = r.job("t")["read"]
        assert (read["bw_samples"], read["iops_samples"]) == (samples, samples), opts
        for name in ("b_bw.1.log", "i_iops.1.log"):
            assert [row[0] for row in r.log_rows(name)] == [window * (n + 1) for n in range(samples)], (opts, name)


def fio_hist_rows(completions: list[tuple[int, int, int]], hist_ms: int) -> list[tuple[int, int, int, int]]:
    """fio's histogram-log rows (stat.c add_clat_sample) from the completions' (ms, ddir,
    bs) in order: per direction, `hist_last` is taken from a completion while it is 0; a
    completion hist_ms or more after it writes (ms, ddir, bs, completions since the
    direction's previous row) and moves hist_last on by hist_ms."""
    last = [0, 0, 0]
    since = [0, 0, 0]
    rows = []
    for t, d, bs in completions:
        since[d] += 1
        if last[d] == 0:
            last[d] = t
        if t - last[d] >= hist_ms:
            rows.append((t, d, bs, since[d]))
            since[d] = 0
            last[d] += hist_ms
    return rows


def test_histogram_log_rows_follow_each_direction_as_fio_does(fresh: Path, tmp_path: Path) -> None:
    """Real fio 3.33 (ioengine=null, rate_iops=100,50, log_hist_msec=100) writes read rows
    at 110, 210, ... and write rows at 120, 220, ...: each direction's window starts at its
    first completion, a row counts that direction's completions and carries the block size
    of the I/O that wrote it (4096), not 0."""
    job = (
        "[h]\nioengine=psync\nrw=randrw\nbs=4k\nsize=64m\nrate_iops=100,50\ntime_based\nruntime=1\n"
        "write_lat_log=l\nwrite_hist_log=h\nlog_hist_msec=100\nlog_hist_coarseness=6\n"
    )
    r = run_fio(fresh, job, tmp_path, "--scratch")
    completions = [(t, d, bs) for t, _v, d, bs, _prio in r.log_rows("l_clat.1.log")]
    want = fio_hist_rows(completions, 100)
    got = [(row[0], row[1], row[2], sum(row[3:])) for row in r.log_rows("h_clat_hist.1.log")]
    assert {d for _t, d, _bs, _n in want} == {0, 1} and len(want) >= 16
    # Rows of one millisecond may come in either direction's order.
    assert sorted(got) == sorted(want)


def test_a_given_bwavgtime_sets_the_bw_samples_and_log_rows(fresh: Path, tmp_path: Path) -> None:
    """init.c: a bw log with log_avg_msec takes its samples every bwavgtime when that was
    given (log_avg_msec otherwise), and each sample is a log row. fio 3.33 (ioengine=null,
    2 s): log_avg_msec=100 bwavgtime=500 gives 3 bw samples and rows at 500, 1000, 1500,
    while the iops log (no iopsavgtime) keeps 100 ms: 19; log_avg_msec=1000 bwavgtime=200
    gives 9 bw samples and rows every 200 ms."""
    for log_ms, bw_ms in ((100, 500), (1000, 200)):
        job = (
            "[b]\nioengine=psync\nrw=randread\nbs=4k\nsize=64m\nrate_iops=1000\ntime_based\nruntime=2\n"
            f"write_bw_log=b\nwrite_iops_log=i\nlog_avg_msec={log_ms}\nbwavgtime={bw_ms}\n"
        )
        r = run_fio(fresh, job, tmp_path / str(log_ms), "--scratch")
        read = r.job("b")["read"]
        bw_samples, iops_samples = 2000 // bw_ms - 1, 2000 // log_ms - 1
        assert (read["bw_samples"], read["iops_samples"]) == (bw_samples, iops_samples)
        assert [row[0] for row in r.log_rows("b_bw.1.log")] == [bw_ms * (n + 1) for n in range(bw_samples)]
        assert [row[0] for row in r.log_rows("i_iops.1.log")] == [log_ms * (n + 1) for n in range(iops_samples)]
        assert all(row[1] == 4000 for row in r.log_rows("b_bw.1.log"))  # 1,000 IOPS of 4 KiB
