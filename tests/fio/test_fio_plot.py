"""fio-plot (PyPI fio-plot 1.1.x) must chart our JSON and logs (docs/fio.md §6.4).

Skipped when fio-plot is not installed. The lead adds the same check on real engine
output; here the statistics come from the fake engine.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from fio_fake_engine import run as fake_run

from ssdtwin.fio import output, parse_string
from ssdtwin.fio.logs import write_logs

pytestmark = pytest.mark.tools


@pytest.fixture(scope="module")
def bench_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("fio-plot") is None:
        pytest.skip("fio-plot is not installed (pip install fio-plot)")
    out = tmp_path_factory.mktemp("fioplot")
    for depth in (1, 4, 16):
        name = f"randread-iodepth-{depth}-numjobs-1"
        # the layout and log names bench-fio writes (fio-plot 1.1.21, docs/sources.md)
        text = (
            "[global]\nioengine=libaio\ndirect=1\nfilename=/dev/nvme0n1\nrw=randread\nbs=4k\n"
            f"time_based\nruntime=3\nlog_avg_msec=1000\n[{name}]\niodepth={depth}\nnumjobs=1\n"
            f"write_bw_log={name}\nwrite_iops_log={name}\nwrite_lat_log={name}\n"
        )
        run = parse_string(text, env={})
        results = fake_run(run.to_engine(1 << 30, 512), mean_lat_ns=20_000 * depth)
        (out / f"{name}.json").write_text(output.json_text(run, results, timestamp_ms=1795311722860))
        write_logs(run, results, out)
    return out


@pytest.mark.parametrize(
    "args",
    [
        ["-l", "-d", "1", "4", "16", "-n", "1"],
        ["-H", "-d", "4", "-n", "1"],
        ["-g", "-d", "1", "4", "16", "-n", "1", "-t", "bw", "iops", "lat"],
    ],
    ids=["qd-bars", "histogram", "logs"],
)
def test_fio_plot_draws_our_output(bench_dir: Path, args: list) -> None:
    png = bench_dir / f"plot{args[0]}.png"
    proc = subprocess.run(
        ["fio-plot", "-i", str(bench_dir), "-T", "ssdtwin", "-r", "randread", "-o", str(png), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=bench_dir,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ERROR" not in proc.stdout
    assert png.exists() and png.stat().st_size > 10_000
