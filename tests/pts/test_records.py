"""The PTS records (ssdtwin.pts.records) against what a run produces, and the XSR, CBW and
DIRTH results of that run against physics.

The TypedDicts are written by hand beside the code that builds the records; these tests run
every PTS test (reduced: 1 s rounds, few elements) on a small twin with one in-process CLI
run (``ssdtwin pts IMG --tests all ... --report DIR -o json``) and check every record it
builds, key for key and type for type (tests/shape.py): each round's row, steady.json,
result.json, pts.json, the settings, the tables' columns and ``-o json``. A key added to a
record without its type, or a type whose key no run produces, fails here.

The same run serves two more sets of checks, which each had a run of their own with these
settings (every PTS test purges the drive first): XSR, CBW and DIRTH (PTS tests 6-8,
docs/pts.md; their element texts and settings are tested in test_xsr_di.py) against
physics: Little's law in the demand-intensity matrix; random writes leave sequential writes
slower until the drive is rewritten; the report rendered in headless Chromium. And the
report folder's contract (docs/pts.md, Report folder) and the JSON output, as a user has
them (from test_harness_cli.py, whose run was lat, tp, wsat, hir and curve).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

import inprocess
from shape import fields, mismatches
from ssdtwin.pts import plots, report
from ssdtwin.pts import records as R
from ssdtwin.pts import runner as pts_runner
from ssdtwin.pts import steady as ss
from ssdtwin.pts import tests as T
from ssdtwin.pts.folder import load
from ssdtwin.pts.settings import Settings
from ssdtwin.pts.suite import Runner
from ssdtwin.pts.target import DeviceInfo
from ssdtwin.pts.testrun import TestRun as OneTest  # not "Test*": pytest would collect it
from twin import Run, check_image, run_cli

MODEL = "kioxia-cm6-v-3.2t"
# Every test at its smallest.
SETTINGS = Settings(
    round_s=1.0,
    max_rounds=5,
    iops_bs=(4096, 131072),
    iops_mixes=(100, 65, 0),
    lat_bs=(4096,),
    lat_mixes=(100, 0),
    tp_bs=(131072,),
    wsat_fills=0.5,
    hir_reps=1,
    hir_waits_s=(5.0,),
    hir_pre_fills=0.5,
    curve_jobs=(1, 2),
    curve_qd=(1, 4),
    xsr_hours=(0.5, 0.5, 0.5),
    di_tc=(4, 1),
    di_qd=(8, 1),
    di_pc_intervals=2,
    di_rth_s=1.0,
    di_rth_prewrite_s=60.0,
)
# Keys a record type has that this run does not produce, and why.
NOT_PRODUCED: dict[Any, set[str]] = {
    # a partial run's; WSAT's with --wsat-stop-steady (its type is checked below); HIR's when not steady
    R.TestExtra: {"table_error", "steady", "notes"},
}


# SETTINGS as the CLI's flags (the fixture checks the run's settings are SETTINGS).
XSR = ["--xsr-hours", "0.5,0.5,0.5"]  # 1800 s / 454 = 4 segments of 1 s per access group
DI = ["--di-tc", "4,1", "--di-qd", "8,1", "--di-pc-intervals", "2", "--di-rth", "1s", "--di-rth-prewrite", "60s"]
FLAGS = [
    *("--round", "1s", "--max-rounds", "5", "--iops-bs", "4k,128k", "--iops-mixes", "100,65,0", "--lat-bs", "4k"),
    *("--lat-mixes", "100,0", "--tp-bs", "128k", "--wsat-fills", "0.5", "--hir-reps", "1", "--hir-waits", "5s"),
    *("--hir-pre-fills", "0.5", "--curve-jobs", "1,2", "--curve-qd", "1,4", *XSR, *DI),
]


@dataclasses.dataclass
class Reduced:
    runner: Runner  # the run's Runner, as the CLI made it
    image: Path
    report: Path
    out: dict[str, Any]  # the CLI's -o json
    figures: list[Figure]  # the report's figures as its PNGs were drawn


def keeping_figures(mp: pytest.MonkeyPatch) -> list[Figure]:
    """The matplotlib figures the plots module draws from now on (savefig draws each: their
    boxes are as in the PNGs)."""
    drawn: list[Figure] = []
    real = plots._png

    def keep(fig: Figure) -> bytes:
        drawn.append(fig)
        return real(fig)

    mp.setattr(plots, "_png", keep)
    return drawn


@pytest.fixture(scope="module")
def reduced(tmp_path_factory: pytest.TempPathFactory) -> Reduced:
    base = tmp_path_factory.mktemp("pts-records")
    img = base / "cm6v"
    run_cli("create", img, "--model", MODEL, "--scale", "1/454")
    SETTINGS.validate()
    made: list[Runner] = []

    class Kept(Runner):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    rep = base / "report"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pts_runner, "Runner", Kept)
        drawn = keeping_figures(mp)
        # In this process even under SSDTWIN_TEST_CLI=process: the records checked are the
        # Runner's, the figures checked the ones its report drew.
        argv = ["pts", str(img), "--tests", "all", *FLAGS, "--report", str(rep), "-o", "json"]
        r = Run(argv, *inprocess.run(argv))
    assert r.returncode == 0, r.stderr
    out = r.json()
    check_image(img)
    (runner,) = made
    assert runner.settings == SETTINGS and runner.folder == rep
    return Reduced(runner, img, rep, out, drawn)


@dataclasses.dataclass
class Compared:
    report: Path  # `pts compare REP REP --report DIR`'s DIR (REP: the reduced run's report)
    figures: list[Figure]  # the comparison's figures as its PNGs were drawn


@pytest.fixture(scope="module")
def compared(reduced: Reduced, tmp_path_factory: pytest.TempPathFactory) -> Compared:
    """The reduced run's report compared with itself, once, by the CLI (in this process, as
    the run: the figures are the ones it drew)."""
    diff = tmp_path_factory.mktemp("pts-records-compare") / "diff"
    with pytest.MonkeyPatch.context() as mp:
        drawn = keeping_figures(mp)
        argv = ["pts", "compare", str(reduced.report), str(reduced.report), "--report", str(diff)]
        r = Run(argv, *inprocess.run(argv))
    assert r.returncode == 0, r.stderr
    return Compared(diff, drawn)


@pytest.fixture
def run(reduced: Reduced) -> Runner:
    return reduced.runner


@pytest.fixture
def suite(reduced: Reduced) -> tuple[Path, Path, dict]:
    """The run as a user has it: (image, report folder, JSON output)."""
    return reduced.image, reduced.report, reduced.out


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


class Seen:
    """Every value checked against its type, and the keys seen per TypedDict."""

    def __init__(self) -> None:
        self.keys: dict[Any, set[str]] = {}
        self.problems: list[str] = []

    def check(self, value: Any, tp: Any, path: str, from_json: bool = False) -> None:
        self.problems += mismatches(value, tp, path, from_json)
        self._collect(value, tp)

    def _collect(self, value: Any, tp: Any) -> None:
        if not isinstance(value, dict) or not hasattr(tp, "__required_keys__"):
            return
        self.keys.setdefault(tp, set()).update(value)
        hints, _ = fields(tp)
        for k, v in value.items():
            sub = hints.get(k)
            if hasattr(sub, "__required_keys__"):
                self._collect(v, sub)
            elif getattr(sub, "__origin__", None) is list and hasattr(sub.__args__[0], "__required_keys__"):
                for item in v:
                    self._collect(item, sub.__args__[0])


def check_test(seen: Seen, tr: OneTest) -> None:
    for i, row in enumerate(tr.rows):
        seen.check(row, R.RoundRow, f"{tr.test} rows[{i}]")
    if tr.steady_doc is not None:
        seen.check(tr.steady_doc, R.SteadyState, f"{tr.test} steady_doc")
        on_disk = json.loads((tr.dir / "steady.json").read_text())
        seen.check(on_disk, R.SteadyState, f"{tr.test}/steady.json", from_json=True)
    seen.check(tr.result_doc(), R.TestResult, f"{tr.test} result_doc")
    seen.check(json.loads((tr.dir / "result.json").read_text()), R.TestResult, f"{tr.test}/result.json", from_json=True)


def test_every_record_has_its_type(run: Runner) -> None:
    seen = Seen()
    assert list(run.tests) == list(T.TEST_IDS)
    for tr in run.tests.values():
        assert tr.status in ("steady", "not steady", "complete"), (tr.test, tr.status, tr.message)
        check_test(seen, tr)
    seen.check(run.manifest, R.Manifest, "manifest")
    seen.check(json.loads((run.folder / "pts.json").read_text()), R.Manifest, "pts.json", from_json=True)
    seen.check(load(run.folder).to_json(), R.RunOutput, "-o json", from_json=True)
    assert seen.problems == []
    # Every key of a record type is one this run produced (no stale or misspelt field).
    for tp in (R.RoundRow, R.SteadyState, R.SteadyVariable, R.PassVerdict, R.TestResult, R.TestSettings, R.TestExtra, R.Manifest):
        missing = set(fields(tp)[0]) - seen.keys.get(tp, set()) - NOT_PRODUCED.get(tp, set())
        assert not missing, (tp.__name__, missing)
    assert seen.keys[R.DeviceExtra] == {"iu_bytes", "namespace", "power_state", "power_state_desc", "image", "seed"}  # a twin's


def test_the_settings_and_the_device_have_every_field(run: Runner) -> None:
    assert set(fields(R.SettingsDoc)[0]) == {f.name for f in dataclasses.fields(Settings)}
    assert mismatches(SETTINGS.to_json(), R.SettingsDoc) == []
    assert set(fields(R.DeviceDoc)[0]) == {f.name for f in dataclasses.fields(DeviceInfo)}
    assert mismatches(run.target.info.to_json(), R.DeviceDoc) == []


@pytest.mark.parametrize(
    "test,row", [("tp", R.TpTableRow), ("lat", R.LatTableRow), ("xsr", R.XsrGroup), ("cbw", R.DiTableRow), ("dirth", R.DiTableRow)]
)
def test_the_tables_columns_are_their_rows_keys(run: Runner, test: str, row: Any) -> None:
    with (run.folder / test / "table.csv").open() as f:
        header = next(csv.reader(f))
    assert header == list(fields(row)[0])


def test_a_window_check_and_the_timing_columns_have_their_types() -> None:
    check = ss.check_window([3, 4, 5, 6, 7], [100.0, 101.0, 99.0, 100.5, 100.0])
    assert check.steady and mismatches(check.to_dict(), R.WindowCheckDoc) == []
    assert set(check.to_dict()) == set(fields(R.WindowCheckDoc)[0])


def test_a_real_file_targets_device_block(tmp_path: Path) -> None:
    if shutil.which("fio") is None:
        pytest.skip("`fio` is not installed (CI installs it)")
    from ssdtwin.pts.realfio import RealFioTarget

    f = tmp_path / "disk.img"
    f.write_bytes(bytes(1 << 20))
    target = RealFioTarget(str(f), allow_destroy=True)
    try:
        doc = target.info.to_json()
    finally:
        target.close()
    assert mismatches(doc, R.DeviceDoc) == []
    assert set(doc["extra"]) == {"path", "fio", "fio_path", "purge_requested"}


def test_xsr_groups_and_the_cross_stimulus_drop(reduced: Reduced) -> None:
    rep, out = reduced.report, reduced.out
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
    # The recovery is told to the segment (it said "after 3.02 s", the segment's end, as if timed).
    said = r"AG3 (back to 90 % of AG1's final throughput in its segment [2-4] of 4, within [\d.]+ s|did not return .* in its 4 segments)"
    assert re.search(said, res["message"]) and "after" not in res["message"], res["message"]
    assert re.search(f"Recovery: {said}", (rep / "index.html").read_text().replace("&#39;", "'"))


@pytest.mark.parametrize("test", ["cbw", "dirth"])
def test_demand_intensity_obeys_littles_law(reduced: Reduced, test: str) -> None:
    rep, out = reduced.report, reduced.out
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


def test_the_pages_have_their_figures(reduced: Reduced, compared: Compared) -> None:
    rep = reduced.report
    html = (rep / "index.html").read_text()
    for name in ("xsr-tp.png", "xsr-iops.png", "demand-variation.png", "demand-intensity.png", "di-writes.png", "histograms.png"):
        assert name in html, name  # each figure links its PNG, CSV and JSON
    for test in ("xsr", "cbw", "dirth"):
        assert (rep / test / "plots").is_dir() and any((rep / test / "plots").glob("*.png")), test
    assert "demand-variation" in (compared.report / "index.html").read_text()


def test_no_legend_covers_data(reduced: Reduced, compared: Compared) -> None:
    """Every figure of a real report (every PTS test) and of its comparison, as drawn: no
    legend overlaps a panel that shows data (the Latency bars' legend covered the 8 KiB max
    bars, CBW's and the histograms' legends sat on lines); a legend in an empty spare panel
    is fine."""
    drawn = [*reduced.figures, *compared.figures]
    assert len(reduced.figures) > 30 and compared.figures  # the report's figures (every PTS test's) and the comparison's
    legends = 0
    for fig in drawn:
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        panels = [ax for ax in fig.axes if ax.axison and (ax.lines or ax.patches or ax.collections)]
        for leg in [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.axison)]:
            if leg is None:
                continue
            legends += 1
            box = leg.get_window_extent(renderer)
            for ax in panels:
                assert not box.overlaps(ax.get_window_extent(renderer)), f"{fig.get_suptitle()!r}: the legend covers {ax.get_title()!r}"
            assert box.x1 <= fig.bbox.x1 + 1 and box.y0 >= -1 and box.y1 <= fig.bbox.y1 + 1, f"{fig.get_suptitle()!r}: legend cut off"
    assert len(drawn) > 30 and legends > 20


@pytest.mark.tools
@pytest.mark.skipif(report.find_chromium() is None, reason="chromium not installed (Debian: apt install chromium)")
def test_the_pages_load_in_headless_chromium(reduced: Reduced, tmp_path: Path) -> None:
    import subprocess

    rep = reduced.report
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


def test_a_saved_cbw_job_runs_by_hand(reduced: Reduced, tmp_path: Path) -> None:
    """The report's job file is what ran: ssdtwin fio takes it as written (bssplit, zoned)."""
    rep = reduced.report
    img = tmp_path / "img"
    run_cli("create", img, "--model", MODEL, "--scale", "1/454")
    r = run_cli("fio", img, rep / "cbw" / "jobs" / "cbw-40_60-tc4-qd8.fio", "--output-format", "json")
    j = r.json()["jobs"][0]
    reads, writes = j["read"]["total_ios"], j["write"]["total_ios"]
    assert reads > 0 and writes > 0 and reads / (reads + writes) == pytest.approx(0.40, abs=0.01)
    assert j["job options"]["bssplit"] == T.CBW_BSSPLIT
    check_image(img)


