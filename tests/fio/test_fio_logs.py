"""Log files: names, row formats (compared with real fio logs), windowing, coarseness."""

from __future__ import annotations

from pathlib import Path

import pytest
from fio_fake_engine import run as fake_run

from conftest import DATA
from ssdtwin.fio import EngineResultError, parse_string
from ssdtwin.fio.hist import PLAT_NR
from ssdtwin.fio.logs import format_hist_rows, format_rows, log_names, render_logs, window_rows, write_logs


def test_log_names_follow_fio() -> None:
    # measured: job a -> A_bw.1.log; the next job with numjobs=2 -> B_bw.2.log, B_bw.3.log
    run = parse_string(
        "[a]\nwrite_bw_log=A\n[b]\nnumjobs=2\nwrite_bw_log=B\nwrite_lat_log\nwrite_hist_log=H\nwrite_iops_log=I\n[c]\n",
        env={},
    )
    names = [log_names(c) for c in run.clones]
    assert names[0] == {"bw": "A_bw.1.log"}
    assert names[1] == {
        "bw": "B_bw.2.log",
        "iops": "I_iops.2.log",
        "lat": "b_lat.2.log",
        "slat": "b_slat.2.log",
        "clat": "b_clat.2.log",
        "clat_hist": "H_clat_hist.2.log",
    }
    assert names[2]["bw"] == "B_bw.3.log"
    assert names[3] == {}


def test_per_job_logs_0_shares_one_file_in_thread_order() -> None:
    run = parse_string(
        "[global]\nfilename=ns1\nioengine=libaio\n[a]\nnumjobs=2\nwrite_bw_log=S\nper_job_logs=0\nlog_avg_msec=500\ntime_based\nruntime=1\n",
        env={},
    )
    results = fake_run(run.to_engine(1 << 30, 512), seconds=1)
    files = render_logs(run, results)
    assert list(files) == ["S_bw.log"]
    first = "".join(format_rows(r["logs"]["bw"], False) for r in results)
    assert files["S_bw.log"] == first


def test_rows_match_fio_text() -> None:
    # iolog.c flush_samples, as measured: "0, 12209, 0, 4096, 61440, 0" with log_offset=1
    assert format_rows([[0, 12209, 0, 4096, 61440]], True) == "0, 12209, 0, 4096, 61440, 0\n"
    assert format_rows([[0, 12209, 0, 4096, 61440]], False) == "0, 12209, 0, 4096, 0\n"
    assert format_rows([[100, 490, 0, 0]], True) == "100, 490, 0, 0, 0, 0\n"
    with pytest.raises(EngineResultError):
        format_rows([[0, 1, 3, 4096]], False)
    with pytest.raises(EngineResultError):
        format_rows([[0, 1.5, 0, 4096]], False)


def test_windowed_log_file_format_matches_fio() -> None:
    real = (DATA / "real" / "lat_avg_clat.log").read_text().splitlines()
    rows = [[int(x) for x in line.split(", ")][:5] for line in real]
    assert format_rows([r[:4] + [r[4]] for r in rows], True).splitlines() == real


def test_hist_rows_round_trip_a_real_fio_hist_log() -> None:
    real = (DATA / "real" / "hist_c0.log").read_text().splitlines()
    assert all(len(line.split(", ")) == 3 + PLAT_NR for line in real)  # 1859 columns
    rows = []
    for line in real:
        f = [int(x) for x in line.split(", ")]
        rows.append([f[0], f[1], f[2], [[i, c] for i, c in enumerate(f[3:]) if c]])
    assert format_hist_rows(rows, 0).splitlines() == real


@pytest.mark.parametrize("coarseness,bins", [(0, 1856), (1, 928), (3, 232), (6, 29)])
def test_hist_coarseness_sums_adjacent_buckets(coarseness: int, bins: int) -> None:
    text = format_hist_rows([[500, 1, 4096, [[0, 1], [1, 2], [7, 4], [1855, 8]]]], coarseness)
    fields = [int(x) for x in text.strip().split(", ")]
    assert fields[:3] == [500, 1, 4096] and len(fields) == 3 + bins
    stride = 1 << coarseness
    expected = [0] * bins
    for index, count in ((0, 1), (1, 2), (7, 4), (1855, 8)):
        expected[index // stride] += count
    assert fields[3:] == expected


def test_window_rows_reference() -> None:
    samples = [(10, 100, 0), (40, 300, 0), (60, 50, 1), (100, 200, 0), (150, 7, 0), (230, 9, 1)]
    rows = window_rows(samples, 100, end_ms=260)
    # read window closes at t=100 with mean(100, 300, 200) = 200; write closes at 230
    # (mean 29.5 rounds half up to 30); the open read window (7) is written at the end.
    assert rows == [[100, 200, 0, 0, 0], [230, 30, 1, 0, 0], [260, 7, 0, 0, 0]]
    assert window_rows(samples, 100, end_ms=260, max_value=True)[0] == [100, 300, 0, 0, 0]
    assert window_rows(samples, 0) == [[t, v, d, 0, 0] for t, v, d in samples]


def test_window_rows_move_the_window_start_to_a_multiple() -> None:
    rows = window_rows([(130, 1, 0), (199, 3, 0), (205, 5, 0), (290, 7, 0), (305, 9, 0)], 100)
    # first window 0..130 closes at 130 and restarts at 100; the next closes at 205 (>= 200)
    assert rows == [[130, 1, 0, 0, 0], [205, 4, 0, 0, 0], [305, 8, 0, 0, 0]]


def test_write_logs(tmp_path: Path) -> None:
    run = parse_string(
        "[global]\nfilename=ns1\nioengine=libaio\ntime_based\nruntime=1\n[j]\nrw=randrw\nwrite_bw_log=B\nwrite_iops_log=B\nwrite_lat_log=B\nwrite_hist_log=B\nlog_avg_msec=250\nlog_offset=1\nlog_hist_coarseness=2\n",
        env={},
    )
    results = fake_run(run.to_engine(1 << 30, 512), seconds=1)
    paths = write_logs(run, results, tmp_path / "out")
    assert sorted(p.name for p in paths) == [
        "B_bw.1.log",
        "B_clat.1.log",
        "B_clat_hist.1.log",
        "B_iops.1.log",
        "B_lat.1.log",
        "B_slat.1.log",
    ]
    bw = (tmp_path / "out" / "B_bw.1.log").read_text().splitlines()
    assert bw and all(len(line.split(", ")) == 6 for line in bw)
    hist = (tmp_path / "out" / "B_clat_hist.1.log").read_text().splitlines()
    assert all(len(line.split(", ")) == 3 + PLAT_NR // 4 for line in hist)
