"""`ssdtwin pts` and ssdtwin.pts.run on a small twin: bad input, Ctrl-C and determinism
(the report folder contract, docs/pts.md, Report folder, and the JSON output are checked in
test_records.py, on its one reduced run of every PTS test).

The drive is a CM6-V 3.2 TB at 1/454 (8 superblocks, 7.8 GB): every test runs 1 s rounds
of a reduced element set, so the whole file stays within a few seconds of CPU per test."""

from __future__ import annotations

import csv
import json
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ssdtwin.pts import runner
from twin import SSDTWIN, check_image, copy_image, image_digest, run_cli

MODEL = "kioxia-cm6-v-3.2t"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pts-template") / "cm6v"
    run_cli("create", d, "--model", MODEL, "--scale", "1/454")
    return d


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_api_returns_frames(fresh: Path, tmp_path: Path) -> None:
    img = copy_image(fresh, tmp_path / "cm6v")
    res = runner.run(str(img), ["lat"], tmp_path / "r", 1.0, lat_bs=(4096,), lat_mixes=(0,), max_rounds=5, render=False)
    df = res.frames["lat"]
    assert list(df.columns) == runner.COLUMNS and len(df) >= 5 and (df["write_iops"] > 0).all()
    assert res.status["lat"] in ("steady", "not steady") and res.steady["lat"]["variables"][0]["element"] == "rnd-4k-0_100"
    assert list(res.tables["lat"]["mix"]) == ["0/100"]


def test_same_run_twice_gives_the_same_rounds(fresh: Path, tmp_path: Path) -> None:
    out = []
    for i in (1, 2):
        img = copy_image(fresh, tmp_path / f"img{i}")
        quick = ["--iops-bs", "64k", "--iops-mixes", "65", "--round", "1s", "--max-rounds", "5", "-q", "--no-render"]
        run_cli("pts", img, "--tests", "iops", *quick, "--report", tmp_path / f"r{i}")
        out.append((tmp_path / f"r{i}" / "iops" / "rounds.csv").read_text())
    assert out[0] == out[1] and len(out[0].splitlines()) >= 6


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tests", "iops,bogus"], "--tests: unknown test 'bogus'"),
        (["--round", "0.5s"], "--round 0.5s: a round from 1 s to 1 day"),
        (["--max-rounds", "3"], "--max-rounds 3"),
        (["--tc-qd", "lat=1"], "--tc-qd 'lat=1'"),
        # Was: the last one taken silently, in a list or across repeated options.
        (["--tc-qd", "tp=1x256,tp=1x32"], "--tc-qd: tp given more than once (tp=1x256, tp=1x32); give each test once"),
        (["--tc-qd", "iops=4x32", "--tc-qd", "IOPS=16x32"], "--tc-qd: iops given more than once (iops=4x32, IOPS=16x32)"),
        (["--purge", "shred"], "--purge shred"),
        # Past fio's largest block size: refused here, not by fio after the drive was purged.
        (["--iops-bs", "1t"], "--iops-bs: block sizes are multiples of 512 bytes, at most 2147479552"),
        (["--tests", "dirth", "--dirth-bs", "3g"], "--dirth-bs 3221225472: a block size, a multiple of 512 bytes, at most 2147479552"),
        # Was: a list taken silently as its first size.
        (["--tests", "dirth", "--dirth-bs", "4k,8k"], "--dirth-bs '4k,8k': one block size (e.g. 4k)"),
        # Were run twice under one name (files replaced, rows doubled).
        (["--lat-bs", "4k,8k,4k"], "--lat-bs: 4k given more than once"),
        (["--iops-mixes", "100,0,100"], "--iops-mixes: 100 given more than once"),
        (["--hir-waits", "5s,5s"], "--hir-waits: 5 given more than once"),
        (["--wsat-min-fills", "101"], "--wsat-min-fills 101: drive fills from 0 to 100"),
    ],
)
def test_bad_options_are_one_line_and_touch_nothing(fresh: Path, tmp_path: Path, args: list[str], message: str) -> None:
    img = copy_image(fresh, tmp_path / "cm6v")
    before = image_digest(img)
    r = run_cli("pts", img, "--report", tmp_path / "r", *args, check=False)
    assert r.returncode != 0 and len(r.stderr_lines) == 1 and message in r.stderr, r.stderr
    assert r.stderr.startswith("ssdtwin pts run: error: ")  # `pts TARGET` is `pts run TARGET`
    assert image_digest(img) == before and not (tmp_path / "r").exists()