# The report folder's contract (docs/pts.md, Report folder), from test_harness_cli.py.
def test_json_output_is_the_result(suite: tuple[Path, Path, dict]) -> None:
    img, rep, out = suite
    assert Path(out["folder"]) == rep
    assert list(out["tests"]) == list(T.TEST_IDS)
    for t, v in out["tests"].items():
        assert v["status"] in ("steady", "not steady", "complete"), (t, v)
        assert v["table"], t


def test_manifest(suite: tuple[Path, Path, dict]) -> None:
    img, rep, _ = suite
    man = json.loads((rep / "pts.json").read_text())
    assert man["format"] == "ssdtwin-pts" and man["version"] == 1
    assert man["complete"] is True and man["interrupted"] is False and man["finished"]
    dev = man["device"]
    assert dev["kind"] == "twin" and dev["simulated"] and dev["scale"] == "1/454"
    assert dev["firmware"].startswith("ssdtwin ") and f"preset {MODEL}" in dev["firmware"]
    assert dev["capacity_bytes"] > 7e9 and dev["extra"]["power_state"] == 0
    assert man["settings"]["round_s"] == 1.0 and man["settings"]["tc_qd"]["lat"] == {"tc": 1, "qd": 1, "oio": 1}
    assert man["platform"]["fio"] == "ssdtwin fio (simulated time)"
    for t, m in man["tests"].items():
        assert m["dir"] == t and m["wall_s"] > 0 and m["sim_s"] > 0, t


