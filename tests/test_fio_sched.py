"""Scheduling between fio jobs (docs/fio.md §2.6): exitall/exit_what and wait_for.

The expected behaviour is fio 3.33's (backend.c run_threads / waitee_running, libfio.c
fio_terminate_threads, init.c wait_for_ok), measured with real fio and `ioengine=null`
on rate-limited jobs so that who stops when is visible in the I/O counts; where fio is
installed the same job file is also run through it and the counts compared.
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
from twin import CM6, job_file_error, run_cli, run_fio

# "short" moves 1,024 reads at 10,000 IOPS (~102 ms), "long" runs at 1,000 IOPS in the same
# group, "g2" at 500 IOPS in a group of its own, "after" behind a stonewall.
EXITALL = """[global]
ioengine={engine}
bs=4k
exitall
exit_what={what}
[short]
rw=read
size=4m
rate_iops=10000
[long]
rw=randread
size=1g
rate_iops=1000
[g2]
new_group
rw=randread
size=400k
rate_iops=500
[after]
rw=read
size=1m
stonewall
"""


def simulate(tmp_path: Path, text: str) -> dict[str, list[dict[str, Any]]]:
    """Run ``text`` on an in-memory CM6 at 1/454; the engine results per job name."""
    job = tmp_path / "job.fio"
    job.write_text(text)
    with Drive.in_memory(CM6, scale=454) as drive:
        run, results = run_jobs(drive, [str(job)])
    out: dict[str, list[dict[str, Any]]] = {}
    for clone, res in zip(run.clones, results):
        out.setdefault(clone.job.name, []).append(res)
    return out


def reads(res: dict[str, list[dict[str, Any]]], job: str) -> int:
    return sum(r["read"]["total_ios"] for r in res[job])


def end_ns(r: dict[str, Any]) -> int:
    return r["start_ns"] + r["elapsed_ns"]


@pytest.mark.parametrize("what", ["group", "stonewall", "all"])
def test_exitall_terminates_what_exit_what_names(what: str, tmp_path: Path) -> None:
    res = simulate(tmp_path, EXITALL.format(engine="libaio", what=what))
    short_end = end_ns(res["short"][0])
    assert reads(res, "short") == 1024
    # "long" (same group) is cut when "short" ends: ~102 ms at 1,000 IOPS.
    assert 100 <= reads(res, "long") <= 104
    assert short_end <= end_ns(res["long"][0]) < short_end + 2_000_000
    if what == "group":
        assert reads(res, "g2") == 100  # another group runs to its end
    else:
        assert 50 <= reads(res, "g2") <= 53  # cut at ~102 ms at 500 IOPS
    if what == "all":
        # Terminated before its batch started: never runs, reports nothing.
        assert reads(res, "after") == 0 and res["after"][0]["runtime_ns"] == 0
    else:
        assert reads(res, "after") == 256
        assert res["after"][0]["start_ns"] >= short_end


def test_without_exitall_exit_what_changes_nothing(tmp_path: Path) -> None:
    text = EXITALL.format(engine="libaio", what="all").replace("exitall\n", "").replace("size=1g", "size=800k")
    res = simulate(tmp_path, text)
    assert [reads(res, j) for j in ("short", "long", "g2", "after")] == [1024, 200, 100, 256]


def test_exitall_in_any_job_applies_to_the_whole_run(tmp_path: Path) -> None:
    # fio's exitall is global: set in the last job, it makes "short" end "long" as well.
    text = EXITALL.format(engine="libaio", what="group").replace("exitall\n", "") + "exitall\n"
    res = simulate(tmp_path, text)
    assert 100 <= reads(res, "long") <= 104


WAIT_FOR = """[global]
ioengine=libaio
bs=4k
rw=read
rate_iops=1000
[first]
size=400k
[other]
size=200k
[second]
wait_for=first
size=200k
[third]
wait_for=second
startdelay=10ms
size=40k
"""


def test_wait_for_starts_a_job_when_its_waitee_has_finished(tmp_path: Path) -> None:
    res = simulate(tmp_path, WAIT_FOR)
    first, other, second, third = (res[j][0] for j in ("first", "other", "second", "third"))
    assert other["start_ns"] == 0 and first["start_ns"] == 0
    assert second["start_ns"] == end_ns(first) > end_ns(other)
    assert third["start_ns"] == end_ns(second)  # its 10 ms start delay passed long before
    assert [reads(res, j) for j in ("first", "other", "second", "third")] == [100, 50, 50, 10]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[a]\nwait_for=a\n", "a job cannot wait for itself"),
        ("[a]\n[b]\nwait_for=nosuch\n", "waitee job nosuch unknown: no job has that name"),
        ("[b]\nwait_for=a\n[a]\n", "waitee job a unknown: it is defined after this job"),
        ("[a]\n[a]\n[b]\nwait_for=a\n", "multiple waitees a found"),
        ("[a]\nexit_what=some\n", "not one of group, stonewall, all"),
    ],
)
def test_bad_scheduling_options_are_one_line_errors(text: str, message: str) -> None:
    assert message in job_file_error("[global]\nsize=1m\n" + text)


def test_exitall_end_to_end_on_an_image(tmp_path: Path) -> None:
    img = tmp_path / "cm6"
    run_cli("create", img, "--model", CM6, "--scale", "1/454")
    r = run_fio(img, EXITALL.format(engine="libaio", what="stonewall"), tmp_path / "run")
    counts = {j["jobname"]: j["read"]["total_ios"] for j in r.doc["jobs"]}
    assert counts["short"] == 1024 and counts["after"] == 256
    assert 100 <= counts["long"] <= 104 and 50 <= counts["g2"] <= 53
    run_cli("check", img)


@pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio (CI installs it)")
def test_exitall_counts_match_real_fio(tmp_path: Path) -> None:
    """Real fio with ioengine=null runs the same file in real time; its counts land within
    3 % (or 5 I/Os) of the twin's: timer granularity and start-up skew."""
    # Real fio runs in wall time: its jobs start a few milliseconds apart, more on a loaded
    # machine (14 ms seen under CI's parallel tests). The short job lasts ~1 s here, not
    # 0.1 s, so that start-up skew is a small share of the rate-limited jobs' counts.
    text = EXITALL.replace("size=4m\nrate_iops=10000", "size=40m\nrate_iops=10000")
    text = text.replace("size=400k\nrate_iops=500", "size=4m\nrate_iops=500")
    job = tmp_path / "real.fio"
    job.write_text(text.format(engine="null", what="stonewall"))
    out = subprocess.run(["fio", "--output-format=json", str(job)], capture_output=True, text=True, timeout=60, check=True)
    jobs = json.loads(out.stdout)["jobs"]
    real = {j["jobname"]: j["read"]["total_ios"] for j in jobs}
    real_short_ms = next(j["read"]["runtime"] for j in jobs if j["jobname"] == "short")
    twin = simulate(tmp_path, text.format(engine="libaio", what="stonewall"))
    assert reads(twin, "short") == 10240 and 1020 <= reads(twin, "long") <= 1030 and 510 <= reads(twin, "g2") <= 516
    # exitall stops the rate-limited jobs when the short one ends, so they read their rate
    # times its runtime. A busy host can only make real fio's short job late (1,056 ms
    # against 1,024 seen in a quiet CI run, 3.1 %: long read 1,056), so those two are held
    # to the twin's counts stretched by real fio's own short runtime; short and after are
    # bound by their sizes and compared as they are.
    stretch = real_short_ms / (twin["short"][0]["elapsed_ns"] / 1e6)
    expected = {name: reads(twin, name) * (stretch if name in ("long", "g2") else 1.0) for name in real}
    for name in ("short", "long", "g2", "after"):
        tolerance = max(5, 0.03 * expected[name])
        assert abs(real[name] - expected[name]) <= tolerance, (name, real, expected, real_short_ms)


