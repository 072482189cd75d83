"""`ssdtwin validate --spec FILE --measured DIR`: a twin of your own drive beside your drive's
fio JSON, corners and predictions alike (studies/measured.py, docs/calibration.md).

The "real drive" is a twin of the calibration fixture that runs the printed jobs unchanged
through `ssdtwin fio`, with each window cut to seconds (as the served-twin test of
test_calibrate.py does). Of the same spec, the validating twin must agree with it on every
figure; a spec with another read time must not."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ssdtwin.studies import measured as M
from ssdtwin.studies import validate as V
from test_bad_input import assert_one_line_error
from test_calibrate import SCALE, SLOW, with_timing
from twin import run_cli

WINDOWS = {"10-rand-rw-70": "10s", "6-rand-write": "20s"}  # the others 3 s, each after 1 s


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The printed jobs' fio JSON from a twin of the fixture (every window 1 s + 3-20 s)."""
    tmp = tmp_path_factory.mktemp("measured")
    jobs, img, results = tmp / "jobs", tmp / "img", tmp / "results"
    printed = run_cli("calibrate", "--spec", SLOW, "--print-jobs", jobs).stdout.split()
    run_cli("create", img, "--spec", SLOW, "--scale", SCALE)
    results.mkdir()
    for path in sorted((Path(p) for p in printed if p.endswith(".fio")), key=lambda p: int(p.name.split("-")[0])):
        text = re.sub(r"(?m)^ramp_time=.*$", "ramp_time=1s", path.read_text())
        text = re.sub(r"(?m)^runtime=.*$", f"runtime={WINDOWS.get(path.stem, '3s')}", text)
        job = tmp / path.name
        job.write_text(text)
        run_cli("fio", img, job, "--output-format", "json", "--output", results / f"{path.stem}.json")
    run_cli("check", img)
    return results


def validate(spec: Path, results: Path) -> dict[str, Any]:
    out: dict[str, Any] = run_cli("validate", "--spec", spec, "--measured", results, "--scale", SCALE, "-o", "json").json()
    return out


def by_figure(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["figure"]: f for f in res["figures"]}


def test_the_twin_of_the_same_spec_reads_what_the_measured_drive_read(results: Path) -> None:
    r = run_cli("validate", "--spec", SLOW, "--measured", results, "--scale", SCALE, "-o", "json")
    assert "8 figures over 1 system: calibrated 0/0 within 5 %" in r.stderr  # was "1 systems"
    figs = by_figure(r.json())
    assert len(figs) == 8 and {f["group"] for f in figs.values()} == {"measured"}
    assert all(f["kind"] == "predicted" for f in figs.values())  # the fixture fitted none of its corners
    qd1_read = figs["rand read 4 KiB QD1: mean latency"]
    assert qd1_read["unit"] == "us" and qd1_read["source"].startswith("measured: fio-") and "7-qd1-rand-read.json" in qd1_read["source"]
    # A 4 KiB read of the fixture: its 400 us page read, the controller and the link.
    assert 400 < qd1_read["published"] < 460
    # The same spec on both sides: every figure agrees, writes too, now that the printed
    # random jobs draw with replacement as the twin does (with fio's random map the QD1
    # writes were +106 % apart; docs/calibration.md, "Uniform random, as the twin's").
    # Measured: all within 3.4 %; reads within 0.2 %.
    for name, f in figs.items():
        assert abs(f["error"]) < (0.01 if "read" in name and "/" not in name else 0.05), f
    mix = figs["rand 70/30 read/write 4 KiB QD32 x 4 jobs: IOPS"]
    assert mix["unit"] == "IOPS" and mix["twin"] > 0


def test_a_twin_with_another_read_time_is_told_apart(results: Path, tmp_path: Path) -> None:
    spec = tmp_path / "slow-reads.toml"
    spec.write_text(with_timing(SLOW.read_text(), {"t_read_ns": 800_000}))
    figs = by_figure(validate(spec, results))
    assert figs["rand read 4 KiB QD1: mean latency"]["error"] > 0.6
    assert not figs["rand read 4 KiB QD1: mean latency"]["within"]


def test_a_fitted_spec_calls_its_fitted_corners_calibrated(results: Path, tmp_path: Path) -> None:
    fitted = tmp_path / "fitted.toml"
    run_cli("calibrate", "--spec", SLOW, "--measured", results, "--scale", SCALE, "--out", fitted, "--tol", "0.01")
    res = validate(fitted, results)
    kinds = {f["figure"]: f["kind"] for f in res["figures"]}
    assert sum(k == "calibrated" for k in kinds.values()) == 4
    assert all(f["within"] for f in res["figures"] if f["kind"] == "calibrated")


