"""`rate_iops` is a byte rate, as fio 3.33 sets it up (init.c `__setup_rate`).

fio turns `rate_iops=N` into `N × the direction's smallest block size` bytes per second and
spaces a linear process by each I/O's bytes (backend.c `usec_for_io`), so a bssplit job
issues fewer, larger I/Os than N per second. Measured with fio 3.33, ioengine=null:
`bssplit=4k/50:64k/50 rate_iops=1000 time_based runtime=1` moves 137 I/Os, 4,116,480
bytes (about 4,096,000 B/s). A Poisson process draws each gap around 1 / N whatever the
block size: 933 I/Os.
"""

from __future__ import annotations

from pathlib import Path

from twin import run_fio

JOB = "[r]\nioengine=psync\nrw=randread\nbssplit=4k/50:64k/50\nsize=64m\nrate_iops=1000\ntime_based\nruntime=1\n"


def test_rate_iops_limits_the_bytes_of_the_smallest_block(fresh: Path, tmp_path: Path) -> None:
    read = run_fio(fresh, JOB, tmp_path / "linear", "--scratch").job("r")["read"]
    # 1,000 × 4 KiB per second: within one 64 KiB I/O of 4,096,000 bytes in the second.
    assert abs(read["io_bytes"] - 1000 * 4096) <= 65536
    assert 100 <= read["total_ios"] <= 200  # not 1,000: half of the I/Os are 16 times larger


def test_a_poisson_rate_iops_still_counts_ios(fresh: Path, tmp_path: Path) -> None:
    read = run_fio(fresh, JOB + "rate_process=poisson\n", tmp_path / "poisson", "--scratch").job("r")["read"]
    assert 850 <= read["total_ios"] <= 1150  # exponential gaps around 1 ms