FLOW = """[global]
ioengine={engine}
bs=4k
size=1g
time_based
runtime={runtime}
[a]
rw=randread
flow=3
{sleep}
[b]
rw=randread
flow=2
{sleep}
[c]
rw=randread
flow=1
{sleep}
[solo]
rw=randread
flow_id=7
flow=1
rate_iops=1000
"""


@pytest.mark.parametrize("sleep", ["", "flow_sleep=100"])
def test_flow_shares_io_by_weight(sleep: str, tmp_path: Path) -> None:
    res = simulate(tmp_path, FLOW.format(engine="libaio", runtime="200ms", sleep=sleep))
    n = {j: reads(res, j) for j in ("a", "b", "c", "solo")}
    total = n["a"] + n["b"] + n["c"]
    # fio's HOWTO: weights 3:2:1 give "a roughly 3:2:1 ratio"; flow.c keeps each member's
    # share of the group's counter at or below its share of the weight, to one I/O.
    for job, weight in (("a", 3), ("b", 2), ("c", 1)):
        assert abs(n[job] - total * weight / 6) <= 2, n
    assert n["solo"] == pytest.approx(200, abs=2), n  # its own group: only its rate limit binds


def test_a_flow_member_that_can_never_run_is_an_error(tmp_path: Path) -> None:
    # "b" (behind a stonewall) holds half the weight, so "a" is over its share after its
    # second I/O and nothing can move it: fio waits forever, the twin says why.
    img = tmp_path / "cm6"
    run_cli("create", img, "--model", CM6, "--scale", "1/454")
    job = tmp_path / "job.fio"
    job.write_text("[global]\nioengine=libaio\nsize=1m\nflow=1\n[a]\nrw=read\n[b]\nstonewall\nrw=read\n")
    r = run_cli("fio", img, job, check=False)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "flow_id=0" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    run_cli("check", img)


def _real_flow_run(job: Path) -> dict[str, int]:
    """Real fio's I/Os per job of the flow group in `job`. fio's flow control keeps its 3:2:1
    only while all three threads get CPU: a CI run on a loaded machine once gave 26,128 /
    3,498 / 1,750 (a/c 14.9), and another 4,751 / 3,265 / 1,634 (a/c 2.908, 3.1 % under 3).
    Such a run says nothing of fio's rule, so fio runs again, at most five times in all, until
    a/c and b/c are within 2 % of 3 and 2: inside the 3 % the test then holds the twin to."""
    for _ in range(5):
        out = subprocess.run(["fio", "--output-format=json", str(job)], capture_output=True, text=True, timeout=60, check=True)
        real = {j["jobname"]: j["read"]["total_ios"] for j in json.loads(out.stdout)["jobs"]}
        if real["c"] and all(abs(real[k] / real["c"] / w - 1) < 0.02 for k, w in (("a", 3), ("b", 2))):
            break
    return real


@pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio (CI installs it)")
def test_flow_ratios_match_real_fio(tmp_path: Path) -> None:
    job = tmp_path / "real.fio"
    job.write_text(FLOW.format(engine="null", runtime="300ms", sleep="flow_sleep=100"))
    real = _real_flow_run(job)
    twin = simulate(tmp_path, FLOW.format(engine="libaio", runtime="300ms", sleep="flow_sleep=100"))
    for name in ("a", "b"):
        real_ratio = real[name] / real["c"]
        twin_ratio = reads(twin, name) / reads(twin, "c")
        assert twin_ratio == pytest.approx(real_ratio, rel=0.03), (real, {k: reads(twin, k) for k in twin})
