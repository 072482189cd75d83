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
