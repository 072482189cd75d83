"""A job that ends inside its `ramp_time` (docs/fio.md §3), in `ssdtwin fio` and real fio 3.33.

fio zeroes its counters when the ramp is over (libfio.c reset_all_stats); a job that ends
before that is never reset and reports what its ramp counted: the I/Os, bytes and depths,
over the time since its start, with no latency and no bw/iops sample (none is taken in the
ramp). `number_ios` counts the ramp's I/Os too (backend.c exceeds_number_ios), so a limit
reached inside the ramp ends the job there. The twin reported 0 I/Os and job_runtime 0 for
both, and ran a number_ios job on past its ramp.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from twin import run_fio

# 16 I/Os at 1,000 IOPS end 15 ms into a 1 s ramp.
ENDS_IN_RAMP = "[j]\nioengine={engine}\nrw=read\nbs=4k\nsize=64k\nrate_iops=1000\nramp_time=1s\n"
# 10 of the 16,384 I/Os the size allows, reached inside the ramp.
NUMBER_IOS_IN_RAMP = "[j]\nioengine={engine}\nrw=read\nbs=4k\nsize=64m\nrate_iops=1000\nramp_time=1s\nnumber_ios=10\n"


def _figures(job: dict[str, Any]) -> tuple[Any, ...]:
    r = job["read"]
    return (r["total_ios"], r["io_bytes"], r["iops"], r["clat_ns"]["N"], r["bw_samples"], job["iodepth_level"]["1"])


@pytest.mark.parametrize(("text", "ios", "runtime_ms"), [(ENDS_IN_RAMP, 16, 15), (NUMBER_IOS_IN_RAMP, 10, 9)])
def test_a_job_that_ends_inside_its_ramp_reports_the_ramps_ios(fresh: Path, tmp_path: Path, text: str, ios: int, runtime_ms: int) -> None:
    job = run_fio(fresh, text.format(engine="psync"), tmp_path, "--scratch").job("j")
    # The I/Os are issued 1 ms apart from the start; the last completes just after its issue.
    assert _figures(job) == (ios, ios * 4096, 1000.0, 0, 0, 100.0)
    assert (job["job_runtime"], job["read"]["runtime"]) == (runtime_ms, runtime_ms + 1)


@pytest.mark.tools
@pytest.mark.parametrize("text", [ENDS_IN_RAMP, NUMBER_IOS_IN_RAMP])
def test_real_fio_reports_the_same_ramp(fio_binary: str, fresh: Path, tmp_path: Path, text: str) -> None:
    (tmp_path / "real.fio").write_text(text.format(engine="null"))
    p = subprocess.run([fio_binary, "real.fio", "--output-format=json"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    real = json.loads(p.stdout)["jobs"][0]
    twin = run_fio(fresh, text.format(engine="psync"), tmp_path / "twin", "--scratch").job("j")
    # The counts exactly; not IOPS, which real fio divides by its wall-clock runtime (CI, loaded:
    # 16 I/Os in 36 ms, 444 IOPS; 10 in 9 ms, 1,111), where the twin's is the rate's spacing.
    counts = lambda figures: figures[:2] + figures[3:]  # noqa: E731
    assert counts(_figures(twin)) == counts(_figures(real))
    # fio's runtime is wall-clock time: at least the rate's spacing, never a whole ramp.
    assert twin["job_runtime"] <= real["job_runtime"] < 500


# The I/Os in flight when the ramp ends. fio resets its counters lazily, at the first
# completion (or async submission) once ramp_time is over (time.c ramp_time_over, called by
# io_u.c should_account and io_u_queued); that completion counts nowhere. The I/Os still in
# flight complete after the reset: io_u.c io_completed adds them to io_bytes and
# account_io_completion to the latencies, but total_ios was counted at submission
# (ioengines.c td_io_queue) and zeroed. With libaio at iodepth=8 the queue is full when the
# ramp ends: 7 more I/Os' bytes and latencies than I/Os. The twin dropped all 8.
IN_FLIGHT = "[j]\nioengine={engine}\ndirect=1\nrw=randread\nbs=4k\nsize=64m\niodepth={qd}\nramp_time=5ms\n"
TIMED = "runtime=20ms\ntime_based\n"
# backend.c exceeds_number_ios counts td->io_blocks (completions since the reset) and the
# I/Os in flight: the 7 complete inside the limit, so 10000 x 4 KiB and 9,993 I/Os.
LIMITED = "number_ios=10000\n"


def _in_flight(job: dict[str, Any]) -> tuple[int, int, int, int]:
    r = job["read"]
    return r["total_ios"], r["io_bytes"] // 4096, r["clat_ns"]["N"], r["slat_ns"]["N"]


def test_ios_in_flight_at_the_ramps_end_count_in_bytes_not_ios(fresh: Path, tmp_path: Path) -> None:
    ios, byte_ios, clat_n, slat_n = _in_flight(run_fio(fresh, IN_FLIGHT.format(engine="libaio", qd=8) + TIMED, tmp_path / "a").job("j"))
    assert ios > 100
    assert (byte_ios, clat_n, slat_n) == (ios + 7, ios + 7, ios)
    # psync: the one I/O in flight is the completion that resets.
    ios, byte_ios, clat_n, _ = _in_flight(run_fio(fresh, IN_FLIGHT.format(engine="psync", qd=1) + TIMED, tmp_path / "b").job("j"))
    assert (byte_ios, clat_n) == (ios, ios)
    ios, byte_ios, clat_n, _ = _in_flight(run_fio(fresh, IN_FLIGHT.format(engine="libaio", qd=8) + LIMITED, tmp_path / "c").job("j"))
    assert (ios, byte_ios, clat_n) == (9_993, 10_000, 10_000)


@pytest.mark.tools
@pytest.mark.parametrize("extra", [TIMED, LIMITED])
def test_real_fio_counts_the_ios_in_flight_at_the_ramps_end_in_bytes_not_ios(fio_binary: str, tmp_path: Path, extra: str) -> None:
    data = tmp_path / "data"
    data.write_bytes(b"\xa5" * (64 << 20))
    (tmp_path / "real.fio").write_text(IN_FLIGHT.format(engine="libaio", qd=8) + f"filename={data}\n" + extra)
    p = subprocess.run([fio_binary, "real.fio", "--output-format=json"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    if p.returncode != 0 and "direct" in p.stdout + p.stderr:
        pytest.skip(f"no O_DIRECT on {tmp_path}")
    assert p.returncode == 0, p.stderr
    ios, byte_ios, clat_n, slat_n = _in_flight(json.loads(p.stdout)["jobs"][0])
    # Usually 7 more, as in the twin. Which event resets depends on how fio's reaping fell
    # (fio 3.33 on a virtio disk: 7 more in 5 timed runs of 7, 8 and 1 once each; 7 in 4
    # number_ios runs of 4): a submission that resets has
    # its slat sample; one reaped with others after the reset has no latency (runstate
    # TD_RAMP until the next submission); after a whole queue was reaped, only it is extra.
    assert 1 <= byte_ios - ios <= 8, (ios, byte_ios)
    assert byte_ios - 1 <= clat_n <= byte_ios and ios <= slat_n <= ios + 1, (ios, byte_ios, clat_n, slat_n)
    if extra == LIMITED:
        assert byte_ios == 10_000