def test_report_folder_that_is_not_a_report_is_refused(fresh: Path, tmp_path: Path) -> None:
    img = copy_image(fresh, tmp_path / "cm6v")
    before = image_digest(img)
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "notes.txt").write_text("mine")
    r = run_cli("pts", img, "--tests", "lat", "--report", tmp_path / "r", check=False)
    assert r.returncode == 1 and len(r.stderr_lines) == 1 and "is not a previous ssdtwin PTS report" in r.stderr
    assert image_digest(img) == before and (tmp_path / "r" / "notes.txt").read_text() == "mine"


def test_report_folder_that_cannot_be_created_is_refused_before_the_run(fresh: Path, tmp_path: Path) -> None:
    # Was "ssdtwin pts: error: /proc/...: No such file or directory", naming no option, once
    # the target had been opened.
    img = copy_image(fresh, tmp_path / "cm6v")
    before = image_digest(img)
    r = run_cli("pts", img, "--tests", "lat", "--report", "/proc/ssdtwin-pts-report", check=False)
    assert r.returncode == 1 and len(r.stderr_lines) == 1, r.stderr
    assert "--report /proc/ssdtwin-pts-report: cannot create a folder in /proc" in r.stderr
    assert image_digest(img) == before
    # The same for compare's --report (the reports compared are not looked at first: the
    # refusal comes before any work).
    rep = tmp_path / "rep"
    rep.mkdir()
    (rep / "pts.json").write_text(json.dumps({"format": "ssdtwin-pts"}))
    r = run_cli("pts", "compare", rep, rep, "--report", "/proc/ssdtwin-pts-compare", check=False)
    assert r.returncode == 1 and len(r.stderr_lines) == 1, r.stderr
    assert "--report /proc/ssdtwin-pts-compare: cannot create a folder in /proc" in r.stderr


def real_device_file(tmp_path: Path, size: int = 1 << 20) -> Path:
    """A file standing for a real device (`ssdtwin pts` runs the real fio on it), or a skip:
    the real-fio target checks for fio before the device, so without fio every refusal would
    be fio's error."""
    pytest.importorskip("ssdtwin.pts.realfio", reason="the real-fio target is another module")
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed (CI installs it)")
    dev = tmp_path / "disk.img"
    dev.write_bytes(b"\x5a" * size)
    return dev


def test_twin_only_options_are_refused_on_a_real_target(tmp_path: Path) -> None:
    # Were ignored: a lab run with --namespace 2 ran on the whole file, --seed 5 on fio's seeds.
    dev = real_device_file(tmp_path)
    for args, message in (
        (["--namespace", "2"], "--namespace 2: only for a twin (a drive image)"),
        (["--seed", "5"], "--seed 5: only for a twin (a drive image)"),
    ):
        r = run_cli("pts", dev, "--tests", "lat", "--yes-destroy-data", "--report", tmp_path / "r", *args, check=False)
        assert r.returncode == 1 and len(r.stderr_lines) == 1 and message in r.stderr, r.stderr
    assert dev.read_bytes() == b"\x5a" * (1 << 20) and not (tmp_path / "r").exists()


def test_a_damaged_pts_json_is_named(tmp_path: Path) -> None:
    # Was "not an ssdtwin PTS report (no pts.json of format ssdtwin-pts)" for a pts.json
    # that is there but damaged.
    rep = tmp_path / "r"
    rep.mkdir()
    damage = (("", "pts.json is empty"), ('{"format": "ssdtwin-pts", "tes', "pts.json is not JSON"), ('{"format": "fio"}', "format 'fio'"))
    for text, why in damage:
        (rep / "pts.json").write_text(text)
        for args in (["pts", "report", rep], ["pts", "compare", rep, rep, "--report", tmp_path / "c"], ["pts", "x", "--report", rep]):
            r = run_cli(*args, check=False)
            assert r.returncode == 1 and len(r.stderr_lines) == 1 and f"{rep / 'pts.json'}" in r.stderr and why in r.stderr, r.stderr
    (rep / "pts.json").unlink()
    r = run_cli("pts", "report", rep, check=False)
    assert r.returncode == 1 and "(no pts.json)" in r.stderr


