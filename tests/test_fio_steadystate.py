"""fio's steady-state detection in `ssdtwin fio` (docs/fio.md §2.6): steadystate/ss, ss_dur, ss_ramp.

The expected behaviour is fio 3.33's (steadystate.c steadystate_check, steadystate_slope,
steadystate_deviation; stat.c's JSON "steadystate" object and show_ss_normal): once a
second each running job's IOPS and bandwidth since the previous look are measured, a window
of ss_dur samples after ss_ramp + 1 s is judged, and a job that meets its criterion ends.
Rate-limited jobs make the per-second numbers exact, so the second a job ends is known in
advance; where fio is installed the same job file also runs through it and the JSON blocks
are compared.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ssdtwin.drive import Drive
from ssdtwin.fio import parse_string
from ssdtwin.fio.errors import FioJobError
from ssdtwin.fio.run import run_jobs
from twin import CM6, job_file_error, run_cli, run_fio

SECOND_NS = 1_000_000_000

RATED = """[global]
ioengine={engine}
rw=read
bs=4k
size=1g
time_based
runtime={runtime}
rate_iops={rate}
[x]
{ss}
"""


def simulate(tmp_path: Path, text: str) -> list[dict[str, Any]]:
    """Run ``text`` on an in-memory CM6 at 1/454; the engine results in thread order."""
    job = tmp_path / "job.fio"
    job.write_text(text)
    with Drive.in_memory(CM6, scale=454) as drive:
        _, results = run_jobs(drive, [str(job)])
    return list(results)


def rated(ss: str, runtime: int = 30, rate: int = 1000, engine: str = "libaio") -> str:
    return RATED.format(engine=engine, runtime=runtime, rate=rate, ss=ss)


@pytest.mark.parametrize(
    ("ss", "end_s"),
    [
        # Looks at 1..5 s; the fifth fills the window of five 1000s: deviation 0 < 10%.
        ("ss=iops:10%\nss_dur=5", 5),
        # Samples start once ss_ramp + 1 s has passed: looks at 3, 4, 5 s.
        ("ss=iops_slope:0.1%\nss_dur=3\nss_ramp=2", 5),
        # ss_ramp of 2.5 s: the look at 3 s is too early, samples at 4, 5, 6 s.
        ("ss=bw:1k\nss_dur=3\nss_ramp=2500ms", 6),
        # A one-second window judges each sample alone (ss_dur is cut to whole seconds).
        ("steadystate=bw:5%\nsteadystate_duration=1500ms", 1),
        ("ss=iops:0.5\nss_dur=1", 1),
    ],
)
def test_a_settled_job_ends_at_the_second_fios_rule_says(ss: str, end_s: int, tmp_path: Path) -> None:
    [r] = simulate(tmp_path, rated(ss))
    st = r["steadystate"]
    assert st["attained"] is True
    # 1,000 IOPS for end_s seconds, then the look that attains ends the job.
    assert r["read"]["total_ios"] == 1000 * end_s
    assert r["runtime_ns"] == end_s * SECOND_NS
    assert st["iops"] == [1000] * st["duration_s"]
    assert st["bw"] == [4096 * 1000] * st["duration_s"]


def test_ramp_time_is_not_looked_at_and_rearms_the_looks(tmp_path: Path) -> None:
    """fio skips a ramping job (TD_RAMP) and re-arms its looks at the end of the ramp
    (reset_all_stats -> helper_reset). Real fio 3.33 with ramp_time=2.5: job_runtime
    3,028 ms and 3,028 I/Os after the ramp; the twin looks at 3.5, 4.5, 5.5 s. The first
    submission after the ramp resets fio's statistics after td_io_queue counted it: its bytes
    count, not the I/O (docs/fio.md §4 ramp_time; fio 3.33 null iodepth=4 rate_iops=1000
    ramp_time=500ms runtime=1s: 1,001 I/Os, 1,002 x 4 KiB)."""
    [r] = simulate(tmp_path, rated("ramp_time=2500ms\nss=iops:10%\nss_dur=3"))
    assert r["steadystate"]["attained"] is True and r["steadystate"]["iops"] == [1000] * 3
    assert r["runtime_ns"] == 3 * SECOND_NS and (r["read"]["total_ios"], r["read"]["io_bytes"]) == (2999, 3000 * 4096)


def test_a_slope_one_second_window_is_never_attained(tmp_path: Path) -> None:
    """fio's slope over one sample divides 0 by 0: NaN is never under the limit."""
    [r] = simulate(tmp_path, rated("ss=iops_slope:5%\nss_dur=1", runtime=3))
    assert r["steadystate"]["attained"] is False and r["read"]["total_ios"] == 3000
    # NaN (null once the result has passed through JSON).
    criterion = r["steadystate"]["criterion"]
    assert criterion is None or math.isnan(criterion)


