"""XSR, CBW and DIRTH (PTS tests 6-8, docs/pts.md): the element texts, the point selection,
and one reduced CLI run of each on a small twin, checked against physics (Little's law in
the demand-intensity matrix; random writes leave sequential writes slower until the drive
is rewritten) and rendered in headless Chromium."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from ssdtwin.pts import report, settings, tables
from ssdtwin.pts import tests as T
from ssdtwin.pts.target import PtsError
from twin import check_image, run_cli

MODEL = "kioxia-cm6-v-3.2t"
XSR = ["--xsr-hours", "0.5,0.5,0.5"]  # 1800 s / 454 = 4 segments of 1 s per access group
DI = ["--di-tc", "4,1", "--di-qd", "8,1", "--di-pc-intervals", "2", "--di-rth", "1s", "--di-rth-prewrite", "60s"]


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    base = tmp_path_factory.mktemp("pts-xsr-di")
    img = base / "cm6v"
    run_cli("create", img, "--model", MODEL, "--scale", "1/454")
    rep = base / "report"
    out = run_cli("pts", img, "--tests", "xsr,cbw,dirth", "--round", "1s", "--max-rounds", "5", *XSR, *DI, "--report", rep, "-o", "json")
    check_image(img)
    return rep, out.json()


def test_cbw_element_carries_the_composite_pattern() -> None:
    el = T.cbw_workload().element(40, 32, 16, 60, "")
    text = el.job_text()
    assert el.name == "cbw-40_60-tc32-qd16" and el.bs_bytes == 0
    assert f"bssplit={T.CBW_BSSPLIT}" in text and "random_distribution=zoned:50/5:30/15:20/80" in text
    assert "\nbs=" not in text and "rwmixread=40" in text and "numjobs=32" in text and "iodepth=16" in text
    assert T.dirth_workload(8192, 65).element(65, 1, 1, 60, "").name == "rnd-8k-65_35-tc1-qd1"


def test_the_histogram_points_follow_the_spec() -> None:
    table = [
        {"numjobs": 32, "iodepth": 32, "oio": 1024, "iops": 400e3, "lat_mean_us": 2560.0},
        {"numjobs": 32, "iodepth": 8, "oio": 256, "iops": 380e3, "lat_mean_us": 670.0},
        {"numjobs": 8, "iodepth": 32, "oio": 256, "iops": 390e3, "lat_mean_us": 6500.0},  # above 5 ms: never max
        {"numjobs": 4, "iodepth": 4, "oio": 16, "iops": 200e3, "lat_mean_us": 80.0},
        {"numjobs": 2, "iodepth": 1, "oio": 2, "iops": 40e3, "lat_mean_us": 50.0},
        {"numjobs": 1, "iodepth": 1, "oio": 1, "iops": 20e3, "lat_mean_us": 50.0},
    ]
    table[0]["lat_mean_us"] = 5100.0  # the highest IOPS, but over the limit
    points = tables.di_points(table, 5000.0)
    assert points["max"] == (32, 8)  # the highest IOPS below 5 ms
    assert points["mid"] == (4, 4)  # nearest to (380K + 20K) / 2
    assert points["min"] == (1, 1)


def test_xsr_recovery_is_measured_against_ag1s_end() -> None:
    def seg(i: int, ag: str, bw: float) -> dict:
        return {"phase": ag, "t_start_s": float(i), "t_end_s": float(i + 1), "write_bw_bytes_s": bw}

    rows_ = [seg(i, "AG1", 4e9) for i in range(6)] + [seg(6 + i, "AG2", 2e9) for i in range(3)]
    rows_ += [seg(9, "AG3", 1.5e9), seg(10, "AG3", 3.5e9), seg(11, "AG3", 3.7e9)]
    assert tables.xsr_recovery_s(rows_) == 3.0  # AG3's third segment reaches 3.6 GB/s, 90 % of AG1's 4 GB/s
    assert tables.xsr_recovery_s(rows_[:-1]) is None


def test_xsr_access_groups_run_their_duration_whatever_the_segment() -> None:
    """Each access group is the fewest equal segments of at most --xsr-segment that make up
    its duration: a segment longer than the group no longer runs whole (a 10 s segment made
    a 1 s group ten times too long), and 2.5 segments' worth is not rounded down to 2."""
    st = settings.Settings(xsr_hours=(0.01, 0.5, 8.0), xsr_segment_s=10.0)
    plan = st.xsr_group_segments(256)
    assert st.xsr_group_seconds(256) == [1.0, 7.031, 112.5]  # 36 s / 256 is below 1 s: 1 s
    assert plan == [(1, 1.0), (1, 7.031), (12, 9.375)]
    for (n, seg_s), group_s in zip(plan, st.xsr_group_seconds(256)):
        assert seg_s <= 10.0 and n * seg_s == pytest.approx(group_s, abs=0.002)
    assert settings.Settings(xsr_hours=(1.0, 1.0, 1.0), xsr_segment_s=1440.0).xsr_group_segments(1) == [(3, 1200.0)] * 3
    # The full drive's defaults divide evenly: 8 h in 60 s segments.
    assert settings.Settings().xsr_group_segments(1) == [(480, 60.0), (360, 60.0), (480, 60.0)]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"xsr_hours": (8.0, 6.0)}, "--xsr-hours"),
        ({"di_tc": (0, 4)}, "--di-tc"),
        ({"di_pc_intervals": 0}, "--di-pc-intervals"),
        ({"di_rth_s": 0.5}, "--di-rth"),
        ({"dirth_bs": 1000}, "--dirth-bs"),
        ({"dirth_mix": 101}, "--dirth-mix"),
    ],
)
def test_bad_settings_are_one_line_errors(kw: dict, message: str) -> None:
    with pytest.raises(PtsError, match=message) as e:
        settings.Settings(**kw).validate()
    assert "\n" not in str(e.value)