def test_namespace_numbers_outside_nvme_nsids_are_refused(fresh: Path, tmp_path: Path) -> None:
    # Were: IMAGE:ns0 ran on namespace 1; IMAGE:ns99999999999999999999 was a traceback.
    img = copy_image(fresh, tmp_path / "cm6v")
    before = image_digest(img)
    for target, args, message in (
        (f"{img}:ns0", [], f"{img}:ns0: namespace 0: an NSID from 1 to 4294967294"),
        (f"{img}:ns{2**70}", [], f"{img}:ns{2**70}: namespace {2**70}: an NSID from 1 to 4294967294"),
        (str(img), ["--namespace", "4294967295"], "--namespace 4294967295: an NSID from 1 to 4294967294"),
    ):
        r = run_cli("pts", target, "--tests", "lat", "--report", tmp_path / "r", *args, check=False)
        assert r.returncode == 1 and r.stderr_lines == [f"ssdtwin pts run: error: {message}"], r.stderr
    assert image_digest(img) == before


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_block_sizes_that_are_not_whole_lbas_are_refused_before_the_purge(fresh: Path, tmp_path: Path, jobs: str) -> None:
    # Was: on a 4096-byte-LBA namespace the default --lat-bs 8k,4k,512 purged and wrote the
    # drive (WIPC), then failed the test on its 512-byte element.
    img = copy_image(fresh, tmp_path / "cm6v")
    run_cli("nvme", "format", img, "-n", "1", "--lbaf", "1")
    before = image_digest(img)
    r = run_cli("pts", img, "--tests", "lat,tp", "-j", jobs, "--report", tmp_path / "r", check=False)
    assert r.returncode == 1 and len(r.stderr_lines) == 1, r.stderr
    assert (
        f"--lat-bs: 512 is not a multiple of {img}'s 4096-byte LBA (nothing was written); give whole LBAs, e.g. --lat-bs 8k,4k" in r.stderr
    )
    assert image_digest(img) == before and not (tmp_path / "r").exists()
    # CBW's composite sizes (512 B to 3.5 KiB among them) are the spec's: no option to fix.
    r = run_cli("pts", img, "--tests", "cbw", "-j", jobs, "--report", tmp_path / "r", check=False)
    assert r.returncode == 1 and len(r.stderr_lines) == 1 and "CBW needs 512-byte LBAs" in r.stderr, r.stderr
    assert image_digest(img) == before and not (tmp_path / "r").exists()


def test_a_target_smaller_than_a_block_is_refused_before_its_purge(tmp_path: Path) -> None:
    # Was: the file was purged (zeroed), then fio refused WIPC's 128 KiB block.
    dev = real_device_file(tmp_path, 100_000)
    r = run_cli("pts", dev, "--tests", "lat", "--yes-destroy-data", "--report", tmp_path / "r", check=False)
    assert r.returncode == 1 and len(r.stderr_lines) == 1, r.stderr
    assert f"{dev}: 100000 bytes hold no 128k block of the tests asked for (nothing was written)" in r.stderr
    assert dev.read_bytes() == b"\x5a" * 100_000 and not (tmp_path / "r").exists()


def test_wsat_segment_is_held_to_the_time_limit(fresh: Path, tmp_path: Path) -> None:
    # Was: a segment longer than --wsat-max-time ran whole (60 s of stimulus for a 2 s limit).
    img = copy_image(fresh, tmp_path / "cm6v")
    args = ["--tests", "wsat", "--round", "1s", "--wsat-segment", "60s", "--wsat-max-time", "2s", "-o", "json", "--no-render"]
    out = run_cli("pts", img, *args, "--report", tmp_path / "r").json()
    wsat = out["manifest"]["tests"]["wsat"]
    assert wsat["status"] == "complete" and wsat["sim_s"] <= 2.5, wsat
    assert "time limit 2 s reached" in wsat["message"], wsat