@pytest.mark.parametrize(("dur", "window"), [(2, [1000, 1000]), (5, [1000, 1000, 1000, 0, 0])])
def test_a_job_that_never_settles_runs_to_its_runtime(dur: int, window: list[int], tmp_path: Path) -> None:
    # A deviation of 0 is never below a limit of 0; a 5-sample window never fills in 3 s.
    [r] = simulate(tmp_path, rated(f"ss=iops:0\nss_dur={dur}", runtime=3))
    assert r["read"]["total_ios"] == 3000 and r["runtime_ns"] == 3 * SECOND_NS
    assert r["steadystate"]["attained"] is False
    assert r["steadystate"]["iops"] == window


def test_group_reporting_judges_the_group_as_a_whole(tmp_path: Path) -> None:
    """Two clones at 100 IOPS: the group's window holds their sum, and both end with it
    (real fio: iops window [200, 200], attained, ~1.9 s each)."""
    text = rated("numjobs=2\ngroup_reporting\nss=iops:10%\nss_dur=2", runtime=10, rate=100)
    results = simulate(tmp_path, text)
    assert [r["read"]["total_ios"] for r in results] == [200, 200]
    assert [r["runtime_ns"] for r in results] == [2 * SECOND_NS] * 2
    # The last clone of the group keeps the window (fio steadystate_setup).
    assert [r["steadystate"]["holder"] for r in results] == [False, True]
    assert results[1]["steadystate"]["iops"] == [200, 200]
    # Without group_reporting each clone is judged on its own numbers.
    results = simulate(tmp_path, rated("numjobs=2\nss=iops:10%\nss_dur=2", runtime=10, rate=100))
    assert [r["steadystate"]["iops"] for r in results] == [[100, 100]] * 2


def _fio_slope_pct(window: list[int]) -> float:
    """fio's steadystate_slope criterion, written out independently of the engine."""
    n = len(window)
    xs = range(n)
    sx, sy, sxy, sxx = sum(xs), sum(window), sum(x * y for x, y in zip(xs, window)), sum(x * x for x in xs)
    slope = (sxy - sx * sy / n) / (sxx - sx * sx / n)
    return 100.0 * slope / (sy // n)


GC_JOB = """[w]
ioengine=libaio
iodepth=32
rw=randwrite
bs=128k
time_based
runtime=20
write_iops_log=w
log_avg_msec=1000
{ss}
"""


def test_random_writes_settle_after_gc_and_end_at_the_expected_second(tmp_path: Path) -> None:
    """A fresh 9.4 GB drive takes ~33k random 128k writes a second until it is full, then
    GC brings it to ~10k. The per-second IOPS of a run without ss (its iops log at 1 s)
    say when fio's rule (iops_slope:2% over 10 s) is first met; the run with ss ends there."""
    [free] = simulate(tmp_path, GC_JOB.format(ss=""))
    per_s = [row[1] for row in free["logs"]["iops"]]
    expected = next(s for s in range(10, len(per_s) + 1) if abs(_fio_slope_pct(per_s[s - 10 : s])) < 2.0)
    # GC has kicked in: the fresh drive's first second is far above the settled window.
    window = per_s[expected - 10 : expected]
    assert min(per_s[:2]) > 2 * sum(window) / len(window)
    assert free["write"]["io_bytes"] > 9_390_000_000
    [r] = simulate(tmp_path, GC_JOB.format(ss="ss=iops_slope:2%\nss_dur=10"))
    st = r["steadystate"]
    assert st["attained"] is True and st["iops"] == per_s[expected - 10 : expected]
    assert abs(st["criterion"] - _fio_slope_pct(per_s[expected - 10 : expected])) < 1e-9
    # The look at `expected` s ends the job; the 32 writes in flight then complete.
    assert expected * SECOND_NS <= r["runtime_ns"] < expected * SECOND_NS + SECOND_NS // 10
    assert expected < 20
    # A criterion the noisy GC regime never meets: the job runs its 20 s.
    [strict] = simulate(tmp_path, GC_JOB.format(ss="ss=iops_slope:0.001%\nss_dur=10"))
    assert strict["steadystate"]["attained"] is False
    assert 20 * SECOND_NS <= strict["runtime_ns"] < 20 * SECOND_NS + SECOND_NS // 10


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("ss=fast:10%", "criterion 'fast' is not one of iops, iops_slope, bw, bw_slope"),
        ("ss=iops", "steadystate threshold must be specified in addition to criterion"),
        ("ss=iops:abc", "could not parse steadystate IOPS threshold 'abc'"),
        ("ss=iops_slope:x%", "could not parse steadystate threshold percentage 'x'"),
        ("steadystate=bw:2z", "could not parse steadystate BW threshold '2z' (expected bytes/s, e.g. 2MiB)"),
        ("ss_dur=2d", "max value out of range"),
    ],
)
def test_bad_values_are_one_line_errors(line: str, message: str) -> None:
    text = job_file_error(f"[global]\nsize=1m\n[a]\n{line}\n")
    assert message in text
    assert text.startswith(f"job.fio:4: {line}")