def test_bad_cli_options_leave_nothing_behind(tmp_path: Path) -> None:
    r = run_cli("pts", tmp_path, "--tests", "xsr", "--xsr-hours", "8,x,8", "--report", tmp_path / "rep", check=False)
    assert r.returncode != 0 and len(r.stderr_lines) == 1 and "--xsr-hours" in r.stderr
    assert not (tmp_path / "rep").exists()


def test_xsr_groups_and_the_cross_stimulus_drop(run: tuple[Path, dict]) -> None:
    rep, out = run
    assert out["tests"]["xsr"]["status"] == "complete"
    seg = rows(rep / "xsr" / "rounds.csv")
    assert [r["phase"] for r in seg] == ["AG1"] * 4 + ["AG2"] * 4 + ["AG3"] * 4
    assert {r["element"] for r in seg} == {"seq-1m-0_100", "rnd-8k-0_100"}
    for r in seg:
        assert (rep / "xsr" / "fio" / f"s{int(r['segment']):04d}-{r['element']}.json").is_file()
    table = {r["access_group"]: r for r in rows(rep / "xsr" / "table.csv")}
    assert table["AG2"]["stimulus"] == "RND 8KiB W" and table["AG1"]["stimulus"] == "SEQ 1024KiB W"
    # Random writes leave every block partly valid: the sequential writes after them pay GC
    # until the drive is rewritten, so AG3 starts well below AG1's end.
    first_ag3 = float(next(r for r in seg if r["phase"] == "AG3")["write_bw_bytes_s"]) / 1e6
    assert first_ag3 < 0.8 * float(table["AG1"]["tp_end_mb_s"])
    res = json.loads((rep / "xsr" / "result.json").read_text())
    assert res["settings"]["segment_s"] == 1.0 and res["settings"]["hours_full_drive"] == [0.5, 0.5, 0.5]