def test_wsat_stop_steady_judges_only_after_the_wipc_amount_is_written(fresh: Path, tmp_path: Path) -> None:
    """--wsat-stop-steady judges a 5-segment window only from the segment that took the writes
    past --wsat-min-fills (2, the PTS WIPC's 2x capacity) on. Was: WSAT stopped at its first
    five segments, the flat fresh-out-of-box rate, 1.05 drive fills into the test."""
    img = copy_image(fresh, tmp_path / "cm6v")
    args = ["--tests", "wsat", "--round", "1s", "--wsat-stop-steady", "-q", "--no-render"]
    run_cli("pts", img, *args, "--report", tmp_path / "r")
    check_image(img)
    result = json.loads((tmp_path / "r" / "wsat" / "result.json").read_text())
    table = rows(tmp_path / "r" / "wsat" / "table.csv")
    fills = {int(r["segment"]): float(r["drive_fills"]) for r in table}
    window = result["extra"]["steady"]["rounds"]
    assert result["settings"]["steady_min_fills"] == 2.0 and result["extra"]["stop"].startswith("steady state")
    first_judged = min(s for s, f in fills.items() if f >= 2.0)
    assert window[0] >= first_judged and fills[window[-1]] >= 2.0 and window[-1] == max(fills), (window, fills)
    # --wsat-min-fills 0 judges from the first segment, as before the guard
    run_cli("pts", copy_image(fresh, tmp_path / "cm6v-0"), *args, "--wsat-min-fills", "0", "--report", tmp_path / "r0")
    result0 = json.loads((tmp_path / "r0" / "wsat" / "result.json").read_text())
    assert result0["extra"]["steady"]["rounds"] == [1, 2, 3, 4, 5]


def test_missing_target_is_one_line(tmp_path: Path) -> None:
    r = run_cli("pts", tmp_path / "nope", "--tests", "lat", "--report", tmp_path / "r", check=False)
    assert r.returncode == 1 and len(r.stderr_lines) == 1 and "no such drive image" in r.stderr
    assert not (tmp_path / "r").exists()


def test_real_target_without_permission_is_refused(tmp_path: Path) -> None:
    dev = real_device_file(tmp_path)
    r = run_cli("pts", dev, "--tests", "lat", "--report", tmp_path / "r", check=False)
    assert r.returncode != 0 and len(r.stderr_lines) == 1 and "--yes-destroy-data" in r.stderr, r.stderr
    assert dev.read_bytes() == b"\x5a" * (1 << 20)