def fio_json(jobname: str, options: dict[str, str], **dirs: dict[str, Any]) -> str:
    job = {"jobname": jobname, "error": 0, "job options": options}
    for d in ("read", "write"):
        job[d] = dirs.get(d, {"total_ios": 0, "iops": 0.0, "clat_ns": {"mean": 0.0}})
    if "iodepth_level" in dirs:
        job["iodepth_level"] = dirs["iodepth_level"]
    return json.dumps({"fio version": "fio-3.33", "global options": {}, "jobs": [job]})


def test_the_measured_figure_is_fio_s_completion_latency_over_both_directions(tmp_path: Path) -> None:
    (tmp_path / "9.json").write_text(
        fio_json(
            "qd1-rand-rw-65",
            {"rw": "randrw", "rwmixread": "65", "bs": "4k", "iodepth": "1"},
            read={"total_ios": 650, "iops": 65.0, "clat_ns": {"mean": 100_000.0}},
            write={"total_ios": 350, "iops": 35.0, "clat_ns": {"mean": 20_000.0}},
        )
    )
    (m,) = M.read_predictions(tmp_path)
    assert m.value == pytest.approx((650 * 100 + 350 * 20) / 1000) and m.shape == (4096, 1, 1, 65)


def test_a_directory_named_json_is_skipped_and_iodepth_read_as_fio_reads_it(tmp_path: Path) -> None:
    # `old.json/` under DIR aborted with "[Errno 21] Is a directory"; `iodepth=1k` (1024 to
    # fio) was "not a whole number"
    (tmp_path / "old.json").mkdir()
    job = {"total_ios": 1000, "iops": 2000.0, "clat_ns": {"N": 1000, "mean": 366_500.0}}
    (tmp_path / "10.json").write_text(fio_json("rand-rw-70", {"rw": "randrw", "rwmixread": "70", "iodepth": "1k"}, read=job, write=job))
    (m,) = M.read_predictions(tmp_path)
    assert m.shape == (4096, 1024, 1, 70)


def test_figures_print_as_the_tool_prints_them() -> None:
    # 23,890 IOPS printed as 2.389e+04; figures below 10,000 keep 4 significant digits
    f = V.Figure("mine", "x", "rand read 4 KiB QD32", "IOPS", 23_884.0, 23_890.1, "calibrated", "measured")
    assert ": 23,890 vs 23,884 IOPS" in V.line(f, 0.4)
    f = V.Figure("mine", "x", "rand read 4 KiB QD1: mean latency", "us", 365.04, 366.12, "predicted", "measured")
    assert ": 366.1 vs 365 us" in V.line(f, 0.0)


def test_the_latency_of_fio_before_3_0_is_in_microseconds(tmp_path: Path) -> None:
    # fio 2.x has no clat_ns: its clat is in us (and bw in KiB/s, as fio 3.0 and 3.1 still)
    job = {"total_ios": 1000, "iops": 2000.0, "clat": {"min": 300, "max": 900, "mean": 366.5}}
    text = fio_json("qd1-rand-read", {"rw": "randread", "bs": "4k", "iodepth": "1"}, read=job)
    (tmp_path / "7.json").write_text(text.replace("fio-3.33", "fio-2.2.10"))
    (m,) = M.read_predictions(tmp_path)
    assert m.value == pytest.approx(366.5) and m.source == "measured: fio-2.2.10 JSON 7.json"


def test_the_mixed_direction_of_unified_rw_reporting_is_both(tmp_path: Path) -> None:
    # unified_rw_reporting=1: one "mixed" direction, its clat the mean over every I/O
    mixed = {"total_ios": 1000, "iops": 100.0, "clat_ns": {"N": 1000, "mean": 72_000.0}}
    job = json.loads(fio_json("qd1-rand-rw-65", {"rw": "randrw", "rwmixread": "65", "bs": "4k", "iodepth": "1"}))
    for d in ("read", "write"):
        del job["jobs"][0][d]
    job["jobs"][0]["mixed"] = mixed
    (tmp_path / "9.json").write_text(json.dumps(job))
    (m,) = M.read_predictions(tmp_path)
    assert m.value == pytest.approx(72.0)