@pytest.mark.parametrize("test", ["cbw", "dirth"])
def test_demand_intensity_obeys_littles_law(run: tuple[Path, dict], test: str) -> None:
    rep, out = run
    assert out["tests"][test]["status"] in ("steady", "not steady")
    table = rows(rep / test / "table.csv")
    assert [(int(r["numjobs"]), int(r["iodepth"])) for r in table] == [(4, 8), (4, 1), (1, 8), (1, 1)]
    for r in table:  # a closed loop: outstanding I/Os = IOPS x mean response time
        assert float(r["iops"]) * float(r["lat_mean_us"]) / 1e6 == pytest.approx(int(r["oio"]), rel=0.05), r
    assert {r["point"] for r in table} >= {"max", "min"} and next(r for r in table if r["point"] == "min")["oio"] == "1"
    res = json.loads((rep / test / "result.json").read_text())
    assert [p["point"] for p in res["extra"]["rth"]] == list(res["extra"]["points"])
    for p in res["extra"]["rth"]:
        hist = rows(rep / test / f"hist-{p['element']}.csv")
        assert sum(int(h["count"]) for h in hist if h["ddir"] == "all") == pytest.approx(p["iops"] * 1.0, rel=0.02)
    steady = json.loads((rep / test / "steady.json").read_text())
    assert [p["pass"] for p in steady["passes"]] == [f"{test}-pc", f"{test}-di"]
    phases = {r["phase"] for r in rows(rep / test / "rounds.csv")}
    assert {"pc", "prewrite", "di"} <= phases and any(p.startswith("rth-") for p in phases)


def test_the_pages_have_their_figures(run: tuple[Path, dict], tmp_path: Path) -> None:
    rep, _ = run
    html = (rep / "index.html").read_text()
    for name in ("xsr-tp.png", "xsr-iops.png", "demand-variation.png", "demand-intensity.png", "di-writes.png", "histograms.png"):
        assert name in html, name  # each figure links its PNG, CSV and JSON
    for test in ("xsr", "cbw", "dirth"):
        assert (rep / test / "plots").is_dir() and any((rep / test / "plots").glob("*.png")), test
    diff = tmp_path / "diff"
    run_cli("pts", "compare", rep, rep, "--report", diff)
    assert "demand-variation" in (diff / "index.html").read_text()


@pytest.mark.tools
@pytest.mark.skipif(report.find_chromium() is None, reason="chromium not installed (Debian: apt install chromium)")
def test_the_pages_load_in_headless_chromium(run: tuple[Path, dict], tmp_path: Path) -> None:
    import subprocess

    rep, _ = run
    chrome = report.find_chromium()
    assert chrome is not None
    cmd = [chrome, "--headless=new", "--disable-gpu", "--no-sandbox", f"--user-data-dir={tmp_path / 'profile'}"]
    url = (rep / "index.html").resolve().as_uri()
    args = [*cmd, "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000", "--dump-dom", url]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0
    ok = r.stdout.split('data-figures-ok="', 1)[1].split('"', 1)[0]
    good, total = (int(x) for x in ok.split("/"))
    assert good == total and total >= 12
    assert [line for line in r.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line] == []


def test_a_saved_cbw_job_runs_by_hand(run: tuple[Path, dict], tmp_path: Path) -> None:
    """The report's job file is what ran: ssdtwin fio takes it as written (bssplit, zoned)."""
    rep, _ = run
    img = tmp_path / "img"
    run_cli("create", img, "--model", MODEL, "--scale", "1/454")
    r = run_cli("fio", img, rep / "cbw" / "jobs" / "cbw-40_60-tc4-qd8.fio", "--output-format", "json")
    j = r.json()["jobs"][0]
    reads, writes = j["read"]["total_ios"], j["write"]["total_ios"]
    assert reads > 0 and writes > 0 and reads / (reads + writes) == pytest.approx(0.40, abs=0.01)
    assert j["job options"]["bssplit"] == T.CBW_BSSPLIT
    check_image(img)
