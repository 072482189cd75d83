"""fio's latency_target queue-depth search in `ssdtwin fio` (docs/fio.md §2.6).

fio 3.33 (io_u.c lat_target_init/lat_target_check/lat_target_success/__lat_target_failed,
backend.c do_io) starts at depth 1, doubles the depth after every latency_window whose
completions met the target, bisects after a failure, and (without latency_run) runs one
final window at the depth found with the statistics reset, then ends the job. The JSON's
latency_depth is that depth. The runs here are on an in-memory CM6 at 1/454 (tens of ms of
simulated time each).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ssdtwin.drive import Drive
from ssdtwin.fio.run import run_jobs
from twin import CM6, job_file_error, run_cli

WINDOW_NS = 20_000_000
RUNTIME_NS = 1_000_000_000
JOB = """[x]
ioengine=libaio
rw=randwrite
bs=4k
iodepth=32
time_based
runtime=1s
latency_window=20ms
latency_target={target}
latency_percentile={pct}
{extra}
"""


def simulate(tmp_path: Path, target: str, pct: float = 99.0, extra: str = "") -> dict[str, Any]:
    job = tmp_path / "job.fio"
    job.write_text(JOB.format(target=target, pct=pct, extra=extra))
    with Drive.in_memory(CM6, scale=454) as drive:
        _, results = run_jobs(drive, [str(job)])
    return results[0]


def test_a_loose_target_climbs_to_iodepth_then_runs_one_final_window(tmp_path: Path) -> None:
    r = simulate(tmp_path, "1s", pct=100)
    assert (r["latency_depth"], r["error"]) == (32, 0)
    # Windows at depths 1, 2, 4, 8, 16, 32, 32 (the depth held), then the final window
    # after fio's reset_all_stats: the job ends long before runtime=1s and reports the
    # final window only, with the queue full at 32 (fio's 32-63 slot).
    assert 7 * WINDOW_NS <= r["elapsed_ns"] < 7 * WINDOW_NS + 2_000_000
    assert WINDOW_NS <= r["runtime_ns"] < WINDOW_NS + 1_000_000
    assert r["iodepth_level"][5] > 0.9 * sum(r["iodepth_level"])


def test_a_tight_target_settles_at_a_low_depth(tmp_path: Path) -> None:
    r = simulate(tmp_path, "15us")
    assert 2 <= r["latency_depth"] <= 8 and r["error"] == 0
    # The final window ran at that depth: its completions met the target (99 %).
    assert r["write"]["clat"]["n"] > 0
    assert r["runtime_ns"] < 2 * WINDOW_NS


def test_the_depth_found_never_drops_as_the_target_loosens(tmp_path: Path) -> None:
    """Physics: a looser target admits at least the depths a tighter one did. (With
    latency_percentile=100 fio's own algorithm breaks this: every late completion in flight
    lowers the depth once more, io_u.c __lat_target_failed inside io_u_quiesce, so an
    overshoot can fall to depth 1 and end the job; docs/fio.md §2.6.)"""
    targets = [10, 15, 20, 30, 45, 60, 80, 120]
    depths = [simulate(tmp_path, f"{t}us")["latency_depth"] for t in targets]
    assert depths == sorted(depths), dict(zip(targets, depths))
    assert depths[0] < depths[-1] == 32, dict(zip(targets, depths))


def test_latency_run_keeps_probing_for_the_whole_runtime(tmp_path: Path) -> None:
    found = simulate(tmp_path, "30us")
    r = simulate(tmp_path, "30us", extra="latency_run=1")
    # No final window, no statistics reset: the job runs its whole runtime.
    assert found["runtime_ns"] < 2 * WINDOW_NS
    # (the runtime includes the drain of the last I/Os in flight, as for any timed job)
    assert RUNTIME_NS <= r["runtime_ns"] < RUNTIME_NS + 1_000_000 and r["error"] == 0
    assert abs(r["latency_depth"] - found["latency_depth"]) <= 2, (r["latency_depth"], found["latency_depth"])


def test_an_unreachable_target_at_percentile_100_ends_the_job_with_etimedout(tmp_path: Path) -> None:
    img = tmp_path / "cm6"
    run_cli("create", img, "--model", CM6, "--scale", "1/454")
    job = tmp_path / "job.fio"
    job.write_text(JOB.format(target="2us", pct=100, extra=""))
    r = run_cli("fio", img, job, "--output-format=json", check=False)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    j = doc["jobs"][0]
    assert j["error"] == 110
    assert (j["latency_depth"], j["latency_target"], j["latency_percentile"], j["latency_window"]) == (1, 2000, 100.0, 20000)
    assert "err=110/file:io_u.c:1432, func=max latency exceeded, error=Connection timed out" in r.stderr
    r = run_cli("fio", img, job, "--output-format=normal", check=False)
    assert "x: (groupid=0, jobs=1): err=110 (file:io_u.c:1432, func=max latency exceeded, error=Connection timed out): pid=" in r.stdout
    assert "     latency   : target=2000, window=20000, percentile=100.00%, depth=1\n" in r.stdout
    run_cli("check", img)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("latency_percentile=101", "latency_percentile"),
        ("latency_percentile=-1", "latency_percentile"),
        ("latency_percentile=abc", "latency_percentile"),
        ("latency_target=fast", "latency_target"),
        ("latency_window=1x", "latency_window"),
        ("latency_run=maybe", "latency_run"),
    ],
)
def test_bad_latency_options_are_one_line_errors(line: str, message: str) -> None:
    text = job_file_error(f"[a]\nsize=1m\n{line}\n")
    assert "job.fio:3" in text and message in text, text
    if "101" in line:
        assert "0 to 100" in text


# Size-terminated and shorter than one window, so the depth never moves: fio's values and
# the twin's must agree exactly (fio reports the target in ns, the window in us).
SHORT = """[x]
ioengine={engine}
rw=randread
bs=4k
size=1m
iodepth=8
latency_target=10ms
latency_window=10s
latency_percentile=95.5
"""


@pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio (CI installs it)")
def test_json_keys_and_normal_line_match_real_fio(tmp_path: Path) -> None:
    job = tmp_path / "real.fio"
    job.write_text(SHORT.format(engine="null"))
    out = subprocess.run(["fio", "--output-format=normal,json", str(job)], capture_output=True, text=True, timeout=60, check=True)
    start = out.stdout.index("{")
    end = out.stdout.rindex("}") + 1
    real = json.loads(out.stdout[start:end])["jobs"][0]
    real_line = next(ln for ln in out.stdout.splitlines() if ln.startswith("     latency   :"))
    img = tmp_path / "cm6"
    run_cli("create", img, "--model", CM6, "--scale", "1/454")
    twin_job = tmp_path / "twin.fio"
    twin_job.write_text(SHORT.format(engine="libaio"))
    doc = json.loads(run_cli("fio", img, twin_job, "--output-format=json").stdout)["jobs"][0]
    keys = ("latency_depth", "latency_target", "latency_percentile", "latency_window")
    assert (
        {k: doc[k] for k in keys}
        == {k: real[k] for k in keys}
        == {
            "latency_depth": 1,
            "latency_target": 10_000_000,
            "latency_percentile": 95.5,
            "latency_window": 10_000_000,
        }
    )
    assert doc["read"]["total_ios"] == real["read"]["total_ios"] == 256
    normal = run_cli("fio", img, twin_job, "--output-format=normal").stdout
    assert real_line + "\n" in normal
    run_cli("check", img)