def test_every_test_folder_follows_the_contract(suite: tuple[Path, Path, dict]) -> None:
    _, rep, _ = suite
    for t in ("lat", "tp", "wsat", "hir", "curve"):
        d = rep / t
        table = rows(d / "rounds.csv")
        assert list(table[0].keys()) == pts_runner.COLUMNS, t
        for r in table:  # every row has its fio JSON and its job file
            name = f"r{int(r['round']):02d}-{r['element']}" if r["round"] else f"s{int(r['segment']):04d}-{r['element']}"
            assert (d / "fio" / f"{name}.json").is_file(), (t, name)
            assert (d / "jobs" / f"{r['element']}.fio").is_file(), (t, r["element"])
        res = json.loads((d / "result.json").read_text())
        assert res["test"] == t and res["rounds_run"] >= 1 and res["status"] in ("steady", "not steady", "complete")
        assert (d / "table.csv").is_file()
        assert (d / "steady.json").is_file() == (t != "wsat"), t


def test_round_tests_track_their_variables(suite: tuple[Path, Path, dict]) -> None:
    _, rep, _ = suite
    lat = json.loads((rep / "lat" / "steady.json").read_text())
    assert lat["rule"].startswith("SNIA PTS") and lat["min_rounds"] == 5 and lat["max_rounds"] == 5
    (var,) = lat["variables"]
    assert var["element"] == "rnd-4k-0_100" and var["column"] == "lat_mean_us"
    assert var["rounds"] == list(range(1, len(var["values"]) + 1))
    for k in ("avg", "min", "max", "data_excursion", "data_limit", "slope", "intercept", "slope_excursion", "slope_limit"):
        assert isinstance(var[k], float), k
    assert var["steady"] == (var["data_excursion"] <= var["data_limit"] and var["slope_excursion"] <= var["slope_limit"])
    table = rows(rep / "lat" / "table.csv")
    assert [(r["bs"], r["mix"]) for r in table] == [("4KiB", "100/0"), ("4KiB", "0/100")]
    assert all(float(r["max_us"]) >= float(r["p99_99_us"]) * 0.99 >= 0 for r in table)
    hist = rows(rep / "lat" / "hist-rnd-4k-100_0.csv")
    assert {h["ddir"] for h in hist} == {"read", "all"} and all(float(h["hi_us"]) > float(h["lo_us"]) for h in hist)
    ios = sum(int(h["count"]) for h in hist if h["ddir"] == "read")
    win = [r for r in rows(rep / "lat" / "rounds.csv") if r["element"] == "rnd-4k-100_0"][-5:]
    assert ios == pytest.approx(sum(float(r["read_iops"]) * float(r["runtime_s"]) for r in win), rel=0.01)