def test_steadystate_options_must_agree_within_a_group() -> None:
    with pytest.raises(FioJobError) as e:
        parse_string("[global]\nsize=1m\n[a]\n[b]\nss=iops:5%\nss_dur=2\n", name="job.fio")
    assert str(e.value).startswith("job.fio:5: ss=iops:5%: job b: ")
    assert "must be consistent within reporting groups" in str(e.value)
    # In a group of its own it is fine (fio: new_group or stonewall).
    parse_string("[global]\nsize=1m\n[a]\n[b]\nnew_group\nss=iops:5%\nss_dur=2\n", name="job.fio")


def test_steadystate_end_to_end_json_and_normal_output(tmp_path: Path) -> None:
    img = tmp_path / "cm6"
    run_cli("create", img, "--model", CM6, "--scale", "1/454")
    r = run_fio(img, rated("ss=iops:10%\nss_dur=3", runtime=10), tmp_path / "run")
    [job] = r.doc["jobs"]
    assert job["steadystate"] == {
        "ss": "iops:10.000000%",
        "duration": 3,
        "attained": 1,
        "criterion": "0.000000%",
        "max_deviation": 0.0,
        "slope": 0.0,
        "data": {"bw_mean": 4096000, "iops_mean": 1000, "iops": [1000] * 3, "bw": [4096000] * 3},
    }
    assert list(job)[-1] == "steadystate" and job["read"]["total_ios"] == 3000
    job_file = tmp_path / "n.fio"
    job_file.write_text(rated("ss=iops_slope:1%\nss_dur=3", runtime=10))
    text = run_cli("fio", img, job_file).stdout
    assert "  steadystate  : attained=yes, bw=4000KiB/s (4000kB/s), iops=1000, iops slope=0.000%\n" in text
    run_cli("check", img)


@pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio (CI installs it)")
def test_json_block_matches_real_fio(tmp_path: Path) -> None:
    """Real fio (ioengine=null, same job): same keys, types and, the job being rate-limited,
    the same verdict and means (fio's per-second counts jitter by an I/O or two when idle)."""
    job = tmp_path / "real.fio"
    job.write_text(rated("ss=iops:10%\nss_dur=2", runtime=10, engine="null"))
    out = subprocess.run(["fio", "--output-format=json", str(job)], capture_output=True, text=True, timeout=60, check=True)
    theirs = json.loads(out.stdout)["jobs"][0]["steadystate"]
    img = tmp_path / "cm6"
    run_cli("create", img, "--model", CM6, "--scale", "1/454")
    ours = run_fio(img, rated("ss=iops:10%\nss_dur=2", runtime=10), tmp_path / "run").doc["jobs"][0]["steadystate"]

    def shape(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: shape(x) for k, x in v.items()}
        if isinstance(v, list):
            return [shape(x) for x in v]
        return type(v).__name__

    assert shape(ours) == shape(theirs)
    assert list(ours) == list(theirs) and list(ours["data"]) == list(theirs["data"])
    for key in ("ss", "duration", "attained"):
        assert ours[key] == theirs[key]
    # fio's looks land a few ms early or late on a loaded machine: a few I/Os either way.
    assert abs(ours["data"]["iops_mean"] - theirs["data"]["iops_mean"]) <= 20
    assert all(abs(a - b) <= 50 for a, b in zip(ours["data"]["iops"], theirs["data"]["iops"]))
    assert float(ours["criterion"].rstrip("%")) < 10 and float(theirs["criterion"].rstrip("%")) < 10