def test_ctrl_c_keeps_the_rounds_done(fresh: Path, tmp_path: Path) -> None:
    img = copy_image(fresh, tmp_path / "cm6v")
    rep = tmp_path / "r"
    argv = ["pts", str(img), "--tests", "wsat", "--round", "1s", "--wsat-fills", "100", "--report", str(rep), "--no-render"]
    p = subprocess.Popen([*SSDTWIN, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while not ((rep / "wsat" / "rounds.csv").is_file() and len(rows(rep / "wsat" / "rounds.csv")) >= 2):
            assert p.poll() is None, p.communicate()
            assert time.monotonic() - t0 < 120, "no rounds within 120 s"
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, err
    assert "interrupted" in err and str(rep) in err
    man = json.loads((rep / "pts.json").read_text())
    assert man["interrupted"] is True and man["complete"] is False and man["tests"]["wsat"]["status"] == "interrupted"
    done = rows(rep / "wsat" / "rounds.csv")
    assert len(done) >= 2
    for r in done:
        assert (rep / "wsat" / "fio" / f"s{int(r['segment']):04d}-{r['element']}.json").is_file()
    assert json.loads((rep / "wsat" / "result.json").read_text())["status"] == "interrupted"
    # the image (checked by the autouse fixture) is a consistent drive


def test_force_replaces_a_previous_report(fresh: Path, tmp_path: Path) -> None:
    img = copy_image(fresh, tmp_path / "cm6v")
    rep = tmp_path / "r"
    quick = ["--tests", "lat", "--lat-bs", "4k", "--lat-mixes", "0", "--round", "1s", "-q", "--no-render"]
    run_cli("pts", img, *quick, "--report", rep)
    again = run_cli("pts", img, *quick, "--report", rep, check=False)
    assert again.returncode == 1 and "--force" in again.stderr
    run_cli("pts", img, *quick, "--report", rep, "--force")
    assert json.loads((rep / "pts.json").read_text())["complete"] is True


def test_drive_idle_lets_gc_reclaim_space(fresh: Path, tmp_path: Path) -> None:
    from ssdtwin import Drive

    img = copy_image(fresh, tmp_path / "cm6v")
    with Drive.open(img) as d:
        assert d.idle(1.0) == 0  # a fresh drive has nothing to collect
        d.precondition(1, "seq", 131072, loops=1.0, seed=1)
        d.precondition(1, "rand", 4096, loops=1.0, seed=2)
        moved = d.idle(30.0)
        assert moved > 0
        assert d.idle(30.0) <= moved  # less left to do the second time
        with pytest.raises(ValueError, match="idle -1"):
            d.idle(-1)


def test_a_failing_test_is_marked_and_the_next_runs(fresh: Path, tmp_path: Path) -> None:
    from ssdtwin.pts.runner import Events
    from ssdtwin.pts.target import PtsError
    from ssdtwin.pts.twin import TwinTarget

    class Failing(TwinTarget):
        def run_fio(self, job_path: Path, json_path: Path) -> dict:
            if job_path.name == "rnd-4k-100_0.fio":
                raise PtsError(f"{job_path}: fio: boom")
            return super().run_fio(job_path, json_path)

    class Seen(Events):
        def __init__(self) -> None:
            self.log: list[tuple[str, str]] = []

        def test_started(self, test: str, title: str, plan: str) -> None:
            self.log.append((test, "start"))

        def step(self, test: str, what: str, frac: float | None, status: str) -> None:
            assert frac is None or 0 <= frac <= 1
            self.log.append((test, "step"))

        def test_done(self, test: str, status: str, message: str) -> None:
            self.log.append((test, status))

    img = copy_image(fresh, tmp_path / "cm6v")
    target = Failing(str(img))
    seen = Seen()
    try:
        res = runner.run(target, ["lat", "wsat"], tmp_path / "r", 1.0, lat_bs=(4096,), wsat_fills=0.2, events=seen, render=False)
    finally:
        target.close()
    assert res.status == {"lat": "failed", "wsat": "complete"}
    assert "fio: boom" in res.results["lat"]["message"]
    assert ("lat", "failed") in seen.log and ("wsat", "complete") in seen.log and seen.log[0] == ("lat", "start")
    man = json.loads((tmp_path / "r" / "pts.json").read_text())
    assert man["complete"] is True and man["tests"]["lat"]["status"] == "failed"


def test_the_plan_line_counts_in_words() -> None:
    """The line each test starts with said "1 wait states", "1 elements", "1 points" and
    "5-5 rounds" when --min-rounds equals --max-rounds."""
    from ssdtwin.pts.settings import Settings
    from ssdtwin.pts.suite import Runner

    def plan(test: str, scale: int = 454, **settings: Any) -> str:
        run = Runner.__new__(Runner)  # the plan needs only the settings and the scale
        run.settings, run.scale = Settings(**settings), scale
        return run.plan(test)

    one = {"max_rounds": 5, "hir_waits_s": (5.0,), "lat_bs": (4096,), "lat_mixes": (0,), "iops_bs": (4096,), "iops_mixes": (0,)}
    assert plan("hir", **one).endswith("then 5 rounds of 60 s, then 1 wait state x 360 x (A+B, C)")
    assert plan("lat", **one) == plan("iops", **one) == "purge, WIPC, 1 element x 5 rounds of 60 s"
    assert plan("curve", 1, curve_jobs=(1,), curve_qd=(1,)) == "purge, WIPC, 4KiB 70/30 5-25 rounds of 60 s, then 1 point"