@pytest.mark.parametrize(
    "args, files, needles",
    [
        (["--spec", SLOW], {}, ["--spec needs --measured DIR"]),
        (["--measured", "."], {}, ["--measured needs --spec FILE"]),
        (["--spec", SLOW, "--measured", "{d}", "--only", "corners"], {}, ["--only: not with --spec"]),
        (["--spec", SLOW, "--measured", "{d}"], {"x.json": '{"fio version": "fio-3.33", "jobs": []}'}, ["{d}", "no fio JSON job named"]),
        (
            ["--spec", SLOW, "--measured", "{d}"],
            {"7.json": fio_json("qd1-rand-read", {"rw": "randwrite", "bs": "4k"})},
            ["7.json: jobs[0] (qd1-rand-read): job options.rw = randwrite", "rw=randread"],
        ),
        (
            ["--spec", SLOW, "--measured", "{d}"],
            {"7.json": fio_json("qd1-rand-read", {"rw": "randread", "bs": "4k"}, read={"total_ios": 5, "iops": 1.0})},
            ["7.json: jobs[0].read.clat_ns.mean: missing"],
        ),
        (
            # JSON's 1e400 is inf to Python's reader: an infinite latency
            ["--spec", SLOW, "--measured", "{d}"],
            {
                "7.json": fio_json(
                    "qd1-rand-read", {"rw": "randread"}, read={"total_ios": 5, "iops": 1.0, "clat_ns": {"N": 5, "mean": 1.5}}
                ).replace("1.5", "1e400")
            },
            ["7.json: jobs[0].read.clat_ns.mean: missing or not a finite number"],
        ),
        (
            # a traceback from the twin's fio parser (bs past what Linux moves in one call)
            ["--spec", SLOW, "--measured", "{d}"],
            {"7.json": fio_json("qd1-rand-read", {"rw": "randread", "bs": "2g"})},
            ["7.json: jobs[0] (qd1-rand-read): job options.bs = 2g: 2147483648 bytes is not a block size the twin runs"],
        ),
        (
            # disable_clat=1: fio counts the I/Os and measures no latency; it read as 0 us
            ["--spec", SLOW, "--measured", "{d}"],
            {"7.json": fio_json("qd1-rand-read", {"rw": "randread"}, read={"total_ios": 5, "iops": 1.0, "clat_ns": {"N": 0, "mean": 0.0}})},
            ["7.json: jobs[0].read.clat_ns: fio measured no completion latency for 5 I/Os", "disable_clat"],
        ),
        (
            # psync at iodepth=32: fio ran the loaded mix one I/O at a time
            ["--spec", SLOW, "--measured", "{d}"],
            {
                "10.json": fio_json(
                    "rand-rw-70",
                    {"rw": "randrw", "rwmixread": "70", "iodepth": "32", "numjobs": "4"},
                    iodepth_level={"1": 100.0, "32": 0.0},
                )
            },
            ["10.json: jobs[0].iodepth_level: 100 % of the I/O at depth 1, against job options.iodepth = 32"],
        ),
        (["--spec", "{d}/none.toml", "--measured", "{d}"], {}, ["none.toml"]),
        # a folder that does not exist is named as missing, not as "not a directory"
        (["--spec", SLOW, "--measured", "{d}/results"], {}, ["--measured {d}/results: no such folder (it does not exist"]),
        (["--spec", SLOW, "--measured", "{d}/7.json"], {"7.json": "{}"}, ["--measured {d}/7.json: not a folder"]),
        (
            # group_reporting without stonewall folded qd1-rand-read and qd1-rand-write into one
            # entry, the first's name and the last's options: "job options.rw = randwrite"
            ["--spec", SLOW, "--measured", "{d}"],
            {
                "7.json": fio_json(
                    "qd1-rand-read",
                    {"rw": "randwrite", "bs": "4k"},
                    read={"total_ios": 5, "iops": 1.0, "clat_ns": {"N": 5, "mean": 1.0}},
                    write={"total_ios": 5, "iops": 1.0, "clat_ns": {"N": 5, "mean": 1.0}},
                )
            },
            ["7.json: jobs[0] (qd1-rand-read): several jobs reported as one (read.total_ios = 5 under rw=randwrite)", "stonewall"],
        ),
        (
            # an option the engine refused: fio's error is the errno (EINVAL), not an I/O error
            ["--spec", SLOW, "--measured", "{d}"],
            {"7.json": fio_json("qd1-rand-read", {"rw": "randread", "bs": "4k"}).replace('"error": 0', '"error": 22')},
            ["7.json: jobs[0].error = 22 (EINVAL: Invalid argument): the job failed"],
        ),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: list[Any], files: dict[str, str], needles: list[str]) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    argv = [str(a).replace("{d}", str(tmp_path)) for a in args]
    assert_one_line_error(run_cli("validate", *argv, check=False), *(n.replace("{d}", str(tmp_path)) for n in needles))