def test_wipc_is_a_job_of_its_own_and_counts_as_written(suite: tuple[Path, Path, dict]) -> None:
    _, rep, _ = suite
    wipc = (rep / "tp" / "jobs" / "wipc.fio").read_text()
    assert "rw=write" in wipc and "loops=2" in wipc and "bs=128k" in wipc and "size=100%" in wipc
    assert (rep / "tp" / "fio" / "wipc.json").is_file()
    first = rows(rep / "tp" / "rounds.csv")[0]
    assert float(first["drive_fills"]) > 1.99  # 2x capacity (in whole 128 KiB blocks) of WIPC before the first round


def test_wsat_stops_at_the_fills_asked_and_hir_has_its_phases(suite: tuple[Path, Path, dict]) -> None:
    _, rep, _ = suite
    ws = rows(rep / "wsat" / "rounds.csv")
    assert float(ws[-1]["drive_fills"]) >= 0.5 > float(ws[-2]["drive_fills"])
    assert [int(r["segment"]) for r in ws] == list(range(1, len(ws) + 1))
    assert json.loads((rep / "wsat" / "result.json").read_text())["settings"]["segment_s"] == 1.0  # 1 s / 454, at least 1 s
    hir = rows(rep / "hir" / "rounds.csv")
    pre = json.loads((rep / "hir" / "steady.json").read_text())
    first = pre["first_round"]  # judged only once 0.5 drive fills were written (--hir-pre-fills)
    assert float(hir[first - 2]["drive_fills"]) < 0.5 <= float(hir[first - 1]["drive_fills"])
    assert pre["variables"][0]["rounds"][0] == first
    assert [r["phase"] for r in hir if r["phase"] != "pre"] == ["A", "C"]
    a, c = [r for r in hir if r["phase"] in "AC" and r["phase"]]
    assert float(c["t_start_s"]) - float(a["t_end_s"]) == pytest.approx(5.0, abs=0.01)  # the idle wait
    # the bursts are counted as bursts, the preconditioning rounds as rounds, in result.json and pts.json alike
    result = json.loads((rep / "hir" / "result.json").read_text())
    entry = json.loads((rep / "pts.json").read_text())["tests"]["hir"]
    assert result["extra"]["bursts"] == entry["bursts"] == 2
    assert result["rounds_run"] == entry["rounds_run"] == max(int(r["round"]) for r in hir if r["round"])
    curve = rows(rep / "curve" / "table.csv")
    assert [(int(r["numjobs"]), int(r["iodepth"])) for r in curve] == [(1, 1), (1, 4), (2, 1), (2, 4)]


def test_saved_job_files_run_as_written(suite: tuple[Path, Path, dict]) -> None:
    img, rep, _ = suite
    for job in (rep / "lat" / "jobs" / "rnd-4k-0_100.fio", rep / "curve" / "jobs" / "rnd-4k-70_30-j2-qd4.fio"):
        r = run_cli("fio", img, job, "--scratch", "--output-format", "json")
        assert r.json()["jobs"][0]["jobname"] == job.stem
